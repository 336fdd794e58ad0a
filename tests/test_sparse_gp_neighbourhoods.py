"""The sparse GP's predictions where a test point's neighbourhood (the training points
within the kernel's support) is empty, a single point, the whole cluster, or lands exactly
on a training point, alone and mixed, against scikit-learn's dense answer."""

import numpy as np
import pytest
from sklearn.gaussian_process import GaussianProcessRegressor as SkGPR
from sklearn.gaussian_process.kernels import ConstantKernel as C
from sklearn.gaussian_process.kernels import Matern, WhiteKernel
from skgpu_testing import assert_allclose_rel, skip_unless_supported

import skgpu
from skgpu.backends import _cpu, get_backend
from skgpu.gaussian_process import GaussianProcessRegressor, _sparse
from skgpu.gaussian_process.kernels import Tapered, Wendland

RADIUS = 0.3

KERNELS = {
    "wendland": C(1.3) * Wendland(RADIUS, smoothness=1) + WhiteKernel(0.05),
    "tapered_matern": Tapered(C(0.8) * Matern(0.2, nu=1.5), taper_range=RADIUS)
    + WhiteKernel(0.02),
}


def _training(rng):
    """A cluster in [0, 1]², one training point alone at (3, 3) (its own support holds
    nothing else) and a pair of exact duplicates."""
    X = np.vstack([rng.uniform(0, 1, (70, 2)), [[3.0, 3.0]], [[0.5, 0.5], [0.5, 0.5]]])
    y = np.sin(4 * X[:, 0]) + X[:, 1] ** 2 + 0.05 * rng.standard_normal(X.shape[0])
    return X, y


def _test_points(rng, X, kind):
    empty = np.array([[50.0, 50.0], [-7.0, 2.0]])
    single = np.array([[3.05, 2.97], [3.0, 3.0 + 0.5 * RADIUS]])
    full = rng.uniform(0.3, 0.7, (4, 2))
    duplicate = np.vstack([X[[3, 10]], [[0.5, 0.5]], [[3.0, 3.0]]])
    parts = {"empty": [empty], "single": [single], "full": [full],
             "duplicate": [duplicate], "mixed": [full, empty, duplicate, single]}[kind]
    points = np.vstack(parts)
    if kind == "mixed":
        points = points[rng.permutation(points.shape[0])]
    return points


def _factor_choices():
    out = [("cpu", "superlu")]
    if _cpu.cholmod_available():
        out.append(("cpu", "cholmod"))
    out.append(("cpu", "supernodal"))  # skgpu's own factor under the likelihood too
    out.append(pytest.param("gpu", "cudss", marks=pytest.mark.gpu))
    out.append(pytest.param("gpu", "supernodal", marks=pytest.mark.gpu))
    return out


@pytest.mark.parametrize("device,factor", _factor_choices())
@pytest.mark.parametrize("kernel_name", list(KERNELS))
@pytest.mark.parametrize("kind", ["empty", "single", "full", "duplicate", "mixed"])
def test_predictions_on_every_kind_of_neighbourhood(rng, monkeypatch, device, factor,
                                                     kernel_name, kind):
    skip_unless_supported(get_backend(device), "sparse_spd")
    if factor == "superlu":  # named: without CHOLMOD "auto" would take skgpu's factor
        monkeypatch.setattr(_cpu, "_cholmod", lambda: None)
        monkeypatch.setitem(_sparse.SPARSE_FACTORIZATION, "cpu", "backend")
    if factor == "supernodal":
        monkeypatch.setitem(_sparse.SPARSE_FACTORIZATION, device, "supernodal")
    X, y = _training(rng)
    X_test = _test_points(rng, X, kind)
    kernel = KERNELS[kernel_name]
    reference = SkGPR(kernel, optimizer=None, alpha=1e-8).fit(X, y)
    with skgpu.config_context(device=device):
        gp = GaussianProcessRegressor(kernel, optimizer=None, alpha=1e-8,
                                      cholesky="sparse").fit(X, y)
        assert gp.cholesky_ == "sparse" and gp.backend_ == device
        mean, std = gp.predict(X_test, return_std=True)
        mean_c, cov = gp.predict(X_test, return_cov=True)
        samples = gp.sample_y(X_test, n_samples=3, random_state=7)
    ref_mean, ref_std = reference.predict(X_test, return_std=True)
    ref_cov = reference.predict(X_test, return_cov=True)[1]
    # the systems are well conditioned (noise 0.02 against a unit variance): the dense and
    # sparse solves agree to ~1e-12; 1e-8 leaves room for either factor's ordering
    scale = np.abs(ref_mean).max() + 1.0
    np.testing.assert_allclose(mean, ref_mean, rtol=0, atol=1e-8 * scale)
    np.testing.assert_allclose(mean_c, ref_mean, rtol=0, atol=1e-8 * scale)
    np.testing.assert_allclose(std, ref_std, rtol=0, atol=1e-8)
    np.testing.assert_allclose(cov, ref_cov, rtol=0, atol=1e-8)
    if kind == "empty":  # no training point in reach: the prior, exactly
        prior = kernel(X_test)
        np.testing.assert_allclose(cov, prior, rtol=1e-12, atol=0)
        np.testing.assert_array_equal(mean, 0.0)
    # scikit-learn draws N(mean, cov) through an SVD of cov: where its eigenvalues are
    # apart, equal moments and the same draws give the same samples; where they repeat
    # (two far points share the prior variance) the eigenvectors are any basis of their
    # space, so the samples are compared through their moments
    ref_samples = reference.sample_y(X_test, n_samples=3, random_state=7)
    eig = np.linalg.eigvalsh(ref_cov)
    if np.min(np.diff(eig)) > 1e-3 * eig[-1]:
        assert_allclose_rel(samples, ref_samples, 1e-6)
    with skgpu.config_context(device=device):
        many = gp.sample_y(X_test, n_samples=20000, random_state=3)
    # seeded, so deterministic; the bounds are ~6 standard errors of 20,000 draws
    spread = np.sqrt(np.diag(ref_cov))
    np.testing.assert_allclose(many.mean(axis=1), ref_mean, rtol=0, atol=0.05 * spread.max())
    np.testing.assert_allclose(np.cov(many), ref_cov, rtol=0, atol=0.07 * eig[-1])
