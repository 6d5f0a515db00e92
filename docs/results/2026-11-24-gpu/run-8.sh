#!/usr/bin/env bash
# Final run of the session at one commit: CUDA regression and GPU tests, gpu-common unit tests,
# the whole conformance suite on every place (cpu, cuda:0, hip:0, devstream_cuda:0,
# devstream_hip:0), the examples, and a one-rank NCCL all_reduce.
set -u
B=$PWD/bundle; R=$OUT/r; mkdir -p $R; cd $B
export RUST_BACKTRACE=1 DEVSTREAM_HIP_LIBRARY=$B/libdevstream_hip_shim.so NCCL_NVLS_ENABLE=0
hdr() { echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), $(nproc) CPUs, kernel $(uname -r)"; echo "# devstream commit: $(cat COMMIT 2>/dev/null)"; echo "# command: $*"; echo; }
run() { local name=$1 t=$2; shift 2; local s=$(date +%s); { hdr "$@"; timeout -s KILL $t "$@" 2>&1; echo "exit status: $? ($(( $(date +%s)-s )) s)"; } > $R/$name.txt; echo "$name: $(grep -h 'test result' $R/$name.txt | tail -n 1) $(tail -n 1 $R/$name.txt)"; tar czf $OUT/results.tgz -C $R .; }
run soundness-all 90 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-soundness --test-threads=1
run cuda-gpu-tests 60 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-gpu --test-threads=1
run gpu-common-unit-tests 60 ./devstream-gpu-common-tests --test-threads=2
run conformance-cpu-cuda-hip 200 env DEVSTREAM_REQUIRE=cpu,cuda,hip ./conformance
run conformance-all-places 280 env DEVSTREAM_REQUIRE=cpu,cuda,hip,plugin DEVSTREAM_PLUGIN_PATH=$B/paddle-plugins DEVSTREAM_PADDLE_LOG=1 ./conformance
for e in cuda hip pipeline info; do run example-$e 60 ./example-$e; done
run example-allreduce-cuda-1-rank 60 ./example-allreduce --place cuda --ranks 1
grep -h "on [a-z_]*:[0-9]: returned Err\|whole check): panicked" $R/conformance-*.txt | cut -c1-200 | sort | uniq -c | head -20
