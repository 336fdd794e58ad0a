"""A sweep for silent wrong answers off the main road, in the categories where they were
found before: fitted state changed between calls, badly scaled columns, extreme alphas,
large offsets, kernel parameters at their edges. Every case is compared with a reference
that cannot share our bugs: scikit-learn's own code on the same fitted state
(``as_sklearn``), or exact arithmetic (rationals, ball arithmetic). Prints each
discrepancy and a count per category; a case that raises where the reference answers is
a discrepancy too.

Run:  python -m benchmarks.probes.sweep_silent_answers --device cpu   (about 2 minutes)
      python -m benchmarks.probes.sweep_silent_answers --device gpu   (on the GPU host)
"""

import argparse
import copy
import itertools
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.gaussian_process import kernels as K

import skgpu
from skgpu.decomposition import PCA, TruncatedSVD
from skgpu.gaussian_process import GaussianProcessRegressor
from skgpu.gaussian_process.kernels import Tapered, Wendland
from skgpu.linear_model import Ridge, RidgeCV

from .._harness import tests_module

found = {}
checked = {}


def check(category):
    checked[category] = checked.get(category, 0) + 1


def report(category, case, detail):
    found.setdefault(category, []).append(case)
    print(f"[{category}] {case}: {detail}", flush=True)


def close(a, b, rtol, atol=0.0):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return False
    scale = max(float(np.max(np.abs(b), initial=0.0)), 1e-300)
    return bool(np.all(np.abs(a - b) <= rtol * scale + atol))


# --------------------------------------------------------------------------------------
def fitted_state(rng, device):
    """Change a fitted array (assigned, in place, one entry) or a parameter between
    calls; every output must equal scikit-learn's code on the changed state."""
    X = rng.standard_normal((80, 6))
    y = X @ rng.standard_normal(6) + 0.1 * rng.standard_normal(80)
    Xt = rng.standard_normal((9, 6))
    models = [PCA(3), PCA(3, whiten=True), PCA(3, svd_solver="randomized", random_state=0),
              TruncatedSVD(3, random_state=0), Ridge(0.5), RidgeCV(),
              PCA(3).set_output(transform="pandas"),
              GaussianProcessRegressor(K.RBF(1.0) + K.WhiteKernel(0.1), optimizer=None)]
    methods = ["transform", "inverse_transform", "predict", "score", "score_samples"]
    for model in models:
        with skgpu.config_context(device=device):
            est = copy.deepcopy(model).fit(X, y)
        names = [k for k, v in vars(est).items() if k.endswith("_") and not k.startswith("_")
                 and isinstance(v, np.ndarray) and v.dtype.kind == "f" and v.size]
        for name, how in itertools.product(names, ("assign", "in-place", "entry")):
            trial = copy.deepcopy(est)
            with skgpu.config_context(device=device):
                _call_all(trial, methods, Xt, y[:9])  # warm every cache first
            value = getattr(trial, name)
            if how == "assign":
                setattr(trial, name, value * 1.5)
            elif how == "in-place":
                if not value.flags.writeable:
                    continue  # refused loudly (read-only), not silently stale
                value *= 1.5
            else:
                if not value.flags.writeable:
                    continue
                value.flat[0] += 0.25
            _compare_with_sklearn("fitted-state", f"{type(est).__name__}.{name} {how}",
                                  trial, methods, Xt, y[:9], device)
        if isinstance(est, PCA):
            trial = copy.deepcopy(est)
            with skgpu.config_context(device=device):
                _call_all(trial, methods, Xt, y[:9])
            trial.set_params(whiten=not trial.whiten)
            _compare_with_sklearn("fitted-state", "PCA whiten flipped", trial, methods, Xt,
                                  y[:9], device)


def _call_all(est, methods, Xt, yt):
    out = {}
    for m in methods:
        if not hasattr(est, m):
            continue
        arg = est.transform(Xt) if m == "inverse_transform" else Xt
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out[m] = getattr(est, m)(arg, yt) if m == "score" else getattr(est, m)(arg)
        except Exception as exc:  # noqa: BLE001 - compared with the reference's
            out[m] = type(exc)
    return out


def _compare_with_sklearn(category, case, est, methods, Xt, yt, device):
    check(category)
    with skgpu.config_context(device=device):
        ours = _call_all(est, methods, Xt, yt)
    theirs = _call_all(skgpu.as_sklearn(est), methods, Xt, yt)
    for m in ours:
        a, b = ours[m], theirs.get(m)
        if isinstance(a, type) or isinstance(b, type):
            if a is not b:
                report(category, f"{case} {m}", f"ours {a}, scikit-learn {b}")
        elif not close(a, b, 1e-9, 1e-12):
            report(category, f"{case} {m}", "differs from scikit-learn on the same state")


# --------------------------------------------------------------------------------------
def scaling(rng, device):
    """Ridge and RidgeCV(one alpha) coefficients on columns scaled 1e±k against exact
    rational solutions; dense and sparse, both solvers, with and without intercept."""
    exact = tests_module("exact_loo").exact_ridge_coef
    for spread, fit_intercept, solver, sparse in itertools.product(
            (2, 5, 8), (True, False), ("auto", "cholesky", "svd"), (False, True)):
        if sparse and (solver == "svd" or (solver == "cholesky" and fit_intercept)):
            continue  # refused by scikit-learn, and by us with its message
        X = rng.standard_normal((30, 5)) * np.logspace(-spread, spread, 5)
        y = rng.standard_normal(30)
        Xin = sp.csr_matrix(X) if sparse else X
        case = f"spread 1e±{spread} intercept={fit_intercept} {solver} sparse={sparse}"
        ref = exact(X, y, 1.0, fit_intercept)
        check("scaling")
        with skgpu.config_context(device=device), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            coef = Ridge(1.0, fit_intercept=fit_intercept, solver=solver).fit(Xin, y).coef_
            cv = RidgeCV(alphas=[1.0], fit_intercept=fit_intercept).fit(Xin, y).coef_
        for name, c in (("Ridge", coef), ("RidgeCV", cv)):
            err = np.max(np.abs(c - ref) / np.abs(ref))
            if not err <= 1e-6:
                report("scaling", f"{name} {case}", f"relative error {err:.2e}")


# --------------------------------------------------------------------------------------
def alphas(rng, device):
    """RidgeCV over alpha grids with zero, subnormal, huge and infinite values: the
    chosen alpha and best score against the exact leave-one-out errors."""
    import importlib.util

    from sklearn.linear_model import RidgeCV as SkRidgeCV

    if importlib.util.find_spec("flint") is None:
        print("[alphas] skipped: python-flint (the exact reference) is not installed")
        return
    loo = tests_module("exact_loo").exact_loo_errors
    grids = [[0.0, 1.0], [1e-300, 1.0], [1e300, 1.0], [np.inf, 1.0], [np.inf],
             [1e-8, 1e8], [5e-324, 1e-3]]
    for grid, fit_intercept in itertools.product(grids, (True, False)):
        X = rng.standard_normal((25, 4))
        y = X @ rng.standard_normal(4) + rng.standard_normal(25)
        case = f"alphas {grid} intercept={fit_intercept}"
        check("alphas")
        try:
            with skgpu.config_context(device=device), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est = RidgeCV(alphas=grid, fit_intercept=fit_intercept).fit(X, y)
        except Exception as exc:  # noqa: BLE001
            try:
                SkRidgeCV(alphas=grid, fit_intercept=fit_intercept).fit(X, y)
                report("alphas", case, f"raised {type(exc).__name__}: {exc}")
            except type(exc):
                pass  # refused as scikit-learn refuses it
            continue
        finite = [a for a in grid if np.isfinite(a)]
        e = loo(X, y, finite, None, fit_intercept) if finite else np.empty((25, 1, 0))
        scores = list(-np.mean(e[:, 0, :] ** 2, axis=0))
        if np.inf in grid:
            scores.append(-np.mean((y - y.mean() * fit_intercept) ** 2 * (25 / 24) ** 2
                                   if fit_intercept else y ** 2))
        best = int(np.argmax(scores))
        wanted = (finite + [np.inf])[best] if np.inf in grid else finite[best]
        if est.alpha_ != wanted and not np.isclose(scores[best], scores[
                (finite + [np.inf] if np.inf in grid else finite).index(est.alpha_)],
                rtol=1e-12):
            report("alphas", case, f"alpha_ {est.alpha_}, exact best {wanted}")
        if not np.isclose(est.best_score_, scores[best], rtol=1e-8):
            report("alphas", case, f"best_score_ {est.best_score_} against {scores[best]}")


# --------------------------------------------------------------------------------------
def offsets(rng, device):
    """PCA by every solver, and TruncatedSVD's variances by both algorithms in float32
    and float64, on data far from the origin, against the exact covariance of the same
    floats."""
    for offset, solver in itertools.product((1e3, 1e6, 1e9, 1e12),
                                            ("auto", "full", "covariance_eigh", "randomized",
                                             "arpack")):
        X = rng.standard_normal((60, 4)) @ rng.standard_normal((4, 4))
        X += offset * rng.uniform(0.5, 2.0, 4)
        C, mean = tests_module("skgpu_testing").exact_covariance(X)
        check("offset")
        w = np.linalg.eigvalsh(C)[::-1][:3]
        try:
            with skgpu.config_context(device=device):
                pca = PCA(3, svd_solver=solver, random_state=0).fit(X)
        except Exception as exc:  # noqa: BLE001
            report("offset", f"{solver} {offset:g}", f"raised {type(exc).__name__}")
            continue
        err = np.max(np.abs(pca.explained_variance_ - w)) / w[0]
        merr = np.max(np.abs(pca.mean_ - mean) / np.abs(mean))
        # randomized/arpack: the solver's own convergence, not the offset, sets the bar
        bar = 1e-6 if solver in ("randomized", "arpack") else 1e-12
        if not (err <= bar and merr <= 1e-15):
            report("offset", f"{solver} {offset:g}",
                   f"variance error {err:.1e}, mean error {merr:.1e}")
    # TruncatedSVD: the variances of its own components' projections (ddof 0) and the
    # total, against the exact covariance of the same floats (float32 data: of its
    # float32 values; not at 1e9, where float32's spacing, 64, exceeds the spread and
    # the columns are constant)
    cases = [(o, a, d) for o, a, d in itertools.product(
        (1e3, 1e6, 1e9), ("randomized", "arpack"), (np.float64, np.float32))
        if not (d == np.float32 and o > 1e6)]
    for offset, algorithm, dtype in cases:
        X = rng.standard_normal((60, 4)) @ rng.standard_normal((4, 4))
        X = (X + offset * rng.uniform(0.5, 2.0, 4)).astype(dtype)
        C, _ = tests_module("skgpu_testing").exact_covariance(X.astype(np.float64))
        C *= (X.shape[0] - 1) / X.shape[0]
        check("offset")
        case = f"TruncatedSVD {algorithm} {np.dtype(dtype).name} {offset:g}"
        try:
            with skgpu.config_context(device=device):
                svd = TruncatedSVD(3, algorithm=algorithm, random_state=0).fit(X)
        except Exception as exc:  # noqa: BLE001
            report("offset", case, f"raised {type(exc).__name__}")
            continue
        V = svd.components_.astype(np.float64)
        exact = np.einsum("ij,jk,ik->i", V, C, V)
        total = np.trace(C)
        # rounding of the result in its dtype, and of the components themselves
        bar = 1e-4 if dtype == np.float32 else 1e-9
        err = np.max(np.abs(svd.explained_variance_ - exact)) / total
        rerr = np.max(np.abs(svd.explained_variance_ratio_ - exact / total))
        if not (err <= bar and rerr <= bar):
            report("offset", case, f"variance error {err:.1e}, ratio error {rerr:.1e}")


# --------------------------------------------------------------------------------------
def kernels(rng, device):
    """Gaussian processes with kernel parameters at the edges of their ranges: the log
    marginal likelihood, its gradient and the predictions against scikit-learn's."""
    from sklearn.gaussian_process import GaussianProcessRegressor as SkGPR

    X = rng.uniform(0, 1, (40, 2))
    y = np.sin(6 * X[:, 0]) + 0.1 * rng.standard_normal(40)
    cases = [K.RBF(1e-3), K.RBF(1e3), K.RBF([0.1, 10.0]), K.Matern(0.3, nu=0.5),
             K.Matern(0.3, nu=1.5), K.Matern(0.3, nu=2.5), K.Matern(0.3, nu=np.inf),
             K.Matern(0.3, nu=0.7), K.RationalQuadratic(0.3, alpha=1e-3),
             K.RationalQuadratic(0.3, alpha=1e3), K.ExpSineSquared(0.5, 1.0),
             K.DotProduct(1e-3), K.ConstantKernel(1e-5) * K.RBF(0.3),
             K.RBF(0.3) ** 2, K.RBF(0.3) + K.WhiteKernel(1e-9),
             K.RBF(0.3, length_scale_bounds="fixed") + K.WhiteKernel(0.01)]
    for kernel in cases:
        case = repr(kernel)
        check("kernel")
        ours = GaussianProcessRegressor(kernel, optimizer=None, alpha=1e-6)
        try:
            theirs = SkGPR(kernel, optimizer=None, alpha=1e-6).fit(X, y)
        except Exception as exc:  # noqa: BLE001 - then ours must refuse it too
            try:
                with skgpu.config_context(device=device):
                    ours.fit(X, y)
                report("kernel", case, f"fitted where scikit-learn raised {exc!r}")
            except type(exc):
                pass
            continue
        try:
            with skgpu.config_context(device=device), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ours.fit(X, y)
                lml, grad = ours.log_marginal_likelihood(theirs.kernel_.theta, True)
                mean, std = ours.predict(X[:7] + 0.01, return_std=True)
        except Exception as exc:  # noqa: BLE001
            report("kernel", case, f"raised {type(exc).__name__}: {exc}")
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lml_r, grad_r = theirs.log_marginal_likelihood(theirs.kernel_.theta, True)
            mean_r, std_r = theirs.predict(X[:7] + 0.01, return_std=True)
        for name, a, b, tol in (("lml", lml, lml_r, 1e-7), ("gradient", grad, grad_r, 1e-6),
                                ("mean", mean, mean_r, 1e-6), ("std", std, std_r, 1e-5)):
            if not close(a, b, tol, 1e-9):
                report("kernel", f"{case} {name}", f"{np.ravel(a)[:3]} against "
                       f"{np.ravel(b)[:3]}")
    for bad in (lambda: Wendland(support_radius=0.0), lambda: Tapered(K.RBF(1.0), 0.0),
                lambda: Wendland(support_radius=np.nan)):
        try:
            with skgpu.config_context(device=device):
                GaussianProcessRegressor(bad(), optimizer=None).fit(X, y)
            report("kernel", "a kernel with a range <= 0 or NaN", "accepted")
        except ValueError:
            pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "gpu"])
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    categories = [fitted_state, scaling, alphas, offsets, kernels]
    for seed in range(args.seeds):
        rng = np.random.default_rng(seed)
        for category in categories:
            category(rng, args.device)
    total = sum(len(v) for v in found.values())
    print(f"device {args.device}, {args.seeds} seeds: {total} discrepancies",
          {k: len(v) for k, v in found.items()}, "in cases checked:", checked)


if __name__ == "__main__":
    main()
