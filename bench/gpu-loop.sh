#!/usr/bin/env bash
# gpu-loop.sh: PipeDream's loop on one GPU (docs/loop.md): for each model, plumb profile
# measures its layers on the backend, plumb plan plans it for a one-GPU cluster written
# here, plumb sim predicts the plan as a trace, plumb train runs the plan on the GPU with a
# measured trace, and plumb compare sets one against the other. Prints one tab-separated
# row per model (name, result, detail: predicted and measured iteration, their error, the
# mean |error| of the F/B medians and of the peak memory), as bench/gpu-check.sh's table
# wants, and keeps every file in OUTDIR.
#
#   bench/gpu-loop.sh [PLUMB [OUTDIR [BACKEND]]]     (BACKEND: cuda by default)
#
# Without arguments (as `make bench` runs it) PLUMB comes from the environment and the files
# go to a temporary folder; with a CUDA backend and no GPU it prints one SKIP row, exit 0.
#
# GPU_LOOP_MODELS="name:batch:steps ..." picks the models (default fmnist-cnn and vgg16 at
# batch 64); with BACKEND=cpu and a small model the script runs without a GPU, which is how
# it is tried before a GPU is at hand (GPU_LOOP_FORCE=1 runs a CUDA backend without a GPU,
# as bench/gpu-check.sh does on cuemu). Every command has a time limit; a failing step makes
# that model's row a FAIL saying why, and the script goes on.
set -u
PLUMB=${1:-${PLUMB:-./plumb}}
OUTDIR=${2:-}
BK=${3:-cuda}
MODELS=${GPU_LOOP_MODELS:-fmnist-cnn:64:40 vgg16:64:20}

row() { printf '%s\t%s\t%s\n' "$1" "$2" "$3"; }
if [ -z "${GPU_LOOP_FORCE:-}" ] && [ "${BK%%-*}" = cuda ] &&
    ! timeout 20 nvidia-smi -L > /dev/null 2>&1 && [ ! -e /dev/nvidia0 ]; then
    row "loop on one GPU" SKIP "no NVIDIA GPU (nvidia-smi -L failed, no /dev/nvidia0)"
    exit 0
fi
if [ -z "$OUTDIR" ]; then
    OUTDIR=$(mktemp -d)
    trap 'rm -rf "$OUTDIR"' EXIT
fi
mkdir -p "$OUTDIR" || exit 1
# the last line of a log that says something, for a FAIL row
why() { grep -v '^[[:space:]]*$' "$1" 2>/dev/null | tail -1 | cut -c1-140; }

# One device of this machine: the GPU (its memory from nvidia-smi when it answers) or, for
# a dry run, the CPU. One level with one device: no links, the plan is one stage.
# The device type is named after the GPU ("NVIDIA H200"), so that the simulator prices the
# optimizer step at that GPU's memory bandwidth (sim/cost.c knows H200, H100, A100 ...).
mem=16
dtype=$BK
if [ "${BK%%-*}" = cuda ] && command -v nvidia-smi > /dev/null 2>&1; then
    mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits 2>/dev/null |
        head -1 | tr -dc 0-9)
    [ -n "$mib" ] && mem=$((mib / 1024))
    gname=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 |
        tr -dc 'A-Za-z0-9 ._-')
    [ -n "$gname" ] && dtype=$gname
fi
cat > "$OUTDIR/cluster-1.json" <<JSON
{
  "format": "plumb-cluster/1",
  "name": "one-$BK",
  "description": "the one device plumb train runs on in bench/gpu-loop.sh",
  "levels": [{"name": "device", "count": 1, "bandwidth_gbit_per_s": 100, "latency_us": 1}],
  "device_types": [{"name": "$dtype", "memory_gib": $mem, "speed": 1}],
  "device_type": "$dtype"
}
JSON

for spec in $MODELS; do
    IFS=: read -r name batch steps <<< "$spec"
    model=examples/models/$name.json
    d=$OUTDIR/$name
    mkdir -p "$d"
    title="loop $name, batch $batch, $BK"
    if ! timeout 300 "$PLUMB" profile "$model" --backend "$BK" --batch "$batch" --runs 20 \
            --quiet -o "$d/profile.json" > "$d/profile.log" 2>&1; then
        row "$title" FAIL "plumb profile: $(why "$d/profile.log")"
        continue
    fi
    if ! timeout 120 "$PLUMB" plan -p "$d/profile.json" -c "$OUTDIR/cluster-1.json" \
            -o "$d/plan.json" > "$d/plan.log" 2>&1; then
        row "$title" FAIL "plumb plan: $(why "$d/plan.log")"
        continue
    fi
    if ! timeout 120 "$PLUMB" sim "$d/plan.json" --trace "$d/pred.json" > "$d/sim.log" 2>&1; then
        row "$title" FAIL "plumb sim: $(why "$d/sim.log")"
        continue
    fi
    if ! timeout 600 "$PLUMB" train "$model" "$d/plan.json" --backend "$BK" --data synthetic \
            --samples 512 --steps "$steps" --trace "$d/meas.json" --quiet \
            > "$d/train.log" 2>&1; then
        row "$title" FAIL "plumb train: $(why "$d/train.log")"
        continue
    fi
    if ! timeout 120 "$PLUMB" compare "$d/pred.json" "$d/meas.json" --median \
            > "$d/compare.txt" 2>&1; then
        row "$title" FAIL "plumb compare: $(why "$d/compare.txt")"
        continue
    fi
    # "iteration   408.1698 ms   568.1229 ms   -28.2 %"
    it=$(awk '$1 == "iteration" && $3 == "ms" { print $2 " ms predicted, " $4 " ms measured, error " $6 " %"; exit }' "$d/compare.txt")
    fb=$(awk '/^mean \|error\| of the per-stage/ { print $(NF - 1) " %"; exit }' "$d/compare.txt")
    mem=$(awk '/^mean \|error\| of the peak memory/ { print $(NF - 1) " %"; exit }' "$d/compare.txt")
    plan=$(grep -m1 -o 'microbatches: .*' "$d/plan.log" | cut -c1-60)
    if [ -n "$it" ]; then
        row "$title" "$it" "F/B medians mean |error| ${fb:-?}; peak memory mean |error| ${mem:--}; ${plan:-plan?}; $name/compare.txt"
    else
        row "$title" FAIL "no per-iteration line in $name/compare.txt"
    fi
done
