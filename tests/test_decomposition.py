"""PCA and TruncatedSVD against scikit-learn, on each backend."""

import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import DEVICES
from sklearn import decomposition as skd
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.linear_model import LogisticRegression
from sklearn.utils.estimator_checks import parametrize_with_checks
from skgpu_testing import assert_allclose_rel, tol

import skgpu
from skgpu.decomposition import PCA, TruncatedSVD


def make_data(rng, n, p, dtype, rank=None):
    """Well-separated spectrum so that components are determined to rounding."""
    r = min(n, p) if rank is None else rank
    U, _ = np.linalg.qr(rng.standard_normal((n, r)))
    V, _ = np.linalg.qr(rng.standard_normal((p, r)))
    s = np.geomspace(100, 1, r) * np.sqrt(n)
    X = (U * s) @ V.T + rng.uniform(-5, 5, size=p)
    return X.astype(dtype)


def _compare(ours, theirs, dtype, device, X):
    t = tol(dtype, backend=device)
    assert ours.n_components_ == theirs.n_components_
    for name in ("components_", "explained_variance_", "explained_variance_ratio_",
                 "singular_values_", "mean_"):
        a, b = getattr(ours, name), getattr(theirs, name)
        assert isinstance(a, np.ndarray) and a.dtype == b.dtype, name
        assert_allclose_rel(a, b, t)
    assert ours.noise_variance_ == pytest.approx(theirs.noise_variance_, rel=t, abs=t)
    assert_allclose_rel(ours.transform(X), theirs.transform(X), t)
    Z = theirs.transform(X)
    assert_allclose_rel(ours.inverse_transform(Z), theirs.inverse_transform(Z), t)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("solver", ["covariance_eigh", "full", "randomized", "arpack"])
@pytest.mark.parametrize("whiten", [False, True])
@pytest.mark.parametrize("shape", [(400, 30), (40, 120)])
def test_pca_matches_sklearn(rng, device, dtype, solver, whiten, shape, seed):
    X = make_data(rng, *shape, dtype)
    params = dict(n_components=5, svd_solver=solver, whiten=whiten, random_state=seed)
    with skgpu.config_context(device=device):
        ours = PCA(**params).fit(X)
        theirs = skd.PCA(**params).fit(X)
        assert ours.backend_ == ("cpu" if solver == "arpack" else device)
        _compare(ours, theirs, dtype, device, X)
        assert_allclose_rel(PCA(**params).fit_transform(X), theirs.fit_transform(X),
                            tol(dtype, backend=device))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n_components", [None, 3, 0.9, "mle"])
@pytest.mark.parametrize("solver", ["auto", "full", "covariance_eigh"])
def test_pca_n_components_forms(rng, device, n_components, solver):
    X = make_data(rng, 300, 12, np.float64)
    with skgpu.config_context(device=device):
        ours = PCA(n_components=n_components, svd_solver=solver).fit(X)
    theirs = skd.PCA(n_components=n_components, svd_solver=solver).fit(X)
    assert ours.solver_ == theirs._fit_svd_solver
    _compare(ours, theirs, np.float64, device, X)
    assert ours.score(X) == pytest.approx(theirs.score(X), rel=1e-8)
    assert_allclose_rel(ours.get_covariance(), theirs.get_covariance(), 1e-8)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("solver", ["covariance_eigh", "full", "randomized"])
def test_pca_rank_deficient(rng, device, solver):
    X = make_data(rng, 200, 20, np.float64, rank=4)
    with skgpu.config_context(device=device):
        ours = PCA(n_components=3, svd_solver=solver, random_state=0).fit(X)
    theirs = skd.PCA(n_components=3, svd_solver=solver, random_state=0).fit(X)
    assert_allclose_rel(ours.explained_variance_, theirs.explained_variance_, 1e-8)
    assert_allclose_rel(ours.components_, theirs.components_, 1e-7)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("solver", ["arpack", "covariance_eigh"])
@pytest.mark.parametrize("fmt", ["csr", "csc"])
def test_pca_sparse(rng, device, solver, fmt):
    X = sp.random(300, 25, density=0.2, format=fmt, random_state=int(rng.integers(1 << 30)))
    with skgpu.config_context(device=device):
        ours = PCA(n_components=4, svd_solver=solver, random_state=0).fit(X)
    theirs = skd.PCA(n_components=4, svd_solver=solver, random_state=0).fit(X)
    _compare(ours, theirs, np.float64, device, X)


def test_pca_sparse_unsupported_solver():
    X = sp.random(30, 5, density=0.5, format="csr", random_state=0)
    with pytest.raises(TypeError, match='PCA only support sparse inputs with the "arpack"'):
        PCA(svd_solver="randomized").fit(X)


@pytest.mark.parametrize("params, match", [
    (dict(n_components=10, svd_solver="full"), "must be between 0 and"),
    (dict(n_components=5, svd_solver="arpack"), "strictly less than"),
    (dict(n_components="mle", svd_solver="randomized"), "cannot be a string"),
    (dict(n_components=-1), "n_components"),
])
def test_pca_bad_n_components(params, match):
    X = np.random.default_rng(0).standard_normal((20, 5))
    with pytest.raises(ValueError, match=match):
        PCA(**params).fit(X)


@pytest.mark.parametrize("device", DEVICES)
def test_bad_input(device):
    X = np.random.default_rng(0).standard_normal((20, 5))
    with skgpu.config_context(device=device):
        X_nan = X.copy()
        X_nan[3, 2] = np.nan
        with pytest.raises(ValueError, match="Input X contains NaN"):
            PCA(2).fit(X_nan)
        with pytest.raises(ValueError, match=r"Found array with 0 sample\(s\) \(shape=\(0, 5\)\)"
                           " while a minimum of 1 is required by PCA"):
            PCA(1).fit(X[:0])
        with pytest.raises(ValueError, match="Expected 2D array"):
            PCA(1).fit(X[:, 0])
        pca = PCA(2).fit(X)
        with pytest.raises(ValueError, match="X has 4 features, but PCA is expecting 5"):
            pca.transform(X[:, :4])


@pytest.mark.gpu
def test_cupy_and_torch_inputs_stay_on_device(rng):
    import cupy as cp
    import torch

    X = make_data(rng, 500, 16, np.float32)
    theirs = skd.PCA(4).fit(X)
    ours = PCA(4).fit(cp.asarray(X))
    assert ours.backend_ == "gpu" and isinstance(ours.components_, np.ndarray)
    Z = ours.transform(cp.asarray(X))
    assert isinstance(Z, cp.ndarray)
    assert_allclose_rel(Z, theirs.transform(X), 1e-4)
    Xt = torch.as_tensor(X, device="cuda")
    Zt = ours.transform(Xt)
    assert isinstance(Zt, torch.Tensor) and Zt.device.type == "cuda"
    assert_allclose_rel(Zt.cpu().numpy(), theirs.transform(X), 1e-4)
    Zc = ours.fit_transform(torch.as_tensor(X))
    assert isinstance(Zc, torch.Tensor) and Zc.device.type == "cpu"
    with pytest.raises(ValueError, match="Input X contains NaN"):
        bad = cp.asarray(X)
        bad[0, 0] = cp.nan
        PCA(2).fit(bad)
    with pytest.raises(ValueError, match="Input X contains infinity"):
        bad = cp.asarray(X)
        bad[1, 1] = -cp.inf
        PCA(2).fit(bad)


@pytest.mark.gpu
def test_gpu_fitted_estimator_unpickles_and_predicts_on_cpu(rng):
    X = make_data(rng, 300, 10, np.float64)
    ours = PCA(3).fit(X)
    Z = ours.transform(X)
    clone = pickle.loads(pickle.dumps(ours))
    with skgpu.config_context(device="cpu"):
        np.testing.assert_allclose(clone.transform(X), Z, rtol=1e-10, atol=1e-10)


def test_pandas_feature_names_and_set_output(rng):
    pd = pytest.importorskip("pandas")
    X = pd.DataFrame(make_data(rng, 100, 4, np.float64), columns=list("abcd"))
    pca = PCA(2).set_output(transform="pandas").fit(X)
    assert list(pca.feature_names_in_) == list("abcd")
    out = pca.transform(X)
    assert list(out.columns) == ["pca0", "pca1"]


@pytest.mark.parametrize("device", DEVICES)
def test_pipeline_and_grid_search(device, rng):
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    pipe = make_pipeline(PCA(), LogisticRegression(max_iter=200))
    with skgpu.config_context(device=device):
        search = GridSearchCV(pipe, {"pca__n_components": [5, 10]}, cv=2).fit(X[:400], y[:400])
    assert search.best_params_["pca__n_components"] in (5, 10)
    assert search.best_score_ > 0.7


# TruncatedSVD ---------------------------------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("algorithm", ["randomized", "arpack"])
@pytest.mark.parametrize("fmt", ["dense", "csr", "csc", "coo"])
def test_truncated_svd_matches_sklearn(rng, device, dtype, algorithm, fmt, seed):
    if fmt == "dense":
        X = make_data(rng, 200, 60, dtype)
    else:
        X = sp.random(300, 80, density=0.1, format=fmt, dtype=dtype,
                      random_state=int(rng.integers(1 << 30)))
        X = X + sp.random(300, 80, density=0.02, format=fmt, dtype=dtype,
                          random_state=1, data_rvs=lambda k: 10 * np.ones(k))
    params = dict(n_components=4, algorithm=algorithm, random_state=seed, n_iter=7)
    with skgpu.config_context(device=device):
        ours = TruncatedSVD(**params)
        Z = ours.fit_transform(X)
        theirs = skd.TruncatedSVD(**params)
        Zs = theirs.fit_transform(X)
        t = tol(dtype, backend=device)
        assert ours.backend_ == ("cpu" if algorithm == "arpack" else device)
        for name in ("components_", "explained_variance_", "explained_variance_ratio_",
                     "singular_values_"):
            assert_allclose_rel(getattr(ours, name), getattr(theirs, name), 10 * t)
            assert getattr(ours, name).dtype == getattr(theirs, name).dtype
        assert_allclose_rel(Z, Zs, 10 * t)
        assert_allclose_rel(ours.transform(X), theirs.transform(X), 10 * t)
        assert_allclose_rel(ours.inverse_transform(Zs), theirs.inverse_transform(Zs), 10 * t)


def test_truncated_svd_bad_input():
    X = np.random.default_rng(0).standard_normal((20, 5))
    with pytest.raises(ValueError, match=r"n_components\(6\) must be <= n_features\(5\)"):
        TruncatedSVD(6).fit(X)
    with pytest.raises(ValueError, match="minimum of 2 is required"):
        TruncatedSVD(1).fit(X[:, :1])


@pytest.mark.gpu
def test_truncated_svd_cupy_sparse(rng):
    import cupyx.scipy.sparse as csp

    X = sp.random(500, 200, density=0.05, format="csr", random_state=0, dtype=np.float32)
    theirs = skd.TruncatedSVD(8, random_state=0).fit(X)
    ours = TruncatedSVD(8, random_state=0)
    Z = ours.fit_transform(csp.csr_matrix(X))
    import cupy as cp

    assert isinstance(Z, cp.ndarray)
    assert_allclose_rel(ours.singular_values_, theirs.singular_values_, 1e-4)


def _expected_failed_checks(estimator):
    return {}


@pytest.mark.parametrize("device", DEVICES)
@parametrize_with_checks([PCA(), PCA(svd_solver="covariance_eigh"),
                          PCA(svd_solver="randomized", n_components=1, random_state=0),
                          TruncatedSVD(n_components=1, random_state=0)],
                         expected_failed_checks=_expected_failed_checks)
def test_sklearn_compatible(estimator, check, device):
    with skgpu.config_context(device=device):
        check(estimator)
