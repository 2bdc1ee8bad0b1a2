#!/usr/bin/env bash
# run-tests.sh: runs each Criterion suite given as an argument, then every end-to-end
# script tests/e2e/*.sh with PLUMB set to the built binary; exits non-zero on any failure.
set -u
build=${PLUMB_BUILD:-build}
export PLUMB="$PWD/$build/plumb"
fails=0
for t in "$@"; do
    echo "== $t"
    if ! "$t" --jobs "${PLUMB_TEST_JOBS:-2}"; then
        echo "FAILED: $t"
        fails=$((fails + 1))
    fi
done
# the end-to-end scripts in folder $1
run_scripts() {
    for s in "$1"/*.sh; do
        [ -e "$s" ] || continue
        echo "== $s"
        if ! bash "$s"; then
            echo "FAILED: $s"
            fails=$((fails + 1))
        fi
    done
}
run_scripts tests/e2e
if [ "${PLUMB_LONG:-0}" = 1 ]; then # make test-long: the slow end-to-end checks too
    run_scripts tests/e2e/long
fi
if [ "$fails" -ne 0 ]; then
    echo "plumb tests: $fails suite(s) failed"
    exit 1
fi
echo "plumb tests: all suites passed"
