#!/usr/bin/env bash
# megatron_h100.sh: plumb's H100 cost model against Megatron-LM's published H100 runs. For
# every row of tests/data/megatron/h100-readme.tsv (the Megatron-LM README's weak-scaling
# table of GPT 1.7B ... 462B on 48 ... 6144 H100s, and the end points of its strong-scaling
# figure, Megatron-Core r0.8.0, bf16) runs `plumb plan --model ... -c dgx-h100.json --gpus
# --tp --pp --dp --global-batch --microbatch-size [--interleave] --recompute
# [--sequence-parallel] --zero --precision --attention --json`, turns the published TFLOP/s
# per GPU (or MFU against 989.4 TFLOP/s) into an iteration time with Megatron-LM's own FLOP
# count and prints published against predicted; it also checks the model files' parameter
# counts against the closed form of Megatron's GPT. The rows in HELD fail the script beyond
# ROW_TOL each or MEAN_TOL on their mean; the others are printed for the record. Sources,
# assumptions and why only those rows are held: docs/llm.md, "Megatron-LM on H100".
#
# H100=FILE runs the table on another cluster file (the fit in docs/llm.md does that); the
# script writes only to its scratch folder.
. "$(dirname "$0")/lib/published.sh" # P, d, fail=0, needs, profile_models, plan_args, plan_row...
export H100=${H100:-profiles/clusters/dgx-h100.json}
TSV=${MEGATRON_H100_TSV:-tests/data/megatron/h100-readme.tsv}
MODELS=examples/llm/megatron-h100
# Held to the limits: 7.1B, 16B, 70B, 119B, 177B, 314B, 462B and the 177B on 96 and on
# 4608 GPUs, with dgx-h100.json's efficiencies (attention at cuDNN fused attention's
# published rate; gemm and memory fitted with the tensor-parallel collectives overlapped
# with the GEMMs, --tp-overlap full, and the parameter all-gather under the next forward)
# and the data-parallel rings leaving each node through as many of its NICs as the ring has
# GPUs there (docs/sim.md, "Rails"). Printed, not held (docs/llm.md): 1.7B (tp 1), which
# plumb predicts faster than measured (hidden 2048: "Shape-dependent efficiency" there);
# 32B (tp 8, one GPU per node in each ring, one NIC), whose fp32 gradient reduce-scatter
# outlasts the last of its 4 one-sequence backwards.
export HELD=${MEGATRON_H100_HELD:-"mlm24-7.1b mlm24-16b mlm24-70b mlm24-119b mlm24-177b
    mlm24-314b mlm24-462b mlm24-177b-strong-96 mlm24-177b-strong-4608"}
# The README's runs overlap the distributed optimizer's parameter all-gather with the next
# forward (--overlap-param-gather); MEGATRON_H100_OPG=0 prices it in one ring with the
# backward instead, as plumb does without the flag.
OPG=${MEGATRON_H100_OPG:-1}
# The README's runs overlap the tensor-parallel collectives with the GEMMs
# (--tp-comm-overlap): --tp-overlap full on every row with tp > 1; MEGATRON_H100_TPO=none
# (or backward) prices them otherwise.
TPO=${MEGATRON_H100_TPO:-full}
export ROW_TOL=${MEGATRON_H100_ROW_TOL:-5} MEAN_TOL=${MEGATRON_H100_MEAN_TOL:-3}

needs megatron_h100.sh --attention --attention

# The file describes 512 nodes; the README's largest runs used 768 (6144 GPUs) and 576: a
# copy with the outer level's count raised to the table's largest run, nothing else changed.
if ! python3 - "$H100" "$TSV" "$d/cluster.json" <<'PY'
import json, sys
src, tsv, out = sys.argv[1:4]
c = json.load(open(src))
need = max(int(l.split("\t")[2]) for l in list(open(tsv))[1:] if l.strip())
per = 1
for lv in c["levels"][:-1]:
    per *= lv["count"]
c["levels"][-1]["count"] = max(c["levels"][-1]["count"], -(-need // per))
json.dump(c, open(out, "w"), indent=1)
PY
then
    echo "FAIL: cannot read $H100 or $TSV"
    exit 1
fi
# --overlap-param-gather belongs to --zero 1 and a synchronous schedule: one line, exit 2,
# nothing on stdout
for extra in "--zero 0" "--zero 1 --schedule pipedream"; do
    # shellcheck disable=SC2086
    "$P" plan --model "$MODELS/gpt-1.7b.json" -c "$H100" --gpus 48 --tp 1 --pp 1 --dp 48 \
        --global-batch 192 --overlap-param-gather $extra >"$d/opg.out" 2>"$d/opg.err"
    rc=$?
    if [ $rc != 2 ] || [ -s "$d/opg.out" ] || [ "$(wc -l <"$d/opg.err")" != 1 ] ||
        ! grep -q "overlap" "$d/opg.err"; then
        echo "FAIL: --overlap-param-gather $extra: exit $rc, expected 2 and one line:"
        cat "$d/opg.err"
        fail=1
    fi
done
# --tp-overlap needs tensor parallelism and a known mode: one line, exit 2, nothing on stdout
for extra in "--tp 1 --tp-overlap full" "--tp 2 --tp-overlap sometimes"; do
    # shellcheck disable=SC2086
    "$P" plan --model "$MODELS/gpt-1.7b.json" -c "$H100" --gpus 48 --pp 1 --global-batch 192 \
        $extra >"$d/tpo.out" 2>"$d/tpo.err"
    rc=$?
    if [ $rc != 2 ] || [ -s "$d/tpo.out" ] || [ "$(wc -l <"$d/tpo.err")" != 1 ] ||
        ! grep -q -- "--tp-overlap" "$d/tpo.err"; then
        echo "FAIL: $extra: exit $rc, expected 2 and one line:"
        cat "$d/tpo.err"
        fail=1
    fi
done
# The model files' parameter counts, as `plumb profile` prints them (checked below).
# shellcheck disable=SC2046 # one name a word
profile_models path "$H100" "$MODELS" $(model_names "$MODELS")
# columns: run model gpus tp pp dp global_batch microbatch_size interleave recompute
#          sequence_parallel zero precision attention published_tflops_per_gpu published_mfu
#          grad_accum
while IFS=$'\t' read -r run model gpus tp pp dp gb mbs il rc sp zero prec attn _ _ ga; do
    [ "$run" = run ] && continue
    plan_args "$MODELS/$model.json" "$d/cluster.json" "$gpus" "$tp" "$pp" "$dp" "$gb" "$mbs" "$rc"
    args+=(--zero "$zero" --precision "$prec" --attention "$attn" --grad-accum "${ga:-fused}")
    args+=(--json)
    layout_extras "$il" "$sp"
    [ "$zero" = 1 ] && [ "$OPG" = 1 ] && args+=(--overlap-param-gather)
    [ "$tp" -gt 1 ] && args+=(--tp-overlap "$TPO")
    plan_row_or_fail "$run"
done <"$TSV"

python3 - "$TSV" "$MODELS" "$d" <<'PY' || fail=1
import json, os, sys

from published import (mfu_mismatch, model_rows, profiled_params, report, row_verdict, start,
                       summarize)

tsv, models, tmp, rows, held, ROW_TOL, MEAN_TOL = start(sys.argv, os.environ)
PEAK = 989.4  # H100 SXM dense bf16 TFLOP/s, the figure the source's MFU divides by
bad = 0
errs = {True: [], False: []}


# plumb's parameter count of each model file is Megatron's GPT with an untied output
# layer, 12 l h^2 + 13 l h + 2 V h + s h + 2 h (blocks with biases and two LayerNorms, the
# embedding and output matrices, learned positions, the final LayerNorm), within 5 % of the
# README's label (gpt-NNNb; the labels are rounded: 1.7B is 1.75 B).
for name in sorted(f[:-5] for f in os.listdir(models) if f.endswith(".json")):
    m = json.load(open(os.path.join(models, name + ".json")))
    l, h = m["num_hidden_layers"], m["hidden_size"]
    want = 12 * l * h * h + 13 * l * h + (2 * m["vocab_size"] + m["max_position_embeddings"]
                                          + 2) * h
    got = profiled_params(tmp, name)
    if got != want or abs(want / float(name[4:-1]) / 1e9 - 1) > 0.05:
        print(f"FAIL {name}: plumb counts {got} parameters, expected {want}")
        bad += 1

print(f"{os.path.basename(tsv)} on {os.environ['H100']}: published against plumb plan;"
      " error = t_pub / t_pred - 1 (the error of TFLOP/s per GPU); * = held\n"
      f"{'run':24} {'published':>14} {'t_pub (s)':>10} {'t_pred (s)':>10} {'error':>8}"
      f" {'plumb TFLOP/s':>13} {'mfu':>6} {'bubble':>6}")
for k, r, is_held, m in model_rows(rows, models, held):
    run = r["run"]
    L, h, s, V = (m[key] for key in ("num_hidden_layers", "hidden_size",
                                     "max_position_embeddings", "vocab_size"))
    B, n = int(r["global_batch"]), int(r["gpus"])
    if m["intermediate_size"] != 4 * h or m.get("num_key_value_heads",
                                                m["num_attention_heads"]) != m["num_attention_heads"]:
        print(f"FAIL {run}: the FLOP count below is GPT's (MLP 4h, no grouped-query attention)")
        bad += 1
        continue
    # Megatron-LM's num_floating_point_operations (megatron/training/training.py of the
    # source's release): model FLOPs, the GEMMs of the blocks and the logit layer, the
    # attention counted without causal masking, recomputation not counted.
    F = 72 * B * s * L * h * h * (1 + s / (6 * h) + V / (12 * L * h))
    if r["published_tflops_per_gpu"] != "-":
        x = float(r["published_tflops_per_gpu"])
        shown = f"{x:g} TFLOP/s"
    else:
        x = float(r["published_mfu"]) * PEAK
        shown = f"MFU {float(r['published_mfu']):.0%}"
    t_pub = F / (x * 1e12 * n)
    rep, t_pred = report(os.path.join(tmp, f"{k}.json"))
    if rep is None:
        print(f"FAIL {run} ({shown}, t_pub {t_pub:.3f} s): {t_pred}")
        bad += 1
        continue
    err, flag, failed = row_verdict(errs, run, rep, r, is_held, t_pub, t_pred, ROW_TOL,
                                    not_held="  (> {tol:g} %, not held)")
    bad += failed
    # plumb's own MFU uses the same FLOP count: a check that the row's model file and the
    # conversion above describe the same work.
    mfu_pub = F / (t_pred * n * PEAK * 1e12)
    bad += mfu_mismatch(run, rep, mfu_pub,
                        f"Megatron-LM's count {mfu_pub:.4f} at the predicted time")
    print(f"{run + ('*' if is_held else ''):24} {shown:>14} {t_pub:10.3f} {t_pred:10.3f}"
          f" {err:+7.2f}% {rep['tflops_per_gpu']:13.1f} {rep['mfu']:6.3f}"
          f" {rep.get('bubble_fraction', 0):6.3f}{flag}")
sys.exit(1 if bad + summarize(errs, held, MEAN_TOL) else 0)
PY
[ "$fail" = 0 ] && echo "megatron_h100.sh: ok"
exit "$fail"
