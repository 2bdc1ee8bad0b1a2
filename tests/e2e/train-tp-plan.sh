#!/usr/bin/env bash
# train-tp-plan.sh: a tensor x pipeline x data parallel plan runs unchanged. `plumb plan
# --model examples/llm/gpt-mini.json -c examples/clusters/cpu-1x8.json --gpus 8 --tp 2 --pp
# 2 --dp 2` writes a plan; `plumb train examples/models/gpt-mini.json PLAN` runs it (8
# threads; and under `mpirun -np 8 --transport mpi`, one process per rank) with the losses
# and test figures of sequential training of the same minibatches (within 2e-4, as
# train-tp.sh: only the summation order differs) and of the flags' run (--tp 2 --schedule
# 1f1b-flush --stages 2); eight more layouts and options (two with zero 1: train-zero.sh)
# end with the sequential figures; --trace records it (under mpirun the processes' traces
# gathered into one) and `plumb compare` sets `plumb sim`'s prediction of the same plan
# beside it; a wrong -np, plans of another model and plans the executor does not run get
# one line and status 2, before any output; a stalled rank's timeout names the worker, tp
# rank, stage and replica.
set -u
PLUMB=${PLUMB:-./plumb}
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fail=0
. "$(dirname "$0")/lib/expect.sh"
die() { echo "train-tp-plan.sh: FAIL: $*" >&2; exit 1; }
# shellcheck source=lib/train_mini.sh
. "$(dirname "$0")/lib/train_mini.sh" # model llm clus args; mpi_usable, mpi_train8

# the losses of the progress lines and the test loss and accuracy, one per line
figures() {
    awk '/^step /{for(i=1;i<=NF;i++) if($i=="loss") print $(i+1)}
         /^test:/{print $3; print $5}' "$1" | tr -d '%'
}
same() { # $1 $2 logs [$3 the figures to compare, default all]: each within 2e-4
    paste <(figures "$1" | tail -n "${3:-+1}") <(figures "$2") | awk -v want="${3:-6}" '
        {n++; d=$1-$2; if (d<0) d=-d; if (NF!=2 || d>2e-4) {print "differ: " $0; bad=1}}
        END{if (n<want) {print "too few figures (" n ")"; bad=1} exit bad}' ||
        die "$2 does not match $1: $(cat "$2")"
}

plan3d() { # $1 output, the rest: more options of plumb plan --model
    local out=$1
    shift
    "$PLUMB" plan --model "$llm" -c "$clus" --gpus 8 --tp 2 --pp 2 --dp 2 --global-batch 8 \
        --microbatch-size 2 --precision fp32 "$@" -o "$out" > "$d/plan.log" 2>&1 ||
        die "plan --model $*: $(cat "$d/plan.log")"
}
echo "plan: gpt-mini tp 2 x pp 2 x dp 2 on $clus"
plan3d "$d/plan.json"
grep -q "tp 2 x pp 2 x dp 2" "$d/plan.log" || die "no layout: $(cat "$d/plan.log")"

# the plan's minibatch (4 microbatches of 2) and optimizer (adam), sequentially and by flags
"$PLUMB" train "$model" "${args[@]}" --batch 8 --microbatches 4 --optimizer adam \
    > "$d/seq.log" 2>&1 || die "sequential run: $(cat "$d/seq.log")"
"$PLUMB" train "$model" "${args[@]}" --batch 8 --microbatches 4 --optimizer adam --tp 2 \
    --schedule 1f1b-flush --stages 2 > "$d/flags.log" 2>&1 || die "flags run: $(cat "$d/flags.log")"
same "$d/seq.log" "$d/flags.log"

echo "plumb train MODEL PLAN --trace (threads)"
"$PLUMB" train "$model" "$d/plan.json" "${args[@]}" --trace "$d/meas.json" > "$d/plan-run.log" 2>&1 ||
    die "plan run: $(cat "$d/plan-run.log")"
grep -q "2 stages on 4 workers x tp 2 (8 threads), minibatch 8 = 4 x 2" "$d/plan-run.log" ||
    die "not the plan's layout: $(head -1 "$d/plan-run.log")"
same "$d/seq.log" "$d/plan-run.log"
same "$d/flags.log" "$d/plan-run.log"
echo "  losses $(figures "$d/plan-run.log" | head -1) .. $(figures "$d/plan-run.log" | tail -3 | head -1), as sequential and as the flags' run"

# other layouts of the same 8 devices and the plan options the executor runs: the final
# line of the sequential run (train loss of the last interval, test loss and accuracy)
"$PLUMB" train "$model" "${args[@]}" --batch 8 --microbatches 4 --optimizer adam --quiet \
    > "$d/seq-final.log" 2>&1 || die "sequential --quiet: $(cat "$d/seq-final.log")"
final() { sed -n 's/^final: \(.*\), [0-9.]* samples\/s$/\1/p' "$1"; }
close() { # $1 $2 final lines: the same three figures, each within 2e-4
    paste <(final "$1" | grep -Eo '[0-9]+\.[0-9]+') <(final "$2" | grep -Eo '[0-9]+\.[0-9]+') |
        awk '{n++; d=$1-$2; if (d<0) d=-d; if (NF!=2 || d>2e-4) bad=1} END{exit bad || n!=3}'
}
[ -n "$(final "$d/seq-final.log")" ] || die "no final line: $(cat "$d/seq-final.log")"
for lay in "--tp 4 --pp 2 --dp 1" "--tp 1 --pp 4 --dp 2" "--tp 2 --pp 2 --dp 2 --interleave 2" \
    "--tp 2 --pp 2 --dp 2 --sequence-parallel" "--tp 2 --pp 2 --dp 2 --schedule zb-h1" \
    "--tp 2 --pp 2 --dp 2 --sequence-parallel --schedule zb-h1" \
    "--tp 2 --pp 2 --dp 2 --recompute full --checkpoint-layers 0" \
    "--tp 2 --pp 2 --dp 2 --interleave 2 --zero 1" \
    "--tp 2 --pp 2 --dp 2 --sequence-parallel --schedule zb-h1 --zero 1"; do
    # shellcheck disable=SC2086
    "$PLUMB" plan --model "$llm" -c "$clus" --gpus 8 $lay --global-batch 8 --microbatch-size 2 \
        --precision fp32 -o "$d/lay.json" > "$d/plan.log" 2>&1 || die "plan $lay: $(cat "$d/plan.log")"
    "$PLUMB" train "$model" "$d/lay.json" "${args[@]}" --quiet > "$d/lay.log" 2>&1 ||
        die "train $lay: $(cat "$d/lay.log")"
    close "$d/seq-final.log" "$d/lay.log" ||
        die "$lay: $(cat "$d/lay.log") against $(cat "$d/seq-final.log")"
    echo "  $lay: $(final "$d/lay.log")"
done

echo "plumb compare: plumb sim's prediction beside the measured trace"
"$PLUMB" sim "$d/plan.json" --iterations 12 --trace "$d/pred.json" > "$d/sim.log" 2>&1 ||
    die "sim: $(cat "$d/sim.log")"
"$PLUMB" compare "$d/pred.json" "$d/meas.json" > "$d/cmp.log" 2>&1 || die "compare: $(cat "$d/cmp.log")"
for k in "^0 +F " "^0 +B " "^1 +F " "^1 +B " "^1 +send_b " "allreduce" "^iteration "; do
    grep -Eq "$k" "$d/cmp.log" || die "compare has no '$k' row: $(cat "$d/cmp.log")"
done
# every worker of the plan (its groups' first devices 0, 2, 4, 6) is a track of both traces
for dev in 0 2 4 6; do
    grep -Eq "\"name\": ?\"device $dev[: ]" "$d/meas.json" ||
        die "no track of device $dev in the measured trace"
done
echo "  $(grep -E '^iteration ' "$d/cmp.log" | tr -s ' ')"
# each tensor-parallel rank's own tracks (rank 1's named and marked), its tp collectives
# with their bytes, one step per iteration per track (iterations 0 .. 11), each (pid, tid)
# one track (Perfetto merges threads that share one); compare counts rank 0's
trace_ranks() { # $1 a measured trace of the plan run for 12 steps
    python3 - "$1" << 'PY'
import collections, json, sys
t = json.load(open(sys.argv[1]))
names = {}
for e in t["traceEvents"]:
    if e.get("name") == "thread_name":
        key = (e["pid"], e["tid"])
        assert key not in names, ("two tracks on", key)
        names[key] = e["args"]
ranks = collections.Counter((a["track"], a.get("tp_rank", 0)) for a in names.values())
assert ranks[("device", 0)] == 4 and ranks[("device", 1)] == 4, ranks
assert ranks[("collective", 1)] == 4, ranks
for a in names.values():
    assert "worker " in a["name"] and "tp rank %d (stage " % a.get("tp_rank", 0) in a["name"], a
steps, tpc = collections.Counter(), collections.Counter()
for e in t["traceEvents"]:
    if e.get("ph") != "X":
        continue
    a, tr = e["args"], names[(e["pid"], e["tid"])]
    if a["kind"] == "step":
        steps[(e["pid"], e["tid"], a["iteration"])] += 1
    if a["kind"].startswith("tp_"):
        assert a["bytes"] > 0 and tr["track"] == "collective", e
        tpc[tr.get("tp_rank", 0)] += 1
assert set(steps.values()) == {1} and len(steps) == 8 * 12, steps
assert tpc[0] == tpc[1] > 0, tpc
print("%d tracks, %d tp collectives per rank" % (len(names), tpc[0]))
PY
}
ranks=$(trace_ranks "$d/meas.json") || die "the trace of every tp rank: $ranks"
echo "  trace: $ranks"
grep -Eq "^0 +tp_allreduce +- +[0-9.]+ ms .* 0 / [0-9]+" "$d/cmp.log" ||
    die "compare has no measured tp_allreduce row: $(cat "$d/cmp.log")"
# the optimizer steps of the 11 counted iterations, 2 replicas: as many as predicted
for s in 0 1; do
    grep -Eq "^$s +step .* 22 / 22 " "$d/cmp.log" || die "stage $s steps: $(cat "$d/cmp.log")"
done

if mpi_usable "$model"; then
    echo "mpirun -np 8 plumb train MODEL PLAN --transport mpi"
    mpi_train8 "$d/mpi.log" "$model" "$d/plan.json" "${args[@]}" --trace "$d/mpi-meas.json"
    # the progress lines need the losses of both replicas, which are in other processes
    # until the end: the test figures (of the final weights) are compared
    same "$d/seq.log" "$d/mpi.log" 2
    echo "  the sequential test figures: $(grep '^test:' "$d/mpi.log")"
    # the processes' traces gathered into one: every worker's actions, as the threads' run
    "$PLUMB" compare "$d/pred.json" "$d/mpi-meas.json" > "$d/cmp.log" 2>&1 ||
        die "compare of the mpirun trace: $(cat "$d/cmp.log")"
    for k in "^0 +F .* 44 / 44 " "^1 +B .* 44 / 44 " "^0 +allreduce .* 22 / 22 " "^iteration "; do
        grep -Eq "$k" "$d/cmp.log" || die "mpirun trace: compare has no '$k' row: $(cat "$d/cmp.log")"
    done
    echo "  trace of the 8 processes: $(grep -E '^iteration ' "$d/cmp.log" | tr -s ' ')"
    ranks=$(trace_ranks "$d/mpi-meas.json") || die "mpirun: the trace of every tp rank: $ranks"
    echo "  the 8 processes' tracks: $ranks"
    TMPDIR="$d/tmpdir" timeout 60 mpirun --allow-run-as-root --oversubscribe -np 4 -x TMPDIR \
        ${ASAN_OPTIONS:+-x ASAN_OPTIONS} "$PLUMB" train "$model" "$d/plan.json" --steps 2 \
        --transport mpi > "$d/mpi.log" 2>&1
    grep -q "expected mpirun -np 8, one rank per worker of the schedule and tensor-parallel rank: the plan's tp x pp x dp = 2 x 2 x 2 (got 4 ranks)" \
        "$d/mpi.log" || die "mpirun -np 4: $(cat "$d/mpi.log")"
    echo "  -np 4: refused"
else
    echo "mpi: SKIP: mpirun or the MPI transport not available"
fi

# a stalled rank: its group's partner times out, and the line names the worker, its tp
# rank, stage and replica (not the transport's endpoint numbers)
echo "a stalled rank (worker 3: stage 1, replica 1)"
PLUMB_FAULT=worker:3:step:2:stall "$PLUMB" train "$model" "$d/plan.json" --steps 6 \
    --samples 256 --quiet --timeout 3 > "$d/f.log" 2>&1
rc=$?
# and what it waited for: a tensor-parallel collective (with the action it ran in) or a
# pipeline message, not a raw tag
what="(the tensor-parallel group's collective [0-9]+|the (activations|output gradient) of microbatch [0-9]+ for stage [01]) \(message -?[0-9]+\)"
[ $rc -eq 1 ] && grep -Eq "^plumb: worker [0-3] tp rank [01] \(stage [01], replica [01]\) waited 3 s for $what from worker 3 tp rank [01] \(stage 1, replica 1\): deadlock or a stalled peer(, in the tensor-parallel (all-reduce|reduce-scatter|all-gather) of stage 1's [FBIW] of microbatch [0-9]+)?$" "$d/f.log" ||
    die "a stalled rank: status $rc: $(cat "$d/f.log")"
echo "  $(cat "$d/f.log")"

echo "bad input"
plan3d "$d/bf16.json" --precision bf16
expect_bad bf16 "precision: the executor runs plans with whole-stage recomputation" \
    "$PLUMB" train "$model" "$d/bf16.json" --steps 2
plan3d "$d/ck.json" --recompute full
expect_bad checkpoint-layers "checkpoint_layers: .*--checkpoint-layers 0" \
    "$PLUMB" train "$model" "$d/ck.json" --steps 2
expect_bad other-model "plan.json: profile.layers: expected 7 layers, one per top-level layer" \
    "$PLUMB" train examples/models/fmnist-mlp.json "$d/plan.json" --steps 2
sed 's/"intermediate_size": 512/"intermediate_size": 256/' "$llm" > "$d/ffn.json"
"$PLUMB" plan --model "$d/ffn.json" -c "$clus" --gpus 8 --tp 2 --pp 2 --dp 2 --global-batch 8 \
    --microbatch-size 2 --precision fp32 -o "$d/ffn-plan.json" > /dev/null 2>&1 || die "ffn plan"
expect_bad width "ffn-plan.json: profile.layers\[1\].parameter_bytes: expected 398080" \
    "$PLUMB" train "$model" "$d/ffn-plan.json" --steps 2
sed 's/"num_attention_heads": 4/"num_attention_heads": 8/' "$llm" > "$d/heads.json"
"$PLUMB" plan --model "$d/heads.json" -c "$clus" --gpus 8 --tp 8 --pp 1 --dp 1 --global-batch 8 \
    --microbatch-size 2 --precision fp32 -o "$d/heads-plan.json" > /dev/null 2>&1 || die "heads plan"
expect_bad heads "gpt-mini.json: layers\[1\].layers\[2\].heads: expected a multiple of tp 8" \
    "$PLUMB" train "$model" "$d/heads-plan.json" --steps 2
expect_bad tp-flag "not with a plan" "$PLUMB" train "$model" "$d/plan.json" --tp 2
[ $fail = 0 ] || die "bad input"
echo "  refused, one line each"
echo "train-tp-plan.sh: ok"
