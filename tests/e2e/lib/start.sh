# shellcheck shell=bash disable=SC2034 # P and fail are the sourcing script's
# start.sh: the start every end-to-end script that sources it shares (not a test itself:
# run-tests.sh runs only tests/e2e/*.sh). Sets -u, P (the binary: $PLUMB, else ./plumb),
# E2E_LIB (this folder, exported for a script's Python helpers), d (a scratch folder, removed
# when the script exits) and fail=0 (the script's exit status; helpers set it to 1).
set -u
P=${PLUMB:-./plumb}
E2E_LIB=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export E2E_LIB
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fail=0
