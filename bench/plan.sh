#!/usr/bin/env bash
# plan.sh: times PipeDream-compatible planning of every shipped profile on every shipped
# cluster (bench/bench_plan.c) and prints the markdown table recorded in docs/planner.md.
set -u
dir=${PLUMB_BENCH_DIR:-build/bench}
exec "$dir/bench_plan" profiles/pipedream profiles/clusters "${PLAN_BENCH_REPEAT:-3}"
