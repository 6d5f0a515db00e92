#!/usr/bin/env bash
# Issue 13 (call 9): the devstream-paddle round trip after the loader's reaper waits for Global
# captures, twice with every place and twice with the devstream-paddle places alone.
set -u
B=$PWD/bundle; R=$OUT/r; mkdir -p $R; cd $B
export RUST_BACKTRACE=1 DEVSTREAM_HIP_LIBRARY=$B/libdevstream_hip_shim.so DEVSTREAM_PADDLE_LOG=1
hdr() { echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), $(nproc) CPUs, kernel $(uname -r)"; echo "# devstream commit: $(cat COMMIT 2>/dev/null)"; echo "# command: $*"; echo; }
run() { local name=$1 t=$2; shift 2; local s=$(date +%s); { hdr "$@"; timeout -s KILL $t "$@" 2>&1; echo "exit status: $? ($(( $(date +%s)-s )) s)"; } > $R/$name.txt; echo "$name: $(grep -h 'test result' $R/$name.txt | tail -n 1) $(tail -n 1 $R/$name.txt)"; grep -h "on devstream_[a-z]*:[0-9]: returned Err\|on devstream_[a-z]*:[0-9] (whole check): panicked" $R/$name.txt | cut -c1-150 | sort | uniq -c; tar czf $OUT/results.tgz -C $R .; }
for i in 1 2; do run conformance-all-places-$i 250 env DEVSTREAM_REQUIRE=cpu,cuda,hip,plugin DEVSTREAM_PLUGIN_PATH=$B/paddle-plugins ./conformance; done
run conformance-devstream-cuda 250 env DEVSTREAM_REQUIRE=plugin DEVSTREAM_PLUGIN_PATH=$B/paddle-plugins DEVSTREAM_PLACES=devstream_cuda:0 ./conformance
