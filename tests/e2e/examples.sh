#!/usr/bin/env bash
# examples.sh: every shipped plan (examples/plans/*.json, the dashboard's default among them)
# simulates and fits its devices; a plan that does not fit is flagged the way README says:
# bad input, exit 2, one line on stderr naming the stage and device, the report still
# printed with the devices marked, and no --trace/--svg file written. A what-if that does
# not fit is an answer (flagged, exit 0).
set -u
PLUMB=${PLUMB:-./build/plumb}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

n=0
for f in examples/plans/*.json; do
    n=$((n + 1))
    "$PLUMB" sim "$f" > "$tmp/out" 2> "$tmp/err"
    rc=$?
    [ "$rc" -eq 0 ] || fail "$f: exit $rc: $(cat "$tmp/err")"
    grep -q "(every device fits)" "$tmp/out" || fail "$f: does not fit: $(grep 'peak memory' "$tmp/out")"
    grep -q "^devices  *[0-9]* of [0-9]* used" "$tmp/out" || fail "$f: no devices line"
done
[ "$n" -ge 4 ] || fail "expected the shipped example plans, found $n"

# a plan that does not fit: the dashboard's example at PipeDream's 64-sample microbatches
sed -e 's/"microbatch_size": 32/"microbatch_size": 64/' \
    -e "s#\\.\\./\\.\\./profiles#$PWD/profiles#g" examples/plans/vgg16-hybrid-pipedream.json \
    > "$tmp/big.json"
grep -q '"microbatch_size": 64' "$tmp/big.json" || fail "could not build the plan that does not fit"
"$PLUMB" sim "$tmp/big.json" --svg "$tmp/t.svg" --trace "$tmp/t.json" > "$tmp/out" 2> "$tmp/err"
rc=$?
[ "$rc" -eq 2 ] || fail "plan that does not fit: exit $rc (expected 2)"
[ "$(wc -l < "$tmp/err")" -eq 1 ] || fail "does not fit: expected one line on stderr: $(cat "$tmp/err")"
grep -q "^plumb: $tmp/big.json: stages\[0\]: expected to fit the memory of its devices (got 15.49 GiB on device 0" "$tmp/err" ||
    fail "does not fit: message: $(cat "$tmp/err")"
grep -q "DOES NOT FIT" "$tmp/out" || fail "does not fit: the report does not flag it"
[ -e "$tmp/t.svg" ] || [ -e "$tmp/t.json" ] && fail "does not fit: a trace or SVG was written"
"$PLUMB" sim "$tmp/big.json" --json > "$tmp/out" 2> /dev/null
[ $? -eq 2 ] || fail "does not fit (--json): exit status"
grep -q '"fits":[[:space:]]*false' "$tmp/out" || fail "does not fit (--json): no fits: false"

# a what-if that does not fit is an answer, not bad input
"$PLUMB" sim examples/plans/vgg16-hybrid-pipedream.json --memory-limit 4 > "$tmp/out" 2> "$tmp/err" ||
    fail "what-if that does not fit: exit $?"
grep -q "DOES NOT FIT" "$tmp/out" || fail "what-if in 4 GiB: not flagged"
# a what-if cannot hide that the plan as written does not fit
"$PLUMB" sim "$tmp/big.json" --microbatches 30 > /dev/null 2>&1
[ $? -eq 2 ] || fail "plan that does not fit, with a what-if: exit status"

if [ "$fails" -ne 0 ]; then
    echo "examples.sh: $fails failure(s)"
    exit 1
fi
echo "examples.sh: ok"
