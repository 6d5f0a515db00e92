#!/usr/bin/env bash
# Call 45 (issue 14, CPU goal, diagnosis): one rank's part of the in-process all-reduce as the
# engine runs it (reduce_chunks, 64 KiB chunks, copy in / combine / copy out to every buffer),
# ranks as threads, with each buffer behind a Mutex taken per chunk (as the engine) or read and
# written without locks (the ceiling), against one thread's memcpy of 64 MiB.
# rbench: 45-comm-cpu-locks/rbench.rs (a scratch crate depending on devstream-core only).
set -u
. "$(dirname "$0")/gpu-run-lib.sh"
for k in 1 2 3; do
  for n in 4 2 8; do
    run locked-$n-$k 60 ./rbench locked $n
    run raw-$n-$k 60 ./rbench raw $n
  done
done
for f in $R/*.txt; do echo "$(basename $f .txt): $(grep -h 'ranks:' $f)"; done
tar czf $OUT/results.tgz -C $R .
