#!/usr/bin/env bash
# balance3d.sh: what --balance adds to planning a 3D layout (bench/bench_balance3d.c): the
# CPU time of layout3d_balance against building and simulating the layout, per layout, as
# the markdown table recorded in docs/llm.md ("Balanced stages").
set -u
dir=${PLUMB_BENCH_DIR:-build/bench}
exec "$dir/bench_balance3d" "${BALANCE_BENCH_REPEAT:-3}"
