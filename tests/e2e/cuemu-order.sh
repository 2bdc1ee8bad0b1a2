#!/usr/bin/env bash
# cuemu-order.sh: the CUDA backend's layer tests on cuemu again, with blocks and threads run
# in reverse and in shuffled orders (CUEMU_ORDER, tests/cuemu/cuemu_fiber.cc). A kernel that
# reads shared memory another thread wrote without a barrier between them, or that needs
# its blocks to run in order, passes in one order and fails in another; on the GPU it
# would fail at random. Then whole training runs in each order must end with the same
# weights, bit for bit: the backend's reductions have a fixed order (no atomics), so the
# order in which the emulator runs threads and blocks must not change a single bit.
set -u
PLUMB=${PLUMB:-./plumb}
T=${PLUMB_EMU_TEST:-$(dirname "$PLUMB")/tests/test_cuda_emu}
if [ ! -x "$T" ]; then
    echo "cuemu-order.sh: SKIP: $T not built (nvcc not found, so no CUDA backend to emulate)"
    exit 0
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
fail=0
for order in reverse shuffle:1 shuffle:2; do
    if CUEMU_ORDER=$order "$T" --jobs "${PLUMB_TEST_JOBS:-2}" > "$log" 2>&1; then
        echo "cuemu-order.sh: $order: $(grep -o 'Tested: [0-9]* | Passing: [0-9]*' "$log")"
    else
        echo "cuemu-order.sh: FAIL: CUEMU_ORDER=$order:"
        grep -v '^\[----\]' "$log" | tail -20
        fail=1
    fi
done
EMU=$(dirname "$PLUMB")/emu/plumb
STEPS=4
if [ "${PLUMB_SAN:-0}" = 1 ] || grep -qa __asan_init "$EMU" 2> /dev/null; then STEPS=2; fi
dir=$(mktemp -d)
trap 'rm -f "$log"; rm -rf "$dir"' EXIT
# weights NAME ARGS...: trains on cuemu in each order; the saved weights must be identical
weights() {
    local name=$1
    shift
    for order in forward reverse shuffle:3; do
        if ! CUEMU_ORDER=$order timeout 300 "$EMU" "$@" --backend cuda --steps $STEPS \
            --save "$dir/$name-$order.ckpt" > "$log" 2>&1; then
            echo "cuemu-order.sh: FAIL: $name, CUEMU_ORDER=$order: $(tail -3 "$log")"
            fail=1
            return
        fi
    done
    for order in reverse shuffle:3; do
        if ! cmp -s "$dir/$name-forward.ckpt" "$dir/$name-$order.ckpt"; then
            echo "cuemu-order.sh: FAIL: $name: the weights after CUEMU_ORDER=$order differ from forward's"
            fail=1
            return
        fi
    done
    echo "cuemu-order.sh: $name: $STEPS steps, the same weights in all three orders"
}
if [ -x "$EMU" ]; then
    weights fmnist-cnn train examples/models/fmnist-cnn.json --data synthetic --samples 256 \
        --batch 16 --seed 7 --schedule 1f1b-flush --stages 2 --microbatches 2 --devices 2
    weights gpt-tiny train tests/data/gpt-tiny.json --data text --samples 128 --batch 8 \
        --optimizer adam --seed 5 --schedule zb-v --stages 2 --microbatches 2
fi
[ $fail = 0 ] && echo "cuemu-order.sh: all passed"
exit $fail
