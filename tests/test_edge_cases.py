"""Bad input and edge cases: scikit-learn's outcome, or a documented better one.

Each test names the defect it guards. Where skgpu is deliberately stricter or more exact
than scikit-learn, the test says so and checks the better answer against an exact one.
"""

import copy
import logging
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import BACKENDS, DEVICES
from test_fallback import oom_gpu  # noqa: F401 - the injected out-of-memory GPU fixture
from numpy.linalg import LinAlgError
from scipy.linalg import LinAlgWarning
from sklearn import decomposition as skd
from sklearn import linear_model as skl
from sklearn.gaussian_process import GaussianProcessRegressor as SkGPR
from sklearn.gaussian_process import kernels as skk
from skgpu_testing import assert_allclose_rel, to_host

import skgpu
from skgpu.decomposition import PCA, TruncatedSVD
from skgpu.gaussian_process import GaussianProcessRegressor
from skgpu.gaussian_process._kernel_eval import evaluate, unsupported_reason
from skgpu.gaussian_process.kernels import Tapered, Wendland
from skgpu.linear_model import Ridge, RidgeCV


# --------------------------------------------------------------------------------------
# 1. Kernels: every scikit-learn kernel on the backend or by scikit-learn, never a
#    formula picked by an `else`
# --------------------------------------------------------------------------------------
def _kernels():
    """(kernel, evaluated on the backend?) for every scikit-learn kernel and the
    parameter values that change its formula."""
    out = []
    for nu in (0.5, 1.5, 2.5, np.inf, 0.7, 1.0, 1.2, 2.0, 3.0, 5.0):
        on_backend = nu in (0.5, 1.5, 2.5, np.inf)
        out.append((skk.Matern(1.3, nu=nu), on_backend))
        out.append((skk.Matern([0.7, 1.9, 1.1], nu=nu), on_backend))
        out.append((skk.Matern(1.0, nu=nu) + skk.WhiteKernel(0.1), on_backend))
    out += [
        (skk.RBF(1.3), True),
        (skk.RBF([0.5, 2.0, 1.0]), True),
        (skk.RBF(0.9, length_scale_bounds="fixed"), True),
        (skk.RationalQuadratic(1.2, 0.7), True),
        (skk.RationalQuadratic(1.2, 0.7, alpha_bounds="fixed"), True),
        (skk.ExpSineSquared(1.1, 2.3), True),
        (skk.DotProduct(0.8), True),
        (skk.WhiteKernel(0.3), True),
        (skk.ConstantKernel(2.0), True),
        (skk.ConstantKernel(2.0) * skk.RBF([1.0, 0.5, 2.0]) + skk.WhiteKernel(0.1), True),
        (skk.RBF(1.0) ** 2, True),
        (skk.Exponentiation(skk.Matern(1.0, nu=0.7), 2.0), False),
        ((skk.RBF(1.0) + skk.DotProduct(0.5)) * skk.ConstantKernel(0.7), True),
        (skk.Matern(1.0, nu=1.2) * skk.RationalQuadratic(0.8, 1.5), False),
        (skk.PairwiseKernel(gamma=0.5, metric="laplacian"), False),
        (skk.PairwiseKernel(gamma=0.3, metric="rbf"), False),
        (skk.ConstantKernel(1.5) * skk.PairwiseKernel(metric="polynomial")
         + skk.WhiteKernel(0.2), False),
    ]
    return out


@pytest.mark.parametrize("kernel,on_backend", _kernels(), ids=lambda k: str(k))
def test_kernel_values_and_gradients_match_sklearn(ops, kernel, on_backend, rng):
    """K(X, X), K(X, Y) and every dK/dθ equal scikit-learn's own evaluation; the kernels
    the backend has no closed form for are declared (unsupported_reason) and computed by
    scikit-learn, inside composites too."""
    assert (unsupported_reason(kernel) is None) == on_backend
    X = rng.uniform(-1, 1, (23, 3))
    Y = rng.uniform(-1, 1, (7, 3))
    K_ref, G_ref = kernel(X, eval_gradient=True)
    term, grads = evaluate(ops, kernel, ops.asarray(X), None, eval_gradient=True)
    n = X.shape[0]
    assert_allclose_rel(term.full(ops.xp, (n, n)), K_ref, 1e-12)
    assert len(grads) == G_ref.shape[2]
    for j, thunk in enumerate(grads):
        assert_allclose_rel(thunk().full(ops.xp, (n, n)), G_ref[:, :, j], 1e-10)
    cross = evaluate(ops, kernel, ops.asarray(X), ops.asarray(Y))[0]
    assert_allclose_rel(cross.full(ops.xp, (n, Y.shape[0])), kernel(X, Y), 1e-12)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("nu", [0.7, 1.0, 1.2, 2.0, 3.0, 5.0])
def test_gpr_general_matern_nu_in_a_composite(device, nu, rng, caplog):
    """Matern(nu=1.2) + WhiteKernel was computed as nu=2.5 (LML -1175.9
    against -6.97); now scikit-learn evaluates that part (logged), the rest stays put."""
    X = rng.uniform(0, 5, (40, 2))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(40)
    kernel = skk.Matern(1.0, nu=nu) + skk.WhiteKernel(0.1)
    theirs = SkGPR(kernel, optimizer=None).fit(X, y)
    with skgpu.config_context(device=device), caplog.at_level(logging.INFO, "skgpu"):
        ours = GaussianProcessRegressor(kernel, optimizer=None).fit(X, y)
    assert f"Matern(nu={nu}) is evaluated by scikit-learn" in caplog.text
    assert_allclose_rel(ours.log_marginal_likelihood_value_,
                        theirs.log_marginal_likelihood_value_, 1e-10)
    Xt = rng.uniform(0, 5, (9, 2))
    for a, b in zip(ours.predict(Xt, return_std=True), theirs.predict(Xt, return_std=True)):
        assert_allclose_rel(a, b, 1e-8)
    theta = theirs.kernel_.theta + 0.3
    with skgpu.config_context(device=device):
        value, grad = ours.log_marginal_likelihood(theta, eval_gradient=True)
    ref_value, ref_grad = theirs.log_marginal_likelihood(theta, eval_gradient=True)
    assert_allclose_rel(value, ref_value, 1e-10)
    assert_allclose_rel(grad, ref_grad, 1e-8)


# --------------------------------------------------------------------------------------
# 2. inverse_transform validates its input; 6. output dtypes follow NumPy's promotion
# --------------------------------------------------------------------------------------
def _fitted_decompositions(X):
    return [PCA(3).fit(X), PCA(3, whiten=True).fit(X), TruncatedSVD(3, random_state=0).fit(X)]


def _sklearn_twin(est, X):
    cls = {PCA: skd.PCA, TruncatedSVD: skd.TruncatedSVD}[type(est)]
    return cls(**est.get_params()).fit(X)


@pytest.mark.parametrize("device", DEVICES)
def test_inverse_transform_validates_like_sklearn(device, rng):
    X = rng.standard_normal((40, 6))
    with skgpu.config_context(device=device):
        for est in _fitted_decompositions(X):
            ref = _sklearn_twin(est, X)
            # integers are data (it returned zeros): equal to the float computation
            assert_allclose_rel(est.inverse_transform([[1, 2, -1]]),
                                ref.inverse_transform(np.array([[1.0, 2.0, -1.0]])), 1e-10)
            for bad, match in [([[1.0, np.nan, 0.0]], "NaN"), ([[1.0, np.inf, 0.0]], "infinity"),
                               ([1.0, 2.0, -1.0], "Expected 2D array"),
                               (np.zeros((0, 3)), "0 sample"),
                               ([["a", "b", "c"]], "string|bytes"),
                               (np.zeros((2, 2)), "expects 3")]:
                with pytest.raises(ValueError, match=match):
                    est.inverse_transform(bad)
            with pytest.raises(TypeError, match="Sparse data"):
                est.inverse_transform(sp.csr_matrix(np.ones((2, 3))))
            out = est.inverse_transform(np.ones((2, 3), dtype=np.float32))
            assert out.dtype == ref.inverse_transform(np.ones((2, 3), np.float32)).dtype


@pytest.mark.gpu
def test_inverse_transform_validates_device_input(rng):
    import cupy as cp

    X = rng.standard_normal((40, 6))
    with skgpu.config_context(device="gpu"):
        for est in _fitted_decompositions(X):
            ok = est.inverse_transform(cp.asarray([[1, 2, -1]]))
            assert isinstance(ok, cp.ndarray) and ok.dtype == np.float64
            assert_allclose_rel(ok, est.inverse_transform(np.array([[1.0, 2.0, -1.0]])), 1e-12)
            for bad, match in [(cp.asarray([[1.0, np.nan, 0.0]]), "NaN"),
                               (cp.asarray([1.0, 2.0, -1.0]), "Expected 2D array"),
                               (cp.zeros((0, 3)), "0 sample"),
                               (cp.zeros((2, 2)), "expects 3")]:
                with pytest.raises(ValueError, match=match):
                    est.inverse_transform(bad)


@pytest.mark.parametrize("device", DEVICES)
def test_mixed_dtype_output_follows_numpy_promotion(device, rng):
    """float32 X on a float64 fit gave float32 (scikit-learn: float64)."""
    X = rng.standard_normal((60, 5))
    y = X @ rng.standard_normal(5)
    X32 = X.astype(np.float32)
    pairs = [(PCA(3), skd.PCA(3), "transform"),
             (TruncatedSVD(3, random_state=0), skd.TruncatedSVD(3, random_state=0),
              "transform"),
             (Ridge(), skl.Ridge(), "predict"), (RidgeCV(), skl.RidgeCV(), "predict")]
    with skgpu.config_context(device=device):
        for ours, theirs, method in pairs:
            args = (X,) if method == "transform" else (X, y)
            ours.fit(*args)
            theirs.fit(*args)
            a, b = getattr(ours, method)(X32), getattr(theirs, method)(X32)
            assert a.dtype == b.dtype == np.float64
            assert_allclose_rel(a, b, 1e-6)


@pytest.mark.parametrize("solver", ["covariance_eigh", "full", "randomized", "arpack"])
@pytest.mark.parametrize("n_components", [2, 4])
def test_pca_noise_variance_type_as_sklearn(solver, n_components, rng):
    X = rng.standard_normal((50, 4)).astype(np.float32)
    if solver == "arpack" and n_components == 4:
        n_components = 3
    params = dict(n_components=n_components, svd_solver=solver, random_state=0)
    ours, theirs = PCA(**params).fit(X), skd.PCA(**params).fit(X)
    assert type(ours.noise_variance_) is type(theirs.noise_variance_)


# --------------------------------------------------------------------------------------
# 3. Ridge / RidgeCV: errors, not NaN models; 7. alphas=[]
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("cls", [Ridge, RidgeCV])
def test_ridge_bad_input_raises(device, cls, rng):
    X = rng.standard_normal((30, 4))
    y = rng.standard_normal(30)
    with skgpu.config_context(device=device):
        # scikit-learn: a NaN failure inside SciPy (Ridge) or LinAlgError (RidgeCV); here
        # its own validation message, a ValueError like both
        with pytest.raises(ValueError, match="Negative values in data passed to `sample_weight`"):
            cls().fit(X, y, sample_weight=-np.ones(30))
        with pytest.raises(ValueError, match="Input y contains NaN"):
            cls().fit(X[:3], np.array([1.0, None, 2.0], dtype=object))
        # finite X whose products overflow: LinAlgError (a ValueError, as scikit-learn's)
        with pytest.raises(LinAlgError, match="Rescale X"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            cls().fit(X * 1e300, y)
        with pytest.raises(ValueError, match="bytes/strings"):
            cls().fit(X, y).predict(X.astype(str))


@pytest.mark.parametrize("device", DEVICES)
def test_ridge_nan_alpha_and_empty_alphas(device, rng):
    X = rng.standard_normal((30, 4))
    Y = rng.standard_normal((30, 2))
    with skgpu.config_context(device=device):
        with pytest.raises(ValueError, match="alpha must be finite"):
            Ridge(alpha=np.array([1.0, np.nan])).fit(X, Y)
        with pytest.raises(ValueError, match="alpha must be finite"):
            Ridge(alpha=np.array([1.0, -2.0])).fit(X, Y)
        # scikit-learn fits NaN coefficients for alphas=[]
        with pytest.raises(ValueError, match="alphas must hold at least one value"):
            RidgeCV(alphas=[]).fit(X, Y)


# --------------------------------------------------------------------------------------
# 4. TruncatedSVD's explained_variance_ratio_ at large offsets (two-pass variance)
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("offset", [1e6, 1e7, 5e7, 1e8])
@pytest.mark.parametrize("fmt", [None, "csr", "csc"])
def test_truncated_svd_variance_ratio_without_cancellation(device, offset, fmt, rng):
    X = rng.standard_normal((300, 8))
    X[:, :3] += offset
    if fmt is not None:
        X[rng.uniform(size=X.shape) < 0.4] = 0.0
        X = sp.csr_matrix(X).asformat(fmt)
    dense = X.toarray() if fmt else X
    exact_total = float(np.sum(np.var(dense, axis=0, dtype=np.float64)))  # two-pass
    theirs = skd.TruncatedSVD(3, random_state=0).fit(X)
    with skgpu.config_context(device=device):
        ours = TruncatedSVD(3, random_state=0).fit(X)
    expected = ours.explained_variance_ / exact_total
    assert_allclose_rel(ours.explained_variance_ratio_, expected, 1e-12)
    assert_allclose_rel(ours.explained_variance_ratio_, theirs.explained_variance_ratio_, 1e-7)


# --------------------------------------------------------------------------------------
# 5. A failed fit leaves the estimator exactly as it was
# --------------------------------------------------------------------------------------
def _snapshot(est):
    return {k: copy.deepcopy(v) for k, v in est.__dict__.items() if k != "_device_cache"}


def _assert_same_state(est, before):
    after = {k: v for k, v in est.__dict__.items() if k != "_device_cache"}
    assert set(after) == set(before)
    for key, value in before.items():
        other = after[key]
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(other, value, err_msg=key)
        elif isinstance(value, skk.Kernel):
            assert repr(other) == repr(value), key
        else:
            assert type(other) is type(value), key
            if np.isscalar(value) or isinstance(value, (str, tuple, type(None))):
                assert other == value or (value != value and other != other), key


def _scorer_failing_on_30_rows(estimator, X, y):
    if len(y) == 30:
        raise RuntimeError("scorer failed")
    return 1.0


def _failing_fits(rng):
    """(estimator, good fit args, failing call) with failures during validation, after
    it (the solve), in the scorer, and for each estimator."""
    X = rng.standard_normal((40, 5))
    y = X @ rng.standard_normal(5) + 0.1 * rng.standard_normal(40)
    X3 = rng.standard_normal((40, 3))
    nan_X = X3.copy()
    nan_X[0, 0] = np.nan
    dup = np.zeros((10, 3))  # identical points: K = 11ᵀ is singular with alpha=0
    cases = []
    for make in (lambda: PCA(2), lambda: TruncatedSVD(2, random_state=0)):
        cases.append((make(), (X,), lambda e: e.fit(nan_X)))
        cases.append((make(), (X,), lambda e: e.fit_transform(nan_X)))
    cases.append((PCA(4), (X,), lambda e: e.fit(X3)))  # n_components > n_features
    cases.append((TruncatedSVD(4, random_state=0), (X,), lambda e: e.fit(X3)))
    for make in (Ridge, RidgeCV):
        cases.append((make(), (X, y), lambda e: e.fit(nan_X, y)))
        cases.append((make(), (X, y), lambda e: e.fit(X3, y, sample_weight=np.ones(7))))
        cases.append((make(), (X, y), lambda e: e.fit(X3, y, sample_weight=-np.ones(40))))
        cases.append((make(), (X, y), lambda e: e.fit(X3 * 1e300, y)))
    cases.append((RidgeCV(scoring=_scorer_failing_on_30_rows), (X, y),
                  lambda e: e.fit(X3[:30], y[:30])))
    gpr = lambda: GaussianProcessRegressor(skk.RBF(1.0), optimizer=None, alpha=0.0)  # noqa: E731
    cases.append((gpr(), (X[:, :3], y), lambda e: e.fit(dup, np.ones(10))))
    cases.append((gpr(), (X[:, :3], y), lambda e: e.fit(nan_X, y)))
    return cases


@pytest.mark.parametrize("device", DEVICES)
def test_failed_fit_leaves_estimator_as_it_was(device, rng):
    with skgpu.config_context(device=device), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for est, good, fail in _failing_fits(rng):
            est.fit(*good)
            before = _snapshot(est)
            with pytest.raises(Exception):  # noqa: B017 - each kind of failure
                fail(est)
            _assert_same_state(est, before)
            # and it still works as fitted before
            est.fit(*good)


def test_failed_fit_after_gpu_out_of_memory_leaves_estimator_as_it_was(oom_gpu, rng):
    """device='gpu' and an out-of-memory error in the solve: raised, state kept."""
    X = rng.standard_normal((200, 6))
    pca = PCA(3, svd_solver="covariance_eigh")
    with skgpu.config_context(device="cpu"):
        pca.fit(X[:, :4])
    before = _snapshot(pca)
    with skgpu.config_context(device="gpu"), pytest.raises(skgpu.exceptions.GPUOutOfMemoryError):
        pca.fit(X)
    _assert_same_state(pca, before)


# --------------------------------------------------------------------------------------
# 8. Text is refused where scikit-learn validates with dtype='numeric'
# --------------------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # GPR on noise
def test_numeric_strings_refused_where_sklearn_refuses(rng):
    X = rng.standard_normal((20, 3))
    y = X.sum(axis=1)
    Xs, ys = X.astype(str), y.astype(str)
    for call in (lambda: TruncatedSVD(2).fit(Xs),
                 lambda: TruncatedSVD(2).fit(X).transform(Xs),
                 lambda: TruncatedSVD(2).fit(X).inverse_transform(Xs[:, :2]),
                 lambda: GaussianProcessRegressor().fit(Xs, y),
                 lambda: GaussianProcessRegressor().fit(X, y).predict(Xs),
                 # scikit-learn: "invalid data type for einsum" from deep inside
                 lambda: GaussianProcessRegressor().fit(X, ys),
                 lambda: Ridge().fit(X, y).predict(Xs),
                 lambda: RidgeCV().fit(X, y).predict(Xs)):
        with pytest.raises(ValueError, match="bytes/strings"):
            call()
    # where scikit-learn asks for float dtypes, NumPy parses numeric text: so do we
    np.testing.assert_allclose(PCA(2).fit(Xs).components_, skd.PCA(2).fit(Xs).components_)


# --------------------------------------------------------------------------------------
# 9. Wendland smoothness; huge coordinates on the sparse path
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("cholesky", ["auto", "dense", "sparse"])
def test_wendland_bad_smoothness_is_a_value_error(cholesky, rng):
    X = rng.uniform(size=(30, 2))
    for kernel in (Wendland(0.5, smoothness=5), Tapered(skk.RBF(), taper_smoothness=4)):
        with pytest.raises(ValueError, match="smoothness must be 0, 1, 2 or 3"):
            GaussianProcessRegressor(kernel, optimizer=None, cholesky=cholesky).fit(
                X, X[:, 0])


def test_huge_coordinates_take_the_dense_path_with_the_same_answer(rng, caplog):
    """X × 1e300 overflowed the k-d tree; the dense path scales first. 'auto' takes it
    (logged), 'sparse' refuses, and the answer is the unscaled problem's."""
    X = rng.uniform(size=(60, 2))
    y = np.sin(4 * X[:, 0])
    ref = GaussianProcessRegressor(Wendland(0.5), optimizer=None, alpha=1e-6,
                                   cholesky="sparse").fit(X, y)
    assert ref.cholesky_ == "sparse"
    with caplog.at_level(logging.INFO, "skgpu"):
        big = GaussianProcessRegressor(Wendland(0.5e300), optimizer=None, alpha=1e-6).fit(
            X * 1e300, y)
    assert big.cholesky_ == "dense" and "overflow float64" in caplog.text
    assert_allclose_rel(big.log_marginal_likelihood_value_,
                        ref.log_marginal_likelihood_value_, 1e-10)
    assert_allclose_rel(big.predict(X[:5] * 1e300), ref.predict(X[:5]), 1e-8)
    with pytest.raises(ValueError, match="overflow float64"):
        GaussianProcessRegressor(Wendland(0.5e300), optimizer=None, cholesky="sparse").fit(
            X * 1e300, y)


# --------------------------------------------------------------------------------------
# 10. Constant columns exact; LinAlgWarning for ill-conditioned Ridge
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("solver", ["covariance_eigh", "full", "randomized"])
@pytest.mark.parametrize("value", [0.1, 3.7, -1e6 / 3])
def test_constant_columns_have_exactly_zero_variance(device, solver, value, rng):
    """The GEMV mean left residues (evr [1, 2e-32, ...]); skgpu is exact here, deliberately
    more than scikit-learn (which gives 1e-16 or 0 depending on the value)."""
    X = np.full((120, 5), value)
    X[:, 1] = rng.standard_normal(120)
    params = dict(n_components=3, svd_solver=solver, random_state=0)
    with skgpu.config_context(device=device):
        pca = PCA(**params).fit(X)
        np.testing.assert_array_equal(pca.mean_[[0, 2, 3, 4]], value)
        np.testing.assert_array_equal(pca.explained_variance_[1:], 0.0)
        np.testing.assert_array_equal(pca.components_[0, [0, 2, 3, 4]], 0.0)
        with pytest.warns(RuntimeWarning, match="invalid value"):
            ratio = PCA(**params).fit(np.full((120, 5), value)).explained_variance_ratio_
    assert np.isnan(ratio).all()  # 0 / 0, as scikit-learn's for an all-zero variance


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("seed", [0, 1])
def test_constant_columns_exact_on_many_rows(device, dtype, seed):
    """Above ~130,000 float32 rows every column used to be a candidate for the exact
    check, and each was then read alone (a strided pass over X per column: 1 s of a
    1.25 s fit at 400,000 × 256 on the GPU host). Candidates are now compared together,
    in row blocks: the answer must not change."""
    rng = np.random.default_rng(seed)
    n = 150_000
    X = rng.standard_normal((n, 5)).astype(dtype)
    X[:, 0] += 3.0
    X[:, 1] = dtype(3.7)
    X[:, 2] = dtype(-1e6 / 3)
    with skgpu.config_context(device=device):
        pca = PCA(svd_solver="covariance_eigh").fit(X)
    np.testing.assert_array_equal(to_host(pca.mean_)[[1, 2]], X[0, [1, 2]])
    variance = (pca.components_**2 * pca.explained_variance_[:, None]).sum(axis=0)
    exact = X.astype(np.float64).var(axis=0, ddof=1)
    tol = 1e-4 if dtype == np.float32 else 1e-10
    assert_allclose_rel(variance, exact, rtol=tol)
    reference = skd.PCA(svd_solver="full").fit(X.astype(np.float64))
    assert_allclose_rel(pca.explained_variance_, reference.explained_variance_, rtol=tol)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 2, 1024, 1025, 40_000])
def test_exact_constant_columns_zeroes_only_constant_columns(backend, dtype, n):
    """The helper itself, on the row-block edges: a constant column (also one of zeros) is
    zeroed in C and gets its exact mean; a column equal to its first entry on every block
    but the last row, and one with a tiny real spread, keep the C the formula computed."""
    from skgpu.backends import get_backend
    from skgpu.backends._common import exact_constant_columns

    ops = get_backend(backend)
    rng = np.random.default_rng(n)
    X = rng.standard_normal((n, 6)).astype(dtype)
    X[:, 1] = dtype(3.7)
    X[:, 2] = 0.0
    X[:, 3] = dtype(2.5)
    X[:, 4] = dtype(2.5) + dtype(1e-3) * (np.arange(n) % 2).astype(dtype)
    if n > 1:
        X[-1, 3] = np.nextafter(dtype(2.5), dtype(3.0))
    mean = X.mean(axis=0) * (1 + np.finfo(dtype).eps)  # GEMV-like residues
    scale = np.abs(mean.astype(np.float64))
    C = (np.finfo(dtype).eps * np.outer(scale, scale)).astype(dtype)  # residues: candidates
    expected = C.copy()
    constant = [1, 2] if n > 1 else [0, 1, 2, 3, 4, 5]
    expected[constant, :] = 0
    expected[:, constant] = 0
    expected_mean = mean.copy()
    expected_mean[constant] = X[0, constant]
    Cd = ops.asarray(C)
    exact_constant_columns(ops.asarray(X), mean, Cd, n)
    np.testing.assert_array_equal(ops.to_host(Cd), expected)
    np.testing.assert_array_equal(mean, expected_mean)


@pytest.mark.parametrize("scale", [1e-150, 1.0, 1e150])
@pytest.mark.parametrize("fmt", ["dense", "csc"])
def test_arpack_singular_values_exact_at_extreme_scales(scale, fmt):
    """ARPACK as scikit-learn calls it got wrong singular values for 17 of 400 random
    small matrices with entries of 1e-150 (and different ones from call to call); skgpu
    hands it X divided by a power of two near max|X|. Every draw must match the exact
    SVD, for TruncatedSVD and for PCA (whose sparse operator is centred implicitly)."""
    for seed in range(60):
        rng = np.random.default_rng(seed)
        n, p = int(rng.integers(3, 41)), int(rng.integers(3, 9))
        X = rng.standard_normal((n, p))
        if rng.random() < 0.5:
            X[:, -1] = X[:, 0]  # rank-deficient: Lanczos breaks down and restarts
        X *= scale
        k = int(min(rng.integers(1, 4), min(n, p) - 1))
        Xin = sp.csc_matrix(X) if fmt == "csc" else X
        exact = np.linalg.svd(X / scale, compute_uv=False)[:k] * scale
        svd = TruncatedSVD(k, algorithm="arpack", random_state=0).fit(Xin)
        assert_allclose_rel(svd.singular_values_, exact, rtol=1e-8)
        Xc = X - X.mean(axis=0)
        exact_c = np.linalg.svd(Xc / scale, compute_uv=False)[:k] * scale
        pca = PCA(k, svd_solver="arpack", random_state=0).fit(Xin)
        assert_allclose_rel(pca.singular_values_, exact_c, rtol=1e-8)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("weighted", [False, True])
def test_ridge_constant_column_coefficient_is_exactly_zero(device, weighted, rng):
    X = rng.standard_normal((50, 4))
    X[:, 2] = 0.1
    y = X @ np.arange(1.0, 5.0) + rng.standard_normal(50)
    sw = rng.uniform(0.5, 2, 50) if weighted else None
    with skgpu.config_context(device=device):
        for est in (Ridge(solver="cholesky"), Ridge(solver="svd"), RidgeCV()):
            assert est.fit(X, y, sample_weight=sw).coef_[2] == 0.0, est
        # the eigen route's eigenvectors mix the zero column at rounding level
        coef = RidgeCV(gcv_mode="eigen").fit(X, y, sample_weight=sw).coef_
        assert abs(coef[2]) <= 1e-12 * np.max(np.abs(coef))


@pytest.mark.parametrize("device", DEVICES)
def test_ill_conditioned_ridge_takes_the_svd_route(device, rng):
    """Nearly collinear columns, rcond(XᵀX) ~ 1e-18 however the columns are scaled: the
    normal equations carry no digits. scikit-learn warns LinAlgWarning and returns their
    noise; skgpu warns the same (or potrf fails outright) and answers by the SVD route
    (the least-squares solution, checked against NumPy's lstsq)."""
    X = rng.standard_normal((50, 3))
    X[:, 2] = X[:, 0] + 1e-9 * rng.standard_normal(50)
    y = X @ np.array([1.0, -2.0, 3.0]) + 1e-3 * rng.standard_normal(50)
    with skgpu.config_context(device=device):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LinAlgWarning)
            ours = Ridge(alpha=0.0, solver="cholesky", fit_intercept=False).fit(X, y)
        ref = Ridge(alpha=0.0, solver="svd", fit_intercept=False).fit(X, y)
    assert ours.solver_ == "svd"
    assert_allclose_rel(ours.coef_, ref.coef_, 1e-12)
    # two backward-stable least-squares solvers agree to the problem's perturbation
    # bound, eps (cond + cond² ‖r‖ / (‖X‖ ‖x‖)): ~2e-6 here (cond ~ 1e9), and the SVDs'
    # rounding differs with the BLAS thread count
    x = np.linalg.lstsq(X, y, rcond=None)[0]
    s = np.linalg.svd(X, compute_uv=False)
    cond = s[0] / s[-1]
    bound = np.finfo(float).eps * (cond + cond**2 * np.linalg.norm(y - X @ x)
                                   / (s[0] * np.linalg.norm(x)))
    assert bound < 1e-3  # the comparison still means something
    assert_allclose_rel(ours.coef_, x, 10 * bound)


@pytest.mark.parametrize("device", DEVICES)
def test_badly_scaled_ridge_keeps_the_normal_equations(device, rng):
    """A column scaled by 1e-9 makes rcond(XᵀX) ~ 1e-18, but the problem scaled by its
    diagonal is well conditioned, and Cholesky's answer is as accurate as that scaled
    problem allows (van der Sluis): no warning, the normal equations, lstsq's answer to
    rounding (the SVD route, which is not scaling-invariant, lost digits here)."""
    X = rng.standard_normal((50, 3))
    X[:, 2] *= 1e-9
    y = X @ np.array([1.0, -2.0, 3e9]) + 1e-3 * rng.standard_normal(50)
    with skgpu.config_context(device=device):
        with warnings.catch_warnings():
            warnings.simplefilter("error", LinAlgWarning)
            ours = Ridge(alpha=0.0, solver="cholesky", fit_intercept=False).fit(X, y)
    assert ours.solver_ == "cholesky"
    exact = np.linalg.lstsq(X, y, rcond=None)[0]
    np.testing.assert_allclose(ours.coef_, exact, rtol=1e-10)


def test_backends_list_is_the_conftest_one():
    assert [getattr(b, "values", [b])[0] for b in BACKENDS] == ["cpu", "gpu"]
    assert to_host(np.ones(1))[0] == 1.0
