#!/usr/bin/env bash
# Session of 2026-11-24 evening (call 29): the CPU in-process all-reduce on the 16-core host
# against memcpy (issue 14), bench-step five times with the variants rotating (issue 15: the
# eager ratio's spread), the suite on cpu,cuda,hip at the new code, NCCL/RCCL with one rank,
# and a look for a Vulkan driver on this image.
set -u
. "$(dirname "$0")/gpu-run-lib.sh"
export NCCL_NVLS_ENABLE=0
NCCL=$(python3 -c 'import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],"lib","libnccl.so.2"))' 2>/dev/null)
{ echo "# vulkan probe"; ls /usr/share/vulkan/icd.d /etc/vulkan/icd.d 2>&1; ldconfig -p | grep -i -E "vulkan|GLX_nvidia|nvidia-glcore" ; } > $R/vulkan-probe.txt 2>&1
for r in 2 4 8; do run comm-cpu-ranks$r 60 ./bench-comm-cpu --ranks $r; done
grep -h "all_reduce /" $R/comm-cpu-ranks*.txt
for i in 1 2 3 4 5; do run bench-step-cuda-$i 60 ./bench-workload-cuda step; done
grep -h "eager\|replay" $R/bench-step-cuda-*.txt
run conformance-elide-on 120 env DEVSTREAM_TEST_STACKS_AFTER=100 DEVSTREAM_REQUIRE=cpu,cuda,hip ./conformance
run comm-cuda-one-rank 120 env DEVSTREAM_COMM_MIN_RANKS=1 DEVSTREAM_REQUIRE=cuda DEVSTREAM_PLACES=cuda:0 ./comm_gpu --test-threads=1
run bench-scale-cuda 240 ./bench-scale --place cuda:0
