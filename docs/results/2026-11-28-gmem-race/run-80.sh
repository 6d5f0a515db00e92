#!/usr/bin/env bash
# Call 80 (2026-11-28, third session) on nvidia-h200: pool_model's capture programs crashed on
# cuda:0 in call 79; this runs the test under cuda-gdb with an unstripped conformance binary
# (built with CARGO_PROFILE_RELEASE_DEBUG=line-tables-only CARGO_PROFILE_RELEASE_STRIP=none,
# carried gzipped), then alone three times for the failing program's output. Carry [gpurun].
set -u
cd gpurun; gunzip -f bundle/conformance.gz; chmod +x bundle/conformance
. bundle/gpu-run-lib.sh
GDB=/usr/local/cuda/bin/cuda-gdb
for i in 1 2; do
  DEVSTREAM_PLACES=cuda:0 timeout 120 $GDB -q -batch -ex "set pagination off" -ex "handle SIGUSR1 nostop noprint" -ex run -ex "bt 60" -ex "thread apply all bt 30" --args ./conformance pool_model::pool_programs_obey_the_model --exact --nocapture > $R/gdb-$i.txt 2>&1
  grep -q "SIGSEGV\|SIGABRT\|SIGBUS" $R/gdb-$i.txt && break
done
for i in 1 2 3; do env DEVSTREAM_PLACES=cuda:0 timeout 60 ./conformance pool_model::pool_programs_obey_the_model --exact --nocapture > $R/plain-$i.txt 2>&1; echo "plain $i: $?"; done
tar czf $OUT/results.tgz -C $R .
