#!/usr/bin/env bash
# trace.sh: what the Chrome trace writer costs on a large trace (gnmt planned on 4096
# H100s: 368,640 events, 124 MiB since the planner's plan of 4 x 1024 replicas; 1.3 M
# events and 473 MiB before), written and only counted (bench_trace.c); fails when the
# writer's count differs from the text it writes. Then the peak memory of `plumb sim
# --trace` against the same simulation without it, measured in this run (/usr/bin/time):
# the trace is streamed into its file, so it must add far less than its text;
# fails when it adds more than 64 MiB (it held the whole text before: +506 MB). Then the same
# with --svg too: the SVG is streamed into its file as well (its over-dense boxes merged per
# pixel), so it must add next to nothing to the traced run; fails over 16 MiB (it was built
# in memory before: +59 MiB for its 45 MB).
set -eu
: "${PLUMB:=build/plumb}" "${PLUMB_BENCH_DIR:=build/bench}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PLUMB" plan -p profiles/pipedream/gnmt.json -c profiles/clusters/dgx-h100.json \
    -o "$tmp/gnmt4096.json" >/dev/null
"$PLUMB_BENCH_DIR/bench_trace" "$tmp/gnmt4096.json" "${TRACE_REPEATS:-3}"
command -v /usr/bin/time >/dev/null \
    || { echo "trace.sh: peak memory skipped (no /usr/bin/time)"; exit 0; }
g=$tmp/gnmt4096.json
/usr/bin/time -f %M -o "$tmp/rss0" "$PLUMB" sim "$g" >/dev/null
/usr/bin/time -f %M -o "$tmp/rss1" "$PLUMB" sim "$g" --trace "$tmp/t.json" >/dev/null
r0=$(tail -1 "$tmp/rss0") r1=$(tail -1 "$tmp/rss1")
add=$(( (r1 - r0) / 1024 ))
echo "plumb sim peak resident: $((r0 / 1024)) MiB without the trace, $((r1 / 1024)) MiB with" \
    "it ($(stat -c %s "$tmp/t.json") bytes written): +$add MiB"
[ "$add" -le 64 ] \
    || { echo "trace.sh: FAIL: the trace adds $add MiB (over 64: held in memory?)"; exit 1; }
/usr/bin/time -f %M -o "$tmp/rss2" "$PLUMB" sim "$g" --trace "$tmp/t.json" --svg "$tmp/t.svg" \
    >/dev/null
r2=$(tail -1 "$tmp/rss2")
sadd=$(( (r2 - r1) / 1024 ))
echo "plumb sim peak resident with --svg too: $((r2 / 1024)) MiB ($(stat -c %s "$tmp/t.svg")" \
    "bytes of SVG written): +$sadd MiB"
[ "$sadd" -le 16 ] \
    || { echo "trace.sh: FAIL: the SVG adds $sadd MiB (over 16: held in memory?)"; exit 1; }
