#!/usr/bin/env bash
# exec.sh: the CPU executor's speed. bench_gemm (the backend's GEMM, linear and conv2d
# GFLOP/s against OpenBLAS's own sgemm in the same run), then training throughput in
# samples/s: fmnist-cnn sequential and as a 2-stage 1f1b-flush pipeline, and gpt-mini.
# Env: PLUMB (binary), PLUMB_BENCH_DIR (built bench programs), BENCH_SECONDS (per GEMM case).
set -u
PLUMB=${PLUMB:-./plumb}
dir=${PLUMB_BENCH_DIR:-build/bench}
"$dir/bench_gemm" "${BENCH_SECONDS:-0.3}" || exit 1
echo "note: OpenBLAS core above; on CPUs it misdetects (generic \"Prescott\" kernels on an"
echo "      AVX-512 machine) set OPENBLAS_CORETYPE=SkylakeX (or Haswell) for its real speed"
run() { # label, then plumb train arguments; prints the final throughput line
    local label=$1; shift
    local out
    out=$("$PLUMB" train "$@" --quiet 2>&1) || { echo "$label: FAILED: $out"; return 1; }
    echo "$label: $(echo "$out" | sed -n 's/.*, \([0-9]* samples\/s\)$/\1/p')"
}
rc=0
run "fmnist-cnn, batch 64, sequential        " examples/models/fmnist-cnn.json --data synthetic \
    --samples 2048 --steps 20 || rc=1
run "fmnist-cnn, batch 64 = 4x16, 2-stage 1f1b" examples/models/fmnist-cnn.json --data synthetic \
    --samples 2048 --steps 20 --microbatches 4 --schedule 1f1b-flush --stages 2 || rc=1
run "fmnist-mlp, batch 64, sequential        " examples/models/fmnist-mlp.json --data synthetic \
    --samples 4096 --steps 100 || rc=1
run "gpt-mini, batch 8 x 64 tokens, adam      " examples/models/gpt-mini.json --data text \
    --samples 512 --batch 8 --steps 10 --optimizer adam || rc=1
exit $rc
