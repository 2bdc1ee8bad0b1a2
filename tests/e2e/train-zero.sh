#!/usr/bin/env bash
# train-zero.sh: `plumb train` runs a plan with "zero": 1 (ZeRO-1: each data-parallel replica
# of a stage keeps 1/dp of the optimizer state, reduce-scatters the gradients, steps its
# shard and all-gathers the weights). Plans of gpt-mini from `plumb plan --model ... --zero
# 1` (tp 2 x pp 2 x dp 2, and tp 1 x pp 2 x dp 4: 2 stages of 4 replicas) train to the
# same losses, accuracies and test figures as the same plan with zero 0, printed digit for
# digit (the local transport's reduce-scatter sums each part in the all-reduce's order),
# each worker's peak memory lower; --checkpoint-every / --save write the whole optimizer
# state (the same bytes as zero 0's checkpoint) and --resume shards it again, ending where
# the whole run ends; under `mpirun -np 8 --transport mpi` the 3D plan's test figures and
# checkpoint are the threads' zero 0 run's (2 replicas: each sum is a + b, the same bits in
# either order).
set -u
PLUMB=${PLUMB:-./plumb}
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
die() { echo "train-zero.sh: FAIL: $*" >&2; exit 1; }
# shellcheck source=lib/train_mini.sh
. "$(dirname "$0")/lib/train_mini.sh" # model llm clus args; mpi_usable, mpi_train8

plan() { # $1 output, the rest: layout options of plumb plan --model
    local out=$1
    shift
    "$PLUMB" plan --model "$llm" -c "$clus" "$@" --global-batch 8 \
        --microbatch-size 2 --precision fp32 -o "$out" > "$d/plan.log" 2>&1 ||
        die "plan --model $*: $(cat "$d/plan.log")"
}
# the progress lines' losses and accuracies and the test line, as printed
figures() { grep -E '^(step|test:)' "$1" | sed 's/  [0-9]* samples\/s.*//'; }
# each worker's peak memory, MiB
peaks() { sed -n 's/^worker \([0-9]*\) (device [0-9]*): peak memory \([0-9.]*\) MiB$/\1 \2/p' "$1"; }

for lay in "--gpus 8 --tp 2 --pp 2 --dp 2" "--gpus 8 --tp 1 --pp 2 --dp 4"; do
    # shellcheck disable=SC2086
    plan "$d/z0.json" $lay --zero 0
    # shellcheck disable=SC2086
    plan "$d/z1.json" $lay --zero 1
    grep -Eq '"zero":[[:space:]]*1' "$d/z1.json" || die "$lay: the plan has no zero 1"
    for z in 0 1; do
        "$PLUMB" train "$model" "$d/z$z.json" "${args[@]}" > "$d/run$z.log" 2>&1 ||
            die "$lay zero $z: $(cat "$d/run$z.log")"
    done
    grep -q "12 steps, zero 1 (each replica keeps its share of the optimizer state)$" \
        "$d/run1.log" || die "$lay: no zero 1 in the header: $(head -1 "$d/run1.log")"
    [ "$(figures "$d/run0.log" | wc -l)" -eq 5 ] || die "$lay: no figures: $(cat "$d/run0.log")"
    [ "$(figures "$d/run0.log")" = "$(figures "$d/run1.log")" ] ||
        die "$lay: zero 1's figures differ from zero 0's: $(cat "$d/run0.log") against $(cat "$d/run1.log")"
    paste <(peaks "$d/run0.log") <(peaks "$d/run1.log") | awk '
        {n++; if (NF != 4 || $1 != $3 || !($4 < $2)) bad = 1}
        END {exit bad || n < 4}' ||
        die "$lay: each worker's peak under zero 1 below zero 0's: $(peaks "$d/run0.log") | $(peaks "$d/run1.log")"
    echo "  $lay: $(figures "$d/run1.log" | tail -1); peak MiB zero 0 / 1:" \
        "$(paste -d/ <(peaks "$d/run0.log" | cut -d' ' -f2) <(peaks "$d/run1.log" | cut -d' ' -f2) | tr '\n' ' ')"
    [ -f "$d/z1-3d.json" ] || { cp "$d/z1.json" "$d/z1-3d.json"; cp "$d/z0.json" "$d/z0-3d.json"
                                cp "$d/run0.log" "$d/run0-3d.log"; }
done

# the 2-stage plan of 4 replicas each (z0/z1.json from the last layout): checkpoints hold
# the whole state: zero 1's --save is zero 0's, byte for byte; a run checkpointed every 4
# steps and resumed from the last of them ends with the same weights
echo "checkpoints: the whole optimizer state, gathered on save and sharded on resume"
for z in 0 1; do
    "$PLUMB" train "$model" "$d/z$z.json" --steps 8 --samples 512 --quiet \
        --save "$d/whole$z.ck" > "$d/ck$z.log" 2>&1 || die "zero $z --save: $(cat "$d/ck$z.log")"
done
cmp -s "$d/whole0.ck" "$d/whole1.ck" || die "zero 1's checkpoint differs from zero 0's"
"$PLUMB" train "$model" "$d/z1.json" --steps 4 --samples 512 --quiet --checkpoint "$d/ck" \
    --checkpoint-every 4 > "$d/part.log" 2>&1 || die "zero 1 --checkpoint: $(cat "$d/part.log")"
"$PLUMB" train "$model" "$d/z1.json" --steps 8 --samples 512 --resume "$d/ck" \
    --save "$d/resumed.ck" > "$d/res.log" 2>&1 || die "zero 1 --resume: $(cat "$d/res.log")"
grep -q "resumed from $d/ck.* at step 4" "$d/res.log" || die "no resume line: $(cat "$d/res.log")"
cmp -s "$d/whole1.ck" "$d/resumed.ck" || die "zero 1 resumed at step 4 differs from the whole run"
echo "  --save of zero 1 = zero 0's ($(wc -c < "$d/whole1.ck") bytes); resumed at step 4 = whole"

if mpi_usable "$model"; then
    echo "mpirun -np 8 plumb train MODEL PLAN --transport mpi (tp 2 x pp 2 x dp 2, zero 1)"
    mpi_train8 "$d/mpi.log" "$model" "$d/z1-3d.json" "${args[@]}" --save "$d/mpi.ck"
    # the progress lines need both replicas' losses, in other processes until the end: the
    # test figures (of the final weights) are compared with the threads' zero 0 run
    [ "$(grep '^test:' "$d/mpi.log")" = "$(grep '^test:' "$d/run0-3d.log")" ] ||
        die "mpirun: $(grep '^test:' "$d/mpi.log"), threads: $(grep '^test:' "$d/run0-3d.log")"
    # the state gathered over the processes: the threads' zero 0 checkpoint
    "$PLUMB" train "$model" "$d/z0-3d.json" "${args[@]}" --quiet --save "$d/thr.ck" > "$d/thr.log" 2>&1 ||
        die "zero 0 --save: $(cat "$d/thr.log")"
    cmp -s "$d/mpi.ck" "$d/thr.ck" || die "mpirun zero 1's checkpoint differs from the threads' zero 0"
    echo "  $(grep '^test:' "$d/mpi.log"), as the threads' zero 0; the same checkpoint"
else
    echo "mpi: SKIP: mpirun or the MPI transport not available"
fi
echo "train-zero.sh: ok"
