#!/usr/bin/env bash
# gemma.sh: the Gemma families end to end on the real binary: Gemma-2-9B's config laid out on
# 16 H100s at tp 2 x pp 2 x dp 4 with fused attention, written with -o and simulated again by
# plumb sim to the same iteration; its plan holds the model's Gemma keys (layer_types and the
# rest); plumb profile counts its and Gemma-3-1B's published parameters and shows a block of
# each kind (the window's and the full attention's).
# shellcheck source=lib/plan_model.sh
. "$(dirname "$0")/lib/plan_model.sh" # P, d, fail=0, ok, has, expect_bad...
H100=profiles/clusters/dgx-h100.json
G2=examples/llm/gemma2-9b.json
LAYOUT=(--gpus 16 --tp 2 --pp 2 --global-batch 32 --attention flash)

ok plan "$P" plan --model $G2 -c $H100 "${LAYOUT[@]}" -o "$d/plan.json"
has plan '^plumb plan: gemma2-9b on dgx-h100, 16 GPUs: tp 2 x pp 2 x dp 4, schedule 1f1b-flush'
has plan '^stage 1: layers 22-43 \(block21 \.\. head\) on devices 8-15'
has plan '^iteration [0-9.]+ s'
sim_same sim-same "$d/plan.json" --model $G2 -c $H100 "${LAYOUT[@]}"
python3 -c 'import json, sys
t = json.load(open(sys.argv[1]))["model"]["transformer"]
assert t["sliding_window"] == 4096 and t["post_norms"] and t["embedding_scale"], t
assert t["attn_logit_softcapping"] == 50 and t["final_logit_softcapping"] == 30, t
lt = t["layer_types"]
assert lt == ["sliding_attention", "full_attention"] * 21, lt' "$d/plan.json" ||
    { echo "FAIL plan-model: the plan's transformer lacks Gemma 2's keys"; fail=1; }

ok profile "$P" profile --model $G2 -c $H100 --attention flash
has profile '^plumb profile: gemma2-9b \(9241705984 parameters\)'
has profile '^2 +block1 '
has profile 'each like block0 \(a window of 4096 keys\) or block1 \(full attention\)'
ok profile3 "$P" profile --model examples/llm/gemma3-1b.json -c $H100 --attention flash
has profile3 '^plumb profile: gemma3-1b \(999885952 parameters\)'
has profile3 '^6 +block5 '
[ "$fail" = 0 ] && echo "gemma.sh: ok"
exit "$fail"
