"""``python -m skgpu``: versions, whether the GPU backend is usable, and a small demo.

The demo fits skgpu's estimators and scikit-learn's side by side on data bundled with
scikit-learn (no download), and reports times, the backend each step used and how far
the results are apart.
"""

import logging
import sys
import time

import numpy as np


def _timed(func, repeats=3):
    best, out = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        out = func()
        best = min(best, time.perf_counter() - start)
    return out, best


def _demo_rows():
    from sklearn import decomposition as skd
    from sklearn.datasets import load_digits

    from skgpu.decomposition import PCA, TruncatedSVD

    X = load_digits().data.astype(np.float64)
    rows = []
    cases = [
        ("PCA(16, covariance_eigh)", PCA, skd.PCA,
         dict(n_components=16, svd_solver="covariance_eigh")),
        ("PCA(16, randomized)", PCA, skd.PCA,
         dict(n_components=16, svd_solver="randomized", random_state=0)),
        ("TruncatedSVD(16)", TruncatedSVD, skd.TruncatedSVD,
         dict(n_components=16, random_state=0)),
    ]
    for name, ours_cls, theirs_cls, params in cases:
        ours, t_fit = _timed(lambda: ours_cls(**params).fit(X))
        theirs, s_fit = _timed(lambda: theirs_cls(**params).fit(X))
        Z, t_tr = _timed(lambda: ours.transform(X))
        Zs, s_tr = _timed(lambda: theirs.transform(X))
        diff = float(np.max(np.abs(Z - Zs)) / np.max(np.abs(Zs)))
        rows.append((name, ours.backend_, t_fit, s_fit, t_tr, s_tr, diff))
    return X.shape, rows


def main(argv=None):
    from skgpu import show_versions

    logging.basicConfig(level=logging.WARNING)
    show_versions()
    shape, rows = _demo_rows()
    print(f"\nDemo: scikit-learn's digits data, X {shape[0]} x {shape[1]} float64 "
          "(best of 3, seconds)")
    header = ("estimator", "backend", "fit skgpu", "fit sklearn", "transform skgpu",
              "transform sklearn", "max rel diff")
    print(" | ".join(header))
    for name, backend, *numbers, diff in rows:
        print(" | ".join([name, backend] + [f"{v:.4f}" for v in numbers] + [f"{diff:.1e}"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
