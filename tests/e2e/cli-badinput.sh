#!/usr/bin/env bash
# cli-badinput.sh: bad flags and bad output paths given to the real binary: one line naming
# the option and the path, exit status 2, no work done first, and no file written or
# destroyed (an output path that is an input, a folder, or in a missing folder is refused
# before the command reads or trains anything).
. "$(dirname "$0")/lib/start.sh" # set -u, P, d (removed on exit), fail=0
. "$(dirname "$0")/lib/expect.sh" # expect_bad NAME PATTERN CMD...
M=examples/models/fmnist-mlp.json
cp profiles/pipedream/alexnet.json "$d/prof.json"
cp profiles/clusters/cluster-a-4x4.json "$d/cluster.json"
cp "$M" "$d/model.json"
cp tests/data/pipedream_tiny_graph.txt "$d/graph.txt"
sum() { cksum "$d/prof.json" "$d/cluster.json" "$d/model.json" "$d/graph.txt"; }
before=$(sum)

expect_bad plan-out-is-profile '-o .*prof.json: is the input' \
    "$P" plan -p "$d/prof.json" -c "$d/cluster.json" -o "$d/prof.json"
expect_bad plan-out-is-cluster '-o .*cluster.json: is the input' \
    "$P" plan -p "$d/prof.json" -c "$d/cluster.json" -o "$d/cluster.json"
expect_bad plan-out-folder '-o .*: is a folder; expected a file name' \
    "$P" plan -p "$d/prof.json" -c "$d/cluster.json" -o "$d"
expect_bad plan-out-missing-folder 'folder .*/nope does not exist' \
    "$P" plan -p "$d/prof.json" -c "$d/cluster.json" -o "$d/nope/plan.json"
expect_bad profile-out-is-model '-o .*model.json: is the input' \
    "$P" profile "$d/model.json" --batch 4 -o "$d/model.json"
expect_bad profile-out-missing-folder 'profile: -o .*: folder .* does not exist' \
    "$P" profile "$d/model.json" --batch 4 -o "$d/nope/p.json"
expect_bad train-save-missing-folder 'train: --save .*: folder .* does not exist' \
    "$P" train "$d/model.json" --steps 1 --save "$d/nope/x.ckpt"
expect_bad train-save-is-model '--save .*model.json: is the input' \
    "$P" train "$d/model.json" --steps 1 --save "$d/model.json"
expect_bad train-trace-folder '--trace .*: is a folder' \
    "$P" train "$d/model.json" --steps 1 --schedule gpipe --stages 2 --trace "$d"
if [ "$(id -u)" != 0 ]; then # root writes anywhere
    mkdir "$d/ro" && chmod 555 "$d/ro"
    expect_bad train-save-read-only 'folder .*/ro is not writable' \
        "$P" train "$d/model.json" --steps 1 --save "$d/ro/x.ckpt"
fi
# an output path that is a FIFO or a device is refused before any work: the atomic write
# renamed a regular file over it (as root, plan -o /dev/null replaced the system's
# /dev/null with the plan)
mkfifo "$d/ofifo"
# a sequence longer than the learned positions: the search names --seq-len, as a fixed layout does
expect_bad plan-search-seq-len "plan: --seq-len: expected 1 to the model's 1024 learned positions" \
    "$P" plan --model examples/llm/gpt2.json -c profiles/clusters/dgx-a100-80g.json --gpus 8 \
    --global-batch 16 --seq-len 2048
expect_bad sweep-model-seq-len "sweep: --seq-len: expected 1 to the model's 1024 learned positions" \
    "$P" sweep --model examples/llm/gpt2.json -c profiles/clusters/dgx-a100-80g.json --gpus 8..16 \
    --global-batch 16 --seq-len 2048
# --grad-accum takes fused or unfused: one line naming the option, exit 2, from every command
# that lays a transformer out or profiles it
GA_M=(--model examples/llm/gpt2.json -c profiles/clusters/dgx-a100-80g.json)
expect_bad plan-grad-accum 'plan: --grad-accum: expected fused or unfused .got "foo".$' \
    "$P" plan "${GA_M[@]}" --tp 1 --pp 2 --dp 4 --global-batch 16 --grad-accum foo
expect_bad plan-search-grad-accum 'plan: --grad-accum: expected fused or unfused .got "foo".$' \
    "$P" plan "${GA_M[@]}" --gpus 8 --global-batch 16 --grad-accum foo
expect_bad profile-grad-accum 'profile: --grad-accum: expected fused or unfused .got "foo".$' \
    "$P" profile "${GA_M[@]}" --grad-accum foo
expect_bad sweep-grad-accum 'sweep: --grad-accum: expected fused or unfused .got "foo".$' \
    "$P" sweep "${GA_M[@]}" --gpus 8..16 --global-batch 16 --grad-accum foo
expect_bad ui-grad-accum 'ui: --grad-accum: expected fused or unfused .got "foo".$' \
    "$P" ui "${GA_M[@]}" --tp 1 --pp 2 --dp 4 --global-batch 16 --grad-accum foo --snapshot 80x24
# a sequence whose blocks' figures pass the profile's bounds at no layout: the search gives
# the fixed layout's line (it blamed "--microbatch-size ... (got 0)")
expect_bad plan-search-seq-len-huge '^plumb: plan: --seq-len: 100000000 tokens make a block take .* ms for its backward (layers\[1\]\.backward_ms), beyond the 1e+09 ms a profile takes' \
    "$P" plan --model examples/llm/llama3-8b.json -c profiles/clusters/dgx-h100.json --gpus 64 \
    --global-batch 8 --seq-len 100000000
# in-bounds options or a slow device that make an analytic profile's figure leave its bounds:
# the line names the option or the cluster's field that did it, with the figure (it named
# only the figure: "(analytic profile): layers[1].backward_ms: expected a number ...")
LL=(--model examples/llm/llama3-8b.json -c profiles/clusters/dgx-h100.json --tp 8 --pp 1 --dp 1)
expect_bad plan-llm-seq-len-saved '^plumb: plan: --seq-len: 100000000 tokens make a block keep 8.00041e+16 bytes for its backward (layers\[1\]\.saved_bytes), beyond the 1e+15 a profile takes' \
    "$P" plan "${LL[@]}" --global-batch 1 --seq-len 100000000
expect_bad plan-llm-seq-mbs-activations '^plumb: plan: --seq-len: 100000000 tokens x --microbatch-size 1048576 make .* bytes (layers\[0\]\.activation_bytes), beyond the 1e+15' \
    "$P" plan "${LL[@]}" --global-batch 1048576 --microbatch-size 1048576 --seq-len 100000000 \
    --attention flash
sed 's/"bf16": 312/"bf16": 1e-6/' profiles/clusters/dgx-a100-80g.json >"$d/slow-peak.json"
sed 's/"memory_gbyte_per_s": 2039/"memory_gbyte_per_s": 1e-6/' \
    profiles/clusters/dgx-a100-80g.json >"$d/slow-mem.json"
expect_bad plan-llm-slow-peak 'slow-peak.json: device_types\[0\]\.peak_tflops_by_precision\.bf16: 1e-06 TFLOP/s make a block take 1.25636e+09 ms for its forward (layers\[1\]\.forward_ms), beyond the 1e+09 ms' \
    "$P" plan --model examples/llm/gpt3-175b.json -c "$d/slow-peak.json" --tp 8 --pp 16 --dp 1 \
    --global-batch 64
expect_bad plan-llm-slow-memory 'slow-mem.json: device_types\[0\]\.memory_gbyte_per_s: 1e-06 GB/s make a block take .* ms for its forward' \
    "$P" plan --model examples/llm/gpt3-175b.json -c "$d/slow-mem.json" --tp 8 --pp 16 --dp 1 \
    --global-batch 64
rm -f "$d/slow-peak.json" "$d/slow-mem.json"
# the work budget (docs/sim.md): a run whose simulations would take minutes is refused
# before any is run, naming the option and the estimate against the limit (plan took 21.9 s,
# at --stages 16 x 500000 214 s, auto over 300 s and 8 GB, sweep over 30 s, plan --model's
# search 102.7 s)
AX=(-p profiles/pipedream/alexnet.json -c profiles/clusters/cluster-a-4x4.json)
expect_bad plan-microbatches-budget '^plumb: .*: --microbatches: a plan the search must simulate makes about 2.26e+08 actions (12 stages x 1048576 microbatches), above the 1e+08 one run may take' \
    "$P" plan "${AX[@]}" --microbatches 1048576
expect_bad plan-stages-microbatches-budget '^plumb: .*: --microbatches: a plan the search must simulate makes about 1.44e+08 actions (16 stages x 500000 microbatches), above the 1e+08 one run may take' \
    "$P" plan "${AX[@]}" --microbatches 500000 --stages 16
expect_bad plan-auto-microbatches-budget '^plumb: .*: --microbatches: a plan the search must simulate makes about 2.26e+08 actions (12 stages x 1048576 microbatches), above the 1e+08 one run may take' \
    "$P" plan "${AX[@]}" --microbatches 1048576 --schedule auto
expect_bad sweep-microbatches-budget '^plumb: .*: --microbatches: a plan the search must simulate makes about 1.51e+08 actions (8 stages x 1048576 microbatches), above the 1e+08 one run may take' \
    "$P" sweep "${AX[@]}" --microbatches 1048576 --gpus 8..16
expect_bad sim-microbatches-budget '^plumb: .*vgg16-4stage-1f1b.json: --\?microbatches: .* to simulate' \
    "$P" sim examples/plans/vgg16-4stage-1f1b.json --microbatches 1048576 --iterations 4
expect_bad plan-llm-global-batch-budget '^plumb: plan: --global-batch: a layout the search simulates makes about 1.13e+08 actions (12 stages x 524288 microbatches), above the 1e+08 one run may take' \
    "$P" plan --model examples/llm/gpt2.json -c profiles/clusters/dgx-a100-80g.json --gpus 3072 \
    --global-batch 16777216
expect_bad plan-llm-layout-budget '^plumb: .*gpt2.json: the layout: microbatches: 2 stages x 4194304 microbatches x 3 iterations make about 1.51e+08 actions to simulate, above the 1e+08' \
    "$P" plan --model examples/llm/gpt2.json -c profiles/clusters/dgx-a100-80g.json --gpus 16 \
    --tp 1 --pp 2 --dp 8 --global-batch 16777216
expect_bad plan-out-fifo '-o .*ofifo: is a FIFO; expected a file name' \
    "$P" plan -p "$d/prof.json" -c "$d/cluster.json" -o "$d/ofifo"
expect_bad sim-trace-fifo '--trace .*ofifo: is a FIFO' \
    "$P" sim examples/plans/vgg16-4stage-1f1b.json --trace "$d/ofifo"
expect_bad train-save-fifo '--save .*ofifo: is a FIFO' \
    "$P" train "$d/model.json" --steps 1 --save "$d/ofifo"
[ -p "$d/ofifo" ] || { echo "FAIL: the FIFO was replaced"; fail=1; }
if [ "$(id -u)" = 0 ] && mknod "$d/null" c 1 3 2>/dev/null; then # a copy of /dev/null
    expect_bad profile-out-device '-o .*null: is a character device' \
        "$P" profile "$d/model.json" --batch 4 -o "$d/null"
    expect_bad sweep-svg-device '--svg .*null: is a character device' \
        "$P" sweep -p "$d/prof.json" -c "$d/cluster.json" --gpus 1..2 --svg "$d/null"
    [ -c "$d/null" ] || { echo "FAIL: the device was replaced"; fail=1; }
    rm -f "$d/null"
fi
rm -f "$d/ofifo"
# numbers are decimal ("0x10" was read as 16), and one too small to represent says so
# (5e-324 was called not > 0)
expect_bad num-hex '^plumb: sim: --memory-limit: expected a decimal number > 0 .*(got "0x10")' \
    "$P" sim examples/plans/vgg16-4stage-1f1b.json --memory-limit 0x10
expect_bad num-subnormal '(got "5e-324", too small to represent)' \
    "$P" sim examples/plans/vgg16-4stage-1f1b.json --memory-limit 5e-324
# an argument that a command does not take is refused, not ignored (plumb --version extra
# printed the version and exited 0; plumb help sim printed the general help)
expect_bad version-extra '^plumb: --version: expected no arguments (got "extra" too)' \
    "$P" --version extra
expect_bad help-extra '^plumb: help: expected at most one command (got "extra" too)' \
    "$P" help sim extra
expect_bad help-unknown '^plumb: --help: unknown command "bogus"' "$P" --help bogus
ok help-command "$P" help sim
has help-command '^usage: plumb sim PLAN.json'
# info --model reads checkpoints only: with none among the files it was ignored (exit 0)
expect_bad info-model-no-checkpoint '^plumb: info: --model: goes with a checkpoint file' \
    "$P" info --model "$d/model.json" "$d/prof.json"
expect_bad info-folder 'cannot read: Is a directory (expected a file)' "$P" info "$d"
expect_bad sim-folder 'cannot read: Is a directory' "$P" sim "$d"
expect_bad schedule-import-folder 'cannot read: Is a directory (expected a CSV file)' \
    "$P" schedule --kind gpipe --stages 2 --microbatches 2 --import "$d"
# an option for a sim output not asked for: refused (it was ignored, exit 0)
expect_bad sim-hops-alone '^plumb: sim: --trace-hops: goes with --trace or --gantt' \
    "$P" sim examples/plans/vgg16-4stage-1f1b.json --trace-hops --svg "$d/x.svg"
expect_bad sim-trace-limit-alone '^plumb: sim: --trace-limit: goes with --trace$' \
    "$P" sim examples/plans/vgg16-4stage-1f1b.json --trace-limit 2
expect_bad sim-width-alone '^plumb: sim: --width: goes with --gantt$' \
    "$P" sim examples/plans/vgg16-4stage-1f1b.json --width 50 --json
expect_bad sim-iterations-garbage '--iterations: expected an integer from 1 to' \
    "$P" sim examples/plans/vgg16-4stage-1f1b.json --iterations 4x
expect_bad train-lr-nan '--lr: expected a number > 0' "$P" train "$d/model.json" --lr nan
expect_bad train-lr-huge '--lr: expected a number > 0 and at most 1000' \
    "$P" train "$d/model.json" --lr 1e300
# a pipelined run whose loss diverges stops with the sequential run's line, exit 1, and
# leaves the --save file as it was (it trained on to a NaN loss, exit 0, and saved NaN weights)
echo keep >"$d/keep.ckpt"
for sch in "" "--schedule gpipe --stages 2" "--schedule pipedream --stages 2"; do
    # shellcheck disable=SC2086
    "$P" train "$d/model.json" --steps 30 --lr 1000 --data synthetic --quiet $sch \
        --save "$d/keep.ckpt" >"$d/out" 2>"$d/err"
    rc=$?
    [ $rc = 1 ] && grep -q '^plumb: the loss diverged (not finite) at step [0-9]*; lower --lr$' "$d/err" &&
        [ "$(cat "$d/keep.ckpt")" = keep ] ||
        { echo "FAIL train-diverged '$sch': exit $rc: $(head -c 200 "$d/err")"; fail=1; }
done
rm -f "$d/keep.ckpt"
expect_bad train-momentum-over-1 '--momentum: expected a number >= 0 and at most 1' \
    "$P" train "$d/model.json" --momentum 1.5
expect_bad train-checkpoint-missing-parent 'train: --checkpoint .*: folder .*/nope does not exist' \
    "$P" train "$d/model.json" --steps 1 --checkpoint "$d/nope/ck" --checkpoint-every 1
expect_bad train-checkpoint-is-file '--checkpoint .*model.json: is not a folder' \
    "$P" train "$d/model.json" --steps 1 --checkpoint "$d/model.json" --checkpoint-every 1
# a fresh run into a checkpoint folder of another run is refused before training: it
# replaced that run's file of the same step and removed its older ones
mkdir "$d/ck" && "$P" train "$d/model.json" --steps 2 --samples 64 --batch 8 --data synthetic \
    --quiet --checkpoint "$d/ck" --checkpoint-every 1 >/dev/null 2>&1
ckbefore=$(cksum "$d"/ck/*)
expect_bad train-checkpoint-other-run '--checkpoint .*ck: holds the checkpoints of another run (the newest ckpt-00000002.ckpt)' \
    "$P" train examples/models/fmnist-cnn.json --steps 3 --samples 64 --batch 8 --data synthetic \
    --checkpoint "$d/ck" --checkpoint-every 1
[ "$(cksum "$d"/ck/*)" = "$ckbefore" ] || { echo "FAIL: the other run's checkpoints changed"; fail=1; }
# a resumed run asked for fewer steps in all than its checkpoint took: refused before work
# (it trained 0 steps, said "resumed ... at step 1" of a step-2 checkpoint and exited 0)
expect_bad train-resume-fewer-steps '^plumb: train: --steps 1: expected at least the 2 steps that --resume .*ck/ckpt-00000002.ckpt took' \
    "$P" train "$d/model.json" --steps 1 --samples 64 --batch 8 --data synthetic \
    --checkpoint "$d/ck" --checkpoint-every 1 --resume "$d/ck"
expect_bad train-resume-fewer-epochs '^plumb: train: --epochs 1: expected at least the 2 steps .*(got 1 steps of 1 per epoch' \
    "$P" train "$d/model.json" --epochs 1 --samples 8 --batch 8 --data synthetic \
    --resume "$d/ck"
[ "$(cksum "$d"/ck/*)" = "$ckbefore" ] || { echo "FAIL: train-resume-fewer-steps changed the checkpoints"; fail=1; }
ok train-checkpoint-resumed "$P" train "$d/model.json" --steps 3 --samples 64 --batch 8 \
    --data synthetic --quiet --checkpoint "$d/ck" --checkpoint-every 1 --resume "$d/ck"
rm -rf "$d/ck"
# --save with a checkpoint name in the --checkpoint folder: refused before training (the
# run's checkpoint of that step replaced it, or its pruning removed it: the --save file lost)
mkdir "$d/ck"
expect_bad train-save-in-checkpoint-dir '--save .*ckpt-00000009.ckpt: is a checkpoint name of the --checkpoint folder' \
    "$P" train "$d/model.json" --steps 3 --samples 64 --batch 8 --data synthetic \
    --checkpoint "$d/ck" --checkpoint-every 1 --save "$d/ck/ckpt-00000009.ckpt"
[ -z "$(ls "$d/ck")" ] || { echo "FAIL: train-save-in-checkpoint-dir wrote checkpoints"; fail=1; }
rm -rf "$d/ck"
# --save onto the checkpoint the run resumes from or onto its --text file: refused (both
# were overwritten)
"$P" train "$d/model.json" --steps 1 --samples 64 --batch 8 --data synthetic --quiet \
    --save "$d/r.ckpt" >/dev/null 2>&1
cp README.md "$d/t.txt"
rsum=$(cksum "$d/r.ckpt" "$d/t.txt")
expect_bad train-save-is-resume '--save .*r.ckpt: is the input' "$P" train "$d/model.json" \
    --steps 2 --samples 64 --batch 8 --data synthetic --resume "$d/r.ckpt" --save "$d/./r.ckpt"
expect_bad train-save-is-text '--save .*t.txt: is the input' "$P" train examples/models/gpt-mini.json \
    --steps 1 --samples 8 --batch 8 --text "$d/t.txt" --save "$d/t.txt"
[ "$(cksum "$d/r.ckpt" "$d/t.txt")" = "$rsum" ] || { echo "FAIL: the resumed checkpoint or the text changed"; fail=1; }
rm -f "$d/r.ckpt" "$d/t.txt"
# --text or --data-dir with a data kind that does not read it: refused before any work
# (the run trained on the other data, exit 0)
expect_bad train-text-not-text '^plumb: --text: belongs to --data text (the data is synthetic)$' \
    "$P" train "$d/model.json" --steps 1 --samples 16 --batch 8 --data synthetic --text README.md
expect_bad train-data-dir-not-fmnist "^plumb: --data-dir: belongs to --data fashion-mnist (the data is text, the model's default)$" \
    "$P" train examples/models/gpt-mini.json --steps 1 --samples 8 --batch 8 --data-dir "$d"
# an empty path: the line names it "" and what was expected (it named no file: "plumb:
# cannot open: No such file or directory"; --data-dir '' read /train-images-idx3-ubyte.gz)
expect_bad sim-empty-path '^plumb: "": cannot open: an empty file name (expected a file)$' "$P" sim ''
expect_bad plan-empty-profile '^plumb: "": cannot open: an empty file name' \
    "$P" plan -p '' -c "$d/cluster.json"
expect_bad schedule-empty-csv '^plumb: "": cannot open: an empty file name (expected a CSV file)$' \
    "$P" schedule --kind gpipe --stages 2 --microbatches 2 --import ''
expect_bad train-empty-data-dir '^plumb: train: --data-dir: expected a folder (got "")$' \
    "$P" train "$d/model.json" --steps 1 --data-dir ''
# --devices beyond the backend's devices: refused before work (it printed the run's header,
# loaded the data, then failed with exit 1)
expect_bad train-devices-missing "^plumb: --devices: expected the workers' devices 0 to 1 (--device 0, --devices 2) to exist, device 1 is missing (the CPU backend has one device" \
    "$P" train "$d/model.json" --schedule gpipe --devices 2 --steps 1
expect_bad train-missing-value 'option --steps needs a value' "$P" train "$d/model.json" --steps
expect_bad train-flag-with-value 'option --help takes no value' "$P" train "$d/model.json" --help=1
expect_bad train-ambiguous 'ambiguous option --s ' "$P" train "$d/model.json" --s 3
expect_bad train-unknown 'unknown option --frob;' "$P" train "$d/model.json" --frob
expect_bad plan-short-missing-value 'option -p needs a value' "$P" plan -p
expect_bad pipedream-outdir-missing '--output_directory .*/nope: folder does not exist' \
    "$P" plan --pipedream -f "$d/graph.txt" -n 4 -b 1e9 -o "$d/nope"
expect_bad pipedream-outdir-is-file '--output_directory .*graph.txt: is not a folder' \
    "$P" plan --pipedream -f "$d/graph.txt" -n 4 -b 1e9 -o "$d/graph.txt"
expect_bad pipedream-json-out-missing-folder '--output_directory .*: folder .*/nope does not' \
    "$P" plan --pipedream -f "$d/graph.txt" -n 4 -b 1e9 -o "$d/nope/plan.json"

# plumb ui --model refuses a bad runtime option with plan --model's own line ("plan:" read
# as "ui:"), exit 2, nothing printed (the check and its messages have one owner)
GPT2=(--model examples/llm/gpt2.json -c profiles/clusters/dgx-a100-80g.json --global-batch 16)
for bad in "--tp 2 --pp 2 --dp 2 --tp-overlap sometimes" "--tp 2 --pp 2 --dp 2 --p2p async" \
    "--tp 2 --pp 2 --dp 2 --grad-reduce fp16" "--tp 2 --pp 2 --dp 2 --optimizer-state int8" \
    "--tp 2 --pp 2 --dp 2 --attention sparse" "--tp 1 --pp 2 --dp 4 --tp-overlap full" \
    "--pp 2 --dp 4 --gpus 8 --tp-overlap backward" \
    "--tp 2 --pp 2 --dp 2 --zero 0 --overlap-param-gather" \
    "--tp 2 --pp 2 --dp 2 --overlap-param-gather" \
    "--tp 2 --pp 2 --dp 2 --zero 1 --overlap-param-gather --schedule pipedream" \
    "--tp 2 --pp 2 --dp 2 --precision fp32 --grad-reduce bf16" \
    "--tp 2 --pp 2 --dp 2 --precision fp16 --optimizer-state bf16" \
    "--tp 2 --pp 2 --dp 2 --checkpoint-layers 2" \
    "--tp 2 --pp 2 --dp 2 --p2p sync --schedule zb-v" "--tp 2 --pp 2 --dp 2 --recompute some"; do
    # shellcheck disable=SC2086
    "$P" plan "${GPT2[@]}" $bad >"$d/out" 2>"$d/err"
    want=$(sed 's/^plumb: plan: /plumb: ui: /' "$d/err")
    case "$want" in "plumb: ui: --"*) ;; *) echo "FAIL plan $bad: not an option's line: $want"
        fail=1 ;; esac
    # shellcheck disable=SC2086
    expect_bad "ui $bad" '^plumb: ui: --' "$P" ui "${GPT2[@]}" $bad --snapshot 80x24
    [ "$(cat "$d/err")" = "$want" ] ||
        { echo "FAIL ui $bad: '$(cat "$d/err")', plan says '$want'"; fail=1; }
done

# sweep --model takes the same line for a bad --recompute
expect_bad sweep-recompute '^plumb: sweep: --recompute: expected none, selective or full (got "some")$' \
    "$P" sweep "${GPT2[@]}" --recompute some

# --fp8-param-gather (FP8 primary weights) without what Megatron-Core requires: --precision
# fp8 (TransformerConfig.fp8_param) and --zero 1 (the distributed optimizer); plan's fixed
# layout and search and sweep --model give the option's one line, exit 2
FPG_ZERO="--fp8-param-gather: expected --zero 1 (Megatron-Core's FP8 primary weights need the distributed optimizer)"
expect_bad plan-fp8pg-bf16 '^plumb: plan: --fp8-param-gather: belongs to --precision fp8 (FP8 primary weights) (got --precision bf16)$' \
    "$P" plan "${GPT2[@]}" --tp 2 --pp 2 --dp 2 --zero 1 --fp8-param-gather
expect_bad plan-fp8pg-zero0 "^plumb: plan: $FPG_ZERO (got --zero 0)\$" \
    "$P" plan "${GPT2[@]}" --tp 2 --pp 2 --dp 2 --precision fp8 --fp8-param-gather
expect_bad plan-fp8pg-search-zero "^plumb: plan: $FPG_ZERO (got no --zero)\$" \
    "$P" plan "${GPT2[@]}" --gpus 8 --precision fp8 --fp8-param-gather
expect_bad sweep-fp8pg-bf16 '^plumb: sweep: --fp8-param-gather: belongs to --precision fp8' \
    "$P" sweep "${GPT2[@]}" --gpus 8..16 --zero 1 --fp8-param-gather
expect_bad sweep-fp8pg-zero "^plumb: sweep: $FPG_ZERO (got no --zero)\$" \
    "$P" sweep "${GPT2[@]}" --gpus 8..16 --precision fp8 --fp8-param-gather

# a plan file with "p2p": "sync" on a V-placed kind (zb-v, dualpipev), which plan -p and
# sim --p2p refuse: its loader refuses it with that rule, naming the field (sim ran it into
# the engine's deadlock line, or simulated dualpipev and exited 0; ui and info showed it)
"$P" plan -p "$d/prof.json" -c "$d/cluster.json" --schedule dualpipev --gpus 4 \
    -o "$d/dpv.json" >/dev/null 2>&1
sed 's/^\t"optimizer":/\t"p2p":\t"sync",\n&/' "$d/dpv.json" >"$d/dpv-sync.json"
for c in sim info "ui --snapshot 80x24"; do
    # shellcheck disable=SC2086
    expect_bad "$c p2p-sync-dualpipev" "dpv-sync.json: p2p: expected overlap with schedule dualpipev (its V placement deadlocks" \
        "$P" $c "$d/dpv-sync.json"
done
# --schedule of a kind that cannot run the plan's stages: the what-if's line (the engine's
# layout checks named the file's fields: "dpv.json: chunks: 1f1b-flush runs one stage per
# rank", "dpv.json: workers: interleaved: stage 2 is a chunk of rank 0, ...")
expect_bad sim-schedule-one-chunk '^plumb: sim: --schedule: 1f1b-flush runs 1 stage per device (the plan has 2, placed for dualpipev)$' \
    "$P" sim "$d/dpv.json" --schedule 1f1b-flush
expect_bad sim-schedule-placement '^plumb: sim: --schedule: interleaved places a device.s stages otherwise than the plan.s dualpipev' \
    "$P" sim "$d/dpv.json" --schedule interleaved
ok sim-schedule-same-placement "$P" sim "$d/dpv.json" --schedule zb-v
rm -f "$d/dpv.json" "$d/dpv-sync.json"

# plumb ui --snapshot of a file that does not load: the loader's line, exit 2, no frame
# (it printed a frame saying "nothing loaded" and exited 0)
printf '{"format": "plumb-plan/1",' > "$d/trunc.json"
expect_bad ui-snapshot-bad-plan '^plumb: ui: .*trunc.json: malformed JSON at line 1' \
    "$P" ui "$d/trunc.json" --snapshot 80x24
expect_bad ui-snapshot-bad-cluster '^plumb: ui: .*prof.json: format: expected "plumb-cluster/1"' \
    "$P" ui -p "$d/prof.json" -c "$d/prof.json" --snapshot 80x24
rm -f "$d/trunc.json"

# a minibatch past 2^24 samples: the planner multiplied it by microbatch counts in ints
# (UBSan: signed overflow; the plain build printed "2147483647 samples per iteration")
expect_bad import-minibatch-huge '^plumb: import: --minibatch: expected an integer from 1 to 16777216' \
    "$P" import pipedream "$d/graph.txt" -b 1000000000 -o "$d/big.json"
sed 's/"minibatch":[^,]*,/"minibatch": 16777217,/' "$d/prof.json" > "$d/big.json"
expect_bad plan-profile-minibatch-huge 'big.json: minibatch: expected an integer from 1 to 16777216 .got 16777217.' \
    "$P" plan -p "$d/big.json" -c "$d/cluster.json"
rm -f "$d/big.json"

# plumb sim's runtime what-ifs (--recompute .. --optimizer-state): plan --model's parsers
# and rules, the same lines as plan's with "sim"; a what-if the profile has no figures for
# is refused, not approximated (selective recomputation would have been priced as none)
"$P" plan "${GPT2[@]}" --tp 2 --pp 2 --dp 2 -o "$d/g.json" >/dev/null 2>&1
"$P" plan "${GPT2[@]}" --tp 2 --pp 2 --dp 2 --precision fp32 -o "$d/g32.json" >/dev/null 2>&1
"$P" plan "${GPT2[@]}" --tp 1 --pp 2 --dp 4 -o "$d/g1.json" >/dev/null 2>&1
"$P" plan "${GPT2[@]}" --tp 2 --pp 2 --dp 2 --zero 1 --overlap-param-gather \
    -o "$d/gz.json" >/dev/null 2>&1
V=examples/plans/vgg16-4stage-1f1b.json
expect_bad sim-recompute-word '^plumb: sim: --recompute: expected none, selective or full (got "some")$' \
    "$P" sim "$d/g.json" --recompute some
expect_bad sim-zero-2 '^plumb: sim: --zero: expected an integer from 0 to 1 (got "2")$' \
    "$P" sim "$d/g.json" --zero 2
expect_bad sim-tp-overlap-word '^plumb: sim: --tp-overlap: expected none, backward or full (got "x")$' \
    "$P" sim "$d/g.json" --tp-overlap x
expect_bad sim-grad-reduce-fp16 '^plumb: sim: --grad-reduce: expected fp32 or bf16 (got "fp16")$' \
    "$P" sim "$d/g.json" --grad-reduce fp16
expect_bad sim-optimizer-state-int8 '^plumb: sim: --optimizer-state: expected fp32 or bf16 (got "int8")$' \
    "$P" sim "$d/g.json" --optimizer-state int8
expect_bad sim-opg-value '^plumb: sim: option --overlap-param-gather takes no value' \
    "$P" sim "$d/g.json" --overlap-param-gather=1
expect_bad sim-opg-zero0 '^plumb: sim: --overlap-param-gather: belongs to --zero 1 (the distributed optimizer.s parameter all-gather)$' \
    "$P" sim "$d/g.json" --overlap-param-gather
expect_bad sim-zero0-of-opg-plan '^plumb: sim: --overlap-param-gather: belongs to --zero 1' \
    "$P" sim "$d/gz.json" --zero 0
expect_bad sim-opg-grad-sync-end '^plumb: sim: --overlap-param-gather: expected --grad-sync overlap' \
    "$P" sim "$d/gz.json" --grad-sync end
expect_bad sim-opg-async '^plumb: sim: --overlap-param-gather: expected a synchronous schedule (got pipedream' \
    "$P" sim "$d/g.json" --schedule pipedream --zero 1 --overlap-param-gather
expect_bad sim-fp8pg-bf16 '^plumb: sim: --fp8-param-gather: belongs to --precision fp8 (FP8 primary weights) (got --precision bf16)$' \
    "$P" sim "$d/g.json" --zero 1 --fp8-param-gather
expect_bad sim-grad-reduce-fp32-plan '^plumb: sim: --grad-reduce bf16: belongs to --precision bf16 or fp8 (got --precision fp32)$' \
    "$P" sim "$d/g32.json" --grad-reduce bf16
expect_bad sim-optimizer-state-fp32-plan '^plumb: sim: --optimizer-state bf16: belongs to --precision bf16 or fp8 (got --precision fp32)$' \
    "$P" sim "$d/g32.json" --optimizer-state bf16
expect_bad sim-tp-overlap-tp1 '^plumb: sim: --tp-overlap: expected --tp 2 or more (no tensor-parallel collectives to overlap) (got --tp 1)$' \
    "$P" sim "$d/g1.json" --tp-overlap full
expect_bad sim-selective-no-figures '^plumb: sim: --recompute selective: expected a profile with selective recomputation.s figures .*vgg16-4stage-1f1b.json.s profile "vgg16" has none$' \
    "$P" sim "$V" --recompute selective
expect_bad sim-tp-overlap-vgg '^plumb: sim: --tp-overlap: expected --tp 2 or more' \
    "$P" sim "$V" --tp-overlap backward
# FP8 primary weights are a transformer's blocks' weights: a VGG plan at fp8 with ZeRO-1
# (which the rules take) is refused for want of blocks rather than simulated unchanged
sed -e "s#\"\.\./\.\./#\"$PWD/#" -e 's/^  "optimizer": /  "precision": "fp8", "zero": 1,\n&/' \
    "$V" >"$d/v8.json"
expect_bad sim-fp8pg-no-blocks '^plumb: sim: --fp8-param-gather: expected a transformer.s plan .*v8.json.s profile "vgg16" has no TransformerBlock layers$' \
    "$P" sim "$d/v8.json" --fp8-param-gather
rm -f "$d/g.json" "$d/g32.json" "$d/g1.json" "$d/gz.json" "$d/v8.json"
# --pipeline-layout (Megatron-Core's layout string, docs/llm.md "Uneven splits"): each
# refusal one line, exit 2, no plan written (Llama 3 70B's 80 blocks, pp 8)
PLL=(plan --model examples/llm/llama3-70b.json -c profiles/clusters/dgx-h100.json --tp 4
     --pp 8 --dp 2 --global-batch 256 -o "$d/pll.json")
for c in 'unknown|Et*2|(t*2|)*34,t*3|(t*2|)*3,tX|got .X. at character 30' \
    'space|Et*2|(t*2|)*34,t*3|(t*2|)*3,t L|got byte 0x20 at character 30' \
    'open|Et*2|(t*2|*34,t*3|(t*2|)*3,tL|expected no .(. inside the group' \
    'close|Et*2|t*2|)*34,t*3|(t*2|)*3,tL|expected .(. before the .). at character 10' \
    'unclosed|Et*2|(t*2|)*34,t*3|(t*2|*3,tL|expected .). to close the .(. at character 20' \
    'count|Et*|(t*2|)*34,t*3|(t*2|)*3,tL|expected a repeat count (digits) after the .\*. at character 3' \
    'twice|Et*2*2|(t*2|)*34,t*3|(t*2|)*3,tL|expected one repeat count, not a second' \
    'huge|Et*2|(t*2|)*99999999999999999999999,tL|expected at most 1048576 layers and separators' \
    'length|Et*2|(t*2|)*34,t*3|(t*2|)*2,ttL|multiple of --pp 8 (got 39)' \
    'no-E|tt*2|(t*2|)*34,t*2|(t*2|)*3,tL|expected the embedding E as the first layer' \
    'no-L|Et*2|(t*2|)*34,t*3|(t*2|)*3,tt|expected the loss L as the last layer' \
    'two-E|Et*2|(t*2|)*34,t*3|(t*2|)*3,EtL|expected E exactly once (got 2)' \
    't-count|Et*2|(t*2|)*34,t*3|(t*2|)*3,ttL|expected as many t as the model.s 80 layers (got 81)' \
    'mtp|Et*2|(t*2|)*34,t*3|(t*2|)*3,tmL|expected no MTP layer m' \
    'empty|Et*4|(t*2|)*33,t*3|(t*2|)*2,t*3||L|got virtual stage 38 (rank 6, chunk 4) empty'; do
    name=${c%%|*} rest=${c#*|} want=${c##*|}
    expect_bad_silent "plan-pipeline-layout-$name" "^plumb: plan: --pipeline-layout: .*$want" \
        "$d/pll.json" "$P" "${PLL[@]}" --pipeline-layout "${rest%|*}"
done
GOOD='Et*2|(t*2|)*34,t*3|(t*2|)*3,tL'
expect_bad_silent plan-pipeline-layout-interleave '^plumb: plan: --interleave: expected the layout.s 40 virtual stages / --pp 8 = 5 (got 4)' \
    "$d/pll.json" "$P" "${PLL[@]}" --pipeline-layout "$GOOD" --interleave 4
expect_bad_silent plan-pipeline-layout-uneven '^plumb: plan: --pipeline-layout: expected no --account-for-embedding-in-pipeline-split with it' \
    "$d/pll.json" "$P" "${PLL[@]}" --pipeline-layout "$GOOD" --account-for-embedding-in-pipeline-split
expect_bad_silent plan-pipeline-layout-balance '^plumb: plan: --balance: expected the even split, which balancing starts from (got --pipeline-layout)' \
    "$d/pll.json" "$P" "${PLL[@]}" --pipeline-layout "$GOOD" --balance
expect_bad_silent plan-pipeline-layout-search '^plumb: plan: --pipeline-layout: belongs to a fixed layout' \
    "$d/pll.json" "$P" "${PLL[@]}" --pipeline-layout "$GOOD" --search
expect_bad_silent plan-pipeline-layout-schedule '^plumb: plan: --pipeline-layout: expected 1 to 1 virtual stages per rank with schedule 1f1b-flush (got 5 over --pp 8)' \
    "$d/pll.json" "$P" "${PLL[@]}" --pipeline-layout "$GOOD" --schedule 1f1b-flush
expect_bad ui-pipeline-layout-empty '^plumb: ui: --pipeline-layout: expected every virtual stage' \
    "$P" ui --model examples/llm/llama3-70b.json -c profiles/clusters/dgx-h100.json --tp 4 \
    --pp 8 --dp 2 --global-batch 256 --snapshot 80x24 --pipeline-layout 'Et*4|(t*2|)*33,t*3|(t*2|)*2,t*3||L'
# an analytic profile says its precision and loss; a bad word there is the loader's line,
# and a plan file whose "precision" or "cross_entropy" contradicts its embedded profile's
# (the profile's times were made at bf16 with TE's loss) is refused by every command
ok llm-profile "$P" profile --model examples/llm/gpt2.json -c profiles/clusters/dgx-h100.json \
    --seq-len 512 --cross-entropy te -o "$d/llm.json"
sed 's/^\t"precision":\t"bf16"/\t"precision":\t"fp4"/' "$d/llm.json" > "$d/llm-fp4.json"
expect_bad plan-profile-precision-word 'llm-fp4.json: precision: expected one of fp32, tf32, bf16, fp16, fp8 .got "fp4".$' \
    "$P" plan -p "$d/llm-fp4.json" -c profiles/clusters/dgx-h100.json --gpus 8
ok llm-plan "$P" plan -p "$d/llm.json" -c profiles/clusters/dgx-h100.json --gpus 8 \
    -o "$d/llm-plan.json"
sed 's/^\t"precision":\t"bf16"/\t"precision":\t"fp32"/' "$d/llm-plan.json" > "$d/llm-fp32.json"
sed 's/^\t"cross_entropy":\t"te"/\t"cross_entropy":\t"unfused"/' "$d/llm-plan.json" > "$d/llm-ce.json"
for c in sim info "ui --snapshot 80x24"; do
    # shellcheck disable=SC2086
    expect_bad "$c plan-precision-not-the-profiles" 'llm-fp32.json: precision: expected bf16, the precision the profile was made at .got fp32.$' \
        "$P" $c "$d/llm-fp32.json"
    # shellcheck disable=SC2086
    expect_bad "$c plan-loss-not-the-profiles" 'llm-ce.json: cross_entropy: expected te, the loss the profile prices .got unfused.$' \
        "$P" $c "$d/llm-ce.json"
done
rm -f "$d/llm.json" "$d/llm-fp4.json" "$d/llm-plan.json" "$d/llm-fp32.json" "$d/llm-ce.json"

# plumb ui PLAN.json of a file that names its model re-plans it as ui --model: --planner is
# refused as with --model (before, it was silently ignored)
"$P" plan "${GPT2[@]}" --tp 2 --pp 2 --dp 2 -o "$d/gm.json" >/dev/null 2>&1
expect_bad ui-planner-with-model-file '^plumb: ui: --planner: expected no planner with .*gm.json, a plan file that names its model (its layouts are laid out as plumb plan --model lays them out)$' \
    "$P" ui "$d/gm.json" --planner even --snapshot 80x24
# plumb sim --zero 0 of a plan with overlap_param_gather or fp8_param_gather: the rule's
# line names the plan's setting and what to add; with it added, plan --model's iteration
# without the setting; --X and --no-X together are refused
"$P" plan "${GPT2[@]}" --tp 2 --pp 2 --dp 2 --zero 1 --overlap-param-gather \
    -o "$d/gz.json" >/dev/null 2>&1
F8P=(--model examples/llm/nemo/llama2-7b.json -c profiles/clusters/dgx-h100.json --global-batch 16
     --seq-len 1024 --precision fp8 --tp 2 --pp 2 --dp 2)
"$P" plan "${F8P[@]}" --zero 1 --fp8-param-gather -o "$d/g8.json" >/dev/null 2>&1
expect_bad sim-zero0-of-opg-plan-names-the-fix '^plumb: sim: --overlap-param-gather: belongs to --zero 1 (the distributed optimizer.s parameter all-gather) (the plan.s overlap_param_gather: add --no-overlap-param-gather)$' \
    "$P" sim "$d/gz.json" --zero 0
expect_bad sim-zero0-of-fp8pg-plan-names-the-fix '^plumb: sim: --fp8-param-gather: expected --zero 1 (Megatron-Core.s FP8 primary weights need the distributed optimizer) (got --zero 0) (the plan.s fp8_param_gather: add --no-fp8-param-gather)$' \
    "$P" sim "$d/g8.json" --zero 0
expect_bad sim-opg-and-no-opg '^plumb: sim: --no-overlap-param-gather: expected one of --overlap-param-gather and --no-overlap-param-gather (got both)$' \
    "$P" sim "$d/gz.json" --overlap-param-gather --no-overlap-param-gather
expect_bad sim-no-fp8pg-and-fp8pg '^plumb: sim: --fp8-param-gather: expected one of --fp8-param-gather and --no-fp8-param-gather (got both)$' \
    "$P" sim "$d/g8.json" --no-fp8-param-gather --fp8-param-gather
iter() { python3 -c 'import json, sys; print(json.load(sys.stdin)["iteration_s"])'; }
for c in "gz.json|--zero 0 --no-overlap-param-gather|${GPT2[*]} --tp 2 --pp 2 --dp 2 --zero 0" \
    "gz.json|--no-overlap-param-gather|${GPT2[*]} --tp 2 --pp 2 --dp 2 --zero 1" \
    "g8.json|--zero 0 --no-fp8-param-gather|${F8P[*]} --zero 0" \
    "g8.json|--no-fp8-param-gather|${F8P[*]} --zero 1"; do
    f=${c%%|*} rest=${c#*|}
    # shellcheck disable=SC2086
    got=$("$P" sim "$d/$f" ${rest%%|*} --json 2>&1 | iter 2>&1)
    # shellcheck disable=SC2086
    want=$("$P" plan ${rest#*|} --json 2>&1 | iter 2>&1)
    [ -n "$want" ] && [ "$got" = "$want" ] ||
        { echo "FAIL sim $f ${rest%%|*}: $got s, plan --model ${rest#*|}: $want s"; fail=1; }
done
rm -f "$d/gm.json" "$d/gz.json" "$d/g8.json"

# plumb sim --checkpoint-layers K: plan --model's bound (the blocks of a virtual stage: gpt2's
# 12 over pp 2 gives 6) and rule (full recomputation's own), with its lines; a plan file whose
# checkpoint_layers breaks either is refused when read, one line naming the file and field
"$P" plan "${GPT2[@]}" --tp 2 --pp 2 --dp 2 --recompute full -o "$d/gc.json" >/dev/null 2>&1
"$P" plan "${GPT2[@]}" --tp 2 --pp 2 --dp 2 -o "$d/gn.json" >/dev/null 2>&1
expect_bad sim-checkpoint-over-the-stage '^plumb: sim: --checkpoint-layers: expected at most the 6 blocks of a virtual stage (got 7)$' \
    "$P" sim "$d/gc.json" --checkpoint-layers 7
expect_bad plan-checkpoint-over-the-stage '^plumb: plan: --checkpoint-layers: expected at most the 6 blocks of a virtual stage (got 7)$' \
    "$P" plan "${GPT2[@]}" --tp 2 --pp 2 --dp 2 --recompute full --checkpoint-layers 7
expect_bad sim-checkpoint-without-full '^plumb: sim: --checkpoint-layers: belongs to --recompute full$' \
    "$P" sim "$d/gn.json" --checkpoint-layers 2
expect_bad sim-checkpoint-with-selective '^plumb: sim: --checkpoint-layers: belongs to --recompute full$' \
    "$P" sim "$d/gc.json" --recompute selective --checkpoint-layers 2
expect_bad sim-checkpoint-over-after-recompute-full '^plumb: sim: --checkpoint-layers: expected at most the 6 blocks of a virtual stage (got 9)$' \
    "$P" sim "$d/gn.json" --recompute full --checkpoint-layers 9
expect_bad sim-checkpoint-negative '^plumb: sim: --checkpoint-layers: ' \
    "$P" sim "$d/gc.json" --checkpoint-layers -1
ckfile() { # SRC DST K RECOMPUTE: SRC with checkpoint_layers K and recompute RECOMPUTE
    python3 -c 'import json, sys; p = json.load(open(sys.argv[1]))
p["checkpoint_layers"] = int(sys.argv[3]); p["recompute"] = sys.argv[4]
json.dump(p, open(sys.argv[2], "w"))' "$@"
}
ckfile "$d/gc.json" "$d/gk.json" 7 full
expect_bad plan-file-checkpoint-over-the-stage '^plumb: .*gk.json: checkpoint_layers: expected at most the 6 blocks of a virtual stage (got 7)$' \
    "$P" sim "$d/gk.json"
ckfile "$d/gc.json" "$d/gk.json" 2 none
expect_bad plan-file-checkpoint-without-full '^plumb: .*gk.json: checkpoint_layers: expected 0 with recompute none (the interval of full recomputation.s checkpoints) (got 2)$' \
    "$P" sim "$d/gk.json"
ckfile "$d/gc.json" "$d/gk.json" 500 full
expect_bad plan-file-checkpoint-far-over '^plumb: .*gk.json: checkpoint_layers: expected at most the 6 blocks of a virtual stage (got 500)$' \
    "$P" sim "$d/gk.json"
rm -f "$d/gc.json" "$d/gn.json" "$d/gk.json"

# head_dim (the attention's head width): 0, negative, fractional or wider than 8 x hidden
# over the heads, one line naming the file and the key; null reads as absent
hdfile() { # DST VALUE: Mistral-Nemo's config with head_dim VALUE (JSON text)
    python3 -c 'import json, sys; c = json.load(open("examples/llm/mistral-nemo-12b.json"))
c["head_dim"] = json.loads(sys.argv[2]); json.dump(c, open(sys.argv[1], "w"))' "$@"
}
for v in 0 -128 127.5 1281; do
    hdfile "$d/hd.json" "$v"
    expect_bad "model-head-dim-$v" "^plumb: .*hd.json: head_dim: expected" \
        "$P" profile --model "$d/hd.json" -c "$d/cluster.json" --seq-len 64
done
hdfile "$d/hd.json" null
"$P" profile --model "$d/hd.json" -c profiles/clusters/dgx-h100.json --seq-len 64 \
    >"$d/out" 2>&1 && grep -q "hd (12772070400 parameters)" "$d/out" ||
    { echo "FAIL: model-head-dim-null: $(head -c 300 "$d/out")"; fail=1; }
rm -f "$d/hd.json"

# sliding_window (the attention window): 0, negative, fractional or absurd, one line naming
# the file and the key; --cp with a window shorter than the sequence and a plan whose window
# the executor cannot run are refused by name
swfile() { # DST KEY VALUE [KEY VALUE]: a config with KEY set to VALUE (JSON text), from
           # Mistral-7B's (mistral) or from it as a qwen2 (model_type qwen2 when DST has qwen)
    python3 -c 'import json, sys; c = json.load(open("examples/llm/mistral-7b.json"))
if "qwen" in sys.argv[1]: c["model_type"] = "qwen2"
for k, v in zip(sys.argv[2::2], sys.argv[3::2]): c[k] = json.loads(v)
json.dump(c, open(sys.argv[1], "w"))' "$@"
}
for v in 0 -4096 4096.5 1e12; do
    swfile "$d/sw.json" sliding_window "$v"
    expect_bad "model-sliding-window-$v" "^plumb: .*sw.json: sliding_window: expected" \
        "$P" profile --model "$d/sw.json" -c "$d/cluster.json" --seq-len 64
done
# a Qwen2/Qwen3 window on some layers (from max_window_layers) is read, each block priced
# with its own: block28 the first with the window
swfile "$d/swqwen.json" use_sliding_window true max_window_layers 28
"$P" profile --model "$d/swqwen.json" -c profiles/clusters/dgx-h100.json --attention flash \
    >"$d/out" 2>&1 && grep -q "each like block28 (a window of 4096 keys) or block0 (full attention)" "$d/out" ||
    { echo "FAIL: model-sliding-window-some-layers: $(head -c 300 "$d/out")"; fail=1; }
expect_bad plan-cp-with-window "^plumb: plan: --cp: expected 1 with mistral-7b's sliding window of 4096 keys over 32768 tokens" \
    "$P" plan --model examples/llm/mistral-7b.json -c profiles/clusters/dgx-h100.json --gpus 8 \
    --tp 4 --cp 2 --global-batch 8 --attention flash
python3 -c 'import json, sys; c = json.load(open("examples/llm/gpt-mini.json"))
c["sliding_window"] = 16; json.dump(c, open(sys.argv[1], "w"))' "$d/swmini.json"
"$P" plan --model "$d/swmini.json" -c examples/clusters/cpu-1x8.json --gpus 8 --tp 2 --pp 2 \
    --dp 2 --global-batch 8 --microbatch-size 2 --precision fp32 -o "$d/swplan.json" \
    >"$d/out" 2>&1 || { echo "FAIL: plan of a windowed gpt-mini: $(head -c 300 "$d/out")"; fail=1; }
expect_bad train-plan-with-window "^plumb: .*swplan.json: model.transformer.sliding_window: expected none or at least the sequence's 64 tokens" \
    "$P" train examples/models/gpt-mini.json "$d/swplan.json" --steps 1
rm -f "$d/sw.json" "$d/swqwen.json" "$d/swmini.json" "$d/swplan.json"

# the Gemma families: a bad layer_types, soft-capping or window pattern gets one line naming
# the file and key; Gemma 3's image-and-text config is refused naming text_config; a plan
# with Gemma's parts is refused by the executor by name
gmfile() { # DST KEY VALUE [KEY VALUE]: gemma2-9b's config with KEY set to VALUE (JSON text)
    python3 -c 'import json, sys; c = json.load(open("examples/llm/gemma2-9b.json"))
for k, v in zip(sys.argv[2::2], sys.argv[3::2]): c[k] = json.loads(v)
json.dump(c, open(sys.argv[1], "w"))' "$@"
}
gmfile "$d/gm.json" layer_types '["full_attention"]'
expect_bad model-gemma-layer-types-length "^plumb: .*gm.json: layer_types: expected an array of 42 strings" \
    "$P" profile --model "$d/gm.json" -c profiles/clusters/dgx-h100.json
gmfile "$d/gm.json" layer_types "[$(printf '"full_attention",%.0s' $(seq 41))\"global\"]"
expect_bad model-gemma-layer-types-word "^plumb: .*gm.json: layer_types\[41\]: expected \"sliding_attention\" or \"full_attention\" .got \"global\"." \
    "$P" plan --model "$d/gm.json" -c profiles/clusters/dgx-h100.json --gpus 16 --tp 2 --pp 2 --global-batch 32
gmfile "$d/gm.json" attn_logit_softcapping -50
expect_bad model-gemma-softcap "^plumb: .*gm.json: attn_logit_softcapping: expected" \
    "$P" profile --model "$d/gm.json" -c profiles/clusters/dgx-h100.json
gmfile "$d/gm.json" model_type '"gemma3_text"' sliding_window_pattern 0
expect_bad model-gemma3-pattern "^plumb: .*gm.json: sliding_window_pattern: expected" \
    "$P" profile --model "$d/gm.json" -c profiles/clusters/dgx-h100.json
gmfile "$d/gm.json" model_type '"gemma3"'
expect_bad model-gemma3-multimodal "^plumb: .*gm.json: model_type: \"gemma3\" is Gemma 3's image-and-text model.*text_config" \
    "$P" plan --model "$d/gm.json" -c profiles/clusters/dgx-h100.json --gpus 16 --tp 2 --pp 2 --global-batch 32
python3 -c 'import json, sys; c = json.load(open("examples/llm/gpt-mini.json"))
c["post_norms"] = True; json.dump(c, open(sys.argv[1], "w"))' "$d/gmmini.json"
"$P" plan --model "$d/gmmini.json" -c examples/clusters/cpu-1x8.json --gpus 8 --tp 2 --pp 2 \
    --dp 2 --global-batch 8 --microbatch-size 2 --precision fp32 -o "$d/gmplan.json" \
    >"$d/out" 2>&1 || { echo "FAIL: plan of a post-norm gpt-mini: $(head -c 300 "$d/out")"; fail=1; }
expect_bad train-plan-with-gemma-parts "^plumb: .*gmplan.json: model.transformer.post_norms: expected none: .* has no Gemma block" \
    "$P" train examples/models/gpt-mini.json "$d/gmplan.json" --steps 1
rm -f "$d/gm.json" "$d/gmmini.json" "$d/gmplan.json"

# the mixtures of experts: k above the experts, no experts, a missing experts key, dense
# blocks between the mixtures, Qwen2-MoE without its shared expert's width and FP8 get one line naming the file and key; a plan with
# experts is refused by the executor by name
moefile() { # SRC DST KEY VALUE [KEY VALUE]: SRC's config with KEY set to VALUE (JSON text;
            # null removes the key)
    python3 -c 'import json, sys; c = json.load(open(sys.argv[1]))
for k, v in zip(sys.argv[3::2], sys.argv[4::2]):
    c.pop(k, None) if v == "null" else c.__setitem__(k, json.loads(v))
json.dump(c, open(sys.argv[2], "w"))' "$@"
}
MX=examples/llm/mixtral-8x7b.json Q3M=examples/llm/qwen3-30b-a3b.json
moefile $MX "$d/moe.json" num_experts_per_tok 9
expect_bad model-moe-k-above-experts "^plumb: .*moe.json: num_experts_per_tok: expected at most num_local_experts = 8 (got 9)" \
    "$P" profile --model "$d/moe.json" -c profiles/clusters/dgx-h100.json
moefile $Q3M "$d/moe.json" num_experts 0
expect_bad model-moe-no-experts "^plumb: .*moe.json: num_experts: expected an integer from 1 to 1024 (got 0)" \
    "$P" plan --model "$d/moe.json" -c profiles/clusters/dgx-h100.json --gpus 16 --tp 2 --pp 2 --global-batch 32
moefile $MX "$d/moe.json" num_local_experts null
expect_bad model-moe-missing-experts "^plumb: .*moe.json: num_local_experts: missing; expected the experts on each block" \
    "$P" profile --model "$d/moe.json" -c profiles/clusters/dgx-h100.json
moefile $Q3M "$d/moe.json" moe_intermediate_size null
expect_bad model-moe-missing-width "^plumb: .*moe.json: moe_intermediate_size: missing; expected a positive integer" \
    "$P" profile --model "$d/moe.json" -c profiles/clusters/dgx-h100.json
moefile $Q3M "$d/moe.json" mlp_only_layers '[0, 47]'
expect_bad model-moe-dense-layers "^plumb: .*moe.json: mlp_only_layers: expected \[\] or null: plumb prices a mixture of experts on every block" \
    "$P" profile --model "$d/moe.json" -c profiles/clusters/dgx-h100.json
moefile $Q3M "$d/moe.json" decoder_sparse_step 2
expect_bad model-moe-sparse-step "^plumb: .*moe.json: decoder_sparse_step: expected 1" \
    "$P" profile --model "$d/moe.json" -c profiles/clusters/dgx-h100.json
moefile $Q3M "$d/moe.json" model_type '"qwen2_moe"'
expect_bad model-moe-qwen2-shared "^plumb: .*moe.json: shared_expert_intermediate_size: missing; expected a positive integer" \
    "$P" profile --model "$d/moe.json" -c profiles/clusters/dgx-h100.json
expect_bad model-moe-fp8 "^plumb: profile: --precision: expected bf16, fp16, tf32 or fp32 with mixtral-8x7b's experts" \
    "$P" profile --model $MX -c profiles/clusters/dgx-h100.json --precision fp8
moefile examples/llm/gpt-mini.json "$d/moemini.json" mlp '"swiglu"' bias false num_experts 4 \
    num_experts_per_tok 2 moe_intermediate_size 64
"$P" plan --model "$d/moemini.json" -c examples/clusters/cpu-1x8.json --gpus 8 --tp 2 --pp 2 \
    --dp 2 --global-batch 8 --microbatch-size 2 --precision fp32 -o "$d/moeplan.json" \
    >"$d/out" 2>&1 || { echo "FAIL: plan of a gpt-mini with experts: $(head -c 300 "$d/out")"; fail=1; }
expect_bad train-plan-with-experts "^plumb: .*moeplan.json: model.transformer.num_experts: expected none: .* no mixture of experts .got 4 experts." \
    "$P" train examples/models/gpt-mini.json "$d/moeplan.json" --steps 1
rm -f "$d/moe.json" "$d/moemini.json" "$d/moeplan.json"

# the dense families phi3, starcoder2, olmo2 and granite: a bad window, dropout, bias flag,
# scaling or a missing key value heads count gets one line naming the file and key; an OLMo
# 2 plan and one with Granite's scalings are refused by the executor by name
PH3=examples/llm/phi3-mini-4k.json SC2=examples/llm/starcoder2-7b.json
moefile $PH3 "$d/fam.json" sliding_window 0
expect_bad model-phi3-window "^plumb: .*fam.json: sliding_window: expected" \
    "$P" profile --model "$d/fam.json" -c profiles/clusters/dgx-h100.json
moefile $PH3 "$d/fam.json" resid_pdrop 1
expect_bad model-phi3-dropout "^plumb: .*fam.json: resid_pdrop: expected a probability below 1" \
    "$P" plan --model "$d/fam.json" -c profiles/clusters/dgx-h100.json --gpus 8 --tp 2 --global-batch 16
moefile $SC2 "$d/fam.json" num_key_value_heads null
expect_bad model-starcoder2-kv-heads "^plumb: .*fam.json: num_key_value_heads: missing; expected a positive integer" \
    "$P" profile --model "$d/fam.json" -c profiles/clusters/dgx-h100.json
moefile $SC2 "$d/fam.json" use_bias '"yes"'
expect_bad model-starcoder2-use-bias "^plumb: .*fam.json: use_bias: expected" \
    "$P" plan --model "$d/fam.json" -c profiles/clusters/dgx-h100.json --gpus 16 --tp 2 --pp 2 --global-batch 32
moefile examples/llm/olmo2-7b.json "$d/fam.json" attention_bias '"no"'
expect_bad model-olmo2-bias "^plumb: .*fam.json: attention_bias: expected" \
    "$P" profile --model "$d/fam.json" -c profiles/clusters/dgx-h100.json
moefile examples/llm/gpt-mini.json "$d/olmini.json" post_norms true pre_norms false
"$P" plan --model "$d/olmini.json" -c examples/clusters/cpu-1x8.json --gpus 8 --tp 2 --pp 2 \
    --dp 2 --global-batch 8 --microbatch-size 2 --precision fp32 -o "$d/olplan.json" \
    >"$d/out" 2>&1 || { echo "FAIL: plan of a post-norm-only gpt-mini: $(head -c 300 "$d/out")"; fail=1; }
expect_bad train-plan-without-pre-norms "^plumb: .*olplan.json: model.transformer.pre_norms: expected true: .* norms after them only, OLMo 2's" \
    "$P" train examples/models/gpt-mini.json "$d/olplan.json" --steps 1
moefile examples/llm/granite-3-8b.json "$d/fam.json" logits_scaling 0
expect_bad model-granite-logits-scaling "^plumb: .*fam.json: logits_scaling: expected" \
    "$P" profile --model "$d/fam.json" -c profiles/clusters/dgx-h100.json
moefile examples/llm/gpt-mini.json "$d/grmini.json" residual_multiplier 0.22
"$P" plan --model "$d/grmini.json" -c examples/clusters/cpu-1x8.json --gpus 8 --tp 2 --pp 2 \
    --dp 2 --global-batch 8 --microbatch-size 2 --precision fp32 -o "$d/grplan.json" \
    >"$d/out" 2>&1 || { echo "FAIL: plan of a scaled gpt-mini: $(head -c 300 "$d/out")"; fail=1; }
expect_bad train-plan-with-granite-scalings "^plumb: .*grplan.json: model.transformer.residual_multiplier: expected none: .* no Granite scalings" \
    "$P" train examples/models/gpt-mini.json "$d/grplan.json" --steps 1
rm -f "$d/fam.json" "$d/olmini.json" "$d/olplan.json" "$d/grmini.json" "$d/grplan.json"

[ "$(sum)" = "$before" ] || { echo "FAIL: an input file changed"; fail=1; }
left=$(find "$d" -mindepth 1 ! -name prof.json ! -name cluster.json ! -name model.json \
       ! -name out ! -name err ! -name ro ! -name graph.txt)
[ -z "$left" ] || { echo "FAIL: files left behind: $left"; fail=1; }
[ $fail = 0 ] && echo "cli-badinput.sh: all passed"
exit $fail
