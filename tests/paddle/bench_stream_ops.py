"""Cost of Paddle's Python-level stream ops on a devstream device against a reference plug-in.

    CUSTOM_DEVICE_ROOT=target/paddle-plugins python tests/paddle/bench_stream_ops.py \
        --device devstream_cpu:0 --reference ref_cpu:0 [--out docs/results/FILE.md]

Both devices run in one process, in interleaved blocks (A, B, A, B, ...), so that drift of the
machine hits both alike; each op's figure is the median over blocks of the mean ns per call in
a block. The ratio is device / reference: what devstream adds over a plug-in that does nothing.
"""

import argparse
import datetime
import os
import platform
import statistics
import subprocess
import time

os.environ.setdefault("GLOG_minloglevel", "2")
import paddle  # noqa: E402


def ops(device):
    s1 = paddle.device.Stream(device)
    s2 = paddle.device.Stream(device)
    event = paddle.device.Event()
    s1.record_event(event)
    s1.synchronize()
    return {
        "record_event": lambda: s1.record_event(event),
        "wait_event": lambda: s2.wait_event(event),
        "wait_stream": lambda: s2.wait_stream(s1),
        "query": s1.query,
        "synchronize": s1.synchronize,
        "event.query": event.query,
    }


def time_block(op, calls):
    start = time.perf_counter_ns()
    for _ in range(calls):
        op()
    return (time.perf_counter_ns() - start) / calls


def measure(device, reference, blocks, calls):
    results = {}
    paddle.device.set_device(device)
    device_ops = ops(device)
    paddle.device.set_device(reference)
    reference_ops = ops(reference)
    for name in device_ops:
        a, b = [], []
        for _ in range(blocks):
            paddle.device.set_device(device)
            a.append(time_block(device_ops[name], calls))
            paddle.device.set_device(reference)
            b.append(time_block(reference_ops[name], calls))
        results[name] = (statistics.median(a), statistics.median(b))
    return results


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="devstream_cpu:0")
    parser.add_argument("--reference", default="ref_cpu:0")
    parser.add_argument("--blocks", type=int, default=15)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--out")
    args = parser.parse_args()
    available = paddle.device.get_available_custom_device()
    for name in (args.device, args.reference):
        kind, _, index = name.partition(":")
        # Paddle lists a type with one device by its type alone.
        if name not in available and not (kind in available and index in ("", "0")):
            raise SystemExit(f"{name} is not registered (available: {available})")
    # Warm up both.
    measure(args.device, args.reference, 2, 200)
    results = measure(args.device, args.reference, args.blocks, args.calls)
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
        ).stdout.strip()
    except OSError:
        commit = "?"
    lines = [
        f"# Paddle stream ops: {args.device} against {args.reference}",
        "",
        f"- date: {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}",
        f"- machine: {platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}",
        f"- paddle {paddle.__version__}, commit {commit}",
        f"- command: python tests/paddle/bench_stream_ops.py --device {args.device} "
        f"--reference {args.reference} --blocks {args.blocks} --calls {args.calls}",
        "",
        f"| op | {args.device} ns | {args.reference} ns | ratio |",
        "|---|---:|---:|---:|",
    ]
    for name, (a, b) in results.items():
        lines.append(f"| {name} | {a:.0f} | {b:.0f} | {a / b:.3f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as out:
            out.write(text)


if __name__ == "__main__":
    main()
