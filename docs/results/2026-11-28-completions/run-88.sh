#!/usr/bin/env bash
# Call 88 on nvidia-h200: call 86's CUDA GPU tests failed two completion tests and hung in the
# next one (c65d491; call 76 at f71d144 passed 25/25). The two tests alone at c65d491 with their
# messages, then the whole binary built at 214fc23 (before the hub's spin window), de1bf1d (the
# spin window) and 085d33c (before the graph-memory block source).
# Build: cargo test --release -p devstream-cuda --test gpu --no-run at each commit (worktrees),
# stripped into gpurun/bundle/cuda-gpu-<commit>; carry [gpurun, .gl].
set -u
cd gpurun
. bundle/gpu-run-lib.sh
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader > $R/devices.txt
for t in completions::event_completion_survives_a_re_record_of_its_event completions::completions_use_independent_notifiers_and_leave_captures_valid interop_with_cudarc_and_raw_handles; do
  run head-$(echo $t | sed 's/.*:://') 45 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-gpu $t --exact --test-threads=1 --nocapture
done
for c in 214fc23 de1bf1d 085d33c; do
  run cuda-gpu-$c 60 env DEVSTREAM_REQUIRE=cuda ./cuda-gpu-$c --test-threads=1
done
tar czf $OUT/results.tgz -C $R .
