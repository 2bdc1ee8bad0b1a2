#!/usr/bin/env bash
# plan-diff.sh OLD_PLUMB NEW_PLUMB [OUTDIR]: `plumb plan --json` of two builds on every
# shipped profile x shipped cluster (the DGX files with --gpus 32) under each schedule kind
# and under --memory-limit 2, then the runs whose plan changed (schedule, microbatches,
# microbatch size, recomputation, stages, devices) and those whose figures alone changed.
# plan_ms is left out (it is a timing). Exit 0; the listing is for reading.
set -u
old=$1 new=$2 out=${3:-$(mktemp -d)}
mkdir -p "$out/old" "$out/new"
for p in profiles/pipedream/*.json; do
    for c in profiles/clusters/*.json; do
        cn=$(basename "$c" .json) gpus=()
        case $cn in dgx-*) gpus=(--gpus 32) ;; esac
        for s in 1f1b-flush gpipe pipedream 2bw interleaved zb-h1 zb-v dualpipev lim2; do
            opt=(--schedule "$s")
            [ "$s" = lim2 ] && opt=(--memory-limit 2)
            f=$(basename "$p" .json)__${cn}__$s.json
            for side in old new; do
                bin=$old
                [ $side = new ] && bin=$new
                "$bin" plan -p "$p" -c "$c" "${gpus[@]}" "${opt[@]}" --json 2>&1 |
                    grep -v plan_ms >"$out/$side/$f"
            done
        done
    done
done
python3 - "$out/old" "$out/new" <<'PY'
import glob, json, os, sys
a, b = sys.argv[1], sys.argv[2]
def load(f):
    t = open(f).read()
    try:
        return json.loads(t)
    except ValueError:
        return {'_text': t.strip()}
def key(j):
    if '_text' in j:
        return ('text', j['_text'])
    return (j.get('schedule'), j.get('microbatches'), j.get('microbatch_size'),
            j.get('recompute'), j.get('chunks'), j.get('replicas'),
            tuple((s.get('first_layer'), s.get('last_layer'), tuple(s.get('devices', [])))
                  for s in j.get('stages', [])))
same = figs = changed = 0
for f in sorted(glob.glob(a + '/*.json')):
    n = os.path.basename(f)
    x, y = load(f), load(os.path.join(b, n))
    if x == y:
        same += 1
    elif key(x) != key(y):
        changed += 1
        def d(j):
            if '_text' in j:
                return j['_text'][:60]
            return '%s mb%s x%s rc%s %s %.1f samples/s peak %.2f GiB' % (
                j['schedule'], j['microbatch_size'], j['microbatches'], j['recompute'],
                j['replicas'], j['samples_per_s'], j['peak_memory_bytes'] / 2**30)
        print('plan   %s: %s -> %s' % (n[:-5], d(x), d(y)))
    else:
        figs += 1
        print('figure %s: %s' % (n[:-5], ', '.join(
            '%s %s -> %s' % (k, x.get(k), y.get(k)) for k in x if k != 'stages' and x.get(k) != y.get(k))))
print('%d runs: %d identical, %d figures only, %d plans changed' % (same + figs + changed, same, figs, changed))
PY
