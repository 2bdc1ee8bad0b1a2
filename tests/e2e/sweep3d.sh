#!/usr/bin/env bash
# sweep3d.sh: `plumb sweep --model` prices what `plumb plan --model` prices. Each runtime
# setting of plan's search (--tp-overlap, --overlap-param-gather, --p2p sync, --grad-sync
# end, --grad-reduce, --optimizer-state), --balance, --cross-entropy te and the other
# options that change a candidate's cost (--precision, --schedule, --sequence-parallel,
# --seq-len, --attention, --recompute full --checkpoint-layers) swept over Llama-3-8B on 8
# and 16 H100s: at each count the sweep's best layout and its simulated iteration are those
# of plan --model's search with the same options on that count (both --json); the table,
# the JSON and the plot name the runtime. The combinations plan refuses get plan's line,
# exit 2, no output and no file.
. "$(dirname "$0")/lib/start.sh" # set -u, P, d (removed on exit), fail=0
H100=profiles/clusters/dgx-h100.json
LLAMA=examples/llm/llama3-8b.json
. "$(dirname "$0")/lib/expect.sh" # expect_bad_silent, ok, has

# same_best NAME GPUS: the sweep's point at GPUS ($d/sweep.json) against plan's #1 ($d/out)
same_best() {
    python3 - "$d/sweep.json" "$d/out" "$2" <<'PY' || { echo "FAIL $1: see above"; fail=1; }
import json, sys
sweep = json.load(open(sys.argv[1]))
plan = json.load(open(sys.argv[2]))
gpus = int(sys.argv[3])
pt = [p for p in sweep["points"] if p["gpus"] == gpus]
if not pt or not pt[0]["ok"]:
    sys.exit(print("no fitting point at %d GPUs in the sweep" % gpus) or 1)
a, b = pt[0]["layout"], plan["ranking"][0]
keys = ["tp", "pp", "dp", "microbatch_size", "interleave", "schedule", "recompute",
        "sequence_parallel", "zero", "iteration_s", "tokens_per_s", "mfu"]
diff = [k for k in keys if a[k] != b[k]]
diff += [k for k in ("balanced", "even_iteration_s") if a.get(k) != b.get(k)]
for k in ("tp_overlap", "overlap_param_gather", "p2p", "grad_sync", "grad_reduce",
          "optimizer_state", "balance", "cross_entropy"):
    if sweep.get(k) != plan.get(k): diff.append(k)
if diff:
    sys.exit(print("%d GPUs: sweep and plan differ in %s: %s / %s" % (gpus, diff,
             {k: a.get(k, sweep.get(k)) for k in diff}, {k: b.get(k, plan.get(k)) for k in diff})) or 1)
PY
}

settings=(
    "--tp-overlap full"
    "--tp-overlap backward"
    "--overlap-param-gather"
    "--p2p sync"
    "--tp-overlap full --overlap-param-gather --p2p sync"
    "--precision fp16 --schedule zb-h1"
    "--sequence-parallel --seq-len 4096 --attention flash"
    "--recompute full --checkpoint-layers 2"
    "--grad-reduce bf16 --optimizer-state bf16"
    "--grad-reduce bf16 --zero 1 --overlap-param-gather"
    "--balance --pp 4"
    "--grad-sync end --p2p sync"
    "--cross-entropy te"
)
for s in "${settings[@]}"; do
    name="sweep ${s// /_}"
    # shellcheck disable=SC2086
    ok "$name" "$P" sweep --model $LLAMA -c $H100 --gpus 8..16 --global-batch 128 $s --json
    cp "$d/out" "$d/sweep.json"
    top=3 # the sweep's default, twice that under p2p sync as plan's search
    case "$s" in *"--p2p sync"*) top=6 ;; esac
    for g in 8 16; do
        # shellcheck disable=SC2086
        ok "plan $g $s" "$P" plan --model $LLAMA -c $H100 --gpus $g --global-batch 128 \
            --top $top $s --json
        same_best "$name at $g" $g
    done
done

# the text and the plot name the runtime of every layout
ok sweep-text "$P" sweep --model $LLAMA -c $H100 --gpus 8..16 --global-batch 128 \
    --tp-overlap full --overlap-param-gather --p2p sync --tokens 1e11 --svg "$d/rt.svg"
has sweep-text '^runtime of every layout: tp overlap full \(tp > 1\), parameter all-gather under the forward \(zero 1\), p2p sync$'
grep -q 'runtime of every layout: tp overlap full' "$d/rt.svg" ||
    { echo "FAIL sweep-svg: the plot does not name the runtime"; fail=1; }
ok sweep-state16 "$P" sweep --model $LLAMA -c $H100 --gpus 8..16 --global-batch 128 \
    --grad-reduce bf16 --optimizer-state bf16 --balance --tokens 1e11 --svg "$d/s16.svg"
has sweep-state16 '^runtime of every layout: gradients bf16, optimizer state bf16$'
has sweep-balance '^stages balanced \(--balance\) in every layout simulated; the estimates split the blocks evenly$'
grep -q 'runtime of every layout: gradients bf16, optimizer state bf16' "$d/s16.svg" ||
    { echo "FAIL sweep-svg-state16: the plot does not name the gradients' precision"; fail=1; }
ok sweep-ce "$P" sweep --model $LLAMA -c $H100 --gpus 8..16 --global-batch 128 --cross-entropy te
has sweep-ce "^loss of every layout: cross-entropy te \\(Transformer Engine's fused loss\\)$"
ok sweep-default "$P" sweep --model $LLAMA -c $H100 --gpus 8..16 --global-batch 128
grep -q '^runtime of every layout\|^loss of every layout' "$d/out" &&
    { echo "FAIL sweep-default: a runtime or loss line at the default runtime"; fail=1; }

# what plan --model refuses, with plan's line: exit 2, one line, no output, no file
sweep_bad() { # sweep_bad NAME PATTERN ARGS...
    local name=$1 pat=$2; shift 2
    expect_bad_silent "$name" "$pat" "$d/bad.svg" "$P" sweep --model $LLAMA -c $H100 \
        --gpus 8..16 --global-batch 128 --tokens 1e11 "$@" --svg "$d/bad.svg"
}
sweep_bad opg-zero0 'sweep: --overlap-param-gather: belongs to --zero 1 (the distributed optimizer.s parameter all-gather)$' \
    --zero 0 --overlap-param-gather
sweep_bad tpo-tp1 'sweep: --tp-overlap: expected --tp 2 or more (no tensor-parallel collectives to overlap) (got --tp 1)$' \
    --tp 1 --tp-overlap full
sweep_bad tpo-mode 'sweep: --tp-overlap: expected none, backward or full (got "sometimes")$' \
    --tp-overlap sometimes
sweep_bad p2p-mode 'sweep: --p2p: expected overlap or sync (got "blocking")$' --p2p blocking
sweep_bad sync-zbv 'sweep: --p2p: expected overlap with schedule zb-v (its V placement deadlocks under blocking transfers; docs/sim.md) (got sync)$' \
    --p2p sync --schedule zb-v
sweep_bad sync-dualpipev 'sweep: --p2p: expected overlap with schedule dualpipev' \
    --p2p sync --schedule dualpipev
sweep_bad async 'sweep: --schedule: expected a synchronous schedule for the layout search (got pipedream' \
    --schedule pipedream
sweep_bad sched-name 'sweep: --schedule: expected gpipe, .* (got "auto")$' --schedule auto
sweep_bad precision 'sweep: --precision: expected bf16, fp16, tf32, fp32 or fp8 (got "int8")$' \
    --precision int8
sweep_bad attention 'sweep: --attention: expected standard or flash (got "sparse")$' \
    --attention sparse
sweep_bad cross-entropy 'sweep: --cross-entropy: expected unfused, te or native (got "fused")$' \
    --cross-entropy fused
sweep_bad ckpt 'sweep: --checkpoint-layers: belongs to --recompute full$' \
    --recompute selective --checkpoint-layers 2
sweep_bad state16-fp16 'sweep: --grad-reduce bf16: belongs to --precision bf16 or fp8 (got --precision fp16)$' \
    --precision fp16 --grad-reduce bf16
sweep_bad state16-value 'sweep: --optimizer-state: expected fp32 or bf16 (got "fp8")$' \
    --optimizer-state fp8
# and plan --model refuses each of them with the same words
for c in "--zero 0 --overlap-param-gather" "--tp 1 --tp-overlap full" "--p2p sync --schedule zb-v" \
         "--recompute selective --checkpoint-layers 2" "--precision fp32 --optimizer-state bf16" \
         "--grad-reduce e5m2" "--schedule zb-h1 --interleave 2" "--cross-entropy fused"; do
    # shellcheck disable=SC2086
    "$P" sweep --model $LLAMA -c $H100 --gpus 8..16 --global-batch 128 $c 2>"$d/sweep.err" >/dev/null
    # shellcheck disable=SC2086
    "$P" plan --model $LLAMA -c $H100 --gpus 8 --global-batch 128 $c 2>"$d/plan.err" >/dev/null
    [ "$(sed 's/^plumb: sweep: //' "$d/sweep.err")" = "$(sed 's/^plumb: plan: //' "$d/plan.err")" ] ||
        { echo "FAIL same-line $c: sweep: $(cat "$d/sweep.err") / plan: $(cat "$d/plan.err")"; fail=1; }
done
# context parallelism: at 32768 tokens with flash attention the sweep searches cp (the best
# at 8 and 16 H100s: tp 2 x cp 4 x dp 1 and tp 1 x cp 8 x dp 2), the same best as plan's search;
# --cp 4 pins it at every count
ok sweep-cp "$P" sweep --model $LLAMA -c $H100 --gpus 8..16 --global-batch 16 \
    --attention flash --seq-len 32768 --json
cp "$d/out" "$d/sweep.json"
for g in 8 16; do
    ok "plan-cp $g" "$P" plan --model $LLAMA -c $H100 --gpus $g --global-batch 16 --top 3 \
        --attention flash --seq-len 32768 --json
    same_best "sweep-cp at $g" $g
done
grep -q '"cp":	[248]' "$d/sweep.json" || { echo "FAIL sweep-cp: no best layout with cp"; fail=1; }
ok sweep-cp4 "$P" sweep --model $LLAMA -c $H100 --gpus 8..16 --global-batch 16 \
    --attention flash --seq-len 32768 --cp 4
has sweep-cp4 '^ +8  tp [0-9]+ cp 4 pp '
has sweep-cp4 '^ +16  tp [0-9]+ cp 4 pp '
[ $fail = 0 ] && echo "sweep3d.sh: ok"
exit $fail
