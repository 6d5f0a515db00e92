#!/usr/bin/env python3
"""Self Ir per iteration by category, for two or more callgrind_annotate (self, --auto=no) listings.

usage: categories.py N LABEL=FILE[,FILE...] LABEL=FILE[,FILE...] ...  (N: measured iterations)
With several files (repeated runs) a label shows each category's median over them.
"""
import re
import sys


def category(name):
    """By the function a self cost was executed in (inlined std code counts as its caller's)."""
    obj = re.search(r"\[([^\]]*)\]$", name)
    obj = obj.group(1) if obj else ""
    fn = re.sub(r"\s\[[^\]]*\]$", "", name).split(":", 1)[-1]
    if "libvulkan_lvp" in obj:
        return "lavapipe (libvulkan_lvp.so)"
    if re.search(r"devstream|cost_wgpu", fn):
        return "devstream crates (self)"
    if re.match(r"(malloc|free|_int_malloc|_int_free|unlink_chunk|malloc_consolidate|__rustc::__r\w*_(alloc|dealloc|realloc))", fn) or "raw_vec" in fn:
        return "malloc/free (libc + Rust alloc glue)"
    if "wgpu_core" in fn:
        return "wgpu-core"
    if "wgpu_hal" in fn or re.search(r"\bash::", fn):
        return "wgpu-hal / ash"
    if "wgpu::" in fn:
        return "wgpu (API crate)"
    if "hash" in fn.lower():
        return "std hashing (SipHash)"
    if "once" in fn.lower():
        return "std Once / OnceLock"
    if "libc.so" in obj or "ld-linux" in obj:
        return "libc other (locks, memcpy, ...)"
    return "other (smallvec, hashbrown, Arc, iterators, ...)"


def load(path):
    totals = {}
    for line in open(path):
        m = re.match(r"\s*([\d,]+)\s+\([\d. %]+\)\s+(\S.*)$", line)
        if not m:
            continue
        name, ir = m.group(2), int(m.group(1).replace(",", ""))
        key = "total" if "PROGRAM TOTALS" in name else category(name)
        totals[key] = totals.get(key, 0) + ir
    return totals


n = float(sys.argv[1])
sides = [arg.split("=", 1) for arg in sys.argv[2:]]
def median_of(paths):
    runs = [load(p) for p in paths.split(",")]
    keys = {k for r in runs for k in r}
    return {k: sorted(r.get(k, 0) for r in runs)[len(runs) // 2] for k in keys}


data = [(label, median_of(paths)) for label, paths in sides]
keys = sorted({k for _, d in data for k in d}, key=lambda k: (k != "total", -data[0][1].get(k, 0)))
print("| category | " + " | ".join(label for label, _ in data) + " | " + " | ".join(f"{data[0][0]} − {label}" for label, _ in data[1:]) + " |")
print("|---" * (1 + 2 * len(data) - 1) + "|")
for k in keys:
    vals = [d.get(k, 0) / n for _, d in data]
    if max(abs(v - vals[0]) for v in vals) < 5 and k != "total" and vals[0] < 300:
        continue
    print(f"| {k} | " + " | ".join(f"{v:,.0f}" for v in vals) + " | " + " | ".join(f"{vals[0] - v:+,.0f}" for v in vals[1:]) + " |")
