# shellcheck shell=bash
# plan_model.sh: the start that llm3d.sh and search3d.sh share, scripts that lay out GPT-3
# 175B on the DGX A100 file with `plumb plan --model` (not a test itself: run-tests.sh runs
# only tests/e2e/*.sh). Sourcing it runs start.sh (P, d, fail=0) and expect.sh (expect_bad,
# expect_bad_silent, ok, has), sets A100 and GPT3 and defines bad.
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
