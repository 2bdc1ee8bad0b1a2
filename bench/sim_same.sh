#!/usr/bin/env bash
# sim_same.sh: the simulator's and planner's outputs of two builds, byte for byte: `plumb
# sim` text, --json, --trace and --svg of the shipped plans under every schedule (and with
# what-ifs), of synthetic plans of every kind up to 64 stages x 1024 microbatches
# (bench_sim_scale plan), with replicas; `plumb schedule --csv --steps` of every kind;
# `plumb plan` of two profiles. For a change meant to keep every output: run it with
# BASE naming the plumb of the build before (e.g. from `git archive` of the base commit,
# built in a scratch folder) and NEW (default build/plumb) this one. Prints each output
# that differs and a count; exits 1 when any differs or BASE is not executable, 0 with a
# skip line when BASE is not given (as `make bench` runs it).
# Usage: BASE=/path/to/old/plumb [NEW=build/plumb] [BENCH=build/bench/bench_sim_scale]
#        [SIM_SAME_BIG=0] bash bench/sim_same.sh
set -u
NEW=${NEW:-build/plumb}
B=${BENCH:-build/bench/bench_sim_scale}
# `make bench` runs every bench/*.sh: without BASE there is nothing to compare against
[ -n "${BASE:-}" ] || { echo "sim_same.sh: skipped (BASE, the old plumb, not given)"; exit 0; }
[ -x "$BASE" ] || { echo "sim_same.sh: BASE $BASE is not an executable plumb"; exit 1; }
[ -x "$NEW" ] || { echo "sim_same.sh: $NEW not built (make)"; exit 1; }
[ -x "$B" ] || { echo "sim_same.sh: $B not built (make bench)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
kinds="gpipe 1f1b-flush pipedream 2bw interleaved zb-h1 zb-v dualpipev"
n=0 bad=0 label=
# same ARGS...: runs plumb ARGS with each build (a "@T" argument is a trace path of the
# run's own, "@S" an SVG path) and compares stdout, stderr, the exit status, the trace and
# the SVG.
same() {
    local side out
    for side in old new; do
        local bin=$BASE args=()
        [ $side = new ] && bin=$NEW
        for a in "$@"; do
            case $a in
            @T) args+=("$tmp/$side.trace") ;;
            @S) args+=("$tmp/$side.svg") ;;
            *) args+=("$a") ;;
            esac
        done
        rm -f "$tmp/$side.trace" "$tmp/$side.svg"
        OPENBLAS_NUM_THREADS=1 "$bin" "${args[@]}" >"$tmp/$side.out" 2>"$tmp/$side.err"
        echo "exit $?" >>"$tmp/$side.out"
        # the stderr and the paths may name the run's own files; the planner's own wall
        # time (plan_ms, "planned in") is not an output of the model
        sed -i -e "s|$tmp/$side|TMP|g" -e '/"plan_ms"/d' -e 's/planned in [0-9.]* ms//' \
            "$tmp/$side.out" "$tmp/$side.err"
        [ -f "$tmp/$side.trace" ] && sed -i "s|$tmp/$side|TMP|g" "$tmp/$side.trace"
    done
    n=$((n + 1))
    local differs=0
    cmp -s "$tmp/old.out" "$tmp/new.out" || differs=1
    cmp -s "$tmp/old.err" "$tmp/new.err" || differs=1
    local f
    for f in trace svg; do
        if [ -f "$tmp/old.$f" ] || [ -f "$tmp/new.$f" ]; then
            cmp -s "$tmp/old.$f" "$tmp/new.$f" || differs=1
        fi
    done
    if [ $differs = 1 ]; then
        bad=$((bad + 1))
        echo "DIFFERS: plumb $*${label:+ ($label)}"
        diff "$tmp/old.out" "$tmp/new.out" | head -5
    fi
}
for p in examples/plans/*.json; do
    same sim "$p"
    same sim "$p" --json
    same sim "$p" --trace @T --svg @S --bandwidth 0=10
    for k in $kinds; do
        for mb in 4 12 16; do
            same sim "$p" --schedule "$k" --microbatches "$mb" --json
        done
        same sim "$p" --schedule "$k" --microbatches 8 --iterations 5
        same sim "$p" --schedule "$k" --microbatches 8 --straggler 1=2 --trace @T --svg @S
        same sim "$p" --schedule "$k" --memory-limit 1 --json
    done
done
# synthetic plans: every kind, a deep pipeline, replicas, and the benchmark's size
shapes="4:1:8 8:1:64 16:2:32 2:8:64 8:1:333"
[ "${SIM_SAME_BIG:-1}" = 1 ] && shapes+=" 64:1:1024"
for k in $kinds; do
    for sh in $shapes; do
        IFS=: read -r st r mb <<<"$sh"
        label="$k $sh"
        "$B" plan "$k" "$st" "$r" "$mb" "$tmp/p.json" 2>/dev/null || continue
        same sim "$tmp/p.json" --json --iterations 4
        if [ "$mb" -le 64 ]; then
            same sim "$tmp/p.json" --trace @T --svg @S --iterations 3
        else
            same sim "$tmp/p.json" --svg @S --iterations 2
        fi
        [ "$mb" -le 64 ] && same schedule --plan "$tmp/p.json" --csv --steps --iterations 2
    done
done
label=
for k in $kinds; do
    for st in 1 3 8; do
        for mb in 1 5 17; do
            same schedule --kind "$k" --stages "$st" --microbatches "$mb" --iterations 2 \
                --csv --steps
        done
    done
done
# the planner ranks candidates with the simulator
same plan -p profiles/pipedream/resnet50.json -c profiles/clusters/h200-4x8.json --json
same plan -p profiles/pipedream/vgg16.json -c profiles/clusters/cluster-a-4x4.json --json
same plan -p profiles/pipedream/gnmt.json -c profiles/clusters/dgx-h100.json --json
same sweep -p profiles/pipedream/resnet50.json -c profiles/clusters/h200-4x8.json --gpus 1..16
echo "sim_same.sh: $n outputs compared, $bad differ"
[ $bad = 0 ]
