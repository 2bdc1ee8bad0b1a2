#!/usr/bin/env bash
# train-mpi.sh: `plumb train --transport mpi` under mpirun (2 ranks, as root on 2 cores as CI
# runs it) gives the same final weights as the in-process local transport: a 2-stage GPipe
# and a 2-stage PipeDream pipeline, and a stage on 2 replicas (gradient all-reduce on a
# sub-communicator). A rank that fails (PLUMB_FAULT) stops the other with a clear error; a
# rank killed outright ends the job; a silent rank makes the other time out; none hangs. Skipped when mpirun is missing or the
# binary was built without MPI.
set -u
PLUMB=${PLUMB:-./plumb}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "train-mpi.sh: FAIL: $*" >&2; exit 1; }
if ! command -v mpirun > /dev/null 2>&1; then
    echo "train-mpi.sh: SKIP: mpirun not found (apt-get install openmpi-bin)"
    exit 0
fi
if "$PLUMB" train examples/models/fmnist-mlp.json --schedule gpipe --transport mpi --steps 1 \
        2>&1 | grep -q "not built into this binary"; then
    echo "train-mpi.sh: SKIP: this plumb was built without MPI"
    exit 0
fi
export OPENBLAS_NUM_THREADS=1 # the same GEMM summation order in both runs
if [ "${PLUMB_SAN:-0}" = 1 ] || grep -qa __asan_init "$PLUMB" 2> /dev/null; then
    # the MPI library's own allocations outlive MPI_Finalize: not plumb's leaks
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
fi
MPIRUN="mpirun --allow-run-as-root --oversubscribe -np 2"
model=examples/models/fmnist-mlp.json
common="--data synthetic --samples 1024 --steps 12 --microbatches 4 --optimizer momentum --lr 0.05 --quiet"

same() { # $1 label, rest: plumb train arguments; local vs mpi final checkpoints, byte for byte
    local label=$1; shift
    timeout 120 "$PLUMB" train "$@" $common --save "$tmp/local.ck" > "$tmp/local.out" 2>&1 ||
        fail "$label: local run failed: $(cat "$tmp/local.out")"
    timeout 120 $MPIRUN "$PLUMB" train "$@" $common --transport mpi --save "$tmp/mpi.ck" \
        > "$tmp/mpi.out" 2>&1 || fail "$label: mpi run failed: $(cat "$tmp/mpi.out")"
    [ -s "$tmp/mpi.ck" ] || fail "$label: rank 0 wrote no checkpoint: $(cat "$tmp/mpi.out")"
    cmp -s "$tmp/local.ck" "$tmp/mpi.ck" ||
        fail "$label: final weights differ between local and mpi: $(cat "$tmp/local.out") / $(cat "$tmp/mpi.out")"
    [ "$(grep -c '^final:' "$tmp/mpi.out")" -eq 1 ] ||
        fail "$label: expected one final line (rank 0's): $(cat "$tmp/mpi.out")"
    echo "  $label: identical weights ($(grep '^final:' "$tmp/mpi.out"))"
}
echo "local vs mpi transport, 2 ranks"
same "gpipe, 2 stages" "$model" --schedule gpipe --stages 2
same "pipedream, 2 stages" "$model" --schedule pipedream --stages 2
# one stage of the whole model on 2 replicas: the gradient all-reduce
same "one stage on 2 replicas (all-reduce)" "$model" tests/data/fmnist-mlp-2-replicas.json

echo "checkpoints under mpirun: rank 0 writes them; a rank killed mid-run, resumed: same weights"
rm -rf "$tmp/ck"
(exec 2> /dev/null; PLUMB_FAULT=worker:1:step:10:kill timeout 90 $MPIRUN -x PLUMB_FAULT "$PLUMB" train \
    "$model" $common --schedule pipedream --stages 2 --transport mpi --checkpoint "$tmp/ck" \
    --checkpoint-every 4 > "$tmp/ck1.out" 2>&1)
[ -s "$tmp/ck/ckpt-00000008.ckpt" ] || fail "no checkpoint of step 8: $(ls "$tmp/ck"; cat "$tmp/ck1.out")"
[ ! -e "$tmp/ck/ckpt-00000012.ckpt" ] && ! grep -q '^final:' "$tmp/ck1.out" ||
    fail "the killed job ran to its end: $(cat "$tmp/ck1.out")"
timeout 120 $MPIRUN "$PLUMB" train "$model" $common --schedule pipedream --stages 2 --transport mpi \
    --checkpoint "$tmp/ck" --checkpoint-every 4 --resume "$tmp/ck" --save "$tmp/mpi-res.ck" \
    > "$tmp/ck2.out" 2>&1 || fail "resume under mpirun failed: $(cat "$tmp/ck2.out")"
timeout 120 "$PLUMB" train "$model" $common --schedule pipedream --stages 2 \
    --checkpoint "$tmp/ck-local" --checkpoint-every 4 --save "$tmp/local-ck.ck" \
    > "$tmp/ck3.out" 2>&1 || fail "local checkpointed run failed: $(cat "$tmp/ck3.out")"
cmp -s "$tmp/mpi-res.ck" "$tmp/local-ck.ck" ||
    fail "mpi killed + resumed differs from an uninterrupted local run (checkpoint every 4)"
echo "  identical"

echo "wrong rank count: status 2 with the expected -np"
timeout 60 mpirun --allow-run-as-root --oversubscribe -np 2 "$PLUMB" train "$model" $common \
    --schedule gpipe --stages 3 --transport mpi > "$tmp/np.out" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "3 workers on 2 ranks: exit $rc (want 2): $(cat "$tmp/np.out")"
# (mpirun adds its own notice of the non-zero exit; plumb's line comes once, from rank 0)
[ "$(grep -c '^plumb: ' "$tmp/np.out")" -eq 1 ] && grep -q "expected mpirun -np 3" "$tmp/np.out" ||
    fail "expected rank 0's one line with the -np hint: $(cat "$tmp/np.out")"

echo "a failing rank stops the other (no hang)"
t0=$(date +%s)
PLUMB_FAULT=worker:1:step:3 timeout 90 $MPIRUN -x PLUMB_FAULT "$PLUMB" train "$model" $common \
    --schedule gpipe --stages 2 --transport mpi --timeout 30 > "$tmp/f.out" 2>&1
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "fault run: exit $rc (want a failure, not a hang): $(cat "$tmp/f.out")"
grep -q "worker 1: injected fault at step 3" "$tmp/f.out" || fail "no fault message: $(cat "$tmp/f.out")"
echo "  stopped in $(( $(date +%s) - t0 )) s, exit $rc"

echo "a rank killed by SIGKILL ends the job (no hang)"
t0=$(date +%s)
PLUMB_FAULT=worker:0:step:3:kill timeout 90 $MPIRUN -x PLUMB_FAULT "$PLUMB" train "$model" \
    $common --schedule gpipe --stages 2 --transport mpi --timeout 30 > "$tmp/k.out" 2>&1
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "killed rank: exit $rc (want a failure, not a hang): $(cat "$tmp/k.out")"
echo "  ended in $(( $(date +%s) - t0 )) s, exit $rc"

echo "a silent rank: the other times out (--timeout 3) and the job ends"
t0=$(date +%s)
PLUMB_FAULT=worker:1:step:3:stall timeout 90 $MPIRUN -x PLUMB_FAULT "$PLUMB" train "$model" \
    $common --schedule gpipe --stages 2 --transport mpi --timeout 3 > "$tmp/s.out" 2>&1
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "silent rank: exit $rc (want a failure, not a hang): $(cat "$tmp/s.out")"
grep -q "worker 0 waited 3 s for message .* from worker 1" "$tmp/s.out" ||
    fail "silent rank: no timeout message: $(cat "$tmp/s.out")"
echo "  ended in $(( $(date +%s) - t0 )) s, exit $rc"
echo "train-mpi.sh: all passed"
