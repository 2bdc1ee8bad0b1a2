#!/usr/bin/env bash
# trace.sh: what the Chrome trace writer costs on a large trace (gnmt planned on 4096
# H100s: 1.3 M events, 0.46 GiB), written and only counted (bench_trace.c); fails when the
# writer's count differs from the text it writes.
set -eu
: "${PLUMB:=build/plumb}" "${PLUMB_BENCH_DIR:=build/bench}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PLUMB" plan -p profiles/pipedream/gnmt.json -c profiles/clusters/dgx-h100.json \
    -o "$tmp/gnmt4096.json" >/dev/null
"$PLUMB_BENCH_DIR/bench_trace" "$tmp/gnmt4096.json" "${TRACE_REPEATS:-3}"
