#!/usr/bin/env bash
# The plug-in notifier's nudges for event completions, before and after, on the 2-vCPU VM:
# bench-cross (all CI places), bench-wake and bench-step (custom_cpu:0), each binary built in
# release with wgpu,plugin at the commit before the change (BEFORE, a directory) and at the
# change (AFTER), run alternately in the same minutes. Usage: run.sh BEFORE AFTER OUT.
#   git checkout <commit>; cargo build --release -p devstream-bench \
#     --bin bench-cross --bin bench-step --bin bench-wake --features wgpu,plugin
#   cargo build --release -p devstream-test-plugin-cpu
#   cp target/release/{bench-cross,bench-step,bench-wake} DIR   (once per commit)
set -euo pipefail
before=$1 after=$2 out=$3
cd "$(dirname "$0")/../../../.."
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"
export DEVSTREAM_PLUGIN_PATH=$PWD/target/release/libdevstream_test_plugin_cpu.so
mkdir -p "$out"
for i in 1 2 3; do
  for v in before after; do
    dir=$before; [ $v = after ] && dir=$after
    { uptime; "$dir/bench-cross"; } > "$out/bench-cross-$v-$i.txt" 2>&1
  done
done
for i in 1 2 3; do
  for v in before after; do
    dir=$before; [ $v = after ] && dir=$after
    echo "== $v $i $(uptime | sed 's/.*average//')"
    "$dir/bench-step" --place custom_cpu:0 --steps 400 2>&1 | grep -E "^eager|^wait_event"
  done
done > "$out/bench-step-custom_cpu0.txt"
for i in 1 2; do
  for v in before after; do
    dir=$before; [ $v = after ] && dir=$after
    echo "== $v $i $(uptime | sed 's/.*average//')"
    "$dir/bench-wake" --place custom_cpu:0 --samples 300 2>&1 | grep -v "^plugin\|^backend"
  done
done > "$out/bench-wake-custom_cpu0.txt"
