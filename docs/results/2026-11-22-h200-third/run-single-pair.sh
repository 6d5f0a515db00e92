#!/usr/bin/env bash
# One H200 (the kind the anchors and the earlier misses were measured on): bench-cuda twice and
# the peers in the same session, and the conformance suite on cpu + cuda:0 + hip:0 (shim).
set -u
B="$(cd "$(dirname "$0")" && pwd)"; R=$OUT/r; mkdir -p $R; cd $B
export RUST_BACKTRACE=1 DEVSTREAM_HIP_LIBRARY=$B/libdevstream_hip_shim.so
hdr() { echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), $(nproc) CPUs"; echo "# devstream commit: $(cat COMMIT)"; echo "# command: $*"; echo; }
run() { local name=$1 t=$2; shift 2; local s=$(date +%s); { hdr "$@"; timeout -s KILL $t "$@" 2>&1; echo "exit status: $? ($(( $(date +%s)-s )) s)"; } > $R/$name.txt; echo "$name: $(grep -h 'test result' $R/$name.txt | tail -1) $(tail -1 $R/$name.txt)"; tar czf $OUT/results.tgz -C $R .; }
run bench-cuda-1 150 env DEVSTREAM_BENCH_JSON=$R/rows-cuda-1.jsonl ./bench-cuda
run peers 120 env PYTHONUNBUFFERED=1 python3 peers_cuda.py
run bench-cuda-2 150 env DEVSTREAM_BENCH_JSON=$R/rows-cuda-2.jsonl ./bench-cuda
grep -h "host func\|wait_event\|record_event" $R/bench-cuda-*.txt
run conformance 120 env DEVSTREAM_REQUIRE=cpu,cuda,hip ./conformance
