#!/usr/bin/env bash
# gpu-check-dryrun.sh: runs bench/gpu-check.sh on a development machine (root, Debian, the
# CUDA toolkit in /usr/local/cuda, no GPU) as the offline GPU machine would meet it:
#   - in a fresh copy of what the device tool sends (git's tracked files and the untracked
#     ones it does not ignore) plus gpu-bundle/*.deb, in GPU_DRYRUN_DIR;
#   - inside new mount and network namespaces (unshare -m -n: no network at all);
#   - with /usr under an overlay in which plumb's Debian packages are removed (cJSON,
#     OpenBLAS, Criterion and the libraries behind it, the ncurses and zlib headers), so
#     the build has to come from the bundle; and with the toolkit's cuDNN and NCCL removed,
#     so they have to come from PyTorch's wheel layout (nvidia/cudnn/{include,lib},
#     nvidia/nccl/{include,lib}: hard links to the toolkit's files), placed in the
#     site-packages of GPU_DRYRUN_PYTHON (under a second overlay), else on PYTHONPATH.
# The machine itself is not changed: the overlay lives in the namespace and ends with it.
#
# Usage: sudo scripts/gpu-check-dryrun.sh [--no-make] [--cpu-steps]
#   --no-make     removes make as well (the check must use the bundle's)
#   --cpu-steps   GPU_CHECK_TORCH_DEVICE=cpu: training, profile, throughput and PyTorch's
#                 part run on the CPU for a step or two
#   GPU_DRYRUN_PYTHON: a python3 that imports torch (a CPU-only install does), for PyTorch's
#                 part; default: python3 (then that part is one SKIP row)
#   GPU_DRYRUN_DIR (default /tmp/plumb-gpu-dryrun)
# Output: the check's own lines and table, its wall time, and what it left in $OUT (the
# device tool returns at most 8 files, named in letters, digits, '.', '_' and '-').
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
D=${GPU_DRYRUN_DIR:-/tmp/plumb-gpu-dryrun}
PYBIN=${GPU_DRYRUN_PYTHON:-python3}
NOMAKE=""
CPUSTEPS=""
for a in "$@"; do
    case $a in
        --no-make) NOMAKE=1 ;;
        --cpu-steps) CPUSTEPS=1 ;;
        --help) sed -n '2,24p' "$0"; exit 0 ;;
        *) echo "gpu-check-dryrun: unknown option $a" >&2; exit 2 ;;
    esac
done
[ "$(id -u)" = 0 ] || { echo "gpu-check-dryrun: needs root (unshare, mount)" >&2; exit 1; }
command -v unshare >/dev/null || { echo "gpu-check-dryrun: unshare not found" >&2; exit 1; }
ls "$ROOT"/gpu-bundle/*.deb >/dev/null 2>&1 ||
    { echo "gpu-check-dryrun: no gpu-bundle/*.deb (make gpu-bundle first)" >&2; exit 1; }
CUDA=$(readlink -f "${CUDA_HOME:-/usr/local/cuda}")

rm -rf "$D"
mkdir -p "$D/tree/gpu-bundle" "$D/ov/up" "$D/ov/wk" "$D/site/nvidia" "$D/out"
# the tree as the device tool sends it
(cd "$ROOT" && git ls-files -z -co --exclude-standard |
    tar --null --ignore-failed-read -T - -cf - 2>/dev/null) | tar -xf - -C "$D/tree"
cp "$ROOT"/gpu-bundle/*.deb "$ROOT"/gpu-bundle/MANIFEST "$D/tree/gpu-bundle/"

# PyTorch's wheel layout of cuDNN and NCCL, from the toolkit's copies
wheel() { # NAME 'HEADER GLOBS' 'LIBRARY GLOBS'
    local n=$1 f
    mkdir -p "$D/site/nvidia/$n/include" "$D/site/nvidia/$n/lib"
    for f in $2; do [ -e "$CUDA/include/$f" ] && cp -al "$CUDA/include/$f" "$D/site/nvidia/$n/include/"; done
    for f in $3; do [ -e "$CUDA/lib64/$f" ] && cp -l "$CUDA/lib64/$f" "$D/site/nvidia/$n/lib/"; done
    return 0
}
(cd "$CUDA/include" && wheel cudnn "$(echo cudnn*.h)" "") || true
(cd "$CUDA/lib64" && wheel cudnn "" "$(echo libcudnn*.so.[0-9])") || true
(cd "$CUDA/include" && wheel nccl "$(echo nccl*.h nccl_device)" "") || true
(cd "$CUDA/lib64" && wheel nccl "" "$(echo libnccl.so.[0-9])") || true

# what the GPU image lacks: these packages' files go (those of them installed here)
hide_pkgs="libcjson-dev libcjson1 libopenblas-dev libopenblas-pthread-dev libopenblas0-pthread
 libopenblas0 libopenblas64-0 libopenblas64-dev libblas-dev libblas3 liblapack-dev liblapack3
 libgfortran5 libquadmath0 libcriterion-dev libcriterion3 libnanomsg5 libnanomsg-dev
 libgit2-1.5 libgit2-dev libhttp-parser2.9 libhttp-parser-dev libmbedtls14 libmbedtls-dev
 libmbedx509-1 libmbedcrypto7 libssh2-1 libssh2-1-dev libgssapi-krb5-2 libkrb5-3
 libk5crypto3 libkrb5support0 libncurses-dev libncurses5-dev libncursesw5-dev zlib1g-dev"
: >"$D/hide.txt"
for p in $hide_pkgs; do
    dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q 'ok installed' || continue
    dpkg -L "$p" | while read -r f; do
        case $f in /usr/*|/lib/*|/lib64/*) [ -d "$f" ] && [ ! -L "$f" ] || echo "$f" ;; esac
    done >>"$D/hide.txt"
done
for f in "$CUDA"/include/cudnn*.h "$CUDA"/include/nccl*.h "$CUDA"/include/nccl_device \
    "$CUDA"/lib64/libcudnn* "$CUDA"/lib64/libnccl*; do
    [ -e "$f" ] && echo "$f" >>"$D/hide.txt"
done
[ -n "$NOMAKE" ] && command -v make >>"$D/hide.txt"
echo "gpu-check-dryrun: hiding $(wc -l <"$D/hide.txt") files of plumb's packages and the toolkit's cuDNN/NCCL; tree in $D/tree"

# with a given Python, the layout goes where PyTorch's wheels put it: its site-packages
SP=""
PP="$D/site"
if [ -n "${GPU_DRYRUN_PYTHON:-}" ]; then
    SP=$("$PYBIN" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    PP=""
    mkdir -p "$D/ovs/up" "$D/ovs/wk"
fi

export D PYBIN CPUSTEPS SP PP
unshare -m -n --propagation private bash -c '
    set -e
    mount -t overlay overlay -o "lowerdir=/usr,upperdir=$D/ov/up,workdir=$D/ov/wk" /usr
    while read -r f; do rm -rf "$f"; done <"$D/hide.txt"
    # a loader cache that knows they are gone, in place of /etc/ld.so.cache (in here only)
    ldconfig -X -C "$D/ld.so.cache"
    mount --bind "$D/ld.so.cache" /etc/ld.so.cache
    if [ -n "$SP" ]; then
        mount -t overlay overlay -o "lowerdir=$SP,upperdir=$D/ovs/up,workdir=$D/ovs/wk" "$SP"
        mkdir -p "$SP/nvidia"
        rm -rf "$SP/nvidia/cudnn" "$SP/nvidia/nccl"
        ln -s "$D/site/nvidia/cudnn" "$SP/nvidia/cudnn"
        ln -s "$D/site/nvidia/nccl" "$SP/nvidia/nccl"
    fi
    cd "$D/tree"
    t0=$(date +%s)
    set +e
    PYTHONPATH="$PP" GPU_CHECK_PYTHON="$PYBIN" GPU_CHECK_FORCE=1 \
        GPU_CHECK_TORCH_DEVICE=${CPUSTEPS:+cpu} OUT="$D/out" bash bench/gpu-check.sh
    rc=$?
    echo "gpu-check-dryrun: bench/gpu-check.sh exit $rc after $(($(date +%s) - t0)) s"
'
cd "$D/out"
n=$(find . -type f | wc -l)
bad=$(find . -type f | grep -v -E '^\./[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+){0,2}$' || true)
echo "gpu-check-dryrun: $n files under \$OUT ($(du -sh . | cut -f1)): $(find . -type f | sort | tr '\n' ' ')"
[ "$n" -le 8 ] || echo "gpu-check-dryrun: more than 8 files: the device tool would leave some behind"
[ -z "$bad" ] || echo "gpu-check-dryrun: names the device tool would not return: $bad"
