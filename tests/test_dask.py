"""Dask input on a dask.distributed LocalCluster of CPU workers: equal to in-memory fits."""

import numpy as np
import pytest
from skgpu_testing import assert_allclose_rel

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

from skgpu.decomposition import PCA, TruncatedSVD  # noqa: E402
from skgpu.linear_model import Ridge, RidgeCV  # noqa: E402


def _data(rng, n, p, t, dtype):
    X = rng.standard_normal((n, p)) @ (np.eye(p) + 0.3 * rng.standard_normal((p, p)))
    X += rng.uniform(-3, 3, p)
    Y = X @ rng.standard_normal((p, t)) + rng.standard_normal((n, t))
    return X.astype(dtype), Y


def _tol(dtype):
    return 1e-4 if dtype == np.float32 else 1e-8


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("chunk", [311, 1000])
def test_pca(client, rng, dtype, chunk):
    X, _ = _data(rng, 2000, 12, 1, dtype)
    Xd = da.from_array(X, chunks=(chunk, -1))
    ours = PCA(n_components=5).fit(Xd)
    ref = PCA(n_components=5, svd_solver="covariance_eigh").fit(X)
    assert ours.backend_ == "dask" and ours.components_.dtype == dtype
    for name in ("components_", "explained_variance_", "explained_variance_ratio_",
                 "singular_values_", "mean_"):
        assert_allclose_rel(getattr(ours, name), getattr(ref, name), _tol(dtype))
    Z = ours.transform(Xd)
    assert isinstance(Z, da.Array) and Z.chunks[0] == Xd.chunks[0]
    assert_allclose_rel(Z.compute(), ref.transform(X), _tol(dtype))
    assert_allclose_rel(PCA(n_components=5).fit_transform(Xd).compute(),
                        ref.transform(X), _tol(dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(2000, 12), (90, 30)])
def test_pca_full_and_auto_as_in_memory(client, rng, dtype, shape):
    """'full': the SVD of the centred chunks' TSQR factor, as exact as the in-memory SVD
    of the centred X; 'auto' resolves by the in-memory rules (the short X: 'full')."""
    X, _ = _data(rng, *shape, 1, dtype)
    X[:, 0] = X[:, 0] * 1e-7 + 1e6  # a column whose spread is 1e-13 of its value
    Xd = da.from_array(X, chunks=(shape[0] // 3 + 1, -1))
    for solver in ("full", "auto"):
        ours = PCA(n_components=5, svd_solver=solver).fit(Xd)
        ref = PCA(n_components=5, svd_solver=solver).fit(X)
        assert ours.solver_ == ref.solver_
        assert ours.backend_ == "dask" and ours.components_.dtype == dtype
        for name in ("components_", "explained_variance_", "explained_variance_ratio_",
                     "singular_values_", "mean_", "noise_variance_"):
            assert_allclose_rel(getattr(ours, name), getattr(ref, name), _tol(dtype))
    assert ours.solver_ == ("covariance_eigh" if shape[0] >= 10 * shape[1] else "full")


@pytest.fixture(params=["factor", "passes"])
def randomized_route(request, monkeypatch):
    """The randomized fits' two routes over chunks: on the R factor of one TSQR pass
    (where it pays, as for these small feature counts) or one pass per product."""
    from skgpu.dask import linalg

    if request.param == "passes":
        monkeypatch.setattr(linalg, "FACTOR_MAX_FEATURES", 0)
    return request.param


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pca_randomized(client, rng, dtype, seed, randomized_route):
    """The sketch of the (implicitly centred) chunks with the in-memory fit's draws."""
    X = ((rng.standard_normal((3000, 6)) * np.geomspace(20, 4, 6))
         @ rng.standard_normal((6, 30)) + rng.standard_normal((3000, 30)) + 5).astype(dtype)
    Xd = da.from_array(X, chunks=(700, -1))
    params = dict(n_components=4, svd_solver="randomized", random_state=seed)
    ours, ref = PCA(**params).fit(Xd), PCA(**params).fit(X)
    for name in ("components_", "explained_variance_", "explained_variance_ratio_",
                 "singular_values_", "mean_", "noise_variance_"):
        assert_allclose_rel(getattr(ours, name), getattr(ref, name), _tol(dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n_iter", [2, 5])
def test_truncated_svd(client, rng, dtype, n_iter, seed, randomized_route):
    """The same random draws as an in-memory fit, so the same result up to rounding."""
    X = ((rng.standard_normal((3000, 8)) * np.geomspace(30, 3, 8))
         @ rng.standard_normal((8, 40)) + rng.standard_normal((3000, 40))).astype(dtype)
    Xd = da.from_array(X, chunks=(450, -1))
    params = dict(n_components=5, n_iter=n_iter, random_state=seed)
    ours = TruncatedSVD(**params)
    Z = ours.fit_transform(Xd)
    ref = TruncatedSVD(**params).fit(X)
    assert ours.backend_ == "dask" and ours.components_.dtype == dtype
    for name in ("components_", "singular_values_", "explained_variance_",
                 "explained_variance_ratio_"):
        assert_allclose_rel(getattr(ours, name), getattr(ref, name), _tol(dtype))
    assert isinstance(Z, da.Array) and Z.chunks[0] == Xd.chunks[0]
    assert_allclose_rel(Z.compute(), ref.transform(X), _tol(dtype))
    # against the exact singular values: no further off than the in-memory sketch
    exact = np.linalg.svd(X.astype(np.float64), compute_uv=False)[:5]
    ours_err = np.max(np.abs(ours.singular_values_ - exact) / exact)
    ref_err = np.max(np.abs(ref.singular_values_ - exact) / exact)
    assert ours_err <= 2 * ref_err + 10 * np.finfo(dtype).eps


def test_randomized_fits_read_x_once_on_the_factor_route(client, rng, randomized_route,
                                                          monkeypatch):
    """The factor route makes one pass over X (no power-iteration pass); the other makes
    one per product. (Passes counted on the client, where they are submitted.)"""
    from skgpu.dask import runner

    passes = []
    submit = runner.FitRun.__call__

    def counted(self, func, *args, **kwargs):
        passes.append(func.__name__)
        return submit(self, func, *args, **kwargs)

    monkeypatch.setattr(runner.FitRun, "__call__", counted)
    Xd = da.from_array(rng.standard_normal((900, 20)), chunks=(300, -1))
    TruncatedSVD(3, n_iter=4, random_state=0).fit(Xd)
    PCA(3, svd_solver="randomized", random_state=0).fit(Xd)
    if randomized_route == "factor":
        assert passes == ["_chunk_stats", "_chunk_stats"]
    else:
        assert passes.count("_power_block") == 2 * (4 + 1) and "_chunk_stats" not in passes


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
def test_ridge(client, rng, dtype, fit_intercept, weighted):
    X, Y = _data(rng, 1500, 10, 3, dtype)
    sw = rng.uniform(0.5, 2.0, 1500) if weighted else None
    Xd, Yd = da.from_array(X, chunks=(400, -1)), da.from_array(Y, chunks=(400, -1))
    swd = None if sw is None else da.from_array(sw, chunks=400)
    params = dict(alpha=np.array([0.1, 1.0, 10.0]), fit_intercept=fit_intercept)
    ours = Ridge(**params).fit(Xd, Yd, sample_weight=swd)
    ref = Ridge(**params).fit(X, Y, sample_weight=sw)
    assert_allclose_rel(ours.coef_, ref.coef_, _tol(dtype))
    assert_allclose_rel(ours.intercept_, ref.intercept_, _tol(dtype),
                        atol_scale=np.abs(Y).max())
    P = ours.predict(Xd)
    assert isinstance(P, da.Array) and P.chunks[0] == Xd.chunks[0]
    assert_allclose_rel(P.compute(), ref.predict(X), _tol(dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("targets", ["single", "multi", "per_target"])
@pytest.mark.parametrize("weighted", [False, True])
def test_ridgecv(client, rng, dtype, fit_intercept, targets, weighted):
    X, Y = _data(rng, 1500, 10, 3, dtype)
    y = Y[:, 0] if targets == "single" else Y
    sw = rng.uniform(0.5, 2.0, 1500) if weighted else None
    Xd = da.from_array(X, chunks=(333, -1))
    yd = da.from_array(y, chunks=(333,) + y.shape[1:])
    swd = None if sw is None else da.from_array(sw, chunks=333)
    params = dict(alphas=[0.01, 1.0, 100.0, 1e4], fit_intercept=fit_intercept,
                  alpha_per_target=targets == "per_target")
    ours = RidgeCV(**params).fit(Xd, yd, sample_weight=swd)
    ref = RidgeCV(**params).fit(X, y, sample_weight=sw)
    np.testing.assert_array_equal(np.asarray(ours.alpha_), np.asarray(ref.alpha_))
    assert_allclose_rel(ours.best_score_, ref.best_score_, 1e-8)
    assert np.shape(ours.coef_) == np.shape(ref.coef_)
    assert np.asarray(ours.coef_).dtype == np.asarray(ref.coef_).dtype
    assert_allclose_rel(ours.coef_, ref.coef_, _tol(dtype))
    assert_allclose_rel(ours.predict(Xd).compute(), ref.predict(X), _tol(dtype))


def test_scalar_sample_weight(client, rng):
    X, Y = _data(rng, 600, 6, 1, np.float64)
    Xd, yd = da.from_array(X, chunks=(200, -1)), da.from_array(Y[:, 0], chunks=200)
    for Estimator in (Ridge, RidgeCV):
        ours = Estimator().fit(Xd, yd, sample_weight=2.5)
        ref = Estimator().fit(X, Y[:, 0], sample_weight=2.5)
        assert_allclose_rel(ours.coef_, ref.coef_, 1e-8)


@pytest.mark.parametrize("Estimator", [Ridge, RidgeCV])
def test_chunk_with_zero_weights(client, rng, Estimator):
    """A chunk whose rows all weigh zero adds nothing (its own mean is undefined)."""
    X, Y = _data(rng, 900, 7, 1, np.float64)
    sw = rng.uniform(0.5, 2.0, 900)
    sw[300:600] = 0.0
    Xd, yd = da.from_array(X, chunks=(300, -1)), da.from_array(Y[:, 0], chunks=300)
    ours = Estimator().fit(Xd, yd, sample_weight=da.from_array(sw, chunks=300))
    ref = Estimator().fit(X, Y[:, 0], sample_weight=sw)
    assert_allclose_rel(ours.coef_, ref.coef_, 1e-8)
    assert_allclose_rel(ours.intercept_, ref.intercept_, 1e-8, atol_scale=np.abs(Y).max())


def test_clear_errors(client, rng):
    X, Y = _data(rng, 600, 8, 1, np.float64)
    Xd = da.from_array(X, chunks=(200, -1))
    with pytest.raises(ValueError, match="svd_solver='arpack' needs the whole matrix"):
        PCA(2, svd_solver="arpack").fit(Xd)
    with pytest.raises(ValueError, match="use solver='auto' or 'cholesky'"):
        Ridge(solver="lsqr").fit(Xd, Y[:, 0])
    with pytest.raises(ValueError, match="supports cv=None"):
        RidgeCV(cv=3).fit(Xd, Y[:, 0])
    with pytest.raises(ValueError, match="scoring=None"):
        RidgeCV(scoring="r2").fit(Xd, Y[:, 0])
    with pytest.raises(ValueError, match="algorithm='arpack' needs the whole matrix"):
        TruncatedSVD(2, algorithm="arpack").fit(Xd)
    with pytest.raises(ValueError, match="n_samples >= n_features"):
        TruncatedSVD(2).fit(da.from_array(X[:5], chunks=(2, -1)))
    # (NaN, infinity and the rest: test_dask_inputs.py, against the in-memory errors)


def _gpu_chunks(cp, A, rows):
    return da.from_array(cp.asarray(A), chunks=(rows,) + A.shape[1:], asarray=False)


def _check_all_estimators(cp, rng, dtype, rows, persist=False):
    """CuPy-chunked fits equal in-memory NumPy fits; outputs stay lazy, chunked and CuPy.
    ``persist``: the chunks in the cluster's memory (one task per worker and pass)."""
    X, Y = _data(rng, 2400, 12, 1, dtype)
    y = Y[:, 0]
    Xd, yd = _gpu_chunks(cp, X, rows), _gpu_chunks(cp, y, rows)
    if persist:
        Xd, yd = distributed.get_client().persist([Xd, yd])
        distributed.wait([Xd, yd])
    pca = PCA(n_components=4).fit(Xd)
    ref = PCA(n_components=4, svd_solver="covariance_eigh").fit(X)
    for name in ("components_", "explained_variance_", "mean_"):
        assert_allclose_rel(getattr(pca, name), getattr(ref, name), _tol(dtype))
    full = PCA(n_components=4, svd_solver="full").fit(Xd)
    ref_full = PCA(n_components=4, svd_solver="full").fit(X)
    for name in ("components_", "singular_values_", "mean_"):
        assert_allclose_rel(getattr(full, name), getattr(ref_full, name), _tol(dtype))
    Z = pca.transform(Xd)
    assert isinstance(Z, da.Array) and Z.chunks[0] == Xd.chunks[0]
    Zc = Z.compute()
    assert isinstance(Zc, cp.ndarray)
    assert_allclose_rel(cp.asnumpy(Zc), ref.transform(X), _tol(dtype))
    params = dict(n_components=3, n_iter=4, random_state=0)
    svd, svd_ref = TruncatedSVD(**params).fit(Xd), TruncatedSVD(**params).fit(X)
    assert_allclose_rel(svd.singular_values_, svd_ref.singular_values_, _tol(dtype))
    alphas = [0.01, 1.0, 100.0]
    cv, cv_ref = RidgeCV(alphas=alphas).fit(Xd, yd), RidgeCV(alphas=alphas).fit(X, y)
    assert cv.alpha_ == cv_ref.alpha_
    assert_allclose_rel(cv.coef_, cv_ref.coef_, _tol(dtype))
    assert_allclose_rel(cp.asnumpy(cv.predict(Xd).compute()), cv_ref.predict(X), _tol(dtype))
    ridge, ridge_ref = Ridge(alpha=3.0).fit(Xd, yd), Ridge(alpha=3.0).fit(X, y)
    assert_allclose_rel(ridge.coef_, ridge_ref.coef_, _tol(dtype))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("persist", [False, True])
def test_cupy_chunks(client, rng, dtype, persist):
    """CuPy chunks on the (threaded) LocalCluster: every chunk's work runs on the GPU."""
    cp = pytest.importorskip("cupy")
    _check_all_estimators(cp, rng, dtype, 500, persist)


@pytest.mark.gpu
def test_dask_cuda_workers():
    """dask-cuda's LocalCUDACluster, one worker per visible GPU (at most two here)."""
    cp = pytest.importorskip("cupy")
    dask_cuda = pytest.importorskip("dask_cuda")
    n_gpus = min(2, cp.cuda.runtime.getDeviceCount())
    with dask_cuda.LocalCUDACluster(n_workers=n_gpus, threads_per_worker=1,
                                    dashboard_address=None) as cluster, \
            distributed.Client(cluster) as cuda_client:
        assert len(cuda_client.scheduler_info()["workers"]) == n_gpus
        for persist in (False, True):
            _check_all_estimators(cp, np.random.default_rng(7), np.float64, 300, persist)


def _count_group_tasks(func, moves_data=False):
    """``func()`` and its count of chunk-group tasks; unless ``moves_data``, none of them
    may fetch data from another worker (y persisted apart from X may have to move)."""
    with distributed.get_task_stream() as stream:
        out = func()
    tasks = [t for t in stream.data
             if any(name in str(t["key"]) for name in ("pass_task", "_loo_task"))]
    if not moves_data:
        assert not [p for t in tasks for p in t["startstops"] if p["action"] == "transfer"]
    return out, len(tasks)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("weighted", [False, True])
def test_persisted_chunks_run_one_task_per_worker(client, rng, dtype, weighted):
    """Persisted data: every pass is one task per worker holding chunks (here 2), run
    where the chunks are, and the fits equal in-memory ones."""
    X, Y = _data(rng, 2000, 9, 1, dtype)
    y = Y[:, 0]
    sw = rng.uniform(0.5, 2.0, 2000) if weighted else None
    Xd, yd = client.persist([da.from_array(X, chunks=(250, -1)),
                             da.from_array(y, chunks=250)])
    swd = None if sw is None else client.persist(da.from_array(sw, chunks=250))
    distributed.wait([Xd, yd] + ([] if swd is None else [swd]))
    holders = len({w for ws in client.who_has(distributed.futures_of(Xd)).values()
                   for w in ws})
    assert holders == len(client.scheduler_info()["workers"]) == 2
    pca, tasks = _count_group_tasks(lambda: PCA(3).fit(Xd))
    assert tasks == holders
    ref = PCA(3, svd_solver="covariance_eigh").fit(X)
    for name in ("components_", "explained_variance_", "mean_"):
        assert_allclose_rel(getattr(pca, name), getattr(ref, name), _tol(dtype))
    alphas = [0.01, 1.0, 100.0]
    cv, tasks = _count_group_tasks(
        lambda: RidgeCV(alphas=alphas).fit(Xd, yd, sample_weight=swd), moves_data=True)
    assert tasks == 2 * holders  # the Gram pass and the LOO pass
    cv_ref = RidgeCV(alphas=alphas).fit(X, y, sample_weight=sw)
    assert cv.alpha_ == cv_ref.alpha_
    assert_allclose_rel(cv.best_score_, cv_ref.best_score_, 1e-8)
    assert_allclose_rel(cv.coef_, cv_ref.coef_, _tol(dtype))
    ridge = Ridge(alpha=2.0).fit(Xd, yd, sample_weight=sw)  # NumPy weights, sliced
    # (against float64 in memory: the chunks' normal equations are float64, an in-memory
    # float32 Ridge solves in float32)
    ridge_ref = Ridge(alpha=2.0).fit(X.astype(np.float64), y, sample_weight=sw)
    assert_allclose_rel(ridge.coef_, ridge_ref.coef_, _tol(dtype))
    params = dict(n_components=3, n_iter=4, random_state=0)
    svd = TruncatedSVD(**params).fit(Xd)
    assert_allclose_rel(svd.singular_values_, TruncatedSVD(**params).fit(X).singular_values_,
                        _tol(dtype))
    prc = PCA(3, svd_solver="randomized", random_state=0).fit(Xd)
    assert_allclose_rel(prc.explained_variance_, PCA(3, svd_solver="randomized",
                                                     random_state=0).fit(X).explained_variance_,
                        _tol(dtype))


def test_persisted_chunks_one_task_per_worker_thread(rng):
    """Workers of two threads: each pass is one task per thread of a worker holding
    chunks (each reading a consecutive run of them there), so no thread idles; the fits
    equal in-memory ones."""
    from skgpu.dask import runner

    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=2, processes=False,
                                       dashboard_address=":0")
    with cluster, distributed.Client(cluster) as client:
        client.wait_for_workers(2)
        X, Y = _data(rng, 2200, 8, 2, np.float64)
        Xd, Yd = client.persist([da.from_array(X, chunks=(200, -1)),
                                 da.from_array(Y, chunks=(200, -1))])
        distributed.wait([Xd, Yd])
        held = client.has_what()
        expected = sum(min(2, len(keys)) for keys in held.values() if keys)
        plan = runner.locality_plan(Xd, [Yd])
        assert len(plan.groups) == expected >= 2  # (two at least: 11 chunks, 2 threads)
        assert sorted(i for _, idx in plan.groups for i in idx) == list(range(11))
        for worker, idx in plan.groups:  # a run of what the worker holds, in order
            mine = [i for w, ix in plan.groups if w == worker for i in ix]
            assert idx == mine[mine.index(idx[0]):][:len(idx)]
        pca, tasks = _count_group_tasks(lambda: PCA(3).fit(Xd))
        assert tasks == expected
        ref = PCA(3, svd_solver="covariance_eigh").fit(X)
        for name in ("components_", "explained_variance_", "mean_"):
            assert_allclose_rel(getattr(pca, name), getattr(ref, name), 1e-8)
        cv, tasks = _count_group_tasks(lambda: RidgeCV(alphas=[0.1, 1.0, 10.0]).fit(Xd, Yd),
                                       moves_data=True)  # (Y persisted apart from X)
        assert tasks == 2 * expected  # the Gram pass and the LOO pass
        cv_ref = RidgeCV(alphas=[0.1, 1.0, 10.0]).fit(X, Y)
        assert_allclose_rel(cv.coef_, cv_ref.coef_, 1e-8)
        assert_allclose_rel(cv.best_score_, cv_ref.best_score_, 1e-8)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("weighted", [False, True])
def test_chunks_on_one_worker(client, rng, dtype, weighted):
    """All chunks on one worker: each pass is one task there, and RidgeCV's two passes
    (with the factorisation between them) are a single task; fits equal in-memory ones."""
    X, Y = _data(rng, 1800, 7, 1, dtype)
    y = Y[:, 0]
    sw = rng.uniform(0.5, 2.0, 1800) if weighted else None
    worker = sorted(client.scheduler_info()["workers"])[1]
    Xd, yd = client.persist([da.from_array(X, chunks=(200, -1)), da.from_array(y, chunks=200)],
                            workers=[worker])
    distributed.wait([Xd, yd])
    pca, tasks = _count_group_tasks(lambda: PCA(3).fit(Xd))
    assert tasks == 1
    ref = PCA(3, svd_solver="covariance_eigh").fit(X)
    for name in ("components_", "explained_variance_", "mean_"):
        assert_allclose_rel(getattr(pca, name), getattr(ref, name), _tol(dtype))
    alphas = [0.01, 1.0, 100.0]
    cv, tasks = _count_group_tasks(lambda: RidgeCV(alphas=alphas).fit(Xd, yd, sample_weight=sw))
    assert tasks == 1
    cv_ref = RidgeCV(alphas=alphas).fit(X, y, sample_weight=sw)
    assert cv.alpha_ == cv_ref.alpha_
    assert_allclose_rel(cv.best_score_, cv_ref.best_score_, 1e-8)
    assert_allclose_rel(cv.coef_, cv_ref.coef_, _tol(dtype))


@pytest.mark.parametrize("persist", ["no", "spread", "one_worker"])
def test_ridgecv_conditioning_routes(client, rng, monkeypatch, caplog, persist):
    """A well-conditioned X takes two passes (Gram, LOO). Where the Gram route's R is not
    accurate enough, the LOO pass's MᵀM refines it (CholeskyQR2: one more LOO pass), and
    where even that cannot work R comes from the chunks' QR factors; every route equals
    the in-memory QR route. At cond(X) ~ 1e12 the Gram matrix (cond ~1e24) may pass or
    fail Cholesky by rounding alone, so either of the last two routes is taken there;
    the TSQR route is also forced, with Cholesky failing."""
    import logging

    import numpy.linalg

    names = {"chunk statistics (gram)": "gram", "chunk statistics (r)": "r",
             "leave-one-out": "loo"}

    def route():
        return [names[r.getMessage()[len("dask pass: "):]] for r in caplog.records
                if r.getMessage().startswith("dask pass: ")]

    def no_cholesky(a):
        raise np.linalg.LinAlgError("forced")

    caplog.set_level(logging.DEBUG, logger="skgpu")
    n, p = 1200, 6
    U = np.linalg.qr(rng.standard_normal((n, p)))[0]
    W = np.linalg.qr(rng.standard_normal((p, p)))[0]
    # (two backward-stable routes agree as far as the problem's conditioning allows:
    # with alpha=1e-6 that is ~σ_max²/alpha·eps on the coefficients)
    tsqr = ["gram", "r", "loo"]
    for cond, expected, rtol, forced in (
            (10.0, [["gram", "loo"]], 1e-8, False),
            (1e5, [["gram", "loo", "loo"]], 1e-5, False),
            (1e12, [tsqr, ["gram", "loo", "loo"]], 1e-5, False),
            (1e5, [tsqr], 1e-5, True)):
        X = (U * np.geomspace(1, 1 / cond, p)) @ W.T * 100 + rng.uniform(-1, 1, p)
        y = X @ rng.standard_normal(p) + 0.01 * rng.standard_normal(n)
        Xd, yd = da.from_array(X, chunks=(300, -1)), da.from_array(y, chunks=300)
        if persist != "no":
            workers = sorted(client.scheduler_info()["workers"])[:1]
            Xd, yd = client.persist([Xd, yd], workers=workers if persist == "one_worker"
                                    else None)
        alphas = [1e-6, 1e-3, 1.0]
        ref = RidgeCV(alphas=alphas).fit(X, y)
        caplog.clear()
        with monkeypatch.context() as patch:
            if forced:
                patch.setattr(numpy.linalg, "cholesky", no_cholesky)
            ours = RidgeCV(alphas=alphas).fit(Xd, yd)
        assert route() in expected, cond
        assert ours.alpha_ == ref.alpha_
        assert_allclose_rel(ours.coef_, ref.coef_, rtol)
        assert_allclose_rel(ours.best_score_, ref.best_score_, rtol)
