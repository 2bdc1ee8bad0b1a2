#!/usr/bin/env bash
# search3d.sh: CPU time of `plumb plan --model` searching every dimension (bench/
# bench_search3d.c): GPT-3 175B on 1024 A100s (target < 10 s) and GPT 1T on 3072 (< 60 s),
# each against one simulation of its winner measured in the same run. Prints "met" or
# "missed" per target; exits 1 when a run fails, and on a missed target with
# SEARCH3D_STRICT=1.
set -u
dir=${PLUMB_BENCH_DIR:-build/bench}
B=$dir/bench_search3d
[ -x "$B" ] || { echo "search3d.sh: $B not built (make bench)"; exit 1; }
A100=profiles/clusters/dgx-a100-80g.json
rc=0
for run in "examples/llm/gpt3-175b.json 1024 1536 10" "examples/llm/megatron/gpt-1t.json 3072 3072 60"; do
    set -- $run
    "$B" "$1" $A100 "$2" "$3" "$4"
    s=$?
    [ $s = 1 ] && rc=1
    [ $s = 3 ] && [ "${SEARCH3D_STRICT:-0}" = 1 ] && rc=1
done
exit $rc
