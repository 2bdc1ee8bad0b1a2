# shellcheck shell=bash disable=SC2034 # fail is the sourcing script's
# published.sh: what the end-to-end scripts that hold plumb against published runs share
# (megatron_h100.sh, nemo_perf.sh, megatron.sh, megatron_memory.sh and megatron_a100.sh source
# it; not a test itself: run-tests.sh runs only tests/e2e/*.sh). Sourcing it runs start.sh (P,
# the scratch folder d, fail=0), sets n=0 (the rows planned) and puts this folder first on
# PYTHONPATH, with PYTHONDONTWRITEBYTECODE, so that the scripts' Python imports published.py
# and writes nothing beside it. Each script keeps its own table, columns, flags and limits;
# these helpers profile the model files, build and run the `plumb plan` command of a row
# and say why one failed.
# shellcheck source=start.sh
. "$(dirname "${BASH_SOURCE[0]}")/start.sh"
PYTHONPATH=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)${PYTHONPATH:+:$PYTHONPATH}
export PYTHONPATH PYTHONDONTWRITEBYTECODE=1
n=0

# plan_has PATTERN: true when `plumb plan --model`'s help matches PATTERN (grep), the test of
# whether the binary has the options a table needs.
plan_has() {
    { "$P" plan --model x --help 2>&1; } | grep -q -- "$1"
}

# needs NAME PATTERN WHAT: ends the script with exit 0 and one line "NAME: skip: plumb plan
# has no WHAT yet" when plan's help lacks PATTERN, or "NAME: skip: python3 is needed to read
# the JSON reports" without python3.
needs() {
    if ! plan_has "$2"; then
        echo "$1: skip: plumb plan has no $3 yet"
        exit 0
    fi
    if ! command -v python3 >/dev/null; then
        echo "$1: skip: python3 is needed to read the JSON reports"
        exit 0
    fi
}

# profile_models path|name CLUSTER DIR NAME...: `plumb profile --model DIR/NAME.json -c
# CLUSTER` of each model file into $d/BASENAME.prof (its first line holds the parameter
# count the script's Python checks); one that fails prints "FAIL profile WHO:" and its
# errors, WHO being DIR/NAME.json (path) or NAME (name), and sets fail=1. Returns 1 when
# one failed (its .prof is removed), 0 otherwise.
profile_models() {
    local how=$1 cluster=$2 dir=$3 name who prof rc=0
    shift 3
    for name in "$@"; do
        who=$name
        [ "$how" = path ] && who=$dir/$name.json
        prof=$d/$(basename "$name").prof
        if ! "$P" profile --model "$dir/$name.json" -c "$cluster" >"$prof" 2>"$d/err"; then
            echo "FAIL profile $who:"
            cat "$d/err"
            rm -f "$prof"
            fail=1
            rc=1
        fi
    done
    return $rc
}

# model_names DIR: the names of DIR's model files (*.json without the suffix), sorted.
model_names() {
    local f
    for f in "$1"/*.json; do basename "$f" .json; done
}

# plan_args MODEL CLUSTER GPUS TP PP DP GLOBAL_BATCH MICROBATCH RECOMPUTE: sets the array args
# to `plan --model MODEL -c CLUSTER --gpus ... --recompute RECOMPUTE`, the layout every table
# gives; the script appends its own flags, then layout_extras.
plan_args() {
    args=(plan --model "$1" -c "$2" --gpus "$3" --tp "$4" --pp "$5" --dp "$6"
        --global-batch "$7" --microbatch-size "$8" --recompute "$9")
}

# layout_extras INTERLEAVE SEQUENCE_PARALLEL: appends --interleave INTERLEAVE unless it is 1
# and --sequence-parallel when SEQUENCE_PARALLEL is 1 to args.
layout_extras() {
    [ "$1" != 1 ] && args+=(--interleave "$1")
    [ "$2" = 1 ] && args+=(--sequence-parallel)
    return 0
}

# plan_row: the table's next row (n, counted from 1, its number among the rows planned:
# n=n+1): runs "$P" "${args[@]}" with the report in $d/N.json and the errors in $d/N.err;
# records the exit status in $d/N.rc, the command in $d/N.cmd and, when it succeeds, the
# wall time in nanoseconds in $d/N.wall. Returns the command's exit status.
plan_row() {
    local t0 rc
    n=$((n + 1))
    t0=$(date +%s%N)
    "$P" "${args[@]}" >"$d/$n.json" 2>"$d/$n.err"
    rc=$?
    [ $rc = 0 ] && echo $(($(date +%s%N) - t0)) >"$d/$n.wall"
    echo $rc >"$d/$n.rc"
    echo "$P ${args[*]}" >"$d/$n.cmd"
    return $rc
}

# plan_row_or_fail RUN: plan_row; when the plan fails prints "FAIL RUN: COMMAND" and the
# first three lines of its errors, removes $d/N.json (the reader then reports the row as
# not predicted) and sets fail=1.
plan_row_or_fail() {
    plan_row && return 0
    echo "FAIL $1: $(cat "$d/$n.cmd")"
    head -3 "$d/$n.err"
    rm -f "$d/$n.json"
    fail=1
}
