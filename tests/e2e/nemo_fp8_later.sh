#!/usr/bin/env bash
# nemo_fp8_later.sh: plumb against NVIDIA's DGX-H100 FP8 pretraining runs published after
# NeMo 24.07, rows no efficiency figure was fitted on (tests/data/nemo/nemo-h100-fp8-later.tsv:
# GPT-3 175B from NeMo 25.02's performance summary, Llama 3 70B from Megatron-Bridge's
# summaries 25.09 to 26.04.01, Llama 3.1 405B from 25.09 to 26.06 with the recipe's uneven
# split, the embedding and the loss counted as a block each: the table's pipeline_split
# emb+loss; sources and settings in tests/data/nemo/SOURCES.md). Every row ran with FP8
# primary weights (the table's fp8_param_gather column: --fp8-param-gather). It runs
# nemo_fp8.sh's planner and reader on that table twice, with the shipped efficiencies:
#   1. on profiles/clusters/dgx-h100.json as shipped: the GPT-3 and Llama 3.1 405B rows are
#      held to BAND_TOL; the Llama 3 70B rows, which plumb refuses as over 79 GiB (79.89 GiB
#      on rank 0 with FP8 primary weights, 83.88 without: the 2 bytes a block parameter they
#      save are not enough; docs/llm.md), are printed, and the script fails unless exactly
#      those REFUSED rows are refused, each at REFUSED_GIB;
#   2. on a copy of that file in the scratch folder with memory_gib raised to 96 (memory is
#      only a fit check: a fixed layout's times do not depend on it): every row held to
#      BAND_TOL each and MEAN_TOL on their mean (11 %: the 12 rows' mean is 9.27 %; with
#      gemm_fp8 5 % lower it is 11.46 %, and the script fails).
# The bands are a regression bound on out-of-sample rows, not a fit: as shipped the GPT-3 and
# 70B rows are predicted 12.8 to 15.1 % slower than published (NVIDIA's software sped up
# since the 24.07 runs the figures were fitted on: the same GPT-3 175B layout went from 782
# to 866 tokens/s per GPU), the 405B rows -5.7 to +4.3 %. docs/llm.md, "Later NVIDIA runs on
# DGX-H100 (out of sample)".
. "$(dirname "$0")/lib/start.sh" # P, d, fail=0
export PLUMB=$P NEMO_FP8_TSV=tests/data/nemo/nemo-h100-fp8-later.tsv
ALL=$(cut -f1 "$NEMO_FP8_TSV" | tail -n +2 | tr '\n' ' ')
L405=$(cut -f1 "$NEMO_FP8_TSV" | grep '^l405b-' | tr '\n' ' ')
REFUSED="l3-70b-25.09 l3-70b-25.11 l3-70b-26.02 l3-70b-26.02.01 l3-70b-26.04 l3-70b-26.04.01"
REFUSED_GIB=79.89
BAND_TOL=${NEMO_LATER_BAND_TOL:-18} MEAN_TOL=${NEMO_LATER_MEAN_TOL:-11}
SHIPPED=profiles/clusters/dgx-h100.json
if ! grep -q '"memory_gib": 79,' "$SHIPPED"; then
    echo "FAIL: $SHIPPED has no \"memory_gib\": 79 to raise"
    exit 1
fi

echo "== 1: $SHIPPED as shipped"
H100=$SHIPPED NEMO_FP8_HELD="gpt3-175b-25.02 $L405" NEMO_FP8_ROW_TOL=$BAND_TOL \
    NEMO_FP8_MEAN_TOL=$BAND_TOL NEMO_FP8_BAND_TOL=$BAND_TOL \
    bash tests/e2e/nemo_fp8.sh >"$d/1.out" 2>&1 || fail=1
cat "$d/1.out"
if grep -q '^nemo_fp8.sh: skip' "$d/1.out"; then
    exit "$fail" # plumb has no fp8 (the line above says so)
fi
got=$(grep 'plumb refuses the layout' "$d/1.out" | cut -d' ' -f1 | tr '\n' ' ')
if [ "$got" != "$REFUSED " ]; then
    echo "FAIL: refused for memory: '$got', expected '$REFUSED '"
    fail=1
fi
n=$(grep -c "plumb refuses the layout ($REFUSED_GIB GiB on a rank" "$d/1.out")
if [ "$n" != "$(echo "$REFUSED" | wc -w)" ]; then
    echo "FAIL: $n rows refused at $REFUSED_GIB GiB, expected every refused row"
    fail=1
fi

echo "== 2: $SHIPPED with memory_gib 96 (timing only)"
sed 's/"memory_gib": 79,/"memory_gib": 96,/' "$SHIPPED" >"$d/dgx-h100-96g.json"
H100=$d/dgx-h100-96g.json NEMO_FP8_HELD=$ALL NEMO_FP8_ROW_TOL=$BAND_TOL \
    NEMO_FP8_MEAN_TOL=$MEAN_TOL NEMO_FP8_BAND_TOL=$BAND_TOL \
    bash tests/e2e/nemo_fp8.sh || fail=1

[ "$fail" = 0 ] && echo "nemo_fp8_later.sh: ok"
exit "$fail"
