#!/usr/bin/env bash
# accuracy.sh: a pipelined run learns for real: fmnist-cnn on Fashion-MNIST through a
# 4-stage PipeDream pipeline (--schedule pipedream --stages 4, 4 microbatches of 16, SGD
# lr 0.05) reaches at least 88% test accuracy within 2 epochs (1874 steps): about 3 minutes
# on 2 cores with OpenBLAS's AVX-512 kernels (docs/exec.md). Skipped under a sanitizer
# build (PLUMB_SAN=1: far too slow there) and when the data set is missing.
set -u
PLUMB=${PLUMB:-./plumb}
if [ "${PLUMB_SAN:-0}" = 1 ] || grep -qa __asan_init "$PLUMB" 2> /dev/null; then
    echo "accuracy.sh: SKIP: sanitizer build (PLUMB_SAN=1)"
    exit 0
fi
if [ ! -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
    echo "accuracy.sh: SKIP: Fashion-MNIST not installed (dataset-fashion-mnist)"
    exit 0
fi
# OpenBLAS 0.3.21 runs its generic kernels on AVX-512 CPUs unless told the core
grep -qw avx512f /proc/cpuinfo 2> /dev/null && export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SkylakeX}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
t0=$(date +%s)
"$PLUMB" train examples/models/fmnist-cnn.json --schedule pipedream --stages 4 --microbatches 4 \
    --epochs 2 --log-every 200 > "$out" 2>&1 ||
    { echo "accuracy.sh: FAIL: run failed: $(cat "$out")" >&2; exit 1; }
acc=$(awk '/^test:/{print $5}' "$out" | tr -d '%')
[ -n "$acc" ] || { echo "accuracy.sh: FAIL: no test line: $(cat "$out")" >&2; exit 1; }
echo "  fmnist-cnn, 4-stage pipedream, 2 epochs: test accuracy $acc% in $(( $(date +%s) - t0 )) s"
awk -v a="$acc" 'BEGIN{exit !(a >= 88)}' ||
    { echo "accuracy.sh: FAIL: test accuracy $acc% (want >= 88%)" >&2; exit 1; }
echo "accuracy.sh: passed"
