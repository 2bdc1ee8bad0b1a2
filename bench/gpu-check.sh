#!/usr/bin/env bash
# gpu-check.sh: the one-shot check of plumb's CUDA backend on a GPU machine (made for one
# H200; done in under 8 minutes). It builds plumb for sm_90 in its own folder, then checks:
#   1. every layer, CUDA against CPU: fp32 with TF32 off (tolerance 1e-4), TF32 (1e-2) and
#      bf16 (3e-2) (tests/test_cuda.c says why), plus a 1-rank NCCL communicator doing a
#      grouped send/receive to itself and an all-reduce;
#   2. 20 training steps of fmnist-cnn with 1 stage and with 4 stages on one GPU (1F1B with a
#      flush, local transport) whose losses match the CPU backend's;
#   3. `plumb profile` of vgg16 at batch 64 on the GPU;
#   4. training throughput of vgg16 and gpt-mini (samples/s) in fp32 and bf16, and where
#      PyTorch is importable the same models timed in PyTorch with the same shapes and
#      precision, with the ratio plumb / PyTorch.
# Then it prints one table. Each step has a time limit; a failing or missing piece is one
# row saying why, never the end of the run.
#
# Offline machines: what the machine lacks of plumb's build needs (cJSON, OpenBLAS,
# Criterion, ncurses, zlib) comes from gpu-bundle/*.deb (made beforehand by
# scripts/gpu-bundle.sh), unpacked with dpkg -x (or ar + tar) into gpu-bundle/root; cuDNN
# and NCCL are taken from the CUDA toolkit or else from PyTorch's nvidia-* wheels.
#
# Usage: bash bench/gpu-check.sh
#   GPU_CHECK_FORCE=1 runs it even without a GPU (to try the script itself);
#   GPU_CHECK_BUDGET=seconds bounds the whole run (default 460).
# Results in $OUT/gpu-check/ (else out/gpu-check/): table.tsv (the final table),
#   layers.tsv, *.log, plumb.tsv, torch.tsv, vgg16-profile.json.
# Exit status 0 when every check that ran passed (or there is no GPU: nothing to check).
set -u
START=$(date +%s)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
RES=${OUT:-$ROOT/out}/gpu-check
mkdir -p "$RES"
: >"$RES/table.tsv"
: >"$RES/log.txt"
BUILD=${GPU_CHECK_BUILD:-build-gpu}
BUDGET=${GPU_CHECK_BUDGET:-460} # seconds for everything; later steps get what is left
JOBS=$(nproc 2>/dev/null || echo 8)
PLUMB="$ROOT/$BUILD/plumb"
FAILS=0

elapsed() { echo $(($(date +%s) - START)); }
say() { echo "[gpu-check $(elapsed) s] $*" | tee -a "$RES/log.txt"; }
# row CHECK RESULT DETAIL: one line of the final table (RESULT: PASS, FAIL, SKIP or a figure)
row() {
    printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$RES/table.tsv"
    say "$1: $2  $3"
    [ "$2" = FAIL ] && FAILS=$((FAILS + 1))
    return 0
}
# run_t SECONDS CMD...: runs CMD with at most SECONDS, less when the budget is nearly spent
run_t() {
    local t=$1 l
    shift
    l=$((BUDGET - $(elapsed)))
    [ "$l" -lt "$t" ] && t=$l
    if [ "$t" -lt 5 ]; then
        say "no time left for: $*"
        return 124
    fi
    timeout -k 5 "$t" "$@"
}
print_table() {
    echo
    echo "== plumb gpu-check: $(elapsed) s on ${GPU_NAME:-no GPU} =="
    awk -F'\t' 'BEGIN { printf "%-44s %-10s %s\n", "check", "result", "detail" }
                { printf "%-44s %-10s %s\n", $1, $2, $3 }' "$RES/table.tsv"
    echo "(results in $RES)"
}
trap print_table EXIT

# ------------------------------------------------------------------ 0. the GPU
GPU_NAME=""
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    GPU_NAME=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader |
        head -1)
    nvidia-smi >"$RES/nvidia-smi.txt" 2>&1
elif [ -e /dev/nvidia0 ]; then
    GPU_NAME="a GPU (/dev/nvidia0; nvidia-smi missing)"
elif [ -n "${GPU_CHECK_FORCE:-}" ]; then # a dry run of the script's logic without a GPU
    GPU_NAME="none (GPU_CHECK_FORCE dry run)"
else
    row "GPU" SKIP "no NVIDIA GPU (nvidia-smi -L failed, no /dev/nvidia0): nothing to check"
    exit 0
fi
row "GPU" "found" "$GPU_NAME"

# ------------------------------------------------------------------ 1. toolchain and deps
CUDA_HOME=${CUDA_HOME:-}
if [ -z "$CUDA_HOME" ]; then
    if [ -x /usr/local/cuda/bin/nvcc ]; then CUDA_HOME=/usr/local/cuda
    elif command -v nvcc >/dev/null 2>&1; then CUDA_HOME=$(dirname "$(dirname "$(command -v nvcc)")")
    fi
fi
if [ -z "$CUDA_HOME" ] || [ ! -x "$CUDA_HOME/bin/nvcc" ]; then
    row "build" FAIL "nvcc not found (set CUDA_HOME)"
    exit 1
fi
export CUDA_HOME PATH="$CUDA_HOME/bin:$PATH"
say "nvcc: $("$CUDA_HOME/bin/nvcc" --version | tail -2 | head -1)"

PREFIX="$ROOT/gpu-bundle/root"
ML=x86_64-linux-gnu
add_paths() { # the unpacked prefix joins the compiler's and the loader's search paths
    export CPATH="$PREFIX/usr/include:$PREFIX/usr/include/$ML:$PREFIX/usr/include/$ML/openblas-pthread${CPATH:+:$CPATH}"
    local libs="$PREFIX/usr/lib/$ML:$PREFIX/lib/$ML:$PREFIX/usr/lib/$ML/openblas-pthread"
    export LIBRARY_PATH="$libs${LIBRARY_PATH:+:$LIBRARY_PATH}"
    export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}
unpack_deb() { # dpkg -x, or ar + tar where dpkg is missing
    if command -v dpkg >/dev/null 2>&1; then
        dpkg -x "$1" "$PREFIX"
    else
        local t
        t=$(mktemp -d)
        (cd "$t" && ar x "$1") && tar -xf "$t"/data.tar.* -C "$PREFIX"
        rm -rf "$t"
    fi
}
# have_lib HEADER LIB: the header compiles and -lLIB links
have_lib() {
    printf '#include <%s>\nint main(void){return 0;}\n' "$1" |
        cc -x c - -o /dev/null -l"$2" -lm >/dev/null 2>&1
}
missing=()
have_lib cjson/cJSON.h cjson || missing+=(cJSON)
have_lib cblas.h openblas || missing+=(OpenBLAS)
have_lib criterion/criterion.h criterion || missing+=(Criterion)
have_lib ncurses.h ncursesw || missing+=(ncurses)
have_lib zlib.h z || missing+=(zlib)
if [ ${#missing[@]} -gt 0 ]; then
    debs=("$ROOT"/gpu-bundle/*.deb)
    if [ -e "${debs[0]}" ]; then
        say "missing ${missing[*]}: unpacking ${#debs[@]} packages of gpu-bundle/ into $PREFIX"
        if [ ! -e "$PREFIX/.unpacked" ]; then
            mkdir -p "$PREFIX"
            for d in "${debs[@]}"; do unpack_deb "$d" || say "could not unpack $d"; done
            # absolute links (e.g. into /lib) point into the prefix instead
            find "$PREFIX" -type l -lname '/*' | while read -r l; do
                tgt=$(readlink "$l")
                [ -e "$PREFIX$tgt" ] && ln -sfn "$PREFIX$tgt" "$l"
            done
            touch "$PREFIX/.unpacked"
        fi
        add_paths
        still=()
        have_lib cjson/cJSON.h cjson || still+=(cJSON)
        have_lib cblas.h openblas || still+=(OpenBLAS)
        have_lib criterion/criterion.h criterion || still+=(Criterion)
        have_lib ncurses.h ncursesw || still+=(ncurses)
        have_lib zlib.h z || still+=(zlib)
        missing=("${still[@]}")
    fi
fi
if [ ${#missing[@]} -gt 0 ]; then
    row "build deps" FAIL "missing ${missing[*]} (run make gpu-bundle beforehand and carry gpu-bundle/)"
else
    row "build deps" PASS "cJSON, OpenBLAS, Criterion, ncurses, zlib"
fi
NO_UI=""
for m in "${missing[@]}"; do [ "$m" = ncurses ] && NO_UI=1; done

# cuDNN and NCCL: the toolkit's, else PyTorch's wheels (nvidia.cudnn, nvidia.nccl)
EXTRA="$ROOT/gpu-bundle/cuda-extra"
wheel_dir() { python3 -c "import nvidia.$1 as m; print(list(m.__path__)[0])" 2>/dev/null; }
# have_cuda_lib HEADER LIB: compiles and links against the toolkit plus what is found so far
have_cuda_lib() {
    printf '#include <%s>\nint main(void){return 0;}\n' "$1" |
        cc -x c - -o /dev/null -I"$CUDA_HOME/include" -L"$CUDA_HOME/lib64" -L"$CUDA_HOME/lib" \
            -l"$2" >/dev/null 2>&1
}
use_wheel() { # use_wheel NAME HEADER LIB: links nvidia/NAME's headers and .so.N into EXTRA
    local d
    d=$(wheel_dir "$1") || return 1
    [ -n "$d" ] && [ -e "$d/include/$2" ] || return 1
    mkdir -p "$EXTRA/lib"
    local so
    so=$(ls "$d"/lib/lib"$3".so* 2>/dev/null | head -1)
    [ -n "$so" ] || return 1
    ln -sfn "$so" "$EXTRA/lib/lib$3.so"
    export CPATH="$d/include${CPATH:+:$CPATH}"
    export LIBRARY_PATH="$EXTRA/lib${LIBRARY_PATH:+:$LIBRARY_PATH}"
    export LD_LIBRARY_PATH="$d/lib:$EXTRA/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    say "using $1 from PyTorch's wheel: $d"
}
HC=""
HN=""
if have_cuda_lib cudnn.h cudnn || { use_wheel cudnn cudnn.h cudnn && have_cuda_lib cudnn.h cudnn; }; then HC=1; fi
if have_cuda_lib nccl.h nccl || { use_wheel nccl nccl.h nccl && have_cuda_lib nccl.h nccl; }; then HN=1; fi
row "cuDNN / NCCL" "$([ -n "$HC$HN" ] && echo "${HC:+cuDNN}${HC:+${HN:+,}}${HN:+NCCL}" || echo none)" \
    "$([ -z "$HC" ] && echo 'no cuDNN: convolutions use im2col + cuBLAS; ')$([ -z "$HN" ] && echo 'no NCCL: NCCL check skipped')"

# ------------------------------------------------------------------ 2. build for sm_90
NVF="-O3 -std=c++17 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90 -Icore -I. -Xcompiler -Wall,-fno-exceptions,-fno-threadsafe-statics"
say "building plumb in $BUILD (make -j$JOBS, sm_90 + compute_90 PTX)"
if run_t 300 make -j"$JOBS" BUILD="$BUILD" CUDA_HOME="$CUDA_HOME" HAVE_CUDA=1 HAVE_CUDNN="$HC" \
    HAVE_NCCL="$HN" HAVE_MPI= NO_UI="$NO_UI" NVCCFLAGS="$NVF" "$BUILD/plumb" \
    "$BUILD/tests/test_cuda" >"$RES/build.log" 2>&1; then
    row "build (sm_90)" PASS "$(elapsed) s so far; log: build.log"
else
    row "build (sm_90)" FAIL "see build.log: $(grep -m1 -E 'error|Error' "$RES/build.log" | cut -c1-150)"
    exit 1
fi

# ------------------------------------------------------------------ 3. layers CUDA vs CPU
: >"$RES/layers.tsv"
PLUMB_CUDA_REPORT="$RES/layers.tsv" run_t 150 "$BUILD/tests/test_cuda" --jobs 4 --verbose \
    >"$RES/test_cuda.log" 2>&1
trc=$?
for p in fp32 tf32 bf16; do
    awk -F'\t' -v p="$p" '$2 == p && $1 !~ /^nccl/ { n++; if ($5 != "ok") bad++;
            if ($3 + 0 > w) { w = $3 + 0; at = $1 } ; tol = $4 }
        END { if (!n) exit 1
              printf "%s\t%d/%d within %s; worst %.3g (%s)\n", bad ? "FAIL" : "PASS", n - bad, n,
                     tol, w, at }' "$RES/layers.tsv" >"$RES/.row" &&
        row "layers CUDA vs CPU, $p$([ $p = fp32 ] && echo ' (TF32 off)')" \
            "$(cut -f1 "$RES/.row")" "$(cut -f2 "$RES/.row")"
done
if grep -q '^nccl' "$RES/layers.tsv"; then
    awk -F'\t' '/^nccl/ { n++; if ($5 != "ok") bad++ } END {
        printf "%s\t%d/%d exact-match checks (send/recv to itself, all-reduce)\n",
               bad ? "FAIL" : "PASS", n - bad, n }' "$RES/layers.tsv" >"$RES/.row"
    row "NCCL 1-rank grouped send/recv" "$(cut -f1 "$RES/.row")" "$(cut -f2 "$RES/.row")"
else
    why=$(grep -m1 -o -E '(NCCL|CUDA) test skipped: .*' "$RES/test_cuda.log" | cut -c1-120)
    row "NCCL 1-rank grouped send/recv" SKIP "${why:-no NCCL rows in layers.tsv (see test_cuda.log)}"
fi
tsum=$(grep -m1 'Synthesis' "$RES/test_cuda.log" | sed 's/.*Synthesis: //')
row "tests/test_cuda" "$([ $trc -eq 0 ] && echo PASS || echo FAIL)" "${tsum:-exit $trc}; log: test_cuda.log"

# ------------------------------------------------------------------ 4. training vs CPU
if [ -d /usr/share/datasets/fashion-mnist ]; then DATA=()
elif [ -d "$PREFIX/usr/share/datasets/fashion-mnist" ]; then
    DATA=(--data-dir "$PREFIX/usr/share/datasets/fashion-mnist")
else DATA=(--data synthetic --samples 4096)
fi
# the first "plumb: ..." error line of a log, else its last line
why() { grep -m1 '^plumb: ' "$1" 2>/dev/null || tail -1 "$1"; }
# losses "step 1 x" ... from progress lines "step N/M ... loss X ..."
losses() { sed -n 's/^step \([0-9]*\)\/[0-9]* .* loss \([0-9.eE+-]*\) .*/\1 \2/p' "$1"; }
# train_match NAME EXTRA...: 20 steps on the CPU and on CUDA, per-step losses compared
train_match() {
    local name=$1
    shift
    local args=(train examples/models/fmnist-cnn.json --steps 20 --log-every 1 --batch 64
        --seed 7 "${DATA[@]}" "$@")
    run_t 120 "$PLUMB" "${args[@]}" --backend cpu >"$RES/$name-cpu.log" 2>&1
    local r1=$?
    run_t 60 "$PLUMB" "${args[@]}" --backend cuda >"$RES/$name-cuda.log" 2>&1
    local r2=$?
    if [ $r1 -ne 0 ] || [ $r2 -ne 0 ]; then
        row "fmnist-cnn 20 steps, $name" FAIL "exit cpu $r1, cuda $r2: $(why "$RES/$name-cuda.log" | cut -c1-120)"
        return
    fi
    losses "$RES/$name-cpu.log" >"$RES/.a"
    losses "$RES/$name-cuda.log" >"$RES/.b"
    # tolerance 1e-3 relative per step: fp32 layers agree to ~1e-6, which 20 SGD steps grow
    # by well under 1e-3; a wrong gradient moves the loss by 1e-2 or more within a few steps
    awk 'NR == FNR { a[$1] = $2; next } ($1 in a) { print $1, a[$1], $2 }' "$RES/.a" "$RES/.b" |
        awk '{ n++; d = $2 - $3; if (d < 0) d = -d; r = d / ($2 > 1e-9 ? $2 : 1e-9)
          if (r > w) { w = r; at = $1 }; last = $2 " / " $3 }
        END { if (n < 20) { printf "FAIL\tonly %d steps logged\n", n; exit }
              printf "%s\t%d steps, max relative loss difference %.2g at step %d (tol 1e-3); last loss cpu/cuda %s\n",
                     w <= 1e-3 ? "PASS" : "FAIL", n, w, at, last }' >"$RES/.row"
    row "fmnist-cnn 20 steps, $name" "$(cut -f1 "$RES/.row")" "$(cut -f2 "$RES/.row")"
}
train_match "1 stage"
if "$PLUMB" train --help 2>&1 | grep -q -- '--schedule'; then
    # 1F1B with a flush over 4 microbatches: the same arithmetic on both backends
    train_match "4 stages, 1 GPU" --schedule 1f1b-flush --stages 4 --microbatches 4
else
    row "fmnist-cnn 20 steps, 4 stages, 1 GPU" SKIP "plumb train has no --schedule/--stages in this build"
fi

# ------------------------------------------------------------------ 5. plumb profile vgg16
phelp=$("$PLUMB" profile --help 2>&1)
if echo "$phelp" | grep -q -- '--backend'; then
    pargs=(profile examples/models/vgg16.json --backend cuda)
    if echo "$phelp" | grep -q -- '--batch'; then pargs+=(--batch 64)
    elif echo "$phelp" | grep -q -- '--minibatch'; then pargs+=(--minibatch 64); fi
    echo "$phelp" | grep -q -- '--runs' && pargs+=(--runs 10 --warmup 2)
    if echo "$phelp" | grep -q -- '--output'; then pargs+=(--output "$RES/vgg16-profile.json")
    elif echo "$phelp" | grep -q -- ' -o '; then pargs+=(-o "$RES/vgg16-profile.json"); fi
    t0=$(date +%s)
    if run_t 120 "$PLUMB" "${pargs[@]}" >"$RES/profile.log" 2>&1; then
        f="$RES/vgg16-profile.json"
        [ -s "$f" ] || { grep -q plumb-profile "$RES/profile.log" && cp "$RES/profile.log" "$f"; }
        sum=$(python3 -c "import json,sys; p=json.load(open(sys.argv[1])); L=p['layers']; print('%d layers, forward %.1f ms + backward %.1f ms per minibatch of %s' % (len(L), sum(l.get('forward_ms',0) for l in L), sum(l.get('backward_ms',0) for l in L), p.get('minibatch','?')))" "$f" 2>/dev/null)
        row "plumb profile vgg16, batch 64" PASS "$(($(date +%s) - t0)) s; ${sum:-written}"
    else
        row "plumb profile vgg16, batch 64" FAIL "$(why "$RES/profile.log" | cut -c1-140)"
    fi
else
    row "plumb profile vgg16, batch 64" SKIP "plumb profile has no --backend option in this build ($(echo "$phelp" | head -1 | cut -c1-80))"
fi

# ------------------------------------------------------------------ 6. throughput
# plumb: the windowed samples/s of the last progress line (the first window holds the
# warm-up: cuDNN's algorithm search, cuBLAS handles)
: >"$RES/plumb.tsv"
bench_plumb() { # MODEL BATCH STEPS BACKEND
    local name
    name=$(basename "$1" .json)
    local log="$RES/tput-$name-$4.log"
    if run_t 120 "$PLUMB" train "$1" --backend "$4" --data synthetic --samples $(($2 * 4)) \
        --batch "$2" --steps "$3" --log-every $(($3 / 3)) >"$log" 2>&1; then
        local sps
        sps=$(grep '^step ' "$log" | tail -1 | sed -n 's/.*  \([0-9.]*\) samples\/s.*/\1/p')
        printf '%s\t%s\t%s\n' "$name" "$4" "$sps" >>"$RES/plumb.tsv"
        row "plumb $name batch $2, $4" "${sps:-?} samples/s" "training, synthetic data; log: $(basename "$log")"
    else
        row "plumb $name batch $2, $4" FAIL "$(why "$log" | cut -c1-140)"
    fi
}
bench_plumb examples/models/vgg16.json 64 12 cuda
bench_plumb examples/models/gpt-mini.json 64 60 cuda
bench_plumb examples/models/vgg16.json 64 12 cuda-bf16
bench_plumb examples/models/gpt-mini.json 64 60 cuda-bf16

# ------------------------------------------------------------------ 7. PyTorch, same models
if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
    cat >"$RES/torch_bench.py" <<'PY'
# torch_bench.py (written by bench/gpu-check.sh): builds a plumb-model/1 spec in PyTorch
# and times SGD training steps on synthetic data: fp32 with TF32 off, or bf16 autocast with
# fp32 master weights. Prints "model<TAB>precision<TAB>samples/s".
import json, sys, time
import torch, torch.nn as nn, torch.nn.functional as F

class Emb(nn.Module):
    def __init__(s, V, T, D):
        super().__init__(); s.wte = nn.Embedding(V, D); s.wpe = nn.Parameter(torch.zeros(T, D))
    def forward(s, x): return s.wte(x) + s.wpe
class Attn(nn.Module):
    def __init__(s, H): super().__init__(); s.H = H
    def forward(s, x):
        B, T, D3 = x.shape; D = D3 // 3
        q, k, v = (t.view(B, T, s.H, D // s.H).transpose(1, 2) for t in x.split(D, 2))
        return F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, D)
class Res(nn.Module):
    def __init__(s, f): super().__init__(); s.f = f
    def forward(s, x): return x + s.f(x)

def build(layers, shape):
    mods = []
    for L in layers:
        t = L['type']
        if t == 'conv2d':
            k, st, p = L['kernel'], L.get('stride', 1), L.get('padding', 0)
            mods.append(nn.Conv2d(shape[0], L['out_channels'], k, st, p))
            shape = [L['out_channels'], (shape[1] + 2 * p - k) // st + 1, (shape[2] + 2 * p - k) // st + 1]
        elif t == 'relu': mods.append(nn.ReLU())
        elif t == 'gelu': mods.append(nn.GELU(approximate='tanh'))
        elif t == 'maxpool2d':
            k = L['kernel']; st = L.get('stride', k); mods.append(nn.MaxPool2d(k, st))
            shape = [shape[0], (shape[1] - k) // st + 1, (shape[2] - k) // st + 1]
        elif t == 'flatten':
            mods.append(nn.Flatten()); n = 1
            for d in shape: n *= d
            shape = [n]
        elif t == 'linear': mods.append(nn.Linear(shape[-1], L['out'])); shape = shape[:-1] + [L['out']]
        elif t == 'layernorm': mods.append(nn.LayerNorm(shape[-1]))
        elif t == 'embedding': mods.append(Emb(L['vocab'], shape[0], L['dim'])); shape = [shape[0], L['dim']]
        elif t == 'attention': mods.append(Attn(L['heads'])); shape = shape[:-1] + [shape[-1] // 3]
        elif t == 'residual': f, _ = build(L['layers'], shape); mods.append(Res(f))
        elif t == 'softmax_cross_entropy': pass
        else: raise SystemExit('unknown layer type ' + t)
    return nn.Sequential(*mods), shape

def main(path, batch, steps, prec):
    spec = json.load(open(path)); shape = list(spec['input'])
    torch.backends.cuda.matmul.allow_tf32 = False; torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    net, out = build(spec['layers'], shape); net = net.cuda()
    tokens = spec['layers'][0]['type'] == 'embedding'; C = spec['classes']
    if tokens:
        x = torch.randint(0, spec['layers'][0]['vocab'], [batch] + shape, device='cuda')
        y = torch.randint(0, C, [batch] + shape, device='cuda')
    else:
        x = torch.randn([batch] + shape, device='cuda'); y = torch.randint(0, C, [batch], device='cuda')
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    def step():
        with torch.autocast('cuda', dtype=torch.bfloat16, enabled=(prec == 'bf16')):
            z = net(x)
        loss = F.cross_entropy(z.float().reshape(-1, C), y.reshape(-1))
        opt.zero_grad(set_to_none=True); loss.backward(); opt.step()
    for _ in range(3): step()
    torch.cuda.synchronize(); t0 = time.time()
    for _ in range(steps): step()
    torch.cuda.synchronize()
    print('%s\t%s\t%.1f' % (spec['name'], prec, batch * steps / (time.time() - t0)), flush=True)

main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
PY
    : >"$RES/torch.tsv"
    tver=$(python3 -c 'import torch; print(torch.__version__)' 2>/dev/null)
    for spec in "examples/models/vgg16.json 64 10" "examples/models/gpt-mini.json 64 40"; do
        set -- $spec
        for prec in fp32 bf16; do
            run_t 90 python3 "$RES/torch_bench.py" "$1" "$2" "$3" "$prec" >>"$RES/torch.tsv" \
                2>>"$RES/torch.log" || say "PyTorch $1 $prec failed (torch.log)"
        done
    done
    while IFS=$'\t' read -r name prec sps; do
        bk=cuda
        [ "$prec" = bf16 ] && bk=cuda-bf16
        ours=$(awk -F'\t' -v n="$name" -v b="$bk" '$1 == n && $2 == b { print $3 }' "$RES/plumb.tsv")
        ratio=$(awk -v a="${ours:-0}" -v b="$sps" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", a / b; else print "n/a" }')
        row "PyTorch $tver $name batch 64, $prec" "$sps samples/s" "plumb/PyTorch = $ratio (plumb ${ours:-n/a} samples/s)"
    done <"$RES/torch.tsv"
else
    row "PyTorch comparison" SKIP "torch with CUDA is not importable here"
fi

say "done"
[ "$FAILS" -eq 0 ]
