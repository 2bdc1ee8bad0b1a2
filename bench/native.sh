#!/usr/bin/env bash
# native.sh: the native planner's speed and quality (bench/bench_native.c) on every shipped
# profile x shipped cluster: CPU milliseconds of `plumb plan` (native, 1f1b-flush) and of
# `plumb plan --schedule auto` (best of 3), and the simulated throughput of the default
# plan against data parallelism, PipeDream's partition and PipeDream's straight pipeline,
# all scored the same way. Fails when a plan takes 100 ms or more (auto 150 ms: it runs the
# default plan too; 50 ms for any schedule on 16 GPUs, the dashboard's budget) or the plan loses to a baseline that fits. Then times
# `plumb sweep` over 1..32 GPUs.
set -u
B=${PLUMB_BENCH_DIR:-build/bench}/bench_native
P=${PLUMB:-./plumb}
[ -x "$B" ] || { echo "native.sh: $B not built (make bench)"; exit 1; }
rc=0
"$B" profiles/pipedream profiles/clusters 3 || rc=1
if [ -x "$P" ]; then
    s=$(date +%s.%N)
    "$P" sweep -p profiles/pipedream/resnet50.json -c profiles/clusters/h200-4x8.json \
        --gpus 1..32 --price 3.5 >/dev/null || rc=1
    e=$(date +%s.%N)
    awk -v s="$s" -v e="$e" 'BEGIN { printf "plumb sweep resnet50 on h200-4x8, 1..32 GPUs: %.2f s wall\n", e - s }'
fi
exit $rc
