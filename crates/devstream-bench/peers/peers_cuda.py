# Python-level costs of stream operations in PyTorch and CuPy, to run beside devstream's own benchmarks in the same device session (python3 peers_cuda.py [ops|step|priority|pools|all]).
# Copied from ../../../../shared/anchors/peers_cuda.py (the per-op part, unchanged) and extended with the workload benchmarks of issue 15:
# the step DAG of devstream_bench::step_plan in PyTorch and CuPy, eager and CUDA-graph, and the priority experiment in PyTorch;
# and the memory-pool benchmarks of issue 28 beside bench-pools (pools): an alloc+free pair for sizes seen before (PyTorch's caching
# allocator, CuPy's MemoryPool) and the four-stream churn in PyTorch with record_stream (the same sequence as bench_pools.rs).
import sys, time, torch, cupy as cp
def per_op(label, n, f):
    for _ in range(n // 10): f()
    t = time.perf_counter()
    for _ in range(n): f()
    print(f"{label:<44} {(time.perf_counter()-t)/n*1e9:>10.1f} ns/op")

def per_op_section():
    print("torch", torch.__version__, "cupy", cp.__version__)
    print("torch priority_range", torch.cuda.Stream.priority_range())
    s1 = torch.cuda.Stream(priority=-1); s2 = torch.cuda.Stream()
    print("torch Stream(priority=-100).priority ->", torch.cuda.Stream(priority=-100).priority)
    e = torch.cuda.Event()
    per_op("torch Stream() create", 2000, lambda: torch.cuda.Stream())
    per_op("torch s.record_event(e)", 50000, lambda: s1.record_event(e))
    per_op("torch s2.wait_event(e)", 50000, lambda: s2.wait_event(e))
    per_op("torch s2.wait_stream(s1)", 50000, lambda: s2.wait_stream(s1))
    torch.cuda.synchronize()
    per_op("torch s.query()", 50000, lambda: s1.query())
    per_op("torch e.query()", 50000, lambda: e.query())
    per_op("torch s.synchronize() idle", 50000, lambda: s1.synchronize())
    cs1 = cp.cuda.Stream(non_blocking=True, priority=-1); cs2 = cp.cuda.Stream(non_blocking=True)
    ce = cp.cuda.Event(disable_timing=True)
    per_op("cupy Stream() create", 2000, lambda: cp.cuda.Stream(non_blocking=True))
    per_op("cupy s.record(e)", 50000, lambda: cs1.record(ce))
    per_op("cupy s2.wait_event(e)", 50000, lambda: cs2.wait_event(ce))
    cs1.synchronize(); cs2.synchronize()
    per_op("cupy s.done", 50000, lambda: cs1.done)
    per_op("cupy s.synchronize() idle", 50000, lambda: cs1.synchronize())
    # tiny-kernel launch vs graph replay in cupy
    a = cp.zeros(1, dtype=cp.float32)
    k = cp.ElementwiseKernel('', 'float32 y', 'y = y + 1', 'inc')
    with cs1:
        k(a); cs1.synchronize()
        t = time.perf_counter()
        for _ in range(20000): k(a)
        cs1.synchronize(); print(f"{'cupy 20000 tiny kernel launches':<44} {(time.perf_counter()-t)/20000*1e9:>10.1f} ns/kernel")
        cs1.begin_capture()
        for _ in range(1000): k(a)
        g = cs1.end_capture()
        g.launch(); cs1.synchronize()
        t = time.perf_counter()
        for _ in range(20): g.launch()
        cs1.synchronize(); print(f"{'cupy graph of 1000 tiny kernels x20':<44} {(time.perf_counter()-t)/20000*1e9:>10.1f} ns/kernel")
    print("a =", float(a[0]), "(expected", 1 + 20000 + 1000*21, ")")
    # torch graph
    x = torch.zeros(1, device='cuda')
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(20000): x.add_(1)
    torch.cuda.synchronize(); print(f"{'torch 20000 tiny add_ launches':<44} {(time.perf_counter()-t)/20000*1e9:>10.1f} ns/kernel")
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(1000): x.add_(1)
    g.replay(); torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(20): g.replay()
    torch.cuda.synchronize(); print(f"{'torch graph of 1000 add_ x20':<44} {(time.perf_counter()-t)/20000*1e9:>10.1f} ns/kernel")


# ---- issue 15: the step DAG (same as devstream_bench::step_plan in Rust) ----
PHASES = 40
def step_plan():
    """Ops: ('k', stream) | ('r', event, stream) | ('w', stream, event) | ('q', event).
    Streams: 0 compute, 1 copy in, 2 copy out, 3 side; events: copy-in i = i, compute i = 40+i."""
    plan = []
    for i in range(PHASES):
        plan.append(('k', 1)); plan.append(('r', i, 1))
        m = i % 4
        if m == 0: plan.append(('w', 0, i))
        elif m == 1: plan.append(('w', 2, PHASES + i - 1))
        elif m == 2: plan.append(('w', 3, PHASES + i - 1))
        else: plan.append(('w', 0, i - 3))  # defensive repeat
        for _ in range(3): plan.append(('k', 0))
        plan.append(('r', PHASES + i, 0))
        plan.append(('k', 2 if i % 2 == 0 else 3))
        if i % 5 == 0: plan.append(('q', PHASES + i))
    return plan
PLAN = step_plan()
assert sum(1 for o in PLAN if o[0] == 'k') == 200 and sum(1 for o in PLAN if o[0] == 'w') == 40
STEPS = 1000

def report(label, seconds, steps=STEPS):
    print(f"{label:<44} {seconds / steps * 1e6:>10.1f} us/step")

def torch_step(S, T, E, query=True):
    for op in PLAN:
        if op[0] == 'k':
            with torch.cuda.stream(S[op[1]]):
                T[op[1]].add_(1)
        elif op[0] == 'r': E[op[1]].record(S[op[2]])
        elif op[0] == 'w': S[op[1]].wait_event(E[op[2]])
        elif query: E[op[1]].query()

def cupy_step(S, A, E, k, query=True):
    for op in PLAN:
        if op[0] == 'k':
            with S[op[1]]:
                k(A[op[1]])
        elif op[0] == 'r': E[op[1]].record(S[op[2]])
        elif op[0] == 'w': S[op[1]].wait_event(E[op[2]])
        elif query: E[op[1]].done

def step_section():
    print(f"step DAG: {len(PLAN)} ops per step (200 tiny kernels, 80 records, 40 waits of which 10 defensive, 8 queries), {STEPS} steps")
    # PyTorch eager
    S = [torch.cuda.Stream() for _ in range(4)]
    T = [torch.zeros(1, device='cuda') for _ in range(4)]
    E = [torch.cuda.Event() for _ in range(2 * PHASES)]
    for _ in range(10): torch_step(S, T, E)
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(STEPS): torch_step(S, T, E)
    torch.cuda.synchronize(); report("torch step eager", time.perf_counter() - t)
    # PyTorch CUDA graph: capture stream = S[0] (fork the others from it, join them back)
    g = torch.cuda.CUDAGraph()
    torch.cuda.synchronize()
    with torch.cuda.graph(g, stream=S[0]):
        cur = torch.cuda.current_stream()
        for s in S[1:]: s.wait_stream(cur)
        torch_step(S, T, E, query=False)
        for s in S[1:]: cur.wait_stream(s)
    g.replay(); torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(STEPS): g.replay()
    torch.cuda.synchronize(); report("torch step CUDA graph replay", time.perf_counter() - t)
    # CuPy eager
    CS = [cp.cuda.Stream(non_blocking=True) for _ in range(4)]
    A = [cp.zeros(1, dtype=cp.float32) for _ in range(4)]
    CE = [cp.cuda.Event(disable_timing=True) for _ in range(2 * PHASES)]
    k = cp.ElementwiseKernel('', 'float32 y', 'y = y + 1', 'inc_step')
    for _ in range(10): cupy_step(CS, A, CE, k)
    for s in CS: s.synchronize()
    t = time.perf_counter()
    for _ in range(STEPS): cupy_step(CS, A, CE, k)
    for s in CS: s.synchronize()
    report("cupy step eager", time.perf_counter() - t)
    # CuPy CUDA graph
    s0 = CS[0]
    s0.begin_capture()
    fork = cp.cuda.Event(disable_timing=True); fork.record(s0)
    for s in CS[1:]: s.wait_event(fork)
    cupy_step(CS, A, CE, k, query=False)
    joins = []
    for s in CS[1:]:
        j = cp.cuda.Event(disable_timing=True); j.record(s); s0.wait_event(j); joins.append(j)
    cg = s0.end_capture()
    cg.launch(s0); s0.synchronize()
    t = time.perf_counter()
    for _ in range(STEPS): cg.launch(s0)
    s0.synchronize(); report("cupy step CUDA graph replay", time.perf_counter() - t)

# ---- issue 15: priorities (PyTorch) ----
def priority_section(probes=1000):
    least, greatest = torch.cuda.Stream.priority_range()
    n = 4096
    W = [torch.randn(n, n, device='cuda') for _ in range(4)]
    bg = [torch.cuda.Stream(priority=0) for _ in range(4)]
    torch.cuda.synchronize()
    t = time.perf_counter()
    with torch.cuda.stream(bg[0]): W[0] @ W[0]
    bg[0].synchronize()
    print(f"priority: background = 4 streams at priority 0, each kept 4 deep in {n}x{n} fp32 matmuls ({(time.perf_counter()-t)*1e3:.2f} ms each incl. launch); probe = tiny add_ + event poll every 1 ms, {probes} probes")
    def run(prio):
        probe = torch.cuda.Stream(priority=prio)
        x = torch.zeros(1, device='cuda')
        done = torch.cuda.Event()
        inflight = [[] for _ in bg]
        def top_up():
            for i, s in enumerate(bg):
                q = inflight[i]
                while q and q[0].query(): q.pop(0)
                while len(q) < 4:
                    with torch.cuda.stream(s): W[i] @ W[i]
                    e = torch.cuda.Event(); e.record(s); q.append(e)
        top_up(); time.sleep(0.005)
        lat = []
        start = time.perf_counter()
        for k in range(probes):
            top_up()
            due = start + k * 1e-3
            while time.perf_counter() < due: pass
            t = time.perf_counter()
            with torch.cuda.stream(probe): x.add_(1)
            done.record(probe)
            while not done.query(): pass
            lat.append((time.perf_counter() - t) * 1e6)
        torch.cuda.synchronize()
        lat.sort()
        return lat
    pct = lambda l, p: l[round((len(l) - 1) * p)]
    print(f"torch priority_range: least {least}, greatest {greatest}")
    high = run(-1)  # as in issue 15: torch.cuda.Stream(priority=-1) against 0
    normal = run(0)
    for name, l in (("torch probe priority=-1", high), ("torch probe priority=0", normal)):
        print(f"{name:<32} p50 {pct(l, .5):>9.1f} us  p99 {pct(l, .99):>9.1f} us  max {l[-1]:>9.1f} us")
    print(f"torch p99 priority 0 / -1 = {pct(normal, .99) / pct(high, .99):.1f}x")
    if greatest < -1:
        top = run(greatest)
        print(f"{'torch probe priority=' + str(greatest):<32} p50 {pct(top, .5):>9.1f} us  p99 {pct(top, .99):>9.1f} us  max {top[-1]:>9.1f} us")

PAIR_SIZES = (256, 64 << 10, 4 << 20)
CHURN_STREAMS, CHURN_WINDOW, CHURN_TOUCH = 4, 8, 4096
MASK = (1 << 64) - 1

def churn_plan(steps):
    """bench_pools.rs churn_plan: xorshift64 from 0x9E3779B97F4A7C15; sizes (256 << k) plus up to as much again."""
    x = 0x9E3779B97F4A7C15
    def nxt():
        nonlocal x
        x ^= (x << 13) & MASK; x ^= x >> 7; x ^= (x << 17) & MASK
        return x
    plan = []
    for _ in range(steps):
        r = nxt(); base = 256 << (r % 18); size = base + ((r >> 8) % base)
        s = nxt(); plan.append((s % CHURN_STREAMS, (s >> 8) % CHURN_STREAMS, size))
    return plan

def pools_section(quick=False):
    print("torch", torch.__version__, "cupy", cp.__version__)
    n = 5000 if not quick else 500
    s = torch.cuda.Stream()
    for size in PAIR_SIZES:
        def torch_pair():
            with torch.cuda.stream(s):
                x = torch.empty(size, dtype=torch.uint8, device="cuda")
                del x
        per_op(f"torch empty+del {size} B on a stream", n, torch_pair)
    pool = cp.cuda.MemoryPool()
    cs = cp.cuda.Stream(non_blocking=True)
    for size in PAIR_SIZES:
        def cupy_pair():
            with cs:
                m = pool.malloc(size)
                del m
        per_op(f"cupy MemoryPool malloc+free {size} B", n, cupy_pair)
    # Churn: the same plan as bench-pools, each buffer handed to its consumer with record_stream.
    steps = 2000 if not quick else 200
    plan = churn_plan(steps)
    streams = [torch.cuda.Stream() for _ in range(CHURN_STREAMS)]
    def run():
        live = []
        for i, (p, c, size) in enumerate(plan):
            producer, consumer = streams[p], streams[c]
            touch = min(size, CHURN_TOUCH)
            with torch.cuda.stream(producer):
                x = torch.empty(size, dtype=torch.uint8, device="cuda")
                x[:touch].fill_(i % 256)
            if c != p:
                consumer.wait_stream(producer)
            with torch.cuda.stream(consumer):
                x[size - touch:].fill_(~i % 256)
            if c != p:
                x.record_stream(consumer)
            live.append(x); del x
            if len(live) > CHURN_WINDOW:
                live.pop(0)
        live.clear()
        torch.cuda.synchronize()
    run()  # warm: the caching allocator has seen the sizes, as bench-pools warms its pool
    torch.cuda.reset_peak_memory_stats()
    t = time.perf_counter()
    run()
    ms = (time.perf_counter() - t) * 1e3
    print(f"torch churn of {steps} buffers over {CHURN_STREAMS} streams (record_stream): {ms:.2f} ms, "
          f"peak reserved {torch.cuda.max_memory_reserved() / 2**20:.1f} MiB (peak allocated {torch.cuda.max_memory_allocated() / 2**20:.1f} MiB)")

if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "all"
    if what in ("ops", "all"): per_op_section()
    if what in ("step", "all"): step_section()
    if what in ("priority", "all"): priority_section()
    if what in ("pools", "all"): pools_section(quick="--quick" in sys.argv)
