#!/usr/bin/env bash
# Call 65 (2026-11-28), two GPUs: main after the duplicate-code removal (the CUDA/HIP raw tables'
# call helpers, the shim's flag translation, gpu-common's shared handles) and the first phase of
# waits across backends (a GPU stream held at a pinned host word written from the other
# backend's completion path; host-side streams released by the GPU event's completion): the
# suite with every place of both GPUs and wgpu:0 on NVIDIA's Vulkan driver (cross:: runs every
# ordered pair), elision off, compute-sanitizer memcheck over cross::, the CUDA GPU and soundness
# tests, the collectives on two GPUs, bench-cuda and bench-step (cpu) before (deb36db) and after.
# Build: cargo xtask gpu-bundle --features cuda,wgpu,hip,comm --out gpurun/bundle at 1f42cb8, keeping
# only the binaries this script runs (the whole bundle with wgpu is 135 MiB, over the 64 MiB carried);
# bench-step: cargo build --release -p devstream-bench --bin bench-step (stripped); -old: deb36db.
# Carry: gpurun, .gl (the Vulkan loader and libglvnd debs, the device tool's recipe).
set -u
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
cd gpurun
. bundle/gpu-run-lib.sh
export NCCL_NVLS_ENABLE=0
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $ICD ] && export VK_DRIVER_FILES=$ICD __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
NCCL=$(python3 -c 'import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],"lib","libnccl.so.2"))' 2>/dev/null)
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader > $R/devices.txt
run wgpu-info 60 ./example-wgpu
watched conformance-all-places 300 env DEVSTREAM_TEST_STACKS_AFTER=280 DEVSTREAM_REQUIRE=cpu,cuda,hip,wgpu DEVSTREAM_PLACES=cpu,cuda:0,cuda:1,hip:0,hip:1,wgpu:0 ./conformance
watched conformance-noelide 150 env DEVSTREAM_ELIDE_WAITS=0 DEVSTREAM_TEST_STACKS_AFTER=140 DEVSTREAM_REQUIRE=cpu,cuda,hip DEVSTREAM_PLACES=cpu,cuda:0,hip:0 ./conformance
run memcheck-cross 150 env DEVSTREAM_REQUIRE=cpu,cuda DEVSTREAM_PLACES=cpu,cuda:0 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 ./conformance cross::
watched cuda-gpu-tests 100 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-gpu --test-threads=1
run cuda-soundness 100 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-soundness --test-threads=1
run cuda-elide 60 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-elide
run hip-installed-runtime 60 ./devstream-hip-installed_runtime
run hip-shim-tests 60 ./devstream-hip-tests
run wgpu-crate-tests 90 env DEVSTREAM_REQUIRE=wgpu ./devstream-wgpu-tests --test-threads=1
run comm-cuda-2gpu 150 env DEVSTREAM_REQUIRE=cuda DEVSTREAM_PLACES=cuda:0,cuda:1 ./comm_gpu --test-threads=1
run comm-hip-2gpu 150 env DEVSTREAM_RCCL_LIBRARY=$NCCL DEVSTREAM_REQUIRE=hip DEVSTREAM_PLACES=hip:0,hip:1 ./comm_gpu --test-threads=1
{ for v in old new; do s=""; [ $v = old ] && s=-old; echo "== $v $(date +%T)"; timeout 70 ./bench-cuda$s 2>&1 | grep "^cuda "; done; } > $R/bench-cuda-old-new.txt 2>&1
echo "bench-cuda: $(grep -c '^cuda' $R/bench-cuda-old-new.txt) rows"
{ for i in 1 2 3 4 5; do for v in old new; do s=""; [ $v = old ] && s=-old; echo "== bench-step (cpu) $v $i $(date +%T)"; timeout 40 ./bench-step$s 2>&1 | tail -n 6; done; done; } > $R/bench-step-old-new.txt 2>&1
echo "bench-step: $(grep -c 'elision on' $R/bench-step-old-new.txt) rows"
tar czf $OUT/results.tgz -C $R .
