"""Ridge and RidgeCV against scikit-learn (and a brute-force LOO), on each backend."""

import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import DEVICES
from sklearn import linear_model as skl
from sklearn.datasets import load_diabetes
from sklearn.exceptions import FitFailedWarning
from sklearn.metrics import make_scorer, mean_absolute_error
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks
from skgpu_testing import assert_allclose_rel

import skgpu
from skgpu.linear_model import Ridge, RidgeCV

ALPHAS = [0.01, 0.3, 10.0, 300.0]


def rtol_for(device):
    """RidgeCV works in float64 for every input dtype, as scikit-learn's does."""
    return 1e-8


def make_regression_data(rng, n, p, n_targets=None, dtype=np.float64):
    """Correlated features with a non-zero mean, targets with noise: alphas matter."""
    X = rng.standard_normal((n, p)) @ (np.eye(p) + 0.3 * rng.standard_normal((p, p))
                                       / np.sqrt(p))
    X += rng.uniform(-3, 3, size=p)
    W = rng.standard_normal((p, 1 if n_targets is None else n_targets))
    Y = X @ W + rng.standard_normal((n, W.shape[1])) * rng.uniform(0.5, 3, W.shape[1])
    y = Y[:, 0] if n_targets is None else Y
    return X.astype(dtype), y


def _compare_cv(ours, theirs, rtol, store=True):
    np.testing.assert_array_equal(np.asarray(ours.alpha_), np.asarray(theirs.alpha_))
    assert_allclose_rel(ours.best_score_, theirs.best_score_, rtol)
    for name in ("coef_", "intercept_") + (("cv_results_",) if store else ()):
        a, b = getattr(ours, name), getattr(theirs, name)
        assert np.shape(a) == np.shape(b), name
        assert np.asarray(a).dtype == np.asarray(b).dtype, name
        assert_allclose_rel(a, b, rtol)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(150, 12), (25, 40)])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("targets", ["single", "multi", "per_target"])
def test_ridgecv_loo_matches_sklearn(rng, device, dtype, shape, fit_intercept, weighted,
                                     targets):
    X, y = make_regression_data(rng, *shape, n_targets=None if targets == "single" else 3,
                                dtype=dtype)
    sw = rng.uniform(0.2, 3.0, shape[0]) if weighted else None
    params = dict(alphas=ALPHAS, fit_intercept=fit_intercept, store_cv_results=True,
                  alpha_per_target=targets == "per_target")
    theirs = skl.RidgeCV(**params).fit(X, y, sample_weight=sw)
    with skgpu.config_context(device=device):
        ours = RidgeCV(**params).fit(X, y, sample_weight=sw)
        assert ours.backend_ == device
        # float32 input: float64 work, results cast to float32 (one ulp apart at most)
        rtol = 1e-6 if dtype == np.float32 else rtol_for(device)
        _compare_cv(ours, theirs, rtol)
        assert_allclose_rel(ours.predict(X), theirs.predict(X), 1e-5 if dtype == np.float32
                            else rtol_for(device))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", [(150, 12), (25, 40)])
@pytest.mark.parametrize("weighted", [False, True])
def test_ridgecv_eigen_mode_matches_sklearn(rng, device, shape, weighted):
    X, y = make_regression_data(rng, *shape, n_targets=2)
    sw = rng.uniform(0.2, 3.0, shape[0]) if weighted else None
    params = dict(alphas=ALPHAS, gcv_mode="eigen", store_cv_results=True)
    theirs = skl.RidgeCV(**params).fit(X, y, sample_weight=sw)
    with skgpu.config_context(device=device):
        _compare_cv(RidgeCV(**params).fit(X, y, sample_weight=sw), theirs, rtol_for(device))


@pytest.mark.parametrize("device", DEVICES)
def test_ridgecv_diabetes(device):
    X, y = load_diabetes(return_X_y=True)
    params = dict(alphas=np.logspace(-4, 2, 13), store_cv_results=True)
    theirs = skl.RidgeCV(**params).fit(X, y)
    with skgpu.config_context(device=device):
        ours = RidgeCV(**params).fit(X, y)
    assert ours.alpha_ == theirs.alpha_
    _compare_cv(ours, theirs, rtol_for(device))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("Estimator", [Ridge, RidgeCV])
def test_sparse_fit_repeats_bitwise(rng, device, Estimator):
    """The same sparse fit twice gives the same bits (scikit-learn's test_dense_sparse
    compares two fits' scores with >=): columns of 1,000 entries, whose Xᵀy cuSPARSE's
    SpMM sums in an order that changes from run to run."""
    X = sp.random(20000, 300, density=0.05, format="csr",
                  random_state=int(rng.integers(1 << 30)))
    y = rng.standard_normal(20000)
    with skgpu.config_context(device=device):
        first = Estimator(fit_intercept=False).fit(X, y)
        for _ in range(5):
            again = Estimator(fit_intercept=False).fit(X, y)
            np.testing.assert_array_equal(again.coef_, first.coef_)
            assert again.score(X, y) == first.score(X, y)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fmt", ["csr", "csc", "coo"])
@pytest.mark.parametrize("shape", [(200, 30), (30, 80)])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_ridgecv_sparse_matches_sklearn(rng, device, fmt, shape, fit_intercept):
    X = sp.random(*shape, density=0.2, format=fmt, random_state=rng.integers(1 << 30))
    X.data += 1.0
    y = rng.standard_normal((shape[0], 2))
    sw = rng.uniform(0.5, 2.0, shape[0])
    params = dict(alphas=ALPHAS, fit_intercept=fit_intercept, store_cv_results=True)
    theirs = skl.RidgeCV(**params).fit(X, y, sample_weight=sw)
    with skgpu.config_context(device=device):
        ours = RidgeCV(**params).fit(X, y, sample_weight=sw)
        assert ours.backend_ == device
        _compare_cv(ours, theirs, rtol_for(device))
        assert_allclose_rel(ours.predict(X), theirs.predict(X), rtol_for(device))
    with pytest.warns(FutureWarning, match="'svd' mode is not supported for sparse X"):
        RidgeCV(alphas=ALPHAS, gcv_mode="svd").fit(X, y)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("scoring", ["r2", "neg_mean_absolute_error", "callable"])
@pytest.mark.parametrize("alpha_per_target", [False, True])
def test_ridgecv_scoring_matches_sklearn(rng, device, scoring, alpha_per_target):
    if scoring == "callable":
        scoring = make_scorer(mean_absolute_error, greater_is_better=False)
    X, y = make_regression_data(rng, 120, 10, n_targets=3)
    sw = rng.uniform(0.5, 2.0, 120)
    params = dict(alphas=ALPHAS, scoring=scoring, store_cv_results=True,
                  alpha_per_target=alpha_per_target)
    theirs = skl.RidgeCV(**params).fit(X, y, sample_weight=sw)
    with skgpu.config_context(device=device):
        _compare_cv(RidgeCV(**params).fit(X, y, sample_weight=sw), theirs, rtol_for(device))


def _ill_conditioned(rng, n=200, p=12, cond=1e10):
    """Centred singular values from 1 to 1/cond, plus a column offset."""
    A = rng.standard_normal((n, p))
    U, _ = np.linalg.qr(A - A.mean(axis=0))
    V, _ = np.linalg.qr(rng.standard_normal((p, p)))
    X = (U * np.geomspace(1.0, 1.0 / cond, p)) @ V.T + rng.uniform(-1, 1, p)
    return X, X @ rng.standard_normal(p) + 0.1 * rng.standard_normal(n)


def _brute_force_loo(X, y, alpha):
    """Refit without each sample in turn (intercept by centring, ridge by an augmented
    least-squares problem solved with lstsq); the squared LOO errors."""
    n, p = X.shape
    errors = np.empty(n)
    for i in range(n):
        keep = np.arange(n) != i
        Xt, yt = X[keep], y[keep]
        xm, ym = Xt.mean(axis=0), yt.mean()
        A = np.vstack([Xt - xm, np.sqrt(alpha) * np.eye(p)])
        beta = np.linalg.lstsq(A, np.concatenate([yt - ym, np.zeros(p)]), rcond=None)[0]
        errors[i] = y[i] - (ym + (X[i] - xm) @ beta)
    return errors**2


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("seed", [0, 1])
def test_ridgecv_ill_conditioned_qr_route_matches_brute_force(device, seed):
    rng = np.random.default_rng(seed)
    X, y = _ill_conditioned(rng)
    alphas = [1e-12, 1e-9, 1e-6, 1e-3]
    reference = np.column_stack([_brute_force_loo(X, y, a) for a in alphas])

    def error(cv_results):
        return np.max(np.abs(cv_results - reference) / np.abs(reference).max(axis=0))

    with skgpu.config_context(device=device):
        ours = RidgeCV(alphas=alphas, store_cv_results=True).fit(X, y)
        # the Gram route (squares the condition number): the witness that the case is hard
        # (scikit-learn's own eigen route is accurate here in 1.8, off in 1.9)
        eigen = RidgeCV(alphas=alphas, store_cv_results=True, gcv_mode="eigen").fit(X, y)
    assert error(ours.cv_results_) < 1e-8
    assert error(eigen.cv_results_) > 1e-7, "the Gram/eigen route should be measurably off"


@pytest.mark.parametrize("device", DEVICES)
def test_ridgecv_with_cv_uses_grid_search(rng, device):
    X, y = make_regression_data(rng, 90, 8)
    cv = KFold(3, shuffle=True, random_state=0)
    theirs = skl.RidgeCV(alphas=ALPHAS, cv=cv).fit(X, y)
    with skgpu.config_context(device=device):
        ours = RidgeCV(alphas=ALPHAS, cv=cv).fit(X, y)
    assert ours.alpha_ == theirs.alpha_
    assert ours.best_score_ == pytest.approx(theirs.best_score_, rel=1e-8)
    assert_allclose_rel(ours.coef_, theirs.coef_, rtol_for(device))


@pytest.mark.parametrize("params, fit_kwargs, error, match", [
    (dict(alphas=[1.0, -1.0]), {}, ValueError, r"alphas\[1\] == -1.0, must be > 0.0"),
    (dict(alphas=[0.0]), {}, ValueError, "alphas == 0.0, must be > 0.0"),
    (dict(alphas=[1.0], cv=3, alpha_per_target=True), {}, ValueError,
     "cv!=None and alpha_per_target=True are incompatible"),
    (dict(cv=3, store_cv_results=True), {}, ValueError,
     "cv!=None and store_cv_results=True are incompatible"),
    (dict(), dict(sample_weight=np.ones(7)), ValueError,
     r"sample_weight.shape == \(7,\), expected \(40,\)"),
    (dict(gcv_mode="qr"), {}, ValueError, "The 'gcv_mode' parameter"),
])
def test_ridgecv_bad_input(rng, params, fit_kwargs, error, match):
    X, y = make_regression_data(rng, 40, 5)
    with pytest.raises(error, match=match):
        skl.RidgeCV(**params).fit(X, y, **fit_kwargs)
    ours = RidgeCV(**params)
    with pytest.raises(error, match=match):
        ours.fit(X, y, **fit_kwargs)
    assert not hasattr(ours, "coef_")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("Estimator", [Ridge, RidgeCV])
def test_nan_and_inf_rejected(rng, device, Estimator):
    X, y = make_regression_data(rng, 40, 5)
    Xbad = X.copy()
    Xbad[3, 2] = np.nan
    ybad = y.copy()
    ybad[5] = np.inf
    with skgpu.config_context(device=device):
        with pytest.raises(ValueError, match="Input X contains NaN"):
            Estimator().fit(Xbad, y)
        with pytest.raises(ValueError, match="Input y contains infinity"):
            Estimator().fit(X, ybad)
        with pytest.raises(ValueError, match="inconsistent numbers of samples"):
            Estimator().fit(X, y[:-1])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("Estimator", [Ridge, RidgeCV])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("sparse", [False, True])
def test_non_finite_x_gets_sklearns_exact_error(rng, device, Estimator, dtype, bad, sparse):
    """fit and predict: scikit-learn's message (RidgeCV's fit checks X by a sum on the
    backend, predict through its product; the dtype named is the one scikit-learn
    validates in: float64 for RidgeCV's fit). Word for word but for the estimator named
    in the NaN message's advice: scikit-learn's RidgeCV names its private _RidgeGCV."""
    X, y = make_regression_data(rng, 40, 5, dtype=dtype)
    Xbad = X.copy()
    Xbad[3, 2] = bad
    if sparse:
        X, Xbad = sp.csr_matrix(X), sp.csr_matrix(Xbad)
    sk_class = getattr(skl, Estimator.__name__)

    def message(call):
        with pytest.raises(ValueError) as info:
            call()
        return str(info.value)

    theirs = sk_class().fit(X, y)
    with skgpu.config_context(device=device):
        ours = Estimator().fit(X, y)
        for call, reference in [(lambda: Estimator().fit(Xbad, y),
                                 lambda: sk_class().fit(Xbad, y)),
                                (lambda: ours.predict(Xbad), lambda: theirs.predict(Xbad))]:
            got, want = message(call), message(reference)
            assert got == want.replace("_RidgeGCV does not", "RidgeCV does not")
        coef = np.array(ours.coef_, copy=True)  # a failed refit leaves the fit as it was
        message(lambda: ours.fit(Xbad, y))
        np.testing.assert_array_equal(ours.coef_, coef)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("where", ["first row", "middle", "last row", "weightless row"])
@pytest.mark.parametrize("on_device", [False, True])
def test_ridgecv_finds_non_finite_x_anywhere(rng, device, bad, where, on_device):
    """RidgeCV's fit finds NaN or infinity wherever it lies: in the first row (the one
    the GPU's centring subtracts from the rest), one of the last rows of a block of rows,
    a row of zero sample weight; with scikit-learn's message, from NumPy and from
    CuPy."""
    if on_device and device != "gpu":
        pytest.skip("CuPy input goes to the GPU")
    X, y = make_regression_data(rng, 1500, 7)
    row = {"first row": 0, "middle": 1023, "last row": 1499, "weightless row": 700}[where]
    weights = rng.uniform(0.5, 2.0, X.shape[0])
    weights[700] = 0.0
    Xbad = X.copy()
    Xbad[row, 4] = bad
    want = "Input X contains " + ("NaN" if np.isnan(bad) else "infinity")

    def convert(a):
        if not on_device:
            return a
        import cupy as cp

        return cp.asarray(a)

    with skgpu.config_context(device=device):
        for kwargs in ({}, {"sample_weight": weights}):
            with pytest.raises(ValueError, match=want):
                RidgeCV().fit(convert(Xbad), convert(y), **kwargs)


# Ridge --------------------------------------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("solver", ["auto", "cholesky", "svd"])
@pytest.mark.parametrize("shape", [(150, 12), (25, 40)])
@pytest.mark.parametrize("weighted", [False, True])
def test_ridge_matches_sklearn(rng, device, dtype, solver, shape, weighted, seed):
    X, Y = make_regression_data(rng, *shape, n_targets=3, dtype=dtype)
    sw = rng.uniform(0.2, 3.0, shape[0]) if weighted else None
    rtol = 1e-4 if dtype == np.float32 else rtol_for(device)
    # per-target penalties as an array: scikit-learn 1.8's Ridge takes no list
    for y, alpha in [(Y[:, 0], 0.7), (Y, 0.7), (Y, np.array([0.1, 1.0, 10.0]))]:
        theirs = skl.Ridge(alpha=alpha, solver=solver).fit(X, y, sample_weight=sw)
        with skgpu.config_context(device=device):
            ours = Ridge(alpha=alpha, solver=solver).fit(X, y, sample_weight=sw)
            assert ours.backend_ == device and ours.solver_ == theirs.solver_
            assert ours.coef_.dtype == theirs.coef_.dtype == dtype
            assert ours.n_iter_ is None
            assert_allclose_rel(ours.coef_, theirs.coef_, rtol)
            assert_allclose_rel(ours.intercept_, theirs.intercept_, rtol,
                                atol_scale=np.abs(y).max())
            assert_allclose_rel(ours.predict(X), theirs.predict(X), rtol)


@pytest.mark.parametrize("device", DEVICES)
def test_ridge_singular_cholesky_falls_back_to_svd(rng, device):
    X, y = make_regression_data(rng, 60, 6)
    X = np.hstack([X, np.zeros((60, 2))])  # XᵀX is exactly singular
    theirs = skl.Ridge(alpha=0.0, solver="cholesky", fit_intercept=False).fit(X, y)
    with skgpu.config_context(device=device):
        ours = Ridge(alpha=0.0, solver="cholesky", fit_intercept=False).fit(X, y)
    assert theirs.solver_ == "svd" and ours.solver_ == "svd"
    # The minimum-norm least-squares solution (scikit-learn's 'svd' keeps singular values
    # above an absolute 1e-15, so rounding noise in the null space reaches its answer).
    minimum_norm = np.linalg.lstsq(X, y, rcond=None)[0]
    assert_allclose_rel(ours.coef_, minimum_norm, 1e-8)
    assert_allclose_rel(ours.predict(X), X @ minimum_norm, 1e-8)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fmt", ["csr", "csc"])
@pytest.mark.parametrize("shape", [(200, 30), (30, 80)])
def test_ridge_sparse_exact_solve(rng, device, fmt, shape):
    X = sp.random(*shape, density=0.2, format=fmt, random_state=rng.integers(1 << 30))
    y = rng.standard_normal(shape[0])
    sw = rng.uniform(0.5, 2.0, shape[0])
    # The exact solution: scikit-learn's dense cholesky on the densified matrix.
    theirs = skl.Ridge(alpha=0.5).fit(X.toarray(), y, sample_weight=sw)
    with skgpu.config_context(device=device):
        ours = Ridge(alpha=0.5).fit(X, y, sample_weight=sw)
        assert ours.solver_ == "cholesky" and ours.backend_ == device
        assert_allclose_rel(ours.coef_, theirs.coef_, 1e-8)
        assert ours.intercept_ == pytest.approx(theirs.intercept_, rel=1e-8, abs=1e-10)
        assert_allclose_rel(ours.predict(X), theirs.predict(X), 1e-8)
    with pytest.raises(TypeError, match="SVD solver does not support sparse inputs"):
        Ridge(solver="svd", fit_intercept=False).fit(X, y)
    with pytest.raises(ValueError, match="does not support fitting the intercept"):
        Ridge(solver="cholesky").fit(X, y)


@pytest.mark.parametrize("params", [dict(solver="lsqr"), dict(solver="sag", random_state=0),
                                    dict(positive=True)])
def test_ridge_other_solvers_run_scikit_learn_on_cpu(rng, params, caplog):
    X, y = make_regression_data(rng, 80, 6)
    theirs = skl.Ridge(**params).fit(X, y)
    with caplog.at_level("INFO", logger="skgpu"):
        ours = Ridge(**params).fit(X, y)
    assert ours.backend_ == "cpu"
    assert any("scikit-learn's implementation on the CPU" in r.getMessage()
               for r in caplog.records)
    # scikit-learn's own solver ran; skgpu runs small work on one BLAS thread, and BLAS
    # sums in another order on another thread count (1 ulp apart on the 16-core GPU host)
    np.testing.assert_allclose(ours.coef_, theirs.coef_, rtol=1e-10, atol=0)
    np.testing.assert_allclose(ours.predict(X), theirs.predict(X), rtol=1e-10, atol=1e-14)


def test_ridge_bad_alpha_count(rng):
    X, Y = make_regression_data(rng, 40, 5, n_targets=3)
    for est in (skl.Ridge(alpha=np.array([1.0, 2.0])), Ridge(alpha=np.array([1.0, 2.0]))):
        with pytest.raises(ValueError, match="Number of targets and number of penalties"):
            est.fit(X, Y)
    with pytest.raises(ValueError, match="The 'alpha' parameter"):
        Ridge(alpha=-1.0).fit(X, Y)


# both ---------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("Estimator", [Ridge, RidgeCV])
def test_cupy_and_torch_inputs_stay_on_device(rng, Estimator):
    import cupy as cp
    import torch

    X, y = make_regression_data(rng, 300, 10, n_targets=2)
    theirs = getattr(skl, Estimator.__name__)().fit(X, y)
    ours = Estimator().fit(cp.asarray(X), cp.asarray(y))
    assert ours.backend_ == "gpu" and isinstance(ours.coef_, np.ndarray)
    assert_allclose_rel(ours.coef_, theirs.coef_, 1e-8)
    P = ours.predict(cp.asarray(X))
    assert isinstance(P, cp.ndarray)
    assert_allclose_rel(P, theirs.predict(X), 1e-8)
    Pt = ours.predict(torch.as_tensor(X, device="cuda"))
    assert isinstance(Pt, torch.Tensor) and Pt.device.type == "cuda"
    Pc = Estimator().fit(torch.as_tensor(X), torch.as_tensor(y)).predict(torch.as_tensor(X))
    assert isinstance(Pc, torch.Tensor) and Pc.device.type == "cpu"
    with pytest.raises(ValueError, match="Input y contains NaN"):
        bad = cp.asarray(y)
        bad[0, 0] = cp.nan
        Estimator().fit(cp.asarray(X), bad)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("Estimator", [Ridge, RidgeCV])
def test_pickle_drops_device_cache(rng, device, Estimator):
    X, y = make_regression_data(rng, 100, 6)
    with skgpu.config_context(device=device):
        ours = Estimator().fit(X, y)
        expected = ours.predict(X)
    restored = pickle.loads(pickle.dumps(ours))
    assert "_device_cache" not in restored.__dict__ or not restored._device_cache
    with skgpu.config_context(device="cpu"):
        np.testing.assert_allclose(restored.predict(X), expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("device", DEVICES)
def test_pipeline_and_grid_search(device, rng):
    X, y = make_regression_data(rng, 120, 8)
    with skgpu.config_context(device=device):
        pipe = make_pipeline(StandardScaler(), RidgeCV(alphas=ALPHAS))
        score = pipe.fit(X, y).score(X, y)
        search = GridSearchCV(Ridge(), {"alpha": ALPHAS}, cv=3).fit(X, y)
    ref = make_pipeline(StandardScaler(), skl.RidgeCV(alphas=ALPHAS)).fit(X, y).score(X, y)
    assert score == pytest.approx(ref, rel=1e-8)
    ref_search = GridSearchCV(skl.Ridge(), {"alpha": ALPHAS}, cv=3).fit(X, y)
    assert search.best_params_ == ref_search.best_params_


def test_pandas_feature_names(rng):
    pd = pytest.importorskip("pandas")
    X, y = make_regression_data(rng, 50, 3)
    df = pd.DataFrame(X, columns=["a", "b", "c"])
    for est in (Ridge(), RidgeCV(), RidgeCV(cv=3)):
        est.fit(df, pd.Series(y))
        assert list(est.feature_names_in_) == ["a", "b", "c"]
        with pytest.warns(UserWarning, match="was fitted with feature names"):
            est.predict(X)


def _expected_failed_checks(estimator):
    if isinstance(estimator, RidgeCV) and estimator.cv is not None:
        return {"check_requires_y_none":
                "scikit-learn's RidgeCV(cv=...) fails it too: GridSearchCV's message."}
    if isinstance(estimator, Ridge):
        return {"check_non_transformer_estimators_n_iter":
                "n_iter_ is None for the direct solvers, as in scikit-learn's Ridge."}
    return {}


@pytest.mark.parametrize("device", DEVICES)
@parametrize_with_checks([Ridge(), Ridge(solver="svd"), RidgeCV(), RidgeCV(gcv_mode="eigen"),
                          RidgeCV(cv=3)],
                         expected_failed_checks=_expected_failed_checks)
def test_sklearn_compatible(estimator, check, device):
    with skgpu.config_context(device=device), warnings.catch_warnings():
        if isinstance(estimator, RidgeCV) and estimator.cv is not None:
            # the checks feed NaN/object data to RidgeCV(cv=3), whose inner GridSearchCV
            # reports each failed fold, as scikit-learn's RidgeCV(cv=3) does
            warnings.filterwarnings("ignore", category=FitFailedWarning)
            warnings.filterwarnings("ignore", message="(Scoring failed|One or more of "
                                    "the test scores are non-finite)")
        check(estimator)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("Estimator", [Ridge, RidgeCV])
def test_scalar_sample_weight(rng, device, Estimator):
    """scikit-learn accepts a float sample_weight (every sample weighted the same)."""
    X, y = make_regression_data(rng, 80, 5)
    theirs = getattr(skl, Estimator.__name__)().fit(X, y, sample_weight=2.5)
    with skgpu.config_context(device=device):
        ours = Estimator().fit(X, y, sample_weight=2.5)
    assert_allclose_rel(ours.coef_, theirs.coef_, 1e-8)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("Estimator", [Ridge, RidgeCV])
def test_column_target_shapes(rng, device, Estimator):
    """y of shape (n, 1): the attributes and predictions take scikit-learn's shapes."""
    X, y = make_regression_data(rng, 60, 4)
    y = y[:, None]
    theirs = getattr(skl, Estimator.__name__)().fit(X, y)
    with skgpu.config_context(device=device):
        ours = Estimator().fit(X, y)
        prediction = ours.predict(X)
    assert np.shape(ours.coef_) == np.shape(theirs.coef_)
    assert np.shape(ours.intercept_) == np.shape(theirs.intercept_)
    assert prediction.shape == theirs.predict(X).shape
    assert_allclose_rel(prediction, theirs.predict(X), 1e-8)
