#!/usr/bin/env bash
# Call 62 (2026-11-28), four GPUs: item 14 (the conformance stress hangs with three or more CUDA
# places in one process). The stress test alone on cuda:0,1,2 with the suite built at 32e8a58
# (conformance-old, unstripped, stacks after 60 s) and at b651417+ (conformance-syms: deferred
# releases examined outside their lock), then, with this commit's bundle, the whole suite with cpu
# and all four GPUs, and the collectives with four ranks.
set -u
cd gpurun; for f in bundle/*.xz; do xz -d "$f"; done; chmod +x bundle/*
. bundle/gpu-run-lib.sh
export NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader > $R/devices.txt
S=stress::create_record_wait_drop_under_load_leaves_nothing_live
watched stress-3gpu-old 100 env DEVSTREAM_TEST_STACKS_AFTER=70 DEVSTREAM_REQUIRE=cuda DEVSTREAM_PLACES=cuda:0,cuda:1,cuda:2 ./conformance-old $S --exact --nocapture
watched stress-3gpu-new 100 env DEVSTREAM_TEST_STACKS_AFTER=70 DEVSTREAM_REQUIRE=cuda DEVSTREAM_PLACES=cuda:0,cuda:1,cuda:2 ./conformance-syms $S --exact --nocapture
watched stress-4gpu-new 120 env DEVSTREAM_TEST_STACKS_AFTER=90 DEVSTREAM_REQUIRE=cuda DEVSTREAM_PLACES=cuda:0,cuda:1,cuda:2,cuda:3 ./conformance-syms $S --exact --nocapture
watched conformance-cpu-4gpu 150 env DEVSTREAM_TEST_STACKS_AFTER=140 DEVSTREAM_REQUIRE=cpu,cuda DEVSTREAM_PLACES=cpu,cuda:0,cuda:1,cuda:2,cuda:3 ./conformance
run comm-cuda-4gpu 120 env DEVSTREAM_REQUIRE=cuda DEVSTREAM_PLACES=cuda:0,cuda:1,cuda:2,cuda:3 ./comm_gpu --test-threads=1
tar czf $OUT/results.tgz -C $R .
