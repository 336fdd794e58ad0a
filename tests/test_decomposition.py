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


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("solver", ["covariance_eigh", "full", "randomized", "arpack"])
@pytest.mark.parametrize("bad, match", [(np.nan, "Input X contains NaN"),
                                        (np.inf, "Input X contains infinity"),
                                        (-np.inf, "Input X contains infinity")])
def test_non_finite_x_gets_sklearns_error(device, solver, bad, match, rng):
    """The finiteness of X is checked late (on the mean, or on a transform's output), but
    every solver and transform still raises scikit-learn's error, and nothing is fitted."""
    X = make_data(rng, 60, 5, np.float64)
    Xb = X.copy()
    Xb[rng.integers(60), rng.integers(5)] = bad
    with skgpu.config_context(device=device):
        pca = PCA(2, svd_solver=solver, random_state=0)
        with pytest.raises(ValueError, match=match):
            pca.fit(Xb)
        assert not hasattr(pca, "components_")
        pca.fit(X)
        with pytest.raises(ValueError, match=match):
            pca.transform(Xb)
        tsvd = TruncatedSVD(2, random_state=0).fit(X)
        with pytest.raises(ValueError, match=match):
            tsvd.transform(Xb)
        with pytest.raises(ValueError, match=match):
            tsvd.transform(sp.csr_matrix(Xb))
        # a finite X whose projection may overflow is not an error (as in scikit-learn)
        with np.errstate(over="ignore", invalid="ignore"):
            pca.transform(np.full((2, 5), np.finfo(np.float64).max))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("pinned", [True, False])
def test_numpy_x_copied_through_pinned_buffers_and_kept(rng, monkeypatch, dtype, pinned):
    """A large NumPy X goes to the device through pinned buffers in chunks (``asarray``,
    also converting the dtype while staged) and equals CuPy's own copy; ``centred_gram``
    can keep the streamed chunks as X's device copy, and PCA.fit_transform projects that
    copy: the same numbers as fit then transform, and NaN still raises."""
    import cupy as cp
    import cupyx

    from skgpu.backends import get_backend
    from skgpu.backends.gpu import staging

    if not pinned:
        def no_pinned(*args, **kwargs):
            raise MemoryError("no pinned memory in this test")

        monkeypatch.setattr(cupyx, "empty_pinned", no_pinned)
    n, p = 301, 12
    X = (3.0 * rng.standard_normal((n, p)) + 100.0).astype(dtype)
    monkeypatch.setattr(staging, "STREAM_MIN_BYTES", 0)
    monkeypatch.setattr(staging, "STREAM_CHUNK_BYTES", 37 * p * X.itemsize)
    ops = get_backend("gpu")
    Xd = ops.asarray(X)
    assert isinstance(Xd, cp.ndarray) and Xd.dtype == dtype
    np.testing.assert_array_equal(Xd.get(), X)
    X64 = X.astype(np.float64)
    np.testing.assert_array_equal(ops.asarray(X64, dtype=np.float32).get(),
                                  X64.astype(np.float32))
    np.testing.assert_array_equal(ops.asarray(np.asfortranarray(X)).get(), X)
    mean, G, kept = ops.centred_gram(X, return_X=True)
    np.testing.assert_array_equal(kept.get(), X)
    mean2, G2 = ops.centred_gram(X)
    np.testing.assert_array_equal(mean.get(), mean2.get())
    np.testing.assert_array_equal(G.get(), G2.get())
    pca = PCA(4, svd_solver="covariance_eigh")
    with skgpu.config_context(device="gpu"):
        Z = pca.fit_transform(X)
        assert isinstance(Z, np.ndarray) and Z.dtype == dtype
        assert_allclose_rel(Z, pca.transform(X), tol(dtype, backend="gpu"))
        bad = X.copy()
        bad[200, 3] = np.nan
        with pytest.raises(ValueError, match="Input X contains NaN"):
            PCA(4, svd_solver="covariance_eigh").fit_transform(bad)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rows_per_chunk", [1, 7, 64, 1000])
@pytest.mark.parametrize("pinned", [True, False])
def test_numpy_x_streamed_to_the_gpu(rng, monkeypatch, dtype, rows_per_chunk, pinned):
    """A host X streamed in chunks (uneven last chunk, a large mean; through pinned
    buffers or, without them, straight from X) gives the in-memory result; non-finite
    values anywhere still raise scikit-learn's error."""
    import cupyx

    from skgpu.backends import get_backend
    from skgpu.backends.gpu import staging

    if not pinned:
        def no_pinned(*args, **kwargs):
            raise MemoryError("no pinned memory in this test")

        monkeypatch.setattr(cupyx, "empty_pinned", no_pinned)

    n, p = 301, 12
    X = (make_data(rng, n, p, np.float64) + 1e3 * rng.standard_normal(p)).astype(dtype)
    monkeypatch.setattr(staging, "STREAM_MIN_BYTES", 0)
    monkeypatch.setattr(staging, "STREAM_CHUNK_BYTES", rows_per_chunk * p * X.itemsize)
    mean, G = get_backend("gpu").centred_gram(X)
    assert mean.dtype == dtype and G.dtype == dtype
    X64 = X.astype(np.float64)
    Xc = X64 - X64.mean(axis=0)
    t = tol(dtype, backend="gpu")
    assert_allclose_rel(mean, X64.mean(axis=0), t)
    assert_allclose_rel(G, Xc.T @ Xc, 10 * t)
    # against scikit-learn on the same values in float64: its float32 covariance loses
    # digits to the large mean, the shifted chunks do not
    ours = PCA(4, svd_solver="covariance_eigh").fit(X)
    theirs = skd.PCA(4, svd_solver="covariance_eigh").fit(X64)
    assert ours.backend_ == "gpu" and ours.components_.dtype == dtype
    for name in ("components_", "explained_variance_", "singular_values_", "mean_"):
        assert_allclose_rel(getattr(ours, name), getattr(theirs, name), 10 * t)
    for where in (0, n - 1):
        bad = X.copy()
        bad[where, 3] = np.nan
        with pytest.raises(ValueError, match="Input X contains NaN"):
            PCA(4, svd_solver="covariance_eigh").fit(bad)


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
@pytest.mark.parametrize("Estimator", [PCA, TruncatedSVD])
def test_device_input_checked_against_the_fit(rng, Estimator):
    """A CuPy X at transform gets scikit-learn's feature-count error, and its warning
    when the fit had feature names (a DataFrame) and X has none."""
    import cupy as cp

    pd = pytest.importorskip("pandas")
    X = make_data(rng, 200, 6, np.float64)
    est = Estimator(n_components=2).fit(cp.asarray(X))
    with pytest.raises(ValueError, match="X has 5 features, but "
                       f"{Estimator.__name__} is expecting 6 features as input"):
        est.transform(cp.asarray(X[:, :5]))
    est = Estimator(n_components=2).fit(pd.DataFrame(X, columns=list("abcdef")))
    with pytest.warns(UserWarning, match="X does not have valid feature names"):
        Z = est.transform(cp.asarray(X))
    np.testing.assert_allclose(cp.asnumpy(Z), est.transform(X), rtol=1e-10, atol=1e-10)


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
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # the classifier
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


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fmt", ["dense", "csr"])
def test_randomized_device_draws(rng, monkeypatch, dtype, fmt, seed):
    """A test matrix drawn on the device (any size, here): reproducible for a given
    random_state, and equal to scikit-learn's result where both have converged (a clear
    gap after the 4th singular value)."""
    from skgpu.backends.gpu import backend

    monkeypatch.setattr(backend, "DEVICE_DRAW_MIN", 0)
    n, p = 400, 90
    U = np.linalg.qr(rng.standard_normal((n, 4)))[0]
    V = np.linalg.qr(rng.standard_normal((p, 4)))[0]
    X = (U * [50.0, 30.0, 20.0, 10.0]) @ V.T + 0.01 * rng.standard_normal((n, p))
    X = X.astype(dtype)
    X = X if fmt == "dense" else sp.csr_matrix(X)
    params = dict(n_components=4, n_iter=7, random_state=seed)
    ours = TruncatedSVD(**params).fit(X)
    again = TruncatedSVD(**params).fit(X)
    theirs = skd.TruncatedSVD(**params).fit(X)
    t = 1e-4 if dtype == np.float32 else 1e-7
    # the same draw: equal up to cuSPARSE's non-deterministic summation order
    assert_allclose_rel(ours.components_, again.components_, 1e-5 if t == 1e-4 else 1e-12)
    assert_allclose_rel(ours.singular_values_, theirs.singular_values_, t)
    assert_allclose_rel(ours.components_, theirs.components_, 10 * t)
    if fmt == "dense":
        pca = PCA(4, svd_solver="randomized", random_state=seed).fit(X)
        ref = skd.PCA(4, svd_solver="randomized", random_state=seed).fit(X)
        assert_allclose_rel(pca.components_, ref.components_, 10 * t)


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
