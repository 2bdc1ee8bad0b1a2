#!/usr/bin/env bash
# gpu-bundle.sh: fetches the Debian packages that building plumb and running its GPU check
# need (headers, link-time .so names and the run-time libraries behind them) into the
# git-ignored folder gpu-bundle/, for a GPU machine that is offline and has the CUDA toolkit
# but none of plumb's Debian packages. bench/gpu-check.sh unpacks them there with dpkg -x
# into a local prefix and builds against it. Run on a Debian 12 machine with apt lists.
#
# Usage: scripts/gpu-bundle.sh [--with-data]    (--with-data adds dataset-fashion-mnist, 31 MB)
# Output: gpu-bundle/*.deb and gpu-bundle/MANIFEST (package, version, bytes), then a size line.
set -eu
dir=${GPU_BUNDLE_DIR:-gpu-bundle}
# What plumb links: -lcjson -lopenblas -lncursesw -lz, Criterion for the tests; each with the
# run-time libraries its .so needs beyond a Debian base system (libc6, libgcc-s1, libstdc++6).
pkgs=(libcjson-dev libcjson1
      libopenblas-dev libopenblas-pthread-dev libopenblas0-pthread libopenblas0 libgfortran5
      libquadmath0
      libncurses-dev libncurses6 libncursesw6 libtinfo6 zlib1g-dev zlib1g
      libcriterion-dev libcriterion3 libnanomsg5 libffi8 libgit2-1.5 libhttp-parser2.9
      libmbedtls14 libmbedx509-1 libmbedcrypto7 libssh2-1 libssl3 libpcre2-8-0)
[ "${1:-}" = "--with-data" ] && pkgs+=(dataset-fashion-mnist)
if [ "${1:-}" = "--help" ]; then sed -n '2,12p' "$0"; exit 0; fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "gpu-bundle: apt-get not found; run this on a Debian machine" >&2
    exit 1
fi
mkdir -p "$dir"
cd "$dir"
rm -f ./*.deb MANIFEST
if ! apt-get download "${pkgs[@]}" >download.log 2>&1; then
    echo "gpu-bundle: apt-get download failed (see $dir/download.log); try: sudo apt-get update" >&2
    tail -3 download.log >&2
    exit 1
fi
for f in ./*.deb; do
    printf '%s\t%s\t%s\n' "$(dpkg-deb -f "$f" Package)" "$(dpkg-deb -f "$f" Version)" \
        "$(stat -c %s "$f")" >>MANIFEST
done
n=$(wc -l <MANIFEST)
bytes=$(awk -F'\t' '{s += $3} END {print s}' MANIFEST)
echo "gpu-bundle: $n packages, $((bytes / 1024 / 1024)) MiB in $dir/ (carry it to the GPU machine with the tree)"
