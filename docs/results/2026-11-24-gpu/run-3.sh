#!/usr/bin/env bash
# Issue 12 (call 3): after the StreamUsers fix (prune finished users only in Relaxed capture mode):
# CUDA GPU tests (plain and under memcheck), the new regression tests, gpu-common unit tests, the whole
# conformance suite on cpu + cuda:0 + hip:0 twice, the examples.
set -u
B=$PWD/bundle; R=$OUT/r; mkdir -p $R; cd $B
export RUST_BACKTRACE=1 DEVSTREAM_HIP_LIBRARY=$B/libdevstream_hip_shim.so
hdr() { echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), $(nproc) CPUs, kernel $(uname -r)"; echo "# devstream commit: $(cat COMMIT 2>/dev/null)"; echo "# command: $*"; echo; }
run() { local name=$1 t=$2; shift 2; local s=$(date +%s); { hdr "$@"; timeout -s KILL $t "$@" 2>&1; echo "exit status: $? ($(( $(date +%s)-s )) s)"; } > $R/$name.txt; echo "$name: $(grep -h 'test result\|ERROR SUMMARY\|RACECHECK SUMMARY' $R/$name.txt | tail -n 2 | tr '\n' ' ') $(tail -n 1 $R/$name.txt)"; tar czf $OUT/results.tgz -C $R .; }
S=/usr/local/cuda/bin/compute-sanitizer
run cuda-gpu-tests 60 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-gpu --test-threads=1
run cuda-gpu-tests-threads 60 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-gpu
run memcheck-cuda-gpu-tests 200 env DEVSTREAM_REQUIRE=cuda $S --tool memcheck --report-api-errors no --error-exitcode 9 ./devstream-cuda-gpu --test-threads=1
run soundness-all 60 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-soundness --test-threads=1
run gpu-common-unit-tests 60 ./devstream-gpu-common-tests --test-threads=2
for i in 1 2; do run conformance-all-$i 200 env DEVSTREAM_REQUIRE=cpu,cuda,hip ./conformance; done
for e in cuda hip pipeline info; do run example-$e 60 ./example-$e; done
