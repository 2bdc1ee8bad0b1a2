#!/usr/bin/env bash
# llm3d.sh: fixed tensor x pipeline x data layouts end to end on the real binary: GPT-3 175B
# on 1024 A100s at tp 8 x pp 8 x dp 16 (global batch 1536, full recomputation) is laid out,
# simulated and reported (text and JSON, the layout echoed); an interleaved layout is written
# with -o and read back by plumb sim and the dashboard's snapshot; each bad input gets one
# line, exit 2, no output and no file; an output never overwrites an input; a CPU cluster's
# devices are CPU workers in every command's text.
# shellcheck source=lib/plan_model.sh
. "$(dirname "$0")/lib/plan_model.sh" # P, d, fail=0, A100, GPT3, bad, expect_bad, ok, has...
LAYOUT=(--gpus 1024 --tp 8 --pp 8 --dp 16 --global-batch 1536 --microbatch-size 1 --recompute full)

ok text "$P" plan --model $GPT3 -c $A100 "${LAYOUT[@]}"
has text '^plumb plan: gpt3-175b on .*1024 GPUs: tp 8 x pp 8 x dp 16, schedule 1f1b-flush'
has text '^stage 0: layers 0-12 \(embed \.\. block11\) on devices 0-127 \(16 groups of 8\)'
has text '^stage 7: layers 85-97 \(block84 \.\. head\) on devices 896-1023 \(16 groups of 8\)'
has text '1536 microbatches of 1, 96 per replica'
has text '^iteration [0-9.]+ s, [0-9.]+ samples/s'
has text '^  rank 7 \(device 896\): weights .* peak .* of 79.00 GiB$'
has text '^recompute full \(every 1 blocks\), '
# --checkpoint-layers 0 keeps only each stage's input (was printed as "every 0 blocks")
ok ckpt0 "$P" plan --model $GPT3 -c $A100 "${LAYOUT[@]}" --checkpoint-layers 0
has ckpt0 "^recompute full \(each stage's input\), "

ok json "$P" plan --model $GPT3 -c $A100 "${LAYOUT[@]}" --json
for k in iteration_s samples_per_s tp pp dp interleave global_batch microbatch_size recompute \
         sequence_parallel zero precision gpus; do
    has "json-$k" "^	\"$k\":"
done
has json-tp '^	"tp":	8,'
has json-pp '^	"pp":	8,'
has json-dp '^	"dp":	16,'
has json-gb '^	"global_batch":	1536,'
has json-gpus '^	"gpus":	1024'
# the simulator's 3D figures
for k in tokens_per_s tflops_per_gpu model_tflops_per_gpu mfu weights_bytes \
         gradients_bytes optimizer_bytes activations_bytes peak_bytes; do
    has "json-$k" "\"$k\":"
done

# interleaved with data parallelism: dp whole interleaved pipelines
ok interleave-dp "$P" plan --model $GPT3 -c $A100 "${LAYOUT[@]}" --interleave 2
has interleave-dp 'tp 8 x pp 8 x dp 16, schedule interleaved \(2 virtual stages per rank\)'
has interleave-dp '96 per replica'

# interleaved, written and read back
ok interleaved "$P" plan --model $GPT3 -c $A100 --gpus 64 --tp 8 --pp 8 --global-batch 64 \
    --interleave 2 --recompute selective --sequence-parallel --zero 1 -o "$d/plan.json"
has interleaved 'schedule interleaved \(2 virtual stages per rank\)'
has interleaved '^stage 15: layers 91-97 \(block90 \.\. head\) on devices 56-63'
has interleaved "plan written to $d/plan.json"
ok sim "$P" sim "$d/plan.json" --json
has sim '"schedule":	"interleaved"'
has sim '"nstages":	16'
sim_it=$(grep -m1 '^	"iteration_s":' "$d/out")
ok interleaved-json "$P" plan --model $GPT3 -c $A100 --gpus 64 --tp 8 --pp 8 --global-batch 64 \
    --interleave 2 --recompute selective --sequence-parallel --zero 1 --json
if [ -z "$sim_it" ] || [ "$(grep -m1 '^	"iteration_s":' "$d/out")" != "$sim_it" ]; then
    echo "FAIL sim-same: plumb sim on the written plan ($sim_it) differs from plan --json"
    fail=1
fi
ok ui "$P" ui "$d/plan.json" --snapshot 100x30
has ui 'gpt3-175b on dgx-a100-80g +interleaved'
# a what-if that re-plans lays the file's model (its "model") out again as ui --model does;
# in a file without it, it says that a tensor-parallel layout is re-laid out by plan --model
ok ui-replan "$P" ui "$d/plan.json" --snapshot 100x30 --keys +
has ui-replan '^GPUs 128 = tp 8 x pp 8 x dp 2  mbs 1  v 2  recomp selective  sp on  zero 1'
python3 -c 'import json, sys; p = json.load(open(sys.argv[1])); del p["model"]
json.dump(p, open(sys.argv[2], "w"))' "$d/plan.json" "$d/nomodel.json"
ok ui-replan-nomodel "$P" ui "$d/nomodel.json" --snapshot 100x30 --keys +
has ui-replan-nomodel 'a tensor-parallel layout \(tp 8\) is re-planned only by plumb plan --model'

bad tp-server '--tp: expected at most the 8 devices of one server (got 16)' \
    --gpus 1024 --tp 16 --pp 8 --dp 8 --global-batch 1536
bad tp-heads 'plan: --tp: expected a divisor of the 12 attention heads (got 8)' \
    --gpus 64 --tp 8 --pp 4 --dp 2 --global-batch 64 --model examples/llm/gpt2.json
bad product '--gpus: expected tp x pp x dp = 8 x 8 x 16 = 1024 devices (got 512)' \
    --gpus 512 --tp 8 --pp 8 --dp 16 --global-batch 1536
bad gpus-servers 'dgx-a100-80g.json: --gpus: expected a multiple of the 8 devices per server (got 12)' \
    --gpus 12 --tp 4 --pp 3 --global-batch 8
bad gpus-file '--gpus: expected at most the cluster.s 3072 devices (got 4096)' \
    --gpus 4096 --tp 8 --pp 8 --dp 64 --global-batch 4096
bad batch '--global-batch: expected a multiple of dp x microbatch size = 16 x 2 = 32 (got 1000)' \
    "${LAYOUT[@]}" --global-batch 1000 --microbatch-size 2
bad pp-layers '--pp: expected --pp x --interleave to divide the 96 layers (got 5 x 1 = 5)' \
    --gpus 40 --tp 8 --pp 5 --global-batch 8
bad interleave-kind '--interleave: expected 1 with schedule zb-h1, which runs one stage per pipeline rank (got 2)' \
    --gpus 64 --tp 8 --pp 8 --global-batch 64 --interleave 2 --schedule zb-h1
# with fewer than two of --tp/--pp/--dp plan searches the layouts (tests/e2e/search3d.sh)
bad sp-tp1 '--sequence-parallel: expected --tp 2 or more' \
    --gpus 64 --tp 1 --pp 8 --dp 8 --global-batch 64 --sequence-parallel
bad no-fit 'gpt3-175b.json: stages\[0\]: expected the layout to fit the memory of its devices' \
    --gpus 64 --tp 8 --pp 1 --dp 8 --global-batch 64

# a CPU cluster (device types with cores) is counted in CPU workers, not GPUs, by plan,
# sim, sweep and the dashboard
CPU8=examples/clusters/cpu-1x8.json
MINI=(--model examples/llm/gpt-mini.json -c "$CPU8" --gpus 8 --global-batch 8 --precision fp32)
ok cpu-plan "$P" plan "${MINI[@]}" --tp 2 --pp 2 --dp 2 --microbatch-size 2 -o "$d/cpu.json"
has cpu-plan '^plumb plan: gpt-mini on cpu-1x8, 8 CPU workers: tp 2 x pp 2 x dp 2'
has cpu-plan 'TFLOP/s per CPU worker \(model FLOPs'
ok cpu-search "$P" plan "${MINI[@]}"
has cpu-search '^plumb plan: searched [0-9]+ layouts on 8 CPU workers'
ok cpu-sim "$P" sim "$d/cpu.json"
has cpu-sim '^layout +tp 2 x pp 2 x dp 2 = 8 CPU workers, global batch 8'
has cpu-sim 'TFLOP/s per CPU worker \('
ok cpu-sweep "$P" sweep -p profiles/pipedream/vgg16.json -c $CPU8 --gpus 3..4 --target 1e6
has cpu-sweep '^CPU workers throughput'
has cpu-sweep 'not reached in 3..4 CPU workers'
ok cpu-sweep3d "$P" sweep --model examples/llm/gpt-mini.json -c $CPU8 --gpus 8 --global-batch 8
has cpu-sweep3d '^CPU workers  best layout'
ok cpu-ui "$P" ui "$d/cpu.json" --snapshot 100x30
has cpu-ui '^CPU workers 8 '
ok cpu-all sh -c "'$P' plan ${MINI[*]} --tp 2 --pp 2 --dp 2 --microbatch-size 2; '$P' sim '$d/cpu.json'"
grep -q 'GPU' "$d/out" && { echo "FAIL cpu-all: GPU in the CPU cluster's text:"; grep GPU "$d/out"; fail=1; }

# --p2p-split whole (tp 8 without sequence parallelism, current Megatron-Core's sends): the
# text says so, the plan file carries "p2p_split": "whole" and plumb sim reads it back at
# the same iteration, which under --p2p sync is longer than scatter-gather's (8 x the bytes
# per send); with --sequence-parallel the text says it changes nothing; a bad value is one
# line
SPLIT=(--gpus 64 --tp 8 --pp 8 --global-batch 64 --recompute full --zero 1 --p2p sync)
ok split-sg "$P" plan --model $GPT3 -c $A100 "${SPLIT[@]}" --json
sg_it=$(sed -n 's/^	"iteration_s":	\([0-9.e+-]*\),$/\1/p' "$d/out" | head -1)
ok split-whole "$P" plan --model $GPT3 -c $A100 "${SPLIT[@]}" --p2p-split whole -o "$d/whole.json"
has split-whole '^recompute full .*, p2p whole tensor$'
grep -q '"p2p_split":	"whole"' "$d/whole.json" ||
    { echo "FAIL split-whole: the plan file lacks \"p2p_split\": \"whole\""; fail=1; }
ok split-whole-json "$P" plan --model $GPT3 -c $A100 "${SPLIT[@]}" --p2p-split whole --json
wh_it=$(sed -n 's/^	"iteration_s":	\([0-9.e+-]*\),$/\1/p' "$d/out" | head -1)
ok split-sim "$P" sim "$d/whole.json" --json
sim_wh=$(sed -n 's/^	"iteration_s":	\([0-9.e+-]*\),$/\1/p' "$d/out" | head -1)
if [ -z "$sg_it" ] || [ -z "$wh_it" ] || [ "$sim_wh" != "$wh_it" ] ||
   ! awk -v a="$wh_it" -v b="$sg_it" 'BEGIN { exit !(a > b) }'; then
    echo "FAIL split: whole $wh_it s (plumb sim $sim_wh s) vs scatter-gather $sg_it s"
    fail=1
fi
ok split-sp "$P" plan --model $GPT3 -c $A100 "${SPLIT[@]}" --sequence-parallel --p2p-split whole
has split-sp 'p2p whole tensor \(no effect: sequence parallel or tp 1\)'
bad split-bad 'plan: --p2p-split: expected scatter-gather or whole (got "half")' \
    "${SPLIT[@]}" --p2p-split half
# the search, plumb sweep --model and the dashboard take it for every layout
ok split-search "$P" plan "${MINI[@]}" --p2p-split whole
has split-search '^runtime of every layout: p2p whole tensor \(tp > 1 without sequence parallelism\)$'
ok split-sweep "$P" sweep --model examples/llm/gpt-mini.json -c $CPU8 --gpus 8 --global-batch 8 \
    --p2p-split whole --json
has split-sweep '"p2p_split":	"whole"'
ok split-ui "$P" ui --model $GPT3 -c $A100 "${SPLIT[@]}" --p2p-split whole --snapshot 160x40
has split-ui 'p2p-split whole'
expect_bad split-bad-sweep 'sweep: --p2p-split: expected scatter-gather or whole (got "all")' \
    "$P" sweep --model examples/llm/gpt-mini.json -c $CPU8 --gpus 8 --global-batch 8 --p2p-split all
expect_bad split-bad-ui 'ui: --p2p-split: expected scatter-gather or whole (got "")' \
    "$P" ui --model $GPT3 -c $A100 "${SPLIT[@]}" --p2p-split "" --snapshot 160x40

# --cp 2 (context parallelism, Llama 3 8B at 8192 tokens, tp 2 x cp 2 x dp 2 on 8 A100s):
# the text and JSON say cp, the plan file carries "cp": 2 and plumb sim reads it back at the
# same iteration, at 2 / 3 of cp 1's tokens per GPU or better (each rank computes half the
# sequence); 2 cp not dividing the sequence and standard attention are one line
L3=examples/llm/llama3-8b.json
CP=(--gpus 8 --tp 2 --pp 1 --global-batch 16 --recompute full --zero 1 --attention flash)
ok cp-text "$P" plan --model $L3 -c $A100 "${CP[@]}" --cp 2 --dp 2 -o "$d/cp.json"
has cp-text '^plumb plan: llama3-8b on .*8 GPUs: tp 2 x cp 2 x pp 1 x dp 2,'
has cp-text '^stage 0: layers 0-33 \(embed \.\. head\) on devices 0-7 \(2 groups of 4\)'
grep -q '"cp":	2' "$d/cp.json" || { echo "FAIL cp-text: the plan file lacks \"cp\": 2"; fail=1; }
ok cp-json "$P" plan --model $L3 -c $A100 "${CP[@]}" --cp 2 --dp 2 --json
has cp-json '^	"cp":	2,'
cp_it=$(sed -n 's/^	"iteration_s":	\([0-9.e+-]*\),$/\1/p' "$d/out" | head -1)
ok cp-sim "$P" sim "$d/cp.json" --json
sim_cp=$(sed -n 's/^	"iteration_s":	\([0-9.e+-]*\),$/\1/p' "$d/out" | head -1)
ok cp-sim-text "$P" sim "$d/cp.json"
has cp-sim-text '^layout          tp 2 x cp 2 x pp 1 x dp 2 = 8 GPUs'
ok cp-ui "$P" ui "$d/cp.json" --snapshot 160x40
has cp-ui '^GPUs 8 = tp 2 x cp 2 x pp 1 x dp 2 ' # the file's model: laid out as ui --model
python3 -c 'import json, sys; p = json.load(open(sys.argv[1])); del p["model"]
json.dump(p, open(sys.argv[2], "w"))' "$d/cp.json" "$d/cp-nomodel.json"
ok cp-ui-nomodel "$P" ui "$d/cp-nomodel.json" --snapshot 160x40 # the 2D view of the file
has cp-ui-nomodel '^runtime .* cp 2$'
# the native planner and plumb sweep -p place whole sequences: a cp profile is one line
ok cp-tp1 "$P" plan --model $L3 -c $A100 "${CP[@]}" --tp 1 --cp 2 --dp 4 -o "$d/cp1.json"
python3 -c 'import json, sys; json.dump(json.load(open(sys.argv[1]))["profile"], open(sys.argv[2], "w"))' \
    "$d/cp1.json" "$d/cp1.prof"
expect_bad cp-bad-native 'context_parallel: expected 1: plumb plan -p places whole sequences' \
    "$P" plan -p "$d/cp1.prof" -c $A100
expect_bad cp-bad-sweep 'context_parallel: expected 1: plumb sweep -p places whole sequences' \
    "$P" sweep -p "$d/cp1.prof" -c $A100 --gpus 8..16
ok cp-1 "$P" plan --model $L3 -c $A100 "${CP[@]}" --dp 4 --json
one_it=$(sed -n 's/^	"iteration_s":	\([0-9.e+-]*\),$/\1/p' "$d/out" | head -1)
if [ -z "$cp_it" ] || [ "$sim_cp" != "$cp_it" ] ||
   ! awk -v a="$cp_it" -v b="$one_it" 'BEGIN { exit !(a <= 1.5 * b && a > 0.5 * b) }'; then
    echo "FAIL cp: cp 2 $cp_it s (plumb sim $sim_cp s) vs cp 1 $one_it s"
    fail=1
fi
expect_bad_silent cp-bad-seq 'plan: --cp: expected 2 x cp = 8 to divide the sequence of 100 tokens' \
    "$d/bad.json" "$P" plan --model $L3 -c $A100 --gpus 8 --tp 2 --pp 1 --dp 1 --cp 4 \
    --global-batch 8 --attention flash --seq-len 100 -o "$d/bad.json"
expect_bad_silent cp-bad-attn 'plan: --cp: expected --attention flash with --cp 2' "$d/bad.json" \
    "$P" plan --model $L3 -c $A100 --gpus 8 --tp 2 --pp 1 --dp 2 --cp 2 --global-batch 8 \
    -o "$d/bad.json"
# the search: --cp 2 pins it (every ranked row says cp 2); without --cp it searches cp where
# it applies (flash attention, 2 cp dividing the 8192 tokens: the best at global batch 16 is
# tp 1 x cp 8 x dp 1, 4.258 s against cp 1's best 4.462 s); standard attention: no cp row
ok cp-search "$P" plan --model $L3 -c $A100 --gpus 8 --cp 2 --global-batch 16 --attention flash
has cp-search '^#1 tp [0-9]* x cp 2 x pp [0-9]* x dp [0-9]*,'
[ "$(grep -c '^#[0-9]' "$d/out")" = "$(grep -c '^#[0-9] tp [0-9]* x cp 2 x' "$d/out")" ] ||
    { echo "FAIL cp-search: a row without cp 2"; fail=1; }
ok cp-search-free "$P" plan --model $L3 -c $A100 --gpus 8 --global-batch 16 --attention flash --json
has cp-search-free '^			"cp":	[248],'
ok cp-search-std "$P" plan --model $L3 -c $A100 --gpus 8 --global-batch 16
grep -q ' x cp ' "$d/out" && { echo "FAIL cp-search-std: a cp row with standard attention"; fail=1; }

# FP8 primary weights (--fp8-param-gather, docs/llm.md "FP8 primary weights"): the fixed
# layout's settings line and report say it, its plan file keeps it, sim reads it back; the
# search and sweep put it on every candidate ("fp8 param gather" in the runtime line); rank
# 0's peak is lower than without it by its blocks' FP8 copies (test_fp8.c holds the bytes)
H100=profiles/clusters/dgx-h100.json
FP8=(--model examples/llm/nemo/llama2-7b.json -c "$H100" --global-batch 16 --seq-len 1024
     --precision fp8 --zero 1)
ok fp8pg-text "$P" plan "${FP8[@]}" --tp 2 --pp 2 --dp 2 --fp8-param-gather -o "$d/fp8pg.json"
has fp8pg-text '^recompute none, sequence parallel off, zero 1, fp8, fp8-param-gather$'
grep -q '"fp8_param_gather":	true' "$d/fp8pg.json" ||
    { echo "FAIL fp8pg-text: the plan file has no fp8_param_gather"; fail=1; }
ok fp8pg-sim "$P" sim "$d/fp8pg.json" --json
has fp8pg-sim '"fp8_param_gather":	true'
fp8pg_peak() { python3 -c 'import json,sys; print(json.load(sys.stdin)["devices"][0]["memory"]["peak_bytes"])' <"$d/out"; }
ok fp8pg-json "$P" plan "${FP8[@]}" --tp 2 --pp 2 --dp 2 --fp8-param-gather --json
with=$(fp8pg_peak)
ok fp8pg-json-without "$P" plan "${FP8[@]}" --tp 2 --pp 2 --dp 2 --json
without=$(fp8pg_peak)
python3 -c "import sys; sys.exit(0 if float('$without') > float('$with') else 1)" ||
    { echo "FAIL fp8pg-json: peak $with with --fp8-param-gather, $without without"; fail=1; }
ok fp8pg-search "$P" plan "${FP8[@]}" --gpus 8 --fp8-param-gather
has fp8pg-search '^runtime of every layout: fp8 param gather$'
ok fp8pg-sweep "$P" sweep "${FP8[@]}" --gpus 8..16 --fp8-param-gather --json
has fp8pg-sweep '"fp8_param_gather":	true'

# Transformer Engine's fused loss (--cross-entropy te, docs/llm.md): the settings line, the
# plan file ("cross_entropy": "te") and sim's report (JSON and text) say it; plumb sim of the
# written plan gives plan's iteration, shorter than the unfused loss's; unfused writes nothing
CE=(--model examples/llm/nemo/llama2-7b.json -c "$H100" --global-batch 16 --seq-len 1024
    --tp 2 --pp 2 --dp 2)
ok ce-te "$P" plan "${CE[@]}" --cross-entropy te -o "$d/ce.json"
has ce-te '^recompute none, sequence parallel off, zero 0, bf16, cross-entropy te$'
grep -q '"cross_entropy":	"te"' "$d/ce.json" ||
    { echo "FAIL ce-te: the plan file has no cross_entropy"; fail=1; }
ok ce-te-json "$P" plan "${CE[@]}" --cross-entropy te --json
ce_it=$(sed -n 's/^	"iteration_s":	\([0-9.e+-]*\),$/\1/p' "$d/out" | head -1)
has ce-te-json '^	"cross_entropy":	"te",$'
ok ce-sim "$P" sim "$d/ce.json" --json
has ce-sim '^	"cross_entropy":	"te",$'
ce_sim=$(sed -n 's/^	"iteration_s":	\([0-9.e+-]*\),$/\1/p' "$d/out" | head -1)
[ -n "$ce_it" ] && [ "$ce_sim" = "$ce_it" ] ||
    { echo "FAIL ce-sim: plumb sim of the te plan ($ce_sim) is not plan's ($ce_it)"; fail=1; }
ok ce-sim-text "$P" sim "$d/ce.json"
has ce-sim-text '^layout .*, bf16, cross-entropy te$'
ok ce-unfused "$P" plan "${CE[@]}" --cross-entropy unfused --json -o "$d/ce0.json"
ce0_it=$(sed -n 's/^	"iteration_s":	\([0-9.e+-]*\),$/\1/p' "$d/out" | head -1)
grep -q cross_entropy "$d/out" "$d/ce0.json" &&
    { echo "FAIL ce-unfused: cross_entropy written for the default"; fail=1; }
python3 -c "import sys; sys.exit(0 if float('$ce0_it') > float('$ce_it') else 1)" ||
    { echo "FAIL ce-unfused: unfused $ce0_it s is not longer than te's $ce_it s"; fail=1; }
# The unfused gradient accumulation (--grad-accum unfused, docs/llm.md): the settings line,
# the plan file ("grad_accum": "unfused"), sim's report (JSON and text) and the search's
# runtime line say it; plumb sim of the written plan gives plan's iteration, longer than the
# fused default's; fused writes nothing
ok ga-unfused "$P" plan "${CE[@]}" --grad-accum unfused --json -o "$d/ga.json"
has ga-unfused '^	"grad_accum":	"unfused",$'
ga_it=$(sed -n 's/^	"iteration_s":	\([0-9.e+-]*\),$/\1/p' "$d/out" | head -1)
grep -q '"grad_accum":	"unfused"' "$d/ga.json" ||
    { echo "FAIL ga-unfused: the plan file has no grad_accum"; fail=1; }
ok ga-text "$P" plan "${CE[@]}" --grad-accum unfused
has ga-text '^recompute none, sequence parallel off, zero 0, bf16, grad-accum unfused$'
ok ga-sim "$P" sim "$d/ga.json" --json
has ga-sim '^	"grad_accum":	"unfused",$'
ga_sim=$(sed -n 's/^	"iteration_s":	\([0-9.e+-]*\),$/\1/p' "$d/out" | head -1)
[ -n "$ga_it" ] && [ "$ga_sim" = "$ga_it" ] ||
    { echo "FAIL ga-sim: plumb sim of the unfused plan ($ga_sim) is not plan's ($ga_it)"; fail=1; }
ok ga-sim-text "$P" sim "$d/ga.json"
has ga-sim-text '^layout .*, bf16, grad-accum unfused'
python3 -c "import sys; sys.exit(0 if float('$ga_it') > float('$ce0_it') else 1)" ||
    { echo "FAIL ga-unfused: unfused $ga_it s is not longer than fused's $ce0_it s"; fail=1; }
ok ga-fused "$P" plan "${CE[@]}" --grad-accum fused --json -o "$d/ga0.json"
grep -q grad_accum "$d/out" "$d/ga0.json" &&
    { echo "FAIL ga-fused: grad_accum written for the default"; fail=1; }
ok ga-search "$P" plan --model examples/llm/nemo/llama2-7b.json -c "$H100" --global-batch 16 \
    --seq-len 1024 --gpus 8 --grad-accum unfused
has ga-search '^runtime of every layout: grad accumulation unfused$'
# Megatron-Core's own fused loss (--cross-entropy native): its word on the settings line, in
# the plan file and sim's report; plumb sim of that plan gives plan's iteration, between
# te's and the unfused loss's
ok ce-native "$P" plan "${CE[@]}" --cross-entropy native --json -o "$d/cen.json"
has ce-native '^	"cross_entropy":	"native",$'
cen_it=$(sed -n 's/^	"iteration_s":	\([0-9.e+-]*\),$/\1/p' "$d/out" | head -1)
grep -q '"cross_entropy":	"native"' "$d/cen.json" ||
    { echo "FAIL ce-native: the plan file has no cross_entropy native"; fail=1; }
ok ce-native-text "$P" plan "${CE[@]}" --cross-entropy native
has ce-native-text '^recompute none, sequence parallel off, zero 0, bf16, cross-entropy native$'
ok ce-native-sim "$P" sim "$d/cen.json" --json
has ce-native-sim '^	"cross_entropy":	"native",$'
cen_sim=$(sed -n 's/^	"iteration_s":	\([0-9.e+-]*\),$/\1/p' "$d/out" | head -1)
[ -n "$cen_it" ] && [ "$cen_sim" = "$cen_it" ] ||
    { echo "FAIL ce-native-sim: plumb sim of the native plan ($cen_sim) is not plan's ($cen_it)"; fail=1; }
python3 -c "import sys; sys.exit(0 if float('$ce_it') < float('$cen_it') < float('$ce0_it') else 1)" ||
    { echo "FAIL ce-native: native $cen_it s not between te's $ce_it s and unfused $ce0_it s"; fail=1; }

# Megatron-Core's uneven splits (docs/llm.md, "Uneven splits"): Llama 3.1 405B's 126 blocks
# with the embedding and the loss counted as a block each over pp 8 x V 8, two a virtual
# stage; the plan written and simulated again by plumb sim at the same iteration; first and
# last counts on GPT-3; each refusal one line
L405=examples/llm/nemo/llama31-405b.json
U405=(--gpus 1024 --tp 8 --pp 8 --dp 16 --global-batch 64 --interleave 8 --recompute full
    --sequence-parallel --zero 1 --account-for-embedding-in-pipeline-split
    --account-for-loss-in-pipeline-split)
ok uneven "$P" plan --model $L405 -c $A100 "${U405[@]}" -o "$d/u405.json"
has uneven '^stage 0: layers 0-1 \(embed \.\. block0\) on devices 0-127 \(16 groups of 8\)'
has uneven '^stage 1: layers 2-3 \(block1 \.\. block2\) on devices 128-255'
has uneven '^stage 62: layers 124-125 \(block123 \.\. block124\) on devices 768-895'
has uneven '^stage 63: layers 126-127 \(block125 \.\. head\) on devices 896-1023'
[ "$(grep -c '^stage [0-9]*: layers' "$d/out")" = 64 ] || { echo "FAIL uneven: not 64 stages"; fail=1; }
[ "$(grep -c '"first_layer"' "$d/u405.json")" = 64 ] || { echo "FAIL uneven: the plan has not 64 stages"; fail=1; }
ok uneven-json "$P" plan --model $L405 -c $A100 "${U405[@]}" --json
plan_it=$(grep -m1 '^	"iteration_s":' "$d/out")
ok uneven-sim "$P" sim "$d/u405.json" --json
if [ -z "$plan_it" ] || [ "$(grep -m1 '^	"iteration_s":' "$d/out")" != "$plan_it" ]; then
    echo "FAIL uneven-sim: plumb sim on the written plan differs from plan --json ($plan_it)"
    fail=1
fi
# the same split as Megatron-Core's layout string (--pipeline-layout, no --interleave: 64
# stages / pp 8): the same stages at the same iteration, the settings line naming the string
ok pplayout-405b "$P" plan --model $L405 -c $A100 --gpus 1024 --tp 8 --pp 8 --dp 16 \
    --global-batch 64 --recompute full --sequence-parallel --zero 1 \
    --pipeline-layout 'Et|(tt|)*62,tL' -o "$d/l405.json"
has pplayout-405b '^recompute full .*, pipeline layout Et\|\(tt\|\)\*62,tL$'
has pplayout-405b '^stage 63: layers 126-127 \(block125 \.\. head\) on devices 896-1023'
[ "$(grep -E '"(first_layer|last_layer|iteration_s)"' "$d/l405.json")" = \
  "$(grep -E '"(first_layer|last_layer|iteration_s)"' "$d/u405.json")" ] ||
    { echo "FAIL pplayout-405b: the stages or iteration differ from the accountings' plan"; fail=1; }
rm -f "$d/l405.json"
UFL=(--gpus 64 --tp 8 --pp 8 --global-batch 64 --interleave 2 --recompute full --zero 1)
ok uneven-fl "$P" plan --model $GPT3 -c $A100 "${UFL[@]}" --decoder-first-pipeline-num-layers 6 \
    --decoder-last-pipeline-num-layers 6
has uneven-fl '^stage 0: layers 0-3 \(embed \.\. block2\) on devices 0-7'
has uneven-fl '^stage 1: layers 4-10 \(block3 \.\. block9\) on devices 8-15'
has uneven-fl '^stage 7: layers 46-48 \(block45 \.\. block47\) on devices 56-63'
has uneven-fl '^stage 8: layers 49-51 \(block48 \.\. block50\) on devices 0-7'
has uneven-fl '^stage 15: layers 94-97 \(block93 \.\. head\) on devices 56-63'
bad uneven-both '--decoder-first-pipeline-num-layers: expected no --account-for-loss-in-pipeline-split with it' \
    "${UFL[@]}" --decoder-first-pipeline-num-layers 6 --account-for-loss-in-pipeline-split
bad uneven-v '--decoder-first-pipeline-num-layers: expected a multiple of --interleave 2' \
    "${UFL[@]}" --decoder-first-pipeline-num-layers 5
bad uneven-big '--decoder-last-pipeline-num-layers: expected 1 to the 96 blocks (got 100)' \
    "${UFL[@]}" --decoder-last-pipeline-num-layers 100
bad uneven-zero '--decoder-last-pipeline-num-layers' "${UFL[@]}" --decoder-last-pipeline-num-layers 0
bad uneven-mid '--decoder-first-pipeline-num-layers: expected the 86 blocks left to divide over the 7 other pipeline ranks' \
    --gpus 64 --tp 8 --pp 8 --global-batch 64 --decoder-first-pipeline-num-layers 10
bad uneven-acc '--account-for-embedding-in-pipeline-split: expected --pp x --interleave to divide the 96 blocks + the embedding + the loss = 98 (got 8 x 2 = 16)' \
    "${UFL[@]}" --account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split
bad uneven-balance '--balance: expected the even split, which balancing starts from' \
    "${UFL[@]}" --decoder-first-pipeline-num-layers 6 --balance
bad uneven-search '--decoder-first-pipeline-num-layers: belongs to a fixed layout' \
    --gpus 64 --global-batch 64 --decoder-first-pipeline-num-layers 6

cp $GPT3 "$d/model.json"
before=$(cksum <"$d/model.json")
expect_bad out-is-model '-o .*model.json: is the input' \
    "$P" plan --model "$d/model.json" -c $A100 --gpus 64 --tp 8 --pp 8 --global-batch 64 -o "$d/model.json"
[ "$(cksum <"$d/model.json")" = "$before" ] || { echo "FAIL: the model was overwritten"; fail=1; }
[ "$fail" = 0 ] && echo "llm3d.sh: ok"
exit "$fail"
