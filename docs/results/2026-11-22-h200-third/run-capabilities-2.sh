#!/usr/bin/env bash
set -u
B="$(cd "$(dirname "$0")" && pwd)"; R=$OUT/r; mkdir -p $R; cd $B
export RUST_BACKTRACE=1 DEVSTREAM_HIP_LIBRARY=$B/libdevstream_hip_shim.so
hdr() { echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), $(nproc) CPUs"; echo "# devstream commit: $(cat COMMIT)"; echo "# command: $*"; echo; }
run() { local name=$1 t=$2; shift 2; local s=$(date +%s); { hdr "$@"; timeout -s KILL $t "$@" 2>&1; echo "exit status: $? ($(( $(date +%s)-s )) s)"; } > $R/$name.txt; echo "$name: $(grep -h 'test result' $R/$name.txt | tail -1) $(tail -1 $R/$name.txt)"; tar czf $OUT/results.tgz -C $R .; }
run conformance 120 env DEVSTREAM_REQUIRE=cpu,cuda,hip ./conformance --nocapture
run conformance-hip-rocm52-emulation 120 env DEVSTREAM_REQUIRE=hip DEVSTREAM_PLACES=hip:0 DEVSTREAM_HIP_DISABLE=hipLaunchHostFunc ./conformance --nocapture
