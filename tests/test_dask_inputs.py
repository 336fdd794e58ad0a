"""Dask input as users have it: masked rows (unknown chunk sizes), DataFrames, empty and
single chunks, column chunks, y and weights chunked unlike X, every numeric dtype. Each
fit equals the in-memory fit of the same data; each invalid input gets the in-memory
error and leaves the previous fit as it was."""

import os
import warnings
from unittest import mock

import numpy as np
import pytest
from skgpu_testing import assert_allclose_rel

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

from skgpu.decomposition import PCA, TruncatedSVD  # noqa: E402
from skgpu.linear_model import Ridge, RidgeCV  # noqa: E402


ESTIMATORS = {
    "pca": lambda: PCA(n_components=3),
    "pca-randomized": lambda: PCA(n_components=3, svd_solver="randomized", random_state=0),
    "truncated-svd": lambda: TruncatedSVD(n_components=3, random_state=0),
    "ridge": lambda: Ridge(alpha=np.array([0.5, 2.0])),
    "ridge-1d": lambda: Ridge(alpha=0.5),
    "ridgecv": lambda: RidgeCV(alphas=[0.1, 1.0, 10.0]),
    "ridgecv-per-target": lambda: RidgeCV(alphas=[0.1, 1.0, 10.0], alpha_per_target=True),
}
SUPERVISED = {"ridge", "ridge-1d", "ridgecv", "ridgecv-per-target"}
ATTRIBUTES = ("components_", "explained_variance_", "explained_variance_ratio_",
              "singular_values_", "mean_", "noise_variance_", "coef_", "intercept_",
              "alpha_", "best_score_")


def _data(seed, n=160, p=6, t=2, dtype=np.float64, columns="plain"):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) * np.geomspace(4, 0.5, p) + rng.uniform(-3, 3, p)
    if columns == "constant-duplicated":
        X[:, 1] = 2.5
        X[:, -1] = X[:, 0]
    Y = X @ rng.standard_normal((p, t)) + 0.3 * rng.standard_normal((n, t))
    if np.dtype(dtype).kind in "iu":
        X = np.round(X * 10).astype(dtype)
    elif np.dtype(dtype).kind == "b":  # columns of unequal variances
        X = X > np.quantile(X, np.linspace(0.5, 0.9, p), axis=0).diagonal()
    else:
        X = X.astype(dtype)
    return X, Y


def _tol(X):
    return 1e-4 if X.dtype == np.float32 else 1e-8


def _fit(name, X, y=None, w=None):
    est = PROPERTY_ESTIMATORS[name]()
    if name in SUPERVISED:
        if name == "ridge-1d":
            y = y[:, 0] if y is not None and y.ndim == 2 else y
        return est.fit(X, y, sample_weight=w)
    return est.fit(X)


def _assert_same_fit(ours, ref, tol, exact=None):
    """``ours`` equals the in-memory ``ref`` to ``tol`` (relative to the attribute's
    scale), or, given the ``exact`` fit (float64, same data), is no further from it than
    twice ``ref``'s own error."""
    assert ours.backend_ == "dask"
    assert ours.n_features_in_ == ref.n_features_in_
    for attr in ATTRIBUTES:
        if hasattr(ref, attr):
            a, r = getattr(ours, attr), getattr(ref, attr)
            assert np.shape(a) == np.shape(r), attr
            assert np.asarray(a).dtype == np.asarray(r).dtype, attr
            scale = max(np.max(np.abs(r)), 1.0)
            if exact is None:
                assert_allclose_rel(a, r, tol, atol_scale=scale)
                continue
            e = np.asarray(getattr(exact, attr), dtype=np.float64)
            own = np.abs(np.asarray(r, dtype=np.float64) - e)
            np.testing.assert_array_less(np.abs(np.asarray(a, dtype=np.float64) - e),
                                         np.maximum(2 * own, tol * scale) + 1e-300,
                                         err_msg=attr)


def _masked(X, keep, chunks):
    """X[keep] as dask gives it: row chunk sizes unknown (NaN)."""
    Xd = da.from_array(X, chunks=(chunks,) + X.shape[1:])
    out = Xd[da.from_array(keep, chunks=chunks)]
    assert np.isnan(out.chunks[0]).all()
    return out


def _layout(layout, X, Y, w, rng):
    """(dask X, dask y, weights, reference X, y, weights) for one way of holding data."""
    n = X.shape[0]
    if layout == "known":
        return da.from_array(X, chunks=(37, -1)), da.from_array(Y, chunks=(37, -1)), w, X, Y, w
    if layout == "single-chunk":
        return da.from_array(X, chunks=-1), da.from_array(Y, chunks=-1), w, X, Y, w
    if layout == "column-chunks":
        return da.from_array(X, chunks=(40, 2)), Y, w, X, Y, w
    if layout == "y-other-rows":
        return da.from_array(X, chunks=(37, -1)), da.from_array(Y, chunks=(23, -1)), w, X, Y, w
    if layout == "y-column-chunks":
        return da.from_array(X, chunks=(40, -1)), da.from_array(Y, chunks=(40, 1)), w, X, Y, w
    if layout == "dask-weights":
        w = rng.uniform(0.5, 2.0, n)
        w[::7] = 0.0
        return (da.from_array(X, chunks=(37, -1)), da.from_array(Y, chunks=(37, -1)),
                da.from_array(w, chunks=29), X, Y, w)
    if layout in ("mask", "mask-empties-a-chunk"):
        keep = rng.random(n) > 0.3
        if layout == "mask-empties-a-chunk":
            keep[40:80] = False
        wd = None if w is None else _masked(w, keep, 40)
        return (_masked(X, keep, 40), _masked(Y, keep, 40), wd, X[keep], Y[keep],
                None if w is None else w[keep])
    if layout == "dataframe":
        pd = pytest.importorskip("pandas")
        dd = pytest.importorskip("dask.dataframe")
        frame = dd.from_pandas(pd.DataFrame(X), npartitions=4)
        Xd = frame.to_dask_array()  # lengths unknown
        assert np.isnan(Xd.chunks[0]).all()
        return Xd, da.from_array(Y, chunks=(50, -1)), w, X, Y, w
    raise AssertionError(layout)


LAYOUTS = ["known", "single-chunk", "column-chunks", "y-other-rows", "y-column-chunks",
           "dask-weights", "mask", "mask-empties-a-chunk", "dataframe"]


@pytest.mark.parametrize("name", list(ESTIMATORS))
@pytest.mark.parametrize("layout", LAYOUTS)
def test_layouts_fit_as_in_memory(client, name, layout, seed):
    rng = np.random.default_rng(seed + 100)
    X, Y = _data(seed)
    w = rng.uniform(0.0, 2.0, X.shape[0]) if name in SUPERVISED else None
    if w is not None:
        w[:5] = 0.0
    Xd, Yd, wd, Xr, Yr, wr = _layout(layout, X, Y, w, rng)
    if name not in SUPERVISED and layout in ("y-other-rows", "y-column-chunks",
                                             "dask-weights"):
        pytest.skip("no y or weights")
    ours = _fit(name, Xd, Yd, wd)
    _assert_same_fit(ours, _fit(name, Xr, Yr, wr), _tol(Xr))
    out = (ours.predict(Xd) if name in SUPERVISED else ours.transform(Xd)).compute()
    ref = ours.predict(Xr) if name in SUPERVISED else ours.transform(Xr)
    assert_allclose_rel(out, ref, 1e-12)


@pytest.mark.parametrize("name", list(ESTIMATORS))
@pytest.mark.parametrize("dtype", [np.int64, np.bool_, np.float32, np.float64])
@pytest.mark.parametrize("columns", ["plain", "constant-duplicated"])
def test_dtypes_and_degenerate_columns(client, name, dtype, columns, seed):
    X, Y = _data(seed, dtype=dtype, columns=columns)
    ours = _fit(name, da.from_array(X, chunks=(45, -1)), da.from_array(Y, chunks=(45, -1)))
    ref = _fit(name, X, Y)
    # float32 X: the in-memory fit's own rounding error, against a float64 fit, is the
    # tolerance (duplicated columns split their weight unevenly there)
    exact = _fit(name, X.astype(np.float64), Y) if dtype is np.float32 else None
    _assert_same_fit(ours, ref, 1e-4 if dtype is np.float32 else 1e-8, exact)


def _fitted_state(est):
    return {k: (v.copy() if isinstance(v, np.ndarray) else v)
            for k, v in vars(est).items() if k.endswith("_") and not k.startswith("_")}


def _assert_state(est, state):
    now = _fitted_state(est)
    assert now.keys() == state.keys()
    for k, v in state.items():
        np.testing.assert_array_equal(np.asarray(now[k]), np.asarray(v), err_msg=k)


def _invalid_cases(X, Y):
    rng = np.random.default_rng(3)
    n = X.shape[0]
    nan_x, inf_x = X.copy(), X.copy()
    nan_x[123, 2], inf_x[77, 4] = np.nan, -np.inf
    nan_y = Y.copy()
    nan_y[130, 0] = np.nan
    inf_y = Y.copy()
    inf_y[5, 0] = np.inf
    w = rng.uniform(0.5, 1.5, n)
    neg_w, nan_w = w.copy(), w.copy()
    neg_w[100], nan_w[90] = -0.1, np.nan
    return {
        "nan-X": (nan_x, Y, None, False),
        "inf-X": (inf_x, Y, None, False),
        "nan-y": (X, nan_y, None, True),
        "inf-y": (X, inf_y, None, True),
        "negative-weight": (X, Y, neg_w, True),
        "negative-weight-numpy": (X, Y, neg_w, "numpy"),
        "nan-weight": (X, Y, nan_w, True),
        "short-y": (X, Y[:-3], None, True),
        "short-weight": (X, Y, w[:-2], True),
    }


CASES = ["nan-X", "inf-X", "nan-y", "inf-y", "negative-weight", "negative-weight-numpy",
         "nan-weight", "short-y", "short-weight"]


@pytest.mark.parametrize("name", list(ESTIMATORS))
@pytest.mark.parametrize("case", CASES)
def test_invalid_input_errors_as_in_memory(client, name, case):
    X, Y = _data(0)
    Xb, Yb, wb, supervised_only = _invalid_cases(X, Y)[case]
    if supervised_only and name not in SUPERVISED:
        pytest.skip("no y or weights")
    est = _fit(name, da.from_array(X, chunks=(40, -1)), da.from_array(Y, chunks=(40, -1)))
    state = _fitted_state(est)
    yd = da.from_array(Yb, chunks=(40, -1))
    wd = wb if wb is None or supervised_only == "numpy" else da.from_array(wb, chunks=40)
    with pytest.raises(ValueError) as in_memory:
        _fit(name, Xb, Yb, wb)
    with pytest.raises(ValueError) as ours:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            if name in SUPERVISED:
                y = yd[:, 0] if name == "ridge-1d" else yd
                est.fit(da.from_array(Xb, chunks=(40, -1)), y, sample_weight=wd)
            else:
                est.fit(da.from_array(Xb, chunks=(40, -1)))
    assert str(ours.value) == str(in_memory.value)
    _assert_state(est, state)


@pytest.mark.parametrize("name", ["pca", "pca-randomized", "truncated-svd"])
def test_too_many_components_errors_as_in_memory(client, name):
    X, _ = _data(1, n=60, p=5)  # tall: 'auto' is 'covariance_eigh' in memory too
    est = ESTIMATORS[name]().set_params(n_components=6)
    with pytest.raises(ValueError) as in_memory:
        est.fit(X)
    with pytest.raises(ValueError) as ours:
        est.fit(da.from_array(X, chunks=(7, -1)))
    assert str(ours.value) == str(in_memory.value)


@pytest.mark.parametrize("name", ["pca", "ridge"])
def test_empty_input_errors_as_in_memory(client, name):
    X, Y = _data(1, n=30, p=5)
    keep = np.zeros(30, dtype=bool)
    with pytest.raises(ValueError) as in_memory:
        _fit(name, X[keep], Y[keep])
    with pytest.raises(ValueError) as ours:
        _fit(name, _masked(X, keep, 10), _masked(Y, keep, 10))
    assert str(ours.value) == str(in_memory.value)


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_dataframe_feature_names(client, name):
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    X, Y = _data(2)
    columns = [f"f{i}" for i in range(X.shape[1])]
    frame = pd.DataFrame(X, columns=columns)
    dframe = dd.from_pandas(frame, npartitions=3)
    ours = _fit(name, dframe, da.from_array(Y, chunks=(50, -1)))
    ref = _fit(name, frame, Y)
    _assert_same_fit(ours, ref, 1e-8)
    np.testing.assert_array_equal(ours.feature_names_in_, ref.feature_names_in_)
    method = "predict" if name in SUPERVISED else "transform"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the names match: no warning
        out = getattr(ours, method)(dframe).compute()
    assert_allclose_rel(out, getattr(ref, method)(frame), 1e-8)
    with pytest.warns(UserWarning, match="does not have valid feature names"):
        getattr(ours, method)(da.from_array(X, chunks=(50, -1)))
    # a later array refit drops the names, as scikit-learn does
    if name in SUPERVISED:
        y = Y[:, 0] if name == "ridge-1d" else Y
        ours.fit(da.from_array(X, chunks=(50, -1)), y)
    else:
        ours.fit(da.from_array(X, chunks=(50, -1)))
    assert not hasattr(ours, "feature_names_in_")
    ours = _fit(name, dframe, da.from_array(Y, chunks=(50, -1)))
    renamed = dd.from_pandas(frame.rename(columns={"f0": "other"}), npartitions=3)
    with pytest.raises(ValueError, match="feature names should match"):
        getattr(ours, method)(renamed)


def test_unknown_chunk_sizes_are_computed_and_logged(client, caplog):
    X, _ = _data(4)
    keep = np.arange(X.shape[0]) % 3 > 0
    with caplog.at_level("INFO", logger="skgpu"):
        PCA(2).fit(_masked(X, keep, 40))
    assert any("unknown chunk sizes" in r.getMessage() for r in caplog.records)


def test_wrong_feature_count_at_predict(client):
    X, Y = _data(5)
    est = Ridge().fit(da.from_array(X, chunks=(40, -1)), da.from_array(Y, chunks=(40, -1)))
    with pytest.raises(ValueError) as in_memory:
        Ridge().fit(X, Y).predict(X[:, :4])
    with pytest.raises(ValueError) as ours:
        est.predict(da.from_array(X[:, :4], chunks=(40, -1)))
    assert str(ours.value) == str(in_memory.value)


hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
import exact_fits  # noqa: E402  (python-flint, its reference, is asked for when used)

from skgpu.dask import linalg as dask_linalg  # noqa: E402


#: Column offsets and spreads of column scales the property test draws (the data far
#: from the origin and badly scaled, as much as the in-memory fit's own error allows).
OFFSETS = [0.0, 1e3, 1e6, 1e9, 1e12]
SCALE_SPREADS = [0, 2, 4, 8]  # column scales 10**u, u uniform in ±spread
#: Examples the property test draws (more with SKGPU_PROPERTY_EXAMPLES, for a soak).
PROPERTY_EXAMPLES = int(os.environ.get("SKGPU_PROPERTY_EXAMPLES", "60"))
#: The property test's estimators: every Dask route (PCA's solvers among them).
PROPERTY_ESTIMATORS = {**ESTIMATORS, "pca-covariance-eigh": lambda: PCA(
    n_components=3, svd_solver="covariance_eigh")}


@st.composite
def dask_cases(draw):
    """An estimator, data, and a way of holding it in dask: row chunking, a mask
    (unknown chunk sizes, possibly emptying chunks), column chunks, dtype, y's shape and
    chunking, weights (NumPy or dask, with zeros); the columns moved far from the origin
    and scaled apart."""
    name = draw(st.sampled_from(sorted(PROPERTY_ESTIMATORS)))
    p = draw(st.integers(3, 6))  # (n_components=3: see the dedicated error tests)
    n = draw(st.integers(2 * p + 4, 90))
    dtype = draw(st.sampled_from([np.float64, np.float32, np.int64]))
    columns = draw(st.sampled_from(["plain", "plain", "constant-duplicated"]))
    # (three components with non-zero variance: the others' basis is arbitrary)
    assume(columns == "plain" or p >= 5)
    seed = draw(st.integers(0, 2**31 - 1))
    X, Y = _data(seed, n=n, p=p, t=draw(st.integers(1, 3)), dtype=dtype, columns=columns)
    offset = draw(st.sampled_from(OFFSETS))
    spread = draw(st.sampled_from(SCALE_SPREADS))
    rng = np.random.default_rng(seed)
    scales = 10.0 ** rng.uniform(-spread, spread, p)
    shifts = offset * rng.choice([-1.0, 1.0], p) * rng.uniform(0.5, 2.0, p)
    if dtype == np.int64:  # integers: offsets only (scaled below one, a column is zero)
        X = X + np.round(shifts).astype(np.int64)
    else:
        X = (X.astype(np.float64) * scales + shifts).astype(dtype)
    rows = draw(st.integers(max(1, n // 10), n))  # (at most ~10 chunks: test time)
    masked = draw(st.sampled_from(["none", "random", "whole-chunk"]))
    keep = np.ones(n, dtype=bool)
    if masked == "random":
        keep = rng.random(n) > draw(st.sampled_from([0.1, 0.5]))
    elif masked == "whole-chunk":
        start = draw(st.integers(0, (n - 1) // rows)) * rows
        keep[start:start + rows] = False
    assume(keep.sum() >= 2 * p + 2)
    weights = draw(st.sampled_from(["none", "numpy", "dask"]))
    w = None
    if weights != "none" and name in SUPERVISED:
        w = rng.uniform(0.0, 2.0, n)
        w[rng.random(n) < 0.2] = 0.0
        assume((w[keep] > 0).sum() >= p + 2)
    column_rows = draw(st.sampled_from([None, 1]))
    y_rows = draw(st.integers(max(1, n // 10), n))
    one_d = draw(st.booleans())
    # the randomized fits' two routes: on an R factor of X, or passes over X
    passes = draw(st.booleans()) if name in ("truncated-svd", "pca-randomized") else False
    return dict(name=name, X=X, Y=Y[:, 0] if one_d else Y, w=w, keep=keep, rows=rows,
                masked=masked != "none", x_columns=column_rows, y_rows=y_rows,
                w_dask=weights == "dask", passes=passes)


def _in_dask(case):
    X, Y, w, keep, rows = case["X"], case["Y"], case["w"], case["keep"], case["rows"]
    x_chunks = (rows, -1 if case["x_columns"] is None else case["x_columns"])
    Xd = da.from_array(X, chunks=x_chunks)
    Yd = da.from_array(Y, chunks=(case["y_rows"],) + Y.shape[1:])
    wd = None if w is None else (da.from_array(w, chunks=rows) if case["w_dask"] else w)
    if case["masked"]:
        mask = da.from_array(keep, chunks=rows)
        Xd, Yd = Xd.rechunk({1: -1})[mask], Yd.rechunk({0: rows})[mask]
        if wd is not None:
            wd = (wd[mask] if case["w_dask"] else w[keep])
    return Xd, Yd, wd


def _exact_fit(name, X, Y, w):
    """The exact fit (:mod:`exact_fits`) of what ``name`` estimates, on this data."""
    est = PROPERTY_ESTIMATORS[name]()
    if name.startswith("pca"):
        return exact_fits.exact_pca(X, est.n_components)
    if name == "truncated-svd":
        return exact_fits.exact_truncated_svd(X, est.n_components)
    if name == "ridge-1d":
        return exact_fits.exact_ridge(X, Y[:, 0] if Y.ndim == 2 else Y, est.alpha, w)
    if name == "ridge":
        return exact_fits.exact_ridge(X, Y, est.alpha, w)
    return exact_fits.exact_ridgecv(X, Y, est.alphas, w, est.alpha_per_target)


def _assert_within_own_error(ours, ref, exact, X):
    """``ours`` is no further from the ``exact`` fit than twice the in-memory ``ref``'s
    own error, or than the rounding floor of a backward stable fit in X's precision
    (:func:`exact_fits.floors`); component signs aligned with the exact ones first."""
    assert ours.backend_ == "dask"
    eps = np.finfo(np.float32 if X.dtype == np.float32 else np.float64).eps
    floors = exact_fits.floors(exact, X, eps)
    if hasattr(exact, "alpha_"):
        assert np.all((np.asarray(ours.alpha_) == np.asarray(ref.alpha_))
                      | (np.asarray(ours.alpha_) == np.asarray(exact.alpha_))), "alpha_"
    for attr, floor in floors.items():
        a = np.asarray(getattr(ours, attr), dtype=np.float64)
        r = np.asarray(getattr(ref, attr), dtype=np.float64)
        # (scikit-learn's shapes for one target in two dimensions vary by estimator)
        e = np.asarray(getattr(exact, attr), dtype=np.float64).reshape(r.shape)
        floor = np.asarray(floor, dtype=np.float64)
        floor = (floor.reshape(r.shape) if floor.size == r.size
                 else np.broadcast_to(floor, r.shape))
        assert a.shape == r.shape, attr
        assert np.asarray(getattr(ours, attr)).dtype == np.asarray(getattr(ref, attr)).dtype
        if attr == "components_":
            a = a * np.where(np.sum(a * e, axis=1) < 0, -1.0, 1.0)[:, None]
            r = r * np.where(np.sum(r * e, axis=1) < 0, -1.0, 1.0)[:, None]
        if attr == "best_score_" and not np.array_equal(np.asarray(ours.alpha_),
                                                        np.asarray(exact.alpha_)):
            continue  # (a near tie the in-memory fit resolved as ours did)
        own = np.abs(r - e)
        np.testing.assert_array_less(np.abs(a - e), np.maximum(2 * own, floor) + 1e-300,
                                     err_msg=attr)


@settings(max_examples=PROPERTY_EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                 HealthCheck.filter_too_much])
@given(case=dask_cases())
def test_property_dask_fit_equals_in_memory(client, case):
    """Well-scaled or far from the origin and scaled apart: the Dask fit is as close to
    the exact fit as the in-memory fit is (or fails with its error)."""
    name, keep = case["name"], case["keep"]
    X, Y = case["X"][keep], case["Y"][keep]
    w = None if case["w"] is None else case["w"][keep]
    Xd, Yd, wd = _in_dask(case)
    with warnings.catch_warnings():
        # (float32 far from the origin: scikit-learn warns of its own rounding)
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            ref = _fit(name, X, Y, w)
        except ValueError as exc:  # (Ridge's two alphas for one target, say)
            with pytest.raises(ValueError) as ours:
                _fit(name, Xd, Yd, wd)
            assert str(ours.value) == str(exc)
            return
        with mock.patch.object(dask_linalg, "FACTOR_MAX_FEATURES",
                               0 if case["passes"] else dask_linalg.FACTOR_MAX_FEATURES):
            ours = _fit(name, Xd, Yd, wd)
    exact = _exact_fit(name, X, Y, w)
    _assert_within_own_error(ours, ref, exact, X)


@pytest.mark.parametrize("name", ["pca", "pca-randomized", "ridge", "ridgecv"])
@pytest.mark.parametrize("case", ["nan-X", "negative-weight", "nan-weight"])
def test_invalid_persisted_input_errors_as_in_memory(client, name, case):
    """The same errors where the chunks are persisted (one task per worker and pass:
    RidgeCV's factorisation then runs on a worker, which finds the bad chunk)."""
    X, Y = _data(0)
    Xb, Yb, wb, supervised_only = _invalid_cases(X, Y)[case]
    if supervised_only and name not in SUPERVISED:
        pytest.skip("no weights")
    with pytest.raises(ValueError) as in_memory:
        _fit(name, Xb, Yb, wb)
    Xd, Yd = client.persist([da.from_array(Xb, chunks=(40, -1)),
                             da.from_array(Yb, chunks=(40, -1))])
    wd = None if wb is None else client.persist(da.from_array(wb, chunks=40))
    with pytest.raises(ValueError) as ours:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            _fit(name, Xd, Yd, wd)
    assert str(ours.value) == str(in_memory.value)


@pytest.mark.parametrize("offset", [1e6, 1e9])
def test_large_offsets_fit_as_in_memory(client, offset):
    # each chunk's Gram matrix is formed again from shifted data, as in memory
    X, _ = _data(6, p=4)
    X = X + offset * np.array([1.0, 3.0, 0.5, 2.0])
    X[:, 1] = 3e9  # constant beside the offsets
    ref = PCA(3, svd_solver="covariance_eigh").fit(X)
    ours = PCA(3, svd_solver="covariance_eigh").fit(da.from_array(X, chunks=(37, -1)))
    _assert_same_fit(ours, ref, 1e-10)
    assert ours.mean_[1] == 3e9


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_not_finite_past_an_offset_chunks_head(monkeypatch, client, bad):
    """A NaN or infinity past the head of a chunk with an offset (where the head alone
    sends the chunk to the shifted Gram matrix) gets the in-memory error, the fit
    intact, and the chunk's pass on the CPU warns of nothing."""
    from skgpu.backends import _common
    from skgpu.backends._cpu import CPUBackend
    from skgpu.dask import linalg

    monkeypatch.setattr(_common, "_HEAD_ROWS", 3)
    X, _ = _data(2, n=300, p=4)
    X += 1e6
    est = PCA(3).fit(da.from_array(X, chunks=(100, -1)))
    state = _fitted_state(est)
    Xb = X.copy()
    Xb[250, 1] = bad
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        stats = linalg._chunk_stats(CPUBackend(), Xb[200:], None, None, "gram", np.float64)
    assert stats.factor is None and not np.all(np.isfinite(stats.mean))
    with pytest.raises(ValueError) as in_memory:
        PCA(3).fit(Xb)
    with pytest.raises(ValueError) as ours:
        est.fit(da.from_array(Xb, chunks=(100, -1)))
    assert str(ours.value) == str(in_memory.value)
    _assert_state(est, state)


@pytest.mark.parametrize("name", ["ridge", "ridgecv"])
@pytest.mark.parametrize("offset", [1e6, 1e9])
@pytest.mark.parametrize("weights", [False, True])
def test_large_offsets_ridge_as_in_memory(client, name, offset, weights):
    X, Y = _data(7, p=4)
    X = X + offset * np.array([1.0, 3.0, 0.5, 2.0])
    Y = Y + offset
    w = np.random.default_rng(7).uniform(0.5, 2.0, X.shape[0]) if weights else None
    ref = _fit(name, X, Y, w)
    ours = _fit(name, da.from_array(X, chunks=(37, -1)), da.from_array(Y, chunks=(37, -1)),
                None if w is None else da.from_array(w, chunks=37))
    _assert_same_fit(ours, ref, 1e-9)
