#!/usr/bin/env bash
# Call 44 (issue 14, CPU goal) on the H100's 16-core host: the in-process all-reduce combining
# each source chunk where it lies under its lock (borrowed) against copying it out first
# (before, the committed code), alternating, 4 ranks, 3 times each; 2 and 8 ranks once.
set -u
. "$(dirname "$0")/gpu-run-lib.sh"
for k in 1 2 3; do
  run before-ranks4-$k 60 ./bench-comm-cpu-before --ranks 4 --iters 15
  run borrowed-ranks4-$k 60 ./bench-comm-cpu-borrowed --ranks 4 --iters 15
done
run before-ranks2 60 ./bench-comm-cpu-before --ranks 2 --iters 15
run borrowed-ranks2 60 ./bench-comm-cpu-borrowed --ranks 2 --iters 15
run before-ranks8 60 ./bench-comm-cpu-before --ranks 8 --iters 15
run borrowed-ranks8 60 ./bench-comm-cpu-borrowed --ranks 8 --iters 15
for f in $R/*.txt; do echo "$(basename $f): $(grep -h 'memcpy, one\|all_reduce /' $f | tr '\n' ' ' | sed 's/  */ /g')"; done
tar czf $OUT/results.tgz -C $R .
