#!/usr/bin/env bash
# ui.sh: the dashboard's time per keypress (bench/bench_ui.c) for every shipped PipeDream
# profile on the shipped 16-GPU clusters (cluster-a-4x4: 4 servers x 4 V100 over 10 Gb/s;
# cluster-b-2x8: 2 servers x 8 V100 over NVLink and 25 Gb/s), re-planning with the native
# planner (the dashboard's default); then, for comparison, PipeDream's partitioner on
# cluster-a (slow on large DAGs the first time; later runs come from the plan cache). The
# target is 50 ms per key; the script reports, it does not fail on a slow key. Last, plumb
# ui --model's 3D keys on GPT-3 175B at tp 8 x pp 8 x dp 16 on 1024 A100s (Narayanan et
# al. 2021's layout), each key against one bare simulation of that layout in the same run,
# and each new layout's one-pipeline simulation against its full simulation (full-cpu);
# last, the redraw alone of a plan with one stage of 1024 replicas (bench_ui -D).
set -u
B=${PLUMB_BENCH_DIR:-build/bench}/bench_ui
[ -x "$B" ] || { echo "ui.sh: $B not built (make bench)"; exit 1; }
profiles=$(ls profiles/pipedream/*.json | grep -v _graph_copy)
rc=0
for c in profiles/clusters/cluster-a-4x4.json profiles/clusters/cluster-b-2x8.json; do
    out=$("$B" -P native "$c" $profiles) || rc=1
    echo "$out"
    echo "$out" | awk 'NR > 2 && $5 + 0 >= 50 { n++ } NR > 2 && $8 + 0 >= 50 { c++ }
        END { print "ui.sh: " (n + 0) " profile(s) with a key over 50 ms wall, " (c + 0) " over 50 ms CPU" }'
done
out=$("$B" -P pipedream profiles/clusters/cluster-a-4x4.json $profiles) || rc=1
echo "$out"
"$B" -L examples/llm/gpt3-175b.json profiles/clusters/dgx-a100-80g.json 1024 8 8 16 1536 full ||
    rc=1
# the redraw alone on one stage of 1024 replicas (VGG-16 data parallel on 1024 A100s: the
# stage row looks up every replica's device in the report) against one replica's
t=$(mktemp -d) || exit 1
for n in 1 1024; do
    printf '{"format": "plumb-plan/1", "profile": "%s/profiles/pipedream/vgg16.json", "cluster": "%s/profiles/clusters/dgx-a100-80g.json", "schedule": "1f1b-flush", "microbatch_size": 16, "microbatches": 1024, "recompute": false, "optimizer": "momentum", "stages": [{"first_layer": 0, "last_layer": 40, "replicas": %d, "devices": [%s]}]}\n' \
        "$PWD" "$PWD" $n "$(seq -s, 0 $((n - 1)))" > "$t/dp$n.json"
    "$B" -D "$t/dp$n.json" 300 > "$t/dp$n.out" || rc=1
    cat "$t/dp$n.out"
done
awk '/median/ { for (i = 1; i <= NF; i++) if ($i == "median") m[NR] = $(i + 1) }
     END { if (m[1] > 0) printf "ui.sh: redraw of 1024 replicas / 1 replica: %.2fx (median wall)\n", m[2] / m[1] }' \
    "$t/dp1.out" "$t/dp1024.out"
rm -rf "$t"
exit $rc
