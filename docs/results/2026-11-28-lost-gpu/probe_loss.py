"""Does a sticky error of one GPU's context reach another GPU's context of the same process?

Raw CUDA driver calls through ctypes (no devstream code): device 0's primary context runs a
kernel that executes `trap`; then device 1's primary context, from the same thread and from a
new thread, makes driver calls (some on a stream made before the loss, some on new objects).
Each call's result code is printed. Run with two GPUs visible.
"""
import ctypes, sys, threading

cuda = ctypes.CDLL("libcuda.so.1")
TRAP = b""".version 6.0
.target sm_50
.address_size 64
.visible .entry trap_kernel() { trap; }
.visible .entry nop_kernel() { ret; }
"""
HOSTFN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
ran = []
hostfn = HOSTFN(lambda _: ran.append(1))


def call(name, *args):
    code = getattr(cuda, name)(*args)
    return code


def show(label, name, *args):
    code = call(name, *args)
    print(f"{label:<34} {name:<22} -> {code}", flush=True)
    return code


def handles():
    return ctypes.c_void_p()


assert call("cuInit", 0) == 0
dev = [ctypes.c_int(), ctypes.c_int()]
ctx = [handles(), handles()]
for i in range(2):
    assert call("cuDeviceGet", ctypes.byref(dev[i]), i) == 0
    assert call("cuDevicePrimaryCtxRetain", ctypes.byref(ctx[i]), dev[i]) == 0

# Device 1 first: a module, a stream and a buffer made before device 0 is lost.
assert call("cuCtxSetCurrent", ctx[1]) == 0
mod1, nop1, s1, buf1 = handles(), handles(), handles(), ctypes.c_uint64()
assert call("cuModuleLoadData", ctypes.byref(mod1), TRAP) == 0
assert call("cuModuleGetFunction", ctypes.byref(nop1), mod1, b"nop_kernel") == 0
assert call("cuStreamCreate", ctypes.byref(s1), 1) == 0
assert call("cuMemAlloc_v2", ctypes.byref(buf1), 1 << 20) == 0

# Device 0: lose it.
assert call("cuCtxSetCurrent", ctx[0]) == 0
mod0, trap0, s0 = handles(), handles(), handles()
assert call("cuModuleLoadData", ctypes.byref(mod0), TRAP) == 0
assert call("cuModuleGetFunction", ctypes.byref(trap0), mod0, b"trap_kernel") == 0
assert call("cuStreamCreate", ctypes.byref(s0), 1) == 0
show("device 0: launch trap", "cuLaunchKernel", trap0, 1, 1, 1, 1, 1, 1, 0, s0, None, None)
show("device 0: stream sync", "cuStreamSynchronize", s0)
show("device 0: ctx sync", "cuCtxSynchronize")


def probe(label):
    show(label + " set ctx1", "cuCtxSetCurrent", ctx[1])
    show(label + " old stream query", "cuStreamQuery", s1)
    show(label + " nop kernel", "cuLaunchKernel", nop1, 1, 1, 1, 1, 1, 1, 0, s1, None, None)
    show(label + " memset async", "cuMemsetD8Async", buf1, 7, 1 << 20, s1)
    show(label + " host func", "cuLaunchHostFunc", s1, hostfn, None)
    show(label + " old stream sync", "cuStreamSynchronize", s1)
    s_new, b_new = handles(), ctypes.c_uint64()
    show(label + " new stream", "cuStreamCreate", ctypes.byref(s_new), 1)
    show(label + " new alloc", "cuMemAlloc_v2", ctypes.byref(b_new), 4096)
    show(label + " ctx1 sync", "cuCtxSynchronize")
    print(f"{label} host functions run so far: {len(ran)}", flush=True)


probe("same thread:")
t = threading.Thread(target=probe, args=("other thread:",))
t.start(); t.join()
# Device 1 with no current context switch: ctx0 current, stream of ctx1.
show("ctx0 current, stream of ctx1", "cuCtxSetCurrent", ctx[0])
show("ctx0 current, stream of ctx1", "cuLaunchHostFunc", s1, hostfn, None)
show("ctx0 current, stream of ctx1", "cuStreamSynchronize", s1)
print(f"host functions run: {len(ran)}", flush=True)
