"""Dask input: partial results per row chunk on each worker's backend, combined on the client.

Every function here runs its per-chunk work through ``dask.delayed`` on whatever scheduler
is active (a ``dask.distributed`` Client, e.g. a LocalCluster of CPU workers or dask-cuda's
LocalCUDACluster with one GPU per worker), with no scheduler or communication of our own.
Each chunk's work selects a backend like an in-memory fit does (CuPy chunks run on the
GPU), and returns small NumPy results: Gram blocks and sums (PCA, Ridge), R factors and
per-alpha error sums (RidgeCV's TSQR route). The client finishes on the CPU backend.

``import skgpu`` never imports dask; these functions are reached only with dask input.
"""

from __future__ import annotations

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


# --- pieces run on the workers ---------------------------------------------------------
def _centred(ops, block, mean, w, dtype):
    X = ops.asarray(block, dtype=dtype) - ops.asarray(mean, dtype=dtype)
    if w is not None:
        X *= ops.xp.sqrt(ops.asarray(w, dtype=dtype))[:, None]
    return X


def _chunk_stats(block, y, w, device, factor):
    """One pass over a chunk, centred by its own (weighted) means.

    Returns n_i, S_i = Σw, the chunk means of X and y, the chunk's centred Gram XcᵀWXc
    (``factor='gram'``) or the R of W^½Xc (``factor='r'``), XcᵀWyc when y is given, and
    whether everything was finite. Chunks combine exactly through their means (the
    parallel-variance identity), so no pass for the global means comes first.
    """
    ops = _ops(block, device, ("gram", "matmul", "qr_r"))
    xp = ops.xp
    X = ops.asarray(block, dtype=np.float64)
    n_i = X.shape[0]
    wv = xp.ones(n_i) if w is None else ops.asarray(w, dtype=np.float64)
    s_i = wv.sum()
    scale = wv / xp.maximum(s_i, np.finfo(np.float64).tiny)  # all-zero weights: zeros
    m_i = scale @ X
    Y = e_i = None
    if y is not None:
        Y = ops.asarray(y, dtype=np.float64).reshape(n_i, -1)
        e_i = scale @ Y
    # A NaN or infinity anywhere in the chunk (even at zero weight) reaches its means:
    # one check, before any factorisation sees it.
    means = ops.to_host(m_i if e_i is None else xp.concatenate([m_i, e_i]))
    if not np.all(np.isfinite(means)):
        return n_i, 0.0, None, None, None, None, False
    X = X - m_i  # a new array: the block may be the caller's own (float64, in-process)
    root_w = None if w is None else xp.sqrt(wv)[:, None]
    if root_w is not None:
        X *= root_w
    F = ops.qr_r(X) if factor == "r" else ops.matmul(X.T, X)
    C = None
    if y is not None:
        Yc = Y - e_i
        if root_w is not None:
            Yc *= root_w
        C = ops.to_host(ops.matmul(X.T, Yc))
    p = X.shape[1]
    return (n_i, float(ops.to_host(s_i)), means[:p], None if y is None else means[p:],
            ops.to_host(F), C, True)


def _loo_block(block, y, w, mean, y_mean, V, filt, MtY, w_sum, fit_intercept, device):
    """Σ over the chunk's rows of the squared LOO errors, (n_alphas, n_targets)."""
    ops = _ops(block, device, ("matmul",))
    xp = ops.xp
    M = ops.matmul(_centred(ops, block, mean, w, np.float64), ops.asarray(V))
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
        return ops.to_host(ones @ (E * E))[:, None]
    sums = []
    for i in range(filt.shape[1]):
        E = (ops.matmul(M, MtY * filt[:, i:i + 1]) - yw) / D[:, i:i + 1]
        sums.append(ones @ (E * E))
    return ops.to_host(xp.stack(sums))


# --- client side ------------------------------------------------------------------------
def _delayed(func):
    import dask

    return dask.delayed(func, pure=True)


def _shared(value):
    """One graph key for an array every chunk's task reads (not one copy per task)."""
    import dask

    return dask.delayed(value, pure=True)


def _device():
    from ._config import get_config

    return get_config()["device"]


def _combined_stats(X, y, w, fit_intercept, factor):
    """Chunk statistics combined on the client (one pass over the data).

    Returns n, Σw, the means (zero without an intercept), the factor of the centred,
    weighted X (its Gram XcᵀWXc, or an R with RᵀR equal to that Gram) and XcᵀWyc.
    With d_i = m_i − m and f_i = e_i − e for chunk i:
    XcᵀWXc = Σ_i [G_i + S_i d_i d_iᵀ] (for R: the QR of the stacked R_i and √S_i d_iᵀ) and
    XcᵀWyc = Σ_i [C_i + S_i d_i f_iᵀ].
    """
    from .backends import get_backend

    device = _device()
    parts = _compute([_delayed(_chunk_stats)(b, yb, wb, device, factor) for b, yb, wb in
                      zip(_blocks(X), _vector_blocks(y, X), _vector_blocks(w, X))])
    if not all(part[6] for part in parts):
        raise ValueError("Input contains NaN or infinity.")
    n = sum(part[0] for part in parts)
    w_sum = sum(part[1] for part in parts)
    p = X.shape[1]
    t = 0 if y is None else (1 if y.ndim == 1 else y.shape[1])
    if fit_intercept:
        mean = sum(part[1] * part[2] for part in parts) / w_sum
        y_mean = None if y is None else sum(part[1] * part[3] for part in parts) / w_sum
    else:
        mean, y_mean = np.zeros(p), (None if y is None else np.zeros(t))
    d = [part[2] - mean for part in parts]
    if factor == "r":
        stacked = [part[4] for part in parts] + [
            np.sqrt(part[1]) * di[None, :] for part, di in zip(parts, d)]
        F = get_backend("cpu").qr_r(np.vstack(stacked))
    else:
        F = sum(part[4] + part[1] * np.outer(di, di) for part, di in zip(parts, d))
    C = None
    if y is not None:
        C = sum(part[5] + part[1] * np.outer(di, part[3] - y_mean)
                for part, di in zip(parts, d))
    return n, w_sum, mean, y_mean, F, C


def _means(X, device):
    """n and the column means of X (one pass), for the randomized route."""
    parts = _compute([_delayed(_chunk_sums)(b, device) for b in _blocks(X)])
    if not all(part[2] for part in parts):
        raise ValueError("Input contains NaN or infinity.")
    n = sum(part[0] for part in parts)
    return n, sum(part[1] for part in parts) / n


def _chunk_sums(block, device):
    ops = _ops(block, device, ("column_mean",))
    X = ops.asarray(block, dtype=np.float64)
    return X.shape[0], ops.to_host(ops.xp.ones(X.shape[0]) @ X), _finite(ops, X)


def pca_covariance(X):
    """(n, mean, covariance) of a row-chunked dask X, in float64, in one pass of chunked
    Gram blocks."""
    check_row_chunked(X)
    n, _, mean, _, G, _ = _combined_stats(X, None, None, True, "gram")
    if n < 2:
        raise ValueError("PCA needs at least 2 samples to estimate a covariance.")
    return n, mean, G / (n - 1)


def ridge_normal_equations(X, y, w, fit_intercept):
    """XcᵀWXc, XcᵀWyc and the means, in one pass of chunked Gram blocks."""
    check_row_chunked(X)
    _, _, mean, y_mean, G, C = _combined_stats(X, y, w, fit_intercept, "gram")
    return G, C, mean, y_mean


def ridgecv_loo(X, y, w, alphas, fit_intercept):
    """The QR route of RidgeCV over row chunks, in two passes: TSQR for R (and XcᵀWyc)
    with the SVD of R on the client, then the LOO squared-error sums per alpha and target,
    each chunk using the small shared factors. Returns (mean squared LOO errors
    (n_alphas, n_targets), V, MtY, lam, means).
    """
    from .backends import get_backend

    check_row_chunked(X)
    device = _device()
    n, w_sum, mean, y_mean, R, C = _combined_stats(X, y, w, fit_intercept, "r")
    _, s, Vt = get_backend("cpu").svd(R)
    V = np.ascontiguousarray(Vt.T)
    lam = s * s
    MtY = V.T @ C  # (XwV)ᵀ yw
    inv = 1.0 / (lam[:, None] + np.asarray(alphas)[None, :])
    shared = [_shared(a) for a in (mean, y_mean, V, inv, MtY)]
    sums = sum(_compute([_delayed(_loo_block)(b, yb, wb, *shared[:3], shared[3], shared[4],
                                              w_sum, fit_intercept, device)
                         for b, yb, wb in zip(_blocks(X), _vector_blocks(y, X),
                                              _vector_blocks(w, X))]))
    return sums / n, V, MtY, inv, mean, y_mean, n


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


def pca_randomized(X, k, *, n_oversamples, n_iter, random_state):
    """PCA by the randomized SVD of the implicitly centred X (each chunk centred where it
    lives): (n, mean, S, Vt, total variance)."""
    check_row_chunked(X)
    device = _device()
    n, mean = _means(X, device)
    S, Vt = randomized_svd(X, k, n_oversamples=n_oversamples, n_iter=n_iter,
                           random_state=random_state, mean=mean)
    total = sum(_compute([_delayed(_centred_sq_sum)(b, mean, device) for b in _blocks(X)]))
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
    blocks = _blocks(X)

    def orthonormal_range(Q):
        Qs, ms = _shared(Q), _shared(mean)
        R = cpu.qr_r(np.vstack(_compute([_delayed(_range_r_block)(b, Qs, device, ms)
                                         for b in blocks])).astype(np.float64))
        return np.linalg.inv(R)

    for _ in range(n_iter):
        R_inv = orthonormal_range(Q)
        args = [_shared(a) for a in (Q, R_inv, mean)]
        Z = sum(_compute([_delayed(_range_back_block)(b, args[0], args[1], device, args[2])
                          for b in blocks]))
        Q = np.linalg.qr(Z)[0].astype(Q.dtype, copy=False)
    R_inv = orthonormal_range(Q)
    args = [_shared(a) for a in (Q, R_inv, mean)]
    Bt = sum(_compute([_delayed(_range_back_block)(b, args[0], args[1], device, args[2])
                       for b in blocks]))
    _, s, Vt = cpu.svd(Bt.T)  # B = (X Q R⁻¹)ᵀ X, l × p
    return s[:k], Vt[:k]


def column_and_projection_variances(X, V):
    """(Σ_j var(X[:, j]), var(X V, axis=0)) in two passes (means, then centred sums)."""
    device = _device()
    n = X.shape[0]
    blocks = _blocks(X)
    sums = _compute([_delayed(_moments_block)(b, V, None, None, device) for b in blocks])
    mean, mean_t = sum(s[0] for s in sums) / n, sum(s[1] for s in sums) / n
    sq = _compute([_delayed(_moments_block)(b, V, mean, mean_t, device) for b in blocks])
    return sum(s[0] for s in sq) / n, sum(s[1] for s in sq) / n
