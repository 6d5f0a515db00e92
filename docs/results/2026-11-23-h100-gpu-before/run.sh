#!/usr/bin/env bash
# Issue 12 (GPU items 1, 4, 5, 6, 8, 10, 12, 13): the new regression tests on the UNFIXED code.
# Each test runs alone (a defect may abort or hang the process), then the whole binary under
# compute-sanitizer memcheck. Results: $OUT/r/*.txt and $OUT/results.tgz.
set -u
B="$(cd "$(dirname "$0")" && pwd)"; R=$OUT/r; mkdir -p $R; cd $B
export RUST_BACKTRACE=1
hdr() { echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), $(nproc) CPUs, kernel $(uname -r)"; echo "# devstream commit: $(cat COMMIT)"; echo "# command: $*"; echo; }
run() { local name=$1 t=$2; shift 2; local s=$(date +%s); { hdr "$@"; timeout -s KILL $t "$@" 2>&1; echo "exit status: $? ($(( $(date +%s)-s )) s)"; } > $R/$name.txt; echo "$name: $(grep -h 'test result' $R/$name.txt | tail -1) $(tail -1 $R/$name.txt)"; tar czf $OUT/results.tgz -C $R .; }
S=/usr/local/cuda/bin/compute-sanitizer
for t in $(./devstream-cuda-soundness --list 2>/dev/null | sed -n 's/: test$//p' | grep -v '^child_'); do
  run "soundness-$t" 40 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-soundness "$t" --exact --test-threads=1 --nocapture
done
run gpu-common-unit-tests 60 ./devstream-gpu-common-tests --test-threads=2
run sanitizer-memcheck-soundness 150 env DEVSTREAM_REQUIRE=cuda $S --tool memcheck --report-api-errors no --error-exitcode 9 ./devstream-cuda-soundness --test-threads=1
grep -h "panicked at\|FAILED\|failed\|hung\|ERROR SUMMARY" $R/*.txt | sort | uniq -c | head -60
