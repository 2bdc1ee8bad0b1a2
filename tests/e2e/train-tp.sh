#!/usr/bin/env bash
# train-tp.sh: end-to-end checks of `plumb train --tp T` (tensor parallelism, each worker a
# group of T ranks): gpt-mini at tp 2, tp 4, tp 2 x 2 pipeline stages, and with
# --sequence-parallel (also with zb-h1's split backward), prints the losses and test figures of the sequential run (within
# 2e-4: the runs differ only in summation order, a relative 5e-7 on the loss,
# tests/test_train_tp.c); a checkpoint saved at tp 2 x pp 2 resumes at tp 1, at tp 4 and
# at tp 1 x pp 4 to the same figures as an uninterrupted run (SGD; and Adam, whose
# moments are sharded like the weights, tp 2 to tp 4); under mpirun (one process per rank)
# tp 2 and tp 4 with sequence parallelism and tp 2 x pp 2 give the sequential figures, and a wrong -np is refused; a failing or
# stalled rank ends the run with status 1; on cuemu (when built) the CUDA backend at tp 2
# gives the CPU's losses, as threads and over the nccl transport under mpirun (with and
# without sequence parallelism: NCCL's reduce-scatter and all-gather; and tp 2 x pp 2,
# whose pipeline sends are scattered over the ranks and all-gathered); a tp that
# does not divide the vocabulary or the heads, a model with nothing to split, sequence
# parallelism without tp and a plan are refused
# with one line and status 2, before any output.
set -u
PLUMB=${PLUMB:-./plumb}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "train-tp.sh: FAIL: $*" >&2; exit 1; }
model=examples/models/gpt-mini.json
args=(--steps 12 --batch 8 --microbatches 2 --samples 512 --log-every 3)

# the losses of the progress lines and the test loss and accuracy, one per line
figures() {
    awk '/^step /{for(i=1;i<=NF;i++) if($i=="loss") print $(i+1)}
         /^test:/{print $3; print $5}' "$1" | tr -d '%'
}
same() { # $1 $2 logs: the same number of figures, each within 2e-4
    paste <(figures "$1") <(figures "$2") | awk -v a="$1" -v b="$2" '
        {n++; d=$1-$2; if (d<0) d=-d; if (NF!=2 || d>2e-4) {print "differ: " $0; bad=1}}
        END{if (n<5) {print "too few figures (" n ")"; bad=1} exit bad}' ||
        fail "$2 does not match $1: $(cat "$2")"
}

echo "sequential reference"
"$PLUMB" train "$model" "${args[@]}" > "$tmp/seq.log" 2>&1 ||
    fail "sequential run failed: $(cat "$tmp/seq.log")"
for tp in "--tp 2" "--tp 4" "--tp 2 --schedule 1f1b-flush --stages 2" \
    "--tp 2 --sequence-parallel" "--tp 4 --sequence-parallel --schedule gpipe --stages 2" \
    "--tp 2 --sequence-parallel --schedule zb-h1 --stages 2"; do
    echo "$tp"
    # shellcheck disable=SC2086
    "$PLUMB" train "$model" "${args[@]}" $tp > "$tmp/tp.log" 2>&1 ||
        fail "$tp failed: $(cat "$tmp/tp.log")"
    grep -q "x tp ${tp:5:1} " "$tmp/tp.log" || fail "$tp: no tp in the header: $(head -1 "$tmp/tp.log")"
    same "$tmp/seq.log" "$tmp/tp.log"
    echo "  losses $(figures "$tmp/tp.log" | head -1) .. $(figures "$tmp/tp.log" | tail -3 | head -1) as sequential"
done

echo "checkpoint at tp 2 x pp 2, resumed at tp 1, at tp 4 and at tp 1 x pp 4"
"$PLUMB" train "$model" --steps 6 --batch 8 --microbatches 2 --samples 512 --tp 2 \
    --schedule 1f1b-flush --stages 2 --save "$tmp/tp2.ckpt" > "$tmp/a.log" 2>&1 ||
    fail "tp 2 x pp 2 save failed: $(cat "$tmp/a.log")"
k=0
for to in "--tp 1" "--tp 4" "--schedule 1f1b-flush --stages 4"; do
    k=$((k + 1))
    # shellcheck disable=SC2086
    "$PLUMB" train "$model" "${args[@]}" $to --resume "$tmp/tp2.ckpt" > "$tmp/r$k.log" 2>&1 ||
        fail "resume with $to failed: $(cat "$tmp/r$k.log")"
    # the last progress line (step 12) and the test figures of the whole run
    paste <(figures "$tmp/seq.log" | tail -3) <(figures "$tmp/r$k.log" | tail -3) |
        awk '{d=$1-$2; if (d<0) d=-d; if (d>2e-4) bad=1} END{exit bad}' ||
        fail "resumed with $to: $(tail -4 "$tmp/r$k.log") against $(tail -4 "$tmp/seq.log")"
done
echo "  step 12 and test figures as an uninterrupted run"
# Adam: the moments are sharded and gathered like the weights
"$PLUMB" train "$model" "${args[@]}" --optimizer adam > "$tmp/adam.log" 2>&1 ||
    fail "sequential adam run failed: $(cat "$tmp/adam.log")"
"$PLUMB" train "$model" --steps 6 --batch 8 --microbatches 2 --samples 512 --tp 2 \
    --optimizer adam --save "$tmp/adam2.ckpt" > "$tmp/a.log" 2>&1 ||
    fail "tp 2 adam save failed: $(cat "$tmp/a.log")"
"$PLUMB" train "$model" "${args[@]}" --optimizer adam --tp 4 --resume "$tmp/adam2.ckpt" \
    > "$tmp/ra.log" 2>&1 || fail "adam resume at tp 4 failed: $(cat "$tmp/ra.log")"
paste <(figures "$tmp/adam.log" | tail -3) <(figures "$tmp/ra.log" | tail -3) |
    awk '{d=$1-$2; if (d<0) d=-d; if (d>2e-4) bad=1} END{exit bad || NR<3}' ||
    fail "adam resumed at tp 4: $(tail -4 "$tmp/ra.log") against $(tail -4 "$tmp/adam.log")"
echo "  adam, tp 2 -> tp 4: step 12 and test figures as an uninterrupted run"

# the CUDA backend on cuemu (the CPU emulator of CUDA, tests/cuemu/), when built: the same
# stage code through the CUDA kernels, the all-reduces as device copies ordered by events;
# per-step losses within 1e-3 relative of the CPU's sequential run, as tests/e2e/cuemu.sh
EMU=${PLUMB_EMU:-$(dirname "$PLUMB")/emu/plumb}
if [ "${PLUMB_SAN:-0}" = 1 ] || grep -qa __asan_init "$PLUMB" "$EMU" 2> /dev/null; then
    # the MPI library's own allocations outlive MPI_Finalize: not plumb's leaks
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
fi
if [ -x "$EMU" ]; then
    echo "cuemu: --backend cuda --tp 2 --sequence-parallel against the CPU's sequential run"
    small=(--steps 3 --batch 4 --microbatches 2 --samples 256 --log-every 1)
    "$PLUMB" train "$model" "${small[@]}" > "$tmp/c.log" 2>&1 || fail "cpu run failed: $(cat "$tmp/c.log")"
    timeout 600 "$EMU" train "$model" "${small[@]}" --backend cuda --tp 2 --sequence-parallel \
        > "$tmp/e.log" 2>&1 || fail "cuemu --tp 2 run failed: $(tail -3 "$tmp/e.log")"
    paste <(figures "$tmp/c.log") <(figures "$tmp/e.log") | head -3 |
        awk '{n++; d=($1-$2)/$1; if (d<0) d=-d; if (NF!=2 || d>1e-3) bad=1; if (d>w) w=d}
             END{printf "  %d steps, max relative loss difference %.2g\n", n, w; exit bad || n<3}' ||
        fail "cuemu --tp 2 losses differ: $(cat "$tmp/e.log") against $(cat "$tmp/c.log")"
    # the nccl transport (cuemu's NCCL) under mpirun: a communicator per tensor-parallel
    # group, one process (one emulated GPU) per rank
    if command -v mpirun > /dev/null 2>&1 && ! "$EMU" train "$model" --tp 2 --backend cuda \
            --transport nccl --steps 1 2>&1 | grep -q "not built into this binary"; then
        # with --sequence-parallel: ncclReduceScatter and ncclAllGather on the group's
        # communicator; with 2 stages the pipeline sends scattered, ncclAllGather in place
        mkdir -p "$tmp/tmpdir"
        for run in "2 " "2 --sequence-parallel" "4 --schedule 1f1b-flush --stages 2"; do
            np=${run%% *}
            echo "cuemu: mpirun -np $np, --tp 2 ${run#* } --backend cuda --transport nccl"
            # shellcheck disable=SC2086
            TMPDIR="$tmp/tmpdir" timeout 600 mpirun --allow-run-as-root --oversubscribe -np $np \
                -x TMPDIR -x OPENBLAS_NUM_THREADS=1 "$EMU" train "$model" "${small[@]}" \
                --backend cuda --tp 2 ${run#* } --transport nccl > "$tmp/n.log" 2>&1 ||
                fail "nccl --tp 2 ${run#* } run failed: $(tail -5 "$tmp/n.log")"
            paste <(figures "$tmp/c.log") <(figures "$tmp/n.log") | head -3 |
                awk '{n++; d=($1-$2)/$1; if (d<0) d=-d; if (NF!=2 || d>1e-3) bad=1; if (d>w) w=d}
                     END{printf "  %d steps, max relative loss difference %.2g\n", n, w; exit bad || n<3}' ||
                fail "nccl --tp 2 ${run#* } losses differ: $(cat "$tmp/n.log") against $(cat "$tmp/c.log")"
        done
    fi
else
    echo "cuemu: SKIP: $EMU not built"
fi

# one process per rank under mpirun (the mpi transport's all-reduce, and with sequence
# parallelism its reduce-scatter and all-gather, over each group's sub-communicator): the
# same figures as the sequential run
if command -v mpirun > /dev/null 2>&1 && ! "$PLUMB" train "$model" --tp 2 --transport mpi \
        --steps 1 2>&1 | grep -q "not built into this binary"; then
    for run in "2 --tp 2 --sequence-parallel" "4 --tp 2 --schedule 1f1b-flush --stages 2" \
        "4 --tp 4 --sequence-parallel"; do
        np=${run%% *}
        echo "mpirun -np $np, ${run#* }, --transport mpi"
        # shellcheck disable=SC2086
        timeout 300 mpirun --allow-run-as-root --oversubscribe -np $np "$PLUMB" train "$model" \
            "${args[@]}" ${run#* } --transport mpi > "$tmp/mpi.log" 2>&1 ||
            fail "mpirun -np $np ${run#* } failed: $(cat "$tmp/mpi.log")"
        grep -q "x tp ${run:7:1}.* ($np ranks)" "$tmp/mpi.log" || fail "no tp in the header: $(head -3 "$tmp/mpi.log")"
        same "$tmp/seq.log" "$tmp/mpi.log"
        echo "  the sequential figures"
    done
    timeout 60 mpirun --allow-run-as-root --oversubscribe -np 3 "$PLUMB" train "$model" --tp 2 \
        --transport mpi --steps 2 > "$tmp/mpi.log" 2>&1
    grep -q "expected mpirun -np 2, one rank per worker of the schedule and tensor-parallel rank" \
        "$tmp/mpi.log" || fail "mpirun -np 3 at tp 2: $(cat "$tmp/mpi.log")"
    echo "  -np 3 at tp 2: refused"
else
    echo "mpi: SKIP: mpirun or the MPI transport not available"
fi

# a failing rank leaves its group's partner waiting in a sum: the run must end, status 1
echo "faults"
small=(--steps 6 --batch 4 --microbatches 2 --samples 256 --quiet)
start=$(date +%s)
PLUMB_FAULT=worker:0:step:3 "$PLUMB" train "$model" "${small[@]}" --tp 2 > "$tmp/f.log" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "injected fault at step 3" "$tmp/f.log" ||
    fail "an injected fault at tp 2: status $rc: $(cat "$tmp/f.log")"
PLUMB_FAULT=worker:1:step:2:stall "$PLUMB" train "$model" "${small[@]}" --tp 2 \
    --schedule 1f1b-flush --stages 2 --timeout 3 > "$tmp/f.log" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "deadlock or a stalled peer" "$tmp/f.log" ||
    fail "a stalled rank at tp 2 x pp 2: status $rc: $(cat "$tmp/f.log")"
# sequence parallelism: rank 0 stalls, rank 1 waits in a reduce-scatter or all-gather
PLUMB_FAULT=worker:0:step:2:stall "$PLUMB" train "$model" "${small[@]}" --tp 2 \
    --sequence-parallel --timeout 3 > "$tmp/f2.log" 2>&1
rc=$?
# the transport's tag named by what it carries, and the collective by where it ran
[ $rc -eq 1 ] && grep -Eq "tp rank 1 \(stage 0, replica 0\) waited 3 s for the tensor-parallel group's collective [0-9]+ \(message -[0-9]+\) from worker 0 tp rank 0 \(stage 0, replica 0\): deadlock or a stalled peer, in the tensor-parallel (reduce-scatter|all-gather) of stage 0's [FBIW] of microbatch [0-9]+$" \
    "$tmp/f2.log" || fail "a stalled rank at tp 2 with sequence parallelism: status $rc: $(cat "$tmp/f2.log")"
if command -v mpirun > /dev/null 2>&1 && ! "$PLUMB" train "$model" --tp 2 --transport mpi \
        --steps 1 2>&1 | grep -q "not built into this binary"; then
    PLUMB_FAULT=worker:0:step:2:stall timeout 60 mpirun --allow-run-as-root --oversubscribe \
        -np 2 -x PLUMB_FAULT "$PLUMB" train "$model" "${small[@]}" --tp 2 --sequence-parallel \
        --transport mpi --timeout 3 > "$tmp/f3.log" 2>&1
    rc=$?
    [ $rc -ne 0 ] && grep -q "rank 1 (worker 0 tp rank 1, stage 0, replica 0) waited 3 s for a \(reduce-scatter\|n all-gather\): a stalled peer" \
        "$tmp/f3.log" || fail "mpirun, a stalled rank with sequence parallelism: status $rc: $(cat "$tmp/f3.log")"
    echo "  mpi: $(grep -m1 "waited 3 s" "$tmp/f3.log")"
fi
[ $(($(date +%s) - start)) -lt 90 ] || fail "the faulty runs took $(($(date +%s) - start)) s"
echo "  a failing rank ends the run (status 1); a stalled one makes its partner time out: $(cat "$tmp/f.log")"

refused() { # $1 expected text; the rest: the command
    local want=$1
    shift
    "$@" > "$tmp/out" 2> "$tmp/err"
    local rc=$?
    [ $rc -eq 2 ] || fail "$*: status $rc (want 2): $(cat "$tmp/err")"
    [ ! -s "$tmp/out" ] || fail "$*: printed output before failing: $(cat "$tmp/out")"
    [ "$(wc -l < "$tmp/err")" -eq 1 ] || fail "$*: expected one line: $(cat "$tmp/err")"
    grep -q -- "$want" "$tmp/err" || fail "$*: expected '$want' in: $(cat "$tmp/err")"
    echo "  refused: $(cat "$tmp/err")"
}
echo "bad input"
refused "layers\[0\].vocab: expected a multiple of tp 3" \
    "$PLUMB" train "$model" --tp 3 --steps 2
refused "layers\[1\].layers\[2\].heads: expected a multiple of tp 8" \
    "$PLUMB" train "$model" --tp 8 --steps 2
refused "fmnist-mlp.json: layers: expected for tp 2" \
    "$PLUMB" train examples/models/fmnist-mlp.json --tp 2 --steps 2
refused "sequence-parallel: needs --tp 2" "$PLUMB" train "$model" --sequence-parallel
refused "not with a plan" "$PLUMB" train examples/models/vgg16.json \
    examples/plans/vgg16-4stage-1f1b.json --tp 2
refused "expected an integer" "$PLUMB" train "$model" --tp 0
echo "train-tp.sh: ok"
