#!/usr/bin/env bash
# plan_scale.sh: planning time and peak memory against model size (10 to 1000 layers, chains
# and DAGs) and cluster size (1 to 1024 GPUs), both planners (bench/bench_plan_scale.c);
# prints the markdown table recorded in docs/planner.md. PLAN_SCALE_LIMIT_S caps each case.
set -u
dir=${PLUMB_BENCH_DIR:-build/bench}
exec "$dir/bench_plan_scale" "${PLAN_SCALE_LAYERS:-1000}" "${PLAN_SCALE_GPUS:-1024}" \
    "${PLAN_SCALE_LIMIT_S:-60}"
