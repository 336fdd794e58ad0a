"""``cholesky='auto'``: the sparse path for a compactly supported kernel unless K is
dense enough for the dense factorisation to be the faster one (the measured density)."""

import logging

import numpy as np
import pytest
from scipy.spatial import cKDTree

from skgpu.gaussian_process import GaussianProcessRegressor, _gpr, _sparse
from skgpu.gaussian_process.kernels import Tapered, Wendland
from sklearn.gaussian_process.kernels import RBF, WhiteKernel


def _data(n, d=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (n, d))
    return X, np.sin(6 * X[:, 0]) + 0.1 * rng.standard_normal(n)


def _exact_density(X, r):
    return (2 * len(cKDTree(X).query_pairs(r)) + X.shape[0]) / X.shape[0] ** 2


@pytest.mark.parametrize("n, d, r", [(300, 2, 0.2), (5_000, 2, 0.1), (5_000, 3, 0.3),
                                     (12_000, 2, 0.05)])
def test_density_estimate_is_close_to_the_exact_count(n, d, r):
    X, _ = _data(n, d, seed=n)
    exact = _exact_density(X, r)
    estimate = _sparse.pattern_density(X, r)
    if n <= 1_000:
        assert estimate == pytest.approx(exact, rel=1e-12)
    else:  # 1,000 × 4,000 sampled pairs
        assert abs(estimate - exact) <= 0.1 * exact
    assert _sparse.pattern_density(X, r) == estimate  # the same draw every call


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("kernel, path", [
    (Wendland(0.05), "sparse"),
    (Wendland(0.8), "dense"),
    (Tapered(RBF(0.3), taper_range=0.04) + WhiteKernel(0.01), "sparse"),
    (Tapered(RBF(0.3), taper_range=1.5) + WhiteKernel(0.01), "dense"),
])
def test_auto_follows_the_density_and_says_so(caplog, kernel, path, seed):
    X, y = _data(1_500, seed=seed)
    with caplog.at_level(logging.INFO, "skgpu"):
        auto = GaussianProcessRegressor(kernel, alpha=1e-2, optimizer=None).fit(X, y)
    assert auto.cholesky_ == path
    assert f"{path} path: K is" in caplog.text and "non-zero" in caplog.text
    other = "dense" if path == "sparse" else "sparse"
    forced = GaussianProcessRegressor(kernel, alpha=1e-2, optimizer=None,
                                      cholesky=other).fit(X, y)
    assert forced.cholesky_ == other
    Xt = _data(50, seed=seed + 10)[0]
    mean_a, std_a = auto.predict(Xt, return_std=True)
    mean_f, std_f = forced.predict(Xt, return_std=True)
    np.testing.assert_allclose(mean_a, mean_f, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(std_a, std_f, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(auto.log_marginal_likelihood_value_,
                               forced.log_marginal_likelihood_value_, rtol=1e-10)


def test_threshold_falls_with_n_and_dimension():
    assert _sparse.dense_density_threshold(100, 2) == _sparse.DENSE_MAX_DENSITY
    assert _sparse.dense_density_threshold(10_000, 2) == pytest.approx(0.07)
    assert _sparse.dense_density_threshold(10_000, 3) == pytest.approx(0.04)
    assert _sparse.dense_density_threshold(1_000_000, 1) == pytest.approx(0.007)


def test_a_dense_k_that_does_not_fit_stays_sparse(monkeypatch, caplog):
    X, y = _data(1_500)
    monkeypatch.setattr(_gpr, "host_available_bytes", lambda: 1 << 20)
    monkeypatch.setattr(_gpr, "gpu_free_bytes", lambda: None)
    with caplog.at_level(logging.INFO, "skgpu"):
        gp = GaussianProcessRegressor(Wendland(0.8), alpha=1e-2, optimizer=None).fit(X, y)
    assert gp.cholesky_ == "sparse"
    assert "does not fit in memory" in caplog.text


def test_forced_paths_skip_the_estimate(monkeypatch):
    X, y = _data(200)

    def refuse(*args):
        raise AssertionError("density estimated for a forced path")

    monkeypatch.setattr(_gpr, "pattern_density", refuse)
    for path in ("dense", "sparse"):
        gp = GaussianProcessRegressor(Wendland(0.8), optimizer=None, cholesky=path).fit(X, y)
        assert gp.cholesky_ == path
