"""TruncatedSVD on data far from the origin: the explained variances are those of the
fitted components' projections, computed exactly (float64, after exact centring); and a
fit over dask chunks finds the singular values of X, whichever route it takes."""

import numpy as np
import pytest

import skgpu
from skgpu.decomposition import TruncatedSVD

from conftest import BACKENDS


def _data(seed, dtype, offset, n=3000, p=12):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) * np.geomspace(5, 0.5, p) + offset
    X[:, 3] = 7.0  # a constant column and a duplicated one
    X[:, 5] = X[:, 4]
    return X.astype(dtype)


def _exact_projection_variances(X, components):
    X = X.astype(np.float64)
    return np.var((X - X.mean(axis=0)) @ components.astype(np.float64).T, axis=0)


@pytest.mark.parametrize("device", BACKENDS)
@pytest.mark.parametrize("algorithm", ["randomized", "arpack"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("offset", [0.0, 1e3, 1e6])
def test_explained_variance_is_exact_far_from_the_origin(seed, device, algorithm, dtype,
                                                         offset):
    X = _data(seed, dtype, offset)
    with skgpu.config_context(device=device):
        svd = TruncatedSVD(4, algorithm=algorithm, random_state=seed).fit(X)
    exact = _exact_projection_variances(X, svd.components_)
    rtol = 1e-5 if dtype == np.float32 else 1e-11
    np.testing.assert_allclose(svd.explained_variance_, exact, rtol=rtol)
    assert svd.explained_variance_.dtype == dtype
    # the ratio is to the exact total variance too (its sum below one)
    total = np.var(X.astype(np.float64), axis=0).sum()
    np.testing.assert_allclose(svd.explained_variance_ratio_, exact / total, rtol=rtol)


@pytest.mark.parametrize("route", ["factor", "passes"])
@pytest.mark.parametrize("offset", [1e3, 1e6])
def test_dask_fit_finds_the_singular_values_far_from_the_origin(client, seed, route,
                                                                offset, monkeypatch):
    """float32 chunks: the passes' products are float64 (in float32 the power
    iterations' orthonormalisation lost every direction below 3e-4 σ₁: here all but the
    offset's)."""
    da = pytest.importorskip("dask.array")
    from skgpu.dask import linalg

    if route == "passes":
        monkeypatch.setattr(linalg, "FACTOR_MAX_FEATURES", 0)
    X = _data(seed, np.float32, offset)
    exact = np.linalg.svd(X.astype(np.float64), compute_uv=False)[:4]
    svd = TruncatedSVD(4, n_iter=7, random_state=seed).fit(
        da.from_array(X, chunks=(700, -1)))
    np.testing.assert_allclose(svd.singular_values_, exact, rtol=1e-5)
    np.testing.assert_allclose(svd.explained_variance_,
                               _exact_projection_variances(X, svd.components_), rtol=1e-5)


@pytest.mark.parametrize("device", BACKENDS)
@pytest.mark.parametrize("sparse", [False, True])
def test_overflowing_variance_is_infinite_as_in_scikit_learn(seed, device, sparse):
    """Finite X whose variances exceed float64's range: inf (numpy's var), never the
    inf - inf of a one-pass formula; the ratio is inf / inf as scikit-learn's is."""
    import scipy.sparse as sp
    from sklearn.decomposition import TruncatedSVD as SkTruncatedSVD

    X = np.random.default_rng(seed).uniform(0.5, 1.0, (60, 5)) * 1e300
    X = sp.csr_matrix(X) if sparse else X
    with np.errstate(over="ignore", invalid="ignore"):
        with skgpu.config_context(device=device):
            svd = TruncatedSVD(2, random_state=seed).fit(X)
        reference = SkTruncatedSVD(2, random_state=seed).fit(X)
    assert np.isposinf(reference.explained_variance_).all()
    np.testing.assert_array_equal(svd.explained_variance_, reference.explained_variance_)
    assert np.isnan(svd.explained_variance_ratio_).all()
    np.testing.assert_allclose(svd.singular_values_, reference.singular_values_, rtol=1e-8)
