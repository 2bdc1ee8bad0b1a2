#!/usr/bin/env bash
# fuzz-seeds.sh: prints the seed files of one fuzz target, one per line: the shipped JSON
# files whose top-level "format" is plumb-TARGET/1 (profiles/, examples/, tests/fuzz/seeds/)
# and the target's own seeds tests/fuzz/seeds/TARGET-* (graph.txt files, traces,
# checkpoints, past findings). Used by scripts/fuzz.sh and tests/e2e/fuzz-replay.sh.
# Usage: scripts/fuzz-seeds.sh TARGET [MAX_BYTES]   (files over MAX_BYTES are left out)
set -u
cd "$(dirname "$0")/.." || exit 2
[ $# -ge 1 ] || { echo "usage: scripts/fuzz-seeds.sh TARGET [MAX_BYTES]" >&2; exit 2; }
t=$1
max=${2:-65536}
fmt="plumb-$t/1"
{
    find tests/fuzz/seeds -maxdepth 1 -type f -name "$t-*" ! -name '*.json' | sort
    grep -rlF --include='*.json' "\"$fmt\"" profiles examples tests/fuzz/seeds 2>/dev/null |
        sort | while read -r f; do
            # a plan embeds a profile and a cluster: keep only files whose top-level format is ours
            if head -c 200 "$f" | tr -d ' \n\t\r' | grep -qF "{\"format\":\"$fmt\""; then echo "$f"; fi
        done
} | while read -r f; do
    [ "$(stat -c %s "$f")" -le "$max" ] && echo "$f"
done
exit 0
