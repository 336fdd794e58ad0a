"""``python -m skgpu``: versions, whether the GPU backend is usable, and a small demo.

The demo fits skgpu's estimators and scikit-learn's side by side on data bundled with
scikit-learn (no download), and reports times, the backend each step used and how far
the results are apart. ``--no-demo`` prints the status only, ``--json`` prints it as
JSON (for scripts); warnings raised by the demo are shown, not silenced.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import sys
import time

import numpy as np


def _timed(func, repeats):
    best, out = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        out = func()
        best = min(best, time.perf_counter() - start)
    return out, best


def _demo_rows():
    from sklearn import decomposition as skd
    from sklearn import gaussian_process as skgp
    from sklearn import linear_model as skl
    from sklearn.datasets import load_diabetes, load_digits
    from sklearn.gaussian_process.kernels import RBF, WhiteKernel
    from sklearn.gaussian_process.kernels import ConstantKernel as C

    from skgpu.decomposition import PCA, TruncatedSVD
    from skgpu.gaussian_process import GaussianProcessRegressor
    from skgpu.linear_model import RidgeCV

    digits = load_digits().data.astype(np.float64)
    Xd, yd = load_diabetes(return_X_y=True)
    gp_kernel = C(1.0) * RBF(np.ones(Xd.shape[1])) + WhiteKernel(0.1)
    cases = [
        ("PCA(16, covariance_eigh)", PCA, skd.PCA,
         dict(n_components=16, svd_solver="covariance_eigh"), digits, None, "transform", 3),
        ("PCA(16, randomized)", PCA, skd.PCA,
         dict(n_components=16, svd_solver="randomized", random_state=0), digits, None,
         "transform", 3),
        ("TruncatedSVD(16)", TruncatedSVD, skd.TruncatedSVD,
         dict(n_components=16, random_state=0), digits, None, "transform", 3),
        ("RidgeCV(13 alphas, LOO)", RidgeCV, skl.RidgeCV,
         dict(alphas=np.logspace(-4, 2, 13)), Xd, yd, "predict", 3),
        ("GaussianProcessRegressor", GaussianProcessRegressor,
         skgp.GaussianProcessRegressor, dict(kernel=gp_kernel, random_state=0),
         Xd[:300], yd[:300] / 100, "predict", 1),
    ]
    rows = []
    for name, ours_cls, theirs_cls, params, X, y, method, repeats in cases:
        args = (X,) if y is None else (X, y)
        ours, t_fit = _timed(functools.partial(_fit_new, ours_cls, params, args), repeats)
        theirs, s_fit = _timed(functools.partial(_fit_new, theirs_cls, params, args),
                               repeats)
        Z, t_apply = _timed(functools.partial(getattr(ours, method), X), repeats)
        Zs, s_apply = _timed(functools.partial(getattr(theirs, method), X), repeats)
        diff = float(np.max(np.abs(Z - Zs)) / np.max(np.abs(Zs)))
        rows.append((name, ours.backend_, t_fit, s_fit, f"{method} ", t_apply, s_apply,
                     diff))
    return rows


def _fit_new(cls, params, args):
    return cls(**params).fit(*args)


def _parser():
    parser = argparse.ArgumentParser(
        prog="python -m skgpu",
        description="Versions of skgpu and its dependencies, whether the GPU backend is "
                    "usable (and why not), BLAS thread pools, then a demo fitting skgpu's "
                    "estimators beside scikit-learn's on data bundled with scikit-learn.")
    parser.add_argument("--no-demo", action="store_true",
                        help="print the status only, without the demo")
    parser.add_argument("--json", action="store_true",
                        help="print the status as JSON (implies --no-demo)")
    from skgpu import __version__

    parser.add_argument("--version", action="version", version=f"skgpu {__version__}")
    return parser


def main(argv: list[str] | None = None) -> int:
    from skgpu import show_versions
    from skgpu._show_versions import status

    args = _parser().parse_args(argv)
    if args.json:
        print(json.dumps(status(), indent=1))
        return 0
    logging.basicConfig(level=logging.WARNING)
    show_versions()
    if args.no_demo:
        return 0
    rows = _demo_rows()
    print("\nDemo on data bundled with scikit-learn (digits 1797 x 64; diabetes 442 x 10, "
          "its first 300 rows for the GP); best of 3 (GP: one run), seconds")
    header = ("estimator", "backend", "fit skgpu", "fit sklearn", "apply", "skgpu",
              "sklearn", "max rel diff")
    print(" | ".join(header))
    for name, backend, t_fit, s_fit, method, t_apply, s_apply, diff in rows:
        print(" | ".join([name, backend, f"{t_fit:.4f}", f"{s_fit:.4f}", method.strip(),
                          f"{t_apply:.4f}", f"{s_apply:.4f}", f"{diff:.1e}"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
