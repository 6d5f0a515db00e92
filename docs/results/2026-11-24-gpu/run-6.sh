#!/usr/bin/env bash
# Issue 13 (call 6): the devstream-paddle round trip over CUDA/HIP after the launch-stream FIFO,
# the loader's dropped-capture fix and the harness exclusivity rule, with DEVSTREAM_PADDLE_LOG=1
# naming every failing plug-in call; then every place together.
set -u
B=$PWD/bundle; R=$OUT/r; mkdir -p $R; cd $B
export RUST_BACKTRACE=1 DEVSTREAM_HIP_LIBRARY=$B/libdevstream_hip_shim.so DEVSTREAM_PADDLE_LOG=1
hdr() { echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), $(nproc) CPUs, kernel $(uname -r)"; echo "# devstream commit: $(cat COMMIT 2>/dev/null)"; echo "# command: $*"; echo; }
run() { local name=$1 t=$2; shift 2; local s=$(date +%s); { hdr "$@"; timeout -s KILL $t "$@" 2>&1; echo "exit status: $? ($(( $(date +%s)-s )) s)"; } > $R/$name.txt; echo "$name: $(grep -h 'test result' $R/$name.txt | tail -n 1) $(tail -n 1 $R/$name.txt)"; grep -h "plug-in.*failed\|devstream_[a-z]*:.*C_ERROR\|\[devstream-paddle\]" $R/$name.txt | sort | uniq -c | sort -rn | head -8; tar czf $OUT/results.tgz -C $R .; }
run conformance-devstream-cuda-hip 280 env DEVSTREAM_REQUIRE=plugin DEVSTREAM_PLUGIN_PATH=$B/paddle-plugins DEVSTREAM_PLACES=devstream_cuda:0,devstream_hip:0 ./conformance
run conformance-all-places 280 env DEVSTREAM_REQUIRE=cpu,cuda,hip,plugin DEVSTREAM_PLUGIN_PATH=$B/paddle-plugins ./conformance
