#!/usr/bin/env bash
# fuzz.sh: builds the libFuzzer targets of plumb's file loaders (profile, cluster, plan) with
# AddressSanitizer and UBSan, straight from the core sources, into build-fuzz/; seeds each
# corpus from the files plumb ships; runs each target for FUZZ_SECONDS (default 60) seconds;
# prints executions and findings per target. Exits 1 when any target found a crash, leak,
# undefined behaviour or round-trip mismatch (the input is kept in build-fuzz/findings/).
# Usage: scripts/fuzz.sh [target ...]   (targets: profile cluster plan schedule_csv model
#        pipedream trace checkpoint plan_sim transformer pplayout; default all)
# Environment: FUZZ_SECONDS, FUZZ_CC (default clang), FUZZ_MAX_LEN (default 65536 bytes).
set -u
cd "$(dirname "$0")/.." || exit 2

secs=${FUZZ_SECONDS:-60}
cc=${FUZZ_CC:-clang}
max_len=${FUZZ_MAX_LEN:-65536}
out=build-fuzz
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(profile cluster plan schedule_csv model pipedream trace checkpoint plan_sim transformer pplayout)

if ! command -v "$cc" >/dev/null 2>&1; then
    echo "plumb: fuzz: $cc not found; install clang (apt-get install clang)" >&2
    exit 2
fi

core_srcs=(core/*.c) # every core source: the loaders reach the schedule code through core/plan.c
# the sources each target needs beyond core_srcs
declare -A extra_srcs=(
    [model]="exec/model.c exec/checkpoint.c"
    [checkpoint]="exec/model.c exec/checkpoint.c"
    [trace]="sim/compare.c sim/compare_id.c sim/compare_mem.c"
    [transformer]="planner/llm_profile.c"
    [plan_sim]="$(echo planner/*.c sim/*.c ui/*.c)")
declare -A extra_libs=([plan_sim]="-lncursesw -lpthread" [model]="-lz" [checkpoint]="-lz")
cflags=(-std=c11 -g -O1 -fno-omit-frame-pointer -D_POSIX_C_SOURCE=200809L -I. -Icore
        -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined)

mkdir -p "$out/findings"
status=0
summary=()
for t in "${targets[@]}"; do
    src=tests/fuzz/fuzz_$t.c
    if [ ! -f "$src" ]; then
        echo "plumb: fuzz: unknown target '$t' (expected profile, cluster, plan, schedule_csv, model, pipedream, trace, checkpoint, plan_sim, transformer or pplayout)" >&2
        exit 2
    fi
    bin=$out/fuzz_$t
    echo "== building $bin"
    if ! "$cc" "${cflags[@]}" -o "$bin" "$src" "${core_srcs[@]}" ${extra_srcs[$t]:-} -lcjson -lm ${extra_libs[$t]:-}; then
        echo "plumb: fuzz: build of $t failed" >&2
        exit 1
    fi
    corpus=$out/corpus/$t
    seeds=$out/seeds/$t
    rm -rf "$seeds"
    mkdir -p "$corpus" "$seeds"
    nseed=0
    while read -r f; do
        [ -n "$f" ] || continue
        cp "$f" "$seeds/$(echo "$f" | tr '/' '_')"
        nseed=$((nseed + 1))
    done < <(scripts/fuzz-seeds.sh "$t" "$max_len")
    log=$out/fuzz_$t.log
    echo "== fuzzing $t for $secs s ($nseed seed files, corpus $corpus)"
    before=$(find "$out/findings" -name "$t-*" | wc -l)
    ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        "$bin" -max_total_time="$secs" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 \
        -dict=tests/fuzz/plumb.dict -print_final_stats=1 \
        -artifact_prefix="$out/findings/$t-" "$corpus" "$seeds" >"$log" 2>&1
    rc=$?
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
    [ -n "$execs" ] || execs=$(grep -o 'Done [0-9]* runs' "$log" | grep -o '[0-9]*' | tail -1)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*')
    after=$(find "$out/findings" -name "$t-*" | wc -l)
    findings=$((after - before))
    if [ "$rc" -ne 0 ] && [ "$findings" -eq 0 ]; then findings=1; fi
    if [ "$findings" -ne 0 ]; then
        status=1
        echo "plumb: fuzz: $t: FINDING (exit $rc); see $log and $out/findings/$t-*"
        grep -m3 -E 'ERROR|runtime error|SUMMARY' "$log"
    fi
    summary+=("$(printf '%-12s %10s executions in %s s  coverage %6s edges  corpus %5s files  findings %d' \
        "$t" "${execs:-?}" "$secs" "${cov:-?}" "$(find "$corpus" -type f | wc -l)" "$findings")")
done
echo "== plumb fuzz summary"
printf '%s\n' "${summary[@]}"
exit $status
