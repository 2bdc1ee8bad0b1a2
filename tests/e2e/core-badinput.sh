#!/usr/bin/env bash
# core-badinput.sh: bad files given to the real binary: one line naming the file and the
# field, exit status 2, and no output file left behind.
. "$(dirname "$0")/lib/start.sh" # set -u, P, d (removed on exit), fail=0
. "$(dirname "$0")/lib/expect.sh" # expect_bad NAME PATTERN CMD...
printf '{"format": "plumb-cluster/1", "name": "x",' > "$d/trunc.json"
expect_bad truncated "trunc.json: malformed JSON at line 1" "$P" info "$d/trunc.json"
# JSON nested past the parser's limit says so (it said "expected a valid JSON value")
awk 'BEGIN { for (i = 0; i < 5000; i++) printf "["; for (i = 0; i < 5000; i++) printf "]" }' > "$d/deep.json"
expect_bad deep-nesting 'deep.json: malformed JSON at line 1, column 1001: expected arrays and objects nested at most 1000 deep' \
    "$P" info "$d/deep.json"
printf '{"format": "plumb-cluster/2"}' > "$d/ver.json"
expect_bad version 'format' "$P" info "$d/ver.json"
sed 's/"count": 4/"count": -4/' profiles/clusters/cluster-a-4x4.json > "$d/neg.json"
expect_bad negative-count 'levels\[0\].count' "$P" info "$d/neg.json"
sed 's/"forward_ms":[[:space:]]*[0-9.e+-]*/"forward_ms": "fast"/' profiles/pipedream/alexnet.json > "$d/type.json"
expect_bad wrong-type 'forward_ms: expected a number' "$P" info "$d/type.json"
expect_bad missing-file 'cannot open' "$P" info "$d/nope.json"
# info of several files prints nothing when one of them is bad (it printed the good ones
# first: partial output)
expect_bad info-good-then-bad 'trunc.json: malformed JSON' \
    "$P" info profiles/clusters/cluster-a-4x4.json "$d/trunc.json"
# import: a malformed graph leaves no output behind
printf 'node1 -- Input -- forward_compute_time=oops\n' > "$d/graph.txt"
expect_bad import-malformed 'graph.txt' "$P" import pipedream "$d/graph.txt" -o "$d/out.json"
if compgen -G "$d/out.json*" >/dev/null; then echo "FAIL import left a partial file"; fail=1; fi
# a graph value past the profile's bounds is named as the graph names it: line and field
# (it was "g.txt: layers[1].forward_ms", a field the graph does not have)
sed '0,/forward_compute_time=4.000/s//forward_compute_time=1e300/' tests/data/pipedream_tiny_graph.txt > "$d/g.txt"
expect_bad import-bound 'g.txt:2: forward_compute_time: expected a number from 0 to 1e+09 (got 1e+300)' \
    "$P" import pipedream "$d/g.txt" -b 4 -o "$d/out.json"
# a plan whose profile path is not there: the line names the plan, its field and the path as
# written and as read (relative to the plan's folder); it named only the resolved path
sed 's#"profile": "[^"]*"#"profile": "nope/vgg16.json"#' examples/plans/vgg16-4stage-1f1b.json > "$d/noprof.json"
expect_bad plan-profile-missing "noprof.json: profile: expected the path of a profile file, relative to the plan's folder, or the embedded profile object (got \"nope/vgg16.json\": $d/nope/vgg16.json: No such file or directory)" \
    "$P" sim "$d/noprof.json" --json
# values outside the physical bounds (docs/formats.md): refused at load, never simulated
# (1e-308 Gbit/s once crashed plumb ui --snapshot and made plumb sim --svg run forever)
sed 's/"bandwidth_gbit_per_s": *[0-9.]*/"bandwidth_gbit_per_s": 1e-308/' \
    profiles/clusters/cluster-a-4x4.json > "$d/slow.json"
sed "s#\"cluster\": \"[^\"]*\"#\"cluster\": \"$d/slow.json\"#; s#\"profile\": \"../../#\"profile\": \"$PWD/#" \
    examples/plans/vgg16-4stage-1f1b.json > "$d/slowplan.json"
expect_bad bandwidth-1e-308 'slow.json: levels\[0\].bandwidth_gbit_per_s: expected a bandwidth from' \
    timeout 20 "$P" sim "$d/slowplan.json" --svg "$d/t.svg"
[ -e "$d/t.svg" ] && { echo "FAIL bandwidth-1e-308 left an SVG"; fail=1; }
expect_bad plan-bandwidth-1e-308 'bandwidth_gbit_per_s: expected a bandwidth from' \
    timeout 20 "$P" plan -p profiles/pipedream/vgg16.json -c "$d/slow.json"
# a device's figures past core/bounds.h (a peak in any precision, the memory bandwidth,
# the kernel overhead): refused at load naming the field (5e-324 TFLOP/s and 1e-308 GB/s
# made every block's time infinite: plan --model blamed "--microbatch-size ... (got 0)",
# profile --model "(analytic profile): layers[1].forward_ms"; 2^31 TFLOP/s was taken)
DGX=profiles/clusters/dgx-a100-80g.json
sed 's/"fp32": 19.5/"fp32": 5e-324/' $DGX > "$d/peak.json"
expect_bad device-peak-tiny 'peak.json: device_types\[0\].peak_tflops_by_precision.fp32: expected a peak from 1e-06 to 1e+09 TFLOP/s' \
    "$P" plan --model examples/llm/gpt-mini.json -c "$d/peak.json" --gpus 8 --global-batch 16 --precision fp32
expect_bad device-peak-tiny-profile 'peak.json: device_types\[0\].peak_tflops_by_precision.fp32: expected' \
    "$P" profile --model examples/llm/gpt-mini.json -c "$d/peak.json" --precision fp32 -o "$d/p.json"
sed 's/"fp16": 312/"fp16": 2147483648/' $DGX > "$d/peak.json"
expect_bad device-peak-huge 'peak_tflops_by_precision.fp16: expected a peak from 1e-06 to 1e+09 TFLOP/s, or absent (got 2147483648)' \
    "$P" info "$d/peak.json"
sed 's/"memory_gbyte_per_s": *[0-9.]*/"memory_gbyte_per_s": 1e-308/' $DGX > "$d/mbw.json"
expect_bad device-memory-bw-tiny 'mbw.json: device_types\[0\].memory_gbyte_per_s: expected a bandwidth from 1e-06 to 1e+06 GB/s' \
    "$P" plan --model examples/llm/gpt-mini.json -c "$d/mbw.json" --gpus 8 --global-batch 16
# a device in bounds whose figures give a block a time past the profile's (1e-6 GB/s of
# memory bandwidth on GPT-3 175B): the search and sweep --model give the fixed layout's
# line, naming the cluster field that made the time (every layout's profile failed alike, and
# they blamed "--microbatch-size ... (got 0)"; then the figure alone)
sed 's/"memory_gbyte_per_s": *[0-9.]*/"memory_gbyte_per_s": 1e-6/' $DGX > "$d/mbw6.json"
for c in "plan --gpus 64" "sweep --gpus 64..128"; do
    # shellcheck disable=SC2086
    expect_bad "device-slow-search-${c%% *}" 'mbw6.json: device_types\[0\]\.memory_gbyte_per_s: 1e-06 GB/s make a block take 1.66933e+10 ms for its forward (layers\[1\].forward_ms), beyond the 1e+09 ms a profile takes' \
        "$P" $c --model examples/llm/gpt3-175b.json -c "$d/mbw6.json" --global-batch 16
done
sed 's/"kernel_overhead_us": *[0-9.]*/"kernel_overhead_us": 2147483648/' $DGX > "$d/kov.json"
expect_bad device-kernel-overhead 'kov.json: device_types\[0\].efficiency.kernel_overhead_us: expected a time from 0 to 1e+07 us' \
    "$P" info "$d/kov.json"
# an efficiency fraction below 0.1 % of the peak is refused at load naming the field (1e-308
# made every block's time 3e305 ms, refused as "(analytic profile): layers[0].forward_ms")
sed 's/"memory": 0.6/"memory": 1e-308/' $DGX > "$d/eff.json"
expect_bad device-efficiency-tiny 'eff.json: device_types\[0\].efficiency.memory: expected a fraction of the peak from 0.001 to 1 (got 1e-308)' \
    "$P" plan --model examples/llm/gpt-mini.json -c "$d/eff.json" --gpus 8 --global-batch 16
[ -e "$d/p.json" ] && { echo "FAIL device-peak-tiny-profile wrote a profile"; fail=1; }
sed '0,/"parameter_bytes":[[:space:]]*[0-9.e+-]*/s//"parameter_bytes": 1e308/' \
    profiles/pipedream/alexnet.json > "$d/huge.json"
expect_bad parameter-bytes-1e308 'parameter_bytes: expected a number from 0 to 1e+15 (got 1e+308)' \
    "$P" info "$d/huge.json"
expect_bad pipedream-bandwidth '--network_bandwidths: expected bytes/s from 125 to 1.25e+13' \
    "$P" plan --pipedream -f tests/fuzz/seeds/pipedream-vgg16.txt -n 4 -b 1e-300
expect_bad sim-what-if-bandwidth '--bandwidth GBPS: expected a number from 1e-06 to 100000' \
    "$P" sim examples/plans/vgg16-4stage-1f1b.json --bandwidth 1=1e-300
# a FIFO with no writer is refused at once, not waited on, by every reader of files (each
# once blocked in open() for ever); a device streaming zeros stops at its first NUL byte
# (it once read 2 GiB into 4 GiB of memory before refusing)
mkfifo "$d/fifo"
expect_bad fifo-info 'fifo: cannot read: a FIFO with no writer (expected a file)' \
    timeout 10 "$P" info "$d/fifo"
expect_bad fifo-sim 'fifo: cannot read: a FIFO with no writer' timeout 10 "$P" sim "$d/fifo"
expect_bad fifo-cluster 'fifo: cannot read: a FIFO with no writer' \
    timeout 10 "$P" plan -p profiles/pipedream/alexnet.json -c "$d/fifo"
expect_bad fifo-import 'fifo: cannot read: a FIFO with no writer' \
    timeout 10 "$P" import pipedream "$d/fifo" -o "$d/imp.json"
expect_bad fifo-csv 'fifo: cannot read: a FIFO with no writer (expected a CSV file)' \
    timeout 10 "$P" schedule --kind gpipe --stages 2 --microbatches 2 --import "$d/fifo"
expect_bad fifo-model 'fifo: cannot read: a FIFO with no writer' \
    timeout 10 "$P" train "$d/fifo" --steps 1
expect_bad fifo-resume 'fifo: cannot read: a FIFO with no writer (expected a checkpoint file)' \
    timeout 10 "$P" train examples/models/fmnist-mlp.json --steps 1 --resume "$d/fifo"
expect_bad fifo-text 'fifo: cannot read: a FIFO with no writer (expected a text file)' \
    timeout 10 "$P" train examples/models/gpt-mini.json --steps 1 --text "$d/fifo"
expect_bad fifo-compare 'fifo: cannot read: a FIFO with no writer' \
    timeout 10 "$P" compare "$d/fifo" "$d/fifo"
expect_bad dev-zero 'zero: malformed JSON: expected text, found a NUL byte' \
    timeout 10 "$P" info /dev/zero
expect_bad dev-zero-graph 'zero: expected a text file (got a NUL byte)' \
    timeout 10 "$P" import pipedream /dev/zero -o "$d/imp.json"
[ -e "$d/imp.json" ] && { echo "FAIL fifo/dev-zero import wrote its output"; fail=1; }
# a pipe with a writer is read as a file
ok pipe-cluster "$P" plan -p profiles/pipedream/alexnet.json \
    -c <(cat profiles/clusters/cluster-a-4x4.json)
# and info reads it once (it sniffed the pipe for a checkpoint first, then found it empty)
ok pipe-info "$P" info <(cat profiles/clusters/cluster-a-4x4.json)
has pipe-info '^cluster cluster-a-4x4: 16 devices'

# a Hugging Face config.json with a field given twice (cJSON kept the first, silently) and
# a plumb-transformer/1 description that is not a string are refused at load
sed 's/"n_embd": 768,/"n_embd": 768, "n_embd": 1024,/' examples/llm/gpt2.json > "$d/dup.json"
LAY=(-c profiles/clusters/dgx-a100-80g.json --gpus 8 --tp 2 --pp 2 --dp 2 --global-batch 8)
expect_bad hf-duplicate 'dup.json: n_embd: expected each field once (got it twice)' \
    "$P" plan --model "$d/dup.json" "${LAY[@]}"
sed 's/"description": "[^"]*"/"description": -1/' examples/llm/gpt-mini.json > "$d/desc.json"
expect_bad transformer-description 'desc.json: description: expected a string (got -1)' \
    "$P" plan --model "$d/desc.json" "${LAY[@]}"
# a model spec whose layers at the batch cannot fit this process's memory is refused before
# anything is allocated, naming the layer (a context of 10^5 tokens crashed plumb train and
# profile: the allocation failed inside a block and freeing its unset children segfaulted;
# 10^6 filled memory with 4 GB buffers)
# a transformer deeper than core/bounds.h's 4096 blocks is refused at load (the 3D search
# builds a profile of every block per candidate layout: 100000 blocks took minutes to refuse)
sed 's/"n_layer": 12,/"n_layer": 100000,/' examples/llm/gpt2.json > "$d/deep-gpt.json"
expect_bad transformer-layers 'deep-gpt.json: n_layer: expected an integer from 1 to 4096 (got 100000)' \
    timeout 20 "$P" sweep --model "$d/deep-gpt.json" -c profiles/clusters/dgx-a100-80g.json \
    --gpus 8..16 --global-batch 16
expect_bad transformer-layers-plan 'deep-gpt.json: n_layer: expected an integer from 1 to 4096' \
    timeout 20 "$P" plan --model "$d/deep-gpt.json" -c profiles/clusters/dgx-a100-80g.json \
    --gpus 8 --global-batch 16
sed 's/"input": \[64\]/"input": [100000]/' examples/models/gpt-mini.json > "$d/long.json"
expect_bad model-memory-train 'long.json: layers\[1\]: residual at 8 samples per microbatch needs at least' \
    timeout 20 "$P" train "$d/long.json" --steps 1 --samples 16 --batch 8 --data synthetic
expect_bad model-memory-profile 'long.json: layers\[1\]: .*this process may use' \
    timeout 20 "$P" profile "$d/long.json" --batch 4 -o "$d/p.json"
[ -e "$d/p.json" ] && { echo "FAIL model-memory-profile wrote a profile"; fail=1; }
sed 's/"input": \[1, 28, 28\]/"input": [1000000, 28, 28]/' examples/models/fmnist-cnn.json > "$d/wide.json"
expect_bad model-memory-input 'wide.json: layers\[0\]: conv2d at 4 samples .* and the input' \
    timeout 20 "$P" profile "$d/wide.json" --batch 4
sed 's/"seed": 1,/"seed": 1, "seed": 2,/' examples/models/fmnist-mlp.json > "$d/dupseed.json"
expect_bad model-duplicate 'dupseed.json: seed: expected each field once (got it twice)' \
    "$P" train "$d/dupseed.json" --steps 1
# an allocation that fails inside a residual block (the bound above passed, the run's
# buffers do not fit a 4 GB address space) is one line, not a segmentation fault
if [ -z "${PLUMB_SAN:-}" ]; then # the sanitizers' shadow memory needs no address limit
    sed 's/"input": \[64\]/"input": [4500]/' examples/models/gpt-mini.json > "$d/mid.json"
    (ulimit -v 4000000
     "$P" train "$d/mid.json" --steps 1 --samples 16 --batch 8 --data synthetic >"$d/out" 2>"$d/err"
     echo $? >"$d/rc")
    grep -q '^plumb: out of memory' "$d/err" && [ "$(cat "$d/rc")" = 1 ] ||
        { echo "FAIL model-alloc-fails: exit $(cat "$d/rc"): $(head -c 200 "$d/err")"; fail=1; }
fi
[ $fail = 0 ] && echo "core-badinput: ok"
exit $fail
