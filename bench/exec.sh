#!/usr/bin/env bash
# exec.sh: the CPU executor's speed. bench_gemm (the backend's GEMM, linear and conv2d
# GFLOP/s against OpenBLAS's own sgemm in the same run), then training throughput in
# samples/s: fmnist-cnn sequential and as a 2-stage 1f1b-flush pipeline (threads, and two
# MPI ranks when mpirun is there) with the pipeline / sequential ratio, and gpt-mini.
# Env: PLUMB (binary), PLUMB_BENCH_DIR (built bench programs), BENCH_SECONDS (per GEMM case).
set -u
PLUMB=${PLUMB:-./plumb}
dir=${PLUMB_BENCH_DIR:-build/bench}
"$dir/bench_gemm" "${BENCH_SECONDS:-0.3}" || exit 1
echo "note: OpenBLAS core above; on CPUs it misdetects (generic \"Prescott\" kernels on an"
echo "      AVX-512 machine) set OPENBLAS_CORETYPE=SkylakeX (or Haswell) for its real speed"
last=0
run() { # label, then plumb train arguments (after an optional "mpirun ..." prefix up to
        # "--"); prints the final throughput line and keeps the figure in $last
    local label=$1; shift
    local pre=()
    if [ "$1" = mpirun ]; then
        while [ "$1" != -- ]; do pre+=("$1"); shift; done
        shift
    fi
    local out
    out=$("${pre[@]}" "$PLUMB" train "$@" --quiet 2>&1) || { echo "$label: FAILED: $out"; return 1; }
    last=$(echo "$out" | sed -n 's/^final:.*, \([0-9]*\) samples\/s$/\1/p')
    echo "$label: $last samples/s"
}
rc=0
cnn="examples/models/fmnist-cnn.json --data synthetic --samples 4096 --steps 40"
run "fmnist-cnn, batch 64, sequential        " $cnn || rc=1
seq=$last
run "fmnist-cnn, batch 64 = 4x16, 2-stage 1f1b" $cnn --microbatches 4 --schedule 1f1b-flush \
    --stages 2 || rc=1
awk -v a="$last" -v b="$seq" 'BEGIN{if (b > 0) printf "  2-stage pipeline / sequential: %.2fx\n", a / b}'
if command -v mpirun > /dev/null 2>&1; then
    run "same, 2 MPI ranks (--transport mpi)     " mpirun --allow-run-as-root --oversubscribe \
        -np 2 -- $cnn --microbatches 4 --schedule 1f1b-flush --stages 2 --transport mpi || rc=1
    awk -v a="$last" -v b="$seq" 'BEGIN{if (b > 0) printf "  2 ranks / sequential: %.2fx\n", a / b}'
fi
run "fmnist-mlp, batch 64, sequential        " examples/models/fmnist-mlp.json --data synthetic \
    --samples 4096 --steps 100 || rc=1
run "gpt-mini, batch 8 x 64 tokens, adam      " examples/models/gpt-mini.json --data text \
    --samples 512 --batch 8 --steps 10 --optimizer adam || rc=1
exit $rc
