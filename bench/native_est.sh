#!/usr/bin/env bash
# native_est.sh: the native planner's estimate against the simulator on every shipped
# profile x shipped cluster (whole clusters, default options): one row per pair with the
# replica counts, `estimated_samples_per_s`, the simulated `samples_per_s` and the
# estimate's error, then how many of the simulated plans the estimate meets within 3 % and
# within 5 %, and the CPU seconds of the 120 plans. With BASE naming another plumb, each
# row also shows that build's plan and the count of plans that changed. RUNTIME names the
# runtime every plan carries (`plumb plan -p --p2p / --grad-sync`): overlap (the default),
# sync (--p2p sync), end (--grad-sync end) or sync-end (both). SCHEDULE names the
# schedule every plan asks for (`plumb plan -p --schedule`; default: none, the planner's
# own), e.g. interleaved, zb-v or dualpipev for the chunked kinds.
# Usage: [PLUMB=build/plumb] [BASE=/path/to/old/plumb] [RUNTIME=overlap|sync|end|sync-end]
#        [SCHEDULE=KIND] bash bench/native_est.sh
# Exits 1 when a plan fails or is not simulated (with SCHEDULE, a pair with no plan is
# listed as such).
set -u
P=${PLUMB:-build/plumb}
[ -x "$P" ] || { echo "native_est.sh: $P not built (make)"; exit 1; }
[ -z "${BASE:-}" ] || [ -x "$BASE" ] || { echo "native_est.sh: BASE $BASE is not executable"; exit 1; }
case ${RUNTIME:-overlap} in
overlap) rt=() ;;
sync) rt=(--p2p sync) ;;
end) rt=(--grad-sync end) ;;
sync-end) rt=(--p2p sync --grad-sync end) ;;
*) echo "native_est.sh: RUNTIME: expected overlap, sync, end or sync-end (got $RUNTIME)"; exit 1 ;;
esac
[ -z "${SCHEDULE:-}" ] || rt+=(--schedule "$SCHEDULE")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rc=0
# row BIN PROFILE CLUSTER: "replicas estimate simulated cpu_s" of one plan, "NONE" when
# plumb plan finds none (nothing fits), or "FAIL" when its plan is not simulated
row() {
    local e
    /usr/bin/time -o "$tmp/t" -f '%U %S' "$1" plan -p "$2" -c "$3" ${rt[@]+"${rt[@]}"} --json >"$tmp/o.json" 2>/dev/null
    if ! [ -s "$tmp/o.json" ]; then echo NONE; return; fi
    if ! jq -e '.simulated == true' "$tmp/o.json" >/dev/null 2>&1; then echo FAIL; return; fi
    e=$(tail -1 "$tmp/t" | awk '{ print $1 + $2 }')
    jq -r --arg cpu "$e" '"\(.replicas) \(.estimated_samples_per_s) \(.samples_per_s) \($cpu)"' "$tmp/o.json"
}
printf '%-20s %-22s %-28s %12s %12s %8s' profile cluster replicas estimate simulated error
[ -n "${BASE:-}" ] && printf '  %-28s %8s' base:replicas error
printf '\n'
for p in profiles/pipedream/*.json; do
    for c in profiles/clusters/*.json; do
        pn=$(basename "$p" .json) cn=$(basename "$c" .json)
        r=$(row "$P" "$p" "$c")
        if [ "$r" = FAIL ]; then echo "$pn $cn: FAIL (no simulated plan)"; rc=1; continue; fi
        # a schedule asked for may fit nowhere (the chunked kinds do not replicate)
        if [ "$r" = NONE ]; then echo "$pn $cn: no plan"; [ -n "${SCHEDULE:-}" ] || rc=1; continue; fi
        set -- $r
        line=$(awk -v pn="$pn" -v cn="$cn" -v r="$1" -v e="$2" -v s="$3" \
            'BEGIN { printf "%-20s %-22s %-28s %12.0f %12.0f %+7.1f%%", pn, cn, r, e, s, 100 * (e / s - 1) }')
        echo "$1 $2 $3 $4" >>"$tmp/new"
        if [ -n "${BASE:-}" ]; then
            b=$(row "$BASE" "$p" "$c")
            if [ "$b" = FAIL ] || [ "$b" = NONE ]; then line="$line  base: $b"
            else
                set -- $b
                line="$line$(awk -v r="$1" -v e="$2" -v s="$3" 'BEGIN { printf "  %-28s %+7.1f%%", r, 100 * (e / s - 1) }')"
                echo "$1 $2 $3 $4" >>"$tmp/base"
            fi
        fi
        echo "$line"
    done
done
sum() {
    awk -v who="$2" '{ n++; x = ($2 / $3 - 1) * 100; if (x < 0) x = -x; if (x <= 3) a++; if (x <= 5) b++; cpu += $4 }
        END { printf "%s: %d plans simulated; estimate within 3 %%: %d, within 5 %%: %d; %.2f s CPU\n", who, n, a, b, cpu }' "$1"
}
sum "$tmp/new" "$P"
[ -n "${BASE:-}" ] && [ -s "$tmp/base" ] && sum "$tmp/base" "$BASE"
exit $rc
