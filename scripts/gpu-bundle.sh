#!/usr/bin/env bash
# gpu-bundle.sh: fetches the Debian packages that building plumb and running its GPU check
# need (headers, link-time .so names, the run-time libraries behind them, and GNU make) into
# the git-ignored folder gpu-bundle/, for a GPU machine that is offline and has the CUDA
# toolkit but none of plumb's Debian packages. bench/gpu-check.sh unpacks them there (dpkg -x)
# into a local prefix and builds against it.
#
# The packages always come from Debian 12 "bookworm" (glibc 2.36), whatever this machine
# runs: their libraries then load on any glibc >= 2.36 (the GPU image: Ubuntu 24.04, glibc
# 2.39), where a newer release's (Debian 13: glibc 2.41) would not. apt-get runs with its
# own sources list and state in a cache folder, so this machine's apt setup is neither used
# nor changed; needs network access to the Debian archive and its keyring.
#
# Usage: scripts/gpu-bundle.sh [--with-data]    (--with-data adds dataset-fashion-mnist, 31 MB)
#   GPU_BUNDLE_DIR (default gpu-bundle), GPU_BUNDLE_SUITE (default bookworm),
#   GPU_BUNDLE_MIRROR (default http://deb.debian.org), GPU_BUNDLE_MAX_GLIBC (default 2.39).
# Output: gpu-bundle/*.deb and gpu-bundle/MANIFEST (package, version, bytes), then one line
# with the size and one saying what the bundled libraries need (newest GLIBC_ version, and
# any library that is neither bundled nor part of every glibc system); exit 1 if either
# check fails.
set -eu
if [ "${1:-}" = "--help" ]; then sed -n '2,20p' "$0"; exit 0; fi
dir=${GPU_BUNDLE_DIR:-gpu-bundle}
suite=${GPU_BUNDLE_SUITE:-bookworm}
mirror=${GPU_BUNDLE_MIRROR:-http://deb.debian.org}
max_glibc=${GPU_BUNDLE_MAX_GLIBC:-2.39}
# What plumb links: -lcjson -lopenblas -lncursesw -lz, Criterion for the tests; each with the
# run-time libraries its .so needs beyond what every glibc system has (libc6, libgcc-s1,
# libstdc++6); GNU make in case the machine lacks it.
pkgs=(libcjson-dev libcjson1
      libopenblas-dev libopenblas-pthread-dev libopenblas0-pthread libopenblas0 libgfortran5
      libquadmath0
      libncurses-dev libncurses6 libncursesw6 libtinfo6 zlib1g-dev zlib1g
      libcriterion-dev libcriterion3 libnanomsg5 libffi8 libgit2-1.5 libhttp-parser2.9
      libmbedtls14 libmbedx509-1 libmbedcrypto7 libssh2-1 libssl3 libpcre2-8-0
      libgssapi-krb5-2 libkrb5-3 libk5crypto3 libkrb5support0 libcom-err2 libkeyutils1
      make)
[ "${1:-}" = "--with-data" ] && pkgs+=(dataset-fashion-mnist)

if ! command -v apt-get >/dev/null 2>&1; then
    echo "gpu-bundle: apt-get not found; run this on a Debian (or Ubuntu) machine" >&2
    exit 1
fi
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
if [ ! -r "$keyring" ]; then
    echo "gpu-bundle: $keyring missing (apt-get install debian-archive-keyring)" >&2
    exit 1
fi
# apt's own state for $suite: sources, lists, cache and an empty dpkg status
st="${XDG_CACHE_HOME:-$HOME/.cache}/plumb/gpu-bundle-apt-$suite"
mkdir -p "$st/lists/partial" "$st/cache/archives/partial" "$st/sources.list.d"
: >"$st/status"
{
    echo "deb [signed-by=$keyring] $mirror/debian $suite main"
    echo "deb [signed-by=$keyring] $mirror/debian $suite-updates main"
    echo "deb [signed-by=$keyring] $mirror/debian-security $suite-security main"
} >"$st/sources.list"
apt_o=(-o "Dir::Etc::SourceList=$st/sources.list" -o "Dir::Etc::SourceParts=$st/sources.list.d"
    -o "Dir::State::Lists=$st/lists" -o "Dir::Cache=$st/cache" -o "Dir::State::status=$st/status"
    -o APT::Architecture=amd64 -o APT::Architectures=amd64)
[ "$(id -u)" = 0 ] && apt_o+=(-o APT::Sandbox::User=root)

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
cd "$dir"
rm -f ./*.deb MANIFEST
if ! apt-get "${apt_o[@]}" update >download.log 2>&1; then
    echo "gpu-bundle: apt-get update for $suite failed (see $dir/download.log)" >&2
    tail -3 download.log >&2
    exit 1
fi
if ! apt-get "${apt_o[@]}" download "${pkgs[@]}" >>download.log 2>&1; then
    echo "gpu-bundle: apt-get download failed (see $dir/download.log)" >&2
    tail -3 download.log >&2
    exit 1
fi
for f in ./*.deb; do
    printf '%s\t%s\t%s\n' "$(dpkg-deb -f "$f" Package)" "$(dpkg-deb -f "$f" Version)" \
        "$(stat -c %s "$f")" >>MANIFEST
done
n=$(wc -l <MANIFEST)
bytes=$(awk -F'\t' '{s += $3} END {print s}' MANIFEST)
echo "gpu-bundle: $n packages from Debian $suite, $((bytes / 1024 / 1024)) MiB in $dir/ (carry it to the GPU machine with the tree)"

# What the bundled libraries need: the newest GLIBC_ symbol version, and every DT_NEEDED
# name that is neither in the bundle nor one of glibc's or the compiler run-time's.
if ! command -v readelf >/dev/null 2>&1; then
    echo "gpu-bundle: readelf not found (binutils): library needs not checked"
    exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for f in ./*.deb; do dpkg-deb -x "$f" "$tmp"; done
find "$tmp" -type f -name '*.so*' >"$tmp/.libs"
glibc=$(while read -r f; do readelf -V --wide "$f" 2>/dev/null; done <"$tmp/.libs" |
    grep -o 'Name: GLIBC_[0-9.]*' | sed 's/Name: GLIBC_//' | sort -uV | tail -1)
base='^(libc|libm|libdl|librt|libpthread|libresolv|libutil|ld-linux-x86-64|libgcc_s|libstdc\+\+)\.so'
unmet=$(while read -r f; do readelf -d "$f" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; done <"$tmp/.libs" |
    sort -u | grep -v -E "$base" | while read -r so; do
        find "$tmp" -name "$so" | grep -q . || printf '%s ' "$so"
    done)
ok=1
newest=$(printf '%s\n%s\n' "$glibc" "$max_glibc" | sort -V | tail -1)
[ "$newest" = "$max_glibc" ] || ok=""
[ -z "$unmet" ] || ok=""
echo "gpu-bundle: the bundled libraries need glibc ${glibc:-?} (at most $max_glibc allowed)${unmet:+; not bundled: $unmet}"
[ -n "$ok" ] || { echo "gpu-bundle: the bundle would not load on the GPU machine" >&2; exit 1; }
