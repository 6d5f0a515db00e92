#!/usr/bin/env bash
# One H200, after the review refactor (StreamUsers, shared end-of-work events): conformance on
# cpu + cuda:0 + hip:0 (shim), CUDA GPU tests, memcheck on conformance and on the GPU tests.
set -u
B="$(cd "$(dirname "$0")" && pwd)"; R=$OUT/r; mkdir -p $R; cd $B
export RUST_BACKTRACE=1 DEVSTREAM_HIP_LIBRARY=$B/libdevstream_hip_shim.so
hdr() { echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), $(nproc) CPUs, kernel $(uname -r)"; echo "# devstream commit: $(cat COMMIT)"; echo "# command: $*"; echo; }
run() { local name=$1 t=$2; shift 2; local s=$(date +%s); { hdr "$@"; timeout -s KILL $t "$@" 2>&1; echo "exit status: $? ($(( $(date +%s)-s )) s)"; } > $R/$name.txt; echo "$name: $(grep -h 'test result' $R/$name.txt | tail -1) $(tail -1 $R/$name.txt)"; tar czf $OUT/results.tgz -C $R .; }
S=/usr/local/cuda/bin/compute-sanitizer
run conformance 120 env DEVSTREAM_REQUIRE=cpu,cuda,hip ./conformance
run cuda-gpu-tests 120 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-gpu --test-threads=1
run sanitizer-memcheck-conformance 150 env DEVSTREAM_PLACES=cuda:0 $S --tool memcheck --report-api-errors no --error-exitcode 9 ./conformance --skip stress --skip model --test-threads=1
run sanitizer-memcheck-gpu-tests 120 env DEVSTREAM_REQUIRE=cuda $S --tool memcheck --report-api-errors no --error-exitcode 9 ./devstream-cuda-gpu --test-threads=1
run example-pipeline 60 ./example-pipeline
grep -h "SUMMARY\|of duplex" $R/*.txt
