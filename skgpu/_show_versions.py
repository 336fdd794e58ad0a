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
        "BLAS and OpenMP thread pools (CPU backend)": _thread_pools(),
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
