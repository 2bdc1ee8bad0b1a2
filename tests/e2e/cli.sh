#!/usr/bin/env bash
# cli.sh: the plumb binary's own manners: --help and --version, every subcommand's --help,
# one error line and exit 2 for unknown commands and options.
set -u
P=${PLUMB:-./plumb}
fail=0
d=$(mktemp -d) # this run's own files: parallel runs do not share them
trap 'rm -rf "$d"' EXIT
check() { # check NAME EXPECTED_RC CMD...
    local name=$1 want=$2; shift 2
    "$@" >"$d/out" 2>"$d/err"
    local rc=$?
    if [ "$rc" != "$want" ]; then
        echo "FAIL $name: exit $rc, expected $want"; cat "$d/err"; fail=1
    fi
}
check help 0 "$P" --help
grep -q "usage: plumb COMMAND" "$d/out" || { echo "FAIL help text"; fail=1; }
check version 0 "$P" --version
grep -Eq '^plumb [0-9]+\.[0-9]+\.[0-9]+$' "$d/out" || { echo "FAIL version text"; fail=1; }
check no-args 2 "$P"
check unknown-cmd 2 "$P" frobnicate
[ "$(wc -l <"$d/err")" = 1 ] || { echo "FAIL unknown command: not one line"; fail=1; }
grep -q 'unknown command "frobnicate"' "$d/err" || { echo "FAIL unknown command text"; fail=1; }
# the help command answers its own --help, and "help CMD" ignores a repeated --help
for h in "help --help" "help -h" "help help" "--help --help" "-h help"; do
    check "$h" 0 "$P" $h
    grep -q "usage: plumb COMMAND" "$d/out" || { echo "FAIL $h: not the usage"; fail=1; }
done
check "help nosuch" 2 "$P" help nosuch
[ "$(wc -l <"$d/err")" = 1 ] || { echo "FAIL help nosuch: not one line"; fail=1; }
grep -q 'unknown command "nosuch"' "$d/err" || { echo "FAIL help nosuch text"; fail=1; }
check "help sim plan" 2 "$P" help sim plan
[ "$(wc -l <"$d/err")" = 1 ] || { echo "FAIL help sim plan: not one line"; fail=1; }
for c in $("$P" --help | awk '/^commands:/{f=1;next} f&&/^  [a-z]/{print $1}'); do
    check "$c --help" 0 "$P" "$c" --help
    [ -s "$d/out" ] || { echo "FAIL $c --help printed nothing"; fail=1; }
    cp "$d/out" "$d/cmdhelp"
    for h in "help $c" "help $c --help" "help $c -h"; do # the same text as CMD --help
        check "$h" 0 "$P" $h
        cmp -s "$d/out" "$d/cmdhelp" || { echo "FAIL $h: not the text of $c --help"; fail=1; }
    done
    check "$c --bogus" 2 "$P" "$c" --bogus-option
    [ "$(wc -l <"$d/err")" = 1 ] || { echo "FAIL $c --bogus: not one line"; cat "$d/err"; fail=1; }
done
# every long option a command takes (its getopt tables in cli/) is named by its help, the
# --model form's included: a help line missing an option is a stale help
for c in $("$P" --help | awk '/^commands:/{f=1;next} f&&/^  [a-z]/{print $1}'); do
    src=$(ls cli/cmd_"$c".c cli/cmd_"$c"_*.c 2>/dev/null)
    [ -n "$src" ] || { echo "FAIL $c: no cli/cmd_$c.c to read its options from"; fail=1; continue; }
    { "$P" "$c" --help; "$P" "$c" --model x --help; } >"$d/help" 2>&1
    for o in $(grep -ohE '\{ *"[a-z0-9-]+", *(no|required|optional)_argument' $src |
               sed -E 's/^\{ *"([^"]+)".*/\1/' | sort -u); do
        grep -q -- "--$o\b" "$d/help" || { echo "FAIL $c --help: no --$o"; fail=1; }
    done
done
# the usage lines point at "plumb CMD --model --help": --help where a value is due is the help
for c in plan sweep profile; do
    check "$c --model --help" 0 "$P" "$c" --model --help
    grep -q "usage: plumb $c --model" "$d/out" || { echo "FAIL $c --model --help: not its usage"; fail=1; }
done
check "plan --model X -c --help" 0 "$P" plan --model examples/llm/gpt2.json -c --help
grep -q "usage: plumb plan --model" "$d/out" || { echo "FAIL plan -c --help: not its usage"; fail=1; }
# under a ~1 GB address-space limit OpenBLAS's eager thread pool once made every command
# hang (a pool thread retried its buffer's mmap forever); plumb now starts no pool there
# unless a command trains or profiles
if [ "${PLUMB_SAN:-0}" = 1 ] || grep -qa __asan_init "$P" 2> /dev/null; then
    echo "cli.sh: address-space limit checks skipped: AddressSanitizer reserves terabytes of shadow"
else
    check "version under ulimit -v" 0 bash -c "ulimit -v 1000000 && unset OPENBLAS_NUM_THREADS \
        GOTO_NUM_THREADS OMP_NUM_THREADS && timeout 20 '$P' --version"
    grep -Eq '^plumb [0-9]+\.[0-9]+\.[0-9]+$' "$d/out" || { echo "FAIL version text under ulimit -v"; fail=1; }
    check "schedule under ulimit -v" 0 bash -c "ulimit -v 1000000 && unset OPENBLAS_NUM_THREADS \
        GOTO_NUM_THREADS OMP_NUM_THREADS && timeout 20 '$P' schedule --kind 1f1b-flush \
        --stages 2 --microbatches 2"
fi
[ $fail = 0 ] && echo "cli: ok"
exit $fail
