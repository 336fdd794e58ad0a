"""Versions of skgpu's dependencies and the state of the GPU backend."""

import importlib
import platform
import sys


def _version(module_name):
    try:
        return getattr(importlib.import_module(module_name), "__version__", "installed")
    except Exception as exc:  # a broken CUDA install raises more than ImportError
        return f"not available ({type(exc).__name__})"


def versions_info():
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
    }


def show_versions():
    """Print versions of skgpu's dependencies and whether the GPU backend is usable."""
    for section, entries in versions_info().items():
        print(f"\n{section}:")
        width = max(len(k) for k in entries)
        for key, value in entries.items():
            print(f"{key:>{width}}: {value}")
