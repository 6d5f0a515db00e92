"""Cost of Paddle's Python-level stream ops on a devstream device against a reference plug-in.

    CUSTOM_DEVICE_ROOT=target/paddle-plugins python tests/paddle/bench_stream_ops.py \
        --device devstream_cpu:0 --reference ref_cpu:0 [--out docs/results/FILE.md]

Both devices run in one process, in interleaved blocks (A, B, A, B, ...), so that drift of the
machine hits both alike; each op's figure is the median over blocks of the mean ns per call in
a block. The ratio is device / reference: what devstream adds over a plug-in that does nothing.

    CUSTOM_DEVICE_ROOT=target/paddle-plugins python tests/paddle/bench_stream_ops.py \
        --device devstream_cpu:0 --reference ref_cpu:0 --processes 30

The same in 30 fresh processes: each op's ratio is the median over the processes, with their
range and how many exceed the goal (1.10). Where the loader puts the libraries changes a
process's figure (see `processes`), so one process is one sample.

    CUSTOM_DEVICE_ROOT=target/paddle-plugins python tests/paddle/bench_stream_ops.py \
        --device devstream_cpu:0 --same-name [--rounds 8] [--out docs/results/FILE.md]

The same-name control. Paddle finds a custom device's runtime by its type name in a hash map
several times per op, so what an op costs depends on the name (and on the other types loaded):
the same do-nothing plug-in registered as `ref_cpu`, `ref_cpu_13chr` and `devstream_ref` costs
up to 4 % more or less per `wait_stream`. Here the reference (`ref_cpu.cc`, compiled by this
script with `-DREF_CPU_DEVICE_TYPE` set to the device's type name) registers under the very name
of the measured device, and each runs alone in its own processes (`CUSTOM_DEVICE_ROOT` holding
that one library), in rounds alternating A B, B A, ...: the two sides differ only in the
plug-in's code. Needs `g++` and the wheel's headers (`paddle.sysconfig.get_include()`).
"""

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
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


REF_SOURCE = os.path.join(
    os.path.dirname(os.path.abspath(__file__)),
    "..",
    "..",
    "crates",
    "devstream-plugin",
    "test-plugins",
    "ref-cpu",
    "ref_cpu.cc",
)


def run_child(arguments, env=None):
    """This script run again with `arguments` in a fresh process; its last line as JSON."""
    proc = subprocess.run(
        [sys.executable, os.path.abspath(__file__), *arguments],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def child(device, blocks, calls):
    """Child of --same-name: the block means of every op on `device`, as JSON on stdout."""
    paddle.device.set_device(device)
    device_ops = ops(device)
    for op in device_ops.values():
        for _ in range(2):
            time_block(op, 200)
    out = {name: [time_block(op, calls) for _ in range(blocks)] for name, op in device_ops.items()}
    print(json.dumps(out))


def same_name(args):
    """Each op on the devstream device and on the reference registered under the same type
    name, each alone in its own processes, alternating by round; returns (rows, note)."""
    kind = args.device.partition(":")[0]
    root = os.environ.get("CUSTOM_DEVICE_ROOT", "")
    ours = os.path.join(root, f"lib{kind}.so")
    if not os.path.isfile(ours):
        raise SystemExit(f"--same-name: {ours} not found (set CUSTOM_DEVICE_ROOT)")
    with tempfile.TemporaryDirectory() as tmp:
        dir_a = os.path.join(tmp, "devstream")
        dir_b = os.path.join(tmp, "reference")
        os.mkdir(dir_a)
        os.mkdir(dir_b)
        os.symlink(os.path.abspath(ours), os.path.join(dir_a, f"lib{kind}.so"))
        compiler = os.environ.get("CXX", "g++")
        # The flags of the ref-cpu crate's build script, and the measured device's type name.
        subprocess.run(
            [
                compiler,
                "-std=c++17",
                "-shared",
                "-fPIC",
                "-O1",
                "-Wall",
                "-Werror",
                f'-DREF_CPU_DEVICE_TYPE="{kind}"',
                "-I",
                paddle.sysconfig.get_include(),
                "-o",
                os.path.join(dir_b, f"libref_as_{kind}.so"),
                os.path.abspath(args.reference_source),
            ],
            check=True,
        )
        per_block = {"a": {}, "b": {}}
        round_ratios = {}
        for r in range(args.rounds):
            sides = [("a", dir_a), ("b", dir_b)]
            if r % 2:
                sides.reverse()
            this_round = {}
            for side, folder in sides:
                env = dict(os.environ, CUSTOM_DEVICE_ROOT=folder)
                this_round[side] = run_child(
                    ["--child", args.device, "--blocks", str(args.blocks), "--calls", str(args.calls)],
                    env,
                )
            for name in this_round["a"]:
                per_block["a"].setdefault(name, []).extend(this_round["a"][name])
                per_block["b"].setdefault(name, []).extend(this_round["b"][name])
                round_ratios.setdefault(name, []).append(
                    statistics.median(this_round["a"][name])
                    / statistics.median(this_round["b"][name])
                )
    rows = []
    for name in per_block["a"]:
        a = statistics.median(per_block["a"][name])
        b = statistics.median(per_block["b"][name])
        ratios = round_ratios[name]
        rows.append((name, a, b, a / b, min(ratios), max(ratios)))
    return rows


GOAL = 1.10


def processes(args):
    """The in-process comparison in `args.processes` fresh processes; returns rows with each
    op's median over the processes' ratios, their range and how many exceed the goal.

    One process is one draw of where the loader and the allocator put things: with address
    space randomisation, the same two libraries measured in one process give a ratio that moves
    from process to process (for Paddle's wait_stream on devstream_cpu, about one process in
    ten runs 0.08 slower on devstream's side in every block, and none does with randomisation
    off; docs/results/2026-11-24-paddle/README.md). A figure from one process is one sample of
    that; the median over processes is the benchmark's answer."""
    per_op = {}
    for _ in range(args.processes):
        measured = run_child(
            [
                "--pair-child",
                "--device",
                args.device,
                "--reference",
                args.reference,
                "--blocks",
                str(args.blocks),
                "--calls",
                str(args.calls),
            ]
        )
        for name, (a, b) in measured.items():
            per_op.setdefault(name, []).append((a, b))
    rows = []
    for name, pairs in per_op.items():
        ratios = [a / b for a, b in pairs]
        a = statistics.median(a for a, _ in pairs)
        b = statistics.median(b for _, b in pairs)
        over = sum(r > GOAL for r in ratios)
        rows.append((name, a, b, statistics.median(ratios), min(ratios), max(ratios), over))
    return rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="devstream_cpu:0")
    parser.add_argument("--reference", default="ref_cpu:0")
    parser.add_argument("--blocks", type=int, default=15)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--same-name", action="store_true", help="the same-name control")
    parser.add_argument("--rounds", type=int, default=8, help="--same-name: rounds (2 processes each)")
    parser.add_argument("--reference-source", default=REF_SOURCE, help="--same-name: ref_cpu.cc")
    parser.add_argument(
        "--processes",
        type=int,
        default=1,
        help="the in-process comparison in this many fresh processes (median over them)",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--pair-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.blocks, args.calls)
        return
    if args.pair_child:
        measure(args.device, args.reference, 2, 200)
        results = measure(args.device, args.reference, args.blocks, args.calls)
        print(json.dumps(results))
        return
    available = paddle.device.get_available_custom_device()
    names = (args.device,) if args.same_name else (args.device, args.reference)
    for name in names:
        kind, _, index = name.partition(":")
        # Paddle lists a type with one device by its type alone.
        if name not in available and not (kind in available and index in ("", "0")):
            raise SystemExit(f"{name} is not registered (available: {available})")
    if args.same_name:
        rows = same_name(args)
        reference = f"ref_cpu.cc registered as {args.device.partition(':')[0]}"
        command = (
            f"python tests/paddle/bench_stream_ops.py --device {args.device} --same-name "
            f"--rounds {args.rounds} --blocks {args.blocks} --calls {args.calls}"
        )
        how = (
            f"- each side alone in its own processes, {args.rounds} rounds alternating (A B, B A, ...); "
            "ns: median of all block means; ratio range: over the rounds' own medians"
        )
    elif args.processes > 1:
        rows = processes(args)
        reference = args.reference
        command = (
            f"python tests/paddle/bench_stream_ops.py --device {args.device} "
            f"--reference {args.reference} --blocks {args.blocks} --calls {args.calls} "
            f"--processes {args.processes}"
        )
        how = (
            f"- {args.processes} fresh processes, each comparing both devices in interleaved "
            "blocks; ns: median over the processes of each one's median block mean; ratio: "
            "median of the processes' ratios, their range, and how many processes exceed "
            f"{GOAL:.2f}"
        )
    else:
        # Warm up both.
        measure(args.device, args.reference, 2, 200)
        results = measure(args.device, args.reference, args.blocks, args.calls)
        rows = [(name, a, b, a / b, None, None) for name, (a, b) in results.items()]
        reference = args.reference
        command = (
            f"python tests/paddle/bench_stream_ops.py --device {args.device} "
            f"--reference {args.reference} --blocks {args.blocks} --calls {args.calls}"
        )
        how = "- one process, interleaved blocks; ns: median of the block means"
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
        ).stdout.strip()
    except OSError:
        commit = "?"
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    lines = [
        f"# Paddle stream ops: {args.device} against {reference}",
        "",
        f"- date: {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}",
        f"- machine: {platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}, load {load}",
        f"- paddle {paddle.__version__}, commit {commit}",
        f"- command: {command}",
        how,
        "",
    ]
    if args.processes > 1 and not args.same_name:
        lines += [
            f"| op | {args.device} ns | {reference} ns | ratio (median) | range | over {GOAL:.2f} |",
            "|---|---:|---:|---:|---|---:|",
        ]
        for name, a, b, ratio, low, high, over in rows:
            lines.append(
                f"| {name} | {a:.0f} | {b:.0f} | {ratio:.3f} | {low:.3f}-{high:.3f} | "
                f"{over} of {args.processes} |"
            )
    elif args.same_name:
        lines += [
            f"| op | {args.device} ns | reference ns | ratio | ratio range |",
            "|---|---:|---:|---:|---|",
        ]
        for name, a, b, ratio, low, high in rows:
            lines.append(f"| {name} | {a:.0f} | {b:.0f} | {ratio:.3f} | {low:.3f}-{high:.3f} |")
    else:
        lines += [
            f"| op | {args.device} ns | {reference} ns | ratio |",
            "|---|---:|---:|---:|",
        ]
        for name, a, b, ratio, _, _ in rows:
            lines.append(f"| {name} | {a:.0f} | {b:.0f} | {ratio:.3f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as out:
            out.write(text)


if __name__ == "__main__":
    main()
