#!/usr/bin/env bash
# train_vs_torch.sh: plumb's CPU training speed against PyTorch's on the same networks
# (fmnist-cnn, gpt-mini; batch 64, SGD) at 1 and 2 threads. Runs are interleaved (plumb,
# PyTorch, optionally a baseline plumb binary, in turn) and repeated REPS times; prints each
# figure's median and the ratios plumb / PyTorch (and plumb / baseline), by wall clock
# (samples/s) and by CPU time per step, with the load average, since a loaded machine
# shifts every figure (CPU time less so at 1 thread). plumb's figures are steady-state
# steps, as PyTorch's (which skips 3 warm-up steps): the difference between a run of
# WARM + STEPS steps and one of WARM steps, so start-up, the first steps and the test pass
# cancel. PyTorch's side is skipped with a note when bench/torch_ref.py cannot import torch.
# Env: PLUMB (binary, default build/plumb), PLUMB_BASE (a baseline plumb binary, optional),
# TORCH_PY (python with torch, default python3), REPS (default 3), STEPS (default 20),
# WARM (default 3), MODELS (default "fmnist-cnn gpt-mini"), THREADS (default "1 2").
set -u
PLUMB=${PLUMB:-build/plumb}
BASE=${PLUMB_BASE:-}
PY=${TORCH_PY:-python3}
REPS=${REPS:-3}
STEPS=${STEPS:-20}
WARM=${WARM:-3}
MODELS=${MODELS:-fmnist-cnn gpt-mini}
THREADS=${THREADS:-1 2}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

have_torch=1
"$PY" -c "import torch" > /dev/null 2>&1 || {
    have_torch=0
    echo "note: $PY cannot import torch: PyTorch's side skipped"
}

plumb_steps() { # binary model threads steps -> "wall_s cpu_s" of the whole run
    local data=synthetic
    [ "$2" = gpt-mini ] && data=text # generated text: token ids, as PyTorch's side
    OPENBLAS_NUM_THREADS=$3 /usr/bin/time -f "%e %U %S" -o "$tmp/time" "$1" train \
        "examples/models/$2.json" --data $data --samples 2048 --steps "$4" --quiet \
        > /dev/null 2>&1
    awk '{print $1, $2 + $3}' "$tmp/time"
}

plumb_run() { # binary model threads -> "samples/s cpu_ms/step" of STEPS steady steps
    local a b
    a=$(plumb_steps "$1" "$2" "$3" "$WARM")
    b=$(plumb_steps "$1" "$2" "$3" $((WARM + STEPS)))
    echo "$a $b" | awk -v s="$STEPS" '{w = $3 - $1; c = $4 - $2;
        printf "%.1f %.2f\n", (w > 0) ? s * 64 / w : 0, 1e3 * c / s}'
}

median() { # column -> median of that column
    awk -v k="$1" '{print $k}' | sort -g |
        awk '{v[NR] = $1} END {if (NR) print v[int((NR + 1) / 2)]; else print 0}'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2fx", (b > 0) ? a / b : 0}'; }

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for model in $MODELS; do
    for th in $THREADS; do
        for r in $(seq "$REPS"); do
            plumb_run "$PLUMB" "$model" "$th" >> "$tmp/p.$model.$th"
            [ $have_torch = 1 ] && "$PY" "$here/torch_ref.py" "$model" --threads "$th" \
                --steps "$STEPS" --warmup "$WARM" |
                sed -n 's/.*samples\/s=\([0-9.]*\) cpu_ms\/step=\([0-9.]*\).*/\1 \2/p' \
                    >> "$tmp/t.$model.$th"
            [ -n "$BASE" ] && plumb_run "$BASE" "$model" "$th" >> "$tmp/b.$model.$th"
            : "$r"
        done
        p=$(median 1 < "$tmp/p.$model.$th")
        pc=$(median 2 < "$tmp/p.$model.$th")
        line=$(printf "%-10s %d thread(s): plumb %7.1f samples/s %7.2f cpu ms/step" "$model" \
            "$th" "$p" "$pc")
        if [ $have_torch = 1 ]; then
            t=$(median 1 < "$tmp/t.$model.$th")
            tc=$(median 2 < "$tmp/t.$model.$th")
            line="$line | PyTorch $(printf "%7.1f samples/s %7.2f cpu ms/step" "$t" "$tc")"
            line="$line | plumb/PyTorch $(ratio "$p" "$t") by wall, $(ratio "$tc" "$pc") by cpu"
        fi
        if [ -n "$BASE" ]; then
            b=$(median 1 < "$tmp/b.$model.$th")
            bc=$(median 2 < "$tmp/b.$model.$th")
            line="$line | baseline $(printf "%7.1f samples/s %7.2f cpu ms/step" "$b" "$bc")"
            line="$line | plumb/baseline $(ratio "$p" "$b") by wall, $(ratio "$bc" "$pc") by cpu"
        fi
        echo "$line (median of $REPS; load $(cut -d' ' -f1 /proc/loadavg))"
    done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
