#!/usr/bin/env bash
# regenerate.sh: rebuilds profiles/pipedream/*.json from PipeDream's graph.txt files with
# `plumb import pipedream`. Run from the repository root:
#   profiles/pipedream/regenerate.sh [PIPEDREAM_DIR] [PLUMB]
# PIPEDREAM_DIR holds <model>/graph.txt and test_graphs/*.txt as laid out in SOURCE.md
# (default ../shared/profiles/pipedream); PLUMB is the binary (default ./plumb).
set -euo pipefail
src=${1:-../shared/profiles/pipedream}
plumb=${2:-./plumb}
out=profiles/pipedream
mkdir -p "$out/test_graphs"
for g in "$src"/*/graph.txt "$src"/*/graph_*.txt; do
    [ -e "$g" ] || continue
    model=$(basename "$(dirname "$g")")
    stem=$(basename "$g" .txt)
    name=$model
    [ "$stem" = graph ] || name=${model}_${stem}
    "$plumb" import pipedream "$g" -o "$out/$name.json"
done
for g in "$src"/test_graphs/*.txt; do
    [ -e "$g" ] || continue
    stem=$(basename "$g" .txt)
    opts=()
    # test.txt and test2.txt are tiny DAGs without an Input node: no minibatch to infer
    grep -q -- ' -- Input' "$g" || opts=(--minibatch 1)
    "$plumb" import pipedream "$g" -o "$out/test_graphs/$stem.json" "${opts[@]}"
done
