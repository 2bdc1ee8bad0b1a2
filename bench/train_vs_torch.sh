#!/usr/bin/env bash
# train_vs_torch.sh: plumb's CPU training speed against PyTorch's on the same networks
# (fmnist-cnn, gpt-mini; batch 64, SGD) at 1 and 2 threads. Runs are interleaved (plumb,
# PyTorch, optionally a baseline plumb binary, in turn) and repeated REPS times; prints each
# figure's median and the ratios plumb / PyTorch (and plumb / baseline), with the load
# average, since a loaded machine shifts every figure. PyTorch's side is skipped with a note
# when bench/torch_ref.py cannot import torch.
# Env: PLUMB (binary, default build/plumb), PLUMB_BASE (a baseline plumb binary, optional),
# TORCH_PY (python with torch, default python3), REPS (default 3), STEPS (default 20).
set -u
PLUMB=${PLUMB:-build/plumb}
BASE=${PLUMB_BASE:-}
PY=${TORCH_PY:-python3}
REPS=${REPS:-3}
STEPS=${STEPS:-20}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

have_torch=1
"$PY" -c "import torch" > /dev/null 2>&1 || {
    have_torch=0
    echo "note: $PY cannot import torch: PyTorch's side skipped"
}

plumb_run() { # binary model threads -> samples/s (the training loop's, without the test pass)
    local data=synthetic
    [ "$2" = gpt-mini ] && data=text # generated text: token ids, as PyTorch's side
    OPENBLAS_NUM_THREADS=$3 "$1" train "examples/models/$2.json" --data $data \
        --samples 2048 --steps "$STEPS" --quiet 2>&1 |
        sed -n 's/^final:.*, \([0-9.]*\) samples\/s$/\1/p'
}

median() { sort -g | awk '{v[NR] = $1} END {if (NR) print v[int((NR + 1) / 2)]; else print 0}'; }

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for model in fmnist-cnn gpt-mini; do
    for th in 1 2; do
        for r in $(seq "$REPS"); do
            plumb_run "$PLUMB" "$model" "$th" >> "$tmp/p.$model.$th"
            [ $have_torch = 1 ] && "$PY" "$here/torch_ref.py" "$model" --threads "$th" \
                --steps "$STEPS" | sed -n 's/.*samples\/s=\([0-9.]*\).*/\1/p' >> "$tmp/t.$model.$th"
            [ -n "$BASE" ] && plumb_run "$BASE" "$model" "$th" >> "$tmp/b.$model.$th"
            : "$r"
        done
        p=$(median < "$tmp/p.$model.$th")
        line=$(printf "%-10s %d thread(s): plumb %7.1f samples/s" "$model" "$th" "$p")
        if [ $have_torch = 1 ]; then
            t=$(median < "$tmp/t.$model.$th")
            line="$line, PyTorch $(printf %7.1f "$t"), plumb/PyTorch $(awk -v a="$p" -v b="$t" 'BEGIN{printf "%.2fx", (b > 0) ? a / b : 0}')"
        fi
        if [ -n "$BASE" ]; then
            b=$(median < "$tmp/b.$model.$th")
            line="$line, baseline $(printf %7.1f "$b"), plumb/baseline $(awk -v a="$p" -v b="$b" 'BEGIN{printf "%.2fx", (b > 0) ? a / b : 0}')"
        fi
        echo "$line (median of $REPS)"
    done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
