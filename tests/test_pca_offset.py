"""PCA on data far from the origin: the covariance route against rational arithmetic.

The one-pass covariance ``XᵀX - n·x̄x̄ᵀ`` cancels the digits of the spread when the mean
dwarfs it; skgpu forms it again from shifted data there. The reference is the covariance
of the very same floating-point numbers, computed exactly with fractions.
"""

import numpy as np
import pytest
import scipy.sparse as sp

from skgpu_testing import exact_covariance

import skgpu
from skgpu.decomposition import PCA

from conftest import DEVICES

OFFSETS = [0.0, 1e3, 1e6, 1e9, 1e12]


def _data(seed, offset, dtype, n=120, p=4):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, p) @ rng.randn(p, p) + offset * rng.uniform(0.5, 2.0, p)
    return X.astype(dtype)


def _compare(pca, X, rtol):
    C, mean = exact_covariance(X)
    w, V = np.linalg.eigh(C)
    w, V = w[::-1], V[:, ::-1].T
    scale = w[0]
    np.testing.assert_allclose(pca.explained_variance_, w, rtol=0, atol=rtol * scale)
    signs = np.sign(np.sum(pca.components_ * V, axis=1))
    gaps = np.abs(np.diff(w))
    # a component is determined to rounding / its eigenvalue gap
    tol = rtol * scale / np.minimum(np.r_[gaps, np.inf], np.r_[np.inf, gaps])
    err = np.max(np.abs(pca.components_ * signs[:, None] - V), axis=1)
    assert np.all(err <= tol), (err, tol)
    np.testing.assert_allclose(pca.mean_, mean, rtol=rtol, atol=0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("offset", OFFSETS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_covariance_route_is_exact_at_any_offset(device, offset, seed):
    X = _data(seed, offset, np.float64)
    with skgpu.config_context(device=device):
        pca = PCA(svd_solver="covariance_eigh").fit(X)
    _compare(pca, X, rtol=1e-13)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("offset", [0.0, 1e3, 1e5])
def test_covariance_route_float32(device, offset):
    # float32 holds a spread of ~1 beside an offset of 1e5 to ~4e-3: the reference is the
    # covariance of the stored float32 values, and the fit keeps float32's rounding
    X = _data(3, offset, np.float32)
    with skgpu.config_context(device=device):
        pca = PCA(svd_solver="covariance_eigh").fit(X)
    _compare(pca, X.astype(np.float64), rtol=2e-5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("offset", [1e6, 1e9])
def test_sparse_and_tall_defaults_are_exact_too(device, offset):
    X = _data(4, offset, np.float64, n=200, p=5)
    X[:, 2] = 7e8  # a constant column beside the offset ones: exactly zero variance
    with skgpu.config_context(device=device):
        dense = PCA().fit(X)  # 'auto' takes the covariance route for tall data
        sparse = PCA(svd_solver="covariance_eigh").fit(sp.csr_matrix(X))
    for pca in (dense, sparse):
        _compare(pca, X, rtol=1e-13)
    assert dense.mean_[2] == 7e8


def test_the_refit_is_logged_only_when_needed(caplog):
    import logging

    with caplog.at_level(logging.INFO, "skgpu"):
        PCA(svd_solver="covariance_eigh").fit(_data(5, 0.0, np.float64))
        assert "shifted by the mean" not in caplog.text
        PCA(svd_solver="covariance_eigh").fit(_data(5, 1e6, np.float64))
        assert "shifted by the mean" in caplog.text


@pytest.mark.gpu
@pytest.mark.parametrize("offset", [1e6, 1e9])
def test_streamed_gpu_pass_needs_no_second_pass(monkeypatch, caplog, offset):
    """A NumPy X streamed to the GPU is shifted by its first chunk's mean on the way: the
    offset is handled in that one pass, exact, with nothing formed again."""
    import logging

    from skgpu.backends.gpu import staging

    X = _data(6, offset, np.float64, n=300)
    monkeypatch.setattr(staging, "STREAM_MIN_BYTES", 0)
    monkeypatch.setattr(staging, "STREAM_CHUNK_BYTES", 37 * X.shape[1] * X.itemsize)
    with skgpu.config_context(device="gpu"), caplog.at_level(logging.INFO, "skgpu"):
        pca = PCA(svd_solver="covariance_eigh").fit(X)
    assert "shifted by the mean" not in caplog.text
    _compare(pca, X, rtol=1e-13)


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("offset", [1e6, 1e9])
def test_shifted_blocks_on_the_cpu(monkeypatch, sparse, dtype, offset):
    """The shifted data formed block after block (here 7 rows each, the last block
    partial) on the CPU: exact as one block."""
    from skgpu.backends import _common

    if dtype == np.float32 and offset > 1e6:
        pytest.skip("float32 keeps no spread beside an offset of 1e9")
    X = _data(7, offset, dtype, n=103, p=5)
    monkeypatch.setattr(_common, "_SHIFT_BLOCK_BYTES", 7 * 5 * X.itemsize)
    with skgpu.config_context(device="cpu"):
        pca = PCA(svd_solver="covariance_eigh").fit(sp.csr_matrix(X) if sparse else X)
    _compare(pca, X.astype(np.float64), rtol=1e-13 if dtype == np.float64 else 2e-5)
