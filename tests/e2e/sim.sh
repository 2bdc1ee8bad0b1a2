#!/usr/bin/env bash
# sim.sh: end-to-end test of `plumb sim` on the example plans: the report table with units,
# JSON, Chrome trace, SVG and Gantt outputs, what-ifs that report their changes, and bad
# input that fails with one line, exit 2 and no files written.
set -u
PLUMB=${PLUMB:-./plumb}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
E=examples/plans/vgg16-4stage-1f1b.json

# expect_bad NEEDLE ARGS...: exit 2, nothing on stdout, one stderr line containing NEEDLE,
# and neither output file written
expect_bad() {
    local needle=$1; shift
    rm -f "$tmp/t.json" "$tmp/t.svg"
    "$PLUMB" sim "$@" --trace "$tmp/t.json" --svg "$tmp/t.svg" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    [ "$rc" -eq 2 ] || fail "sim $*: exit $rc, expected 2"
    [ -s "$tmp/out" ] && fail "sim $*: wrote to stdout"
    [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "sim $*: stderr is not one line: $(cat "$tmp/err")"
    grep -qF -- "$needle" "$tmp/err" || fail "sim $*: stderr lacks '$needle': $(cat "$tmp/err")"
    [ -e "$tmp/t.json" ] && fail "sim $*: wrote the trace"
    [ -e "$tmp/t.svg" ] && fail "sim $*: wrote the SVG"
}

# every example plan simulates; the table names each figure's unit
for p in examples/plans/*.json; do
    "$PLUMB" sim "$p" >"$tmp/out" 2>"$tmp/err" || fail "$p: exit $?: $(cat "$tmp/err")"
    for want in "samples/s" "iteration time" "bubble" "peak memory" "capacity"; do
        grep -q "$want" "$tmp/out" || fail "$p: report lacks '$want'"
    done
done
"$PLUMB" sim "$E" >"$tmp/out"
grep -Eq '^throughput +[0-9.]+ samples/s$' "$tmp/out" || fail "throughput line"
grep -Eq '^iteration time +[0-9.]+ (ms|s|us) ' "$tmp/out" || fail "iteration line"
grep -Eq '^bubble +[0-9.]+ %' "$tmp/out" || fail "bubble line"
[ "$(grep -Ec '^[0-3] +V100' "$tmp/out")" = 4 ] || fail "device table: 4 rows expected"
grep -Eq '^0->1 +0 +[0-9.]+ (GiB|MiB)' "$tmp/out" || fail "link bytes with units"

# JSON report
"$PLUMB" sim "$E" --json >"$tmp/r.json" || fail "--json: exit $?"
grep -Eq '"format":[[:space:]]*"plumb-sim-report/1"' "$tmp/r.json" || fail "--json: format"
for k in '"samples_per_s"' '"iteration_s"' \
         '"bubble_fraction"' '"devices"' '"busy_s"' '"idle_s"' '"comm_s"' \
         '"peak_memory_bytes"' '"memory_capacity_bytes"' '"links"' '"bytes"'; do
    grep -qF "$k" "$tmp/r.json" || fail "--json lacks $k"
done
if command -v python3 >/dev/null; then
    python3 - "$tmp/r.json" <<'EOF' || fail "--json: figures inconsistent"
import json, sys
r = json.load(open(sys.argv[1]))
assert abs(r["samples_per_s"] * r["iteration_s"] - r["minibatch"]) < 1e-6 * r["minibatch"]
assert 0 <= r["bubble_fraction"] < 1
for d in r["devices"]:
    assert abs(d["busy_s"] + d["idle_s"] - r["iteration_s"]) < 1e-9
    assert d["peak_memory_bytes"] <= d["memory_capacity_bytes"]
assert len(r["links"]) == 6 and all(l["bytes"] > 0 for l in r["links"])
EOF
fi

# trace, SVG and Gantt
"$PLUMB" sim "$E" --iterations 2 --trace "$tmp/t.json" --svg "$tmp/t.svg" --gantt >"$tmp/out" \
    || fail "outputs: exit $?"
grep -qF '"traceEvents"' "$tmp/t.json" || fail "trace lacks traceEvents"
grep -qF '"thread_name"' "$tmp/t.json" || fail "trace lacks track names"
grep -qF '"name": "F3 s1"' "$tmp/t.json" || fail "trace lacks F3 s1"
[ "$(grep -c '"ph": "X"' "$tmp/t.json")" -gt 100 ] || fail "trace has too few events"
head -c 5 "$tmp/t.svg" | grep -q '<?xml' || fail "SVG header"
grep -Eq 'time \((ms|s)\)' "$tmp/t.svg" || fail "SVG time axis"
grep -q 'F forward' "$tmp/t.svg" || fail "SVG legend"
grep -Eq '^device 0 .*\|[FB.S]+\|$' "$tmp/out" || fail "Gantt row for device 0"
if command -v rsvg-convert >/dev/null; then
    rsvg-convert -o "$tmp/t.png" "$tmp/t.svg" 2>"$tmp/err" && [ -s "$tmp/t.png" ] \
        || fail "SVG does not render: $(cat "$tmp/err")"
fi

# an over-dense timeline (2048 microbatches: boxes far under a pixel) is drawn merged: at
# most one box per pixel of each lane (a device row's compute and all-reduce strips, a
# boundary row's two halves), each with its busy fraction in (0, 1] as its opacity, and
# almost no box on its own (it was a box per event: 86,028 boxes, 8.9 MB; now 1.2 MB)
"$PLUMB" sim "$E" --microbatches 2048 --svg "$tmp/d.svg" >/dev/null || fail "dense SVG: exit $?"
rows=$(grep -Ec 'class="row (device|cut)"' "$tmp/d.svg")
busy=$(grep -c 'class="b busy ' "$tmp/d.svg")
[ "$busy" -gt 0 ] && [ "$busy" -le $((rows * 2 * 1100)) ] \
    || fail "dense SVG: $busy merged boxes for $rows rows"
[ "$(grep -Ec 'class="b [FB]"' "$tmp/d.svg")" -lt 100 ] || fail "dense SVG: boxes one by one"
grep -o 'data-busy="[^"]*"' "$tmp/d.svg" | tr -dc '0-9.\n' | awk '!($1 > 0 && $1 <= 1) {
    bad = 1 } END { exit bad }' || fail "dense SVG: a busy fraction outside (0, 1]"
[ "$(wc -c <"$tmp/d.svg")" -lt 2000000 ] || fail "dense SVG: $(wc -c <"$tmp/d.svg") bytes"
# the SVG is streamed into a temporary beside its path: a write cut short (a 512 KiB file
# size limit) is one line, exit 2, the file there before kept, no temporary left
echo old >"$tmp/keep.svg"
(trap '' XFSZ; ulimit -f 512; exec "$PLUMB" sim "$E" --microbatches 2048 --svg "$tmp/keep.svg") \
    >"$tmp/out" 2>"$tmp/err"
[ $? = 2 ] && [ ! -s "$tmp/out" ] && [ "$(wc -l <"$tmp/err")" = 1 ] \
    && grep -qF "$tmp/keep.svg: cannot write" "$tmp/err" && [ "$(cat "$tmp/keep.svg")" = old ] \
    || fail "failed SVG write: rc, stdout, stderr or the file there before: $(cat "$tmp/err")"
ls "$tmp" | grep -qF '.tmp.' && fail "temporaries left: $(ls "$tmp" | grep -F .tmp.)"
rm -f "$tmp/keep.svg"

# the trace of replicated stages (a gnmt-like plan: 2 stages x 8 replicas on dgx-h100, 3
# iterations, 8 microbatches: one per replica per iteration). Counted by hand: F, B, step
# and the collective tracks' all-reduces 16 devices x 3 = 48 each; send_f, send_b 8 x 3 =
# 24. Ring hops (link tracks' allreduce) only with --trace-hops: per iteration and stage K
# buckets (ceil(gradient bytes / 25 MiB): stage 0 491,458,560 B -> 19, stage 1
# 283,605,248 B -> 11) x 2 (r - 1) = 14 ring steps x r = 8 hops: 3 x 30 x 14 x 8 = 10080.
cat >"$tmp/rep.json" <<EOF
{"format": "plumb-plan/1", "profile": "$PWD/profiles/pipedream/gnmt.json",
 "cluster": "$PWD/profiles/clusters/dgx-h100.json", "schedule": "1f1b-flush",
 "microbatch_size": 16, "microbatches": 8, "recompute": false, "optimizer": "momentum",
 "stages": [{"first_layer": 0, "last_layer": 22, "replicas": 8, "devices": [0,1,2,3,4,5,6,7]},
            {"first_layer": 23, "last_layer": 47, "replicas": 8,
             "devices": [8,9,10,11,12,13,14,15]}]}
EOF
# count_x FILE CAT PID: complete events of category CAT in process PID (one per line)
count_x() { grep -c "\"cat\": \"$2\", \"ph\": \"X\".*\"pid\": $3," "$1"; }
for hops in 0 1; do
    opt=; [ $hops = 1 ] && opt=--trace-hops
    "$PLUMB" sim "$tmp/rep.json" --iterations 3 --trace "$tmp/r$hops.json" $opt >/dev/null \
        2>"$tmp/err" || fail "replicated trace $opt: exit $?: $(cat "$tmp/err")"
    for want in "F 1 48" "B 1 48" "step 1 48" "allreduce 2 48" "send_f 3 24" "send_b 3 24" \
                "allreduce 3 $((hops * 10080))"; do
        set -- $want
        got=$(count_x "$tmp/r$hops.json" "$1" "$2")
        [ "$got" = "$3" ] || fail "replicated trace $opt: $1 in process $2: $got, expected $3"
    done
done
# the Gantt's link rows: the 8 replica pairs' links both ways (16); with --trace-hops also
# each stage's ring of 8 links (32); the SVG draws no hops either way
for hops in 0 1; do
    opt=; [ $hops = 1 ] && opt=--trace-hops
    "$PLUMB" sim "$tmp/rep.json" --gantt --svg "$tmp/r$hops.svg" $opt >"$tmp/out" \
        || fail "replicated Gantt $opt: exit $?"
    got=$(grep -Ec '^link [0-9]+->[0-9]+ \(level [0-9]+\) +\|' "$tmp/out")
    [ "$got" = $((16 + 16 * hops)) ] || fail "replicated Gantt $opt: $got link rows"
done
cmp -s "$tmp/r0.svg" "$tmp/r1.svg" || fail "replicated SVG differs with --trace-hops"
# a plan without replicas: the trace is the same either way
"$PLUMB" sim "$E" --trace "$tmp/a.json" >/dev/null && "$PLUMB" sim "$E" --trace "$tmp/b.json" \
    --trace-hops >/dev/null && cmp -s "$tmp/a.json" "$tmp/b.json" \
    || fail "unreplicated trace differs with --trace-hops"
# over --trace-limit (the hops' trace is 2.3 MB, the default's 0.1 MB): one line, exit 2,
# nothing written, a file already there kept. At 0.001 GiB (1.07 MB) the hops are refused
# before they are simulated (at least 10080 hops x 205 bytes, the writer's shortest hop:
# 0.00192 GiB); at 0.002 GiB (2.15 MB) that lower bound passes and the full trace, counted
# by the writer as it writes (2,317,201 bytes, the length written without a limit),
# refuses.
expect_bad "(got at least 0.00192 GiB, 10080 ring hops)" "$tmp/rep.json" --trace-hops \
    --trace-limit 0.001
expect_bad "--trace-limit GIB" "$tmp/rep.json" --trace-hops --trace-limit 0.002
grep -qF 'no --trace-hops' "$tmp/err" || fail "refusal does not name --trace-hops"
grep -qF 'got 0.00216 GiB, 2317201 bytes, 10320 events' "$tmp/err" \
    || fail "full trace's size: $(cat "$tmp/err")"
"$PLUMB" sim "$tmp/rep.json" --iterations 3 --trace-hops --trace "$tmp/all.json" >/dev/null \
    && [ "$(wc -c <"$tmp/all.json")" = 2317201 ] || fail "the refused size is not the written"
echo old >"$tmp/keep.json"
"$PLUMB" sim "$tmp/rep.json" --trace-hops --trace-limit 0.002 --trace "$tmp/keep.json" \
    >"$tmp/out" 2>"$tmp/err"
[ $? = 2 ] && [ ! -s "$tmp/out" ] && [ "$(cat "$tmp/keep.json")" = old ] \
    || fail "refused trace: rc, stdout or the file there before: $(cat "$tmp/err")"
# the trace is streamed into a temporary beside its path: refused past the limit, or cut
# short by a failed write (a 1 MiB file size limit, the trace 2.2 MB), the file there
# before is kept, the SVG is not written, and no temporary is left
echo old >"$tmp/keep.svg"
"$PLUMB" sim "$tmp/rep.json" --trace-hops --trace-limit 0.002 --trace "$tmp/keep.json" \
    --svg "$tmp/keep.svg" >/dev/null 2>&1
[ $? = 2 ] && [ "$(cat "$tmp/keep.json")" = old ] && [ "$(cat "$tmp/keep.svg")" = old ] \
    || fail "refused trace with --svg: rc or the files there before"
(trap '' XFSZ; ulimit -f 1024; exec "$PLUMB" sim "$tmp/rep.json" --iterations 3 --trace-hops \
    --trace "$tmp/keep.json" --svg "$tmp/keep.svg") >"$tmp/out" 2>"$tmp/err"
[ $? = 2 ] && [ ! -s "$tmp/out" ] && [ "$(wc -l <"$tmp/err")" = 1 ] \
    && grep -qF "$tmp/keep.json: cannot write" "$tmp/err" && [ "$(cat "$tmp/keep.json")" = old ] \
    && [ "$(cat "$tmp/keep.svg")" = old ] \
    || fail "failed trace write: rc, stdout, stderr or the files there before: $(cat "$tmp/err")"
ls "$tmp" | grep -qF '.tmp.' && fail "temporaries left: $(ls "$tmp" | grep -F .tmp.)"
rm -f "$tmp/keep.svg"
# a plan that does not fit writes no file: its trace is only counted, and over the limit
# refused with the same line (the dashboard's example at 64-sample microbatches)
sed -e 's/"microbatch_size": 32/"microbatch_size": 64/' \
    -e "s#\\.\\./\\.\\./profiles#$PWD/profiles#g" examples/plans/vgg16-hybrid-pipedream.json \
    >"$tmp/nofit.json"
expect_bad "(got 0.00218 GiB, 2342040 bytes, 9765 events)" "$tmp/nofit.json" --trace-hops \
    --trace-limit 0.002
"$PLUMB" sim "$tmp/rep.json" --trace-limit 0.002 --trace "$tmp/keep.json" >/dev/null \
    && [ "$(count_x "$tmp/keep.json" F 1)" = 48 ] || fail "default trace within 0.002 GiB"
expect_bad "--trace-limit" "$E" --trace-limit 0
expect_bad "--trace-limit" "$E" --trace-limit x
# the dashboard's export (`plumb ui PLAN --keys e`) writes the trace plumb sim writes of
# the plan by default, byte for byte (the replicated plan's ring hops left out), and the
# report and SVG beside it
R=examples/plans/vgg16-hybrid-pipedream.json
mkdir "$tmp/ui"
"$PLUMB" ui "$R" --snapshot 200x30 --keys e -o "$tmp/ui" >"$tmp/out" 2>"$tmp/err" \
    && grep -qF "exported $tmp/ui/vgg16-16gpu-pipedream.{report.json,trace.json,svg}" "$tmp/out" \
    || fail "ui export: $(cat "$tmp/err") $(grep -F export "$tmp/out")"
"$PLUMB" sim "$R" --trace "$tmp/ui.json" >/dev/null \
    && cmp -s "$tmp/ui.json" "$tmp/ui/vgg16-16gpu-pipedream.trace.json" \
    || fail "ui export: the trace is not plumb sim's"
[ -s "$tmp/ui/vgg16-16gpu-pipedream.report.json" ] && [ -s "$tmp/ui/vgg16-16gpu-pipedream.svg" ] \
    || fail "ui export: no report or SVG"

# what-ifs: the straggler slows throughput; changes carry base, what-if and ratio
"$PLUMB" sim "$E" --straggler 1=2 >"$tmp/out" || fail "straggler: exit $?"
grep -q 'what changed' "$tmp/out" || fail "straggler: no changes section"
grep -Eq '^samples_per_s +[0-9.]+ samples/s +[0-9.]+ samples/s +x0\.' "$tmp/out" \
    || fail "straggler: samples/s should drop: $(grep samples_per_s "$tmp/out")"
grep -Eq '^devices\[1\]\.busy_s .* x2\.000$' "$tmp/out" || fail "straggler: device 1 busy x2"
"$PLUMB" sim "$E" --bandwidth pcie=32 --json >"$tmp/bw.json" || fail "bandwidth: exit $?"
grep -qF '"changes"' "$tmp/bw.json" || fail "bandwidth: no changes in JSON"
grep -Eq '"gbit_per_s":[[:space:]]*32' "$tmp/bw.json" || fail "bandwidth: what-if not recorded"
"$PLUMB" sim "$E" --bandwidth 0=32 >/dev/null || fail "bandwidth by index"
"$PLUMB" sim "$E" --memory-limit 2 >"$tmp/out" || fail "memory limit: exit $?"
grep -q 'DOES NOT FIT' "$tmp/out" || fail "memory limit: should not fit in 2 GiB"
for k in gpipe pipedream 2bw zb-h1; do
    "$PLUMB" sim "$E" --schedule "$k" --microbatches 4 >"$tmp/out" 2>"$tmp/err" \
        || fail "--schedule $k: exit $?: $(cat "$tmp/err")"
    grep -q "^schedule  *$k," "$tmp/out" || fail "--schedule $k not applied"
done

# the runtime what-ifs --p2p, --grad-sync and --p2p-split: the what-if run is the plan
# written with the field set (plan --model's own file, simulated as it is), the base the
# plan as written; the line lists them; the combinations plan --model refuses are refused
# with its line
G=(--model examples/llm/gpt2.json -c profiles/clusters/dgx-a100-80g.json --global-batch 16
   --tp 2 --pp 2 --dp 2)
for v in base "--grad-sync end" "--p2p sync" "--grad-sync end --p2p sync" \
         "--schedule pipedream" "--schedule zb-v" "--zero 1 --overlap-param-gather" \
         "--p2p-split whole" "--p2p sync --p2p-split whole"; do
    # shellcheck disable=SC2086
    [ "$v" = base ] && a= || a=$v
    # shellcheck disable=SC2086
    "$PLUMB" plan "${G[@]}" $a -o "$tmp/g-${v// /}.json" >/dev/null 2>"$tmp/err" \
        || fail "plan --model $v: $(cat "$tmp/err")"
done
iter() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(repr(r["iteration_s"]))' "$1"; }
changed() {
    python3 -c 'import json,sys
r = json.load(open(sys.argv[1]))
c = [c for c in r["changes"] if c["figure"] == "iteration_s"][0]
print(repr(c["base"]), repr(c["whatif"]), json.dumps(r["whatif"], sort_keys=True))' "$1"
}
for w in "--grad-sync end|--grad-sync end|\"grad_sync\": \"end\"" \
         "--p2p sync|--p2p sync|\"p2p\": \"sync\"" \
         "--grad-sync end --p2p sync|--grad-sync end --p2p sync|\"grad_sync\": \"end\", \"p2p\": \"sync\"" \
         "--p2p-split whole|--p2p-split whole|\"p2p_split\": \"whole\"" \
         "--p2p sync --p2p-split whole|--p2p sync --p2p-split whole|\"p2p\": \"sync\", \"p2p_split\": \"whole\""; do
    args=${w%%|*} rest=${w#*|}
    file=${rest%%|*} want=${rest#*|}
    # shellcheck disable=SC2086
    "$PLUMB" sim "$tmp/g-base.json" $args --json >"$tmp/w.json" 2>"$tmp/err" \
        || { fail "sim $args: $(cat "$tmp/err")"; continue; }
    "$PLUMB" sim "$tmp/g-${file// /}.json" --json >"$tmp/f.json"
    "$PLUMB" sim "$tmp/g-base.json" --json >"$tmp/b.json"
    got=$(changed "$tmp/w.json")
    [ "$got" = "$(iter "$tmp/b.json") $(iter "$tmp/f.json") {$want}" ] \
        || fail "sim $args: base, what-if, what-ifs '$got', expected the plan's" \
            "$(iter "$tmp/b.json"), the plan with $file $(iter "$tmp/f.json"), {$want}"
    [ "$(iter "$tmp/b.json")" != "$(iter "$tmp/f.json")" ] \
        || fail "sim $args: the same as the plan as written here: the check cannot fail"
done
# the way back: the plan's own field undone by the what-if
"$PLUMB" sim "$tmp/g---grad-syncend.json" --grad-sync overlap --p2p overlap >"$tmp/out" \
    && grep -qF "what-ifs        p2p overlap; grad-sync overlap (instead of the plan as written)" \
        "$tmp/out" || fail "sim --grad-sync overlap: $(grep what-ifs "$tmp/out")"
"$PLUMB" sim "$tmp/g---grad-syncend.json" --json >"$tmp/f.json"
"$PLUMB" sim "$tmp/g---grad-syncend.json" --grad-sync overlap --json >"$tmp/w.json" \
    && [ "$(changed "$tmp/w.json")" = "$(iter "$tmp/f.json") $(iter "$tmp/b.json") {\"grad_sync\": \"overlap\"}" ] \
    || fail "sim --grad-sync overlap of an end plan: $(changed "$tmp/w.json")"
# --p2p-split whole gives the iteration of plan --model --p2p-split whole itself; the way
# back from a whole plan; both splits named on the what-ifs line with the others
"$PLUMB" plan "${G[@]}" --p2p-split whole --json >"$tmp/p.json"
"$PLUMB" sim "$tmp/g-base.json" --p2p-split whole --json >"$tmp/w.json"
[ "$(iter "$tmp/p.json")" = "$(iter "$tmp/w.json")" ] ||
    fail "sim --p2p-split whole: $(iter "$tmp/w.json") s, plan --model --p2p-split whole $(iter "$tmp/p.json") s"
"$PLUMB" sim "$tmp/g---p2p-splitwhole.json" --json >"$tmp/f.json"
"$PLUMB" sim "$tmp/g-base.json" --json >"$tmp/b.json"
"$PLUMB" sim "$tmp/g---p2p-splitwhole.json" --p2p-split scatter-gather --json >"$tmp/w.json" \
    && [ "$(changed "$tmp/w.json")" = "$(iter "$tmp/f.json") $(iter "$tmp/b.json") {\"p2p_split\": \"scatter-gather\"}" ] \
    || fail "sim --p2p-split scatter-gather of a whole plan: $(changed "$tmp/w.json")"
"$PLUMB" sim "$tmp/g-base.json" --p2p-split whole >"$tmp/out" \
    && grep -qF "what-ifs        p2p-split whole (instead of the plan as written)" "$tmp/out" \
    || fail "sim --p2p-split whole: $(grep what-ifs "$tmp/out")"
"$PLUMB" sim "$tmp/g-base.json" --grad-sync end --p2p sync --p2p-split whole >"$tmp/out" \
    && grep -qF "what-ifs        p2p sync; grad-sync end; p2p-split whole (instead of the plan as written)" \
        "$tmp/out" || fail "sim --p2p-split with the others: $(grep what-ifs "$tmp/out")"
expect_bad "plumb: sim: --p2p-split: expected scatter-gather or whole (got \"half\")" "$E" --p2p-split half
expect_bad "plumb: sim: --grad-sync: expected overlap with schedule pipedream (its iterations overlap: no end of the backward to reduce at) (got end)" \
    "$tmp/g---schedulepipedream.json" --grad-sync end
expect_bad "plumb: sim: --grad-sync: expected overlap with schedule pipedream" \
    "$tmp/g---grad-syncend.json" --schedule pipedream
expect_bad "plumb: sim: --p2p: expected overlap with schedule zb-v (its V placement deadlocks under blocking transfers; docs/sim.md) (got sync)" \
    "$tmp/g---schedulezb-v.json" --p2p sync
expect_bad "plumb: sim: --overlap-param-gather: expected --grad-sync overlap" \
    "$tmp/g---zero1--overlap-param-gather.json" --grad-sync end
expect_bad "plumb: sim: --overlap-param-gather: expected a synchronous schedule (got pipedream" \
    "$tmp/g---zero1--overlap-param-gather.json" --schedule pipedream
expect_bad "plumb: sim: --grad-sync: expected overlap or end (got \"later\")" "$E" --grad-sync later
expect_bad "plumb: sim: --p2p: expected overlap or sync (got \"async\")" "$E" --p2p async

# bad input
expect_bad "cannot open" /nonexistent/plan.json
echo '{"format": "plumb-plan/1"' >"$tmp/bad.json"
expect_bad "malformed JSON" "$tmp/bad.json"
expect_bad "--schedule" "$E" --schedule nope
expect_bad "--schedule: interleaved needs a plan with 2 or more chunks" "$E" --schedule interleaved
expect_bad "--straggler" "$E" --straggler 99=2
expect_bad "--straggler" "$E" --straggler 2
expect_bad "--straggler" "$E" --straggler 1=0
expect_bad "--bandwidth" "$E" --bandwidth bogus=3
expect_bad "--bandwidth" "$E" --bandwidth 7=3
expect_bad "--bandwidth" "$E" --bandwidth 1=-3
# a path whose transfers can never complete (zero bandwidth, or one that underflows to it):
# one line and exit 2 at once, from the what-if and from the cluster file alike
expect_bad "--bandwidth GBPS: expected a number from 1e-06 to 100000 (1 kbit/s to 100 Tbit/s)" \
    "$E" --bandwidth 1=1e-30
sed 's/"bandwidth_gbit_per_s": 10,/"bandwidth_gbit_per_s": 1e-300,/' \
    profiles/clusters/cluster-a-4x4.json >"$tmp/zero-bw.json"
grep -q "1e-300" "$tmp/zero-bw.json" || fail "zero-bw.json: the ethernet level not rewritten"
sed -e "s#../../profiles/clusters/cluster-a-4x4.json#$tmp/zero-bw.json#" \
    -e "s#../../profiles/pipedream/vgg16.json#$PWD/profiles/pipedream/vgg16.json#" "$E" \
    >"$tmp/zero-bw-plan.json"
timeout 60 "$PLUMB" sim "$tmp/zero-bw-plan.json" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 2 ] || fail "zero-bandwidth cluster: exit $rc, expected 2 (124: a hang)"
[ -s "$tmp/out" ] && fail "zero-bandwidth cluster: wrote to stdout"
[ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "zero-bandwidth cluster: stderr: $(cat "$tmp/err")"
grep -qF "zero-bw.json: levels[1].bandwidth_gbit_per_s: expected a bandwidth from 1e-06 to 100000 Gbit/s (1 kbit/s to 100 Tbit/s) (got 1e-300)" \
    "$tmp/err" || fail "zero-bandwidth cluster: $(cat "$tmp/err")"
expect_bad "--memory-limit" "$E" --memory-limit 0
expect_bad "--iterations" "$E" --iterations 0
expect_bad "one plan file" "$E" "$E"
expect_bad "unknown option" "$E" --frobnicate

# size: no fixed limit on stages x microbatches x iterations (above the 1000000 once
# refused), but a run larger than the memory it may use is refused with its size and
# estimate: above the machine's memory, and above a data limit (ulimit -d, KiB)
"$PLUMB" sim "$E" --microbatches 100000 --iterations 3 --json >"$tmp/big.json" 2>"$tmp/err" ||
    fail "4 x 100000 x 3 does not simulate: $(cat "$tmp/err")"
grep -q '"microbatches":.*100000' "$tmp/big.json" || fail "4 x 100000 x 3: report lacks its size"
expect_bad "4 x 16000000 x 60 needs about 2746.6 GiB to simulate" "$E" \
    --microbatches 16000000 --iterations 60
expect_bad "microbatches x iterations above 1073741824" "$E" --microbatches 16000000 \
    --iterations 100
if [ "${PLUMB_SAN:-0}" = 1 ] || grep -qa __asan_init "$PLUMB" 2> /dev/null; then
    echo "sim.sh: data-limit check skipped: AddressSanitizer cannot map its shadow under ulimit -d"
else
    (ulimit -d 1000000 && "$PLUMB" sim "$E" --microbatches 400000 >"$tmp/out" 2>"$tmp/err")
    rc=$?
    [ $rc = 2 ] || fail "400000 microbatches within a 1 GB data limit: exit $rc, expected 2"
    [ "$(wc -l <"$tmp/err")" = 1 ] && [ ! -s "$tmp/out" ] ||
        fail "400000 microbatches within 1 GB: not one line: $(cat "$tmp/err")"
    grep -qF "4 x 400000 x 3 needs about 3.4 GiB to simulate (about 28800024 actions at 128 bytes each), above the 1.0 GiB this process may use" "$tmp/err" ||
        fail "400000 microbatches within 1 GB: $(cat "$tmp/err")"
fi

# FP8 primary weights: the layout line names fp8-param-gather as plan --model's settings
# line does (the JSON has the field); a plan without them does not.
FP8=(--model examples/llm/nemo/llama2-7b.json -c profiles/clusters/dgx-h100.json --global-batch 16
     --seq-len 1024 --precision fp8 --zero 1 --tp 2 --pp 2 --dp 2)
if "$PLUMB" plan "${FP8[@]}" --fp8-param-gather -o "$tmp/fp8pg.json" >/dev/null 2>"$tmp/err" &&
    "$PLUMB" plan "${FP8[@]}" -o "$tmp/fp8.json" >/dev/null 2>>"$tmp/err"; then
    "$PLUMB" sim "$tmp/fp8pg.json" >"$tmp/out" 2>&1
    grep -Eq '^layout +tp 2 x pp 2 x dp 2 = 8 GPUs, global batch 16, fp8, fp8-param-gather, ZeRO-1 optimizer$' \
        "$tmp/out" || fail "fp8-param-gather: the layout line: $(grep '^layout' "$tmp/out")"
    "$PLUMB" sim "$tmp/fp8pg.json" --json | grep -q '"fp8_param_gather":	true' ||
        fail "fp8-param-gather: the JSON report lacks the field"
    "$PLUMB" sim "$tmp/fp8.json" >"$tmp/out" 2>&1
    grep -q 'fp8-param-gather' "$tmp/out" && fail "a plan without fp8_param_gather names it"
else
    fail "plan --model --fp8-param-gather: $(cat "$tmp/err")"
fi

# the runtime settings' what-ifs (--recompute, --checkpoint-layers, --zero, --tp-overlap,
# --overlap-param-gather, --fp8-param-gather, --grad-reduce, --optimizer-state): plumb sim
# B.json --X v gives the report of plan --model --X v on the same layout (every figure to
# 1e-9 relative, the what-ifs and changes apart), on a layout where the setting moves the
# iteration or the memory; the what-ifs line and the JSON name them as the plan's options
# and fields
same_report() { # A.json B.json: 0 when the reports agree but for whatif, changes and plan
    python3 - "$1" "$2" <<'EOF2'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
for r in (a, b):
    for k in ("whatif", "changes", "plan"):
        r.pop(k, None)
def same(x, y):
    if isinstance(x, dict):
        return isinstance(y, dict) and x.keys() == y.keys() and all(same(x[k], y[k]) for k in x)
    if isinstance(x, list):
        return isinstance(y, list) and len(x) == len(y) and all(map(same, x, y))
    if isinstance(x, float) or isinstance(y, float):
        return abs(x - y) <= 1e-9 * max(abs(x), abs(y))
    return x == y
sys.exit(0 if same(a, b) else 1)
EOF2
}
L2=(--model examples/llm/gpt2.json -c profiles/clusters/dgx-a100-80g.json --global-batch 16
    --tp 2 --pp 2 --dp 2)
L7=(--model examples/llm/nemo/llama2-7b.json -c profiles/clusters/dgx-h100.json
    --global-batch 16 --seq-len 1024)
# LAYOUT|BASE OPTIONS|WHAT-IF|its JSON
for c in "L2||--recompute full|\"recompute\": \"full\"" \
         "L2||--recompute selective|\"recompute\": \"selective\"" \
         "L2|--recompute full|--recompute none|\"recompute\": \"none\"" \
         "L2|--recompute full|--checkpoint-layers 2|\"checkpoint_layers\": 2" \
         "L2||--zero 1|\"zero\": 1" \
         "L2|--zero 1|--zero 0|\"zero\": 0" \
         "L2||--tp-overlap backward|\"tp_overlap\": \"backward\"" \
         "L2||--tp-overlap full|\"tp_overlap\": \"full\"" \
         "L7|--tp 8 --pp 1 --dp 2 --zero 1|--overlap-param-gather|\"overlap_param_gather\": true" \
         "L7|--tp 2 --pp 2 --dp 2 --precision fp8 --zero 1|--fp8-param-gather|\"fp8_param_gather\": true" \
         "L2||--grad-reduce bf16|\"grad_reduce\": \"bf16\"" \
         "L2||--optimizer-state bf16|\"optimizer_state\": \"bf16\""; do
    IFS='|' read -r lay base opt want <<<"$c"
    [ "$lay" = L2 ] && lo=("${L2[@]}") || lo=("${L7[@]}")
    # shellcheck disable=SC2086
    if ! "$PLUMB" plan "${lo[@]}" $base -o "$tmp/rb.json" >/dev/null 2>"$tmp/err" ||
        ! "$PLUMB" plan "${lo[@]}" $base $opt -o "$tmp/ra.json" >/dev/null 2>>"$tmp/err"; then
        fail "plan --model $base $opt: $(cat "$tmp/err")"
        continue
    fi
    "$PLUMB" sim "$tmp/ra.json" --json >"$tmp/a.json"
    "$PLUMB" sim "$tmp/rb.json" --json >"$tmp/b.json"
    # shellcheck disable=SC2086
    "$PLUMB" sim "$tmp/rb.json" $opt --json >"$tmp/w.json" 2>"$tmp/err" ||
        { fail "sim $opt: exit $?: $(cat "$tmp/err")"; continue; }
    same_report "$tmp/a.json" "$tmp/w.json" ||
        fail "sim [$base] $opt: not plan --model $opt's report (iteration $(iter "$tmp/w.json") s against $(iter "$tmp/a.json") s)"
    same_report "$tmp/a.json" "$tmp/b.json" &&
        fail "sim [$base] $opt: the plan as written gives the same report: the check cannot fail"
    got=$(python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["whatif"]))' "$tmp/w.json")
    [ "$got" = "{$want}" ] || fail "sim $opt: whatif $got, expected {$want}"
    # shellcheck disable=SC2086
    "$PLUMB" sim "$tmp/rb.json" $opt >"$tmp/out" &&
        grep -qF "what-ifs        ${opt#--} (instead of the plan as written)" "$tmp/out" ||
        fail "sim $opt: the what-ifs line: $(grep what-ifs "$tmp/out")"
done
"$PLUMB" plan "${L2[@]}" -o "$tmp/rb.json" >/dev/null
"$PLUMB" sim "$tmp/rb.json" --p2p sync --recompute selective --zero 1 --tp-overlap full \
    --overlap-param-gather --grad-reduce bf16 --optimizer-state bf16 >"$tmp/out" &&
    grep -qF "what-ifs        p2p sync; recompute selective; zero 1; tp-overlap full; overlap-param-gather; grad-reduce bf16; optimizer-state bf16 (instead of the plan as written)" \
        "$tmp/out" || fail "sim runtime what-ifs together: $(grep what-ifs "$tmp/out")"
# a what-if that does not fit is an answer: flagged, exit 0 (Llama 2 7B at 4096 tokens fits
# at tp 2 x dp 4 with full recomputation only: 84.35 GiB without, as plan --model says)
if "$PLUMB" plan "${L7[@]/1024/4096}" --tp 2 --pp 1 --dp 4 --recompute full -o "$tmp/rf.json" \
    >/dev/null 2>"$tmp/err"; then
    "$PLUMB" sim "$tmp/rf.json" --recompute none >"$tmp/out" 2>"$tmp/err" ||
        fail "sim --recompute none that does not fit: exit $?, expected 0: $(cat "$tmp/err")"
    grep -Eq '^peak memory +84.35 GiB on the fullest device \(DOES NOT FIT\)$' "$tmp/out" ||
        fail "sim --recompute none: not flagged: $(grep '^peak memory' "$tmp/out")"
    [ -s "$tmp/err" ] && fail "sim --recompute none: wrote to stderr: $(cat "$tmp/err")"
else
    fail "plan --model --recompute full at 4096 tokens: $(cat "$tmp/err")"
fi
# the plan file of plan --model names its model ("model"): an uneven split it records is
# named on the layout line in the dashboard's words (pp-first-layers-N, pp-last-layers-N,
# embedding-in-split, loss-in-split) and in the JSON report under Megatron-Core's names; a
# bad "model" is one line naming the file and the field, exit 2
if "$PLUMB" plan "${FP8[@]}" --decoder-first-pipeline-num-layers 12 -o "$tmp/first.json" \
    >/dev/null 2>"$tmp/err" &&
    "$PLUMB" plan "${FP8[@]}" --account-for-embedding-in-pipeline-split \
        --account-for-loss-in-pipeline-split -o "$tmp/acc.json" >/dev/null 2>>"$tmp/err"; then
    "$PLUMB" sim "$tmp/first.json" | grep -Eq '^layout +tp 2 x pp 2 x dp 2 = 8 GPUs, global batch 16, fp8, ZeRO-1 optimizer, pp-first-layers-12$' ||
        fail "uneven split: the layout line: $("$PLUMB" sim "$tmp/first.json" | grep '^layout')"
    "$PLUMB" sim "$tmp/first.json" --json | grep -q '"decoder_first_pipeline_num_layers":	12' ||
        fail "uneven split: the JSON report lacks decoder_first_pipeline_num_layers"
    "$PLUMB" sim "$tmp/acc.json" | grep -Eq '^layout .*, embedding-in-split, loss-in-split$' ||
        fail "accounting split: the layout line: $("$PLUMB" sim "$tmp/acc.json" | grep '^layout')"
    "$PLUMB" sim "$tmp/fp8.json" | grep -q 'pp-first\|in-split' && fail "an even split names one"
    # Megatron-Core's layout string (--pipeline-layout) of the same stages: named on the
    # layout line and in the JSON, the iteration the uneven split's
    "$PLUMB" plan "${FP8[@]}" --pipeline-layout 'Et*12|t*20L' -o "$tmp/pll.json" >/dev/null &&
        "$PLUMB" sim "$tmp/pll.json" | grep -Eq '^layout .*ZeRO-1 optimizer, pipeline layout Et\*12\|t\*20L$' ||
        fail "pipeline layout: the layout line: $("$PLUMB" sim "$tmp/pll.json" | grep '^layout')"
    "$PLUMB" sim "$tmp/pll.json" --json | grep -qF '"pipeline_model_parallel_layout":	"Et*12|t*20L"' ||
        fail "pipeline layout: the JSON report lacks pipeline_model_parallel_layout"
    [ "$("$PLUMB" sim "$tmp/pll.json" | grep '^iteration')" = "$("$PLUMB" sim "$tmp/first.json" | grep '^iteration')" ] ||
        fail "pipeline layout Et*12|t*20L: not the iteration of --decoder-first-pipeline-num-layers 12"
    python3 -c 'import json, sys; p = json.load(open(sys.argv[1])); p["model"]["seq_len"] = 2048
json.dump(p, open(sys.argv[2], "w"))' "$tmp/first.json" "$tmp/badmodel.json"
    expect_bad "$tmp/badmodel.json: model.seq_len: expected the profile's tokens_per_sample 1024 (got 2048)" \
        "$tmp/badmodel.json"
else
    fail "plan --model with an uneven split: $(cat "$tmp/err")"
fi

[ $fails = 0 ] && echo "sim: ok"
exit $fails
