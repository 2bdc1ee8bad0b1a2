#!/usr/bin/env bash
# demo.sh: plumb's main job on the shipped example: summarize the VGG-16 profile (from
# PipeDream) and Cluster-A (4 servers of 4 V100), plan the split, simulate the plan with
# its schedule, and write the report, the Chrome trace and the SVG timeline under out/.
set -eu
P=${1:-./plumb}
out=${PLUMB_DEMO_OUT:-out}
prof=profiles/pipedream/vgg16.json
clus=profiles/clusters/cluster-a-4x4.json
mkdir -p "$out"
echo "== the model and the cluster"
"$P" info "$prof" "$clus"
echo
echo "== plumb plan: plumb's planner (native cost model, simulator in the loop)"
"$P" plan -p "$prof" -c "$clus" -o "$out/vgg16-plan.json"
echo
echo "== plumb plan --mode pipedream: PipeDream's own partitioner, for comparison"
"$P" plan --mode pipedream -p "$prof" -c "$clus" -o "$out/vgg16-plan-pipedream.json"
echo
echo "== plumb sim: the plan under its schedule"
"$P" sim "$out/vgg16-plan.json" --trace "$out/vgg16-trace.json" --svg "$out/vgg16-timeline.svg"
"$P" sim "$out/vgg16-plan.json" --json > "$out/vgg16-report.json.tmp"
mv "$out/vgg16-report.json.tmp" "$out/vgg16-report.json"
echo
echo "== what if the network between servers were 4x faster?"
"$P" sim "$out/vgg16-plan.json" --bandwidth 1=40
echo
echo "wrote $out/vgg16-plan.json, $out/vgg16-report.json, $out/vgg16-trace.json (open in"
echo "Perfetto) and $out/vgg16-timeline.svg; try: $P ui $out/vgg16-plan.json"
