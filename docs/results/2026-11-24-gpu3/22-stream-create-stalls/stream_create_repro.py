# Does cuStreamCreateWithPriority stall while streams are held at cuStreamWaitValue32 waits, and
# on what does it depend (streams that exist, streams held, priority)? Each scenario runs in a
# child process with a deadline. Raw driver calls through ctypes: no devstream involved.
# Usage (run 22, H100): python3 stream_create_repro.py
import ctypes, sys, subprocess, time, os
def scenario(existing, held, notifiers, prio, notifier_waits):
    cu = ctypes.CDLL("libcuda.so.1")
    def ck(r, what):
        if r != 0: raise SystemExit(f"{what} -> {r}")
    ck(cu.cuInit(0), "init"); dev = ctypes.c_int(); ck(cu.cuDeviceGet(ctypes.byref(dev), 0), "dev")
    ctx = ctypes.c_void_p(); ck(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "retain"); ck(cu.cuCtxSetCurrent(ctx), "cur")
    def mk(p):
        s = ctypes.c_void_p(); t = time.time(); ck(cu.cuStreamCreateWithPriority(ctypes.byref(s), 1, p), "create"); return s, time.time() - t
    flag = ctypes.c_void_p(); ck(cu.cuMemHostAlloc(ctypes.byref(flag), 64, 0x2 | 0x1), "hostalloc")  # DEVICEMAP|PORTABLE
    ctypes.memset(flag, 0, 64)
    dptr = ctypes.c_uint64(); ck(cu.cuMemHostGetDevicePointer_v2(ctypes.byref(dptr), flag, 0), "devptr")
    pool = [mk(0)[0] for _ in range(existing)]
    ev = ctypes.c_void_p()
    held_streams = []
    worst = 0.0
    for i in range(held):
        s, _ = mk(0)
        ck(cu.cuStreamWaitValue32_v2(s, dptr, ctypes.c_uint32(1), 0x0), "waitvalue")  # GEQ
        e = ctypes.c_void_p(); ck(cu.cuEventCreate(ctypes.byref(e), 2), "evcreate"); ck(cu.cuEventRecord(e, s), "rec")
        held_streams.append((s, e))
        for _ in range(notifiers):
            n, dt = mk(prio); worst = max(worst, dt)
            if notifier_waits: ck(cu.cuStreamWaitEvent(n, e, 0), "waitevent")
    ctypes.c_uint32.from_address(flag.value).value = 1
    ck(cu.cuCtxSynchronize(), "sync")
    print(f"ok worst create {worst*1e3:.2f} ms")
if len(sys.argv) > 1:
    scenario(*[int(a) for a in sys.argv[1:]]); sys.exit(0)
for existing in (0, 32, 64, 128):
    for held, notifiers, prio, waits in ((16, 1, 0, 1), (16, 1, 0, 0), (16, 2, 0, 1), (16, 1, -1, 1), (32, 1, 0, 1), (64, 0, 0, 0)):
        args = [str(a) for a in (existing, held, notifiers, prio, waits)]
        t = time.time()
        try:
            out = subprocess.run([sys.executable, __file__] + args, capture_output=True, text=True, timeout=8)
            res = (out.stdout + out.stderr).strip().splitlines()[-1:] or ["?"]
        except subprocess.TimeoutExpired:
            res = ["STALLED (killed at 8 s)"]
        print(f"existing={existing:4} held={held:3} notifiers/held={notifiers} prio={prio:2} notifier_waits={waits}: {res[0]} ({time.time()-t:.1f} s)", flush=True)
