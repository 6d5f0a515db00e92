#!/usr/bin/env bash
# Call 47 (issue 14, CPU engine) on the H100's 16-core host at e1a6cba's code: the facade's CPU
# collectives tests (release) five times, with 16 cores for the ranks that now share buffers,
# and bench-comm-cpu at 4 ranks three more times.
set -u
. "$(dirname "$0")/gpu-run-lib.sh"
for k in 1 2 3 4 5; do
  run comm-cpu-tests-$k 120 ./comm-cpu --test-threads=4
done
for k in 1 2 3; do
  run bench-comm-cpu-ranks4-$k 60 ./bench-comm-cpu --ranks 4 --iters 15
done
for f in $R/bench*.txt; do echo "$(basename $f .txt): $(grep -h 'all_reduce /' $f)"; done
tar czf $OUT/results.tgz -C $R .
