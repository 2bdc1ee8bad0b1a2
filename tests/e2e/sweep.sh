#!/usr/bin/env bash
# sweep.sh: end-to-end test of `plumb sweep` (capacity planning: table, JSON, SVG, target,
# figures that follow their formulas) and of `plumb plan`'s native mode (the default plan,
# --schedule auto's ranked top five with marks, nothing fits -> what would fit, exit 2),
# and bad input to both: one line on stderr, exit 2, nothing written.
set -u
PLUMB=${PLUMB:-./plumb}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
PR=profiles/pipedream
CL=profiles/clusters

# expect_bad NEEDLE ARGS...: exit 2, nothing on stdout, one stderr line with NEEDLE, no SVG
expect_bad() {
    local needle=$1; shift
    rm -f "$tmp/bad.svg"
    "$PLUMB" "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    [ "$rc" -eq 2 ] || fail "$*: exit $rc, expected 2"
    [ -s "$tmp/out" ] && fail "$*: wrote to stdout"
    [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "$*: stderr is not one line: $(cat "$tmp/err")"
    grep -qF -- "$needle" "$tmp/err" || fail "$*: stderr lacks '$needle': $(cat "$tmp/err")"
    [ -e "$tmp/bad.svg" ] && fail "$*: wrote the SVG"
}

# --- sweep: table, JSON, SVG ------------------------------------------------------------
"$PLUMB" sweep -p $PR/resnet18.json -c $CL/cluster-a-4x4.json --gpus 1..6 --price 3 \
    --target 2000 --svg "$tmp/s.svg" >"$tmp/table" 2>"$tmp/err" || fail "sweep: exit $?: $(cat "$tmp/err")"
grep -q "samples/s" "$tmp/table" || fail "sweep table has no samples/s"
grep -q "USD/M" "$tmp/table" || fail "sweep table has no cost unit"
grep -q "^target 2000.0 samples/s: " "$tmp/table" || fail "sweep has no target line"
[ "$(grep -cE '^ +[0-9]+ ' "$tmp/table")" -eq 6 ] || fail "sweep table does not have 6 rows"
grep -q "</svg>" "$tmp/s.svg" || fail "sweep SVG is not complete"
if command -v rsvg-convert >/dev/null; then
    rsvg-convert "$tmp/s.svg" -o "$tmp/s.png" 2>"$tmp/err" || fail "SVG does not render: $(cat "$tmp/err")"
fi

"$PLUMB" sweep -p $PR/resnet18.json -c $CL/cluster-a-4x4.json --gpus 1..6 --price 3 \
    --target 2000 --json >"$tmp/s.json" 2>"$tmp/err" || fail "sweep --json: exit $?"
if command -v python3 >/dev/null; then
    python3 - "$tmp/s.json" <<'EOF' || fail "sweep JSON figures do not follow their formulas"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["format"] == "plumb-sweep/1"
t1, price, target = d["one_device_samples_per_s"], d["price_usd_per_gpu_hour"], d["target_samples_per_s"]
pts = d["points"]
assert [p["gpus"] for p in pts] == list(range(1, 7))
first = None
for p in pts:
    assert p["ok"], p
    n, thr = p["gpus"], p["samples_per_s"]
    assert abs(p["efficiency"] - thr / (n * t1)) <= 1e-9 * p["efficiency"], p
    cost = price * n / 3600 / thr * 1e6
    assert abs(p["usd_per_million_samples"] - cost) <= 1e-9 * cost, p
    if first is None and thr >= target:
        first = n
assert d["target_gpus"] == first, (d["target_gpus"], first)
EOF
fi

# --- plan, native mode -------------------------------------------------------------------
"$PLUMB" plan -p $PR/gnmt.json -c $CL/cluster-b-2x8.json -o "$tmp/p.json" >"$tmp/out" 2>"$tmp/err" \
    || fail "plan: exit $?: $(cat "$tmp/err")"
grep -q "native cost model" "$tmp/out" || fail "plan's default is not the native mode"
grep -q "samples/s simulated" "$tmp/out" || fail "plan does not report simulated throughput"
grep -q "GiB" "$tmp/out" || fail "plan does not report memory"
"$PLUMB" sim "$tmp/p.json" >/dev/null 2>"$tmp/err" || fail "the native plan does not simulate: $(cat "$tmp/err")"

"$PLUMB" plan -p $PR/gnmt.json -c $CL/cluster-b-2x8.json --schedule auto >"$tmp/out" 2>"$tmp/err" \
    || fail "plan --schedule auto: exit $?: $(cat "$tmp/err")"
[ "$(grep -cE '^[1-5] ' "$tmp/out")" -eq 5 ] || fail "auto does not print a top five"
grep -qE '^1 .* wins: ' "$tmp/out" || fail "auto's first candidate does not say why it wins"
grep -qE '^2 .* (loses|rejected): ' "$tmp/out" || fail "auto's second candidate does not say why it loses"
grep -E '^[1-5] +(pipedream|2bw) ' "$tmp/out" | grep -vq ASYNC && fail "an async schedule is not marked ASYNC"
"$PLUMB" plan -p $PR/gnmt.json -c $CL/cluster-b-2x8.json --schedule auto --json >"$tmp/a.json" \
    || fail "plan --schedule auto --json: exit $?"
grep -q '"candidates"' "$tmp/a.json" || fail "auto JSON has no candidates"

"$PLUMB" plan -p $PR/gnmt.json -c $CL/cluster-b-2x8.json --mode pipedream >"$tmp/out" \
    || fail "plan --mode pipedream: exit $?"
grep -q "PipeDream-compatible" "$tmp/out" || fail "--mode pipedream is not PipeDream's planner"

# nothing fits at the profiled 128 samples per microbatch: one line that names what would
# fit, exit 1, no plan written; left to itself the planner takes smaller microbatches
rm -f "$tmp/n.json"
"$PLUMB" plan -p $PR/resnet50.json -c $CL/cluster-c-4x1.json --memory-limit 4 -o "$tmp/m.json" \
    >"$tmp/out" 2>"$tmp/err" || fail "plan in 4 GiB with smaller microbatches: $(cat "$tmp/err")"
grep -q '^microbatches: [0-9]* x \(64\|32\) samples' "$tmp/out" ||
    fail "plan in 4 GiB: not of 64 or 32 samples per microbatch: $(cat "$tmp/out")"
"$PLUMB" plan -p $PR/resnet50.json -c $CL/cluster-c-4x1.json --memory-limit 4 \
    --microbatch-size 128 -o "$tmp/n.json" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 2 ] || fail "nothing fits: exit $rc, expected 2 (bad input, README)"
[ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "nothing fits: not one line: $(cat "$tmp/err")"
grep -q "nothing fits in 4.0 GiB per device" "$tmp/err" || fail "nothing fits: $(cat "$tmp/err")"
grep -q "would fit: " "$tmp/err" || fail "nothing fits: no suggestion: $(cat "$tmp/err")"
[ -e "$tmp/n.json" ] && fail "nothing fits: a plan was written"

# --- bad input ----------------------------------------------------------------------------
expect_bad "does not fit" sweep -p $PR/vgg16.json -c $CL/cluster-c-4x1.json --gpus 1..2 \
    --memory-limit 0.1 --svg "$tmp/bad.svg"
expect_bad "--gpus" sweep -p $PR/vgg16.json -c $CL/cluster-c-4x1.json --gpus 3..2 --svg "$tmp/bad.svg"
expect_bad "--gpus" sweep -p $PR/vgg16.json -c $CL/cluster-c-4x1.json --gpus 0..2
expect_bad "expected -p PROFILE" sweep -c $CL/cluster-c-4x1.json --gpus 1..2
expect_bad "unknown option" sweep -p $PR/vgg16.json -c $CL/cluster-c-4x1.json --gpus 1 --frobnicate
expect_bad "--price" sweep -p $PR/vgg16.json -c $CL/cluster-c-4x1.json --gpus 1 --price -3
expect_bad "does not fit" plan -p $PR/vgg16.json -c $CL/cluster-c-4x1.json --memory-limit 0.1
expect_bad "--schedule: expected gpipe, 1f1b-flush, pipedream, 2bw, interleaved, zb-h1, zb-v, dualpipev or auto (got \"fast\")" \
    plan -p $PR/vgg16.json -c $CL/cluster-c-4x1.json --schedule fast
expect_bad "plumb: sweep: --schedule: expected gpipe" sweep -p $PR/vgg16.json \
    -c $CL/cluster-c-4x1.json --gpus 1..2 --schedule 1f1b
expect_bad "--mode" plan -p $PR/vgg16.json -c $CL/cluster-c-4x1.json --mode quick
expect_bad "belong to --mode pipedream" plan -p $PR/vgg16.json -c $CL/cluster-c-4x1.json \
    --mode native --straight
printf '{"format":"plumb-cluster/1","name":"nil","levels":[{"name":"l0","count":2,"bandwidth_gbit_per_s":0,"latency_us":1}],"device_types":[{"name":"d","memory_gib":8,"speed":1}],"device_type":"d"}\n' >"$tmp/zero.json"
expect_bad "bandwidth" plan -p $PR/vgg16.json -c "$tmp/zero.json"
expect_bad "bandwidth" sweep -p $PR/vgg16.json -c "$tmp/zero.json" --gpus 1..2

# --- sweep -p under a runtime (--p2p, --grad-sync): named in the header and the JSON, auto's
# skips listed, refused kinds and bad values one line --------------------------------------
"$PLUMB" sweep -p $PR/vgg16.json -c $CL/cluster-a-4x4.json --gpus 4..5 --p2p sync \
    >"$tmp/rt" 2>"$tmp/err" || fail "sweep --p2p sync: exit $?: $(cat "$tmp/err")"
head -1 "$tmp/rt" | grep -q "; runtime: p2p sync$" || fail "sweep --p2p sync: $(head -1 "$tmp/rt")"
"$PLUMB" sweep -p $PR/vgg16.json -c $CL/cluster-a-4x4.json --gpus 4 --grad-sync end --json \
    >"$tmp/rt.json" || fail "sweep --grad-sync end --json: exit $?"
grep -q '"grad_sync":[[:space:]]*"end"' "$tmp/rt.json" || fail "sweep --json lacks grad_sync"
"$PLUMB" sweep -p $PR/vgg16.json -c $CL/cluster-a-4x4.json --gpus 4 --schedule auto \
    --grad-sync end >"$tmp/rt" || fail "sweep auto --grad-sync end: exit $?"
grep -q "^skipped: 2bw: --grad-sync: expected overlap" "$tmp/rt" || fail "sweep auto: $(cat "$tmp/rt")"
"$PLUMB" sweep -p $PR/vgg16.json -c $CL/cluster-a-4x4.json --gpus 4 >"$tmp/rt" || fail "sweep"
grep -q "runtime\|skipped" "$tmp/rt" && fail "the default sweep names a runtime"
expect_bad 'plumb: sweep: --p2p: expected overlap or sync (got "foo")' sweep -p $PR/vgg16.json \
    -c $CL/cluster-a-4x4.json --gpus 4 --p2p foo
expect_bad "plumb: sweep: --grad-sync: expected overlap with schedule pipedream" sweep \
    -p $PR/vgg16.json -c $CL/cluster-a-4x4.json --gpus 4 --schedule pipedream --grad-sync end

# --zero 1: every point's plan ZeRO-1; VGG-16 at 1 GiB fits only so (refused without)
"$PLUMB" sweep -p $PR/vgg16.json -c $CL/cluster-a-4x4.json --gpus 16 --memory-limit 1 \
    --zero 1 --json >"$tmp/z.json" 2>"$tmp/err" || fail "sweep --zero 1: exit $?: $(cat "$tmp/err")"
grep -q '"zero":[[:space:]]*1' "$tmp/z.json" || fail "sweep --zero 1 --json lacks zero"
grep -q '"ok":[[:space:]]*true' "$tmp/z.json" || fail "sweep --zero 1: the point does not fit"
expect_bad "layer node35 alone needs 1.15 GiB" sweep -p $PR/vgg16.json \
    -c $CL/cluster-a-4x4.json --gpus 16 --memory-limit 1
expect_bad "plumb: sweep: --overlap-param-gather: belongs to --zero 1" sweep \
    -p $PR/vgg16.json -c $CL/cluster-a-4x4.json --gpus 4 --overlap-param-gather
# the work budget (docs/sim.md): under --microbatches the counts share one; the counts past
# it are skipped and named, in the text and the JSON (1..16 at 1048576 ran over 30 s)
"$PLUMB" sweep -p $PR/alexnet.json -c $CL/cluster-a-4x4.json --microbatches 1048576 \
    --gpus 1..2 --json >"$tmp/bud.json" 2>"$tmp/err" || fail "budget sweep: exit $?: $(cat "$tmp/err")"
python3 - "$tmp/bud.json" <<'PY' || fail "budget sweep JSON: $(head -c 300 "$tmp/bud.json")"
import json, sys
d = json.load(open(sys.argv[1]))
s = d["skipped_gpus"]
assert [p["gpus"] for p in d["points"]] == [1] and s["from"] == 2 and s["to"] == 2, s
assert s["why"].startswith("--microbatches: the 8 plans the search must simulate"), s
assert "left to the sweep" in s["why"], s
PY
"$PLUMB" sweep -p $PR/alexnet.json -c $CL/cluster-a-4x4.json --microbatches 1048576 \
    --gpus 1..2 >"$tmp/bud.txt" 2>"$tmp/err"
grep -q '^skipped: GPUs 2..2: --microbatches: the 8 plans' "$tmp/bud.txt" ||
    fail "budget sweep text: $(cat "$tmp/bud.txt")"
[ "$fails" -eq 0 ] || { echo "sweep.sh: $fails failure(s)"; exit 1; }
echo "sweep.sh: all passed"
