#!/usr/bin/env bash
# memory.sh: the simulator's memory model predicts what the executor allocates (docs/sim.md,
# "Memory model"). For a CNN and a transformer profiled on the CPU, and plans covering every
# schedule family (flushing, weight stashing, zero-bubble split backward, interleaved and
# V-shaped chunks (zb-v, dualpipev), a replicated stage), with and without recompute, plumb
# sim's predicted peak memory of every device must be within 0.1 % of what plumb train's
# CPU backend allocated at most (the backend rounds each buffer up to 64 bytes). Allocation does not
# depend on timing, so this holds on a loaded machine too.
set -u
PLUMB=${PLUMB:-./plumb}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "memory.sh: FAIL: $*" >&2; exit 1; }
models=$PWD/examples/models
cluster=$PWD/examples/clusters/cpu-1x2.json

"$PLUMB" profile "$models/gpt-mini.json" --batch 4 --runs 1 --warmup 0 --quiet \
    -o "$tmp/gpt.json" > "$tmp/log" 2>&1 || fail "profile gpt-mini: $(cat "$tmp/log")"
"$PLUMB" profile "$models/fmnist-cnn.json" --batch 8 --runs 1 --warmup 0 --quiet \
    -o "$tmp/cnn.json" > "$tmp/log" 2>&1 || fail "profile fmnist-cnn: $(cat "$tmp/log")"
grep -q '"saved_bytes"' "$tmp/gpt.json" || fail "gpt-mini's profile lacks saved_bytes"
grep -q '"workspace_bytes"' "$tmp/cnn.json" || fail "fmnist-cnn's profile lacks workspace_bytes"

st() { printf '{"first_layer": %d, "last_layer": %d, "replicas": 1, "devices": [%d]}' "$@"; }
G2="[$(st 0 5 0), $(st 6 11 1)]"
G4V="[$(st 0 2 0), $(st 3 5 1), $(st 6 8 1), $(st 9 11 0)]"
G4I="[$(st 0 2 0), $(st 3 5 1), $(st 6 8 0), $(st 9 11 1)]"
GR='[{"first_layer": 0, "last_layer": 11, "replicas": 2, "devices": [0, 1]}]'
C2="[$(st 0 3 0), $(st 4 10 1)]"
C4V="[$(st 0 2 0), $(st 3 5 1), $(st 6 8 1), $(st 9 10 0)]"

# check NAME MODEL PROFILE SCHEDULE CHUNKS RECOMPUTE OPTIMIZER STAGES MICROBATCH COUNT
check() {
    local data=""
    [ "$2" = fmnist-cnn ] && data="--data synthetic"
    cat > "$tmp/plan.json" <<JSON
{"format": "plumb-plan/1", "profile": "$3", "cluster": "$cluster", "schedule": "$4",
 "chunks": $5, "recompute": $6, "optimizer": "$7", "microbatch_size": $9,
 "microbatches": ${10}, "stages": $8}
JSON
    "$PLUMB" sim "$tmp/plan.json" --trace "$tmp/pred.json" > "$tmp/log" 2>&1 ||
        fail "$1: plumb sim: $(cat "$tmp/log")"
    "$PLUMB" train "$models/$2.json" "$tmp/plan.json" --steps 2 --batch $(($9 * ${10})) \
        $data --samples 128 --trace "$tmp/meas.json" > "$tmp/log" 2>&1 || fail "$1: plumb train: $(tail -1 "$tmp/log")"
    "$PLUMB" compare "$tmp/pred.json" "$tmp/meas.json" > "$tmp/cmp.txt" 2>&1 ||
        fail "$1: plumb compare: $(cat "$tmp/cmp.txt")"
    "$PLUMB" compare "$tmp/pred.json" "$tmp/meas.json" --json > "$tmp/cmp.json" 2>&1
    local rows err
    rows=$(grep -c '"predicted_bytes"' "$tmp/cmp.json")
    [ "$rows" -ge 1 ] || fail "$1: compare set no memory rows: $(cat "$tmp/cmp.txt")"
    err=$(grep -o '"memory_mean_abs_error":[^,}]*' "$tmp/cmp.json" | awk '{print $NF}')
    awk -v e="$err" 'BEGIN { exit !(e != "" && e < 0.001) }' ||
        fail "$1: peak memory off by $err on average: $(sed -n '/^peak memory/,$p' "$tmp/cmp.txt")"
    # no single device may be off either
    grep -o '"measured_bytes":[^,]*,[[:space:]]*"error":[^,}]*' "$tmp/cmp.json" |
        awk '{ v = $NF; if (v > 0.001 || v < -0.001) bad = 1 } END { exit bad }' ||
        fail "$1: a device's prediction is off: $(sed -n '/^peak memory/,$p' "$tmp/cmp.txt")"
    echo "ok $1 ($rows device rows, mean |error| $err)"
}

for rc in false true; do
    check "gpt-mini 1f1b rc=$rc" gpt-mini "$tmp/gpt.json" 1f1b-flush 1 $rc adam "$G2" 4 4
    check "gpt-mini gpipe rc=$rc" gpt-mini "$tmp/gpt.json" gpipe 1 $rc sgd "$G2" 4 4
    check "gpt-mini zb-h1 rc=$rc" gpt-mini "$tmp/gpt.json" zb-h1 1 $rc adam "$G2" 4 4
    check "gpt-mini 2bw rc=$rc" gpt-mini "$tmp/gpt.json" 2bw 1 $rc momentum "$G2" 4 4
    check "gpt-mini zb-v rc=$rc" gpt-mini "$tmp/gpt.json" zb-v 2 $rc adam "$G4V" 4 4
    check "fmnist-cnn pipedream rc=$rc" fmnist-cnn "$tmp/cnn.json" pipedream 1 $rc momentum "$C2" 8 4
done
check "gpt-mini interleaved" gpt-mini "$tmp/gpt.json" interleaved 2 false adam "$G4I" 4 4
check "gpt-mini replicated" gpt-mini "$tmp/gpt.json" 1f1b-flush 1 false adam "$GR" 4 4
check "fmnist-cnn zb-v" fmnist-cnn "$tmp/cnn.json" zb-v 2 false sgd "$C4V" 8 4
check "gpt-mini dualpipev" gpt-mini "$tmp/gpt.json" dualpipev 2 false adam "$G4V" 4 4
check "fmnist-cnn dualpipev rc" fmnist-cnn "$tmp/cnn.json" dualpipev 2 true sgd "$C4V" 8 4
echo "memory.sh: all passed"
