"""How often X's kind is asked during one public call: every call of skgpu's array
classifiers (``is_sparse``, ``is_device_array``, ``container_of``, ...) counted, wherever
a module imported them, during PCA.fit, RidgeCV.fit and GaussianProcessRegressor.fit on
NumPy X on the CPU backend.

Run:  python -m benchmarks.probes.classification_counts
"""

import collections
import sys

import numpy as np

import skgpu
from skgpu.backends import _arrays
from skgpu.decomposition import PCA
from skgpu.gaussian_process import GaussianProcessRegressor
from skgpu.linear_model import RidgeCV

NAMES = ("is_sparse", "is_cupy_array", "is_cupy_sparse", "is_torch_tensor",
         "is_device_array", "is_dask_collection", "is_dask_array", "container_of")


def main():
    counts = collections.Counter()
    originals = {name: getattr(_arrays, name) for name in NAMES}

    def counting(name, func):
        def wrapper(*args, **kwargs):
            counts[name] += 1
            return func(*args, **kwargs)
        return wrapper

    for module in [m for n, m in sys.modules.items() if n.startswith("skgpu")]:
        for name, func in originals.items():
            if getattr(module, name, None) is func:
                setattr(module, name, counting(name, func))
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((500, 8)), rng.standard_normal(500)
    calls = {"PCA.fit": lambda: PCA(3).fit(X), "RidgeCV.fit": lambda: RidgeCV().fit(X, y),
             "GaussianProcessRegressor.fit": lambda: GaussianProcessRegressor(
                 optimizer=None).fit(X[:100], y[:100])}
    with skgpu.config_context(device="cpu"):
        for name, call in calls.items():
            counts.clear()
            call()
            print(f"{name:30s} {sum(counts.values()):3d} kind questions: {dict(counts)}")


if __name__ == "__main__":
    main()
