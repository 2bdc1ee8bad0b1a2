# shellcheck shell=bash disable=SC2034,SC2154 # d and fail are the sourcing script's
# expect.sh: helpers the end-to-end scripts source (not a test itself: run-tests.sh runs only
# tests/e2e/*.sh). The script sets $d (its scratch folder) and fail=0 first.

# expect_bad NAME PATTERN CMD...: CMD must exit 2 with exactly one line on stderr, starting
# "plumb: " and matching PATTERN (grep), and nothing on stdout (no partial output);
# otherwise prints FAIL lines and sets fail=1.
expect_bad() {
    local name=$1 pat=$2; shift 2
    "$@" >"$d/out" 2>"$d/err"
    local rc=$?
    if [ $rc != 2 ]; then echo "FAIL $name: exit $rc, expected 2"; fail=1; fi
    if [ "$(wc -l <"$d/err")" != 1 ]; then echo "FAIL $name: expected one error line:"; cat "$d/err"; fail=1; fi
    if ! grep -q '^plumb: ' "$d/err"; then echo "FAIL $name: not 'plumb: ...':"; cat "$d/err"; fail=1; fi
    if ! grep -q -- "$pat" "$d/err"; then echo "FAIL $name: message lacks '$pat':"; cat "$d/err"; fail=1; fi
    if [ -s "$d/out" ]; then echo "FAIL $name: wrote output before failing:"; cat "$d/out"; fail=1; fi
}

# expect_bad_silent NAME PATTERN FILE CMD...: expect_bad, and CMD printed nothing on stdout
# and did not write FILE (removed if it did).
expect_bad_silent() {
    local name=$1 pat=$2 file=$3; shift 3
    expect_bad "$name" "$pat" "$@"
    [ -s "$d/out" ] && { echo "FAIL $name: printed output:"; head -3 "$d/out"; fail=1; }
    [ -e "$file" ] && { echo "FAIL $name: wrote its output"; rm -f "$file"; fail=1; }
}

# ok NAME CMD...: CMD must exit 0; its output in $d/out, its errors in $d/err.
ok() {
    local name=$1; shift
    if ! "$@" >"$d/out" 2>"$d/err"; then echo "FAIL $name:"; cat "$d/err"; fail=1; fi
}

# has NAME PATTERN: $d/out matches the extended regular expression.
has() {
    grep -Eq -- "$2" "$d/out" || { echo "FAIL $1: no '$2' in:"; head -40 "$d/out"; fail=1; }
}
