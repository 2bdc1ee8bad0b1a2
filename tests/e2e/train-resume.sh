#!/usr/bin/env bash
# train-resume.sh: nothing lost. A run checkpointing every N steps is killed by SIGKILL
# mid-way (PLUMB_FAULT=...:kill), restarted with --resume DIR, and ends with the same
# weights, byte for byte, as an uninterrupted run: a 2-stage PipeDream pipeline (momentum),
# sequential Adam, and 1F1B-flush resumed without further checkpoints (synchronous
# schedules give the same weights however the run is cut). A worker thread that fails
# stops the whole run with its error, quickly; one that goes silent makes its peers time
# out (no hang).
set -u
PLUMB=${PLUMB:-./plumb}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "train-resume.sh: FAIL: $*" >&2; exit 1; }
export OPENBLAS_NUM_THREADS=1
model=examples/models/fmnist-mlp.json

# $1 label, $2 worker killed, $3 at step, $4 checkpoint every, rest: plumb train arguments
killed_and_resumed() {
    local label=$1 wk=$2 at=$3 every=$4; shift 4
    rm -rf "$tmp/ck" "$tmp/ref-ck" "$tmp/res.ck"
    "$PLUMB" train "$model" "$@" --quiet --checkpoint "$tmp/ref-ck" --checkpoint-every "$every" \
        --save "$tmp/ref.ck" > "$tmp/ref.out" 2>&1 || fail "$label: uninterrupted run failed: $(cat "$tmp/ref.out")"
    exec 3>&2 2> /dev/null # no "Killed" notice from this shell
    PLUMB_FAULT=worker:$wk:step:$at:kill "$PLUMB" train "$model" "$@" --quiet \
        --checkpoint "$tmp/ck" --checkpoint-every "$every" --save "$tmp/res.ck" \
        > "$tmp/kill.out" 2>&1
    local rc=$?
    exec 2>&3 3>&-
    [ $rc -eq 137 ] || fail "$label: expected death by SIGKILL (137), got $rc: $(cat "$tmp/kill.out")"
    [ ! -e "$tmp/res.ck" ] || fail "$label: the killed run wrote its final checkpoint"
    local last=$(( (at - 1) / every * every ))
    [ -s "$tmp/ck/$(printf 'ckpt-%08d.ckpt' "$last")" ] ||
        fail "$label: no checkpoint of step $last after the kill: $(ls "$tmp/ck")"
    [ "$(ls "$tmp/ck" | grep -vc '^ckpt-[0-9]*\.ckpt$')" -eq 0 ] ||
        fail "$label: stray files in the checkpoint folder: $(ls -a "$tmp/ck")"
    "$PLUMB" train "$model" "$@" --checkpoint "$tmp/ck" --checkpoint-every "$every" \
        --resume "$tmp/ck" --save "$tmp/res.ck" > "$tmp/res.out" 2>&1 ||
        fail "$label: resumed run failed: $(cat "$tmp/res.out")"
    grep -q "resumed from $tmp/ck/.*at step $last" "$tmp/res.out" || fail "$label: no resume line: $(cat "$tmp/res.out")"
    cmp -s "$tmp/ref.ck" "$tmp/res.ck" || fail "$label: resumed weights differ from the uninterrupted run's"
    echo "  $label: worker $wk killed at step $at, resumed from step $last: identical weights"
}
echo "killed by SIGKILL, resumed: the same weights as an uninterrupted run"
killed_and_resumed "pipedream, 2 stages, momentum" 1 13 5 --steps 20 --microbatches 4 \
    --schedule pipedream --stages 2 --optimizer momentum
killed_and_resumed "2bw, 2 stages, adam" 0 9 4 --steps 12 --microbatches 4 \
    --schedule 2bw --stages 2 --optimizer adam
killed_and_resumed "sequential, adam" 0 11 4 --steps 16 --optimizer adam

echo "resumed at the end (--steps equal to the checkpoint's): nothing trained, no train loss"
"$PLUMB" train "$model" --steps 4 --quiet --checkpoint "$tmp/end" --checkpoint-every 4 \
    > "$tmp/end.out" 2>&1 || fail "checkpointed run failed: $(cat "$tmp/end.out")"
"$PLUMB" train "$model" --steps 4 --quiet --resume "$tmp/end" > "$tmp/end.out" 2>&1 ||
    fail "resumed at the end: $(cat "$tmp/end.out")"
grep -q '^final: no step trained (the checkpoint had all 4), test loss' "$tmp/end.out" ||
    fail "resumed at the end: expected the no-step final line: $(cat "$tmp/end.out")"
echo "  --steps 4 resumed from step 4: final line says no step trained"

echo "a corrupt newest checkpoint is reported; a dead writer's temporary file is removed"
"$PLUMB" train "$model" --steps 8 --quiet --checkpoint "$tmp/cc" --checkpoint-every 4 \
    > "$tmp/cc.out" 2>&1 || fail "checkpointed run failed: $(cat "$tmp/cc.out")"
printf '\x55' | dd of="$tmp/cc/ckpt-00000008.ckpt" bs=1 seek=100 conv=notrunc status=none
"$PLUMB" train "$model" --steps 12 --quiet --resume "$tmp/cc" > "$tmp/cc.out" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "corrupt newest checkpoint: exit $rc, expected 2: $(cat "$tmp/cc.out")"
[ "$(wc -l < "$tmp/cc.out")" -eq 1 ] && grep -q "ckpt-00000008.ckpt: weights checksum: expected" "$tmp/cc.out" &&
    grep -q "the newest intact one is ckpt-00000004.ckpt" "$tmp/cc.out" ||
    fail "corrupt newest checkpoint: not the one expected line: $(cat "$tmp/cc.out")"
dead=$(sh -c 'echo $$')
: > "$tmp/cc/ckpt-00000012.ckpt.tmp.$dead"
"$PLUMB" train "$model" --steps 12 --quiet --resume "$tmp/cc/ckpt-00000004.ckpt" \
    --checkpoint "$tmp/cc" --checkpoint-every 4 > "$tmp/cc.out" 2>&1 ||
    fail "resume from the intact checkpoint failed: $(cat "$tmp/cc.out")"
[ ! -e "$tmp/cc/ckpt-00000012.ckpt.tmp.$dead" ] || fail "the dead writer's temporary file is left"
echo "  reported (exit 2, one line naming the intact one); orphan removed"

echo "1f1b-flush: a checkpoint of step 6 resumed without more checkpoints equals one whole run"
"$PLUMB" train "$model" --steps 12 --microbatches 4 --schedule 1f1b-flush --stages 3 --quiet \
    --save "$tmp/whole.ck" > /dev/null 2>&1 || fail "whole 1f1b run failed"
"$PLUMB" train "$model" --steps 6 --microbatches 4 --schedule 1f1b-flush --stages 3 --quiet \
    --save "$tmp/half.ck" > /dev/null 2>&1 || fail "first half failed"
"$PLUMB" train "$model" --steps 12 --microbatches 4 --schedule 1f1b-flush --stages 3 --quiet \
    --resume "$tmp/half.ck" --save "$tmp/rest.ck" > "$tmp/rest.out" 2>&1 || fail "second half failed: $(cat "$tmp/rest.out")"
cmp -s "$tmp/whole.ck" "$tmp/rest.ck" || fail "1f1b-flush: 6 + 6 steps differ from 12"
echo "  identical"

echo "a failing worker thread stops the run with its error (local transport)"
t0=$(date +%s)
PLUMB_FAULT=worker:1:step:3 timeout 60 "$PLUMB" train "$model" --steps 10 --microbatches 4 \
    --schedule 1f1b-flush --stages 3 --quiet > "$tmp/f.out" 2> "$tmp/f.err"
rc=$?
[ $rc -eq 1 ] || fail "fault: exit $rc (want 1): $(cat "$tmp/f.err")"
[ "$(wc -l < "$tmp/f.err")" -eq 1 ] && grep -q "worker 1: injected fault at step 3" "$tmp/f.err" ||
    fail "fault: expected one line naming worker 1: $(cat "$tmp/f.err")"
echo "  $(cat "$tmp/f.err") (after $(( $(date +%s) - t0 )) s)"

echo "a silent worker: its peers time out (--timeout 2) and the run ends (local transport)"
t0=$(date +%s)
PLUMB_FAULT=worker:1:step:3:stall timeout 60 "$PLUMB" train "$model" --steps 10 --microbatches 4 \
    --schedule 1f1b-flush --stages 3 --quiet --timeout 2 > "$tmp/s.out" 2> "$tmp/s.err"
rc=$?
[ $rc -eq 1 ] || fail "stall: exit $rc (want 1): $(cat "$tmp/s.err")"
grep -q "waited 2 s for message .* from worker 1: deadlock or a stalled peer" "$tmp/s.err" ||
    fail "stall: expected a timeout naming worker 1: $(cat "$tmp/s.err")"
echo "  $(cat "$tmp/s.err") (after $(( $(date +%s) - t0 )) s)"
echo "train-resume.sh: all passed"
