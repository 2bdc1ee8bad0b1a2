# shellcheck shell=bash
# plan_model.sh: the start that llm3d.sh, search3d.sh, gemma.sh and moe.sh share, scripts
# that lay models out with `plumb plan --model` (not a test itself: run-tests.sh runs only
# tests/e2e/*.sh). Sourcing it runs start.sh (P, d, fail=0) and expect.sh (expect_bad,
# expect_bad_silent, ok, has), sets A100 and GPT3 (GPT-3 175B on the DGX A100 file) and
# defines bad and sim_same.
# shellcheck source=start.sh
. "$(dirname "${BASH_SOURCE[0]}")/start.sh"
# shellcheck source=expect.sh
. "$(dirname "${BASH_SOURCE[0]}")/expect.sh"
A100=profiles/clusters/dgx-a100-80g.json
GPT3=examples/llm/gpt3-175b.json

# bad NAME PATTERN ARGS...: `$P plan --model $GPT3 -c $A100 ARGS -o $d/bad.json` exits 2
# with one line, prints nothing and writes nothing; otherwise FAIL lines and fail=1.
bad() {
    local name=$1 pat=$2; shift 2
    expect_bad_silent "$name" "$pat" "$d/bad.json" \
        "$P" plan --model "$GPT3" -c "$A100" "$@" -o "$d/bad.json"
}

# sim_same NAME PLAN ARGS...: `$P plan ARGS --json` and `$P sim PLAN --json` (PLAN written
# before by `$P plan ARGS -o PLAN`) report the same iteration_s; otherwise FAIL lines and
# fail=1. Leaves sim's output in $d/out.
sim_same() {
    local name=$1 planfile=$2 plan_it sim_it; shift 2
    ok "$name-plan" "$P" plan "$@" --json
    plan_it=$(grep -m1 '^	"iteration_s":' "$d/out")
    ok "$name-sim" "$P" sim "$planfile" --json
    sim_it=$(grep -m1 '^	"iteration_s":' "$d/out")
    if [ -z "$sim_it" ] || [ "$sim_it" != "$plan_it" ]; then
        echo "FAIL $name: plumb sim on the written plan ($sim_it) differs from plan ($plan_it)"
        fail=1
    fi
}
