#!/usr/bin/env bash
# Two H200s, call 2 (GPU 0): bench-cuda beside raw driver calls and the peers in the same session,
# then sanitizers on the new host-function slots (memcheck on the GPU tests) and racecheck on the
# conformance suite.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 RUST_BACKTRACE=1
B="$(cd "$(dirname "$0")" && pwd)"; R=$OUT/r; mkdir -p $R; cd $B
hdr() { echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) (GPU 0 of 2), $(nproc) CPUs"; echo "# devstream commit: $(cat COMMIT)"; echo "# command: $*"; echo; }
run() { local name=$1 t=$2; shift 2; local s=$(date +%s); { hdr "$@"; timeout -s KILL $t "$@" 2>&1; echo "exit status: $? ($(( $(date +%s)-s )) s)"; } > $R/$name.txt; echo "$name: $(tail -1 $R/$name.txt)"; tar czf $OUT/results.tgz -C $R .; }
export CUDA_VISIBLE_DEVICES=0
run bench-cuda 150 env DEVSTREAM_BENCH_JSON=$R/rows-cuda.jsonl ./bench-cuda
grep -E "host func|wait_event|record" $R/bench-cuda.txt
run peers 120 env PYTHONUNBUFFERED=1 python3 peers_cuda.py
S=/usr/local/cuda/bin/compute-sanitizer
run sanitizer-memcheck-gpu-tests 100 env DEVSTREAM_REQUIRE=cuda $S --tool memcheck --report-api-errors no --error-exitcode 9 ./devstream-cuda-gpu --test-threads=1
tail -2 $R/sanitizer-memcheck-gpu-tests.txt
run sanitizer-racecheck-conformance 170 env DEVSTREAM_PLACES=cuda:0 $S --tool racecheck --report-api-errors no --error-exitcode 9 ./conformance --skip stress --skip model --test-threads=1
tail -3 $R/sanitizer-racecheck-conformance.txt
