import os
os.environ.setdefault("GLOG_minloglevel", "2")
import paddle, sys
op = sys.argv[1]
paddle.device.set_device("ref_nn:0")
s1 = paddle.device.Stream("ref_nn:0"); s2 = paddle.device.Stream("ref_nn:0")
e = paddle.device.Event(); s1.record_event(e); s1.synchronize()
import ctypes
print("start", file=sys.stderr, flush=True)
f = {"wait_stream": lambda: s2.wait_stream(s1), "record_event": lambda: s1.record_event(e), "wait_event": lambda: s2.wait_event(e)}[op]
for _ in range(1000): f()
print("end", file=sys.stderr, flush=True)
