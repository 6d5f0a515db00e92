// ns per call of a Paddle custom-device plug-in's stream and event functions, called from C
// as Paddle calls them (no Python, no Paddle): the plug-in's own cost, for profiling
// (perf record) and for comparing builds. Not the goal, which bench_stream_ops.py
// measures through real Paddle.
//
//   g++ -O2 -std=c++17 -I PADDLE/include tests/paddle/table_bench.cc -o table_bench -ldl
//   (PADDLE: the installed wheel's package folder, site-packages/paddle)
//   ./table_bench DIR/libdevstream_cpu.so [calls]      # or the ref_cpu plug-in
//
// SEQUENCE=1 runs only what one Paddle `Stream.wait_stream` calls (set_device, create_event,
// record_event, stream_wait_event, synchronize_event, set_device, destroy_event), 100 times and
// then `calls` times, inside `run_sequence`, for counting its instructions:
//   SEQUENCE=1 valgrind --tool=callgrind --collect-atstart=no --toggle-collect='run_sequence*' \
//     ./table_bench DIR/libdevstream_cpu.so 10000        # Ir / 10100 per wait_stream
//
// POLLUTE=BYTES writes that many bytes (one per cache line) between calls, so each call finds
// less of what it reads in the caches (what Paddle's own work between calls does); the time of
// that writing is left out. Each figure is the median of 11 blocks.
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <algorithm>
#include <vector>
#include "paddle/phi/backends/device_ext.h"

// The seven calls of one Paddle `Stream.wait_stream`, `n` times (SEQUENCE=1).
__attribute__((noinline)) static void run_sequence(C_DeviceInterface& iface, C_Device_st& dev,
                                                   C_Stream s1, C_Stream s2, long n) {
  for (long i = 0; i < n; i++) {
    C_Event t = nullptr;
    iface.set_device(&dev);
    iface.create_event(&dev, &t); iface.record_event(&dev, s1, t);
    iface.stream_wait_event(&dev, s2, t); iface.synchronize_event(&dev, t);
    iface.set_device(&dev); iface.destroy_event(&dev, t);
  }
}

static double now() { timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e9 + t.tv_nsec; }

int main(int argc, char** argv) {
  if (argc < 2) { fprintf(stderr, "usage: table_bench LIB [calls]\n"); return 2; }
  long n = argc > 2 ? atol(argv[2]) : 2000000;
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) { fprintf(stderr, "%s\n", dlerror()); return 1; }
  auto init = (void (*)(CustomRuntimeParams*))dlsym(lib, "InitPlugin");
  CustomRuntimeParams params; memset(&params, 0, sizeof params);
  C_DeviceInterface iface; memset(&iface, 0, sizeof iface);
  params.size = sizeof params; params.interface = &iface; iface.size = sizeof iface;
  init(&params);
  if (!params.device_type) { fprintf(stderr, "no device type\n"); return 1; }
  printf("%s (%s), %ld calls a block\n", params.device_type, argv[1], n / 10);
  C_Device_st dev{0};
  iface.initialize(); iface.init_device(&dev); iface.set_device(&dev);
  C_Stream s1 = nullptr, s2 = nullptr; C_Event e = nullptr;
  iface.create_stream(&dev, &s1); iface.create_stream(&dev, &s2); iface.create_event(&dev, &e);
  iface.record_event(&dev, s1, e); iface.synchronize_stream(&dev, s1);
  if (getenv("SEQUENCE")) {
    run_sequence(iface, dev, s1, s2, 100);  // warm: the thread's kept event slot exists
    run_sequence(iface, dev, s1, s2, n);
    printf("%ld wait_stream sequences\n", n);
    return 0;
  }
  static size_t pollute = getenv("POLLUTE") ? atol(getenv("POLLUTE")) : 0;
  static std::vector<char> junk(pollute + 64);
  auto bench = [&](const char* name, auto body) {
    std::vector<double> v;
    for (int b = 0; b < 11; b++) {
      double t = now();
      double overhead = 0;
      for (long i = 0; i < n / 10; i++) {
        if (pollute) { double p0 = now(); for (size_t j = 0; j < pollute; j += 64) junk[j]++; overhead += now() - p0; }
        body();
      }
      v.push_back((now() - t - overhead) / (n / 10));
    }
    std::sort(v.begin(), v.end());
    printf("%-22s %7.1f ns\n", name, v[v.size() / 2]);
  };
  bench("record_event", [&] { iface.record_event(&dev, s1, e); });
  bench("stream_wait_event", [&] { iface.stream_wait_event(&dev, s2, e); });
  if (iface.query_stream) bench("query_stream", [&] { iface.query_stream(&dev, s1); });
  bench("synchronize_stream", [&] { iface.synchronize_stream(&dev, s1); });
  if (iface.query_event) bench("query_event", [&] { iface.query_event(&dev, e); });
  bench("synchronize_event", [&] { iface.synchronize_event(&dev, e); });
  bench("set_device", [&] { iface.set_device(&dev); });
  // What Paddle's Stream.wait_stream calls (and set_device once more).
  bench("wait_stream(6 calls)", [&] {
    C_Event t = nullptr;
    iface.create_event(&dev, &t); iface.record_event(&dev, s1, t);
    iface.stream_wait_event(&dev, s2, t); iface.synchronize_event(&dev, t); iface.set_device(&dev); iface.destroy_event(&dev, t);
  });
  bench("create+destroy_event", [&] { C_Event t = nullptr; iface.create_event(&dev, &t); iface.destroy_event(&dev, t); });
  return 0;
}
