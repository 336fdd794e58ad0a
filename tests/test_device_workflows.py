"""Device data through score, Pipeline, GridSearchCV and cross-validation, and the dtype
every public method returns, against scikit-learn and exact references."""

import json
import os
import subprocess
import sys
import warnings
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn import decomposition as skd
from sklearn import gaussian_process as skg
from sklearn import linear_model as skl
from sklearn.exceptions import UndefinedMetricWarning
from sklearn.metrics import r2_score
from sklearn.model_selection import (
    GridSearchCV,
    KFold,
    RandomizedSearchCV,
    cross_val_score,
    cross_validate,
)
from sklearn.pipeline import Pipeline

import skgpu
from skgpu.decomposition import PCA, TruncatedSVD
from skgpu.gaussian_process import GaussianProcessRegressor
from skgpu.linear_model import Ridge, RidgeCV
from skgpu.utils._scoring import r2_from_sums, r2_score_where_the_data_is

from conftest import DEVICES
from skgpu_testing import to_host

HERE = Path(__file__).resolve().parent


def _exact_r2(y, p, w=None):
    """R² (uniform average over outputs) in exact rational arithmetic of the float inputs."""
    y, p = np.atleast_2d(y.T).T, np.atleast_2d(p.T).T
    w = np.ones(y.shape[0]) if w is None else w
    W = [Fraction(float(v)) for v in w]
    scores = []
    for j in range(y.shape[1]):
        Y = [Fraction(float(v)) for v in y[:, j]]
        P = [Fraction(float(v)) for v in p[:, j]]
        mean = sum(wi * yi for wi, yi in zip(W, Y)) / sum(W)
        num = sum(wi * (yi - pi) ** 2 for wi, yi, pi in zip(W, Y, P))
        den = sum(wi * (yi - mean) ** 2 for wi, yi in zip(W, Y))
        scores.append(1 - num / den)
    return float(sum(scores) / len(scores))


def _targets(rng, n, n_outputs, dtype):
    y = rng.standard_normal((n, n_outputs)) * rng.uniform(0.1, 10, n_outputs) + 3.0
    p = y + 0.3 * rng.standard_normal((n, n_outputs))
    if n_outputs == 1:
        y, p = y.ravel(), p.ravel()
    return y.astype(dtype), p.astype(dtype)


# --- R² on the host path (every machine) and its exact reference -------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n_outputs", [1, 3])
@pytest.mark.parametrize("weighted", [False, True])
def test_r2_on_the_host_is_sklearns_and_exact(rng, dtype, n_outputs, weighted):
    y, p = _targets(rng, 60, n_outputs, dtype)
    w = rng.uniform(0, 3, 60) if weighted else None
    ours = r2_score_where_the_data_is(y, p, w)
    assert type(ours) is float
    assert ours == float(r2_score(y, p, sample_weight=w))
    assert ours == pytest.approx(_exact_r2(y, p, w), rel=1e-5 if dtype == np.float32 else 1e-12)


def test_r2_from_sums_is_sklearns_rule():
    """Constant targets predicted exactly (1), not exactly (0), and ordinary outputs."""
    y = np.array([[1.0, 2.0, 4.0, 7.0], [1.0, 3.0, 4.0, 1.0], [1.0, 5.0, 4.0, 2.0]])
    for p in (y.copy(), y + [[0.5, 0.0, 0.0, 1.0]], y + [[0.0, 1.0, 0.25, -1.0]],
              y * 1.5):
        num = ((y - p) ** 2).sum(axis=0)
        den = ((y - y.mean(axis=0)) ** 2).sum(axis=0)
        assert r2_from_sums(num, den) == pytest.approx(r2_score(y, p), rel=1e-14, abs=1e-15)


# --- R² on the device ---------------------------------------------------------------------

def _device(kind, a):
    if a is None:
        return None
    if kind == "cupy":
        import cupy as cp

        return cp.asarray(a)
    import torch

    return torch.as_tensor(a, device="cuda")


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["cupy", "torch"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n_outputs", [1, 3])
@pytest.mark.parametrize("weights", [None, "positive", "signed"])
def test_r2_on_the_device_is_exact(rng, kind, dtype, n_outputs, weights):
    y, p = _targets(rng, 80, n_outputs, dtype)
    w = {None: None, "positive": rng.uniform(0, 3, 80),
         "signed": rng.uniform(-0.5, 3, 80)}[weights]
    exact = _exact_r2(y, p, w)
    ours = r2_score_where_the_data_is(_device(kind, y), _device(kind, p), _device(kind, w))
    assert type(ours) is float
    # summed in float64 on the device: closer to the exact value than float32 arithmetic
    assert ours == pytest.approx(exact, rel=1e-12)
    assert ours == pytest.approx(float(r2_score(y, p, sample_weight=w)),
                                 rel=1e-5 if dtype == np.float32 else 1e-12)
    # the target on the host, the prediction on the device (or the other way round)
    assert r2_score_where_the_data_is(y, _device(kind, p), w) == pytest.approx(exact, rel=1e-12)
    assert r2_score_where_the_data_is(_device(kind, y), p, w) == pytest.approx(exact, rel=1e-12)


@pytest.mark.gpu
def test_r2_on_the_device_edge_cases_are_sklearns():
    """Constant targets, invalid input and too few samples: scikit-learn's answer or error."""
    import cupy as cp

    y = np.array([[1.0, 2.0], [1.0, 3.0], [1.0, 5.0]])
    for p in (y.copy(), y + [[0.5, 0.0]], y + [[0.0, 1.0]]):  # constant column, exact or not
        assert r2_score_where_the_data_is(cp.asarray(y), cp.asarray(p)) == pytest.approx(
            r2_score(y, p), rel=1e-14)
    bad = [
        (np.array([1.0, np.nan, 3.0]), np.ones(3), None),
        (np.ones(3), np.array([1.0, np.inf, 3.0]), None),
        (np.arange(3.0), np.ones(4), None),
        (np.ones((3, 2)), np.ones(3), None),
        (np.arange(3.0), np.ones(3), np.zeros(3)),
        (np.arange(3.0), np.ones(3), np.array([1.0, np.nan, 1.0])),
        (np.arange(3.0), np.ones(3), np.ones((3, 1))),
        (np.ones((3, 1, 1)), np.ones((3, 1, 1)), None),
    ]
    for y_true, y_pred, w in bad:
        with pytest.raises(ValueError) as theirs:
            r2_score(y_true, y_pred, sample_weight=w)
        with pytest.raises(ValueError) as ours:
            r2_score_where_the_data_is(cp.asarray(y_true), cp.asarray(y_pred),
                                       None if w is None else cp.asarray(w))
        assert str(ours.value) == str(theirs.value)
    with pytest.warns(UndefinedMetricWarning, match="two samples"):
        assert np.isnan(r2_score_where_the_data_is(cp.ones(1), cp.ones(1)))


# --- each estimator's score and score_samples on device data ------------------------------

def _fitted(name, X, y):
    return {
        "Ridge": lambda: Ridge(alpha=1.0).fit(X, y),
        "RidgeCV": lambda: RidgeCV(alphas=np.logspace(-3, 3, 7)).fit(X, y),
        "GaussianProcessRegressor": lambda: GaussianProcessRegressor(
            alpha=1e-2, optimizer=None).fit(X[:200], y[:200]),
        "PCA": lambda: PCA(n_components=4).fit(X),
    }[name]()


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["cupy", "torch"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["Ridge", "RidgeCV", "GaussianProcessRegressor", "PCA"])
def test_score_on_device_equals_the_host_score(rng, kind, dtype, name):
    X = rng.standard_normal((300, 8)).astype(dtype)
    y = (X @ rng.standard_normal((8, 2)) + 0.5 * rng.standard_normal((300, 2))).astype(dtype)
    w = rng.uniform(0.5, 2.0, 300)
    est = _fitted(name, X, y)
    Xd, yd = _device(kind, X), _device(kind, y)
    rtol = 1e-5 if dtype == np.float32 else 1e-10
    if name == "PCA":
        host = est.score_samples(X)
        dev = est.score_samples(Xd)
        assert type(dev) is type(Xd) and dev.dtype == Xd.dtype and dev.shape == (300,)
        np.testing.assert_allclose(to_host(dev), host, rtol=rtol, atol=rtol * np.abs(host).max())
        score = est.score(Xd)
        assert type(score) is float and score == pytest.approx(est.score(X), rel=rtol)
        return
    score = est.score(Xd, yd)
    assert type(score) is float and score == pytest.approx(est.score(X, y), rel=rtol)
    score_w = est.score(Xd, yd, sample_weight=_device(kind, w))
    assert score_w == pytest.approx(est.score(X, y, sample_weight=w), rel=rtol)
    assert score_w != pytest.approx(score, rel=1e-6)  # the weights were used


# --- searches and cross-validation over device data ---------------------------------------

def _search_data(rng, dtype=np.float32, n=600, p=24):
    rank = 4
    X = rng.standard_normal((n, rank)) @ rng.standard_normal((rank, p))
    X += 0.3 * rng.standard_normal((n, p))
    y = X @ rng.standard_normal(p) + rng.standard_normal(n)
    return X.astype(dtype), y.astype(dtype)


def _pipeline():
    return Pipeline([("pca", PCA()), ("ridge", RidgeCV(alphas=np.logspace(-3, 3, 7)))])


def _workflows(X, y):
    """Every workflow's scores on (X, y), as host NumPy arrays and parameters."""
    cv = KFold(4, shuffle=True, random_state=0)
    grid = GridSearchCV(_pipeline(), {"pca__n_components": [1, 2, 4, 8, 16]}, cv=cv,
                        error_score="raise").fit(X, y)
    rand = RandomizedSearchCV(_pipeline(), {"pca__n_components": [1, 2, 4, 8, 16]},
                              n_iter=3, cv=cv, random_state=0, error_score="raise").fit(X, y)
    cvs = cross_val_score(_pipeline().set_params(pca__n_components=3), X, y, cv=cv)
    cvd = cross_validate(Ridge(alpha=2.0), X, y, cv=cv, return_train_score=True)
    return {
        "grid": grid.cv_results_["mean_test_score"], "grid_best": grid.best_params_,
        "rand": rand.cv_results_["mean_test_score"], "rand_best": rand.best_params_,
        "cross_val_score": np.asarray(cvs), "cross_validate": cvd["test_score"],
        "cross_validate_train": cvd["train_score"],
        "refit_score": grid.best_estimator_.score(X, y),
    }


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["cupy", "torch"])
def test_searches_on_device_data_equal_numpy(rng, kind):
    X, y = _search_data(rng)
    ref = _workflows(X, y)
    assert len(set(np.round(ref["grid"], 4))) == 5  # the candidates score apart: a real choice
    got = _workflows(_device(kind, X), _device(kind, y))
    for key, value in ref.items():
        if key.endswith("_best"):
            assert got[key] == value, key
        else:
            assert np.all(np.isfinite(got[key])), key
            np.testing.assert_allclose(got[key], value, rtol=1e-4, err_msg=key)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["cupy", "torch"])
def test_string_scorers_with_array_api_dispatch(kind):
    """The user guide's setup (SCIPY_ARRAY_API=1 before the imports, scikit-learn's
    array_api_dispatch on), in a fresh interpreter: the common string scorers give the
    NumPy input's cv_results_ on device input, and X stays on the device end to end (no
    host copy of X, of a fold or of anything a tenth of X's size, in the searches or a
    Pipeline's fit and predict)."""
    env = {**os.environ, "SCIPY_ARRAY_API": "1"}
    out = subprocess.run([sys.executable, str(HERE / "device_search_script.py"), kind],
                         capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    output = json.loads(out.stdout.strip().splitlines()[-1])
    assert output["control"], "the profile hook did not see a host copy"
    assert output["host_copies"] == [], output["host_copies"][:3]
    assert output["predict_type"] == kind
    result = output["scores"]
    assert set(result) == {"r2", "neg_mean_squared_error", "neg_mean_absolute_error",
                           "explained_variance"}
    for scorer, (device_scores, numpy_scores, device_best, numpy_best) in result.items():
        assert device_best == numpy_best, scorer
        np.testing.assert_allclose(device_scores, numpy_scores, rtol=1e-4, err_msg=scorer)


@pytest.mark.gpu
def test_string_scorer_without_dispatch_fails_loudly(rng):
    """Without array-API dispatch, scikit-learn's metrics cannot read device arrays: with
    error_score='raise' the search stops with CuPy's error (the default error_score gives
    NaN scores and a FitFailedWarning-style warning from scikit-learn; the user guide says
    which setting fixes it)."""
    import cupy as cp

    X, y = _search_data(rng, n=200)
    search = GridSearchCV(_pipeline(), {"pca__n_components": [1, 2]}, cv=3, scoring="r2",
                          error_score="raise")
    with pytest.raises(TypeError, match="Implicit conversion to a NumPy array"):
        search.fit(cp.asarray(X), cp.asarray(y))


# --- dtypes: what scikit-learn returns, for every public method and option -----------------

def _dense(rng, dtype):
    X = rng.standard_normal((40, 6)) @ (np.eye(6) + 0.3 * rng.standard_normal((6, 6)))
    y = X @ rng.standard_normal((6, 2)) + 0.1 * rng.standard_normal((40, 2))
    return (X + 2.0).astype(dtype), y.astype(dtype)


_PCA_OPTIONS = [dict(n_components=3, svd_solver=s, whiten=w)
                for s in ("auto", "full", "covariance_eigh", "randomized", "arpack")
                for w in (False, True)] + [dict(n_components="mle"), dict(n_components=0.9)]
_CASES = (
    [("PCA", o, False) for o in _PCA_OPTIONS]
    + [("PCA", dict(n_components=3, svd_solver=s), True) for s in ("arpack", "covariance_eigh")]
    + [("TruncatedSVD", dict(n_components=3, algorithm=a), s)
       for a in ("randomized", "arpack") for s in (False, True)]
    + [("Ridge", dict(solver=s, fit_intercept=f), False)
       for s in ("auto", "svd", "cholesky", "lsqr") for f in (True, False)]
    + [("Ridge", dict(), True)]
    + [("RidgeCV", dict(gcv_mode=g), False) for g in (None, "svd", "eigen")]
    + [("RidgeCV", dict(alpha_per_target=True), False), ("RidgeCV", dict(cv=3), False),
       ("RidgeCV", dict(), True)]
    + [("GaussianProcessRegressor", dict(normalize_y=n), False) for n in (False, True)]
)

_OURS = {"PCA": PCA, "TruncatedSVD": TruncatedSVD, "Ridge": Ridge, "RidgeCV": RidgeCV,
         "GaussianProcessRegressor": GaussianProcessRegressor}
_THEIRS = {"PCA": skd.PCA, "TruncatedSVD": skd.TruncatedSVD, "Ridge": skl.Ridge,
           "RidgeCV": skl.RidgeCV, "GaussianProcessRegressor": skg.GaussianProcessRegressor}


def _outputs(est, X, y):
    """Every public method's array output (and the fitted float arrays) by name."""
    out = {}
    if hasattr(est, "transform"):
        out["fit_transform"] = est.fit_transform(X)
        est.fit(X)
        Z = est.transform(X)
        out["transform"] = Z
        out["inverse_transform"] = est.inverse_transform(Z)
        if hasattr(est, "score_samples") and X.ndim == 2 and not hasattr(X, "format"):
            out["score_samples"] = est.score_samples(X)  # dense X only, as scikit-learn
    else:
        if hasattr(est, "kernel"):  # a GP: one target, no optimiser run (dtype is the point)
            est.set_params(optimizer=None)
            y = y[:, 0]
        est.fit(X, y)
        out["predict"] = est.predict(X)
        if hasattr(est, "sample_y"):
            mean, std = est.predict(X, return_std=True)
            out["predict_mean"], out["predict_std"] = mean, std
            out["predict_cov"] = est.predict(X[:5], return_cov=True)[1]
            out["sample_y"] = est.sample_y(X[:5], n_samples=2)
    # A GPU fit's L_ reaches the host on its first read (not in vars until then).
    lazy = ["L_"] if hasattr(est, "kernel") else []
    for name in [*vars(est), *lazy]:
        value = getattr(est, name)
        if name.endswith("_") and not name.startswith("_") and isinstance(value, np.ndarray) \
                and value.dtype.kind == "f":
            out[name] = value
    return out


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,params,sparse", _CASES,
                         ids=[f"{n}-{p}-{'sparse' if s else 'dense'}" for n, p, s in _CASES])
def test_every_method_returns_sklearns_dtype(device, dtype, name, params, sparse):
    X, y = _dense(np.random.default_rng(0), dtype)
    if sparse:
        X = sp.csr_matrix(np.where(np.abs(X) > 1.5, X, 0).astype(dtype))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence and LinAlg warnings of tiny data
        theirs = _outputs(_THEIRS[name](**params), X, y)
        Xin, yin = X, y
        if device == "gpu":  # device data on the GPU backend: the output stays there too
            import cupy as cp
            import cupyx.scipy.sparse as csp

            Xin = csp.csr_matrix(X) if sparse else cp.asarray(X)
            yin = cp.asarray(y)
        with skgpu.config_context(device=device):
            ours = _outputs(_OURS[name](**params), Xin, yin)
    assert set(ours) >= set(theirs)
    for key, value in theirs.items():
        got = ours[key]
        assert got.dtype == value.dtype, (key, got.dtype, value.dtype)
        if device == "gpu" and not key.endswith("_"):
            assert type(got).__module__.split(".")[0] == "cupy", (key, type(got))
