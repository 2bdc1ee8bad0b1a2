#!/usr/bin/env bash
# sim.sh: the simulator's speed (bench/bench_sim.c): 1f1b-flush with 64 stages x 1024
# microbatches x 4 iterations, then every schedule with 8 stages x 64 microbatches; each
# configuration in its own process so that peak_rss is its own. Fails when the largest
# configuration needs 1 GiB or more.
set -u
B=${PLUMB_BENCH_DIR:-build/bench}/bench_sim
[ -x "$B" ] || { echo "sim.sh: $B not built (make bench)"; exit 1; }
rc=0
line=$("$B" 1f1b-flush 64 1024 4 3) || exit 1
echo "$line"
rss=$(echo "$line" | sed -n 's/.*peak_rss=\([0-9.]*\) MiB.*/\1/p')
awk -v r="$rss" 'BEGIN { exit !(r < 1024) }' || { echo "sim.sh: peak RSS $rss MiB >= 1 GiB"; rc=1; }
for k in gpipe 1f1b-flush pipedream 2bw interleaved zb-h1 zb-v; do
    "$B" "$k" 8 64 4 5 || rc=1
done
exit $rc
