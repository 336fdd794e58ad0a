"""RidgeCV leave-one-out accuracy against exact references, per backend.

For each case the largest relative error of ``cv_results_`` (squared LOO errors) against
the exact ones (ball arithmetic, ``tests/exact_loo.py``; worst sample, see
``relative_error`` there for samples at y's rounding level) is reported for skgpu on each
available backend and for scikit-learn's ``gcv_mode='svd'`` and ``'eigen'``; wide cases
also report the largest relative difference from a naive leave-one-out loop with Ridge,
and whether two runs give identical results. ``floor`` is how far the exact LOO errors
themselves move when every entry of X changes by one rounding (relative ε, random sign;
the largest of three draws): no float64 method whose backward error is a rounding of X
can promise less, so a difference from scikit-learn below it is rounding, not accuracy.

    python benchmarks/accuracy_ridgecv.py [--out FILE]

Needs python-flint (the test extra).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import warnings

import numpy as np
from sklearn.datasets import make_regression
from sklearn.linear_model import Ridge as SkRidge
from sklearn.linear_model import RidgeCV as SkRidgeCV

try:  # run as a script, or imported as benchmarks.accuracy_ridgecv
    from _harness import tests_module
except ModuleNotFoundError:
    from benchmarks._harness import tests_module

import skgpu
from skgpu.linear_model import RidgeCV

_exact = tests_module("exact_loo")
exact_loo_errors, relative_error = _exact.exact_loo_errors, _exact.relative_error
spectrum_matrix = _exact.spectrum_matrix


def cases(seed):
    rng = np.random.default_rng(seed)
    out = []
    for n, p, alpha in [(2000, 40, 1e-13), (120, 8, 1e-14)]:
        X = spectrum_matrix(rng, n, p, -10)
        for fit_intercept, weighted, targets in [(False, False, 1), (True, False, 1),
                                                 (True, True, 2), (False, True, 3)]:
            W = rng.standard_normal((p, targets))
            Y = X @ W + 1e-6 * rng.standard_normal((n, targets))
            sw = rng.uniform(0.2, 3.0, n) if weighted else None
            out.append(dict(name=f"tall {n}x{p} cond 1e10 alpha {alpha:g}"
                            f"{' +intercept' if fit_intercept else ''}"
                            f"{' +weights' if weighted else ''} t={targets}",
                            X=X, y=Y[:, 0] if targets == 1 else Y, sw=sw,
                            alphas=[alpha, 1e-8, 1e-3], fit_intercept=fit_intercept,
                            wide=False))
    for targets, weighted in [(1, False), (1, True), (2, False), (2, True)]:
        X, y = make_regression(10, 50, n_targets=targets, random_state=seed)
        sw = np.random.default_rng(seed).uniform(0.5, 2.0, 10) if weighted else None
        out.append(dict(name=f"wide 10x50 make_regression +intercept"
                        f"{' +weights' if weighted else ''} t={targets}", X=X, y=y, sw=sw,
                        alphas=list(np.logspace(-5, 7, 5)), fit_intercept=True, wide=True))
    return out


def naive_loo(case):
    """Squared LOO errors by refitting Ridge n times (scikit-learn's convention)."""
    X, y, sw = case["X"], case["y"], case["sw"]
    n = X.shape[0]
    Y = y.reshape(n, -1)
    out = np.empty((n, Y.shape[1], len(case["alphas"])))
    w = np.ones(n) if sw is None else sw
    for k, alpha in enumerate(case["alphas"]):
        for i in range(n):
            keep = np.arange(n) != i
            model = SkRidge(alpha=alpha, fit_intercept=case["fit_intercept"], solver="svd")
            model.fit(X[keep], Y[keep], sample_weight=None if sw is None else sw[keep])
            out[i, :, k] = (np.sqrt(w[i]) * (Y[i] - model.predict(X[i:i + 1])[0])) ** 2
    return out


def rounding_floor(case, exact, shape, ref, draws=3):
    """Largest change of the exact LOO errors under a one-rounding change of X."""
    rng = np.random.default_rng(12345)
    eps = np.finfo(np.float64).eps
    worst = 0.0
    for _ in range(draws):
        Xp = case["X"] * (1.0 + eps * rng.choice([-1.0, 1.0], case["X"].shape))
        moved = exact_loo_errors(Xp, case["y"], case["alphas"], case["sw"],
                                 case["fit_intercept"]) ** 2
        worst = max(worst, relative_error(moved.reshape(shape), exact, *ref))
    return worst


def run(devices):
    rows = []
    for seed in (0, 1):
        for case in cases(seed):
            X, y, sw = case["X"], case["y"], case["sw"]
            exact = exact_loo_errors(X, y, case["alphas"], sw, case["fit_intercept"]) ** 2
            shape = exact.shape if np.ndim(y) == 2 else exact.shape[::2]
            exact = exact.reshape(shape)
            row = dict(case=f'{case["name"]}, seed {seed}')
            ref = (y, sw, case["fit_intercept"])
            row["floor"] = rounding_floor(case, exact, shape, ref)
            params = dict(alphas=case["alphas"], fit_intercept=case["fit_intercept"],
                          store_cv_results=True)
            naive = naive_loo(case).reshape(shape) if case["wide"] else None
            for mode in ("svd", "eigen"):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    sk = SkRidgeCV(gcv_mode=mode, **params).fit(X, y, sample_weight=sw)
                row[f"sklearn_{mode}"] = relative_error(sk.cv_results_, exact, *ref)
                for device in devices:
                    with skgpu.config_context(device=device), warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        ours = RidgeCV(gcv_mode=mode, **params).fit(X, y, sample_weight=sw)
                        again = RidgeCV(gcv_mode=mode, **params).fit(X, y, sample_weight=sw)
                    row[f"skgpu_{device}_{mode}"] = relative_error(ours.cv_results_, exact, *ref)
                    if naive is not None:
                        row[f"skgpu_{device}_{mode}_vs_naive"] = relative_error(
                            ours.cv_results_, naive, *ref)
                        row[f"skgpu_{device}_{mode}_repeatable"] = bool(
                            np.array_equal(ours.cv_results_, again.cv_results_))
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    from _harness import machine

    from skgpu.backends import gpu_status

    devices = ["cpu"] + (["gpu"] if gpu_status()[0] else [])
    rows = run(devices)
    if args.out:
        pathlib.Path(args.out).write_text(json.dumps(
            {"machine": machine(), "devices": devices, "results": rows}, indent=1))


if __name__ == "__main__":
    main()
