#!/usr/bin/env bash
# core-badinput.sh: bad files given to the real binary: one line naming the file and the
# field, exit status 2, and no output file left behind.
set -u
P=${PLUMB:-./plumb}
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fail=0
. "$(dirname "$0")/lib/expect.sh" # expect_bad NAME PATTERN CMD...
printf '{"format": "plumb-cluster/1", "name": "x",' > "$d/trunc.json"
expect_bad truncated "trunc.json: malformed JSON at line 1" "$P" info "$d/trunc.json"
printf '{"format": "plumb-cluster/2"}' > "$d/ver.json"
expect_bad version 'format' "$P" info "$d/ver.json"
sed 's/"count": 4/"count": -4/' profiles/clusters/cluster-a-4x4.json > "$d/neg.json"
expect_bad negative-count 'levels\[0\].count' "$P" info "$d/neg.json"
sed 's/"forward_ms":[[:space:]]*[0-9.e+-]*/"forward_ms": "fast"/' profiles/pipedream/alexnet.json > "$d/type.json"
expect_bad wrong-type 'forward_ms: expected a number' "$P" info "$d/type.json"
expect_bad missing-file 'cannot open' "$P" info "$d/nope.json"
# import: a malformed graph leaves no output behind
printf 'node1 -- Input -- forward_compute_time=oops\n' > "$d/graph.txt"
expect_bad import-malformed 'graph.txt' "$P" import pipedream "$d/graph.txt" -o "$d/out.json"
if ls "$d" | grep -q '^out.json'; then echo "FAIL import left a partial file"; fail=1; fi
[ $fail = 0 ] && echo "core-badinput: ok"
exit $fail
