#!/usr/bin/env bash
# ui.sh: the dashboard in a real terminal. tmux runs `plumb ui` in a 120x40 pane;
# send-keys presses what-if keys and capture-pane checks the screen after each; a resize
# reflows it; s saves a plan; q (and, in a second run, Ctrl-C) quits with status 0 and the
# terminal's modes (echo, icanon) restored; TERM=vt100 and NO_COLOR run in monochrome;
# plumb ui --model lays GPT-3 175B out on 1024 GPUs and its 3D keys re-lay it out.
# Bad --model options and a re-plan under a plan file's "p2p": "sync" (--keys --snapshot:
# plumb plan --p2p sync's stages) are checked first, without a terminal; the rest skips
# with a note when tmux is not installed.
set -u
P=${PLUMB:-./plumb}
case $P in /*) ;; *) P=$PWD/$P ;; esac
GPT3=(--model examples/llm/gpt3-175b.json -c profiles/clusters/dgx-a100-80g.json)
early=0
# refused NAME LINE ARGS...: plumb ui ARGS exits 2 with exactly the one line LINE on stderr
refused() {
    local name=$1 line=$2 out err rc
    shift 2
    out=$("$P" ui "$@" --snapshot 80x24 2>/tmp/plumb-ui-e2e-err.$$); rc=$?
    err=$(cat /tmp/plumb-ui-e2e-err.$$)
    rm -f /tmp/plumb-ui-e2e-err.$$
    if [ $rc != 2 ] || [ -n "$out" ] || [ "$err" != "$line" ]; then
        echo "FAIL ui: $name: exit $rc, stdout ${#out} bytes, stderr: $err"
        early=1
    fi
}
refused model-tp 'plumb: ui: --tp: expected at most the 8 devices of one server (got 16)' \
    "${GPT3[@]}" --tp 16 --pp 8 --dp 8 --global-batch 1536
refused model-sp 'plumb: ui: --sequence-parallel: expected --tp 2 or more (sequence parallelism splits the tensor-parallel ranks'"'"' sequence) (got --tp 1)' \
    "${GPT3[@]}" --tp 1 --pp 8 --dp 16 --global-batch 1536 --sequence-parallel
refused model-batch 'plumb: ui: expected --global-batch B with --model' \
    "${GPT3[@]}" --tp 8 --pp 8 --dp 16
refused model-planner 'plumb: ui: --planner: expected no planner with --model (its layouts are laid out as plumb plan --model lays them out)' \
    "${GPT3[@]}" --tp 8 --pp 8 --dp 16 --global-batch 1536 --planner even
refused model-alone 'plumb: ui: expected --model FILE with the layout options (--tp, --pp, ...)' \
    --tp 8
refused model-file 'plumb: ui: /nonexistent/m.json: cannot open: No such file or directory' \
    --model /nonexistent/m.json -c profiles/clusters/dgx-a100-80g.json --tp 8 --pp 8 \
    --global-batch 8
# A plan file's runtime is the planner's when the dashboard re-plans (no terminal needed):
# vgg16-4stage-1f1b with "p2p": "sync" on 8 GPUs (- -) shows and saves the stages and
# samples/s of plumb plan -p --gpus 8 ... --p2p sync (not the plan ranked under overlap).
rt=$(mktemp -d /tmp/plumb-ui-e2e-rt.XXXXXX)
sed -e "s#\"\.\./\.\./#\"$PWD/#" -e 's#"optimizer": "momentum",#&\n  "p2p": "sync",#' \
    examples/plans/vgg16-4stage-1f1b.json > "$rt/p2p.json"
shot=$("$P" ui "$rt/p2p.json" --keys '--s' --snapshot 120x30 --mono -o "$rt" 2>&1)
"$P" plan -p profiles/pipedream/vgg16.json -c profiles/clusters/cluster-a-4x4.json --gpus 8 \
    --schedule 1f1b-flush --microbatches 8 --microbatch-size 32 --no-recompute --p2p sync \
    -o "$rt/cli.json" > "$rt/cli.txt" 2>&1
stages() { grep -E '"(first_layer|last_layer|replicas|devices|microbatches|p2p)"' "$1" | tr -d ,; }
cli_sps=$(sed -n 's/^throughput: \([0-9.]*\) samples\/s simulated.*/\1/p' "$rt/cli.txt")
if [ -z "$cli_sps" ] || ! grep -q "samples/s $cli_sps " <<< "$shot" ||
    ! grep -q '(native planner)' <<< "$shot" || [ ! -s "$rt"/vgg16-8gpu-1f1b-flush.plan.json ] ||
    [ "$(stages "$rt"/vgg16-8gpu-1f1b-flush.plan.json)" != "$(stages "$rt/cli.json")" ]; then
    echo "FAIL ui: p2p sync re-plan: not plumb plan --p2p sync's (${cli_sps:-no} samples/s):"
    sed 's/^/    | /' <<< "$shot" | head -5
    early=1
fi
rm -rf "$rt"
# Without a terminal (and without --snapshot): one line, exit 2, nothing on stdout.
nt_out=$("$P" ui examples/plans/vgg16-4stage-1f1b.json < /dev/null 2>/tmp/plumb-ui-e2e-nt.$$)
nt_rc=$?
nt_err=$(cat /tmp/plumb-ui-e2e-nt.$$); rm -f /tmp/plumb-ui-e2e-nt.$$
if [ "$nt_rc" != 2 ] || [ -n "$nt_out" ] || [ "$(printf '%s\n' "$nt_err" | wc -l)" != 1 ] ||
    ! grep -q 'needs a terminal' <<< "$nt_err"; then
    echo "FAIL ui: without a terminal: rc $nt_rc, stderr '$nt_err' (expected one line, exit 2)"
    early=1
fi
if ! command -v tmux >/dev/null 2>&1; then
    [ $early = 0 ] && echo "ui: bad --model options and the p2p sync re-plan ok; SKIP the rest (tmux is not installed)"
    exit $early
fi
dir=$(mktemp -d /tmp/plumb-ui-e2e.XXXXXX)
run=0
sock=plumb-ui-e2e-$$-0
T() { tmux -L "$sock" -f /dev/null "$@"; }
cleanup() {
    for i in 0 1 2 3 4 9; do tmux -L "plumb-ui-e2e-$$-$i" kill-server >/dev/null 2>&1; done
    rm -rf "$dir"
}
trap cleanup EXIT
fail=$early
bad() { echo "FAIL ui: $*"; fail=1; }

# wait_for PATTERN [SECONDS]: polls the pane until grep -E finds PATTERN. (capture-pane
# shows line-drawing cells by their VT100 alternate-charset letters, so patterns avoid
# the borders.)
wait_for() {
    local pat=$1 t=${2:-15} i=0
    while [ $i -lt $((t * 10)) ]; do
        T capture-pane -p -t ui > "$dir/screen" 2>/dev/null
        grep -Eq -- "$pat" "$dir/screen" && return 0
        sleep 0.1
        i=$((i + 1))
    done
    bad "screen never showed /$pat/; last screen:"
    sed 's/^/    | /' "$dir/screen"
    return 1
}
# wait_file FILE [SECONDS]
wait_file() {
    local i=0
    while [ ! -s "$1" ] && [ $i -lt $((${2:-15} * 10)) ]; do sleep 0.1; i=$((i + 1)); done
    [ -s "$1" ]
}
# start ENV...: runs plumb ui in a fresh session; records exit status and stty after it.
# Each run gets its own tmux server (socket), so no run waits on the last one's exit.
start() {
    rm -f "$dir/rc" "$dir/stty"
    T kill-server >/dev/null 2>&1
    run=$((run + 1))
    sock=plumb-ui-e2e-$$-$run
    T new-session -d -x 120 -y 40 -s ui \
        "env $* '$P' ui -o '$dir'; echo \$? > '$dir/rc'; stty -a > '$dir/stty' 2>&1; sleep 5"
}
# colours NAME yes|no: whether the pane shows colour (SGR 30-37 / 40-47) attributes.
colours() {
    T capture-pane -e -p -t ui > "$dir/screen-e" 2>/dev/null
    if grep -Eq $'\e\\[([0-9;]*;)?[34][0-7](;[0-9;]*)?m' "$dir/screen-e"; then
        [ "$2" = yes ] || bad "$1: colours shown in monochrome mode"
    else
        [ "$2" = no ] || bad "$1: no colours shown"
    fi
}
check_restored() { # check_restored NAME
    wait_file "$dir/rc" || { bad "$1: plumb ui did not exit"; return; }
    [ "$(cat "$dir/rc")" = 0 ] || bad "$1: exit status $(cat "$dir/rc")"
    wait_file "$dir/stty" 5
    grep -Eq '(^|[ ;])echo([ ;]|$)' "$dir/stty" || bad "$1: echo not restored: $(head -c 300 "$dir/stty")"
    grep -Eq '(^|[ ;])icanon([ ;]|$)' "$dir/stty" || bad "$1: icanon not restored"
}

# 1. the default example, what-if keys, pin, help, resize, save, q
start TERM=xterm-256color
wait_for 'samples/s [0-9.]+ +iter [0-9.]+ (s|ms)' || { echo "ui: giving up"; exit 1; }
wait_for 'vgg16 on cluster-a-4x4 +pipedream'
wait_for 'GPUs 16 '
wait_for ' 0 0-31 +15 0-14 '
wait_for 'time \|0 s'
colours xterm-256color yes
T send-keys -t ui '+'
wait_for 'GPUs 20 '
wait_for '(native planner|even split)'
T send-keys -t ui 'p'
wait_for '^pin +samples/s'
T send-keys -t ui 'b'
wait_for 'ethernet 20 Gb/s x2'
wait_for '^diff +samples/s'
T send-keys -t ui 'r'
wait_for 'recompute auto \((on|off)\)'
T send-keys -t ui 'r'
wait_for 'recompute on'
T send-keys -t ui 'c'
wait_for ' 2bw '
T send-keys -t ui 'u'
wait_for ' pipedream (\(async[^)]*\) +)?mb '
T send-keys -t ui Down Down 't'
wait_for 'straggler d2 x2'
wait_for '>d2!'
T send-keys -t ui '?'
wait_for 'this help \(any key closes it\)'
T send-keys -t ui Escape
sleep 0.3
wait_for 'straggler d2 x2'
T capture-pane -p -t ui | grep -q 'this help' && bad "help still open after a key"
T resize-window -t ui -x 80 -y 24 2>/dev/null || T resize-pane -t ui -x 80 -y 24
wait_for 'samples/s'
T capture-pane -p -t ui | awk 'length($0) > 80 { exit 1 }' || bad "lines wider than 80 after resize"
T resize-window -t ui -x 60 -y 20 2>/dev/null || T resize-pane -t ui -x 60 -y 20
wait_for 'terminal too small'
T resize-window -t ui -x 120 -y 40 2>/dev/null || T resize-pane -t ui -x 120 -y 40
wait_for 'samples/s'
T send-keys -t ui 's'
wait_for 'saved '
ls "$dir"/*.plan.json >/dev/null 2>&1 || bad "s wrote no plan file"
T send-keys -t ui 'q'
check_restored "q"

# 2. Ctrl-C quits too and restores the terminal; monochrome on a vt100
start TERM=vt100
wait_for 'samples/s [0-9.]+'
colours vt100 no
T send-keys -t ui '-'
wait_for 'GPUs 12 '
T send-keys -t ui C-c
check_restored "Ctrl-C"

# 3. NO_COLOR on a colour terminal
start TERM=xterm-256color NO_COLOR=1
wait_for 'samples/s [0-9.]+'
colours NO_COLOR no
T send-keys -t ui 'q'
check_restored "NO_COLOR"

# 4. a file that fails to load is shown in the UI, not a crash
rm -f "$dir/rc"
T kill-server >/dev/null 2>&1
sock=plumb-ui-e2e-$$-9
T new-session -d -x 100 -y 30 -s ui "'$P' ui /nonexistent/plan.json; echo \$? > '$dir/rc'; sleep 5"
wait_for 'error: /nonexistent/plan.json: '
T send-keys -t ui 'q'
wait_file "$dir/rc" && [ "$(cat "$dir/rc")" = 0 ] || bad "load error: bad exit"

# 5. plumb ui --model: GPT-3 175B at tp 8 x pp 8 x dp 16 on 1024 A100s with plan's
# --tp-overlap full; tp down (dp follows), ZeRO-1, sequence parallelism refused at tp 1
# (tp overlap n/a there), save, and plumb sim of the plan (which carries the tp overlap)
rm -f "$dir/rc"
T kill-server >/dev/null 2>&1
sock=plumb-ui-e2e-$$-4
T new-session -d -x 120 -y 40 -s ui "'$P' ui ${GPT3[*]} --gpus 1024 --tp 8 --pp 8 --dp 16 \
    --global-batch 1536 --recompute full --tp-overlap full -o '$dir'; echo \$? > '$dir/rc'; \
    sleep 5"
wait_for 'GPUs 1024 = tp 8 x pp 8 x dp 16 +mbs 1 +v 1 +recomp full +sp off +zero 0' 30
wait_for '^tpo full +opg off +p2p overlap +grad fp32 +state fp32 +attn standard +bal off'
wait_for 'memory per pipeline rank'
wait_for '   7 7 +896-1023 '
wait_for 'tokens/s [0-9]+ +MFU [0-9.]+%'
T send-keys -t ui 'G'
wait_for 'GPUs 1024 = tp 4 x pp 8 x dp 32' 30
T send-keys -t ui 'o'
wait_for 'zero 1' 30
T send-keys -t ui '?'
wait_for 'tensor-parallel ranks up / down'
T send-keys -t ui Escape
T send-keys -t ui 's'
wait_for 'saved .*gpt3-175b-1024gpu-1f1b-flush.plan.json' 30
T send-keys -t ui 'GGGa'
wait_for 'kept the layout: --sequence-parallel: expected --tp 2 or more' 60
wait_for 'tp 1 x pp 8 x dp 128 .*sp off'
wait_for '^tpo n/a +opg off'
T send-keys -t ui 'q'
wait_file "$dir/rc" 30 && [ "$(cat "$dir/rc")" = 0 ] || bad "--model: bad exit"
"$P" sim "$dir/gpt3-175b-1024gpu-1f1b-flush.plan.json" --json > "$dir/sim.json" 2>&1 ||
    bad "--model: plumb sim of the saved plan: $(head -c 300 "$dir/sim.json")"
grep -q '"tp":	4' "$dir/sim.json" && grep -q '"dp":	32' "$dir/sim.json" &&
    grep -q '"zero":	1' "$dir/sim.json" || bad "--model: the saved plan is not tp 4 dp 32 zero 1"
grep -q '"tp_overlap":[[:space:]]*"full"' "$dir/gpt3-175b-1024gpu-1f1b-flush.plan.json" ||
    bad "--model: the saved plan lacks the tp overlap"

[ $fail = 0 ] && echo "ui: ok"
exit $fail
