#!/usr/bin/env bash
# Call 58 (2026-11-27) on one H100/H200, wgpu through NVIDIA's Vulkan driver (set up as in
# run-57.sh): the wgpu crate tests and the suite on cpu + wgpu:0 at b7d0a8f (one reference per
# submission's completion note), then bench-wgpu of bfc279b (before: the new
# per-submission-note row, three references) and b7d0a8f (after), alternating four times.
# Build: cargo xtask gpu-bundle --features wgpu --out bundle-wgpu; copy bench-wgpu, example-wgpu,
# devstream-wgpu-tests and conformance into bundle/; bfc279b's bench-wgpu (stripped) as
# bundle/bench-wgpu-before; git rev-parse --short HEAD > bundle/COMMIT;
# cp docs/results/gpu-run-lib.sh docs/results/2026-11-27-gpu/run-58.sh bundle/; carry [bundle, .gl]
set -u
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
. "$(dirname "$0")/gpu-run-lib.sh"
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
run wgpu-info 60 ./example-wgpu
run wgpu-crate-tests 90 env DEVSTREAM_REQUIRE=wgpu ./devstream-wgpu-tests --test-threads=1
run conformance-wgpu 150 env DEVSTREAM_TEST_STACKS_AFTER=130 DEVSTREAM_REQUIRE=cpu,wgpu DEVSTREAM_PLACES=cpu,wgpu:0 ./conformance
for i in 1 2 3 4; do run bench-wgpu-before-$i 60 ./bench-wgpu-before; run bench-wgpu-after-$i 60 ./bench-wgpu; done
for f in $R/bench-wgpu-*.txt; do echo "== $(basename $f)"; grep "record+query" $f; done
tar czf $OUT/results.tgz -C $R .
