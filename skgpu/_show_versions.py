"""Versions of skgpu's dependencies and the state of the GPU backend."""

from __future__ import annotations

import importlib
import platform
import sys
from typing import Any


def _version(module_name):
    try:
        return getattr(importlib.import_module(module_name), "__version__", "installed")
    except Exception as exc:  # a broken CUDA install raises more than ImportError
        return f"not available ({type(exc).__name__})"


def versions_info() -> dict[str, Any]:
    """Dictionary of section -> {name: value} describing this installation."""
    from . import __version__
    from .backends import gpu_status, gpu_unsupported_reason

    usable, reason = gpu_status()
    cudss = gpu_unsupported_reason(["sparse_spd"]) if usable else reason
    return {
        "System": {
            "python": sys.version.replace("\n", " "),
            "executable": sys.executable,
            "machine": platform.platform(),
        },
        "Python dependencies": {
            name: _version(module)
            for name, module in [
                ("skgpu", "skgpu"), ("numpy", "numpy"), ("scipy", "scipy"),
                ("scikit-learn", "sklearn"), ("cupy", "cupy"), ("nvmath-python", "nvmath"),
                ("pandas", "pandas"), ("torch", "torch"), ("dask", "dask"),
            ]
        } | {"skgpu": __version__},
        "GPU backend": {
            "usable": "yes" if usable else "no",
            "reason": reason,
            "sparse Cholesky (cuDSS)": "usable" if cudss is None else cudss,
        },
        "Sparse Cholesky on the CPU": {"solver": _cpu_sparse_solver()[1]},
        "BLAS and OpenMP thread pools (CPU backend)": _thread_pools(),
    }


def _cpu_sparse_solver():
    """(key, description) of what factors the sparse GP's matrices on the CPU."""
    from .backends import get_backend

    if get_backend("cpu").sparse_factor == "cholmod":  # (the policy the sparse GP reads)
        return "cholmod", "CHOLMOD (SuiteSparse, through cvxopt)"
    return "supernodal", ("skgpu's supernodal factor (install skgpu[sparse] for CHOLMOD, "
                          "which refactorises faster)")


def _package_version(module_name):
    """The installed version, or None where the package does not import."""
    try:
        return str(getattr(importlib.import_module(module_name), "__version__",
                           "installed"))
    except Exception:  # a broken CUDA install raises more than ImportError
        return None


def status() -> dict[str, Any]:
    """This installation as data, for scripts (``python -m skgpu --json``): stable
    snake_case keys, typed values (booleans, numbers, lists, None for what is absent)."""
    from . import __version__
    from .backends import gpu_status, gpu_unsupported_reason

    usable, reason = gpu_status()
    cudss = gpu_unsupported_reason(["sparse_spd"]) if usable else reason
    packages = {name: _package_version(module) for name, module in [
        ("numpy", "numpy"), ("scipy", "scipy"), ("scikit_learn", "sklearn"),
        ("cupy", "cupy"), ("nvmath_python", "nvmath"), ("pandas", "pandas"),
        ("torch", "torch"), ("dask", "dask"), ("cvxopt", "cvxopt")]}
    try:
        from threadpoolctl import threadpool_info

        pools = [{"api": info.get("internal_api"),
                  "library": str(info.get("filepath", "")).rsplit("/", 1)[-1],
                  "num_threads": info.get("num_threads"),
                  "threading_layer": info.get("threading_layer")}
                 for info in threadpool_info()]
    except Exception:
        pools = []
    return {
        "skgpu_version": __version__,
        "python": {"version": platform.python_version(), "executable": sys.executable,
                   "platform": platform.platform()},
        "packages": packages,
        "gpu": {"usable": bool(usable), "reason": reason,
                "sparse_cholesky_usable": bool(usable) and cudss is None,
                "sparse_cholesky_reason": cudss},
        "cpu_sparse_solver": _cpu_sparse_solver()[0],
        "thread_pools": pools,
    }


def _thread_pools():
    """One entry per native thread pool loaded now (threadpoolctl, a scikit-learn
    dependency): which library, how many threads. NumPy's and SciPy's wheels each carry
    their own OpenBLAS, so two pools are usual."""
    try:
        import numpy  # noqa: F401 - load the pools that are reported
        import scipy.linalg  # noqa: F401
        from threadpoolctl import threadpool_info
    except Exception as exc:
        return {"unknown": f"threadpoolctl not available ({type(exc).__name__})"}
    pools = {}
    for info in threadpool_info():
        name = f"{info.get('internal_api')} ({info.get('filepath', '?').rsplit('/', 1)[-1]})"
        pools[name] = (f"{info.get('num_threads')} threads"
                       + (f", {info['threading_layer']}" if info.get("threading_layer")
                          else ""))
    return pools or {"none": "no native thread pool loaded"}


def show_versions() -> None:
    """Print versions of skgpu's dependencies and whether the GPU backend is usable."""
    for section, entries in versions_info().items():
        print(f"\n{section}:")
        width = max(len(k) for k in entries)
        for key, value in entries.items():
            print(f"{key:>{width}}: {value}")
