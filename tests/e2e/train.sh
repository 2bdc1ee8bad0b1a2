#!/usr/bin/env bash
# train.sh: end-to-end checks of `plumb train` on the CPU backend: the Fashion-MNIST MLP
# trains a few hundred steps and its loss falls; a tiny transformer learns generated text;
# synthetic data and gradient accumulation run; the peak memory lines name the device each
# worker ran on; bad input fails with one line and status 2.
set -u
PLUMB=${PLUMB:-./plumb}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "train.sh: FAIL: $*" >&2; exit 1; }

# loss of the first and the last progress line: "step N/M  epoch E  loss X ..."
first_loss() { awk '/^step /{for(i=1;i<=NF;i++) if($i=="loss"){print $(i+1); exit}}' "$1"; }
last_loss() { awk '/^step /{for(i=1;i<=NF;i++) if($i=="loss") l=$(i+1)} END{print l}' "$1"; }
falls() { # $1 log, $2 factor: last loss < factor * first loss
    local a b
    a=$(first_loss "$1"); b=$(last_loss "$1")
    [ -n "$a" ] && [ -n "$b" ] || fail "no progress lines in $1: $(cat "$1")"
    awk -v a="$a" -v b="$b" -v f="$2" 'BEGIN{exit !(b < f * a)}' ||
        fail "loss did not fall enough: first $a, last $b (want last < $2 x first)"
    echo "  loss $a -> $b"
}

echo "fmnist-mlp, 300 steps of 64"
"$PLUMB" train examples/models/fmnist-mlp.json --steps 300 --log-every 20 --seed 3 \
    > "$tmp/mlp.log" 2>&1 || fail "fmnist-mlp run failed: $(cat "$tmp/mlp.log")"
falls "$tmp/mlp.log" 0.6
acc=$(awk '/^test:/{print $5}' "$tmp/mlp.log" | tr -d '%')
awk -v a="$acc" 'BEGIN{exit !(a > 70)}' || fail "test accuracy $acc% (want > 70%)"
echo "  test accuracy $acc%"

echo "same seed, same result (deterministic)"
"$PLUMB" train examples/models/fmnist-mlp.json --steps 300 --log-every 20 --seed 3 \
    > "$tmp/mlp2.log" 2>&1 || fail "second run failed"
# OpenBLAS may change summation order with its thread count; compare 3 decimals
[ "$(last_loss "$tmp/mlp.log" | cut -c1-5)" = "$(last_loss "$tmp/mlp2.log" | cut -c1-5)" ] ||
    fail "two runs with --seed 3 differ: $(last_loss "$tmp/mlp.log") vs $(last_loss "$tmp/mlp2.log")"

echo "tiny transformer on generated text, adam"
"$PLUMB" train tests/data/gpt-tiny.json --optimizer adam --lr 0.003 --batch 16 --steps 150 \
    --samples 2048 --log-every 25 > "$tmp/gpt.log" 2>&1 || fail "gpt-tiny failed: $(cat "$tmp/gpt.log")"
falls "$tmp/gpt.log" 0.5

echo "synthetic data, momentum, gradient accumulation over 4 microbatches"
"$PLUMB" train examples/models/fmnist-cnn.json --data synthetic --samples 512 --batch 32 \
    --microbatches 4 --optimizer momentum --steps 4 > "$tmp/syn.log" 2>&1 ||
    fail "synthetic run failed: $(cat "$tmp/syn.log")"
grep -q "minibatch 32 = 4 x 8" "$tmp/syn.log" || fail "microbatching not reported: $(cat "$tmp/syn.log")"

echo "pipelined: 1f1b-flush on 3 stages and zb-h1 with recomputation match sequential training"
"$PLUMB" train examples/models/fmnist-mlp.json --steps 60 --microbatches 4 --quiet --seed 2 \
    > "$tmp/seq.out" 2>&1 || fail "sequential run failed: $(cat "$tmp/seq.out")"
"$PLUMB" train examples/models/fmnist-mlp.json --steps 60 --microbatches 4 --quiet --seed 2 \
    --schedule 1f1b-flush --stages 3 --trace "$tmp/trace.json" > "$tmp/pipe.out" 2>&1 ||
    fail "pipelined run failed: $(cat "$tmp/pipe.out")"
tl() { sed -n 's/.*test loss \([0-9.]*\).*/\1/p' "$1"; }
[ -n "$(tl "$tmp/seq.out")" ] && [ "$(tl "$tmp/seq.out" | cut -c1-5)" = "$(tl "$tmp/pipe.out" | cut -c1-5)" ] ||
    fail "test loss differs: sequential $(cat "$tmp/seq.out"), pipelined $(cat "$tmp/pipe.out")"
echo "  test loss $(tl "$tmp/seq.out") both"
nev=$(grep -o '"ph": *"X"' "$tmp/trace.json" | wc -l)
[ "$nev" -ge 480 ] || fail "trace has $nev timed events (want >= 480: F and B of 60 x 4 microbatches)"
grep -q '"format": *"plumb-trace/1"' "$tmp/trace.json" || fail "trace lacks its format"
echo "  trace: $nev timed events"
"$PLUMB" train examples/models/fmnist-mlp.json --steps 60 --microbatches 4 --quiet --seed 2 \
    --schedule zb-h1 --stages 3 --recompute > "$tmp/rec.out" 2>&1 ||
    fail "recompute run failed: $(cat "$tmp/rec.out")"
[ "$(tl "$tmp/seq.out" | cut -c1-5)" = "$(tl "$tmp/rec.out" | cut -c1-5)" ] ||
    fail "zb-h1 with --recompute: $(cat "$tmp/rec.out") vs sequential $(cat "$tmp/seq.out")"
"$PLUMB" train examples/models/fmnist-mlp.json --steps 20 --microbatches 4 --quiet \
    --schedule pipedream --stages 2 > "$tmp/pd.out" 2>&1 || fail "pipedream run failed: $(cat "$tmp/pd.out")"
echo "the peak memory lines name the device each worker ran on (the CPU backend's one)"
"$PLUMB" train examples/models/fmnist-mlp.json --data synthetic --samples 256 --steps 2 \
    --microbatches 2 --schedule gpipe --stages 2 > "$tmp/peak.out" 2>&1 ||
    fail "2-stage run failed: $(cat "$tmp/peak.out")"
got=$(grep -o '^worker [0-9]* (device [0-9]*): peak memory' "$tmp/peak.out" | tr '\n' ';')
# before: "worker 1 (device 1)", the schedule's device id
[ "$got" = "worker 0 (device 0): peak memory;worker 1 (device 0): peak memory;" ] ||
    fail "expected both workers' lines to name device 0: $(cat "$tmp/peak.out")"
echo "  $(grep -c '^worker [01] (device 0): peak memory' "$tmp/peak.out") lines on device 0"

layer() { printf '{"name": "l%d", "kind": "%s", "forward_ms": 1, "backward_ms": 1, "activation_bytes": 1024, "parameter_bytes": %d}' "$@"; }
sst() { printf '{"first_layer": %d, "last_layer": %d, "replicas": 1, "devices": [%d]}' "$@"; }
# plan_matches NAME SCHEDULE-FIELDS STAGES: fmnist-mlp trained with the plan $tmp/NAME.json
# reaches sequential training's test loss
plan_matches() {
    cat > "$tmp/$1.json" <<JSON
{"format": "plumb-plan/1",
 "profile": {"format": "plumb-profile/1", "name": "fmnist-mlp", "device": "cpu", "minibatch": 64,
   "layers": [$(layer 0 Flatten 0), $(layer 1 Linear 803840), $(layer 2 ReLU 0), $(layer 3 Linear 131584),
              $(layer 4 ReLU 0), $(layer 5 Linear 5160), $(layer 6 Loss 0)]},
 "cluster": "$PWD/profiles/clusters/cluster-c-4x1.json",
 $2, "microbatch_size": 16, "microbatches": 4, "optimizer": "sgd",
 "stages": $3}
JSON
    "$PLUMB" train examples/models/fmnist-mlp.json "$tmp/$1.json" --steps 60 --quiet --seed 2 \
        > "$tmp/$1.out" 2>&1 || fail "run with the $1 plan failed: $(cat "$tmp/$1.out")"
    [ "$(tl "$tmp/seq.out" | cut -c1-5)" = "$(tl "$tmp/$1.out" | cut -c1-5)" ] ||
        fail "test loss differs: sequential $(cat "$tmp/seq.out"), with the $1 plan $(cat "$tmp/$1.out")"
    echo "  test loss $(tl "$tmp/$1.out")"
}
echo "with a plan: 2 stages, the first on 2 replicas, 1f1b-flush: matches sequential"
plan_matches plan '"schedule": "1f1b-flush"' \
    '[{"first_layer": 0, "last_layer": 3, "replicas": 2, "devices": [0, 1]}, '"$(sst 4 6 2)]"
echo "with a plan: dualpipev, 4 stages in a V on 2 devices: matches sequential"
plan_matches dpv '"schedule": "dualpipev", "chunks": 2' \
    "[$(sst 0 1 0), $(sst 2 3 1), $(sst 4 5 1), $(sst 6 6 0)]"

echo "checkpoint after 20 steps, resume to 40: the same as 40 straight"
"$PLUMB" train examples/models/fmnist-mlp.json --steps 20 --optimizer momentum --quiet \
    --save "$tmp/ck.bin" > /dev/null 2>&1 || fail "--save run failed"
"$PLUMB" train examples/models/fmnist-mlp.json --steps 40 --optimizer momentum --quiet \
    --resume "$tmp/ck.bin" > "$tmp/res.out" 2>&1 || fail "--resume run failed: $(cat "$tmp/res.out")"
"$PLUMB" train examples/models/fmnist-mlp.json --steps 40 --optimizer momentum --quiet \
    > "$tmp/str.out" 2>&1 || fail "straight run failed"
[ "$(tl "$tmp/res.out")" = "$(tl "$tmp/str.out")" ] ||
    fail "resumed $(cat "$tmp/res.out") vs straight $(cat "$tmp/str.out")"
echo "  test loss $(tl "$tmp/res.out") both"
# plumb info describes the checkpoint against its model: header and size, or whole
"$PLUMB" info --model examples/models/fmnist-mlp.json "$tmp/ck.bin" > "$tmp/info.out" 2>&1 ||
    fail "info of the checkpoint: $(cat "$tmp/info.out")"
grep -q "^checkpoint $tmp/ck.bin: model fmnist-mlp (7 layers, 235146 parameters), 20 optimizer steps, optimizer momentum: weights and momentum; 1.79 MiB$" \
    "$tmp/info.out" || fail "info of the checkpoint: $(cat "$tmp/info.out")"
cp "$tmp/ck.bin" "$tmp/flip.bin" # one weight byte flipped: the header still reads, --check refuses
printf '\001' | dd of="$tmp/flip.bin" bs=1 seek=1000 conv=notrunc 2> /dev/null
"$PLUMB" info --model examples/models/fmnist-mlp.json "$tmp/flip.bin" > /dev/null 2>&1 ||
    fail "info of a checkpoint with a damaged tensor, header only"
echo "  $(head -1 "$tmp/info.out")"

echo "bad input: one line, status 2"
expect2() { # $1 expected text, rest: command
    local want=$1; shift
    "$@" > "$tmp/out" 2> "$tmp/err"; local rc=$?
    [ $rc -eq 2 ] || fail "$* exited $rc (want 2)"
    [ "$(wc -l < "$tmp/err")" -eq 1 ] || fail "$*: expected one line, got: $(cat "$tmp/err")"
    grep -qF -- "$want" "$tmp/err" || fail "$*: message lacks \"$want\": $(cat "$tmp/err")"
    [ ! -s "$tmp/out" ] || fail "$*: printed output on stdout: $(cat "$tmp/out")"
}
expect2 "unknown option" "$PLUMB" train examples/models/fmnist-mlp.json --bogus
expect2 "--lr: expected a number > 0" "$PLUMB" train examples/models/fmnist-mlp.json --lr -1
expect2 "--optimizer: expected sgd, momentum or adam" "$PLUMB" train examples/models/fmnist-mlp.json --optimizer lion
expect2 "expected MODEL.json" "$PLUMB" train
echo '{"format":"plumb-model/1","input":[1,28,28],"classes":10,"layers":[{"type":"flatten"},{"type":"linear","out":10,"in_features":512},{"type":"softmax_cross_entropy"}]}' > "$tmp/bad.json"
expect2 "$tmp/bad.json: layers[1].in_features: expected 784 (the flattened output of layers[0]) (got 512)" \
    "$PLUMB" train "$tmp/bad.json"
expect2 "$tmp/nowhere/train-images-idx3-ubyte.gz: cannot open" \
    "$PLUMB" train examples/models/fmnist-mlp.json --data-dir "$tmp/nowhere"
expect2 "--batch: expected at most the 100 samples" \
    "$PLUMB" train examples/models/fmnist-mlp.json --data synthetic --samples 100 --batch 128
expect2 "--batch: expected a multiple of the 3 microbatches" \
    "$PLUMB" train examples/models/fmnist-mlp.json --batch 64 --microbatches 3
expect2 "--schedule: expected gpipe" "$PLUMB" train examples/models/fmnist-mlp.json --schedule fast
expect2 "--stages: expected at most the model's 7 layers" \
    "$PLUMB" train examples/models/fmnist-mlp.json --schedule gpipe --stages 9
expect2 "examples/models/gpt-mini.json: input: the model expects 64 values per sample [64], but the fashion-mnist" \
    "$PLUMB" train examples/models/gpt-mini.json --data fashion-mnist
expect2 "expected 7 layers, one per top-level layer" \
    "$PLUMB" train examples/models/fmnist-mlp.json examples/plans/vgg16-4stage-1f1b.json
expect2 "expected a checkpoint of the sgd optimizer (got momentum)" \
    "$PLUMB" train examples/models/fmnist-mlp.json --resume "$tmp/ck.bin"
expect2 "expected a checkpoint of model fmnist-cnn" \
    "$PLUMB" train examples/models/fmnist-cnn.json --optimizer momentum --resume "$tmp/ck.bin"
expect2 "flip.bin: weights checksum: expected" \
    "$PLUMB" info --model examples/models/fmnist-mlp.json --check "$tmp/flip.bin"
expect2 "ck.bin: expected a checkpoint of model fmnist-cnn" \
    "$PLUMB" info --model examples/models/fmnist-cnn.json "$tmp/ck.bin"
expect2 "ck.bin: a plumb checkpoint: expected --model MODEL.json" "$PLUMB" info "$tmp/ck.bin"
expect2 "--trace: not with checkpoints" \
    "$PLUMB" train examples/models/fmnist-mlp.json --schedule gpipe --save "$tmp/x.bin" --trace "$tmp/t.json"
expect2 "--checkpoint: needs --checkpoint-every N" \
    "$PLUMB" train examples/models/fmnist-mlp.json --checkpoint "$tmp/ckd"
expect2 "--transport: expected local, mpi or nccl" \
    "$PLUMB" train examples/models/fmnist-mlp.json --schedule gpipe --transport tcp
expect2 "--transport: for pipelined runs" \
    "$PLUMB" train examples/models/fmnist-mlp.json --transport mpi
expect2 "PLUMB_FAULT: expected worker:W:step:S" \
    env PLUMB_FAULT=worker:x "$PLUMB" train examples/models/fmnist-mlp.json
sed 's/"parameter_bytes": 803840/"parameter_bytes": 803844/' "$tmp/plan.json" > "$tmp/plan-other.json"
expect2 "profile.layers[1].parameter_bytes: expected 803840, the weights of layer 1" \
    "$PLUMB" train examples/models/fmnist-mlp.json "$tmp/plan-other.json"
if ! nvidia-smi -L > /dev/null 2>&1; then # no GPU here: cuda must say so in one line, status 2
    expect2 "plumb:" "$PLUMB" train examples/models/fmnist-mlp.json --backend cuda --steps 1
fi
# nccl wants one of the CUDA backends (said before any GPU is looked for), where built
out=$("$PLUMB" train examples/models/fmnist-mlp.json --schedule gpipe --transport nccl \
    --backend cpu-bf16 --steps 1 2>&1)
case "$out" in
*"not built into this binary"*) ;;
*) expect2 "--transport nccl: needs a CUDA backend (--backend cuda, cuda-tf32 or cuda-bf16)" \
       "$PLUMB" train examples/models/fmnist-mlp.json --schedule gpipe --transport nccl \
       --backend cpu-bf16 --steps 1 ;;
esac
# the CPU's bf16 reference trains (GEMM and convolution inputs rounded to bf16)
"$PLUMB" train examples/models/fmnist-cnn.json --backend cpu-bf16 --data synthetic \
    --samples 256 --steps 2 --batch 32 --quiet > "$tmp/bf16.out" 2>&1 ||
    fail "--backend cpu-bf16: $(cat "$tmp/bf16.out")"
# --precision bf16 on the CPU is cpu-bf16: the same run, bit for bit
"$PLUMB" train examples/models/fmnist-cnn.json --precision bf16 --data synthetic \
    --samples 256 --steps 2 --batch 32 --quiet > "$tmp/bf16p.out" 2>&1 ||
    fail "--precision bf16: $(cat "$tmp/bf16p.out")"
[ "$(grep final "$tmp/bf16.out" | cut -d, -f1-3)" = "$(grep final "$tmp/bf16p.out" | cut -d, -f1-3)" ] ||
    fail "--precision bf16 differs from --backend cpu-bf16: $(cat "$tmp/bf16.out" "$tmp/bf16p.out")"
expect2 "--backend: expected \"cpu\"" "$PLUMB" train examples/models/fmnist-mlp.json --backend tpu
expect2 "--precision tf32: the CPU backend computes in fp32 or bf16" \
    "$PLUMB" train examples/models/fmnist-mlp.json --precision tf32
expect2 "--precision: expected fp32, tf32 or bf16 (got \"fp16\")" \
    "$PLUMB" train examples/models/fmnist-mlp.json --precision fp16
expect2 "--precision fp32 disagrees with --backend cpu-bf16" \
    "$PLUMB" train examples/models/fmnist-mlp.json --backend cpu-bf16 --precision fp32
expect2 "--precision bf16 disagrees with --backend cuda-tf32" \
    "$PLUMB" profile examples/models/fmnist-mlp.json --backend cuda-tf32 --precision bf16
"$PLUMB" train --help | grep -q "usage: plumb train" || fail "--help"
echo "train.sh: all passed"
