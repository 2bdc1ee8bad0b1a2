#!/usr/bin/env bash
# loop.sh: PipeDream's loop end to end on the CPU (docs/loop.md): plumb profile measures the
# Fashion-MNIST MLP, plumb plan accepts the profile, plumb sim predicts a 2-stage 1F1B run
# of it on examples/clusters/cpu-1x2.json, plumb train runs that plan for real with a trace,
# plumb compare sets one against the other. Checks the structure and the units of every
# step, that a prediction compared with itself has no error, that predicted and measured
# F/B medians are within 30x of each other (a unit slip is 1000x; the real error depends on
# the machine's load, see docs/loop.md), and that bad input exits 2 with nothing written.
set -u
PLUMB=${PLUMB:-./plumb}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "loop.sh: FAIL: $*" >&2; exit 1; }
model=examples/models/fmnist-mlp.json
cluster=$PWD/examples/clusters/cpu-1x2.json

echo "profile: 7 layers of fmnist-mlp on the cpu backend, as 1 of 2 workers"
"$PLUMB" profile "$model" --backend cpu --batch 32 --workers 2 --runs 100 -o "$tmp/p.json" \
    > "$tmp/profile.log" 2>&1 || fail "plumb profile failed: $(cat "$tmp/profile.log")"
[ "$(grep -c '"forward_ms"' "$tmp/p.json")" = 7 ] || fail "profile has not 7 layers"
[ "$(grep -c '"backward_input_ms"' "$tmp/p.json")" = 7 ] || fail "profile lacks the I/W split"
grep -q '"format":[[:space:]]*"plumb-profile/1"' "$tmp/p.json" || fail "profile format"
grep -q '"minibatch":[[:space:]]*32' "$tmp/p.json" || fail "profile minibatch"
grep -q 'fwd (ms)' "$tmp/profile.log" || fail "profile table without units"
# first linear layer: 32 x 256 fp32 outputs, (784 x 256 + 256) fp32 parameters
grep -q '"activation_bytes":[[:space:]]*32768,' "$tmp/p.json" || fail "linear1 activation bytes"
grep -q '"parameter_bytes":[[:space:]]*803840,' "$tmp/p.json" || fail "linear1 parameter bytes"

echo "plan: plumb plan accepts the measured profile"
"$PLUMB" plan -p "$tmp/p.json" -c "$cluster" -o "$tmp/planner.json" > "$tmp/plan.log" 2>&1 ||
    fail "plumb plan rejected the profile: $(cat "$tmp/plan.log")"
[ -s "$tmp/planner.json" ] || fail "plumb plan wrote no plan"

# The loop itself runs a 2-stage 1F1B pipeline (layers 0-1 | 2-6, 4 microbatches of 32), so
# that sends, bubbles and both stages are exercised whatever plan the planner prefers for
# this small model (data parallelism on two devices).
cat > "$tmp/plan.json" <<JSON
{
  "format": "plumb-plan/1",
  "profile": "p.json",
  "cluster": "$cluster",
  "schedule": "1f1b-flush",
  "microbatch_size": 32,
  "microbatches": 4,
  "stages": [
    {"first_layer": 0, "last_layer": 1, "replicas": 1, "devices": [0]},
    {"first_layer": 2, "last_layer": 6, "replicas": 1, "devices": [1]}
  ]
}
JSON

echo "sim: prediction as a trace and as a report"
"$PLUMB" sim "$tmp/plan.json" --trace "$tmp/pred.json" > "$tmp/sim.log" 2>&1 ||
    fail "plumb sim failed: $(cat "$tmp/sim.log")"
"$PLUMB" sim "$tmp/plan.json" --json > "$tmp/report.json" 2> "$tmp/sim.err" ||
    fail "plumb sim --json failed: $(cat "$tmp/sim.err")"

echo "sim: the profile's measured optimizer step and batch gather are priced"
for f in input_gather_ms sgd_step_ns_per_byte momentum_step_ns_per_byte adam_step_ns_per_byte; do
    grep -q "\"$f\":[[:space:]]*[0-9]" "$tmp/p.json" || fail "profile lacks $f"
done
grep -q '"source":.* data"' "$tmp/p.json" || fail "profile source does not name its data"
# a profile with twice the measured sgd step (the plan's optimizer) and 10x the gather
awk '/"(sgd_step_ns_per_byte|input_gather_ms)"/ {
       k = $1; v = $2; sub(/,$/, "", v); f = k ~ /sgd/ ? 2 : 10
       printf "\t%s\t%.17g,\n", k, f * v; next } { print }' "$tmp/p.json" > "$tmp/p2.json"
sed 's/"p.json"/"p2.json"/' "$tmp/plan.json" > "$tmp/plan2.json"
"$PLUMB" sim "$tmp/plan2.json" --json > "$tmp/report2.json" 2> "$tmp/sim2.err" ||
    fail "plumb sim of the doubled profile failed: $(cat "$tmp/sim2.err")"
vals() { # $1 report, $2 key: the values of the key, one line
    grep "\"$2\":" "$1" | sed 's/.*:[[:space:]]*//; s/,$//' | tr '\n' ' '
}
g1=$(vals "$tmp/p.json" input_gather_ms)
awk -v a="$(vals "$tmp/report.json" step_s)" -v b="$(vals "$tmp/report2.json" step_s)" \
    -v fa="$(vals "$tmp/report.json" forward_s)" -v fb="$(vals "$tmp/report2.json" forward_s)" \
    -v ia="$(vals "$tmp/report.json" iteration_s)" -v ib="$(vals "$tmp/report2.json" iteration_s)" \
    -v g="$g1" 'function near(x, y) { d = x - y; return (d < 0 ? -d : d) <= 1e-9 * (y < 0 ? -y : y) + 1e-15 }
    BEGIN { split(a, A, " "); split(b, B, " "); split(fa, FA, " "); split(fb, FB, " ")
      # both stages step twice as long; stage 0 (first) and 1 (last) gather 10x as long
      if (!(A[1] > 0) || !near(B[1], 2 * A[1]) || !near(B[2], 2 * A[2])) exit 1
      if (!near(FB[1] - FA[1], 9 * g / 1e3) || !near(FB[2] - FA[2], 9 * g / 1e3)) exit 1
      if (!(ib > ia)) exit 1 }' ||
    fail "the simulator does not price the profile's step and gather: step $(vals "$tmp/report.json" step_s)/ $(vals "$tmp/report2.json" step_s), F $(vals "$tmp/report.json" forward_s)/ $(vals "$tmp/report2.json" forward_s), gather $g1 ms"

echo "train: 60 steps of the plan, measured trace"
"$PLUMB" train "$model" "$tmp/plan.json" --steps 60 --trace "$tmp/meas.json" --quiet \
    > "$tmp/train.log" 2>&1 || fail "plumb train failed: $(cat "$tmp/train.log")"
[ -s "$tmp/meas.json" ] || fail "no measured trace"

echo "compare: predicted against measured"
"$PLUMB" compare "$tmp/pred.json" "$tmp/meas.json" > "$tmp/cmp.txt" 2>&1 ||
    fail "plumb compare failed: $(cat "$tmp/cmp.txt")"
for k in "per stage and action kind" "per action kind" "per iteration" "iteration " \
    "sim trace" "exec trace" " ms " " %"; do
    grep -qF -- "$k" "$tmp/cmp.txt" || fail "compare output lacks '$k': $(cat "$tmp/cmp.txt")"
done
for row in "0     F" "0     B" "0     send_f" "1     F" "1     B" "1     send_b"; do
    grep -q "^$row " "$tmp/cmp.txt" || fail "compare output lacks the row '$row'"
done
# peak memory of each stage's device: predicted and measured, in MiB, within 1/10 .. 10
sed -n '/^peak memory per device/,/^mean |error| of the peak/p' "$tmp/cmp.txt" > "$tmp/mem.txt"
awk '$1 == "0" || $1 == "1" { if ($3 != "MiB" || $5 != "MiB" || !($2 > 0) || !($4 > 0)) bad = 1
       r = $2 / $4; if (r < 0.1 || r > 10) bad = 1; n++ }
     END { exit !(n == 2 && !bad) }' "$tmp/mem.txt" ||
    fail "compare lacks per-stage peak memory in MiB, or they are far apart: $(cat "$tmp/mem.txt")"
sed 's/^/  /' "$tmp/mem.txt"
"$PLUMB" compare "$tmp/pred.json" "$tmp/meas.json" --median > "$tmp/cmp-med.txt" 2>&1 ||
    fail "plumb compare --median failed"
# F and B medians of both stages: predicted / measured within 1/30 .. 30
awk '$2 == "F" || $2 == "B" { if ($4 != "ms" || $6 != "ms") bad = bad " units:" $0;
       r = $3 / $5; if (r < 1.0 / 30 || r > 30) bad = bad " ratio:" $0; n++ }
     END { if (n != 4 || bad != "") { print n, bad; exit 1 } }' "$tmp/cmp-med.txt" ||
    fail "predicted and measured F/B far apart: $(cat "$tmp/cmp-med.txt")"
sed -n '/^per iteration/,$p' "$tmp/cmp-med.txt" | sed 's/^/  /'
"$PLUMB" compare "$tmp/pred.json" "$tmp/meas.json" --json > "$tmp/cmp.json" 2>&1 ||
    fail "plumb compare --json failed"
grep -q '"format":[[:space:]]*"plumb-compare/1"' "$tmp/cmp.json" || fail "--json format"
grep -q '"measured_median_ms"' "$tmp/cmp.json" || fail "--json lacks medians"

echo "compare: a report against the measured trace; the prediction against itself"
"$PLUMB" compare "$tmp/report.json" "$tmp/meas.json" > "$tmp/cmp-r.txt" 2>&1 ||
    fail "compare of the report failed: $(cat "$tmp/cmp-r.txt")"
grep -q "sim report" "$tmp/cmp-r.txt" || fail "report side not named"
"$PLUMB" compare "$tmp/report.json" "$tmp/pred.json" > "$tmp/cmp-self.txt" 2>&1 ||
    fail "compare of the report with its trace failed"
grep -q "mean |error| of the per-stage F/B/I/W mean times: 0.0 %" "$tmp/cmp-self.txt" ||
    fail "the simulator's report and trace disagree: $(cat "$tmp/cmp-self.txt")"
awk '/^iteration / { if ($6 != "+0.0") exit 1; ok = 1 } END { exit !ok }' \
    "$tmp/cmp-self.txt" || fail "report and trace iteration times differ"
grep -q "mean |error| of the peak memory: 0.0 %" "$tmp/cmp-self.txt" ||
    fail "the simulator's report and trace disagree on memory: $(cat "$tmp/cmp-self.txt")"

echo "the planner's own plan, when the simulator and the executor run it"
if "$PLUMB" sim "$tmp/planner.json" --trace "$tmp/pred2.json" > "$tmp/sim2.log" 2>&1; then
    "$PLUMB" train "$model" "$tmp/planner.json" --steps 20 --trace "$tmp/meas2.json" \
        --quiet > "$tmp/train2.log" 2>&1 || fail "train of the planner's plan failed: $(cat "$tmp/train2.log")"
    "$PLUMB" compare "$tmp/pred2.json" "$tmp/meas2.json" > "$tmp/cmp2.txt" 2>&1 ||
        fail "compare of the planner's plan failed: $(cat "$tmp/cmp2.txt")"
    grep "^iteration " "$tmp/cmp2.txt" | sed 's/^/  /'
else
    echo "  note: plumb sim does not run the planner's plan: $(head -1 "$tmp/sim2.log")"
fi

echo "bad input: status 2, one line, nothing written"
d=$tmp fail=0
. "$(dirname "$0")/lib/expect.sh" # expect_bad NAME PATTERN CMD...: sets fail=1 on a miss
expect2() { # $1 name, then the command: expect_bad's checks, and no $tmp/out.json written
    local name=$1
    shift
    rm -f "$tmp/out.json"
    expect_bad "$name" '' "$@"
    [ ! -e "$tmp/out.json" ] || fail "$name: wrote $tmp/out.json"
}
echo '{"format": "plumb-model/1", "name": "x", "input": [4], "classes": 2, "layers": []}' \
    > "$tmp/badmodel.json"
expect2 "profile of a missing model" "$PLUMB" profile "$tmp/none.json" -o "$tmp/out.json"
expect2 "profile of a bad model" "$PLUMB" profile "$tmp/badmodel.json" -o "$tmp/out.json"
expect2 "profile --batch 0" "$PLUMB" profile "$model" --batch 0 -o "$tmp/out.json"
expect2 "profile --runs x" "$PLUMB" profile "$model" --runs x -o "$tmp/out.json"
expect2 "profile --backend tpu" "$PLUMB" profile "$model" --backend tpu -o "$tmp/out.json"
expect2 "profile, unknown option" "$PLUMB" profile "$model" --frobnicate -o "$tmp/out.json"
expect2 "profile into a missing folder" "$PLUMB" profile "$model" --runs 1 -o "$tmp/no/out.json"
rm -f "$tmp/out.json"
"$PLUMB" profile "$model" --backend cuda --runs 2 --quiet -o "$tmp/out.json" \
    > "$tmp/cuda.out" 2> "$tmp/cuda.err"
rc=$?
if [ "$rc" = 0 ]; then
    grep -q '"device":[[:space:]]*"cuda:0"' "$tmp/out.json" || fail "cuda profile device"
    echo "  a GPU is here: plumb profile --backend cuda measured it"
else
    [ "$rc" = 2 ] || fail "profile --backend cuda without a GPU: exit $rc, expected 2"
    [ ! -e "$tmp/out.json" ] || fail "profile --backend cuda wrote a file without a GPU"
    echo "  no GPU: $(head -1 "$tmp/cuda.err")"
fi
expect2 "compare of a missing file" "$PLUMB" compare "$tmp/none.json" "$tmp/meas.json"
expect2 "compare of a plan" "$PLUMB" compare "$tmp/plan.json" "$tmp/meas.json"
expect2 "compare of a profile" "$PLUMB" compare "$tmp/pred.json" "$tmp/p.json"
echo '{"traceEvents": [' > "$tmp/trunc.json"
expect2 "compare of a truncated trace" "$PLUMB" compare "$tmp/pred.json" "$tmp/trunc.json"
"$PLUMB" sim "$tmp/plan.json" --schedule gpipe > /dev/null 2>&1 || fail "sim --schedule gpipe"
cat > "$tmp/plan1.json" <<JSON
{"format": "plumb-plan/1", "profile": "p.json", "cluster": "$cluster",
 "schedule": "1f1b-flush", "microbatch_size": 32, "microbatches": 2,
 "stages": [{"first_layer": 0, "last_layer": 6, "replicas": 1, "devices": [0]}]}
JSON
"$PLUMB" sim "$tmp/plan1.json" --trace "$tmp/pred1.json" > /dev/null 2>&1 || fail "sim of plan1"
expect2 "compare of different plans" "$PLUMB" compare "$tmp/pred1.json" "$tmp/meas.json"
expect2 "compare with one file" "$PLUMB" compare "$tmp/pred.json"
[ "$fail" = 0 ] || fail "see the FAIL lines above"
echo "loop.sh: ok"
