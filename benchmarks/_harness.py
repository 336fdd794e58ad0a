"""Timing, memory and machine helpers shared by the benchmark scripts.

Times are medians over repeats after a warm-up, with the device synchronised before the
clock starts and after the work ends.
"""

import os
import platform
import statistics
import sys
import time

import numpy as np
import sklearn


import skgpu
from skgpu.backends import gpu_status

def _probe_gpu():
    # A process that multiprocessing spawns (a dask worker, say) first re-imports the
    # benchmark script, and probing CUDA there would initialise it on physical GPU 0
    # before the nanny sets that worker's CUDA_VISIBLE_DEVICES: every dask-cuda worker
    # would then compute on GPU 0. While the script is re-imported, parent_process() is
    # still None (it is set only afterwards), but __main__ is multiprocessing's bootstrap,
    # which has no file.
    import multiprocessing

    import __main__

    if multiprocessing.parent_process() is not None or not getattr(__main__, "__file__", None):
        return False
    return gpu_status()[0]


GPU = _probe_gpu()
if GPU:
    import cupy as cp


def sync():
    if GPU:
        cp.cuda.Device().synchronize()


def timeit(func, repeats, warmup=1):
    for _ in range(warmup):
        func()
        sync()
    times = []
    out = None
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        out = func()
        sync()
        times.append(time.perf_counter() - start)
    return out, time_stats(times)


def time_stats(times):
    """Median, min, max (and quartiles from 4 times) of measured times, as every row."""
    out = {"median_s": statistics.median(times), "min_s": min(times), "max_s": max(times),
           "repeats": len(times)}
    if len(times) >= 4:
        out["quartiles_s"] = statistics.quantiles(times, n=4)[::2]
    return out


def interleaved(funcs, rounds=5, calls=40, warmup=20, raw=False):
    """Time several short GPU calls in turns: ``rounds`` rounds, each making ``calls``
    calls of every function in ``funcs`` (a dict), after ``warmup`` calls of each; every
    call is timed alone, the device synchronised around it. Memory-bound kernels on the
    H200 host take ~10% more or less from one second to the next (the same cuBLAS kernel
    measured 0.485 and 0.551 ms a second apart), so functions compared are timed in the
    same seconds rather than one after another. Returns {name: statistics}, or with
    ``raw`` {name: every call's time}."""
    for func in funcs.values():
        for _ in range(warmup):
            func()
        sync()
    times = {name: [] for name in funcs}
    for _ in range(rounds):
        for name, func in funcs.items():
            for _ in range(calls):
                sync()
                start = time.perf_counter()
                func()
                sync()
                times[name].append(time.perf_counter() - start)
    if raw:
        return times
    return {name: time_stats(t) for name, t in times.items()}


class PeakGPUMemory:
    """Peak bytes in use in CuPy's memory pool while the block runs."""

    def __enter__(self):
        self.pool = cp.get_default_memory_pool()
        self.pool.free_all_blocks()
        self.base = self.pool.used_bytes()
        self.peak = self.base
        pool = self.pool

        def malloc(size):
            mem = pool.malloc(size)
            self.peak = max(self.peak, pool.used_bytes())
            return mem

        cp.cuda.set_allocator(malloc)
        return self

    def __exit__(self, *exc):
        cp.cuda.set_allocator(self.pool.malloc)
        self.bytes = self.peak - self.base


def synchronized(func):
    """``(func(), seconds)`` for one run, the device synchronised before and after."""
    sync()
    start = time.perf_counter()
    out = func()
    sync()
    return out, time.perf_counter() - start


def emitter(doc, out=None):
    """A function that adds a row to ``doc["results"]``, prints it as one JSON line and
    rewrites ``out`` (if given) with the whole document, so that a later crash keeps
    what was measured."""
    import json

    def emit(row):
        doc["results"].append(row)
        print(json.dumps(row), flush=True)
        if out:
            with open(out, "w") as f:
                json.dump(doc, f, indent=1)
    return emit


def sparse_gp_problem(n, neighbours=30, seed=0):
    """The large sparse GP construction: n points uniform in the unit square, y =
    sin(6x₀)·cos(4x₁) + 0.05 noise, and ``C(1.0) * Tapered(Matern(r, nu=1.5),
    taper_range=r) + WhiteKernel(0.01)`` with r for ~``neighbours`` a row; (X, y, kernel)."""
    from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

    from skgpu.gaussian_process.kernels import Tapered

    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (n, 2))
    y = np.sin(6 * X[:, 0]) * np.cos(4 * X[:, 1]) + 0.05 * rng.standard_normal(n)
    r = np.sqrt(neighbours / (np.pi * n))
    kernel = (ConstantKernel(1.0) * Tapered(Matern(r, nu=1.5), taper_range=r)
              + WhiteKernel(0.01))
    return X, y, kernel


def tests_module(name):
    """A helper module of ``tests/`` (the exact references the tests use), loaded from its
    file and registered under its own name."""
    import importlib.util
    import pathlib

    if name in sys.modules:
        return sys.modules[name]
    path = pathlib.Path(__file__).resolve().parents[1] / "tests" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def rel_diff(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def machine():
    info = {"platform": platform.platform(), "cpu_count": os.cpu_count(),
            "python": sys.version.split()[0], "numpy": np.__version__,
            "scikit-learn": sklearn.__version__, "skgpu": skgpu.__version__,
            "gpu_backend": gpu_status()[1]}
    if GPU:
        import nvmath

        props = cp.cuda.runtime.getDeviceProperties(0)
        info |= {"gpu": props["name"].decode(), "cupy": cp.__version__,
                 "nvmath-python": nvmath.__version__}
    return info


def run_cases(cases, doc, out=None):
    """Run each case (a callable adding rows to ``doc["results"]``); a failure is recorded
    as an "error" row and the others still run; the JSON is rewritten after each case so
    that a later crash keeps what was measured."""
    import json
    import traceback

    for case in cases:
        try:
            case()
        except Exception:
            doc["results"].append({"case": "error", "error": traceback.format_exc()[-2000:]})
            print(f"case failed:\n{traceback.format_exc()[-500:]}", file=sys.stderr)
        if out:
            with open(out, "w") as f:
                json.dump(doc, f, indent=1)
    print(json.dumps(doc, indent=1))


def standard_parser(description=None):
    """The options every benchmark script takes: --quick (CPU-sized) and --out (JSON)."""
    import argparse

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="small sizes, CPU only")
    parser.add_argument("--out", default=None, help="write the JSON here too")
    return parser
