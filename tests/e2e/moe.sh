#!/usr/bin/env bash
# moe.sh: the mixtures of experts end to end on the real binary: Mixtral-8x7B's config laid out
# on 16 H100s at tp 4 x pp 4 with fused attention and sequence parallelism (expert
# parallelism 1: every rank holds all eight experts; at tp 2 x pp 2 a device needs 119 GiB
# with --zero 1 and the layout is refused), written with -o and simulated
# again by plumb sim to the same iteration; its plan holds the experts' keys; plumb profile
# counts Mixtral-8x7B's and Qwen3-30B-A3B's published parameters, total and active; the 3D
# search lays Qwen3-30B-A3B out on 16 H100s.
# shellcheck source=lib/plan_model.sh
. "$(dirname "$0")/lib/plan_model.sh" # P, d, fail=0, ok, has, expect_bad...
H100=profiles/clusters/dgx-h100.json
MX=examples/llm/mixtral-8x7b.json
LAYOUT=(--gpus 16 --tp 4 --pp 4 --global-batch 32 --seq-len 4096 --attention flash
        --sequence-parallel)

ok plan "$P" plan --model $MX -c $H100 "${LAYOUT[@]}" -o "$d/plan.json"
has plan '^plumb plan: mixtral-8x7b on dgx-h100, 16 GPUs: tp 4 x pp 4 x dp 1, schedule 1f1b-flush'
has plan '^iteration [0-9.]+ s'
sim_same sim-same "$d/plan.json" --model $MX -c $H100 "${LAYOUT[@]}"
python3 -c 'import json, sys
t = json.load(open(sys.argv[1]))["model"]["transformer"]
assert t["num_experts"] == 8 and t["num_experts_per_tok"] == 2, t
assert t["moe_intermediate_size"] == 14336 and t["mlp"] == "swiglu", t' "$d/plan.json" ||
    { echo "FAIL plan-model: the plan's transformer lacks Mixtral's experts"; fail=1; }
expect_bad_silent plan-tp2-pp2 "stages\[0\]: expected the layout to fit the memory of its devices" \
    "$d/bad.json" "$P" plan --model $MX -c $H100 --gpus 16 --tp 2 --pp 2 --global-batch 32 \
    --seq-len 4096 --attention flash --sequence-parallel --zero 1 -o "$d/bad.json"

ok profile "$P" profile --model $MX -c $H100 --tp 2 --seq-len 4096 --attention flash
has profile '^plumb profile: mixtral-8x7b \(46702792704 parameters, 12879925248 active\)'
ok profile3 "$P" profile --model examples/llm/qwen3-30b-a3b.json -c $H100 --seq-len 4096 \
    --attention flash
has profile3 '^plumb profile: qwen3-30b-a3b \(30532122624 parameters, 3353032704 active\)'
ok search "$P" plan --model examples/llm/qwen3-30b-a3b.json -c $H100 --gpus 16 --search \
    --global-batch 64 --seq-len 4096 --attention flash
has search '^#1 tp [0-9]+ x pp [0-9]+ x dp [0-9]+'
[ "$fail" = 0 ] && echo "moe.sh: ok"
exit "$fail"
