#!/usr/bin/env bash
# megatron_a100.sh: plumb's A100 cost model against published A100 runs it was NOT fitted on.
# For every row of tests/data/megatron/a100-more.tsv (NeMo Megatron's launcher README: GPT-3
# 5B and 175B on 1 to 128 DGX A100 nodes, July and September 2022; Megatron-LM's CI: a 7B
# GQA model on one DGX A100, 2025) runs `plumb plan --model ... -c dgx-a100-80g.json --gpus
# --tp --pp --dp --global-batch --microbatch-size [--interleave] --recompute
# [--sequence-parallel] --zero --precision --attention --p2p --grad-sync --grad-accum
# [--tp-overlap]
# [--overlap-param-gather] --json` with the row's settings, turns the published tokens per
# second into an iteration time (global batch x sequence / tokens per second) or takes the
# published iteration time, and prints published against predicted. It first checks each
# model file's parameter count against the closed form and the published size.
#
# dgx-a100-80g.json's gemm and memory efficiencies are fitted on Korthikanti et al. 2022's
# nine runs (megatron.sh); these rows are out of sample and are never used to refit it.
# The rows in HELD fail the script beyond ROW_TOL each or MEAN_TOL on their mean; every
# planned row fails beyond BAND_TOL (a regression bound); the others are printed marked 'not
# held:'. A row plumb refuses as too large for 80 GB is printed, not failed, when not held.
# Sources and assumptions: tests/data/megatron/SOURCES.md ("Out-of-sample A100 runs");
# results and what each row leaves out: docs/llm.md ("Out-of-sample A100 runs").
#
# A100=FILE runs the table on another cluster file; the script writes only to its scratch
# folder.
. "$(dirname "$0")/lib/published.sh" # P, d, fail=0, needs, profile_models, plan_args, plan_row...
export A100=${A100:-profiles/clusters/dgx-a100-80g.json}
TSV=${MEGATRON_A100_TSV:-tests/data/megatron/a100-more.tsv}
MODELS=examples/llm
# Held: the July 2022 NeMo runs of GPT-3 175B (TP 8, PP 8, selective recomputation with
# sequence parallelism, the layout plumb's A100 figures were fitted on, in other software
# and at 128 to 1024 GPUs). The others are printed (docs/llm.md says, row by row, what
# plumb leaves out of them).
export HELD=${MEGATRON_A100_HELD-"nemo2207-175b-16n nemo2207-175b-32n nemo2207-175b-128n"}
export ROW_TOL=${MEGATRON_A100_ROW_TOL:-5} MEAN_TOL=${MEGATRON_A100_MEAN_TOL:-3}
# Every row as shipped is within -4 ... +35 %: a row beyond 40 % either way fails.
export BAND_TOL=${MEGATRON_A100_BAND_TOL:-40}

needs megatron_a100.sh --tp-overlap --tp-overlap

# shellcheck disable=SC2046 # one name a word
profile_models name "$A100" "$MODELS" $(cut -f3 "$TSV" | tail -n +2 | sort -u)
# columns: run source model gpus tp pp dp global_batch microbatch_size interleave recompute
#          sequence_parallel zero precision attention p2p tp_overlap overlap_param_gather
#          grad_sync published_tokens_per_s published_iteration_s grad_accum
while IFS=$'\t' read -r run _ model gpus tp pp dp gb mbs il rc sp zero prec attn p2p tpo opg gs _ _ ga
do
    [ "$run" = run ] && continue
    plan_args "$MODELS/$model.json" "$A100" "$gpus" "$tp" "$pp" "$dp" "$gb" "$mbs" "$rc"
    args+=(--zero "$zero" --precision "$prec" --attention "$attn" --p2p "$p2p")
    args+=(--grad-sync "$gs" --grad-accum "${ga:-fused}" --json)
    layout_extras "$il" "$sp"
    [ "$tp" -gt 1 ] && [ "$tpo" != none ] && args+=(--tp-overlap "$tpo")
    [ "$opg" = 1 ] && args+=(--overlap-param-gather)
    plan_row # the reader says why a row failed (a layout over 80 GB is not held)
done <"$TSV"

python3 - "$TSV" "$MODELS" "$d" <<'PY' || fail=1
import os, sys

from published import (model_rows, parameter_errors, planned_report, row_verdict, start,
                       summarize)

tsv, models, tmp, rows, held, ROW_TOL, MEAN_TOL = start(sys.argv, os.environ)
BAND = float(os.environ["BAND_TOL"])
errs = {True: [], False: []}

# The sizes the sources give each model (NeMo's "5B" and "175B", the CI's "7b"); the model
# file must be the closed form exactly and the size within 5 % (GPT-3 175B: Brown et al.
# 2020's 174.6 B within 1 %).
PUBLISHED = {"a100/nemo-gpt3-5b-v50304": (5e9, 0.05), "a100/nemo-gpt3-5b-v50432": (5e9, 0.05),
             "megatron/gpt-175b": (174.6e9, 0.01), "a100/mcore-gpt3-7b-gqa-v131072": (7e9, 0.05)}
bad = parameter_errors(tmp, models, {r["model"] for r in rows}, PUBLISHED)

print(f"{os.path.basename(tsv)} on {os.environ['A100']}: published against plumb plan;"
      " error = t_pub / t_pred - 1 (that of tokens/s); * = held\n"
      f"{'run':20} {'t_pub (s)':>9} {'t_pred (s)':>10} {'error':>8} {'tok/s/GPU pub':>13}"
      f" {'pred':>6} {'mfu':>6} {'bubble':>6}")
for k, r, is_held, m in model_rows(rows, models, held):
    run = r["run"]
    s, B, n = m["max_position_embeddings"], int(r["global_batch"]), int(r["gpus"])
    if r["published_iteration_s"] != "-":
        t_pub = float(r["published_iteration_s"])
    else:
        t_pub = B * s / float(r["published_tokens_per_s"])
    rep, t, failed = planned_report(tmp, k, run, is_held, t_pub, 20)
    bad += failed
    if rep is None:
        continue
    err, flag, failed = row_verdict(errs, run, rep, r, is_held, t_pub, t, ROW_TOL, BAND)
    bad += failed
    tok = s * B / n
    print(f"{run + ('*' if is_held else ''):20} {t_pub:9.3f} {t:10.3f} {err:+7.2f}%"
          f" {tok / t_pub:13.0f} {tok / t:6.0f} {rep['mfu']:6.3f}"
          f" {rep.get('bubble_fraction', 0):6.3f}{flag}")
sys.exit(1 if bad + summarize(errs, held, MEAN_TOL) else 0)
PY
[ "$fail" = 0 ] && echo "megatron_a100.sh: ok"
exit "$fail"
