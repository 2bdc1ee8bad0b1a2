#!/usr/bin/env bash
# ui3d.sh: `plumb ui --model` prices what `plumb plan --model` prices. For each runtime
# option set (--tp-overlap, --p2p, --grad-reduce and --optimizer-state bf16,
# --overlap-param-gather, --balance, --attention) the dashboard's first frame shows the
# iteration time and tokens/s of `plumb plan --model ... --json` with the same options,
# written as the dashboard writes them, and its runtime row names the setting; after a
# what-if key (dp up, tp down, ZeRO off) the frame shows plan's figures for the changed
# layout, with the settings that layout cannot take marked n/a. Each option must also
# change plan's figures here, so that a dashboard that dropped it would fail. The runtime
# keys (k K y j E f) set the same options: the frame after them shows plan's figures, a
# combination plan refuses is refused with plan's line and the settings kept, and `s`
# saves a plan that carries them.
. "$(dirname "$0")/lib/start.sh" # set -u, P, d (removed on exit), fail=0
M=(--model examples/llm/gpt2.json -c profiles/clusters/dgx-a100-80g.json --global-batch 16)
LAY=(--tp 2 --pp 2 --dp 2)

# figures FILE: "ITER TOKENS" as the dashboard prints them, from plan --model's JSON report
# (ui_fmt_time's four significant digits; tokens/s as %.0f)
figures() {
    python3 - "$1" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
s = r["iteration_s"]
u, v = ("s", s) if s >= 1 else ("ms", s * 1e3) if s >= 1e-3 else ("us", s * 1e6)
dec = 0 if v >= 1000 else 1 if v >= 100 else 2 if v >= 10 else 3
print("%.*f %s %.0f" % (dec, v, u, r["tokens_per_s"]))
EOF
}

# shown FILE: "ITER TOKENS" from the frame's figures row
shown() {
    sed -n 2p "$1" | sed -E 's/.*iter ([0-9.]+ [mu]?s) .*tokens\/s ([0-9]+) .*/\1 \2/'
}

# check NAME ROW "PLAN ARGS" "UI ARGS" KEYS: the frame after KEYS under UI ARGS shows plan's
# figures under PLAN ARGS, at 120x40 and at 160x40, and the 160-column frame's runtime row
# (the option names) matches ROW
check() {
    local name=$1 row=$2 pargs=$3 uargs=$4 keys=$5
    # shellcheck disable=SC2086
    if ! "$P" plan "${M[@]}" $pargs --json >"$d/plan.json" 2>"$d/err"; then
        echo "FAIL $name: plan --model $pargs: $(cat "$d/err")"; fail=1; return
    fi
    local want got size
    want=$(figures "$d/plan.json")
    for size in 120x40 160x40; do
        # shellcheck disable=SC2086
        if ! "$P" ui "${M[@]}" $uargs --snapshot $size --keys "$keys" --mono >"$d/frame" \
            2>"$d/err"; then
            echo "FAIL $name: ui --model $uargs --keys '$keys': $(cat "$d/err")"; fail=1; return
        fi
        got=$(shown "$d/frame")
        if [ "$want" != "$got" ]; then
            echo "FAIL $name ($size): the dashboard shows '$got', plan --model $pargs '$want':"
            sed -n 1,5p "$d/frame"; fail=1
        fi
    done
    if ! sed -n 4p "$d/frame" | grep -Eq -- "^runtime .*$row"; then
        echo "FAIL $name: the runtime row lacks '$row':"; sed -n 4p "$d/frame"; fail=1
    fi
}

# differs NAME "ARGS" "BASE": plan's figures under ARGS differ from those under BASE (the
# same layout without the option)
differs() {
    # shellcheck disable=SC2086
    if ! "$P" plan "${M[@]}" $2 --json >"$d/a.json" 2>/dev/null ||
        ! "$P" plan "${M[@]}" $3 --json >"$d/b.json" 2>/dev/null; then
        echo "FAIL $1: plan --model refused $2 or $3"; fail=1; return
    fi
    [ "$(figures "$d/a.json")" != "$(figures "$d/b.json")" ] ||
        { echo "FAIL $1: $2 prices the same as $3 here: the check cannot fail"; fail=1; }
}

L="${LAY[*]}"
# --overlap-param-gather pays off where the all-gather outlasts the first forward: 16
# replicas over two servers, short sequences
O="--tp 1 --pp 1 --dp 16 --seq-len 128 --zero 1"
check default 'tp-overlap none  overlap-param-gather off  p2p overlap  grad-reduce fp32' \
    "$L" "$L" ''
# LAYOUT|OPTIONS|RUNTIME ROW
for opt in "$L|--tp-overlap full|tp-overlap full" "$L|--tp-overlap backward|tp-overlap backward" \
    "$L|--p2p sync|p2p sync" \
    "$L|--grad-reduce bf16 --optimizer-state bf16|grad-reduce bf16  optimizer-state bf16" \
    "$O|--overlap-param-gather|overlap-param-gather on" \
    "$L|--balance|balance on \\(-[0-9.]+%\\)" "$L|--attention flash|attention flash" \
    "$L|--grad-sync end|grad-sync end" \
    "$L|--tp-overlap full --p2p sync --grad-reduce bf16 --balance|tp-overlap full .*p2p sync"; do
    lay=${opt%%|*} rest=${opt#*|}
    args=${rest%%|*} row=${rest#*|}
    check "$args" "$row" "$lay $args" "$lay $args" ''
    differs "$args" "$lay $args" "$lay"
done

# what-if keys carry the runtime: w (dp 2 -> 4, 16 GPUs), G (tp 2 -> 1: tp overlap n/a),
# o (ZeRO 1 -> 0: the parameter all-gather apart n/a)
check "w with tp overlap, p2p sync, bf16" 'tp-overlap full  .*p2p sync  grad-reduce bf16' \
    "--tp 2 --pp 2 --dp 4 --tp-overlap full --p2p sync --grad-reduce bf16" \
    "$L --tp-overlap full --p2p sync --grad-reduce bf16" 'w'
differs "w: the runtime" "--tp 2 --pp 2 --dp 4 --tp-overlap full --p2p sync --grad-reduce bf16" \
    "--tp 2 --pp 2 --dp 4"
check "w with balance" 'balance on' "--tp 2 --pp 2 --dp 4 --balance" "$L --balance" 'w'
differs "w: balance" "--tp 2 --pp 2 --dp 4 --balance" "--tp 2 --pp 2 --dp 4"
check "G with tp overlap" 'tp-overlap n/a  .*p2p sync' "--tp 1 --pp 2 --dp 4 --p2p sync" \
    "$L --tp-overlap full --p2p sync" 'G'
differs "G: p2p sync" "--tp 1 --pp 2 --dp 4 --p2p sync" "--tp 1 --pp 2 --dp 4"
check "o with overlap-param-gather" 'overlap-param-gather n/a  .*optimizer-state bf16' \
    "${O/--zero 1/--zero 0} --optimizer-state bf16" \
    "$O --overlap-param-gather --optimizer-state bf16" 'o'
check "oo back to zero 1" 'overlap-param-gather on' "$O --overlap-param-gather" \
    "$O --overlap-param-gather" 'oo'

# the runtime keys: k K (tp-overlap none -> backward -> full, K the other way), y (p2p),
# j (overlap-param-gather), E (grad-sync), f (attention): the frame after them shows
# plan's figures under the options they set, alone, together and with layout keys after
# them
check "k" 'tp-overlap backward' "$L --tp-overlap backward" "$L" 'k'
check "kk" 'tp-overlap full' "$L --tp-overlap full" "$L" 'kk'
check "kkk back to none" 'tp-overlap none' "$L" "$L" 'kkk'
check "K from full" 'tp-overlap backward' "$L --tp-overlap backward" "$L --tp-overlap full" 'K'
check "y" 'p2p sync' "$L --p2p sync" "$L" 'y'
check "y from sync" 'p2p overlap' "$L" "$L --p2p sync" 'y'
check "f" 'attention flash' "$L --attention flash" "$L" 'f'
check "j" 'overlap-param-gather on' "$O --overlap-param-gather" "$O" 'j'
check "j from on" 'overlap-param-gather off' "$O" "$O --overlap-param-gather" 'j'
check "E" 'grad-sync end' "$L --grad-sync end" "$L" 'E'
check "E from end" 'balance off' "$L" "$L --grad-sync end" 'E'
grep -q 'grad-sync' <(sed -n 4p "$d/frame") &&
    { echo "FAIL E from end: the runtime row still names grad-sync:"; sed -n 4p "$d/frame"; fail=1; }
check "EyEw" 'p2p sync .*grad-sync end' "--tp 2 --pp 2 --dp 4 --p2p sync --grad-sync end" \
    "$L --grad-sync end" 'EyEw'
# under grad-sync end the schedule keys skip pipedream and 2bw: from 1f1b-flush, c reaches
# interleaved (at its default 2 chunks)
check "E then c past pipedream and 2bw" 'grad-sync end' \
    "$L --grad-sync end --schedule interleaved --interleave 2" "$L" 'Ec'
check "kyf" 'tp-overlap backward .*p2p sync .*attention flash' \
    "$L --tp-overlap backward --p2p sync --attention flash" "$L" 'kyf'
check "kkyw" 'tp-overlap full .*p2p sync' "--tp 2 --pp 2 --dp 4 --tp-overlap full --p2p sync" \
    "$L" 'kkyw'
check "kG: n/a at tp 1" 'tp-overlap n/a  .*p2p sync' "--tp 1 --pp 2 --dp 4 --p2p sync" "$L" 'kyG'
check "jo: n/a at zero 0" 'overlap-param-gather n/a' "${O/--zero 1/--zero 0}" "$O" 'jo'
# under p2p sync the schedule keys skip zb-v and dualpipev (they deadlock under it): from
# zb-h1, c reaches gpipe
check "y then c past zb-v" 'p2p sync' "$L --p2p sync --schedule gpipe" "$L --schedule zb-h1" 'yc'
check "c past zb-v under --p2p sync" 'p2p sync' "$L --p2p sync --schedule gpipe" \
    "$L --p2p sync --schedule zb-h1" 'c'
check "C past dualpipev under --p2p sync" 'p2p sync' "$L --p2p sync --schedule zb-h1" \
    "$L --p2p sync --schedule gpipe" 'C'

# refused NAME "UI ARGS" KEYS "PLAN ARGS": what plan --model refuses under PLAN ARGS, the
# keys ask for under UI ARGS: the frame's status line is plan's line (without "plumb:
# plan: "), never the simulator's deadlock line, the frame shows plan's figures under UI
# ARGS (the settings kept), and u after the key finds nothing to undo
refused() {
    local name=$1 uargs=$2 keys=$3 pargs=$4 line
    # shellcheck disable=SC2086
    if "$P" plan "${M[@]}" $pargs --json >/dev/null 2>"$d/err"; then
        echo "FAIL $name: plan --model $pargs is not refused"; fail=1; return
    fi
    line=$(sed 's/^plumb: plan: //' "$d/err")
    # shellcheck disable=SC2086
    "$P" plan "${M[@]}" $uargs --json >"$d/plan.json" 2>/dev/null
    # shellcheck disable=SC2086
    "$P" ui "${M[@]}" $uargs --snapshot 300x40 --keys "$keys" --mono >"$d/frame" 2>&1
    grep -qF -- "$line" "$d/frame" ||
        { echo "FAIL $name: the frame lacks plan's line '$line':"; cat "$d/frame"; fail=1; }
    grep -Eq "schedule deadlocks|deadlock:" "$d/frame" &&
        { echo "FAIL $name: the simulator's deadlock line"; fail=1; }
    [ "$(shown "$d/frame")" = "$(figures "$d/plan.json")" ] ||
        { echo "FAIL $name: the settings were not kept: $(shown "$d/frame")"; fail=1; }
    # shellcheck disable=SC2086
    "$P" ui "${M[@]}" $uargs --snapshot 300x40 --keys "${keys}u" --mono >"$d/frame" 2>&1
    grep -q "nothing to undo" "$d/frame" ||
        { echo "FAIL $name: the refused key was recorded:"; tail -1 "$d/frame"; fail=1; }
}
refused "k at tp 1" "--tp 1 --pp 2 --dp 4" 'k' "--tp 1 --pp 2 --dp 4 --tp-overlap backward"
refused "K at tp 1" "--tp 1 --pp 2 --dp 4" 'K' "--tp 1 --pp 2 --dp 4 --tp-overlap full"
refused "j at zero 0" "$L" 'j' "$L --overlap-param-gather"
refused "j on pipedream" "$L --zero 1 --schedule pipedream" 'j' \
    "$L --zero 1 --schedule pipedream --overlap-param-gather"
refused "y on zb-v" "$L --schedule zb-v" 'y' "$L --schedule zb-v --p2p sync"
refused "y on dualpipev" "$L --schedule dualpipev" 'y' "$L --schedule dualpipev --p2p sync"
refused "E on pipedream" "$L --schedule pipedream" 'E' "$L --schedule pipedream --grad-sync end"
refused "E on 2bw" "$L --schedule 2bw" 'E' "$L --schedule 2bw --grad-sync end"
refused "E with overlap-param-gather" "$O --overlap-param-gather" 'E' \
    "$O --overlap-param-gather --grad-sync end"
refused "j under grad-sync end" "$O --grad-sync end" 'j' "$O --overlap-param-gather --grad-sync end"

# --cp C (context parallelism) as plan --model takes it: the first frame shows plan's
# figures and the layout row names cp; v V (cp up / down, the GPUs kept: dp follows), g
# and w carry cp into every layout they reach; bad values are refused with plan's line
CP="--cp 2 --attention flash"
check "--cp 2" 'attention flash' "$L $CP" "$L $CP" ''
grep -q 'GPUs 16 = tp 2 x cp 2 x pp 2 x dp 2  mbs 1' "$d/frame" ||
    { echo "FAIL --cp 2: the layout row lacks cp:"; sed -n 3p "$d/frame"; fail=1; }
differs "--cp 2" "$L $CP" "--tp 2 --pp 2 --dp 4 --attention flash"
check "v: cp 4" 'attention flash' "--tp 2 --pp 2 --dp 1 --cp 4 --attention flash" "$L $CP" 'v'
grep -q 'GPUs 16 = tp 2 x cp 4 x pp 2 x dp 1' "$d/frame" ||
    { echo "FAIL v: the layout row:"; sed -n 3p "$d/frame"; fail=1; }
check "V: cp 1" 'attention flash' "--tp 2 --pp 2 --dp 4 --attention flash" "$L $CP" 'V'
check "v from cp 1" 'attention flash' "--tp 2 --pp 2 --dp 1 --cp 2 --attention flash" \
    "$L --attention flash" 'v'
check "g with cp" 'attention flash' "--tp 4 --pp 2 --dp 1 --cp 2 --attention flash" "$L $CP" 'g'
check "w with cp" 'attention flash' "--tp 2 --pp 2 --dp 4 --cp 2 --attention flash" "$L $CP" 'w'
# a cp that does not apply: the status line says why, nothing changes
# shellcheck disable=SC2086
"$P" ui "${M[@]}" $L --snapshot 200x30 --keys v --mono >"$d/frame" 2>&1
grep -q 'no larger cp 1: cp 2 needs flash attention (f)' "$d/frame" ||
    { echo "FAIL v under standard attention:"; tail -1 "$d/frame"; fail=1; }
# shellcheck disable=SC2086
"$P" ui "${M[@]}" $L $CP --snapshot 250x30 --keys vv --mono >"$d/frame" 2>&1
grep -q 'no larger cp 4: 2 x cp must divide the sequence of 1024 tokens, tp x cp a server' \
    "$d/frame" || { echo "FAIL vv past a server:"; tail -1 "$d/frame"; fail=1; }
refused "f at cp 2" "$L $CP" 'f' "$L --cp 2 --attention standard"
for bad in "--cp 0" "--cp x" "--cp 2"; do
    # shellcheck disable=SC2086
    "$P" plan "${M[@]}" $L $bad >/dev/null 2>"$d/perr"
    # shellcheck disable=SC2086
    "$P" ui "${M[@]}" $L $bad --snapshot 80x24 >/dev/null 2>"$d/uerr"; rc=$?
    want=$(sed 's/^plumb: plan: /plumb: ui: /' "$d/perr")
    [ $rc = 2 ] && [ "$(wc -l <"$d/uerr")" = 1 ] && [ "$(cat "$d/uerr")" = "$want" ] ||
        { echo "FAIL ui $bad: exit $rc, '$(cat "$d/uerr")', plan says '$want'"; fail=1; }
done
# s after the runtime keys saves a plan that carries them: plumb sim of it prints plan's
# figures under the options the keys set, and its fields name them
saved() {
    local name=$1 uargs=$2 keys=$3 pargs=$4 fields=$5 f
    rm -rf "$d/out" && mkdir "$d/out"
    # shellcheck disable=SC2086
    "$P" ui "${M[@]}" $uargs --snapshot 120x40 --keys "$keys" --mono -o "$d/out" >"$d/frame" 2>&1
    f=$(ls "$d"/out/*.plan.json 2>/dev/null | head -1)
    if [ -z "$f" ]; then echo "FAIL $name: nothing saved:"; tail -1 "$d/frame"; fail=1; return; fi
    # shellcheck disable=SC2086
    "$P" plan "${M[@]}" $pargs --json >"$d/plan.json" 2>&1
    "$P" sim "$f" --json >"$d/sim.json" 2>&1
    [ "$(figures "$d/sim.json")" = "$(figures "$d/plan.json")" ] ||
        { echo "FAIL $name: plumb sim of the saved plan '$(figures "$d/sim.json")', plan" \
            "--model $pargs '$(figures "$d/plan.json")'"; fail=1; }
    python3 - "$f" "$fields" <<'EOF2' || fail=1
import json, sys
p = json.load(open(sys.argv[1]))
for kv in sys.argv[2].split():
    k, v = kv.split("=")
    got = str(p.get(k)).lower()
    if got != v:
        print("FAIL saved %s: %s is %s, expected %s" % (sys.argv[1], k, got, v))
        sys.exit(1)
EOF2
}
saved "kyf s" "$L" 'kyfs' "$L --tp-overlap backward --p2p sync --attention flash" \
    'tp_overlap=backward p2p=sync'
saved "j s" "$O" 'js' "$O --overlap-param-gather" 'overlap_param_gather=true'
saved "E s" "$L" 'Es' "$L --grad-sync end" 'grad_sync=end'
saved "v s" "$L $CP" 'vs' "--tp 2 --pp 2 --dp 1 --cp 4 --attention flash" 'cp=4'

# Megatron-Core's uneven split (--decoder-first-pipeline-num-layers 4: rank 0 the
# embedding and 4 blocks, rank 1 the other 8 and the head) rides every layout: the first
# frame and w (dp 4) show plan's figures under the split, the runtime row names it, and D
# (pp 1, which Megatron refuses) is refused with plan's line
U="--decoder-first-pipeline-num-layers 4"
check "$U" 'pp-first-layers-4' "$L $U" "$L $U" ''
differs "$U" "$L $U" "$L"
check "w with $U" 'pp-first-layers-4' "--tp 2 --pp 2 --dp 4 $U" "$L $U" 'w'
# shellcheck disable=SC2086
"$P" plan "${M[@]}" --tp 2 --pp 1 --dp 8 $U >/dev/null 2>"$d/perr"
# shellcheck disable=SC2086
"$P" ui "${M[@]}" $L $U --snapshot 200x30 --keys D --mono >"$d/frame" 2>&1
grep -qF -- "no smaller pp 2: pp 1: $(sed 's/^plumb: plan: //' "$d/perr")" "$d/frame" ||
    { echo "FAIL D under $U: '$(cat "$d/perr")':"; tail -1 "$d/frame"; fail=1; }
# nomodel IN OUT: plan file IN without its "model", as files were written before they named
# it (the dashboard's 2D view of a plan file)
nomodel() {
    python3 -c 'import json, sys; p = json.load(open(sys.argv[1])); del p["model"]
json.dump(p, open(sys.argv[2], "w"), indent="\t")' "$1" "$2"
}
# a plan file written with the split, without its model, opened in the dashboard: m (twice
# the microbatches, the file's stages kept) keeps it, at plan's figures for the doubled
# global batch
# shellcheck disable=SC2086
"$P" plan "${M[@]}" $L $U -o "$d/um.json" >/dev/null
nomodel "$d/um.json" "$d/u.json"
# shellcheck disable=SC2086
"$P" plan "${M[@]/16/32}" $L $U --json >"$d/plan.json"
"$P" ui "$d/u.json" --snapshot 160x30 --keys m --mono >"$d/frame" 2>&1
[ "$(shown "$d/frame")" = "$(figures "$d/plan.json")" ] && grep -q '^|  0 0-4  ' "$d/frame" ||
    { echo "FAIL m on a plan file with $U: '$(shown "$d/frame")', plan" \
        "'$(figures "$d/plan.json")'"; sed -n 1,8p "$d/frame"; fail=1; }

# Megatron-Core's layout string (--pipeline-layout, the same split as the block above,
# "Et*4|t*8L") rides every layout: the first frame and w show plan's figures under it, the
# runtime row names it; d (pp 4) and i (interleave 2), which change the layout's pp x V, are
# refused with its rule's line
PL="--pipeline-layout Et*4|t*8L"
check "$PL" 'pipeline-layout' "$L $PL" "$L $PL" ''
check "w with $PL" 'pipeline-layout' "--tp 2 --pp 2 --dp 4 $PL" "$L $PL" 'w'
# shellcheck disable=SC2086
"$P" plan "${M[@]}" $L $U --json >"$d/a.json" && "$P" plan "${M[@]}" $L $PL --json >"$d/b.json" &&
    [ "$(figures "$d/a.json")" = "$(figures "$d/b.json")" ] ||
    { echo "FAIL $PL: plan prices otherwise than $U, the same split"; fail=1; }
for kw in 'd|no larger pp 2: pp 4: --pipeline-layout: expected a number of virtual stages' \
    'i|no larger interleave 1: interleave 2: --interleave: expected the layout.s 2 virtual'; do
    # shellcheck disable=SC2086
    "$P" ui "${M[@]}" $L $PL --snapshot 200x30 --keys "${kw%%|*}" --mono >"$d/frame" 2>&1
    tail -1 "$d/frame" | grep -q -- "${kw#*|}" ||
        { echo "FAIL ${kw%%|*} under $PL:"; tail -1 "$d/frame"; fail=1; }
done

# FP8 primary weights (--fp8-param-gather, fp8 on H100s): the first frame and w show
# plan's figures with them, the runtime row names them, o (ZeRO 0) is refused with plan's
# line, s saves a plan that has them; a plan file with them (without its model) keeps them
# on m
F8=(--model examples/llm/nemo/llama2-7b.json -c profiles/clusters/dgx-h100.json
    --global-batch 16 --seq-len 1024 --precision fp8 --zero 1 --fp8-param-gather)
for keys in '' w; do
    lay=$L; [ "$keys" = w ] && lay="--tp 2 --pp 2 --dp 4"
    # shellcheck disable=SC2086
    "$P" plan "${F8[@]}" $lay --json >"$d/plan.json"
    # shellcheck disable=SC2086
    "$P" ui "${F8[@]}" $L --snapshot 200x30 --keys "$keys" --mono >"$d/frame" 2>&1
    [ "$(shown "$d/frame")" = "$(figures "$d/plan.json")" ] ||
        { echo "FAIL --fp8-param-gather '$keys': '$(shown "$d/frame")', plan" \
            "'$(figures "$d/plan.json")'"; fail=1; }
    sed -n 4p "$d/frame" | grep -q 'fp8-param-gather' ||
        { echo "FAIL --fp8-param-gather '$keys': the runtime row:"; sed -n 4p "$d/frame"; fail=1; }
done
# shellcheck disable=SC2086
"$P" plan "${F8[@]}" $L --json >"$d/plan.json"
# shellcheck disable=SC2086
"$P" plan "${F8[@]/--zero 1/}" $L --zero 0 >/dev/null 2>"$d/perr"
# shellcheck disable=SC2086
"$P" ui "${F8[@]}" $L --snapshot 250x30 --keys o --mono >"$d/frame" 2>&1
grep -qF -- "$(sed 's/^plumb: plan: //' "$d/perr")" "$d/frame" &&
    [ "$(shown "$d/frame")" = "$(figures "$d/plan.json")" ] ||
    { echo "FAIL o under --fp8-param-gather: plan says '$(cat "$d/perr")':"; tail -1 "$d/frame"
      fail=1; }
rm -rf "$d/out" && mkdir "$d/out"
# shellcheck disable=SC2086
"$P" ui "${F8[@]}" $L --snapshot 120x40 --keys ws --mono -o "$d/out" >"$d/frame" 2>&1
grep -q '"fp8_param_gather":	true' "$d"/out/*.plan.json 2>/dev/null ||
    { echo "FAIL ws under --fp8-param-gather: the saved plan lacks it"; tail -1 "$d/frame"; fail=1; }
# shellcheck disable=SC2086
"$P" plan "${F8[@]}" $L -o "$d/f8m.json" >/dev/null
nomodel "$d/f8m.json" "$d/f8.json" # the 2D view: the file without its model
# shellcheck disable=SC2086
"$P" plan "${F8[@]/16/32}" $L --json >"$d/plan.json"
"$P" ui "$d/f8.json" --snapshot 160x30 --keys m --mono >"$d/frame" 2>&1
[ "$(shown "$d/frame")" = "$(figures "$d/plan.json")" ] &&
    sed -n 4p "$d/frame" | grep -q 'fp8-param-gather' ||
    { echo "FAIL m on a plan file with --fp8-param-gather: '$(shown "$d/frame")', plan" \
        "'$(figures "$d/plan.json")'"; sed -n 1,4p "$d/frame"; fail=1; }
# each option's bad input: plan's line, exit 2
for bad in "--decoder-first-pipeline-num-layers 0" "--decoder-last-pipeline-num-layers 13" \
    "--account-for-loss-in-pipeline-split" "--fp8-param-gather"; do
    # shellcheck disable=SC2086
    "$P" plan "${M[@]}" $L $bad >/dev/null 2>"$d/perr"
    # shellcheck disable=SC2086
    "$P" ui "${M[@]}" $L $bad --snapshot 80x24 >/dev/null 2>"$d/uerr"; rc=$?
    want=$(sed 's/^plumb: plan: /plumb: ui: /' "$d/perr")
    [ $rc = 2 ] && [ "$(wc -l <"$d/uerr")" = 1 ] && [ "$(cat "$d/uerr")" = "$want" ] ||
        { echo "FAIL ui $bad: exit $rc, '$(cat "$d/uerr")', plan says '$want'"; fail=1; }
done

# 80x24 holds every runtime field (short labels)
# shellcheck disable=SC2086
"$P" ui "${M[@]}" $L --tp-overlap backward --p2p sync --grad-reduce bf16 --optimizer-state bf16 \
    --attention flash --balance --snapshot 80x24 --mono >"$d/frame" 2>&1
sed -n 4p "$d/frame" | grep -Eq '^tpo backward opg off p2p sync grad bf16 state bf16 attn flash bal ' ||
    { echo "FAIL 80x24: the runtime row:"; sed -n 1,5p "$d/frame"; fail=1; }

# the status line: whole keys, the runtime keys k j y E f from 80 columns on, v V (cp)
# from 100
for w in 80 100 120 160; do
    # shellcheck disable=SC2086
    "$P" ui "${M[@]}" $L --snapshot "${w}x30" --mono >"$d/frame" 2>&1
    last=$(tail -n 1 "$d/frame" | sed 's/ *$//')
    case $w in
    80) want='  kK tpo  j opg  y p2p  E gsync' ;;
    100) want='  y p2p  E gsync  f attn  vV cp  nN mbs' ;;
    120) want='  y p2p  E gsync  f attn  vV cp  nN mbs  iI intlv  r recomp' ;;
    *) want='  y p2p  E gsync  f attn  vV cp  nN mbs  iI intlv  r recomp  a sp  o zero  u undo  p pin  s save' ;;
    esac
    case $last in
    "q quit  ? help  gG tp"*"$want") ;;
    *) echo "FAIL status ${w}x30: '$last' does not end in whole keys '$want'"; fail=1 ;;
    esac
done

# Transformer Engine's fused loss (--cross-entropy te) rides every layout: the first frame,
# w (dp 4) and G (tp 1) show plan's figures under it, the runtime row names it, s saves a
# plan that carries it ("cross_entropy": "te"); a bad value gets plan's line, exit 2
TE="--cross-entropy te"
check "$TE" 'cross-entropy-te' "$L $TE" "$L $TE" ''
# Megatron-Core's own fused loss likewise: the first frame at plan's figures, its own word
NA="--cross-entropy native"
check "$NA" 'cross-entropy-native' "$L $NA" "$L $NA" ''
differs "$TE" "$L $TE" "$L"
check "w with $TE" 'cross-entropy-te' "--tp 2 --pp 2 --dp 4 $TE" "$L $TE" 'w'
check "G with $TE" 'cross-entropy-te' "--tp 1 --pp 2 --dp 4 $TE" "$L $TE" 'G'
saved "w s $TE" "$L $TE" 'ws' "--tp 2 --pp 2 --dp 4 $TE" 'cross_entropy=te'
# shellcheck disable=SC2086
"$P" plan "${M[@]}" $L --cross-entropy fused >/dev/null 2>"$d/perr"
# shellcheck disable=SC2086
"$P" ui "${M[@]}" $L --cross-entropy fused --snapshot 80x24 >/dev/null 2>"$d/uerr"; rc=$?
want=$(sed 's/^plumb: plan: /plumb: ui: /' "$d/perr")
[ $rc = 2 ] && [ "$(wc -l <"$d/uerr")" = 1 ] && [ "$(cat "$d/uerr")" = "$want" ] ||
    { echo "FAIL ui --cross-entropy fused: exit $rc, '$(cat "$d/uerr")', plan says '$want'"; fail=1; }
# The unfused gradient accumulation (--grad-accum unfused) likewise: the first frame and w
# at plan's figures under it, the runtime row names it, s saves a plan that carries it
GA="--grad-accum unfused"
check "$GA" 'grad-accum-unfused' "$L $GA" "$L $GA" ''
differs "$GA" "$L $GA" "$L"
check "w with $GA" 'grad-accum-unfused' "--tp 2 --pp 2 --dp 4 $GA" "$L $GA" 'w'
saved "w s $GA" "$L $GA" 'ws' "--tp 2 --pp 2 --dp 4 $GA" 'grad_accum=unfused'

# a plan file of a transformer's fp8 layout (tp 1) that does not name its model (its
# "model" taken out, as files were written before) re-plans only as a layout: - (which the
# native planner answered with a plan without fp8, its MFU 847.7 % against the fp32 peak)
# is refused with a line naming plumb ui --model and the file's layout, the frame keeps
# plan --model's figures and MFU for that layout and fp8, and u finds nothing to undo
F1=(--model examples/llm/nemo/llama2-7b.json -c profiles/clusters/dgx-h100.json
    --global-batch 16 --seq-len 1024 --precision fp8 --tp 1 --pp 2 --dp 4)
"$P" plan "${F1[@]}" -o "$d/f1m.json" >/dev/null
nomodel "$d/f1m.json" "$d/f1.json"
"$P" plan "${F1[@]}" --json >"$d/plan.json"
want_mfu=$(python3 -c 'import json,sys; print("MFU %.1f%%" % (100 * json.load(open(sys.argv[1]))["mfu"]))' "$d/plan.json")
"$P" ui "$d/f1.json" --snapshot 300x30 --keys - --mono >"$d/frame" 2>&1
grep -qF -- "a transformer's layout (llama2-7b, fp8) is re-planned only as a layout; its plan file does not name its model: plumb ui --model FILE -c CLUSTER --tp 1 --pp 2 --dp 4 --global-batch 16 --precision fp8 --seq-len 1024" "$d/frame" &&
    [ "$(shown "$d/frame")" = "$(figures "$d/plan.json")" ] && grep -qF -- "$want_mfu " "$d/frame" &&
    grep -q '(plan file)' "$d/frame" ||
    { echo "FAIL - on a tp 1 fp8 plan file: '$(shown "$d/frame")', plan --model" \
        "'$(figures "$d/plan.json")' $want_mfu:"; sed -n 1,3p "$d/frame"; tail -1 "$d/frame"; fail=1; }
"$P" ui "$d/f1.json" --snapshot 300x30 --keys -u --mono >"$d/frame" 2>&1
grep -q "nothing to undo" "$d/frame" ||
    { echo "FAIL - on a tp 1 fp8 plan file: the refused key was recorded:"; tail -1 "$d/frame"; fail=1; }

# a plan file of plan --model names its model: plumb ui PLAN.json opens as plumb ui --model
# with the file's layout and options (fp8, FP8 primary weights, Megatron-Core's uneven
# split): its frames, the first and after dp down and up (W w) and microbatch size up (n),
# are ui --model's but for the title; the runtime row names pp-first-layers-12, and
# plumb sim of the file names it on its layout line
F2=(--model examples/llm/nemo/llama2-7b.json -c profiles/clusters/dgx-h100.json
    --global-batch 16 --seq-len 1024 --precision fp8 --zero 1 --fp8-param-gather
    --tp 2 --pp 2 --dp 4 --decoder-first-pipeline-num-layers 12)
"$P" plan "${F2[@]}" -o "$d/f2.json" >/dev/null
for k in '' W w n; do
    "$P" ui "$d/f2.json" --snapshot 200x30 --keys "$k" --mono 2>&1 | sed 1d >"$d/file.frame"
    "$P" ui "${F2[@]}" --snapshot 200x30 --keys "$k" --mono 2>&1 | sed 1d >"$d/model.frame"
    cmp -s "$d/file.frame" "$d/model.frame" && grep -q 'pp-first-layers-12' "$d/file.frame" ||
        { echo "FAIL ui PLAN.json with its model, keys '$k': not ui --model's frame"
          diff "$d/file.frame" "$d/model.frame" | head -6; fail=1; }
done
"$P" sim "$d/f2.json" | grep -q '^layout .*fp8-param-gather, ZeRO-1 optimizer, pp-first-layers-12$' ||
    { echo "FAIL sim of a plan file with its model: $("$P" sim "$d/f2.json" | grep '^layout')"; fail=1; }
# the same with Megatron-Core's layout string for that split: the file's frames are ui
# --model's (the string kept by the dashboard after the file is closed), naming it
F3=("${F2[@]:0:${#F2[@]}-2}" --pipeline-layout 'Et*12|t*20L')
"$P" plan "${F3[@]}" -o "$d/f3.json" >/dev/null
for k in '' W n; do
    "$P" ui "$d/f3.json" --snapshot 200x30 --keys "$k" --mono 2>&1 | sed 1d >"$d/file.frame"
    "$P" ui "${F3[@]}" --snapshot 200x30 --keys "$k" --mono 2>&1 | sed 1d >"$d/model.frame"
    cmp -s "$d/file.frame" "$d/model.frame" && grep -q 'pipeline-layout' "$d/file.frame" ||
        { echo "FAIL ui PLAN.json with a pipeline layout, keys '$k': not ui --model's frame"
          diff "$d/file.frame" "$d/model.frame" | head -6; fail=1; }
done

# a plan file of one server (tp 2 x pp 2 x dp 2 on 8 A100s) keeps the level above the
# server: w (dp 4, 16 GPUs) adds a server over InfiniBand, ui --model's frame on the cluster
# file (before, the file's server grew to 16 GPUs of NVLink: 24.05 ms against 24.11 ms)
# shellcheck disable=SC2086
"$P" plan "${M[@]}" $L -o "$d/one.json" >/dev/null
for k in '' w; do
    "$P" ui "$d/one.json" --snapshot 200x30 --keys "$k" --mono 2>&1 | sed 1d >"$d/file.frame"
    # shellcheck disable=SC2086
    "$P" ui "${M[@]}" $L --snapshot 200x30 --keys "$k" --mono 2>&1 | sed 1d >"$d/model.frame"
    cmp -s "$d/file.frame" "$d/model.frame" ||
        { echo "FAIL ui PLAN.json of one server, keys '$k': not ui --model's frame"
          diff "$d/file.frame" "$d/model.frame" | head -6; fail=1; }
done

[ $fail = 0 ] && echo "ui3d: ok"
exit $fail
