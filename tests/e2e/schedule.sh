#!/usr/bin/env bash
# schedule.sh: end-to-end test of `plumb schedule`: every kind generates and validates,
# the table reports in-flight activations and versions, the CSV is PyTorch's byte for byte
# and round-trips through --import, and bad options and files fail with one line, exit 2.
set -u
PLUMB=${PLUMB:-./plumb}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect_bad NEEDLE ARGS...: exit 2, nothing on stdout, one stderr line containing NEEDLE
expect_bad() {
    local needle=$1; shift
    "$PLUMB" schedule "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    [ "$rc" -eq 2 ] || fail "schedule $*: exit $rc, expected 2"
    [ -s "$tmp/out" ] && fail "schedule $*: wrote to stdout"
    [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "schedule $*: stderr is not one line: $(cat "$tmp/err")"
    grep -qF -- "$needle" "$tmp/err" || fail "schedule $*: stderr lacks '$needle': $(cat "$tmp/err")"
}

for k in gpipe 1f1b-flush pipedream 2bw interleaved zb-h1 zb-v dualpipev; do
    extra=""
    [ "$k" = interleaved ] && extra="--chunks 2"
    "$PLUMB" schedule --kind "$k" --stages 4 --microbatches 8 --iterations 2 $extra --validate \
        >"$tmp/t" 2>"$tmp/err" || fail "$k: exit $?: $(cat "$tmp/err")"
    grep -q '^valid: ' "$tmp/t" || fail "$k: no validation line"
    grep -q 'Rank 3' "$tmp/t" || fail "$k: no rank 3 column"
done

# 1F1B with flush: stage s of p holds p - s activations; pipedream p - s weight versions
"$PLUMB" schedule --kind 1f1b-flush --stages 4 --microbatches 8 >"$tmp/t" || fail "1f1b table"
grep -qE '^0 +0 +4 microbatches +1 version$' "$tmp/t" || fail "1f1b stage 0: $(tail -4 "$tmp/t")"
grep -qE '^3 +3 +1 microbatch +1 version$' "$tmp/t" || fail "1f1b stage 3: $(tail -4 "$tmp/t")"
"$PLUMB" schedule --kind pipedream --stages 4 --microbatches 8 >"$tmp/t" || fail "pipedream table"
grep -qE '^1 +1 +3 microbatches +3 versions$' "$tmp/t" || fail "pipedream stage 1: $(tail -4 "$tmp/t")"
grep -q '0F0/v0' "$tmp/t" || fail "pipedream table shows no versions"

# the CSV is PyTorch's: one row per rank, \r\n line ends; 2.15's waits by default
printf '0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\r\n1RECV_F0,1F0,1RECV_F1,1B0,1SEND_B0,1F1,1B1,1SEND_B1\r\n' >"$tmp/want.csv"
"$PLUMB" schedule --kind 1f1b-flush --stages 2 --microbatches 2 --csv --pytorch 2.11 \
    >"$tmp/got.csv" || fail "csv"
cmp -s "$tmp/want.csv" "$tmp/got.csv" || fail "1f1b csv bytes differ: $(cat -A "$tmp/got.csv")"
printf '0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0WAIT_SEND_F0,0RECV_B1,0B1,0WAIT_SEND_F1\r\n1RECV_F0,1F0,1RECV_F1,1B0,1SEND_B0,1F1,1B1,1SEND_B1,1WAIT_SEND_B0,1WAIT_SEND_B1\r\n' >"$tmp/want.csv"
"$PLUMB" schedule --kind 1f1b-flush --stages 2 --microbatches 2 --csv >"$tmp/got.csv" || fail "csv"
cmp -s "$tmp/want.csv" "$tmp/got.csv" || fail "1f1b 2.15 csv bytes differ: $(cat -A "$tmp/got.csv")"
expect_bad '--pytorch: expected 2.11 or 2.15 (got "2.12")' --kind gpipe --stages 2 \
    --microbatches 2 --csv --pytorch 2.12

# round trips through --import, in every form, replicated stages too
for form in "" "--steps" "--compute-only" "--pytorch 2.11" "--steps --pytorch 2.11"; do
    "$PLUMB" schedule --kind 1f1b-flush --stages 3 --replicas 1,2,1 --microbatches 4 \
        --iterations 2 --csv $form >"$tmp/a.csv" || fail "export $form"
    "$PLUMB" schedule --kind 1f1b-flush --stages 3 --replicas 1,2,1 --microbatches 4 \
        --import "$tmp/a.csv" --validate --csv $form >"$tmp/b.csv" 2>"$tmp/err" ||
        fail "import $form: $(cat "$tmp/err")"
    cmp -s "$tmp/a.csv" "$tmp/b.csv" || fail "round trip $form differs"
done
"$PLUMB" schedule --kind zb-v --stages 3 --microbatches 5 --csv >"$tmp/v.csv" || fail "zb-v csv"
"$PLUMB" schedule --kind zb-v --stages 3 --microbatches 5 --import "$tmp/v.csv" --validate \
    >"$tmp/t" 2>"$tmp/err" || fail "zb-v import: $(cat "$tmp/err")"
# DualPipeV through PyTorch's CSV and back, byte for byte, in every form
for form in "" "--steps" "--compute-only"; do
    "$PLUMB" schedule --kind dualpipev --stages 3 --microbatches 7 --iterations 2 --csv $form \
        >"$tmp/d.csv" || fail "dualpipev csv $form"
    "$PLUMB" schedule --kind dualpipev --stages 3 --microbatches 7 --import "$tmp/d.csv" \
        --validate --csv $form >"$tmp/d2.csv" 2>"$tmp/err" ||
        fail "dualpipev import $form: $(cat "$tmp/err")"
    cmp -s "$tmp/d.csv" "$tmp/d2.csv" || fail "dualpipev round trip $form differs"
done
grep -q '^0F0,' "$tmp/d.csv" || fail "dualpipev rank 0 does not start with 0F0"

# files PyTorch 2.11 and 2.15 wrote (tests/data/pytorch-csv/README.md) import and validate;
# a 2.15 file is written back in 2.15's form with its waits, a wait without its send is refused
for v in 2.11 2.15; do
    f=tests/data/pytorch-csv/$v/zbv-p2-m4.compute_comms.csv
    "$PLUMB" schedule --kind zb-v --stages 2 --microbatches 4 --import "$f" --validate \
        --buffered --csv --pytorch $v >"$tmp/pt.csv" 2>"$tmp/err" || fail "import $f: $(cat "$tmp/err")"
    n=$(tr ',' '\n' <"$f" | grep -c WAIT_SEND)
    [ "$(tr ',' '\n' <"$tmp/pt.csv" | grep -c WAIT_SEND)" -eq "$n" ] || fail "$v: waits written back differ"
done
printf '0F0,0WAIT_SEND_F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1,0WAIT_SEND_F1\n1RECV_F0,1F0,1RECV_F1,1B0,1SEND_B0,1F1,1B1,1SEND_B1,1WAIT_SEND_B0,1WAIT_SEND_B1\n' >"$tmp/w.csv"
expect_bad "w.csv: row 1, field 2: 0WAIT_SEND_F0 has no send before it on this rank" \
    --kind 1f1b-flush --stages 2 --microbatches 2 --import "$tmp/w.csv"

# a schedule that deadlocks when sends block: named cycle, exit 2
printf '0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1\n' >"$tmp/dl.csv"
expect_bad "deadlock: worker 0 waits at action 3 (0SEND_F1) for worker 1, worker 1 waits at action 3 (1SEND_B0) for worker 0" \
    --kind 1f1b-flush --stages 2 --microbatches 2 --import "$tmp/dl.csv" --validate
"$PLUMB" schedule --kind 1f1b-flush --stages 2 --microbatches 2 --import "$tmp/dl.csv" --validate \
    --buffered >"$tmp/t" 2>"$tmp/err" || fail "buffered validation of dl.csv: $(cat "$tmp/err")"
grep -q 'deadlock-free with buffered sends' "$tmp/t" || fail "buffered validation line"
printf '0F0,0F1,0Q0\n1F0\n' >"$tmp/bad.csv"
expect_bad "bad.csv: row 1, field 3: expected an action" \
    --kind 1f1b-flush --stages 2 --microbatches 2 --import "$tmp/bad.csv"
expect_bad "cannot open" --kind gpipe --stages 2 --microbatches 2 --import "$tmp/none.csv"

# bad options
expect_bad "--kind: expected gpipe" --kind nope --stages 2 --microbatches 2
expect_bad "--stages: expected an integer" --kind gpipe --stages 0 --microbatches 2
expect_bad "--microbatches is required" --kind gpipe --stages 2
expect_bad "--replicas: expected 3 comma-separated" --kind gpipe --stages 3 --microbatches 2 --replicas 1,2
expect_bad "zb-v needs exactly 2 chunks" --kind zb-v --stages 3 --microbatches 2 --chunks 3
expect_bad "dualpipev needs exactly 2 chunks" --kind dualpipev --stages 3 --microbatches 2 --chunks 1
expect_bad "2bw keeps 2 weight versions" --kind 2bw --stages 4 --microbatches 2
expect_bad "unknown option" --kind gpipe --stages 2 --microbatches 2 --frobnicate
expect_bad "--steps, --compute-only and --pytorch go with --csv" --kind gpipe --stages 2 --microbatches 2 --steps
expect_bad "--buffered goes with --validate" --kind gpipe --stages 2 --microbatches 2 --buffered
"$PLUMB" schedule --help | grep -q -- '--import FILE.csv' || fail "--help"

if [ "$fails" -ne 0 ]; then
    echo "schedule.sh: $fails failure(s)"
    exit 1
fi
echo "schedule.sh: all passed"
