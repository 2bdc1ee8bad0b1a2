#!/usr/bin/env bash
# bench.sh: runs every benchmark script bench/*.sh with PLUMB set to the built binary and
# PLUMB_BENCH_DIR to the folder of the built bench/bench_*.c programs.
set -u
build=${PLUMB_BUILD:-build}
export PLUMB="$PWD/$build/plumb"
export PLUMB_BENCH_DIR="$PWD/$build/bench"
rc=0
for s in bench/*.sh; do
    [ -e "$s" ] || continue
    echo "== $s"
    bash "$s" || { echo "FAILED: $s"; rc=1; }
done
exit $rc
