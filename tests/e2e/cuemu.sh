#!/usr/bin/env bash
# cuemu.sh: end-to-end runs of the CUDA backend on cuemu, the CPU emulator of CUDA, cuBLAS
# and cuDNN (tests/cuemu/; the binary is $BUILD/emu/plumb, built when nvcc works). The same
# checks bench/gpu-check.sh makes on a GPU, on the CPU: per-step losses of `plumb train
# --backend cuda` against the CPU backend (1 stage; 4 stages over 2 emulated devices, so the
# activations cross devices by peer copies ordered with events; bf16 against cpu-bf16; a
# small transformer), and `plumb profile --backend cuda` writing a profile that plans.
set -u
PLUMB=${PLUMB:-./plumb}
EMU=${PLUMB_EMU:-$(dirname "$PLUMB")/emu/plumb}
if [ ! -x "$EMU" ]; then
    echo "cuemu.sh: SKIP: $EMU not built (nvcc not found, so no CUDA backend to emulate)"
    exit 0
fi
# under the sanitizers (make test SAN=1) the emulated GPU runs ~10x slower: a few steps
# there look for memory errors; the loss comparison proper is the plain build's
STEPS=12
if [ "${PLUMB_SAN:-0}" = 1 ] || grep -qa __asan_init "$EMU" 2> /dev/null; then STEPS=3; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "cuemu.sh: FAIL: $*" >&2; exit 1; }

# "step N/M ... loss X" -> "N X"
losses() { awk '/^step /{split($2, s, "/"); for (i = 1; i <= NF; i++) if ($i == "loss") print s[1], $(i + 1)}' "$1"; }

# match TITLE TOL REF-BACKEND EMU-BACKEND ARGS...: per-step losses within TOL (relative);
# $EMU_ARGS are added to the cuemu run only
EMU_ARGS=()
match() {
    local title=$1 tol=$2 ref=$3 dev=$4
    shift 4
    echo "$title"
    timeout 600 "$PLUMB" "$@" --backend "$ref" > "$tmp/ref.log" 2>&1 ||
        fail "$title: the $ref run failed: $(tail -3 "$tmp/ref.log")"
    timeout 600 "$EMU" "$@" --backend "$dev" "${EMU_ARGS[@]}" > "$tmp/emu.log" 2>&1 ||
        fail "$title: the $dev run on cuemu failed: $(tail -3 "$tmp/emu.log")"
    losses "$tmp/ref.log" > "$tmp/a"
    losses "$tmp/emu.log" > "$tmp/b"
    local row
    row=$(awk 'NR == FNR { a[$1] = $2; next } ($1 in a) { print $1, a[$1], $2 }' "$tmp/a" "$tmp/b" |
        awk -v tol="$tol" '{ n++; d = $2 - $3; if (d < 0) d = -d; r = d / ($2 > 1e-9 ? $2 : 1e-9)
            if (r >= w) { w = r; at = $1 } }
            END { printf "%d %.3g %d %s\n", n, w, at, (n > 0 && w <= tol + 0) ? "ok" : "FAIL" }')
    set -- $row
    echo "  $1 steps, max relative loss difference $2 at step $3 (tolerance $tol)"
    [ "$1" -ge "$STEPS" ] || fail "$title: only $1 of $STEPS steps logged"
    [ "$4" = ok ] || fail "$title: losses differ by $2 (tolerance $tol)"
}

CNN=(train examples/models/fmnist-cnn.json --data synthetic --samples 512 --steps $STEPS
     --log-every 1 --batch 16 --seed 7)
# fp32, 1e-3 relative per step: the layers agree to ~1e-6 (tests/test_cuda_emu), which a
# dozen SGD steps grow by far less; a wrong gradient moves the loss by 1e-2 within a few
match "fmnist-cnn, 1 stage" 1e-3 cpu cuda "${CNN[@]}"
EMU_ARGS=(--devices 2)
match "fmnist-cnn, 4 stages (1F1B) over 2 devices" 1e-3 cpu cuda "${CNN[@]}" \
    --schedule 1f1b-flush --stages 4 --microbatches 4
EMU_ARGS=()
# bf16 against its CPU twin: the same inputs rounded the same way (tests/test_cpu_bf16.c)
match "fmnist-cnn, 1 stage, bf16" 5e-3 cpu-bf16 cuda-bf16 "${CNN[@]}"

match "tiny transformer, adam, 2 stages (zero-bubble V)" 1e-3 cpu cuda train tests/data/gpt-tiny.json \
    --data text --samples 256 --steps $STEPS --log-every 1 --batch 8 --optimizer adam --seed 5 \
    --schedule zb-v --stages 2 --microbatches 2

# the convolution paths cuDNN's search does not pick here: im2col + cuBLAS when cuDNN finds
# no algorithm, and results that name CUDNN_DEFAULT_MATH (strict fp32 must still hold)
TC=$(dirname "$PLUMB")/tests/test_cuda_emu
for mode in none default-math; do
    echo "convolutions with CUEMU_CUDNN_FIND=$mode"
    CUEMU_CUDNN_FIND=$mode "$TC" --filter 'cuda/conv2d' > "$tmp/conv.log" 2>&1 ||
        fail "conv2d with CUEMU_CUDNN_FIND=$mode: $(tail -5 "$tmp/conv.log")"
done
EMU_ARGS=()
CUEMU_CUDNN_FIND=none match "fmnist-cnn, 1 stage, im2col convolutions" 1e-3 cpu cuda "${CNN[@]}"

echo "plumb profile --backend cuda, then plan on it"
"$EMU" profile examples/models/fmnist-cnn.json --backend cuda --batch 8 --runs 1 --warmup 1 \
    -o "$tmp/profile.json" > "$tmp/profile.log" 2>&1 ||
    fail "profile on cuemu failed: $(tail -3 "$tmp/profile.log")"
"$PLUMB" plan -p "$tmp/profile.json" -c profiles/clusters/cluster-a-4x4.json -o "$tmp/plan.json" \
    > "$tmp/plan.log" 2>&1 || fail "plan on the cuemu profile failed: $(tail -3 "$tmp/plan.log")"
echo "  profile and plan written"

# which device each worker uses: the backend's log (PLUMB_CUDA_LOG) names the device of the
# context that picks each convolution; fmnist-cnn's two convolutions fall in stages 0 and 1
# of 4 stages, so a local run puts them on --device and --device + 1 mod --devices
echo "--device and --devices: worker w on device --device + w mod --devices"
SMALL=(train examples/models/fmnist-cnn.json --data synthetic --samples 64 --steps 1 --batch 16
       --seed 7 --backend cuda)
convdevs() { grep -o 'plumb cuda: device [0-9]*: conv ([0-9]*, [0-9]*' "$1" |
    awk '{ sub(":", "", $4); print $4 ":" $7 }' | sort -u | tr "\n" " "; }
PLUMB_CUDA_LOG=1 "$EMU" "${SMALL[@]}" --schedule gpipe --stages 2 --microbatches 2 --device 1 \
    > "$tmp/dev.log" 2>&1 || fail "--device 1 on cuemu failed: $(tail -3 "$tmp/dev.log")"
got=$(convdevs "$tmp/dev.log")
[ "$got" = "1:1 1:32 " ] || fail "--device 1, 2 stages: convolutions (device:channels in) on [$got], expected every one on device 1"
echo "  --device 1: both stages on device 1 ($got)"
peaks() { grep -o '^worker [0-9]* (device [0-9]*): peak' "$1" | tr "\n" ";"; }
got=$(peaks "$tmp/dev.log") # before: worker w's line named device w, the schedule's id
[ "$got" = "worker 0 (device 1): peak;worker 1 (device 1): peak;" ] ||
    fail "--device 1, 2 stages: peak memory lines [$got], expected both on device 1"
CUEMU_DEVICES=3 PLUMB_CUDA_LOG=1 "$EMU" "${SMALL[@]}" --schedule 1f1b-flush --stages 4 \
    --microbatches 4 --device 1 --devices 2 > "$tmp/dev.log" 2>&1 ||
    fail "--device 1 --devices 2 on cuemu failed: $(tail -3 "$tmp/dev.log")"
got=$(convdevs "$tmp/dev.log") # device 1 also evaluates both convolutions at the end
[ "$got" = "1:1 1:32 2:32 " ] || fail "--device 1 --devices 2, 4 stages: convolutions (device:channels in) on [$got], expected stage 0's on device 1 and stage 1's on device 2"
got=$(peaks "$tmp/dev.log")
[ "$got" = "worker 0 (device 1): peak;worker 1 (device 2): peak;worker 2 (device 1): peak;worker 3 (device 2): peak;" ] ||
    fail "--device 1 --devices 2, 4 stages: peak memory lines [$got], expected worker w's on device 1 + w mod 2"
echo "  --device 1 --devices 2 of 3 devices: stage 0 on device 1, stage 1 on device 2 ($(convdevs "$tmp/dev.log")), peak memory lines alike"
# bad input: a device beyond those present is one line, status 2, before any work
badinput() { # WANT-IN-LINE ARGS...
    local want=$1
    shift
    local rc=0
    "$@" > "$tmp/bad.out" 2> "$tmp/bad.err" || rc=$?
    [ "$rc" = 2 ] || fail "$* exited $rc, expected 2: $(cat "$tmp/bad.err")"
    [ "$(wc -l < "$tmp/bad.err")" = 1 ] && grep -q "^plumb: .*$want" "$tmp/bad.err" ||
        fail "$*: expected one line with \"$want\", got: $(cat "$tmp/bad.err")"
    [ ! -s "$tmp/bad.out" ] || fail "$*: printed before refusing: $(head -2 "$tmp/bad.out")"
    echo "  refused: $(cat "$tmp/bad.err")"
}
badinput "device: expected a CUDA device index in \[0, 2) (got 2)" \
    "$EMU" "${SMALL[@]}" --schedule gpipe --stages 2 --device 2
badinput "--devices: expected the workers' devices 1 to 2 .*device 2 is missing" \
    "$EMU" "${SMALL[@]}" --schedule gpipe --stages 2 --device 1 --devices 2
badinput "--devices: expected the workers' devices 0 to 1 .*device 1 is missing (the CPU backend" \
    "$PLUMB" "${SMALL[@]/cuda/cpu}" --schedule gpipe --stages 2 --devices 2
badinput "--devices: not with --transport mpi" \
    "$PLUMB" "${SMALL[@]/cuda/cpu}" --schedule gpipe --stages 2 --transport mpi --devices 2
echo "cuemu.sh: all passed"
