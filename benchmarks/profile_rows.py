"""Where each of the guard's GPU rows spends its time (issue 50's breakdown).

Each row of the guard (``_guard.gpu_cases``) is warmed up, then called N times under
torch.profiler, whose CUPTI activity tracing sees every kernel and copy in the process
(CuPy's, cuBLAS's, cuSOLVER's). The trace is summarised per call: wall time, the GPU's busy
time (the union of kernels, copies and sets) and so its idle time, kernel count and time,
copies by direction (count, bytes, time), host-side launches, synchronisations and the
host API calls that took longest (a device-to-host copy waits there for the queued work),
and the top kernels. The profiler itself slows the host side: its wall times run above the
guard's (RidgeCV 16.5 against 12.5 ms on one H100); the GPU figures are the kernels' own.

    python benchmarks/run_all.py --profile F.json        # the guard's GPU rows
    python benchmarks/profile_rows.py [--scale S] [--calls N] [--rows SUBSTR ...] --out F.json

Needs PyTorch with CUDA in the interpreter that runs CuPy (the GPU host's python3); the
summary itself (:func:`summarise`) is plain Python over Chrome-trace events.
"""
import argparse
import json
import os
import sys
import tempfile
import time
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
sys.path.insert(0, ROOT)

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def _union_us(intervals):
    """Total length of the union of [start, end) intervals."""
    total, end_so_far = 0.0, None
    for s, e in sorted(intervals):
        if end_so_far is None or s > end_so_far:
            total += e - s
            end_so_far = e
        elif e > end_so_far:
            total += e - end_so_far
            end_so_far = e
    return total


def _copy_kind(name):
    for kind in ("HtoD", "DtoH", "DtoD", "HtoH", "PtoP"):
        if kind in name:
            return kind
    return "other"


def summarise(events, calls, wall_s, top=8):
    """One row's trace events (Chrome-trace dicts) as per-call figures."""
    busy, kernels = [], defaultdict(lambda: [0, 0.0])
    copies = defaultdict(lambda: {"count": 0, "bytes": 0, "us": 0.0})
    host = defaultdict(lambda: [0, 0.0])
    n_kernels, kernel_us, memset_us = 0, 0.0, 0.0
    for e in events:
        cat, dur = e.get("cat"), float(e.get("dur", 0.0))
        if cat in GPU_CATS:
            busy.append((float(e["ts"]), float(e["ts"]) + dur))
        if cat == "kernel":
            n_kernels += 1
            kernel_us += dur
            k = kernels[e["name"]]
            k[0] += 1
            k[1] += dur
        elif cat == "gpu_memcpy":
            c = copies[_copy_kind(e["name"])]
            c["count"] += 1
            c["bytes"] += int((e.get("args") or {}).get("bytes", 0))
            c["us"] += dur
        elif cat == "gpu_memset":
            memset_us += dur
        elif cat in ("cuda_runtime", "cuda_driver"):
            h = host[e["name"]]
            h[0] += 1
            h[1] += dur
    per = 1.0 / calls
    busy_ms = _union_us(busy) * per / 1e3
    wall_ms = wall_s * 1e3
    launches = sum(c for name, (c, _) in host.items() if "Launch" in name)
    syncs = {name: (c, us) for name, (c, us) in host.items() if "Synchronize" in name}
    return {
        "wall_ms": wall_ms,
        "gpu_busy_ms": busy_ms,
        "gpu_idle_ms": wall_ms - busy_ms,
        "kernels": n_kernels * per,
        "kernel_ms": kernel_us * per / 1e3,
        "memset_ms": memset_us * per / 1e3,
        "copies": {k: {"count": v["count"] * per, "mb": v["bytes"] * per / 1e6,
                       "ms": v["us"] * per / 1e3} for k, v in sorted(copies.items())},
        "launch_calls": launches * per,
        "sync_calls": {k: {"count": c * per, "ms": us * per / 1e3}
                       for k, (c, us) in sorted(syncs.items())},
        "host_api_ms": {k: us * per / 1e3 for k, (c, us) in
                        sorted(host.items(), key=lambda kv: -kv[1][1])[:top]},
        "top_kernels": [{"name": name[:90], "count": c * per, "ms": us * per / 1e3}
                        for name, (c, us) in
                        sorted(kernels.items(), key=lambda kv: -kv[1][1])[:top]],
    }


def profile_row(call, calls, warmup=3):
    from torch.profiler import ProfilerActivity, profile

    from _harness import sync
    for _ in range(warmup):
        call()
    sync()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        t = time.perf_counter()
        for _ in range(calls):
            call()
        sync()
        wall = (time.perf_counter() - t) / calls
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    return summarise(events, calls, wall)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=float, default=1.0,
                        help="the rows at this multiple of their sizes")
    parser.add_argument("--calls", type=int, default=5, help="profiled calls per row")
    parser.add_argument("--rows", nargs="*", default=None,
                        help="only the rows whose names contain one of these")
    parser.add_argument("--out", required=True, help="the summary's JSON")
    args = parser.parse_args(argv)
    import torch

    import _guard
    from _harness import machine

    out = {"machine": machine() | {"torch": torch.__version__}, "scale": args.scale,
           "calls": args.calls, "profiles": {}}
    for name, call in _guard.gpu_cases(args.scale).items():
        if args.rows and not any(r in name for r in args.rows):
            continue
        try:
            s = profile_row(call, args.calls)
        except Exception as exc:  # a row's failure is reported, the others still run
            out["profiles"][name] = {"error": repr(exc)}
            print(name, "ERROR", repr(exc), flush=True)
            continue
        out["profiles"][name] = s
        copies = " ".join(f"{k} {v['count']:.0f}x/{v['mb']:.1f}MB/{v['ms']:.2f}ms"
                          for k, v in s["copies"].items())
        syncs = sum(v["count"] for v in s["sync_calls"].values())
        print(f"{name[:60]:60s} wall {s['wall_ms']:8.2f} busy {s['gpu_busy_ms']:8.2f} "
              f"kernels {s['kernels']:6.0f} ({s['kernel_ms']:.2f} ms) launches "
              f"{s['launch_calls']:.0f} syncs {syncs:.0f} copies: {copies}", flush=True)
        for k in s["top_kernels"][:4]:
            print(f"    {k['ms']:8.3f} ms {k['count']:5.0f}x {k['name'][:70]}", flush=True)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
