#!/usr/bin/env bash
# Waits across backends against host fences on the CI places (cpu, wgpu:0 on lavapipe, the test
# plug-in's custom_cpu:0 and custom_cpu:1), on the 2-vCPU VM. Builds bench-cross in release with
# wgpu,plugin and the test plug-in, runs it with DEVSTREAM_PLUGIN_PATH pointing at the plug-in,
# and writes docs/results/bench-cross-DATE.{txt,md,svg} (moved here as bench-cross.*).
set -euo pipefail
cd "$(dirname "$0")/../../.."
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"
cargo xtask bench --backend cross
