#!/usr/bin/env bash
# Issue 12, GPU runs owed (call 2 of 2): compute-sanitizer memcheck and racecheck over each new CUDA
# regression test (tests/soundness.rs) alone, the gpu-common unit tests and the CUDA GPU tests.
set -u
B=$PWD/bundle; R=$OUT/r; mkdir -p $R; cd $B
export RUST_BACKTRACE=1 DEVSTREAM_HIP_LIBRARY=$B/libdevstream_hip_shim.so
hdr() { echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), $(nproc) CPUs, kernel $(uname -r)"; echo "# devstream commit: $(cat COMMIT 2>/dev/null)"; echo "# command: $*"; echo; }
run() { local name=$1 t=$2; shift 2; local s=$(date +%s); { hdr "$@"; timeout -s KILL $t "$@" 2>&1; echo "exit status: $? ($(( $(date +%s)-s )) s)"; } > $R/$name.txt; echo "$name: $(grep -h 'test result\|ERROR SUMMARY\|RACECHECK SUMMARY' $R/$name.txt | tail -n 2 | tr '\n' ' ') $(tail -n 1 $R/$name.txt)"; tar czf $OUT/results.tgz -C $R .; }
S=/usr/local/cuda/bin/compute-sanitizer
run soundness-all 60 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-soundness --test-threads=1
run gpu-common-unit-tests 60 ./devstream-gpu-common-tests --test-threads=2
run cuda-gpu-tests 60 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-gpu --test-threads=1
for tool in memcheck racecheck; do
  for t in $(./devstream-cuda-soundness --list 2>/dev/null | sed -n 's/: test$//p' | grep -v '^child_'); do
    run "$tool-$t" 60 env DEVSTREAM_REQUIRE=cuda $S --tool $tool --report-api-errors no --error-exitcode 9 ./devstream-cuda-soundness "$t" --exact --test-threads=1
  done
done
grep -h "ERROR SUMMARY\|RACECHECK SUMMARY\|Hazard\|Invalid\|FAILED\|exit status: [^0]" $R/*check-*.txt | sort | uniq -c | head -40
