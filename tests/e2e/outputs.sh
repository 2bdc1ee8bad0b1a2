#!/usr/bin/env bash
# outputs.sh: what a user meets at the edges of the commands. No command overwrites one of
# its inputs (sim's plan and the profile and cluster the plan names, sweep's profile,
# import's graph): it refuses before any work, exit 2, the input byte-identical; a failing
# later output leaves an earlier file that was there byte-identical; every refusal prints
# its line (--straggler =2); plumb compare refuses runs of different models or plans; train
# takes -h and says where it wrote its trace; the sim report lists the what-ifs it applied
# (text and JSON); small memory figures print in MiB, bandwidths in Gbit/s.
set -u
PLUMB=${PLUMB:-./plumb}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "outputs.sh: FAIL: $*" >&2; exit 1; }
sum() { sha256sum "$1" | cut -d' ' -f1; }
d=$tmp fail=0
. "$(dirname "$0")/lib/expect.sh" # expect_bad NAME PATTERN CMD...: sets fail=1 on a miss

# a copy of a shipped plan with the profile and cluster it names, at the same relative paths
mkdir -p "$tmp/ex/plans" "$tmp/profiles/pipedream" "$tmp/profiles/clusters"
cp examples/plans/vgg16-4stage-1f1b.json "$tmp/ex/plans/plan.json"
cp profiles/pipedream/vgg16.json "$tmp/profiles/pipedream/"
cp profiles/clusters/cluster-a-4x4.json "$tmp/profiles/clusters/"
plan=$tmp/ex/plans/plan.json
prof=$tmp/profiles/pipedream/vgg16.json
clus=$tmp/profiles/clusters/cluster-a-4x4.json
s_plan=$(sum "$plan") s_prof=$(sum "$prof") s_clus=$(sum "$clus")
unchanged() { # the three inputs are byte-identical
    [ "$(sum "$plan")" = "$s_plan" ] || fail "$1: the plan changed"
    [ "$(sum "$prof")" = "$s_prof" ] || fail "$1: the profile changed"
    [ "$(sum "$clus")" = "$s_clus" ] || fail "$1: the cluster changed"
}

echo "sim: no output may be one of its inputs"
expect_bad sim-trace-plan "--trace $plan: is the input" "$PLUMB" sim "$plan" --trace "$plan"
unchanged sim-trace-plan
expect_bad sim-svg-plan "--svg $plan: is the input" "$PLUMB" sim "$plan" --svg "$plan"
unchanged sim-svg-plan
expect_bad sim-trace-profile "is the input" "$PLUMB" sim "$plan" --trace "$prof"
unchanged sim-trace-profile
expect_bad sim-svg-cluster "is the input" "$PLUMB" sim "$plan" --svg "$clus"
unchanged sim-svg-cluster
expect_bad sim-trace-svg-same "is the --trace file too" "$PLUMB" sim "$plan" --trace "$tmp/t.json" \
    --svg "$tmp/t.json"
[ ! -e "$tmp/t.json" ] || fail "sim with --trace = --svg wrote the file"

echo "sim: a failing later output leaves an earlier file as it was"
printf 'an earlier trace\n' > "$tmp/old.json"
s_old=$(sum "$tmp/old.json")
expect_bad sim-svg-missing-folder "folder $tmp/nope does not exist" "$PLUMB" sim "$plan" \
    --trace "$tmp/old.json" --svg "$tmp/nope/x.svg"
[ -f "$tmp/old.json" ] || fail "sim removed the earlier --trace file"
[ "$(sum "$tmp/old.json")" = "$s_old" ] || fail "sim changed the earlier --trace file"
mkdir "$tmp/adir"
expect_bad sim-svg-folder "is a folder" "$PLUMB" sim "$plan" --trace "$tmp/old.json" --svg "$tmp/adir"
[ "$(sum "$tmp/old.json")" = "$s_old" ] || fail "sim changed the earlier --trace file (folder)"
ls "$tmp" | grep -q '\.tmp\.' && fail "sim left a temporary file"
"$PLUMB" sim "$plan" --trace "$tmp/old.json" --svg "$tmp/t.svg" > "$tmp/out" 2> "$tmp/err" ||
    fail "sim --trace --svg: $(cat "$tmp/err")"
grep -q traceEvents "$tmp/old.json" || fail "sim did not write the trace"
grep -q '<svg' "$tmp/t.svg" || fail "sim did not write the SVG"

echo "sim: every refusal prints its line"
expect_bad straggler-no-dev "--straggler: expected DEV=FACTOR" "$PLUMB" sim "$plan" --straggler =2
expect_bad straggler-no-factor "--straggler: expected DEV=FACTOR" "$PLUMB" sim "$plan" --straggler 3=
expect_bad straggler-no-eq "--straggler: expected DEV=FACTOR" "$PLUMB" sim "$plan" --straggler 3
expect_bad straggler-bad-dev "--straggler DEV" "$PLUMB" sim "$plan" --straggler 99=2
expect_bad straggler-bad-factor "--straggler FACTOR" "$PLUMB" sim "$plan" --straggler 1=-2

echo "sim: the report lists the what-ifs it applied, bandwidth in Gbit/s"
"$PLUMB" sim "$plan" --straggler 2=3 --bandwidth ethernet=10 > "$tmp/out" 2> "$tmp/err" ||
    fail "sim with what-ifs: $(cat "$tmp/err")"
grep -q '^what-ifs .*device 2 computes x3 slower; level 1 (ethernet) at 10 Gbit/s' "$tmp/out" ||
    fail "text report does not list the what-ifs: $(head -4 "$tmp/out")"
"$PLUMB" sim "$plan" > "$tmp/out" 2> "$tmp/err" || fail "sim: $(cat "$tmp/err")"
grep -q '^what-ifs' "$tmp/out" && fail "plain sim lists what-ifs"
"$PLUMB" sim "$plan" --straggler 2=3 --bandwidth ethernet=10 --json > "$tmp/r.json" ||
    fail "sim --json with what-ifs"
python3 - "$tmp/r.json" <<'PY' || fail "JSON report does not list the what-ifs"
import json, sys
w = json.load(open(sys.argv[1]))["whatif"]
assert w["straggler"] == {"device": 2, "factor": 3}, w
assert w["bandwidth"] == [{"level": 1, "name": "ethernet", "gbit_per_s": 10}], w
PY
"$PLUMB" info "$clus" > "$tmp/out" || fail "info cluster"
grep -q 'Gbit/s' "$tmp/out" || fail "info prints bandwidth without Gbit/s: $(cat "$tmp/out")"

echo "sweep: --svg may not be the profile"
expect_bad sweep-svg-profile "--svg $prof: is the input" "$PLUMB" sweep -p "$prof" -c "$clus" \
    --gpus 1..2 --svg "$prof"
unchanged sweep-svg-profile

echo "import: -o is checked before work and may not be the graph"
cat > "$tmp/graph.txt" <<'G'
node1 -- Input -- forward_compute_time=0.0, backward_compute_time=0.0, activation_size=64.0, parameter_size=0.0
node2 -- Linear -- forward_compute_time=1.5, backward_compute_time=2.0, activation_size=64.0, parameter_size=8.0
	node1 -- node2
G
s_g=$(sum "$tmp/graph.txt")
expect_bad import-o-graph "-o $tmp/graph.txt: is the input" "$PLUMB" import pipedream \
    "$tmp/graph.txt" -b 1 -o "$tmp/graph.txt"
[ "$(sum "$tmp/graph.txt")" = "$s_g" ] || fail "import overwrote its graph"
expect_bad import-o-missing "does not exist" "$PLUMB" import pipedream "$tmp/graph.txt" \
    -o "$tmp/nope/p.json"
expect_bad import-o-folder "is a folder" "$PLUMB" import pipedream "$tmp/graph.txt" -o "$tmp/adir"
"$PLUMB" import pipedream "$tmp/graph.txt" -b 1 -o "$tmp/imp.json" > "$tmp/out" 2> "$tmp/err" ||
    fail "import: $(cat "$tmp/err")"

echo "ui: the -o folder is checked before work"
expect_bad ui-o-missing "-o $tmp/nope: folder does not exist" "$PLUMB" ui "$plan" -o "$tmp/nope" \
    --snapshot 80x24
expect_bad ui-o-file "is not a folder" "$PLUMB" ui "$plan" -o "$tmp/graph.txt" --snapshot 80x24
"$PLUMB" ui "$plan" -o "$tmp/adir" --snapshot 80x24 > /dev/null 2> "$tmp/err" ||
    fail "ui -o an existing folder: $(cat "$tmp/err")"

echo "train: -h, and --trace says where it wrote"
"$PLUMB" train -h > "$tmp/out" 2> "$tmp/err" || fail "train -h: exit $? ($(cat "$tmp/err"))"
grep -q '^usage: plumb train' "$tmp/out" || fail "train -h prints no usage"
model=examples/models/fmnist-mlp.json
cluster=$PWD/examples/clusters/cpu-1x2.json
"$PLUMB" profile "$model" --batch 32 --workers 2 --runs 2 --warmup 1 -o "$tmp/p.json" --quiet \
    > "$tmp/out" 2>&1 || fail "profile: $(cat "$tmp/out")"
mkplan() { # mkplan FILE PROFILE LAST-LAYER-OF-STAGE-0 LAST-LAYER
    cat > "$1" <<JSON
{"format": "plumb-plan/1", "profile": "$2", "cluster": "$cluster",
 "schedule": "1f1b-flush", "microbatch_size": 32, "microbatches": 4,
 "stages": [{"first_layer": 0, "last_layer": $3, "replicas": 1, "devices": [0]},
            {"first_layer": $(($3 + 1)), "last_layer": $4, "replicas": 1, "devices": [1]}]}
JSON
}
mkplan "$tmp/mlp.json" "$tmp/p.json" 1 6
"$PLUMB" train "$model" "$tmp/mlp.json" --steps 4 --trace "$tmp/meas.json" --quiet \
    > "$tmp/out" 2> "$tmp/err" || fail "train: $(cat "$tmp/err")"
grep -qF "trace written to $tmp/meas.json" "$tmp/out" ||
    fail "train --trace does not say where it wrote: $(cat "$tmp/out")"
grep -q '"model": "fmnist-mlp"' "$tmp/meas.json" || fail "measured trace does not name its model"
cp "$tmp/p.json" "$tmp/p-copy.json"
expect_bad train-trace-profile "--trace $tmp/p.json: is the input" "$PLUMB" train "$model" \
    "$tmp/mlp.json" --steps 4 --trace "$tmp/p.json" --quiet
cmp -s "$tmp/p.json" "$tmp/p-copy.json" || fail "train --trace overwrote the plan's profile"

echo "compare: runs of different models or plans are refused"
"$PLUMB" sim "$tmp/mlp.json" --trace "$tmp/pred.json" > /dev/null 2>&1 || fail "sim mlp"
"$PLUMB" compare "$tmp/pred.json" "$tmp/meas.json" > "$tmp/out" 2> "$tmp/err" ||
    fail "compare of the same plan: $(cat "$tmp/err")"
"$PLUMB" sim "$tmp/mlp.json" --json > "$tmp/pred-r.json" 2> /dev/null || fail "sim mlp --json"
"$PLUMB" compare "$tmp/pred-r.json" "$tmp/meas.json" > "$tmp/out" 2> "$tmp/err" ||
    fail "compare of a report of the same plan: $(cat "$tmp/err")"
mkplan "$tmp/alex.json" "$PWD/profiles/pipedream/alexnet.json" 10 22
"$PLUMB" sim "$tmp/alex.json" --trace "$tmp/alex-t.json" > /dev/null 2>&1 || fail "sim alexnet"
expect_bad compare-models 'model: expected "alexnet"' "$PLUMB" compare "$tmp/alex-t.json" \
    "$tmp/meas.json"
grep -qF 'got "fmnist-mlp"' "$tmp/err" || fail "compare does not name both models: $(cat "$tmp/err")"
"$PLUMB" sim "$tmp/alex.json" --json > "$tmp/alex-r.json" 2> /dev/null || fail "sim alexnet --json"
expect_bad compare-models-report 'model: expected "alexnet"' "$PLUMB" compare "$tmp/alex-r.json" \
    "$tmp/meas.json"
mkplan "$tmp/mlp2.json" "$tmp/p.json" 2 6
"$PLUMB" sim "$tmp/mlp2.json" --trace "$tmp/pred2.json" > /dev/null 2>&1 || fail "sim mlp2"
expect_bad compare-plans 'stages\[0\]: expected layers 0\.\.2' "$PLUMB" compare "$tmp/pred2.json" \
    "$tmp/meas.json"

echo "plan: a small model's peak memory in MiB, not 0.00 GiB"
"$PLUMB" plan -p "$tmp/p.json" -c "$cluster" > "$tmp/out" 2> "$tmp/err" ||
    fail "plan: $(cat "$tmp/err")"
grep -Eq '^peak memory: [0-9.]+ MiB on the fullest device, capacity 4.00 GiB' "$tmp/out" ||
    fail "plan's peak memory not in MiB: $(grep 'peak memory' "$tmp/out")"

echo "profile: progress on a terminal"
if command -v script > /dev/null; then
    script -qc "$PLUMB profile $model --runs 2 --warmup 1 --batch 8" /dev/null > "$tmp/tty" 2>&1 ||
        fail "profile on a terminal"
    grep -q 'timing the layers: 100 %' "$tmp/tty" || fail "profile shows no progress on a terminal"
    "$PLUMB" profile "$model" --runs 2 --warmup 1 --batch 8 > "$tmp/out" 2>&1 ||
        fail "profile"
    grep -q 'timing the layers' "$tmp/out" && fail "profile shows progress off a terminal"
fi
[ "$fail" = 0 ] || fail "see the FAIL lines above"
echo "outputs: ok"
