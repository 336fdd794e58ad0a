"""GaussianProcessRegressor and its kernel evaluation against scikit-learn, per backend."""

import logging
import pickle

import numpy as np
import pytest
from conftest import DEVICES
from sklearn.gaussian_process import GaussianProcessRegressor as SkGPR
from sklearn.gaussian_process import kernels as k
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks
from skgpu_testing import assert_allclose_rel

import skgpu
from skgpu.backends import get_backend
from skgpu.gaussian_process import GaussianProcessRegressor
from skgpu.gaussian_process import _dense
from skgpu.gaussian_process._kernel_eval import evaluate

# The optimizer on small test data reaches its bounds (ConvergenceWarning); the tests
# compare values with scikit-learn's, which warns the same.
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

KERNELS = {
    "rbf": k.RBF(0.8),
    "rbf_ard": k.RBF([0.5, 1.0, 2.0]),
    "matern05": k.Matern(0.9, nu=0.5),
    "matern15_ard": k.Matern([0.5, 1.0, 2.0], nu=1.5),
    "matern25": k.Matern(1.2, nu=2.5),
    "matern25_ard": k.Matern([0.7, 1.3, 0.9], nu=2.5),
    "matern05_ard": k.Matern([0.7, 1.3, 0.9], nu=0.5),
    "matern_inf": k.Matern(1.1, nu=np.inf),
    "rational_quadratic": k.RationalQuadratic(0.9, 1.5),
    "exp_sine_squared": k.ExpSineSquared(1.1, 2.5),
    "dot_product": k.DotProduct(0.7),
    "white": k.WhiteKernel(0.3),
    "constant": k.ConstantKernel(2.0),
    "c_rbf_ard_white": k.ConstantKernel(2.0) * k.RBF([0.5, 1.0, 2.0]) + k.WhiteKernel(0.1),
    "exponentiation": (k.RBF(1.0) + k.DotProduct(0.3)) ** 2,
    "fixed_parts": k.ConstantKernel(0.5, "fixed") * k.ExpSineSquared(
        1.0, 3.0, periodicity_bounds="fixed") * k.RBF(2.0) + k.WhiteKernel(0.01, "fixed"),
    "host_pairwise": k.PairwiseKernel(gamma=0.5, metric="laplacian") + k.WhiteKernel(0.1),
}


def rtol_for(device):
    return 1e-10 if device == "cpu" else 1e-8


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(KERNELS))
def test_kernel_values_and_gradients_match_sklearn(rng, device, name):
    ops = get_backend(device)
    kernel = KERNELS[name]
    X, Y = rng.uniform(-2, 2, (40, 3)), rng.uniform(-2, 2, (15, 3))
    K_ref, G_ref = kernel(X, eval_gradient=True)
    K, grads = evaluate(ops, kernel, ops.asarray(X), None, eval_gradient=True)
    assert len(grads) == G_ref.shape[2] == len(kernel.theta)
    assert_allclose_rel(K.full(ops.xp, K_ref.shape), K_ref, 1e-12)
    for j, grad in enumerate(grads):
        assert_allclose_rel(grad().full(ops.xp, K_ref.shape), G_ref[:, :, j], 1e-12,
                            atol_scale=max(np.abs(G_ref).max(), 1.0))
    Kxy = evaluate(ops, kernel, ops.asarray(X), ops.asarray(Y))[0]
    assert_allclose_rel(Kxy.full(ops.xp, (40, 15)), kernel(X, Y), 1e-12,
                        atol_scale=max(np.abs(kernel(X, Y)).max(), 1.0))


def _data(rng, n=80, d=3, n_targets=None):
    X = rng.uniform(-2, 2, (n, d))
    f = np.sin(2 * X[:, 0]) + 0.5 * np.cos(X[:, 1]) + 0.3 * X[:, 2] ** 2
    if n_targets is None:
        return X, f + 0.1 * rng.standard_normal(n)
    return X, np.column_stack([f * (t + 1) + 0.1 * rng.standard_normal(n)
                               for t in range(n_targets)])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["rbf_ard", "matern05", "matern15_ard", "matern25",
                                  "rational_quadratic", "exp_sine_squared",
                                  "c_rbf_ard_white", "exponentiation", "fixed_parts",
                                  "host_pairwise"])
@pytest.mark.parametrize("n_targets", [None, 2])
@pytest.mark.parametrize("normalize_y", [False, True])
def test_lml_and_gradient_match_sklearn(rng, device, name, n_targets, normalize_y):
    kernel = KERNELS[name] + k.WhiteKernel(0.05, "fixed")
    X, y = _data(rng, n_targets=n_targets)
    if name in ("exp_sine_squared", "fixed_parts"):
        X = X[:, :1]  # ExpSineSquared is positive definite on the line only
    params = dict(kernel=kernel, optimizer=None, normalize_y=normalize_y,
                  alpha=rng.uniform(1e-3, 1e-2, X.shape[0]))
    theirs = SkGPR(**params).fit(X, y)
    with skgpu.config_context(device=device):
        ours = GaussianProcessRegressor(**params).fit(X, y)
        assert ours.backend_ == device
        for theta in [kernel.theta, kernel.theta + rng.uniform(-0.5, 0.5, kernel.theta.size)]:
            lml, grad = ours.log_marginal_likelihood(theta, eval_gradient=True)
            lml_ref, grad_ref = theirs.log_marginal_likelihood(theta, eval_gradient=True)
            assert lml == pytest.approx(lml_ref, rel=rtol_for(device))
            assert_allclose_rel(grad, grad_ref, 1e-8)
            assert ours.log_marginal_likelihood(theta) == pytest.approx(lml, rel=1e-12)
        assert ours.log_marginal_likelihood() == theirs.log_marginal_likelihood_value_ or (
            ours.log_marginal_likelihood() == pytest.approx(
                theirs.log_marginal_likelihood_value_, rel=rtol_for(device)))
        with pytest.raises(ValueError, match="Gradient can only be evaluated for theta!=None"):
            ours.log_marginal_likelihood(eval_gradient=True)


def tight_lbfgs(obj_func, initial_theta, bounds):
    """L-BFGS-B run to convergence: both objectives then reach the optimum to ~1e-9,
    where scikit-learn's default tolerances stop wherever rounding steers them."""
    from scipy.optimize import minimize

    res = minimize(obj_func, initial_theta, method="L-BFGS-B", jac=True, bounds=bounds,
                   options={"gtol": 1e-12, "ftol": 1e-15, "maxiter": 5000})
    return res.x, res.fun


def _compare_fitted(ours, theirs, X_test, rtol, theta_rtol):
    assert_allclose_rel(ours.kernel_.theta, theirs.kernel_.theta, theta_rtol,
                        atol_scale=1.0)
    assert ours.log_marginal_likelihood_value_ == pytest.approx(
        theirs.log_marginal_likelihood_value_, rel=1e-8)
    for name in ("L_", "alpha_", "X_train_", "y_train_"):
        a, b = getattr(ours, name), getattr(theirs, name)
        assert isinstance(a, np.ndarray) and a.shape == b.shape, name
        assert_allclose_rel(a, b, rtol)
    mean, std = ours.predict(X_test, return_std=True)
    mean_ref, std_ref = theirs.predict(X_test, return_std=True)
    assert mean.shape == mean_ref.shape and std.shape == std_ref.shape
    assert_allclose_rel(mean, mean_ref, rtol)
    assert_allclose_rel(std, std_ref, rtol)
    mean, cov = ours.predict(X_test, return_cov=True)
    assert cov.shape == theirs.predict(X_test, return_cov=True)[1].shape
    assert_allclose_rel(cov, theirs.predict(X_test, return_cov=True)[1], rtol)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["c_rbf_ard_white", "matern15_ard", "matern05"])
@pytest.mark.parametrize("n_targets", [None, 2])
@pytest.mark.parametrize("normalize_y", [False, True])
def test_fit_and_predict_match_sklearn(rng, device, name, n_targets, normalize_y):
    kernel = KERNELS[name]
    if name != "c_rbf_ard_white":
        kernel = kernel + k.WhiteKernel(0.1)
    X, y = _data(rng, n_targets=n_targets)
    params = dict(kernel=kernel, normalize_y=normalize_y, n_restarts_optimizer=2,
                  random_state=0, optimizer=tight_lbfgs)
    theirs = SkGPR(**params).fit(X, y)
    with skgpu.config_context(device=device):
        ours = GaussianProcessRegressor(**params).fit(X, y)
        # The optimum is determined to ~1e-7 (the LML's curvature against rounding of
        # the two objectives), not to the 1e-8 the issue asks; see the closing note.
        _compare_fitted(ours, theirs, rng.uniform(-2.5, 2.5, (30, 3)), 1e-6, 2e-6)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n_targets", [None, 1, 2])
@pytest.mark.parametrize("normalize_y", [False, True])
def test_predicted_cov_in_y_units_matches_sklearn(rng, monkeypatch, device, n_targets,
                                                  normalize_y):
    """The covariance scaled to y's units (one target: in place, on the prediction's
    own array) as scikit-learn's, in shape and values, for y of one dimension, one
    column and two; skgpu's own predict (not the small-call route to scikit-learn's),
    and a second call the same as the first (nothing scaled twice)."""
    from skgpu.gaussian_process import _gpr

    monkeypatch.setattr(_gpr, "_reference_predict", lambda *a: False)
    X, y = _data(rng, n_targets=n_targets)
    if n_targets == 1:
        y = y * 7.0 + 3.0  # (one column already)
    params = dict(kernel=KERNELS["c_rbf_ard_white"], normalize_y=normalize_y,
                  optimizer=None)
    theirs = SkGPR(**params).fit(X, y)
    X_test = rng.uniform(-2.5, 2.5, (40, 3))
    _, cov_ref = theirs.predict(X_test, return_cov=True)
    with skgpu.config_context(device=device):
        ours = GaussianProcessRegressor(**params).fit(X, y)
        first = ours.predict(X_test, return_cov=True)[1]
        second = ours.predict(X_test, return_cov=True)[1]
    assert first.shape == cov_ref.shape
    assert_allclose_rel(first, cov_ref, 1e-9)
    assert_allclose_rel(second, first, 1e-14)


@pytest.mark.parametrize("device", DEVICES)
def test_default_optimizer_reaches_sklearn_optimum(rng, device):
    X, y = _data(rng, n_targets=2)
    params = dict(kernel=KERNELS["c_rbf_ard_white"], n_restarts_optimizer=3,
                  random_state=0, normalize_y=True)
    theirs = SkGPR(**params).fit(X, y)
    with skgpu.config_context(device=device):
        ours = GaussianProcessRegressor(**params).fit(X, y)
    # Same starts (restarts drawn from the same random_state); L-BFGS-B's default
    # tolerances leave the optimum determined to ~1e-5, its value much better.
    assert ours.log_marginal_likelihood_value_ == pytest.approx(
        theirs.log_marginal_likelihood_value_, rel=1e-8)
    assert_allclose_rel(ours.kernel_.theta, theirs.kernel_.theta, 1e-3, atol_scale=1.0)
    assert_allclose_rel(ours.predict(X), theirs.predict(X), 1e-4)


def _mauna_loa_like(rng, n=150):
    """The composite kernel of scikit-learn's CO2 example on synthetic monthly data."""
    t = np.sort(rng.uniform(0, 15, n))[:, None]
    y = (0.3 * t[:, 0] + 0.02 * t[:, 0] ** 2 + 2.0 * np.sin(2 * np.pi * t[:, 0])
         * np.exp(-t[:, 0] / 30) + 0.3 * rng.standard_normal(n))
    kernel = (
        50.0**2 * k.RBF(length_scale=50.0)
        + 2.0**2 * k.RBF(length_scale=100.0) * k.ExpSineSquared(
            length_scale=1.0, periodicity=1.0, periodicity_bounds="fixed")
        + 0.5**2 * k.RationalQuadratic(length_scale=1.0, alpha=1.0)
        + 0.1**2 * k.RBF(length_scale=0.1) + k.WhiteKernel(noise_level=0.1**2)
    )
    return t, y, kernel


@pytest.mark.parametrize("device", DEVICES)
def test_gallery_composite_kernel(device):
    rng = np.random.default_rng(3)
    t, y, kernel = _mauna_loa_like(rng)
    t_test = np.linspace(0, 17, 40)[:, None]
    theirs = SkGPR(kernel, random_state=0).fit(t, y)
    with skgpu.config_context(device=device):
        ours = GaussianProcessRegressor(kernel, random_state=0).fit(t, y)
        theta = theirs.kernel_.theta + 0.1
        lml, grad = ours.log_marginal_likelihood(theta, eval_gradient=True)
        lml_ref, grad_ref = theirs.log_marginal_likelihood(theta, eval_gradient=True)
        assert lml == pytest.approx(lml_ref, rel=1e-8)
        assert_allclose_rel(grad, grad_ref, 1e-8)
        # Eleven hyperparameters, two at their bounds and one barely identified: the
        # optimum's value is what both fits agree on, not every coordinate of theta.
        assert ours.log_marginal_likelihood_value_ == pytest.approx(
            theirs.log_marginal_likelihood_value_, rel=1e-6)
        # At scikit-learn's optimum, everything else agrees to rounding.
        fixed = GaussianProcessRegressor(theirs.kernel_, optimizer=None).fit(t, y)
        reference = SkGPR(theirs.kernel_, optimizer=None).fit(t, y)
        _compare_fitted(fixed, reference, t_test, 1e-8, 1e-12)


@pytest.mark.parametrize("device", DEVICES)
def test_predict_in_blocks(monkeypatch, rng, device):
    X, y = _data(rng)
    X_test = rng.uniform(-2, 2, (257, 3))
    with skgpu.config_context(device=device):
        gpr = GaussianProcessRegressor(KERNELS["c_rbf_ard_white"], optimizer=None).fit(X, y)
        whole = gpr.predict(X_test, return_std=True)
        monkeypatch.setattr(_dense, "_PREDICT_BLOCK_BYTES", 8 * 80 * 10)  # 10 rows a block
        blocked = gpr.predict(X_test, return_std=True)
    for a, b in zip(blocked, whole):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
def test_not_positive_definite_error(device):
    X = np.repeat(np.linspace(0, 1, 10)[:, None], 2, axis=0)  # duplicated points
    y = np.arange(20.0)
    params = dict(kernel=k.RBF(1.0), alpha=0.0, optimizer=None)
    with pytest.raises(np.linalg.LinAlgError, match="not returning a positive definite"):
        SkGPR(**params).fit(X, y)
    gpr = GaussianProcessRegressor(**params)
    with skgpu.config_context(device=device):
        with pytest.raises(np.linalg.LinAlgError,
                           match="not returning a positive definite matrix. Try gradually "
                                 "increasing the 'alpha' parameter"):
            gpr.fit(X, y)
    assert not hasattr(gpr, "L_") and not hasattr(gpr, "kernel_")


def test_bad_input(rng):
    X, y = _data(rng, n=20)
    for est in (SkGPR(alpha=np.ones(5)), GaussianProcessRegressor(alpha=np.ones(5))):
        with pytest.raises(ValueError, match="alpha must be a scalar or an array"):
            est.fit(X, y)
    for est in (SkGPR(n_targets=2), GaussianProcessRegressor(n_targets=2)):
        with pytest.raises(ValueError, match="different from the parameter `n_targets`"):
            est.fit(X, y)
    bounds = k.RBF(1.0, length_scale_bounds=(1e-2, np.inf))
    for est in (SkGPR(bounds, n_restarts_optimizer=1),
                GaussianProcessRegressor(bounds, n_restarts_optimizer=1)):
        with pytest.raises(ValueError, match="requires that all bounds are finite"):
            est.fit(X, y)
    gpr = GaussianProcessRegressor().fit(X, y)
    with pytest.raises(RuntimeError, match="At most one of return_std or return_cov"):
        gpr.predict(X, return_std=True, return_cov=True)
    Xbad = X.copy()
    Xbad[0, 0] = np.nan
    with pytest.raises(ValueError, match="Input X contains NaN"):
        GaussianProcessRegressor().fit(Xbad, y)


def test_prior_and_sample_y_match_sklearn(rng):
    X, y = _data(rng, n=30)
    kernel = KERNELS["c_rbf_ard_white"]
    for a, b in zip(GaussianProcessRegressor(kernel).predict(X, return_std=True),
                    SkGPR(kernel).predict(X, return_std=True)):
        np.testing.assert_allclose(a, b)
    ours = GaussianProcessRegressor(kernel, random_state=0).fit(X, y)
    theirs = SkGPR(kernel, random_state=0).fit(X, y)
    np.testing.assert_allclose(ours.sample_y(X[:5], 3, random_state=1),
                               theirs.sample_y(X[:5], 3, random_state=1), rtol=1e-6,
                               atol=1e-8)


def test_unsupported_kernel_is_logged_and_evaluated_by_sklearn(rng, caplog):
    X, y = _data(rng, n=40)
    kernel = KERNELS["host_pairwise"]
    with caplog.at_level(logging.INFO, logger="skgpu"):
        ours = GaussianProcessRegressor(kernel, random_state=0).fit(X, y)
    assert any("PairwiseKernel is evaluated by scikit-learn on the host" in r.getMessage()
               for r in caplog.records)
    theirs = SkGPR(kernel, random_state=0).fit(X, y)
    assert_allclose_rel(ours.predict(X), theirs.predict(X), 1e-7)


@pytest.mark.parametrize("device", DEVICES)
def test_pickle_pipeline_and_grid_search(rng, device):
    X, y = _data(rng, n=60)
    with skgpu.config_context(device=device):
        gpr = GaussianProcessRegressor(KERNELS["c_rbf_ard_white"], random_state=0).fit(X, y)
        expected = gpr.predict(X, return_std=True)
        search = GridSearchCV(make_pipeline(StandardScaler(), GaussianProcessRegressor()),
                              {"gaussianprocessregressor__alpha": [1e-2, 1e-1]}, cv=3)
        search.fit(X, y)
    assert search.best_params_["gaussianprocessregressor__alpha"] in (1e-2, 1e-1)
    restored = pickle.loads(pickle.dumps(gpr))
    assert "_device_cache" not in restored.__dict__
    with skgpu.config_context(device="cpu"):
        for a, b in zip(restored.predict(X, return_std=True), expected):
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


@pytest.mark.gpu
def test_cupy_and_torch_inputs(rng):
    import cupy as cp
    import torch

    X, y = _data(rng, n=60)
    theirs = SkGPR(KERNELS["c_rbf_ard_white"], random_state=0).fit(X, y)
    ours = GaussianProcessRegressor(KERNELS["c_rbf_ard_white"], random_state=0).fit(
        cp.asarray(X), cp.asarray(y))
    assert ours.backend_ == "gpu" and isinstance(ours.L_, np.ndarray)
    mean, std = ours.predict(cp.asarray(X), return_std=True)
    assert isinstance(mean, cp.ndarray) and isinstance(std, cp.ndarray)
    assert_allclose_rel(mean, theirs.predict(X), 1e-7)
    mean_t = ours.predict(torch.as_tensor(X, device="cuda"))
    assert isinstance(mean_t, torch.Tensor) and mean_t.device.type == "cuda"


@pytest.mark.parametrize("device", DEVICES)
@parametrize_with_checks([GaussianProcessRegressor(),
                          GaussianProcessRegressor(k.RBF() + k.WhiteKernel(), alpha=1e-3)])
def test_sklearn_compatible(estimator, check, device):
    with skgpu.config_context(device=device):
        check(estimator)


@pytest.mark.parametrize("path", ["dense", "sparse"])
@pytest.mark.parametrize("verbose", [0, 1, 2])
def test_verbose_reports_progress(verbose, path, caplog):
    """From verbose=1: every likelihood evaluation (count, LML, gradient norm, time), one
    record per optimizer run and one at the end, on the dense and the sparse path; 0: none
    of them (the records go to the "skgpu" logger at INFO)."""
    import logging
    import re

    from skgpu.gaussian_process.kernels import Wendland

    X = np.linspace(0, 5, 30)[:, None]
    y = np.sin(X).ravel() + 0.1 * np.random.default_rng(0).standard_normal(30)
    kernel = (k.RBF() + k.WhiteKernel(1e-2) if path == "dense"
              else k.ConstantKernel(1.0) * Wendland(2.0) + k.WhiteKernel(1e-2))
    with caplog.at_level(logging.INFO, "skgpu"):
        gpr = GaussianProcessRegressor(kernel, n_restarts_optimizer=2, random_state=0,
                                       verbose=verbose, cholesky=path).fit(X, y)
    assert gpr.cholesky_ == path
    runs = [r for r in caplog.records if "optimizer run" in r.getMessage()]
    evaluations = [r.getMessage() for r in caplog.records if "evaluation " in r.getMessage()
                   and "optimizer run" not in r.getMessage()]
    done = [r for r in caplog.records if "fit: done" in r.getMessage()]
    assert len(runs) == (3 if verbose else 0)
    assert len(done) == (1 if verbose else 0)
    assert len(evaluations) == (gpr._n_lml_evaluations if verbose else 0)
    pattern = re.compile(r"evaluation (\d+), log-marginal-likelihood (\S+), gradient norm "
                         r"(\S+), (\S+) s$")
    counts = []
    for message in evaluations:
        match = pattern.search(message)
        assert match, message
        counts.append(int(match.group(1)))
        assert np.isfinite(float(match.group(2))) and float(match.group(3)) >= 0
    assert counts == sorted(counts)


def test_verbose_is_visible_without_logging_configured(capfd):
    X = np.linspace(0, 5, 20)[:, None]
    GaussianProcessRegressor(k.RBF(), verbose=1).fit(X, np.sin(X).ravel())
    err = capfd.readouterr().err
    assert "[skgpu] GaussianProcessRegressor.fit: optimizer run 1 of 1" in err
    GaussianProcessRegressor(k.RBF()).fit(X, np.sin(X).ravel())
    assert "optimizer run" not in capfd.readouterr().err
