# shellcheck shell=bash disable=SC2034,SC2154 # PLUMB, d and die are the sourcing script's
# train_mini.sh: the start and the mpirun runs that train-tp-plan.sh and train-zero.sh share
# (not a test itself: run-tests.sh runs only tests/e2e/*.sh). The script sets PLUMB, d (its
# scratch folder) and die (prints its FAIL line and exits) first. Sourcing it names
# gpt-mini's model and LLM files (model, llm), the 8-CPU cluster (clus) and the training
# runs' arguments (args), and turns off AddressSanitizer's leak check under a sanitized
# build (the MPI library's own allocations outlive MPI_Finalize: not plumb's leaks).
model=examples/models/gpt-mini.json
llm=examples/llm/gpt-mini.json
clus=examples/clusters/cpu-1x8.json
args=(--steps 12 --samples 512 --log-every 3)
if [ "${PLUMB_SAN:-0}" = 1 ] || grep -qa __asan_init "$PLUMB" 2> /dev/null; then
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
fi

# mpi_usable MODEL: true when mpirun is on the PATH and $PLUMB has the MPI transport built
# in (asked with a one-step run of MODEL, which it refuses without mpirun's ranks).
mpi_usable() {
    command -v mpirun > /dev/null 2>&1 && ! "$PLUMB" train "$1" --tp 2 --transport mpi \
        --steps 1 2>&1 | grep -q "not built into this binary"
}

# mpi_train8 LOG ARGS...: `mpirun -np 8 $PLUMB train ARGS --transport mpi` (one process per
# worker and tensor-parallel rank of a tp 2 x pp 2 x dp 2 plan; 300 s at most), its output
# in LOG; dies when it fails or did not run on 8 ranks.
mpi_train8() {
    local log=$1
    shift
    mkdir -p "$d/tmpdir"
    TMPDIR="$d/tmpdir" timeout 300 mpirun --allow-run-as-root --oversubscribe -np 8 -x TMPDIR \
        -x OPENBLAS_NUM_THREADS=1 ${ASAN_OPTIONS:+-x ASAN_OPTIONS} "$PLUMB" train "$@" \
        --transport mpi > "$log" 2>&1 || die "mpirun -np 8: $(cat "$log")"
    grep -q "4 workers x tp 2 (8 ranks)" "$log" || die "not 8 ranks: $(head -3 "$log")"
}
