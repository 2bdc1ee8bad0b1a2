#!/usr/bin/env bash
# walkthrough.sh: runs README's walkthrough as written, so that it cannot rot: every line
# that starts with "$ " in the walkthrough's console blocks is run from a scratch folder
# that sees the repository's profiles/, examples/ and tests/ (./plumb is $PLUMB), and must
# exit 0; each sample output line printed under it in README must match a line of what it
# prints now, numbers aside ("..." ends a line cut short; a line of "..." skips output).
# Not run: the CNN training over whole epochs (minutes on a CPU); the dashboard runs as a
# --snapshot; mpirun only where it and the MPI transport exist.
set -u
PLUMB=${PLUMB:-./build/plumb}
case $PLUMB in /*) ;; *) PLUMB=$PWD/$PLUMB ;; esac
readme=${README:-README.md}
root=$PWD
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# the walkthrough section: commands and their sample lines, one record per command
# (a line "CMD <command>", then "OUT <sample line>" ...)
awk '
    /^## / { inside = ($0 == "## Walkthrough"); next }
    !inside { next }
    /^```console/ { block = 1; next }
    /^```/ { block = 0; next }
    !block { next }
    /^\$ / { print "CMD " substr($0, 3); next }
    { print "OUT " $0 }
' "$readme" > "$tmp/records"
ncmd=$(grep -c '^CMD ' "$tmp/records")
[ "$ncmd" -ge 15 ] || fail "found $ncmd commands in $readme's walkthrough (expected the whole loop)"
for want in "plumb plan .*--stages" "plumb sim .*--trace predicted-trace.json" \
    "plumb train .*--trace measured.json" "plumb compare predicted-trace.json measured.json"; do
    grep -q "^CMD .*$want" "$tmp/records" || fail "the walkthrough lost: $want"
done

work=$tmp/work
mkdir "$work"
ln -s "$root/profiles" "$root/examples" "$root/tests" "$work/"
ln -s "$PLUMB" "$work/plumb"

# a line's shape: numbers (with their sign) replaced, blanks squeezed
shape() { sed -e 's/[+-]\{0,1\}[0-9][0-9.eE+-]*/N/g' -e 's/[[:space:]][[:space:]]*/ /g' -e 's/^ //' -e 's/ $//'; }

check() { # $1 command, $2 file of sample lines, $3 actual output
    shape < "$3" > "$tmp/have"
    while IFS= read -r line; do
        [ "$line" = "..." ] && continue
        local prefix=0
        case $line in *...) line=${line%...}; prefix=1 ;; esac
        local s
        s=$(printf '%s\n' "$line" | shape)
        [ -z "$s" ] && continue
        if [ $prefix -eq 1 ]; then
            grep -qF -- "$s" "$tmp/have" || fail "$1: no output line starts like: $line"
        else
            grep -qxF -- "$s" "$tmp/have" || fail "$1: no output line like: $line"
        fi
    done < "$2"
}

run() { # $1 command, $2 sample lines
    local cmd=$1
    case $cmd in
    *fmnist-cnn*--epochs*) echo "walkthrough.sh: skipped (minutes of training): $cmd"; return ;;
    "./plumb ui "*) cmd="$cmd --snapshot 80x24 --mono" ;;
    mpirun*)
        if ! command -v mpirun > /dev/null || ! "$PLUMB" train --help | grep -q "mpi"; then
            echo "walkthrough.sh: skipped (no mpirun or MPI transport): $cmd"
            return
        fi
        if [ "${PLUMB_SAN:-0}" = 1 ] || grep -qa __asan_init "$PLUMB" 2> /dev/null; then
            # the MPI library's own allocations outlive MPI_Finalize: not plumb's leaks
            cmd="ASAN_OPTIONS=\${ASAN_OPTIONS:+\$ASAN_OPTIONS:}detect_leaks=0 $cmd"
        fi ;;
    esac
    (cd "$work" && timeout 300 bash -c "$cmd") < /dev/null > "$tmp/out" 2>&1
    local rc=$?
    [ $rc -eq 0 ] || { fail "exit $rc: $cmd: $(tail -n 3 "$tmp/out")"; return; }
    check "$1" "$2" "$tmp/out"
}

cmd=
: > "$tmp/sample"
while IFS= read -r rec; do
    case $rec in
    "CMD "*)
        [ -n "$cmd" ] && run "$cmd" "$tmp/sample"
        cmd=${rec#CMD }
        : > "$tmp/sample" ;;
    "OUT "*) printf '%s\n' "${rec#OUT }" >> "$tmp/sample" ;;
    esac
done < "$tmp/records"
[ -n "$cmd" ] && run "$cmd" "$tmp/sample"

# what the loop wrote is what the next command reads
for f in vgg16.json report.json timeline.svg trace.json sched.csv sweep.svg mlp-profile.json \
    mlp-plan.json predicted-trace.json measured.json my-model.json; do
    [ -s "$work/$f" ] || fail "the walkthrough did not write $f"
done

if [ "$fails" -ne 0 ]; then
    echo "walkthrough.sh: $fails failure(s)"
    exit 1
fi
echo "walkthrough.sh: ok ($ncmd commands)"
