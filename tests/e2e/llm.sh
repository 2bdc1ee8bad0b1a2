#!/usr/bin/env bash
# llm.sh: transformers end to end on the real binary: the analytic profile of GPT-3 175B at
# tp 8 on DGX A100 nodes (which plan -p refuses: its planners hold whole layers), Llama-3-70B
# at tp 1 planned on the first 64 GPUs of a 3072-GPU cluster file and simulated; every shipped config profiles; a config with a missing or unknown key, a bad
# --tp and a --gpus that is not whole nodes get one line naming the key or option, exit 2,
# and no output file.
. "$(dirname "$0")/lib/start.sh" # set -u, P, d (removed on exit), fail=0
A100=profiles/clusters/dgx-a100-80g.json
. "$(dirname "$0")/lib/expect.sh" # expect_bad, ok

ok profile-gpt3 "$P" profile --model examples/llm/gpt3-175b.json -c $A100 --tp 8 -o "$d/p.json"
grep -q '"plumb-profile/1"' "$d/p.json" || { echo "FAIL profile-gpt3: no profile"; fail=1; }
[ "$(grep -c '"TransformerBlock"' "$d/p.json")" = 96 ] || { echo "FAIL: expected 96 blocks"; fail=1; }
grep -q '"tensor_parallel":[[:space:]]*8' "$d/p.json" || { echo "FAIL profile-gpt3: no tensor_parallel 8"; fail=1; }
# a tensor-parallel profile is laid out by plan --model (tests/e2e/llm3d.sh), not by plan -p
expect_bad plan-tp-profile 'p.json: tensor_parallel: expected 1: plumb plan -p places whole layers' \
    "$P" plan -p "$d/p.json" -c $A100 --gpus 64 -o "$d/plan.json"
ok profile-llama70 "$P" profile --model examples/llm/llama3-70b.json -c $A100 --seq-len 4096 -o "$d/p1.json"
ok plan-64 "$P" plan -p "$d/p1.json" -c $A100 --gpus 64 -o "$d/plan.json"
grep -q 'devices 56-63\|devices 5[0-9]-63\|devices 6[0-3]-63' "$d/out" || { echo "FAIL plan-64: last stage does not end at device 63:"; cat "$d/out"; fail=1; }
ok sim "$P" sim "$d/plan.json" --json
grep -q '"samples_per_s"' "$d/out" || { echo "FAIL sim: no throughput"; head -5 "$d/out"; fail=1; }
ok info "$P" info $A100
grep -q 'dense peak TFLOP/s: fp32 19.5 tf32 156 bf16 312 fp16 312; memory 2039 GB/s' "$d/out" || { echo "FAIL info: no device figures:"; cat "$d/out"; fail=1; }
for m in gpt2 llama3-8b llama3-70b mistral-7b; do
    ok "profile-$m" "$P" profile --model examples/llm/$m.json -c profiles/clusters/dgx-h100.json \
        --seq-len 1024 --microbatch-size 2 --precision fp16 -o "$d/$m.json"
done

printf '{"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "max_position_embeddings": 32, "vocab_size": 100}\n' >"$d/nokey.json"
expect_bad missing-key 'nokey.json: intermediate_size: missing' \
    "$P" profile --model "$d/nokey.json" -c $A100 -o "$d/x.json"
printf '{"model_type": "mamba", "hidden_size": 64}\n' >"$d/mamba.json"
expect_bad unknown-arch 'mamba.json: model_type: unknown architecture' \
    "$P" profile --model "$d/mamba.json" -c $A100 -o "$d/x.json"
expect_bad bad-tp '--tp: expected a divisor of the 12 attention heads (got 5)' \
    "$P" profile --model examples/llm/gpt2.json -c $A100 --tp 5 -o "$d/x.json"
expect_bad no-figures 'h200-4x8.json: device_types\[0\].peak_tflops_by_precision.bf16: missing' \
    "$P" profile --model examples/llm/gpt2.json -c profiles/clusters/h200-4x8.json -o "$d/x.json"
expect_bad bad-precision '--precision: expected bf16, fp16, tf32, fp32 or fp8' \
    "$P" profile --model examples/llm/gpt2.json -c $A100 --precision int8 -o "$d/x.json"
# fp8 needs the device's fp8 peak (A100 has none): one line naming the field
expect_bad fp8-no-peak 'dgx-a100-80g.json: device_types\[0\].peak_tflops_by_precision.fp8: missing' \
    "$P" profile --model examples/llm/gpt2.json -c $A100 --precision fp8 -o "$d/x.json"
# fp8 (Transformer Engine's FP8 projections) on H100: a plan file that says so, read back by
# sim, which gives the MFU against the bf16 peak; plumb train has no FP8 kernels
H100=profiles/clusters/dgx-h100.json
ok plan-fp8 "$P" plan --model examples/llm/nemo/llama2-7b.json -c $H100 --gpus 8 --tp 2 \
    --pp 2 --dp 2 --global-batch 64 --precision fp8 --attention flash -o "$d/fp8.json"
grep -q '"precision":[[:space:]]*"fp8"' "$d/fp8.json" ||
    { echo "FAIL plan-fp8: the plan file does not say fp8"; fail=1; }
ok sim-fp8 "$P" sim "$d/fp8.json"
has sim-fp8 'global batch 64, fp8'
has sim-fp8 'MFU [0-9.]+ % of the bf16 peak'
# the dashboard names fp8 on its wide runtime row (other precisions' rows read as before)
ok ui-fp8 "$P" ui --model examples/llm/gpt2.json -c $H100 --global-batch 16 --tp 2 --pp 2 \
    --dp 2 --precision fp8 --snapshot 160x40 --keys "" --mono
has ui-fp8 '^runtime .*p2p overlap  precision fp8  grad-reduce fp32'
ok plan-fp8-mini "$P" plan --model examples/llm/gpt-mini.json -c $H100 --gpus 8 --tp 2 --pp 2 \
    --dp 2 --global-batch 8 --precision fp8 -o "$d/mini8.json"
expect_bad train-fp8 'precision: the executor runs plans with .*fp8' \
    "$P" train examples/models/gpt-mini.json "$d/mini8.json" --steps 1
# fused attention keeps no s x s tensor: nothing left for selective recomputation
ok profile-flash "$P" profile --model examples/llm/gpt2.json -c $A100 --attention flash
grep -q 'selective recomputation: 0.0000 ms' "$d/out" ||
    { echo "FAIL profile-flash: selective recomputation left with flash attention"; fail=1; }
expect_bad bad-attention '--attention: expected standard or flash (got "fused")' \
    "$P" profile --model examples/llm/gpt2.json -c $A100 --attention fused
# Transformer Engine's fused loss (--cross-entropy te, as plan --model takes it): the header
# says it, the head's forward is shorter than the unfused fp32 loss's, the profile written
# differs; a bad value gets plan --model's line
ok profile-ce-te "$P" profile --model examples/llm/gpt2.json -c $A100 --cross-entropy te -o "$d/ce.json"
has profile-ce-te '^plumb profile: gpt2 .*, bf16, cross-entropy te, analytic$'
te_head=$(awk '$2 == "head" { print $4 }' "$d/out")
ok profile-ce-unfused "$P" profile --model examples/llm/gpt2.json -c $A100 --cross-entropy unfused -o "$d/ce0.json"
grep -q 'cross-entropy' "$d/out" && { echo "FAIL profile-ce-unfused: the header names the default"; fail=1; }
unf_head=$(awk '$2 == "head" { print $4 }' "$d/out")
python3 -c "import sys; sys.exit(0 if 0 < float('$te_head') < float('$unf_head') else 1)" ||
    { echo "FAIL profile-ce-te: head forward $te_head ms with te, $unf_head ms unfused"; fail=1; }
cmp -s "$d/ce.json" "$d/ce0.json" && { echo "FAIL profile-ce-te: the same profile as unfused"; fail=1; }
"$P" plan --model examples/llm/gpt2.json -c $A100 --gpus 8 --global-batch 8 --cross-entropy fused 2>"$d/perr" >/dev/null
expect_bad bad-cross-entropy "^$(sed 's/^plumb: plan: /plumb: profile: /' "$d/perr")\$" \
    "$P" profile --model examples/llm/gpt2.json -c $A100 --cross-entropy fused
# --quiet without -o would print nothing and write nothing: refused, not ignored
expect_bad quiet-no-output 'profile: --quiet: expected -o PROFILE.json with it' \
    "$P" profile --model examples/llm/gpt2.json -c $A100 --quiet
ok profile-quiet "$P" profile --model examples/llm/gpt2.json -c $A100 --quiet -o "$d/q.json"
[ -s "$d/out" ] && { echo "FAIL profile-quiet: printed with --quiet"; fail=1; }
[ -s "$d/q.json" ] || { echo "FAIL profile-quiet: no profile written"; fail=1; }
expect_bad config-as-spec 'gpt2.json is a transformer config.*--model' \
    "$P" profile examples/llm/gpt2.json -o "$d/x.json"
[ -e "$d/x.json" ] && { echo "FAIL: a refused profile wrote its output"; fail=1; }
cp examples/llm/gpt2.json "$d/gpt2.json"
before=$(cksum <"$d/gpt2.json")
expect_bad out-is-model '-o .*gpt2.json: is the input' \
    "$P" profile --model "$d/gpt2.json" -c $A100 -o "$d/gpt2.json"
[ "$(cksum <"$d/gpt2.json")" = "$before" ] || { echo "FAIL: the model was overwritten"; fail=1; }
expect_bad gpus-partial 'dgx-a100-80g.json: --gpus: expected a multiple of the 8 devices per server (got 12)' \
    "$P" plan -p "$d/p.json" -c $A100 --gpus 12 -o "$d/y.json"
expect_bad gpus-too-many '--gpus: expected at most the cluster.s 3072 devices (got 4096)' \
    "$P" plan -p "$d/p.json" -c $A100 --gpus 4096 -o "$d/y.json"
[ -e "$d/y.json" ] && { echo "FAIL: a refused plan wrote its output"; fail=1; }
[ $fail = 0 ] && echo "llm.sh: ok"
exit $fail
