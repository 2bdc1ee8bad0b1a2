# shellcheck shell=bash disable=SC2034 # P and fail are the sourcing script's
# start.sh: the start every end-to-end script that sources it shares (not a test itself:
# run-tests.sh runs only tests/e2e/*.sh). Sets -u, P (the binary: $PLUMB, else ./plumb),
# d (a scratch folder, removed when the script exits) and fail=0 (the script's exit status;
# helpers set it to 1).
set -u
P=${PLUMB:-./plumb}
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fail=0
