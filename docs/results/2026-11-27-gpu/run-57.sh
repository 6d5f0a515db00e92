#!/usr/bin/env bash
# Call 57 (2026-11-27) on one H100/H200: wgpu through NVIDIA's own Vulkan driver, which call 30
# could not start (it used the image's /usr/share ICD, whose libGLX_nvidia would not give
# vkCreateInstance). Here: Debian 12's loader and libglvnd from .gl/ (the device tool's recipe) and
# the driver's ICD under /usr/local/nvidia. Then the wgpu crate tests, the whole suite on wgpu:0,
# and bench-wgpu three times (issue 15 part 5: devstream's record + query against raw wgpu timed
# on a real GPU rather than counted on lavapipe) and bench-scale on wgpu:0.
# Build: cargo xtask gpu-bundle --features wgpu --out bundle-wgpu; copy bench-wgpu, example-wgpu,
# devstream-wgpu-tests, conformance and bench-scale into bundle/;
# git rev-parse --short HEAD > bundle/COMMIT; cp docs/results/gpu-run-lib.sh docs/results/2026-11-27-gpu/run-57.sh bundle/
# run with carry [bundle, .gl]
set -u
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
. "$(dirname "$0")/gpu-run-lib.sh"
{ ls -l /usr/local/nvidia/share/vulkan/icd.d/ /usr/share/vulkan/icd.d/ /etc/vulkan/icd.d/ 2>&1; ls /dev/nvidia* /dev/dri 2>&1; ldconfig -p | grep -i "vulkan\|GLX_nvidia\|EGL_nvidia"; } > $R/vulkan-setup.txt
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $ICD ] && export VK_DRIVER_FILES=$ICD __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
echo "VK_DRIVER_FILES=${VK_DRIVER_FILES:-unset}" >> $R/vulkan-setup.txt
run wgpu-info 60 ./example-wgpu
if grep -q "no wgpu adapter" $R/wgpu-info.txt; then run wgpu-info-debug 60 env VK_LOADER_DEBUG=error,warn,driver ./example-wgpu; tar czf $OUT/results.tgz -C $R .; exit 0; fi
run wgpu-crate-tests 90 env DEVSTREAM_REQUIRE=wgpu ./devstream-wgpu-tests --test-threads=1
run conformance-wgpu 150 env DEVSTREAM_TEST_STACKS_AFTER=130 DEVSTREAM_REQUIRE=cpu,wgpu DEVSTREAM_PLACES=cpu,wgpu:0 ./conformance
for i in 1 2 3; do run bench-wgpu-$i 60 ./bench-wgpu; done
grep -h "record" $R/bench-wgpu-*.txt | head -12
run bench-scale-wgpu 70 ./bench-scale --place wgpu:0
tar czf $OUT/results.tgz -C $R .
