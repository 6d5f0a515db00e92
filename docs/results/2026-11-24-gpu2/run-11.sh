#!/usr/bin/env bash
# Issue 13 (call 11): the devstream-paddle round trip on the GPU with the shim's handle-only entry
# (no current context needed for event/stream-handle calls) and backtraces of refused calls.
set -u
B=$PWD/target-rt; R=$OUT/r; mkdir -p $R; cd $B
export RUST_BACKTRACE=1 DEVSTREAM_HIP_LIBRARY=$B/libdevstream_hip_shim.so
hdr() { echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), $(nproc) CPUs, kernel $(uname -r)"; echo "# devstream commit: $(cat COMMIT 2>/dev/null)"; echo "# command: $*"; echo; }
run() { local name=$1 t=$2; shift 2; local s=$(date +%s); { hdr "$@"; timeout -s KILL $t "$@" 2>&1; echo "exit status: $? ($(( $(date +%s)-s )) s)"; } > $R/$name.txt; echo "$name: $(grep -h 'test result' $R/$name.txt | tail -n 1) $(tail -n 1 $R/$name.txt)"; grep -h "on [a-z_]*:[0-9]: returned Err\|whole check): panicked" $R/$name.txt | cut -c1-160 | sort | uniq -c; tar czf $OUT/results.tgz -C $R .; }
for i in 1 2 3; do
run roundtrip-$i 200 env DEVSTREAM_REQUIRE=plugin DEVSTREAM_PLUGIN_PATH=$B/paddle-plugins DEVSTREAM_PLACES=devstream_cuda:0,devstream_hip:0 DEVSTREAM_PADDLE_LOG=backtrace ./conformance
done
run conformance-cpu-cuda-hip 200 env DEVSTREAM_REQUIRE=cpu,cuda,hip ./conformance
run conformance-all-places 280 env DEVSTREAM_REQUIRE=cpu,cuda,hip,plugin DEVSTREAM_PLUGIN_PATH=$B/paddle-plugins DEVSTREAM_PADDLE_LOG=backtrace ./conformance
grep -h -A40 "answered" $R/roundtrip-*.txt | grep -v "^\s*at /rustc" | head -150
