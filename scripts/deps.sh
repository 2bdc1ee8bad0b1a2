#!/usr/bin/env bash
# deps.sh: installs the Debian packages plumb needs that are missing, saying what it
# installs; where apt-get cannot run, names the exact packages and exits non-zero.
# Usage: scripts/deps.sh [--check]   (--check only reports, installs nothing)
set -u
pkgs=(libcjson-dev libcriterion-dev libncurses-dev zlib1g-dev libopenblas-dev
      openmpi-bin libopenmpi-dev dataset-fashion-mnist clang librsvg2-bin tmux)
missing=()
for p in "${pkgs[@]}"; do
    st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)
    [ "$st" = "install ok installed" ] || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "${1:-}" = "--check" ]; then
    echo "plumb: missing Debian packages: ${missing[*]}" >&2
    exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "plumb: apt-get not found; install these Debian packages: ${missing[*]}" >&2
    exit 1
fi
sudo=""
if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo="sudo -n"
    else
        echo "plumb: not root; run: sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
        exit 1
    fi
fi
echo "plumb: installing missing Debian packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
if ! $sudo apt-get update -qq >/dev/null; then
    echo "plumb: apt-get update failed; install these Debian packages: ${missing[*]}" >&2
    exit 1
fi
if ! $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
    echo "plumb: apt-get install failed; install these Debian packages: ${missing[*]}" >&2
    exit 1
fi
echo "plumb: installed ${missing[*]}"
