#!/usr/bin/env bash
# plugins.sh: the CUDA backend and the mpi/nccl transports are plugins loaded on demand
# (exec/plugin.h): the plumb binary links no GPU or MPI library; a plugin missing from the
# binary's folder, or one whose own library is missing, is one line naming it, exit 2, before
# any work; a folder holding the binary and its plugins works wherever it is copied (as
# `make all` copies them to ./); and the emulated CUDA plugin (build/emu) trains from such a
# copy.
set -u
PLUMB=${PLUMB:-./plumb}
DIR=$(dirname "$PLUMB")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "plugins.sh: FAIL: $*" >&2; exit 1; }
M=examples/models/fmnist-mlp.json
RUN=(--data synthetic --samples 64 --steps 1 --batch 16 --quiet)

d=$tmp fail=0
. "$(dirname "$0")/lib/expect.sh" # expect_bad NAME PATTERN CMD...: sets fail=1 on a miss

echo "the binary links no GPU or MPI library"
libs=$(ldd "$PLUMB") || fail "ldd $PLUMB failed"
bad=$(echo "$libs" | grep -E 'libcuda|libcublas|libcudnn|libnccl|libmpi|libopen-(pal|rte)' | awk '{print $1}' | tr '\n' ' ')
[ -z "$bad" ] || fail "$PLUMB links $bad(the plugins should, not the binary)"
"$PLUMB" --version > /dev/null || fail "--version failed"

echo "a missing plugin: one line naming it, exit 2"
mkdir -p "$tmp/bare"
cp "$PLUMB" "$tmp/bare/plumb"
for t in "--backend cuda:cuda" "--transport mpi:mpi" "--transport nccl --backend cuda:nccl"; do
    args=${t%:*} name=${t##*:}
    if [ -e "$DIR/plumb-$name.so" ]; then want="plumb-$name.so not found next to the binary"
    else want="not built into this binary"; fi
    # shellcheck disable=SC2086
    expect_bad "missing plugin $name" "$want" "$tmp/bare/plumb" train "$M" --schedule gpipe --stages 2 $args "${RUN[@]}"
    echo "  $args: $(cat "$tmp/err")"
done

if [ -e "$DIR/plumb-nccl.so" ]; then
    echo "a plugin whose library is missing: the loader's line naming it, exit 2"
    mkdir -p "$tmp/nocuda"
    cp "$PLUMB" "$DIR/plumb-nccl.so" "$DIR/plumb-mpi.so" "$tmp/nocuda/"
    expect_bad "plugin without its library" "plumb-cuda.so: cannot open shared object file" "$tmp/nocuda/plumb" train "$M" \
        --schedule gpipe --stages 2 --transport nccl --backend cuda "${RUN[@]}"
    echo "  $(cat "$tmp/err")"
fi

if [ -e "$DIR/plumb-cuda.so" ]; then
    echo "a file that is not a plumb plugin, or a plugin of another build, is refused"
    mkdir -p "$tmp/other"
    cp "$PLUMB" "$tmp/other/plumb"
    cp "$DIR/plumb-mpi.so" "$tmp/other/plumb-cuda.so" 2> /dev/null ||
        cp "$PLUMB" "$tmp/other/plumb-cuda.so"
    expect_bad "plugin of another build" "plumb-cuda.so" "$tmp/other/plumb" train "$M" --backend cuda "${RUN[@]}"
    echo "  $(cat "$tmp/err")"
    if command -v "${CC:-cc}" > /dev/null 2>&1; then # a table of another ABI version
        printf '%s\n' '#include "exec/plugin.h"' 'const plugin_api *plumb_plugin_cuda(void);' \
            'const plugin_api *plumb_plugin_cuda(void)' \
            '{ static const plugin_api a = {PLUGIN_API_INIT("cuda"), .abi = PLUGIN_ABI + 1}; return &a; }' \
            > "$tmp/old.c"
        "${CC:-cc}" -shared -fPIC -I. -Icore -o "$tmp/other/plumb-cuda.so" "$tmp/old.c" ||
            fail "could not build the old plugin"
        expect_bad "plugin ABI" "plumb-cuda.so belongs to another build of plumb" "$tmp/other/plumb" train "$M" \
            --backend cuda "${RUN[@]}"
        echo "  $(cat "$tmp/err")"
    fi
fi

# the emulated CUDA plugin, copied with its binary elsewhere: --backend cuda trains on cuemu
EMU=${PLUMB_EMU:-$DIR/emu/plumb}
if [ -x "$EMU" ] && [ -e "$(dirname "$EMU")/plumb-cuda.so" ]; then
    echo "a copied folder finds its plugins: cuemu's plumb-cuda.so trains"
    mkdir -p "$tmp/copy"
    cp "$EMU" "$(dirname "$EMU")"/plumb-*.so "$tmp/copy/"
    timeout 300 "$tmp/copy/plumb" train "$M" --backend cuda "${RUN[@]}" > "$tmp/out" 2>&1 ||
        fail "--backend cuda from a copied folder: $(cat "$tmp/out")"
    grep -q '^final:' "$tmp/out" || fail "no final line: $(cat "$tmp/out")"
    echo "  $(cat "$tmp/out")"
else
    echo "  (no cuemu build: the copied-folder run is skipped)"
fi
[ "$fail" = 0 ] || fail "see the FAIL lines above"
echo "plugins.sh: all passed"
