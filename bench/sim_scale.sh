#!/usr/bin/env bash
# sim_scale.sh: how the simulator's cost grows with the work (bench/bench_sim_scale.c), as
# ratios measured in this run, against the targets of docs/sim.md (Performance): 8x the
# microbatches < 10x the CPU time for every schedule; 4x the replicas < 5x; the whole
# sim_run >= 10 M events/s on 64 stages x 1024 microbatches x 4 iterations; and the CPU
# time of `plumb sweep` of ResNet-50 over 1..1024 GPUs (< 10 s). Every line says PASS or
# MISS, and a summary of the four targets ends the run; exits 1 when a run fails, and on a
# missed target with SIM_SCALE_STRICT=1. SIM_SCALE_GPUS (default 1..1024) and SIM_SCALE_MB
# (default 2000) shrink the runs; BENCH_REPS (default 5) sets the runs per measurement
# (each in a cold process; the least CPU time is kept).
set -u
dir=${PLUMB_BENCH_DIR:-build/bench}
B=$dir/bench_sim_scale
P=${PLUMB:-build/plumb}
[ -x "$B" ] || { echo "sim_scale.sh: $B not built (make bench)"; exit 1; }
[ -x "$P" ] || { echo "sim_scale.sh: $P not built (make)"; exit 1; }
rc=0 missed=0 summary=""
verdict() { # verdict 1|0: PASS or MISS
    if [ "$1" = 1 ]; then echo PASS; else echo MISS; fi
}
# target WHAT FIGURE TEST: the verdict on a target, PASS when FIGURE is measured (not
# empty) and the awk test TEST of it (as r) holds; a MISS sets missed; the summary gets
# "WHAT: PASS|MISS".
target() {
    local v
    v=$(verdict "$(awk -v r="$2" "BEGIN { print (r != \"\" && $3) }")")
    [ "$v" = MISS ] && missed=1
    summary+="$1: $v"$'\n'
}
# worst_ratio OUT: the largest "ratio X" in the bench's output OUT
worst_ratio() {
    echo "$1" | sed -n 's/.*ratio \([0-9.]*\).*/\1/p' | sort -g | tail -1
}
out=$("$B" micro 8 "${SIM_SCALE_MB:-2000}") || rc=1
echo "$out"
worst=$(worst_ratio "$out")
target "target (a) 8x the microbatches < 10x CPU, every schedule: worst ratio $worst" "$worst" \
    "r < 10"
"$B" lower 8 "${SIM_SCALE_MB:-2000}" || rc=1 # the lowering alone; no target of its own
out=$("$B" replicas 2 256 512) || rc=1
echo "$out"
worst=$(worst_ratio "$out")
target "target (b) 4x the replicas < 5x CPU: worst ratio $worst" "$worst" "r < 5"
out=$("$B" events 64 1024 4) || rc=1
echo "$out"
low=$(echo "$out" | sed -n 's/.*: \([0-9.]*\) M events\/s.*/\1/p' | sort -g | head -1)
target "target (c) whole sim_run >= 10 M events/s, 64 x 1024 x 4: lowest $low M" "$low" "r >= 10"
gpus=${SIM_SCALE_GPUS:-1..1024}
TIMEFORMAT='%U %S'
t=$( { time "$P" sweep -p profiles/pipedream/resnet50.json -c profiles/clusters/h200-4x8.json \
        --gpus "$gpus" >/dev/null; } 2>&1 ) || rc=1
cpu=$(echo "$t" | awk '{ printf "%.1f", $1 + $2 }')
echo "sweep resnet50 on h200-4x8 resized, --gpus $gpus: $cpu s CPU (user + sys)"
if [ "$gpus" = 1..1024 ]; then
    target "target (d) sweep 1..1024 < 10 s CPU: $cpu s" "$cpu" "r < 10"
else
    summary+="target (d) sweep 1..1024 < 10 s CPU: not measured (--gpus $gpus: $cpu s)"$'\n'
fi
echo "== summary"
printf '%s' "$summary"
[ "${SIM_SCALE_STRICT:-0}" = 1 ] && [ $missed = 1 ] && rc=1
exit $rc
