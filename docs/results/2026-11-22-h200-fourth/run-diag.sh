#!/usr/bin/env bash
# One H200: the host-function round trip, diagnosed: null-data raw floor, raw with a payload the
# callback touches, raw with a boxed Rust closure, devstream; then the whole bench again.
set -u
B="$(cd "$(dirname "$0")" && pwd)"; R=$OUT/r; mkdir -p $R; cd $B
hdr() { echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), $(nproc) CPUs, kernel $(uname -r)"; echo "# devstream commit: $(cat COMMIT)"; echo "# command: $*"; echo; }
run() { local name=$1 t=$2; shift 2; local s=$(date +%s); { hdr "$@"; timeout -s KILL $t "$@" 2>&1; echo "exit status: $? ($(( $(date +%s)-s )) s)"; } > $R/$name.txt; echo "$name: $(tail -1 $R/$name.txt)"; tar czf $OUT/results.tgz -C $R .; }
run bench-cuda-hostfn-diag 200 env DEVSTREAM_BENCH_HOSTFN_DIAG=1 DEVSTREAM_BENCH_JSON=$R/rows-cuda.jsonl ./bench-cuda
grep -h "diagnostic\|host func\|query idle" $R/bench-cuda-hostfn-diag.txt
ls /usr/share/vulkan/icd.d/ /etc/vulkan/icd.d/ 2>&1 | head -5
