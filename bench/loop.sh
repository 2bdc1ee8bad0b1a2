#!/usr/bin/env bash
# loop.sh: PipeDream's loop on the CPU, per model and stage count (docs/loop.md, "On the
# quiet machine"): profile, plan --stages N on examples/clusters/cpu-1x2.json, sim --trace,
# train --trace, compare --median; prints each run's iteration error and the median of
# LOOP_REPS runs (default 5) per row, with the load average. Meaningful on an idle machine
# only: the figures in docs/loop.md came from it.
set -u
PLUMB=${PLUMB:-./build/plumb}
reps=${LOOP_REPS:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "loop.sh: load average $(cut -d' ' -f1-3 /proc/loadavg) at the start"
for model in fmnist-mlp fmnist-cnn gpt-mini; do
    case $model in
    fmnist-mlp) steps=60 b=32 runs=20 ;;
    fmnist-cnn) steps=20 b=16 runs=20 ;;
    gpt-mini) steps=6 b=4 runs=10 ;;
    esac
    for S in 1 2; do
        errs=""
        for r in $(seq 1 "$reps"); do
            d=$tmp/$model-$S-$r
            mkdir -p "$d"
            if ! { "$PLUMB" profile "examples/models/$model.json" --backend cpu --batch $b \
                       --workers 2 --runs $runs --quiet -o "$d/p.json" &&
                   "$PLUMB" plan -p "$d/p.json" -c examples/clusters/cpu-1x2.json --stages $S \
                       -o "$d/plan.json" &&
                   "$PLUMB" sim "$d/plan.json" --trace "$d/pred.json" &&
                   "$PLUMB" train "examples/models/$model.json" "$d/plan.json" --steps $steps \
                       --trace "$d/meas.json" --quiet &&
                   "$PLUMB" compare "$d/pred.json" "$d/meas.json" --median > "$d/cmp.txt"; } \
                   > "$d/log" 2>&1; then
                echo "loop.sh: $model, $S stage(s), run $r failed: $(tail -n 2 "$d/log")"
                exit 1
            fi
            e=$(awk '/^iteration/ { print $(NF - 1); exit }' "$d/cmp.txt")
            errs="$errs $e"
        done
        echo "$model, $S stage(s): iteration error median $(printf '%s\n' $errs | sort -g |
            awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }') % (runs:$errs %)"
    done
done
echo "loop.sh: load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
