#!/usr/bin/env bash
# cuemu-nccl.sh: the nccl transport under mpirun on cuemu (tests/cuemu/cuemu_nccl.cc: NCCL
# emulated between processes through files), 2 ranks on the CPU: a 2-stage GPipe and a
# 2-stage PipeDream pipeline and a stage on 2 replicas (ncclAllReduce; and under ZeRO-1,
# ncclReduceScatter and ncclAllGather, also zero 0's) give the same final weights, byte for
# byte, as the local transport on cuemu, and 2-stage pipelines the same
# peak memory per worker, each on the same device; a failing, a killed and a silent
# rank end the run with an error in bounded time; the communicators leave no files behind
# (TMPDIR is a fresh folder); a rank that cannot create the transport ends the job.
# Skipped when build/emu/plumb or mpirun is missing, or the binary lacks NCCL or MPI.
# Takes ~20 s on 2 cores (3 training steps instead of 12 under the sanitizers).
set -u
PLUMB=${PLUMB:-./plumb}
EMU=${PLUMB_EMU:-$(dirname "$PLUMB")/emu/plumb}
say() { echo "cuemu-nccl.sh: $*"; }
if [ ! -x "$EMU" ]; then
    say "SKIP: $EMU not built (nvcc not found, so no CUDA backend to emulate)"
    exit 0
fi
if ! command -v mpirun > /dev/null 2>&1; then
    say "SKIP: mpirun not found (apt-get install openmpi-bin)"
    exit 0
fi
model=examples/models/fmnist-mlp.json
if "$EMU" train "$model" --schedule gpipe --stages 2 --backend cuda --transport nccl --steps 1 \
        --data synthetic --samples 64 2>&1 | grep -q "not built into this binary"; then
    say "SKIP: $EMU was built without NCCL or MPI"
    exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { say "FAIL: $*" >&2; exit 1; }
export OPENBLAS_NUM_THREADS=1 # the same GEMM summation order in every run
STEPS=12
if [ "${PLUMB_SAN:-0}" = 1 ] || grep -qa __asan_init "$EMU" 2> /dev/null; then
    STEPS=3 # the emulated GPU is ~10x slower under the sanitizers
    # the MPI library's own allocations outlive MPI_Finalize: not plumb's leaks
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
fi
# every communicator's directory goes here (ncclGetUniqueId: $TMPDIR/cuemu-nccl-XXXXXX)
export TMPDIR="$tmp/tmpdir"
mkdir "$TMPDIR"
leftovers() { # $1 label: no communicator's directory may be left (the MPI library's own
    # session files, if it keeps any there, are not cuemu's)
    if compgen -G "$TMPDIR/cuemu-nccl-*" > /dev/null; then
        fail "$1: files left in TMPDIR: $(cd "$TMPDIR" && find . | head -20)"
    fi
}
MPIRUN="mpirun --allow-run-as-root --oversubscribe -np 2 -x TMPDIR"
common="--data synthetic --samples 1024 --steps $STEPS --microbatches 4 --optimizer momentum
        --lr 0.05 --quiet --backend cuda"

same() { # $1 label, rest: plumb train arguments; local vs nccl final checkpoints, byte for byte
    local label=$1; shift
    timeout 120 "$EMU" train "$@" $common --save "$tmp/local.ck" > "$tmp/local.out" 2>&1 ||
        fail "$label: local run failed: $(cat "$tmp/local.out")"
    rm -f "$tmp/nccl.ck"
    timeout 120 $MPIRUN "$EMU" train "$@" $common --transport nccl --save "$tmp/nccl.ck" \
        > "$tmp/nccl.out" 2>&1 || fail "$label: nccl run failed: $(cat "$tmp/nccl.out")"
    [ -s "$tmp/nccl.ck" ] || fail "$label: rank 0 wrote no checkpoint: $(cat "$tmp/nccl.out")"
    cmp -s "$tmp/local.ck" "$tmp/nccl.ck" ||
        fail "$label: final weights differ between local and nccl: $(cat "$tmp/local.out") / $(cat "$tmp/nccl.out")"
    ! grep -q '^cuemu' "$tmp/nccl.out" || fail "$label: cuemu reported: $(grep '^cuemu' "$tmp/nccl.out")"
    [ "$(grep -c '^final:' "$tmp/nccl.out")" -eq 1 ] ||
        fail "$label: expected one final line (rank 0's): $(cat "$tmp/nccl.out")"
    leftovers "$label"
    echo "  $label: identical weights ($(grep '^final:' "$tmp/nccl.out"))"
}

# same_peak LABEL ARGS: the NCCL transport lends activations and reserves the gradients'
# staging in the worker's context, as the local transport does, so each worker's peak
# memory is the same with either (2 steps: the peak is reached in the first; without
# --quiet, which leaves the peak lines out; each rank prints its own worker's). The lines
# name the device each worker ran on: rank w's node-local GPU w under nccl, so the local
# run spreads its workers the same way (--devices 2: worker w on device w) and the lines
# must be equal whole, "worker w (device w): peak memory X MiB"
same_peak() {
    local label=$1; shift
    local args="--data synthetic --samples 256 --steps 2 --microbatches 4 --backend cuda"
    timeout 120 "$EMU" train "$@" $args --devices 2 > "$tmp/local.out" 2>&1 ||
        fail "$label: local run failed: $(cat "$tmp/local.out")"
    timeout 120 $MPIRUN "$EMU" train "$@" $args --transport nccl > "$tmp/nccl.out" 2>&1 ||
        fail "$label: nccl run failed: $(cat "$tmp/nccl.out")"
    local pl pn
    pl=$(grep 'peak memory' "$tmp/local.out" | sort)
    pn=$(grep 'peak memory' "$tmp/nccl.out" | sort)
    [ "$(echo "$pl" | grep -c '^worker 0 (device 0): peak memory ')" -eq 1 ] &&
        [ "$(echo "$pl" | grep -c '^worker 1 (device 1): peak memory ')" -eq 1 ] ||
        fail "$label: expected worker w's line to name device w: [$pl]"
    [ "$pl" = "$pn" ] || fail "$label: peak memory differs between local and nccl: [$pl] / [$pn]"
    leftovers "$label"
    echo "  $label:" $pn
}

echo "one rank: send to itself, receive, all-reduce (test_cuda_emu)"
TC=$(dirname "$EMU")/../tests/test_cuda_emu
if [ -x "$TC" ]; then
    "$TC" --filter 'cuda/nccl*' --verbose > "$tmp/tc.out" 2>&1 ||
        fail "test_cuda_emu nccl: $(tail -5 "$tmp/tc.out")"
    grep -q 'PASS.*nccl_one_rank' "$tmp/tc.out" || fail "the NCCL test did not run: $(cat "$tmp/tc.out")"
    leftovers "one rank"
    echo "  passed"
fi

echo "local vs nccl transport on cuemu, 2 ranks, $STEPS steps"
same "gpipe, 2 stages" "$model" --schedule gpipe --stages 2
same "pipedream, 2 stages" "$model" --schedule pipedream --stages 2
# one stage of the whole model on 2 replicas: the gradient all-reduce
same "one stage on 2 replicas (ncclAllReduce)" "$model" tests/data/fmnist-mlp-2-replicas.json
# the same under ZeRO-1: each replica's half of the momentum (ncclReduceScatter of the
# gradients, ncclAllGather of the weights), the whole state gathered on --save: the
# checkpoint is the local transport's, and the local one's is zero 0's (2 replicas: a + b)
cp "$tmp/local.ck" "$tmp/zero0.ck"
sed -e 's|"format": "plumb-plan/1",|"format": "plumb-plan/1", "zero": 1,|' \
    -e "s|\"cluster\": \"../../|\"cluster\": \"$PWD/|" tests/data/fmnist-mlp-2-replicas.json \
    > "$tmp/zero1.json"
same "one stage on 2 replicas, zero 1 (ncclReduceScatter, ncclAllGather)" "$model" "$tmp/zero1.json"
cmp -s "$tmp/zero0.ck" "$tmp/local.ck" || fail "zero 1's checkpoint differs from zero 0's"
echo "  and zero 0's checkpoint"
echo "local vs nccl transport: peak memory per worker"
same_peak "gpipe, 2 stages" "$model" --schedule gpipe --stages 2
same_peak "1f1b, 2 stages" "$model" --schedule 1f1b-flush --stages 2
same_peak "pipedream, 2 stages" "$model" --schedule pipedream --stages 2

# fault FAULT LABEL: a 2-stage run with PLUMB_FAULT=FAULT fails (not a timeout) within 60 s;
# leaves $tmp/f.out and the seconds taken in $took
fault() {
    local t0
    t0=$(date +%s)
    PLUMB_FAULT=$1 timeout 60 $MPIRUN -x PLUMB_FAULT "$EMU" train "$model" $common \
        --schedule gpipe --stages 2 --steps 12 --transport nccl --timeout ${TIMEOUT:-30} \
        > "$tmp/f.out" 2>&1
    local rc=$?
    took=$(( $(date +%s) - t0 ))
    [ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "$2: exit $rc (want a failure, not a hang): $(cat "$tmp/f.out")"
    ! grep -q '^final:' "$tmp/f.out" || fail "$2: the run reached its end: $(cat "$tmp/f.out")"
    ! grep -q 'cuemu: [^n]' "$tmp/f.out" || fail "$2: cuemu stopped the run: $(cat "$tmp/f.out")"
}
echo "a failing rank stops the other (no hang), its communicators removed"
fault worker:1:step:3 "failing rank"
grep -q "worker 1: injected fault at step 3" "$tmp/f.out" || fail "no fault message: $(cat "$tmp/f.out")"
leftovers "failing rank"
echo "  stopped in $took s"

echo "a rank killed by SIGKILL: the other notices (or mpirun ends it), no hang"
for w in 0 1; do
    fault worker:$w:step:3:kill "killed rank $w"
    if grep -q "has died\|directory is gone" "$tmp/f.out"; then
        how="the survivor: $(grep -m1 -o "communicator's rank [0-9]* (process [0-9]*) has died\|the communicator's directory is gone" "$tmp/f.out")"
    else
        grep -q "exited on signal 9" "$tmp/f.out" || fail "killed rank $w: neither rank nor mpirun said why: $(cat "$tmp/f.out")"
        how="mpirun ended the job"
    fi
    echo "  worker $w killed: ended in $took s ($how)"
    # a process killed outright cannot clean up; the survivor removes the communicators it
    # shares, unless mpirun kills it first
    rm -rf "${TMPDIR:?}"/cuemu-nccl-*
done

echo "a silent rank: the other times out (--timeout 3), the communicators are removed"
TIMEOUT=3 fault worker:1:step:3:stall "silent rank"
grep -q "made no progress for 3 s\|waited 3 s for" "$tmp/f.out" ||
    fail "silent rank: no timeout message: $(cat "$tmp/f.out")"
leftovers "silent rank"
echo "  ended in $took s"

# Last, as it fails while plumb has the bug it checks for: a rank whose nccl transport cannot
# be created (here ncclGetUniqueId fails: rank 1's TMPDIR does not exist) must end the job.
# cli/cmd_train.c jumps to its failure exit with rc still 2 ("bad input, found alike on
# every rank"), so rank 1 prints nothing and calls MPI_Finalize while rank 0 waits in the
# transport's MPI_Alltoall of the ids (exec/mpi/nccl_transport.c): the job hangs.
echo "a rank that cannot create the transport ends the job (no hang)"
t0=$(date +%s)
timeout 15 $MPIRUN sh -c 'if [ "${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-}}" = 1 ]; then
        TMPDIR=/nonexistent/cuemu-nccl-check; fi; exec "$@"' sh "$EMU" train "$model" $common \
    --schedule gpipe --stages 2 --transport nccl > "$tmp/c.out" 2>&1
rc=$?
took=$(( $(date +%s) - t0 ))
[ $rc -ne 124 ] || fail "a rank that cannot create the transport: the job hung (killed after $took s; plumb bug: cli/cmd_train.c exits the failed transport creation with status 2, so that rank calls MPI_Finalize silently while the other waits in MPI_Alltoall): $(cat "$tmp/c.out")"
[ $rc -ne 0 ] && grep -q "\[rank 1\] .*ncclGetUniqueId" "$tmp/c.out" ||
    fail "a rank that cannot create the transport: exit $rc, expected rank 1's error: $(cat "$tmp/c.out")"
# rank 0's id was made before the job was aborted: nobody joined it, nobody can remove it
rm -rf "${TMPDIR:?}"/cuemu-nccl-*
echo "  ended in $took s, exit $rc"
say "all passed"
