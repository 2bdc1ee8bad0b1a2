#!/usr/bin/env bash
# fuzz-replay.sh: every fuzz target (tests/fuzz/fuzz_*.c), built without libFuzzer by
# `make test` ($build/fuzz/replay_*), runs over its seeds and past findings
# (scripts/fuzz-seeds.sh): each must pass every check of the target, in time. Under
# `make test SAN=1` the replays run with AddressSanitizer and UBSan as well.
set -u
P=${PLUMB:-./build/plumb}
dir=$(dirname "$P")/fuzz
fail=0
total=0
for src in tests/fuzz/fuzz_*.c; do
    t=$(basename "$src" .c)
    t=${t#fuzz_}
    bin=$dir/replay_$t
    if [ ! -x "$bin" ]; then
        echo "FAIL $t: $bin not built (make test builds it)"
        fail=1
        continue
    fi
    mapfile -t seeds < <(scripts/fuzz-seeds.sh "$t")
    if [ ${#seeds[@]} -eq 0 ]; then
        echo "FAIL $t: no seed files (scripts/fuzz-seeds.sh $t)"
        fail=1
        continue
    fi
    # one input at a time, so that a finding names its file
    for f in "${seeds[@]}"; do
        if ! timeout 60 "$bin" "$f" >/dev/null 2>"${TMPDIR:-/tmp}/replay.$$"; then
            echo "FAIL $t: $f: $(grep -m1 -E 'ERROR|runtime error|Abort|abort' "${TMPDIR:-/tmp}/replay.$$" || echo 'aborted or timed out')"
            fail=1
        fi
        total=$((total + 1))
    done
    echo "  $t: ${#seeds[@]} inputs"
done
rm -f "${TMPDIR:-/tmp}/replay.$$"
[ $fail = 0 ] && echo "fuzz replay: $total inputs passed every target's checks"
exit $fail
