#!/usr/bin/env bash
# Call 63 (2026-11-28), four GPUs: item 14 after the stress test's gate is opened by a thread that
# makes no driver call (this commit): the stress test alone on three and four CUDA places, then the
# whole suite with cpu and all four GPUs.
# Build: cargo test --release -p devstream --no-default-features --features cpu,cuda,hip,trace
# --test conformance (unstripped, line tables), xz into gpurun/bundle/conformance-syms.
set -u
cd gpurun; for f in bundle/*.xz; do xz -d "$f"; done; chmod +x bundle/*
. bundle/gpu-run-lib.sh
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader > $R/devices.txt
S=stress::create_record_wait_drop_under_load_leaves_nothing_live
watched stress-3gpu 80 env DEVSTREAM_TEST_STACKS_AFTER=60 DEVSTREAM_REQUIRE=cuda DEVSTREAM_PLACES=cuda:0,cuda:1,cuda:2 ./conformance-syms $S --exact --nocapture
watched stress-4gpu 80 env DEVSTREAM_TEST_STACKS_AFTER=60 DEVSTREAM_REQUIRE=cuda DEVSTREAM_PLACES=cuda:0,cuda:1,cuda:2,cuda:3 ./conformance-syms $S --exact --nocapture
watched conformance-cpu-4gpu 150 env DEVSTREAM_TEST_STACKS_AFTER=140 DEVSTREAM_REQUIRE=cpu,cuda DEVSTREAM_PLACES=cpu,cuda:0,cuda:1,cuda:2,cuda:3 ./conformance-syms
tar czf $OUT/results.tgz -C $R .
