#!/usr/bin/env bash
# One H200: bench-cuda with interleaved blocks (median-ratio block of 7), three runs, peers between.
set -u
B="$(cd "$(dirname "$0")" && pwd)"; R=$OUT/r; mkdir -p $R; cd $B
hdr() { echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), $(nproc) CPUs"; echo "# devstream commit: $(cat COMMIT)"; echo "# command: $*"; echo; }
run() { local name=$1 t=$2; shift 2; local s=$(date +%s); { hdr "$@"; timeout -s KILL $t "$@" 2>&1; echo "exit status: $? ($(( $(date +%s)-s )) s)"; } > $R/$name.txt; echo "$name: $(tail -1 $R/$name.txt)"; tar czf $OUT/results.tgz -C $R .; }
run bench-cuda-1 170 env DEVSTREAM_BENCH_JSON=$R/rows-cuda-1.jsonl ./bench-cuda
run peers 120 env PYTHONUNBUFFERED=1 python3 peers_cuda.py
run bench-cuda-2 170 env DEVSTREAM_BENCH_JSON=$R/rows-cuda-2.jsonl ./bench-cuda
grep -h "MISS\|host func" $R/bench-cuda-*.txt
