"""How often an input's kind is asked during one public call: every call of skgpu's array
classifiers (``is_sparse``, ``is_device_array``, ``container_of``, ...) made from outside
the classifiers themselves, counted wherever a module imported them, split by the array
asked about (the caller's X, y, or another array), on NumPy data on the CPU backend.

The rule (``docs/architecture.rst``): X is classified once per public call, by
``container_of``, and the resulting ``ContainerSpec``/``Input`` is carried on; y is
classified once where it is validated.

Run:  python -m benchmarks.probes.classification_counts
"""

import collections
import sys

import numpy as np

import skgpu
from skgpu.backends import _arrays
from skgpu.decomposition import PCA, TruncatedSVD
from skgpu.gaussian_process import GaussianProcessRegressor
from skgpu.linear_model import Ridge, RidgeCV

NAMES = ("is_sparse", "is_cupy_array", "is_cupy_sparse", "is_torch_tensor",
         "is_device_array", "is_dask_collection", "is_dask_array", "container_of")


def count_questions(calls, X, y):
    """``{call: Counter((array, classifier) -> count)}`` for each ``calls[name]()``."""
    counts = collections.Counter()
    originals = {name: getattr(_arrays, name) for name in NAMES}

    def counting(name, func):
        def wrapper(*args, **kwargs):
            if sys._getframe(1).f_code.co_filename != _arrays.__file__:
                a = args[0] if args else None
                who = "X" if a is X else "y" if a is y else "other"
                counts[(who, name)] += 1
            return func(*args, **kwargs)
        return wrapper

    patched = []
    for module in [m for n, m in sys.modules.items() if n.startswith("skgpu")]:
        for name, func in originals.items():
            if getattr(module, name, None) is func:
                setattr(module, name, counting(name, func))
                patched.append((module, name, func))
    out = {}
    try:
        for name, call in calls.items():
            counts.clear()
            call()
            out[name] = collections.Counter(counts)
    finally:
        for module, name, func in patched:
            setattr(module, name, func)
    return out


def main():
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((500, 8)), rng.standard_normal(500)
    Xs, ys = X[:100], y[:100]
    pca, ridge = PCA(3).fit(X), Ridge().fit(X, y)
    svd = TruncatedSVD(3).fit(X)
    gp = GaussianProcessRegressor(optimizer=None).fit(Xs, ys)
    calls = {
        "PCA.fit": lambda: PCA(3).fit(X),
        "PCA.transform": lambda: pca.transform(X),
        "TruncatedSVD.fit_transform": lambda: TruncatedSVD(3).fit_transform(X),
        "TruncatedSVD.transform": lambda: svd.transform(X),
        "Ridge.fit": lambda: Ridge().fit(X, y),
        "Ridge.predict": lambda: ridge.predict(X),
        "RidgeCV.fit": lambda: RidgeCV().fit(X, y),
        "GaussianProcessRegressor.fit": lambda: GaussianProcessRegressor(
            optimizer=None).fit(Xs, ys),
        "GaussianProcessRegressor.predict": lambda: gp.predict(Xs, return_std=True),
    }
    with skgpu.config_context(device="cpu"):
        results = {}
        for name, call in calls.items():
            data_X = Xs if name.startswith("Gaussian") else X
            data_y = ys if name.startswith("Gaussian") else y
            results.update(count_questions({name: call}, data_X, data_y))
    for name, counts in results.items():
        per = {who: sum(v for (w, _), v in counts.items() if w == who)
               for who in ("X", "y", "other")}
        print(f"{name:34s} X {per['X']}  y {per['y']}  other {per['other']}   "
              f"{dict(sorted(counts.items()))}")


if __name__ == "__main__":
    main()
