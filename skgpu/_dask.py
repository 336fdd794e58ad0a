"""Dask input: partial results per row chunk on each worker's backend, combined on the client.

Per-chunk work runs on the active dask scheduler with no scheduler or communication of
our own: with a ``dask.distributed`` Client (a LocalCluster of CPU workers, or dask-cuda's
LocalCUDACluster with one GPU per worker) and persisted data, one task per worker runs all
the chunks that worker holds (:func:`_run`); otherwise one ``dask.delayed`` task per chunk.
Each chunk's work selects a backend like an in-memory fit does (CuPy chunks run on the
GPU) and returns small results: Gram blocks and sums (PCA, Ridge, RidgeCV's first pass), R
factors (TSQR), per-alpha error sums. The client finishes on the CPU backend.

``import skgpu`` never imports dask; these functions are reached only with dask input.
"""

from __future__ import annotations

import functools

import numpy as np


def is_dask_array(X):
    return type(X).__module__.split(".")[0] == "dask" and hasattr(X, "chunks")


def check_row_chunked(X, name="X"):
    """Raise the error a user can act on unless X is 2-D and chunked along rows only."""
    if X.ndim != 2:
        raise ValueError(f"Expected a 2-D dask array for {name}, got {X.ndim} dimensions.")
    if len(X.chunks[1]) != 1:
        raise ValueError(
            f"{name} is chunked along features ({len(X.chunks[1])} column chunks); skgpu "
            f"needs row chunks with all features in each: use {name}.rechunk({{1: -1}})."
        )
    if X.dtype.kind not in "fiub":
        raise ValueError(f"{name} must be numeric, got dtype {X.dtype}.")


def _blocks(X):
    return [b for b in X.to_delayed().ravel()]


def _compute(tasks):
    import dask

    return dask.compute(*tasks)


def _vector_blocks(v, X):
    """A per-row vector (dask, NumPy or None) split like X's row chunks."""
    import dask.array as da

    if v is None:
        return [None] * len(X.chunks[0])
    if np.ndim(v) == 0:  # a scalar sample weight, as scikit-learn allows
        v = da.full(X.shape[0], float(v), chunks=(X.chunks[0],))
    if not is_dask_array(v):
        v = da.from_array(np.asarray(v), chunks=(X.chunks[0],))
    else:
        v = v.rechunk((X.chunks[0],) + v.chunks[1:])
    return list(v.to_delayed().ravel())


def _ops(block, device, operations):
    from .backends import select_backend

    return select_backend(device, operations=operations, X=block)[0]


def _finite(ops, a):
    return bool(np.isfinite(float(ops.xp.sum(a, dtype=np.float64))))


def _host(tree):
    """Device arrays in a (nested) result to NumPy, 0-d ones to Python floats."""
    if isinstance(tree, (tuple, list)):
        return type(tree)(_host(t) for t in tree)
    if tree is None or isinstance(tree, (int, float, np.ndarray, np.generic)):
        return tree
    from .backends._arrays import to_numpy

    a = to_numpy(tree)
    return float(a) if a.ndim == 0 else a


# --- running per-chunk work: one task per chunk, or one per worker ----------------------
def _group_task(func, reduce, blocks, vectors, args):
    """``func(block, *vector_blocks, *args)`` for each chunk of a group, in order;
    ``reduce`` (if given) folds the results where they are (on the worker's device), and
    only the folded result travels, as NumPy."""
    results = [func(b, *(v[i] for v in vectors), *args) for i, b in enumerate(blocks)]
    return _host(reduce(results) if reduce is not None else results)


def _persisted(client, arr, n_blocks):
    """The futures of a dask array's blocks in block order, when it is persisted on
    ``client``'s cluster (its graph is those futures); else None."""
    from distributed import futures_of

    from dask.core import flatten

    futures = {f.key: f for f in futures_of(arr) if f.client is client}
    keys = list(flatten(arr.__dask_keys__()))
    if len(keys) != n_blocks or not all(k in futures for k in keys):
        return None
    return [futures[k] for k in keys]


def _locality_plan(X, vectors):
    """With a ``dask.distributed`` client and X (and every dask vector) persisted: the
    client, each block's future, the vectors' blocks (futures or NumPy slices), and the
    blocks grouped by the worker that holds them. None otherwise."""
    try:
        from distributed import get_client, wait

        client = get_client()
    except (ImportError, ValueError):
        return None
    n_blocks = len(X.chunks[0])
    fx = _persisted(client, X, n_blocks)
    if fx is None:
        return None
    bounds = np.concatenate([[0], np.cumsum(X.chunks[0])])
    vecs = []
    for v in vectors:
        if v is None:
            vecs.append([None] * n_blocks)
        elif is_dask_array(v):
            if v.chunks[0] != X.chunks[0]:
                return None
            fv = _persisted(client, v, n_blocks)
            if fv is None:
                return None
            vecs.append(fv)
        else:
            a = np.full(X.shape[0], float(v)) if np.ndim(v) == 0 else np.asarray(v)
            vecs.append([a[lo:hi] for lo, hi in zip(bounds[:-1], bounds[1:])])
    wait(fx)
    who = client.who_has(fx)
    groups = {}
    for i, f in enumerate(fx):
        holders = who.get(f.key) or who.get(str(f.key)) or [None]
        groups.setdefault(sorted(holders)[0], []).append(i)
    return client, fx, vecs, groups


def _run(func, X, vectors=(), args=(), reduce=None):
    """Apply ``func`` to every row chunk of X (with the matching blocks of ``vectors``);
    return the per-chunk results in order, or, with ``reduce``, the reduced result of
    each group of chunks (fold them with ``reduce`` once more on the client).

    X persisted on a ``dask.distributed`` cluster: one task per worker, pinned to it,
    runs all the chunks that worker holds (no data moves, and the scheduler sees a
    handful of tasks instead of one per chunk). Otherwise one ``dask.delayed`` task per
    chunk, on whatever scheduler is active.
    """
    plan = _locality_plan(X, vectors)
    if plan is None:
        blocks = _blocks(X)
        vblocks = [_vector_blocks(v, X) for v in vectors]
        shared = _shared(args)  # one graph key for what every chunk reads
        out = _compute([_delayed(_group_task)(func, reduce, [b], [[vb[i]] for vb in vblocks],
                                              shared) for i, b in enumerate(blocks)])
        return list(out) if reduce is not None else [r for res in out for r in res]
    client, fx, vecs, groups = plan
    tasks = []
    for worker, idx in groups.items():
        where = {} if worker is None else {"workers": [worker], "allow_other_workers": False}
        tasks.append(client.submit(_group_task, func, reduce, [fx[i] for i in idx],
                                   [[v[i] for i in idx] for v in vecs], args, pure=False,
                                   **where))
    out = client.gather(tasks)
    if reduce is not None:
        return out
    order = [i for idx in groups.values() for i in idx]
    results = [None] * len(fx)
    for i, r in zip(order, [r for res in out for r in res]):
        results[i] = r
    return results


# --- pieces run on the workers ---------------------------------------------------------
def _centred(ops, block, mean, w, dtype):
    # one pass: the subtraction writes the new dtype (no converted copy first)
    X = ops.xp.subtract(ops.asarray(block), ops.asarray(mean, dtype=dtype), dtype=dtype)
    if w is not None:
        X *= ops.xp.sqrt(ops.asarray(w, dtype=dtype))[:, None]
    return X


def _chunk_stats(block, y, w, device, factor, dtype):
    """One pass over a chunk, centred by its own (weighted) means, in ``dtype``.

    Returns a part ``(ops, n_i, S_i = Σw, m_i, e_i, F_i, C_i)`` on the chunk's backend:
    the means of X and y, the chunk's centred Gram XcᵀWXc (``factor='gram'``) or the R of
    W^½Xc (``factor='r'``), and XcᵀWyc when y is given. Chunks combine exactly through
    their means (the parallel-variance identity, :func:`_fold`), so no pass for the
    global means comes first. A NaN or infinity anywhere in the chunk (even at zero
    weight) reaches its means; with ``factor='r'`` or on the CPU they are checked before
    the factorisation sees the data (F_i is then None), otherwise on the client, once.
    """
    ops = _ops(block, device, ("gram", "matmul", "qr_r"))
    xp = ops.xp
    X = ops.asarray(block, dtype=dtype)
    n_i = X.shape[0]
    wv = xp.ones(n_i, dtype=dtype) if w is None else ops.asarray(w, dtype=dtype)
    s_i = wv.sum(dtype=np.float64)
    scale = wv / xp.maximum(s_i, np.finfo(np.float64).tiny).astype(dtype)  # all-zero: 0
    m_i = scale @ X
    Y = e_i = None
    if y is not None:
        Y = ops.asarray(y, dtype=dtype).reshape(n_i, -1)
        e_i = scale @ Y
    if factor == "r" or not ops.is_gpu:  # (NumPy would warn on the arithmetic)
        means = m_i if e_i is None else xp.concatenate([m_i, e_i])
        if not np.all(np.isfinite(ops.to_host(means))):
            return ops, n_i, s_i, m_i, e_i, None, None
    # a new array (the block may be the caller's own, in-process), written in one pass
    X = xp.subtract(ops.asarray(block), m_i, dtype=dtype)
    root_w = None if w is None else xp.sqrt(wv)[:, None]
    if root_w is not None:
        X *= root_w
    F = ops.qr_r(X) if factor == "r" else ops.matmul(X.T, X)
    C = None
    if y is not None:
        Yc = Y - e_i
        if root_w is not None:
            Yc *= root_w
        C = ops.matmul(X.T, Yc)
    return ops, n_i, s_i, m_i, e_i, F, C


def _fold(parts, factor, centre=True):
    """Parts (from :func:`_chunk_stats` or earlier folds, all on one backend) into one,
    centred at their joint weighted means (``centre=False``: at zero, for a fit without
    intercept). With d_i = m_i − m and f_i = e_i − e:
    XcᵀWXc = Σ_i [G_i + S_i d_i d_iᵀ] (for R: the QR of the stacked R_i and √S_i d_iᵀ)
    and XcᵀWyc = Σ_i [C_i + S_i d_i f_iᵀ]. float64 throughout.
    """
    ops = parts[0][0]
    xp = ops.xp
    f64 = lambda a: None if a is None else ops.asarray(a, dtype=np.float64)  # noqa: E731
    parts = [(n, f64(s), f64(m), f64(e), f64(F), f64(C)) for _, n, s, m, e, F, C in parts]
    n = sum(p[0] for p in parts)
    S = sum(p[1] for p in parts)
    has_y = parts[0][3] is not None
    if centre:
        safe = xp.maximum(S, np.finfo(np.float64).tiny)
        mean = sum(p[1] * p[2] for p in parts) / safe
        y_mean = sum(p[1] * p[3] for p in parts) / safe if has_y else None
    else:
        mean = xp.zeros_like(parts[0][2])
        y_mean = xp.zeros_like(parts[0][3]) if has_y else None
    if any(p[4] is None for p in parts):  # a chunk was not finite
        return ops, n, S, mean, y_mean, None, None
    d = [p[2] - mean for p in parts]
    if factor == "r":
        rows = [p[4] for p in parts] + [xp.sqrt(p[1]) * di[None, :] for p, di in zip(parts, d)]
        F = ops.qr_r(xp.concatenate(rows))
    else:
        F = sum(p[4] + p[1] * xp.outer(di, di) for p, di in zip(parts, d))
    C = None
    if has_y:
        C = sum(p[5] + p[1] * xp.outer(di, p[3] - y_mean) for p, di in zip(parts, d))
    return ops, n, S, mean, y_mean, F, C


def _fold_without_ops(parts, factor):
    return _fold(parts, factor)[1:]


def _fold_chunks(factor):
    """The workers' reduce: a group's parts folded on its device, without the backend."""
    return functools.partial(_fold_without_ops, factor=factor)


def _loo_block(block, y, w, mean, y_mean, V, filt, MtY, w_sum, fit_intercept, device):
    """The chunk's ``(Σ_rows squared LOO errors (n_alphas, n_targets), MᵀM)`` for
    M = Xc V (MᵀM checks the orthogonality the spectrum assumed; see ridgecv_loo)."""
    ops = _ops(block, device, ("matmul",))
    xp = ops.xp
    M = ops.matmul(_centred(ops, block, mean, w, np.float64), ops.asarray(V))
    MtM = ops.matmul(M.T, M)
    n_i = M.shape[0]
    yw = _centred(ops, ops.asarray(y).reshape(n_i, -1), y_mean, w, np.float64)
    filt = ops.asarray(filt)
    D = 1.0 - ops.matmul(M * M, filt)
    if fit_intercept:
        wv = xp.ones(n_i) if w is None else ops.asarray(w, dtype=np.float64)
        D -= (wv / w_sum)[:, None]
    MtY = ops.asarray(MtY)
    ones = xp.ones(n_i)
    if yw.shape[1] == 1:  # every alpha's fit in one product
        E = (ops.matmul(M, MtY * filt) - yw) / D
        return (ones @ (E * E))[:, None], MtM
    sums = []
    for i in range(filt.shape[1]):
        E = (ops.matmul(M, MtY * filt[:, i:i + 1]) - yw) / D[:, i:i + 1]
        sums.append(ones @ (E * E))
    return xp.stack(sums), MtM


def _sum_pairs(results):
    return tuple(sum(r[j] for r in results) for j in range(len(results[0])))


# --- client side ------------------------------------------------------------------------
def _delayed(func):
    import dask

    return dask.delayed(func, pure=True)


def _shared(value):
    """One graph key for a value every chunk's task reads (not one copy per task)."""
    import dask

    return dask.delayed(value, pure=True)


def _device():
    from ._config import get_config

    return get_config()["device"]


def _stats_dtype(X, factor):
    """float32 chunks give a float32 Gram for PCA (as in memory); everything else,
    and every fold, is float64."""
    return np.float32 if factor == "gram32" and X.dtype == np.float32 else np.float64


def _combined_stats(X, y, w, fit_intercept, factor):
    """Chunk statistics folded on the workers and then on the client (one pass over X).

    Returns n, Σw, the means (zero without an intercept), the factor of the centred,
    weighted X (its Gram XcᵀWXc, or an R with RᵀR equal to that Gram) and XcᵀWyc, all
    NumPy float64. ``factor``: 'gram', 'gram32' (the chunks' Gram in float32 for float32
    X) or 'r'.
    """
    from .backends import get_backend

    kind = "r" if factor == "r" else "gram"
    parts = _run(_chunk_stats, X, (y, w), (_device(), kind, _stats_dtype(X, factor)),
                 reduce=_fold_chunks(kind))
    cpu = get_backend("cpu")
    parts = [(cpu,) + tuple(p) for p in parts]
    with np.errstate(invalid="ignore", over="ignore"):  # non-finite input: raised below
        _, n, w_sum, mean, y_mean, F, C = _fold(parts, kind, centre=fit_intercept)
        # the data's own means (zero is used without an intercept) must be finite
        _, _, _, m_all, e_all, _, _ = _fold(parts, kind) if not fit_intercept else (
            None, None, None, mean, y_mean, None, None)
    if F is None or not np.all(np.isfinite(m_all)) or (
            e_all is not None and not np.all(np.isfinite(e_all))):
        raise ValueError("Input contains NaN or infinity.")
    return n, float(w_sum), mean, y_mean, F, C


def pca_covariance(X):
    """(n, mean, covariance) of a row-chunked dask X, in float64, in one pass of chunked
    Gram blocks (float32 chunks: float32 Gram blocks, as an in-memory fit computes)."""
    check_row_chunked(X)
    n, _, mean, _, G, _ = _combined_stats(X, None, None, True, "gram32")
    if n < 2:
        raise ValueError("PCA needs at least 2 samples to estimate a covariance.")
    return n, mean, G / (n - 1)


def ridge_normal_equations(X, y, w, fit_intercept):
    """XcᵀWXc, XcᵀWyc and the means, in one pass of chunked Gram blocks."""
    check_row_chunked(X)
    _, _, mean, y_mean, G, C = _combined_stats(X, y, w, fit_intercept, "gram")
    return G, C, mean, y_mean


def ridgecv_loo(X, y, w, alphas, fit_intercept):
    """RidgeCV over row chunks, normally in two passes: the Gram matrix of the centred,
    weighted X (and XcᵀWyc), its Cholesky factor R and the SVD ``R = Ũ S Vᵀ`` on the
    client; then the LOO squared-error sums per alpha and target, each chunk using the
    small shared factors, together with MᵀM for M = Xc V.

    The second pass is also the check of the first, as in an in-memory CholeskyQR:
    ``S⁻¹ MᵀM S⁻¹`` is QᵀQ for Q = Xc R⁻¹ (rotated by Ũ), whose distance from I grows
    with cond(X)². Beyond the in-memory tolerance (plus the ~eps·cond(X) that forming
    M from the data leaves), that same matrix is CholeskyQR2's
    second Gram matrix: ``R ← chol(Ũ S⁻¹ MᵀM S⁻¹ Ũᵀ)ᵀ R`` and one more LOO pass (three
    in all). If a Cholesky factorisation fails or the check still fails, R comes from
    TSQR (the chunks' QR factors, stacked) and the LOO pass is repeated.

    Returns (mean squared LOO errors (n_alphas, n_targets), V, MtY, inverse filter, X and
    y means, n).
    """
    from .backends import get_backend

    check_row_chunked(X)
    cpu = get_backend("cpu")
    device = _device()
    n, w_sum, mean, y_mean, G, C = _combined_stats(X, y, w, fit_intercept, "gram")
    p = X.shape[1]
    eps = np.finfo(np.float64).eps
    tau = min(10.0 * eps * np.sqrt(n) * p, 1e-6)

    def loo_pass(R):
        U, s, Vt = cpu.svd(R)
        V = np.ascontiguousarray(Vt.T)
        MtY = V.T @ C  # (XwV)ᵀ yw
        inv = 1.0 / ((s * s)[:, None] + np.asarray(alphas)[None, :])
        sums, MtM = _sum_pairs(_run(
            _loo_block, X, (y, w), (mean, y_mean, V, inv, MtY, w_sum, fit_intercept, device),
            reduce=_sum_pairs))
        if not s[-1] > 0:
            return (sums / n, V, MtY, inv), np.inf, None
        QtQ = MtM / np.outer(s, s)  # Ũᵀ (QᵀQ) Ũ
        # M = Xc V is formed from the data, so even an exact R leaves ~eps·cond(X) here
        # (an in-memory fit forms the same M); beyond that and tau, R is inaccurate.
        limit = tau + 10.0 * eps * np.sqrt(p) * s[0] / s[-1]
        error = float(np.linalg.norm(QtQ - np.eye(len(s)))) / limit
        return (sums / n, V, MtY, inv), error, U @ QtQ @ U.T

    result = None
    try:
        R = np.linalg.cholesky(G).T
        for _ in range(2):  # CholeskyQR, then CholeskyQR2
            result, error, QtQ = loo_pass(R)
            if error <= 1.0:
                break
            result = None
            R = np.linalg.cholesky(QtQ).T @ R
    except np.linalg.LinAlgError:
        result = None
    if result is None:
        _, _, _, _, R, _ = _combined_stats(X, y, w, fit_intercept, "r")
        result, _, _ = loo_pass(R)
    return result + (mean, y_mean, n)


# --- randomized SVD (TruncatedSVD) -------------------------------------------------------
def _chunk(ops, block, mean):
    """The chunk on its backend, centred by ``mean`` when given (PCA)."""
    X = ops.asarray(block)
    return X if mean is None else X - ops.asarray(mean, dtype=X.dtype)


def _range_r_block(block, Q, device, mean=None):
    """R of the chunk's X_i Q (the product is not kept)."""
    ops = _ops(block, device, ("matmul", "qr_r"))
    X = _chunk(ops, block, mean)
    return ops.to_host(ops.qr_r(ops.matmul(X, ops.asarray(Q, dtype=X.dtype))))


def _range_back_block(block, Q, R_inv, device, mean=None):
    """X_iᵀ (X_i Q R⁻¹): the chunk's part of Xᵀ times the orthonormalised range."""
    ops = _ops(block, device, ("matmul",))
    X = _chunk(ops, block, mean)
    Y = ops.matmul(ops.matmul(X, ops.asarray(Q, dtype=X.dtype)),
                   ops.asarray(R_inv, dtype=X.dtype))
    return ops.to_host(ops.matmul(X.T, Y)).astype(np.float64)


def _moments_block(block, V, mean, mean_t, device):
    """Column sums (mean None) or centred sums of squares of X_i and of X_i V."""
    ops = _ops(block, device, ("matmul",))
    X = ops.asarray(block, dtype=np.float64)
    T = ops.matmul(X, ops.asarray(V))
    if mean is None:
        return ops.to_host(X.sum(axis=0)), ops.to_host(T.sum(axis=0))
    Xc, Tc = X - ops.asarray(mean), T - ops.asarray(mean_t)
    return float(ops.xp.vdot(Xc, Xc)), ops.to_host((Tc * Tc).sum(axis=0))


def _centred_sq_sum(block, mean, device):
    ops = _ops(block, device, ("matmul",))
    X = ops.asarray(block, dtype=np.float64) - ops.asarray(mean)
    return float(ops.xp.vdot(X, X))


def _chunk_sums(block, device):
    ops = _ops(block, device, ("column_mean",))
    X = ops.asarray(block, dtype=np.float64)
    return X.shape[0], ops.to_host(ops.xp.ones(X.shape[0]) @ X), _finite(ops, X)


def _means(X, device):
    """n and the column means of X (one pass), for the randomized route."""
    parts = _run(_chunk_sums, X, (), (device,))
    if not all(part[2] for part in parts):
        raise ValueError("Input contains NaN or infinity.")
    n = sum(part[0] for part in parts)
    return n, sum(part[1] for part in parts) / n


def pca_randomized(X, k, *, n_oversamples, n_iter, random_state):
    """PCA by the randomized SVD of the implicitly centred X (each chunk centred where it
    lives): (n, mean, S, Vt, total variance)."""
    check_row_chunked(X)
    device = _device()
    n, mean = _means(X, device)
    S, Vt = randomized_svd(X, k, n_oversamples=n_oversamples, n_iter=n_iter,
                           random_state=random_state, mean=mean)
    total = sum(_run(_centred_sq_sum, X, (), (mean, device), reduce=sum))
    return n, mean, S, Vt, total / (n - 1)


def randomized_svd(X, k, *, n_oversamples, n_iter, random_state, mean=None):
    """Halko et al. over row chunks, with scikit-learn's random draws: each power
    iteration is one pass for the R of X Q (TSQR), one for Xᵀ(X Q R⁻¹); the small factors
    are orthonormalised on the client. Returns (S, Vt) of the top ``k``.
    """
    from sklearn.utils import check_random_state

    from .backends import get_backend

    check_row_chunked(X)
    n, p = X.shape
    if n < p:
        raise ValueError(f"Dask input needs n_samples >= n_features, got {n} < {p}.")
    device = _device()
    cpu = get_backend("cpu")
    random_state = check_random_state(random_state)
    if n_iter == "auto":
        n_iter = 7 if k < 0.1 * min(n, p) else 4
    Q = random_state.normal(size=(p, k + n_oversamples))
    if X.dtype.kind == "f":
        Q = Q.astype(X.dtype, copy=False)

    def orthonormal_range(Q):
        R = cpu.qr_r(np.vstack(_run(_range_r_block, X, (), (Q, device, mean)))
                     .astype(np.float64))
        return np.linalg.inv(R)

    def back(Q, R_inv):
        return sum(_run(_range_back_block, X, (), (Q, R_inv, device, mean), reduce=sum))

    for _ in range(n_iter):
        Z = back(Q, orthonormal_range(Q))
        Q = np.linalg.qr(Z)[0].astype(Q.dtype, copy=False)
    Bt = back(Q, orthonormal_range(Q))
    _, s, Vt = cpu.svd(Bt.T)  # B = (X Q R⁻¹)ᵀ X, l × p
    return s[:k], Vt[:k]


def column_and_projection_variances(X, V):
    """(Σ_j var(X[:, j]), var(X V, axis=0)) in two passes (means, then centred sums)."""
    device = _device()
    n = X.shape[0]
    sums = _run(_moments_block, X, (), (V, None, None, device))
    mean, mean_t = sum(s[0] for s in sums) / n, sum(s[1] for s in sums) / n
    sq = _run(_moments_block, X, (), (V, mean, mean_t, device))
    return sum(s[0] for s in sq) / n, sum(s[1] for s in sq) / n
