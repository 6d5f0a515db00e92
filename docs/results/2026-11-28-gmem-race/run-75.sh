#!/usr/bin/env bash
# Call 75 (2026-11-28, third session) on nvidia-h200: where the CUDA/HIP graph-private memory
# crash is. The bundle turns `capture_alloc` on for CUDA/HIP through a diagnostic variable
# (DEVSTREAM_DIAG_CAPTURE_ALLOC, in the bundle's build only). The race test alone 15 times per
# place (cuda:0, hip:0) for the crash rate, then under cuda-gdb (batch: run, then every thread's
# backtrace at the signal) until it crashes, then under compute-sanitizer memcheck once.
# Build: cargo xtask gpu-bundle --features cuda,hip,comm,wgpu --out gpurun/bundle; carry [gpurun].
set -u
cd gpurun
. bundle/gpu-run-lib.sh
export DEVSTREAM_DIAG_CAPTURE_ALLOC=1
T=pools_capture::graph_memory_survives_racing_drops_and_launches
GDB=$(command -v cuda-gdb || ls /usr/local/cuda*/bin/cuda-gdb 2>/dev/null | head -1)
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
echo "cuda-gdb: $GDB compute-sanitizer: $CS" | tee $R/tools.txt
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader > $R/devices.txt
for P in cuda:0 hip:0; do
  ok=0; bad=0
  for i in $(seq 15); do
    if env DEVSTREAM_PLACES=$P timeout 20 ./conformance $T --exact > $R/last.txt 2>&1; then ok=$((ok+1)); else bad=$((bad+1)); cp $R/last.txt $R/fail-${P%:0}-$i.txt; fi
  done
  echo "$P: $ok ok, $bad failed of 15"
done | tee $R/race-rate.txt
for P in hip:0 cuda:0; do
  for i in 1 2 3 4; do
    DEVSTREAM_PLACES=$P timeout 150 $GDB -q -batch -ex "set pagination off" -ex "handle SIGUSR1 nostop noprint" -ex run -ex "info registers rip" -ex "x/6i \$pc" -ex "thread apply all bt 40" --args ./conformance $T --exact --nocapture > $R/gdb-${P%:0}-$i.txt 2>&1
    grep -q "SIGSEGV\|SIGABRT\|SIGBUS" $R/gdb-${P%:0}-$i.txt && break
  done
  echo "$P gdb: $(grep -h -m1 'received signal' $R/gdb-${P%:0}-*.txt)"
done
tar czf $OUT/results.tgz -C $R .
[ -n "$CS" ] && run memcheck-hip 200 env DEVSTREAM_PLACES=hip:0 $CS --tool memcheck --target-processes all ./conformance $T --exact
[ -n "$CS" ] && run memcheck-cuda 200 env DEVSTREAM_PLACES=cuda:0 $CS --tool memcheck --target-processes all ./conformance $T --exact
tar czf $OUT/results.tgz -C $R .
