#!/usr/bin/env bash
# bench-gemm-curve.sh: `bench_gemm --curve` (bench/bench_gemm.c), the GEMM/attention
# efficiency curve bench/gpu-check.sh measures on a GPU (issue 25): one row per GEMM and
# attention pass of a transformer's shapes at each TP, on the CPU backend and, where the
# CUDA backend is built, on cuemu's cuda-bf16 (the GPU check's own path); a TP that does not
# divide the heads is left out with a line on stderr; bad arguments are one line, exit 2.
# bench_gemm is built by `make bench` (or `make build/bench/bench_gemm`): without it, SKIP.
set -u
PLUMB=${PLUMB:-./plumb}
dir=$(dirname "$PLUMB")
[ "$dir" = . ] && dir=build
BG=${BENCH_GEMM:-$dir/bench/bench_gemm}
if [ ! -x "$BG" ]; then
    echo "bench-gemm-curve.sh: SKIP: $BG not built (make $dir/bench/bench_gemm)"
    exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "bench-gemm-curve.sh: FAIL: $*" >&2; exit 1; }

# check TSV TPS PEAK: the header, 17 rows per TP in TPS (5 linear layers x 3 passes, the
# attention core's 2), 12 columns, TFLOP/s > 0, the fraction TFLOP/s / PEAK or "-"
check() {
    awk -F'\t' -v tps="$2" -v peak="$3" '
        NR == 1 { if ($0 != "model\ttp\top\tpass\tbatch\tM\tN\tK\tgflop\tms\ttflops\tpeak_fraction")
                      { print "header: " $0; bad = 1 }; next }
        NF != 12 { print "row " NR ": " NF " columns"; bad = 1 }
        !($11 + 0 > 0) { print "row " NR ": TFLOP/s " $11; bad = 1 }
        peak == 0 && $12 != "-" { print "row " NR ": a fraction without a peak: " $12; bad = 1 }
        peak > 0 { f = $11 / peak; d = f - $12; if (d < 0) d = -d
                   if (d > 1e-3 + 1e-3 * f) { print "row " NR ": fraction " $12 ", expected " f; bad = 1 } }
        { n[$2]++; if ($3 == "attention") att[$2]++ }
        END { k = split(tps, t, ",")
              for (i = 1; i <= k; i++) if (n[t[i]] != 17 || att[t[i]] != 2) {
                  print "tp " t[i] ": " n[t[i]] + 0 " rows, " att[t[i]] + 0 " attention"; bad = 1 }
              for (x in n) { ok = 0; for (i = 1; i <= k; i++) if (x == t[i]) ok = 1
                             if (!ok) { print "unexpected tp " x; bad = 1 } }
              exit bad }' "$1"
}

echo "bench_gemm --curve on the CPU backend: gpt-mini at TP 1, 2, 8 (8 does not divide its 4 heads)"
"$BG" --curve --backend cpu --seq 32 --seconds 0.002 --tp 1,2,8 --peak 2 \
    examples/llm/gpt-mini.json > "$tmp/cpu.tsv" 2> "$tmp/cpu.err" ||
    fail "exit $?: $(cat "$tmp/cpu.err")"
out=$(check "$tmp/cpu.tsv" 1,2 2) || fail "$out"
grep -q 'gpt-mini: tp 8 does not divide' "$tmp/cpu.err" || fail "no line for tp 8: $(cat "$tmp/cpu.err")"
# the shapes of one rank: TP 2 halves the QKV's output (3 x 128 -> 192) and the MLP's
# inner width (512 -> 256), the attention core runs 2 of the 4 heads of 32
want="gpt-mini 2 qkv fwd 1 32 192 128
gpt-mini 2 qkv bwd-weight 1 192 128 32
gpt-mini 2 mlp-down bwd-data 1 32 256 128
gpt-mini 2 lm-head fwd 1 32 128 128
gpt-mini 2 attention bwd 2 32 32 32"
got=$(awk -F'\t' '$2 == 2 && ($3 $4 == "qkvfwd" || $3 $4 == "qkvbwd-weight" ||
        $3 $4 == "mlp-downbwd-data" || $3 $4 == "lm-headfwd" || $3 $4 == "attentionbwd") {
        print $1, $2, $3, $4, $5, $6, $7, $8 }' "$tmp/cpu.tsv")
[ "$got" = "$want" ] || fail "tp 2 shapes:
$got
expected:
$want"
echo "  $(($(wc -l < "$tmp/cpu.tsv") - 1)) rows, shapes as expected"

echo "a grouped-query, gated model (8 heads, 2 KV heads, SwiGLU) at TP 2"
cat > "$tmp/gqa.json" << 'JSON'
{"format": "plumb-transformer/1", "name": "gqa-tiny", "hidden_size": 64, "num_hidden_layers": 2,
 "num_attention_heads": 8, "num_key_value_heads": 2, "intermediate_size": 96,
 "max_position_embeddings": 16, "vocab_size": 100, "mlp": "swiglu", "norm": "rmsnorm",
 "position_embedding": "rotary", "bias": false, "tie_word_embeddings": false, "dropout": false}
JSON
"$BG" --curve --backend cpu --seconds 0.001 --tp 2 "$tmp/gqa.json" 2> "$tmp/gqa.err" |
    awk -F'\t' '$4 == "fwd" { print $3, $5, $6, $7, $8 }' > "$tmp/gqa"
# one rank: QKV (4 + 2 x 1) heads of 8, the gate and up halves 2 x 48, the vocabulary 50
want="qkv 1 16 48 64
attn-out 1 16 64 32
mlp-up 1 16 96 64
mlp-down 1 16 64 48
lm-head 1 16 50 64
attention 4 16 16 8"
[ "$(cat "$tmp/gqa")" = "$want" ] || fail "gqa-tiny tp 2 forward shapes: $(cat "$tmp/gqa" "$tmp/gqa.err")
expected:
$want"
echo "  forward shapes as expected"

echo "an operand of 2^31 elements or more is left out: the LM head of 64 x 40,000,000"
sed 's/"vocab_size": 100/"vocab_size": 40000000/' "$tmp/gqa.json" > "$tmp/bigv.json"
"$BG" --curve --backend cpu --seconds 0.001 --tp 1 "$tmp/bigv.json" > "$tmp/bigv.tsv" \
    2> "$tmp/bigv.err" || fail "vocabulary 40M: exit $?: $(cat "$tmp/bigv.err")"
[ "$(grep -c 'lm-head .*2^31 elements or more: left out' "$tmp/bigv.err")" = 3 ] &&
    [ "$(wc -l < "$tmp/bigv.tsv")" = 15 ] && ! grep -q lm-head "$tmp/bigv.tsv" ||
    fail "vocabulary 40M: $(wc -l < "$tmp/bigv.tsv") lines, $(cat "$tmp/bigv.err")"
echo "  3 LM head cases left out, 14 rows"

echo "bad arguments: one line, exit 2"
bad() {
    local want=$1
    shift
    timeout 20 "$BG" "$@" > "$tmp/bad.out" 2> "$tmp/bad.err"
    local rc=$?
    [ $rc -eq 2 ] || fail "bench_gemm $*: exit $rc, expected 2"
    [ "$(wc -l < "$tmp/bad.err")" -eq 1 ] && grep -q -- "$want" "$tmp/bad.err" ||
        fail "bench_gemm $*: expected one line with '$want', got: $(cat "$tmp/bad.err")"
}
bad "needs model files" --curve --backend cpu
bad "--tp: expected" --curve --tp 0,2 examples/llm/gpt-mini.json
bad "--seconds: expected a number" --curve --seconds x examples/llm/gpt-mini.json
bad "unknown option --bogus" --curve --bogus examples/llm/gpt-mini.json
bad "nonexistent.json" --curve --backend cpu "$tmp/nonexistent.json"
# values that were taken: an endless budget (inf, 1e308: every case timed up to 2^21
# calls, for hours), a non-finite peak (nan: no fraction; inf: 0.000), a sequence past an
# int (2^32 + 32 ran as 32), a ninth TP degree (dropped), a second SECONDS_PER_CASE
bad "--seconds: expected a number > 0 and at most 60 (got \"inf\")" \
    --curve --backend cpu --seconds inf examples/llm/gpt-mini.json
bad "--seconds: expected a number > 0 and at most 60" \
    --curve --backend cpu --seconds 1e308 examples/llm/gpt-mini.json
bad "--peak: expected a number >= 0 and at most 1000000000 (got \"nan\")" \
    --curve --backend cpu --seconds 0.001 --peak nan examples/llm/gpt-mini.json
bad "--peak: expected" --curve --backend cpu --seconds 0.001 --peak inf examples/llm/gpt-mini.json
bad "--seq: expected a number >= 0 and at most 1073741824 (got \"4294967328\")" \
    --curve --backend cpu --seconds 0.001 --seq 4294967328 examples/llm/gpt-mini.json
bad "--seq: expected a whole number" --curve --backend cpu --seconds 0.001 --seq 32.5 \
    examples/llm/gpt-mini.json
bad "--tp: expected 1 to 8 degrees" --curve --backend cpu --seconds 0.001 \
    --tp 1,1,1,1,1,1,1,1,2 examples/llm/gpt-mini.json
bad "--tp: expected" --curve --backend cpu --seconds 0.001 --tp 1, examples/llm/gpt-mini.json
bad "SECONDS_PER_CASE: expected a number > 0 and at most 60 (got \"inf\")" inf
bad "expected at most SECONDS_PER_CASE (got \"2\" too)" 1 2
bad '--backend: expected "cpu"' --curve --backend nope examples/llm/gpt-mini.json
echo "  16 refused"

# cuemu: the CUDA plugin is loaded from bench_gemm's own folder, as gpu-check.sh runs it
# beside plumb; a folder with links to both stands in here
if [ -e "$dir/emu/plumb-cuda.so" ]; then
    echo "bench_gemm --curve on cuemu's cuda-bf16 (gpt-mini, TP 1 and 4)"
    mkdir -p "$tmp/emu"
    cp "$BG" "$tmp/emu/bench_gemm"
    ln -s "$(cd "$dir/emu" && pwd)/plumb-cuda.so" "$tmp/emu/plumb-cuda.so"
    timeout 600 "$tmp/emu/bench_gemm" --curve --seq 16 --seconds 0.001 --tp 1,4 \
        examples/llm/gpt-mini.json > "$tmp/emu.tsv" 2> "$tmp/emu.err" ||
        fail "cuemu: exit $?: $(cat "$tmp/emu.err")"
    out=$(check "$tmp/emu.tsv" 1,4 0) || fail "cuemu: $out"
    echo "  $(($(wc -l < "$tmp/emu.tsv") - 1)) rows"
else
    echo "  (cuemu not built: the cuda-bf16 run is left out)"
fi
echo "bench-gemm-curve.sh: all passed"
