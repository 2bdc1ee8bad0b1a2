#!/usr/bin/env bash
# search3d.sh: the layout search end to end on the real binary: GPT-3 175B on 64 A100s with
# every dimension free prints the top five (layout, iteration, tokens/s, TFLOP/s per GPU,
# MFU, peak memory against capacity, why) and the best layout, writes it with -o (plumb sim
# on the written plan gives the iteration the search reported), --json gives the ranking
# and the best report; fixed dimensions stay fixed; on 128 H100s with --tp-overlap full
# --overlap-param-gather every candidate runs that runtime and the written plan carries it;
# --grad-reduce bf16 --optimizer-state bf16 likewise; an asynchronous schedule, a GPU count
# no layout uses, a batch no layout divides, a model no layout fits and a bad runtime
# combination each get one line, exit 2, no output and no file; --balance balances every
# layout simulated; --top with a fixed layout is refused.
# shellcheck source=lib/plan_model.sh
. "$(dirname "$0")/lib/plan_model.sh" # P, d, fail=0, A100, GPT3, bad, expect_bad, ok, has...

ok search "$P" plan --model $GPT3 -c $A100 --gpus 64 --global-batch 64 -o "$d/best.json"
has search '^plumb plan: searched [0-9]+ layouts on 64 GPUs \([0-9]+ fit memory by the estimate\), simulated the best 5'
for i in 1 2 3 4 5; do
    has "rank-$i" "^#$i tp [0-9]+ x pp [0-9]+ x dp [0-9]+, microbatch [0-9]+, (1f1b-flush|zb-h1|interleaved V [0-9]+|zb-v V 2|dualpipev V 2), recompute (none|selective|full)"
done
has figures '^   iteration [0-9.]+ s \(estimate [0-9.]+ s\), [0-9]+ tokens/s, [0-9.]+ TFLOP/s per GPU, MFU [0-9.]+ %, peak [0-9.]+ GiB of 79.00 GiB$'
has why1 '^   why: bubble [0-9.]+ %, TP comm [0-9.]+ %, DP exposed [0-9.]+ %, fits with (none|selective|full) recompute$'
has why2 '^   why: [0-9.]+ % slower'
has best '^the best layout:$'
has best-layout '^plumb plan: gpt3-175b on dgx-a100-80g, 64 GPUs: tp [0-9]+ x pp [0-9]+ x dp [0-9]+'
has written "plan written to $d/best.json"
# the first's iteration is the written plan's
it=$(sed -n 's/^   iteration \([0-9.]*\) s .*/\1/p' "$d/out" | head -1)
ok sim "$P" sim "$d/best.json" --json
simit=$(sed -n 's/^	"iteration_s":	\([0-9.e+-]*\),$/\1/p' "$d/out" | head -1)
awk -v a="$it" -v b="$simit" 'BEGIN { exit !(b > 0 && (a - b) / b < 1e-3 && (b - a) / b < 1e-3) }' ||
    { echo "FAIL sim-same: the search reported $it s, plumb sim on its plan $simit s"; fail=1; }

ok json "$P" plan --model $GPT3 -c $A100 --gpus 64 --global-batch 64 --json --top 6
has json-ranking '^	"ranking":	\[\{'
has json-best '^	"best":	\{'
has json-why '"why":	"bubble '
n=$(grep -c '"estimate_iteration_s":' "$d/out")
[ "$n" -ge 5 ] || { echo "FAIL json-top: $n ranked layouts, expected 5 or more"; fail=1; }

# fixed dimensions stay fixed
ok fixed "$P" plan --model $GPT3 -c $A100 --gpus 64 --global-batch 64 --tp 4 --recompute full
n=$(grep -c '^#[1-5] tp 4 x pp [0-9]* x dp [0-9]*, microbatch [0-9]*, .*, recompute full' "$d/out")
[ "$n" = 5 ] || { echo "FAIL fixed: $n of the 5 ranked keep tp 4 and full recompute"; fail=1; }
# --search searches the rest of a layout whose tp, pp and dp are given
ok search-flag "$P" plan --model $GPT3 -c $A100 --gpus 64 --global-batch 64 --tp 8 --pp 8 \
    --dp 1 --microbatch-size 1 --search
has search-flag '^#1 tp 8 x pp 8 x dp 1, microbatch 1, '
# every dimension given: today's fixed layout, no search
ok fixed-layout "$P" plan --model $GPT3 -c $A100 --gpus 64 --tp 8 --pp 8 --global-batch 64 \
    --recompute full
grep -q '^plumb plan: searched' "$d/out" && { echo "FAIL fixed-layout: it searched"; fail=1; }
has fixed-layout '^plumb plan: gpt3-175b on dgx-a100-80g, 64 GPUs: tp 8 x pp 8 x dp 1, schedule 1f1b-flush$'

bad async 'plan: --schedule: expected a synchronous schedule for the layout search (got pipedream, asynchronous: weight stashing, each microbatch updates stale weights: it changes training semantics' \
    --gpus 64 --global-batch 64 --schedule pipedream
# a fixed layout may still run an asynchronous schedule, marked as such
ok async-fixed "$P" plan --model $GPT3 -c $A100 --gpus 64 --tp 8 --pp 8 --global-batch 64 \
    --recompute full --zero 1 --sequence-parallel --schedule 2bw
has async-fixed '^schedule 2bw is asynchronous: 2 weight versions, gradients applied one step late: it changes training semantics$'
ok sync-fixed "$P" plan --model $GPT3 -c $A100 --gpus 64 --tp 8 --pp 8 --global-batch 64 \
    --recompute full --schedule zb-h1
grep -q 'changes training semantics' "$d/out" && { echo "FAIL sync-fixed: marked"; fail=1; }
bad gpus-layout 'plan: --dp: expected --gpus / (the other two) to be whole' \
    --gpus 64 --global-batch 64 --tp 8 --pp 3
bad gpus-servers 'dgx-a100-80g.json: --gpus: expected a multiple of the 8 devices per server (got 12)' \
    --gpus 12 --global-batch 64
bad batch 'plan: --global-batch: expected a multiple of the data-parallel replicas of some layout' \
    --gpus 64 --global-batch 7 --dp 2
bad no-fit 'plan: --gpus: expected a layout that fits the devices.* memory .*; try about [0-9]* GPUs or more' \
    --gpus 8 --global-batch 8
bad no-fit-hint 'try --recompute full, a smaller --microbatch-size' \
    --gpus 64 --global-batch 64 --recompute none --microbatch-size 8

# Megatron-Core's H100 runtime as a fixed property of every candidate: the ranking says so,
# the best layout and the written plan carry tp_overlap full (tp > 1) and the all-gather
# apart at zero 1, and plumb sim on that plan gives the iteration the search reported
H100=profiles/clusters/dgx-h100.json
ok runtime "$P" plan --model $GPT3 -c $H100 --gpus 128 --global-batch 128 --tp-overlap full \
    --overlap-param-gather -o "$d/rt.json"
has runtime-line '^runtime of every layout: tp overlap full \(tp > 1\), parameter all-gather under the forward \(zero 1\)$'
has runtime-rank '^#1 tp [248] x pp [0-9]+ x dp [0-9]+, microbatch [0-9]+, .*, zero [01]$'
has runtime-best '^recompute (none|selective|full).*, zero [01].*, bf16, tp overlap full$'
grep -q '"tp_overlap":	"full"' "$d/rt.json" || { echo "FAIL runtime-plan: no tp_overlap full"; fail=1; }
if grep -q '^#1 .*, zero 1$' "$d/out"; then
    grep -q '"overlap_param_gather":	true' "$d/rt.json" ||
        { echo "FAIL runtime-plan: zero 1 without overlap_param_gather"; fail=1; }
fi
it=$(sed -n 's/^   iteration \([0-9.]*\) s .*/\1/p' "$d/out" | head -1)
ok runtime-sim "$P" sim "$d/rt.json" --json
simit=$(sed -n 's/^	"iteration_s":	\([0-9.e+-]*\),$/\1/p' "$d/out" | head -1)
awk -v a="$it" -v b="$simit" 'BEGIN { exit !(b > 0 && (a - b) / b < 1e-3 && (b - a) / b < 1e-3) }' ||
    { echo "FAIL runtime-sim: the search reported $it s, plumb sim on its plan $simit s"; fail=1; }
ok runtime-json "$P" plan --model $GPT3 -c $H100 --gpus 64 --global-batch 64 \
    --tp-overlap backward --p2p sync --json --top 6
has runtime-json '^	"tp_overlap":	"backward",$'
has runtime-json-p2p '^	"p2p":	"sync",$'
grep -Eq '"schedule":	"(zb-v|dualpipev)"' "$d/out" &&
    { echo "FAIL runtime-json: a V kind ranked under p2p sync"; fail=1; }
# bad combinations with the search: one line, exit 2, nothing written
bad runtime-opg-zero0 'plan: --overlap-param-gather: belongs to --zero 1' \
    --gpus 64 --global-batch 64 --zero 0 --overlap-param-gather
bad runtime-tpo-tp1 'plan: --tp-overlap: expected --tp 2 or more .* (got --tp 1)' \
    --gpus 64 --global-batch 64 --tp 1 --tp-overlap full
bad runtime-tpo-mode 'plan: --tp-overlap: expected none, backward or full (got "sometimes")' \
    --gpus 64 --global-batch 64 --tp-overlap sometimes
bad runtime-sync-v 'plan: --p2p: expected overlap with schedule zb-v .* (got sync)' \
    --gpus 64 --global-batch 64 --p2p sync --schedule zb-v

# the gradients reduced after the last backward on every candidate: the ranking says so,
# the written plan carries it, plumb sim of that plan gives the search's figure, and the
# best layout's iteration is no shorter than the same layout overlapped
ok gsync "$P" plan --model $GPT3 -c $A100 --gpus 64 --global-batch 64 --grad-sync end \
    -o "$d/gs.json"
has gsync-text '^runtime of every layout: .*gradients reduced at the end'
grep -q '"grad_sync":	"end"' "$d/gs.json" || { echo "FAIL gsync: the plan lacks grad_sync"; fail=1; }
it=$(sed -n 's/^   iteration \([0-9.]*\) s .*/\1/p' "$d/out" | head -1)
ok gsync-sim-text "$P" sim "$d/gs.json"
has gsync-sim-text '^layout .*, gradients reduced at the end$'
ok gsync-sim "$P" sim "$d/gs.json" --json
has gsync-sim-json '^	"grad_sync":	"end",$'
simit=$(sed -n 's/^	"iteration_s":	\([0-9.e+-]*\),$/\1/p' "$d/out" | head -1)
awk -v a="$it" -v b="$simit" 'BEGIN { exit !(b > 0 && (a - b) / b < 1e-3 && (b - a) / b < 1e-3) }' ||
    { echo "FAIL gsync-sim: the search reported $it s, plumb sim on its plan $simit s"; fail=1; }
ok gsync-json "$P" plan --model $GPT3 -c $A100 --gpus 64 --global-batch 64 --grad-sync end \
    --json --top 6
has gsync-json '^	"grad_sync":	"end",$'
bad gsync-mode 'plan: --grad-sync: expected overlap or end (got "later")' \
    --gpus 64 --global-batch 64 --grad-sync later
bad gsync-async 'plan: --grad-sync: expected overlap with schedule pipedream .* (got end)' \
    --tp 8 --pp 2 --dp 4 --global-batch 64 --grad-sync end --schedule pipedream
bad gsync-opg 'plan: --overlap-param-gather: expected --grad-sync overlap .* (got --grad-sync end)' \
    --gpus 64 --global-batch 64 --grad-sync end --overlap-param-gather

# gradients and optimizer state in bf16 on every candidate: the ranking and the best layout
# say so and the written plan carries both; with fp32 weights, or a bad value, one line
ok state16 "$P" plan --model $GPT3 -c $H100 --gpus 64 --global-batch 64 --grad-reduce bf16 \
    --optimizer-state bf16 --top 2 -o "$d/s16.json"
has state16-line '^runtime of every layout: gradients bf16, optimizer state bf16$'
has state16-best '^recompute .*, bf16, gradients bf16, optimizer state bf16'
{ grep -q '"grad_reduce":	"bf16"' "$d/s16.json" &&
    grep -q '"optimizer_state":	"bf16"' "$d/s16.json"; } ||
    { echo "FAIL state16-plan: the written plan lacks grad_reduce / optimizer_state bf16"; fail=1; }
ok state16-sim "$P" sim "$d/s16.json"
has state16-sim-line '^layout .*, bf16 gradients, bf16 optimizer state$'
ok state16-sim-json "$P" sim "$d/s16.json" --json
has state16-sim-json '^	"grad_reduce":	"bf16",$'
has state16-sim-json-state '^	"optimizer_state":	"bf16",$'
bad state16-fp32 'plan: --grad-reduce bf16: belongs to --precision bf16 or fp8 (got --precision fp32)' \
    --gpus 64 --global-batch 64 --precision fp32 --grad-reduce bf16
bad state16-value 'plan: --optimizer-state: expected fp32 or bf16 (got "fp8")' \
    --gpus 64 --global-batch 64 --optimizer-state fp8

# --balance in the search: every layout simulated has its stages balanced as a fixed
# layout's are; GPT-2 at pp 4 (its head outweighs a block) gains, the best's plan is the
# balanced one (plumb sim on it gives the iteration ranked) and the balancing line is that
# of plan --balance on the same fixed layout
GPT2=examples/llm/gpt2.json
SEARCH_B=(--model "$GPT2" -c "$A100" --gpus 8 --pp 4 --global-batch 64)
ok bal-even "$P" plan "${SEARCH_B[@]}"
even1=$(sed -n 's/^   iteration \([0-9.]*\) s .*/\1/p' "$d/out" | head -1)
ok bal-search "$P" plan "${SEARCH_B[@]}" --balance -o "$d/bal.json"
has bal-line '^stages balanced \(--balance\) in every layout simulated; the estimates split the blocks evenly$'
has bal-even-split '^   iteration [0-9.]+ s \(estimate [0-9.]+ s; even split [0-9.]+ s\), '
has bal-best '^balancing: [0-9.]+ s -> [0-9.]+ s per iteration \(-[0-9.]+ %\), first stage [0-9]+ blocks?, last [0-9]+ blocks? \+ head'
bal1=$(sed -n 's/^   iteration \([0-9.]*\) s .*/\1/p' "$d/out" | head -1)
balline=$(grep '^balancing:' "$d/out")
best=$(sed -n 's/^iteration \([0-9.]*\) s, .*/\1/p' "$d/out")
awk -v a="$bal1" -v b="$even1" 'BEGIN { exit !(a > 0 && a < 0.95 * b) }' ||
    { echo "FAIL bal-gain: balanced search's best $bal1 s against the even search's $even1 s"; fail=1; }
lay=$(sed -n 's/^#1 tp \([0-9]*\) x pp \([0-9]*\) x dp \([0-9]*\), microbatch \([0-9]*\), \([a-z0-9-]*\).*, zero \([01]\)$/--tp \1 --pp \2 --dp \3 --microbatch-size \4 --schedule \5 --zero \6/p' "$d/out")
# shellcheck disable=SC2086
ok bal-fixed "$P" plan --model $GPT2 -c $A100 --gpus 8 --global-batch 64 $lay --balance
if [ -z "$lay" ] || [ "$(grep '^balancing:' "$d/out")" != "$balline" ]; then
    echo "FAIL bal-fixed: '$lay' balanced alone: $(grep '^balancing:' "$d/out") / in the search: $balline"
    fail=1
fi
# the fixed layout's --json carries what balancing gained, as its text line says
# shellcheck disable=SC2086
ok bal-fixed-json "$P" plan --model $GPT2 -c $A100 --gpus 8 --global-batch 64 $lay --balance --json
has bal-fixed-json '^	"balance":	\{$'
has bal-fixed-changed '^		"changed":	true,$'
fixed_even=$(sed -n 's/^		"even_iteration_s":	\([0-9.e+-]*\),$/\1/p' "$d/out")
fixed_bal=$(sed -n 's/^		"balanced_iteration_s":	\([0-9.e+-]*\),$/\1/p' "$d/out")
awk -v e="$fixed_even" -v b="$fixed_bal" 'BEGIN { exit !(b > 0 && b < e) }' ||
    { echo "FAIL bal-fixed-json: even $fixed_even s, balanced $fixed_bal s"; fail=1; }
ok bal-sim "$P" sim "$d/bal.json" --json
simit=$(sed -n 's/^	"iteration_s":	\([0-9.e+-]*\),$/\1/p' "$d/out" | head -1)
awk -v a="$best" -v b="$simit" 'BEGIN { exit !(b > 0 && (a - b) / b < 1e-3 && (b - a) / b < 1e-3) }' ||
    { echo "FAIL bal-sim: the search reported $best s, plumb sim on its plan $simit s"; fail=1; }
ok bal-json "$P" plan "${SEARCH_B[@]}" --balance --json
has bal-json '^	"balance":	true,$'
has bal-json-cand '^			"balanced":	true,$'
# accepted and ignored before: --top with a fixed layout, an interleave the schedule cannot
# run in the search (it searched nothing and blamed --gpus)
bad top-fixed 'plan: --top: belongs to the layout search' \
    --tp 8 --pp 8 --dp 1 --global-batch 64 --top 3
bad interleave-kind 'plan: --interleave: expected 1 with schedule zb-h1, which runs one stage per pipeline rank (got 2)' \
    --gpus 64 --global-batch 64 --schedule zb-h1 --interleave 2
bad interleave-one 'plan: --interleave: expected 2 or more virtual stages per rank with schedule interleaved (got 1; with one stage per rank use 1f1b-flush)' \
    --gpus 64 --global-batch 64 --schedule interleaved --interleave 1

# plumb sweep --model: the search per GPU count, days and cost of a token budget, deadline, plot
# (16 GPUs take 30.4 days at dgx-a100-80g.json's figures, 8 take 60.8: a 31-day deadline
# needs 16)
LLAMA=examples/llm/llama3-8b.json
ok sweep "$P" sweep --model $LLAMA -c $A100 --gpus 8..40 --global-batch 640 --tokens 1e11 \
    --price 2 --deadline 31 --svg "$d/front.svg"
has sweep '^plumb sweep: llama3-8b on dgx-a100-80g, 4 GPU counts'
has sweep-head '^  GPUs  best layout +tokens/s +MFU +days +cost \(USD\) USD/M tokens$'
for g in 8 16 32 40; do
    has "sweep-$g" "^ +$g  tp [0-9]+ pp [0-9]+ dp [0-9]+ b [0-9]+ [a-z0-9-]+( V [0-9]+)? (none|selective|full)( sp)? z[01] +[0-9]+ +[0-9.]+% +[0-9.]+ +[0-9]+ +[0-9.]+"
done
has sweep-deadline '^fewest GPUs that train 1e\+11 tokens within 31 days: 16$'
has sweep-plot "plot written to $d/front.svg"
grep -q '<circle class="point front"' "$d/front.svg" || { echo "FAIL sweep-svg: no front"; fail=1; }
ok sweep-json "$P" sweep --model $LLAMA -c $A100 --gpus 8..16 --global-batch 640 --json
has sweep-json '"format":	"plumb-sweep3d/1"'
has sweep-json-mfu '"mfu":	0\.[0-9]+'
sweep_bad() { # sweep_bad NAME PATTERN ARGS...: exit 2, one line, no output, no file
    local name=$1 pat=$2; shift 2
    expect_bad_silent "$name" "$pat" "$d/bad.svg" "$P" sweep "$@" --svg "$d/bad.svg"
}
expect_bad sweep-deadline-tokens 'sweep: --deadline: expected --tokens N' \
    "$P" sweep --model $LLAMA -c $A100 --gpus 8..16 --global-batch 64 --deadline 3
sweep_bad sweep-svg-tokens 'sweep: --svg: expected --tokens N with it' \
    --model $LLAMA -c $A100 --gpus 8..16 --global-batch 64
sweep_bad sweep-no-server 'dgx-a100-80g.json: --gpus: expected a range holding a whole server' \
    --model $LLAMA -c $A100 --gpus 1..7 --global-batch 64 --tokens 1e9
sweep_bad sweep-no-fit 'expected a layout that fits the devices' \
    --model $GPT3 -c $A100 --gpus 8..16 --global-batch 64 --tokens 1e9
# a profile made with tp > 1 is not swept as whole layers per device
ok profile-tp "$P" profile --model $LLAMA -c $A100 --tp 8 -o "$d/tp8.json"
sweep_bad sweep-tp-profile "tp8.json: tensor_parallel: expected 1: plumb sweep -p places whole layers on single devices (got 8)" \
    -p "$d/tp8.json" -c $A100 --gpus 8..16
# context parallelism in the search: --cp 8 pins it (tp 1 x cp 8 on a server's 8 GPUs);
# a sequence that 2 cp does not divide (8190 tokens) searches cp 1 only, as before
ok search-cp8 "$P" plan --model examples/llm/llama3-8b.json -c $A100 --gpus 8 \
    --global-batch 16 --attention flash --cp 8
has search-cp8 '^#1 tp 1 x cp 8 x pp 1 x dp 1, '
ok search-cp-odd "$P" plan --model examples/llm/llama3-8b.json -c $A100 --gpus 8 \
    --global-batch 16 --attention flash --seq-len 8190
grep -q ' x cp ' "$d/out" && { echo "FAIL search-cp-odd: a cp row at 8190 tokens"; fail=1; }
[ "$fail" = 0 ] && echo "search3d.sh: ok"
exit "$fail"
