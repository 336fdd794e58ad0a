"""The chunked algorithms over row-chunked dask arrays: the pieces each worker runs on its
chunks, and the client's folds. The passes are run by :mod:`.runner`.

Per chunk the workers return small results: Gram blocks and sums (PCA, Ridge, RidgeCV's
first pass), R factors (TSQR), per-alpha error sums. The client finishes on the CPU
backend, except PCA's eigensolve (on the client's GPU when it has one) and the SVD of
RidgeCV's small factor, which runs where that step runs (on the workers when the passes
are chained, see :func:`ridgecv_loo`) and on the GPU there when there is one.
"""

from __future__ import annotations

import functools
import logging
from typing import Any, NamedTuple

import numpy as np
import scipy.linalg as sla

from ..utils.validation import check_row_chunked
from . import runner
from .input import InvalidChunks

logger = logging.getLogger("skgpu")


# --- pieces run on the workers ---------------------------------------------------------
def _centred(ops, block, mean, w, dtype):
    # one pass: the subtraction writes the new dtype (no converted copy first)
    X = ops.xp.subtract(ops.asarray(block), mean, dtype=dtype)
    if w is not None:
        X *= ops.xp.sqrt(ops.asarray(w, dtype=dtype))[:, None]
    return X


class Stats(NamedTuple):
    """A chunk's statistics, or the fold of several.

    ``n`` rows of total weight ``weight`` (Σw); X's column means ``anchor + mean`` and
    y's ``y_anchor + y_mean`` (an anchor carries a large offset, the small remainder its
    digits: a float64 mean of 1e9 holds only ~1e-7 of the spread; a None anchor is
    zero); ``factor``, the centred weighted Gram XcᵀWXc or an R with RᵀR equal to it;
    ``cross``, XcᵀWyc (None without y). ``mean`` None: a weight was negative or NaN;
    ``factor`` None: the data is not finite. ``ops``: the backend the arrays are on (None
    in results sent back to the client). The whole data's, on the client
    (:func:`_combined_stats`): NumPy float64, no anchors (the means are whole), the means
    zero without an intercept.
    """

    ops: Any
    n: int
    weight: float
    mean: Any
    y_mean: Any
    factor: Any
    cross: Any
    anchor: Any = None
    y_anchor: Any = None


class Factor(NamedTuple):
    """What only the client reads of a LOO pass's arguments: n, the factor R
    (RᵀR = XcᵀWXc), C = XcᵀWyc, and R's SVD factors Ũ and s."""

    n: int
    R: Any
    C: Any
    U: Any
    s: Any


class LooArgs(NamedTuple):
    """The LOO pass's shared arguments, sent to every chunk (:func:`_loo_block` takes
    them in this order): the means, V of R's SVD, the inverse filters 1/(s² + α) per
    alpha, MᵀY = Vᵀ XcᵀWyc, Σw, the intercept flag, and the client's :class:`Factor`."""

    mean: Any
    y_mean: Any
    V: Any
    filt: Any
    MtY: Any
    w_sum: float
    fit_intercept: bool
    info: Factor


class LooResult(NamedTuple):
    """:func:`ridgecv_loo`'s answer: the mean squared LOO errors (n_alphas, n_targets),
    V, MᵀY and the inverse filters (the coefficients of any alpha are
    ``V @ (MtY * filt[:, [i]])``), the means and n."""

    mse: Any
    V: Any
    MtY: Any
    filt: Any
    mean: Any
    y_mean: Any
    n: int


def _chunk_stats(ops, block, y, w, factor, dtype):
    """One pass over a chunk, centred by its own (weighted) means, in ``dtype``: its
    :class:`Stats`, on the chunk's backend. Chunks combine exactly through their means
    (the parallel-variance identity, :func:`_fold`), so no pass for the global means
    comes first. The means are anchored (the first estimate, and the centred data's own
    small mean beside it), so large offsets combine to the digits an in-memory fit
    keeps. A NaN or infinity anywhere in the chunk (even at zero weight) reaches its
    means; with ``factor='r'`` or on the CPU they are checked before the factorisation
    sees the data (``factor`` is then None), otherwise on the client, once.
    """
    xp = ops.xp
    X = ops.asarray(block, dtype=dtype)
    n_i = X.shape[0]
    Y = None if y is None else ops.asarray(y, dtype=dtype).reshape(n_i, -1)
    if w is None:
        s_i = float(n_i)
        scale = None
        m_i = ops.column_mean(X)
        e_i = None if Y is None else ops.column_mean(Y)
    else:
        wv = ops.asarray(w, dtype=dtype)
        if n_i and not float(wv.min()) >= 0:  # negative (or NaN): the client says which
            return Stats(ops, n_i, float(n_i), None, None, None, None)
        s_i = wv.sum(dtype=np.float64)
        # in float64: all-zero weights give zero means, not 0/0
        scale = (wv / xp.maximum(s_i, np.finfo(np.float64).tiny)).astype(dtype)
        m_i = scale @ X
        e_i = None if Y is None else scale @ Y
    if factor == "r" or ops.finite_check == "input":  # (NumPy would warn on the arithmetic)
        means = m_i if e_i is None else xp.concatenate([m_i, e_i])
        if not np.all(np.isfinite(ops.to_host(means))):
            return Stats(ops, n_i, s_i, m_i, e_i, None, None)
    if factor == "gram" and Y is None and w is None:
        # PCA: the chunk's Gram matrix with its mean folded in, no centred copy, as in
        # memory (constant columns exact; large offsets formed again from shifted data)
        anchor, rest, G = ops.centred_gram(X, mean=m_i, anchored=True)
        if rest is None:
            return Stats(ops, n_i, s_i, anchor, None, G, None)
        return Stats(ops, n_i, s_i, rest, None, G, None, anchor)
    # a new array (the block may be the caller's own, in-process), written in one pass.
    # Its own small mean δ (the rounding of m_i: large where the offset is) is kept apart:
    # with Σ w (x - m_i) = S δ, the Gram about the exact mean is XcᵀWXc - S δδᵀ and the
    # cross term XcᵀWYc - S δ fᵀ (f: Yc's mean); the QR takes the data, δ removed first
    # (then Σ w (x - m_i - δ) = 0 and the cross term needs no correction)
    X = xp.subtract(ops.asarray(block), m_i, dtype=dtype)
    delta = _mean_of(ops, X, scale)
    if factor == "r":
        X -= delta
    root_w = None if w is None else xp.sqrt(wv)[:, None]
    if root_w is not None:
        X *= root_w
    if factor == "r":
        F = ops.qr_r(X)
    else:
        F = ops.matmul(X.T, X)
        F -= (s_i * xp.outer(delta, delta)).astype(F.dtype)
    C = y_delta = None
    if Y is not None:
        Yc = Y - e_i
        y_delta = _mean_of(ops, Yc, scale)
        if root_w is not None:
            Yc *= root_w
        C = ops.matmul(X.T, Yc)
        if factor != "r":
            C -= (s_i * xp.outer(delta, y_delta)).astype(C.dtype)
    return Stats(ops, n_i, s_i, delta, y_delta, F, C, m_i, e_i)


def _mean_of(ops, X, scale):
    """The (weighted) column mean of X; zero for an empty X."""
    if X.shape[0] == 0:
        return ops.xp.zeros(X.shape[1], dtype=X.dtype)
    return ops.column_mean(X) if scale is None else scale @ X


def _stacked(ops, values):
    """Equal-shaped arrays (or scalars) of one backend as one float64 array, stacked."""
    xp = ops.xp
    if all(isinstance(v, (int, float)) for v in values):
        return xp.asarray(np.asarray(values, dtype=np.float64))
    return xp.stack([ops.asarray(v) for v in values]).astype(np.float64, copy=False)


def _fold(parts, factor, centre=True):
    """:class:`Stats` (from :func:`_chunk_stats` or earlier folds, all on one backend)
    into one, centred at their joint weighted means (``centre=False``: at zero, for a fit
    without intercept). With d_i = m_i − m and f_i = e_i − e:
    XcᵀWXc = Σ_i [G_i + S_i d_i d_iᵀ] (for R: the QR of the stacked R_i and √S_i d_iᵀ)
    and XcᵀWyc = Σ_i [C_i + S_i d_i f_iᵀ]. The means are taken about the first part's
    anchor (the anchors' differences are exact where they are large). float64
    throughout, with the parts stacked: a few operations however many parts there are.
    """
    ops = parts[0].ops
    xp = ops.xp
    n = sum(p.n for p in parts)
    if any(p.mean is None for p in parts):  # a chunk's weights were refused
        return Stats(ops, n, float(n), None, None, None, None)
    S = _stacked(ops, [p.weight for p in parts])
    M, anchor = _about_first_anchor(ops, [p.mean for p in parts], [p.anchor for p in parts])
    has_y = parts[0].y_mean is not None
    E, y_anchor = _about_first_anchor(
        ops, [p.y_mean for p in parts], [p.y_anchor for p in parts]) if has_y else (None, None)
    S_sum = S.sum()
    if centre:
        safe = xp.maximum(S_sum, np.finfo(np.float64).tiny)
        mean = (S @ M) / safe
        y_mean = (S @ E) / safe if has_y else None
    else:  # centred at zero: the anchors join the means
        M = M if anchor is None else M + anchor
        E = E if y_anchor is None else E + y_anchor
        anchor = y_anchor = None
        mean = xp.zeros(M.shape[1])
        y_mean = xp.zeros(E.shape[1]) if has_y else None
    if any(p.factor is None for p in parts):  # a chunk was not finite, or had a bad weight
        return Stats(ops, n, S_sum, None, None, None, None)
    D = M - mean
    SD = D * S[:, None]
    if factor == "r":
        rows = [ops.asarray(p.factor, dtype=np.float64) for p in parts]
        F = ops.qr_r(xp.concatenate(rows + [D * xp.sqrt(S)[:, None]]))
    else:
        F = _stacked(ops, [p.factor for p in parts]).sum(axis=0) + SD.T @ D
    C = None
    if has_y:
        C = _stacked(ops, [p.cross for p in parts]).sum(axis=0) + SD.T @ (E - y_mean)
    return Stats(ops, n, S_sum, mean, y_mean, F, C, anchor, y_anchor)


def _about_first_anchor(ops, means, anchors):
    """The parts' means (stacked, float64) about the first part's anchor, and that
    anchor (None if no part has one)."""
    M = _stacked(ops, means)
    if all(a is None for a in anchors):
        return M, None
    zero = ops.xp.zeros(M.shape[1])
    A = _stacked(ops, [zero if a is None else a for a in anchors])
    return M + (A - A[0]), A[0]


def _fold_without_ops(parts, factor):
    return _fold(parts, factor)._replace(ops=None)


def _fold_chunks(factor):
    """The workers' reduce: a group's parts folded on its device, without the backend."""
    return functools.partial(_fold_without_ops, factor=factor)


def _loo_block(ops, block, y, w, mean, y_mean, V, filt, MtY, w_sum, fit_intercept,
               info=None):
    """The chunk's ``(Σ_rows squared LOO errors (n_alphas, n_targets), MᵀM)`` for
    M = Xc V (MᵀM checks the orthogonality the spectrum assumed; see ridgecv_loo).
    ``info``: what only the client reads (see :func:`_loo_args`)."""
    xp = ops.xp
    M = ops.matmul(_centred(ops, block, mean, w, np.float64), V)
    MtM = ops.matmul(M.T, M)
    n_i = M.shape[0]
    yw = _centred(ops, ops.asarray(y).reshape(n_i, -1), y_mean, w, np.float64)
    D = ops.matmul(M * M, filt)  # the leverages h_i per alpha; D = 1 - h_i (- w_i/Σw)
    xp.subtract(1.0, D, out=D)
    if fit_intercept:
        if w is None:
            D -= 1.0 / w_sum
        else:
            D -= (ops.asarray(w, dtype=np.float64) / w_sum)[:, None]
    ones = xp.ones(n_i)
    if yw.shape[1] == 1:  # every alpha's fit in one product
        E = ops.matmul(M, MtY * filt)
        E -= yw
        E /= D
        return (ones @ (E * E))[:, None], MtM
    sums = []
    for i in range(filt.shape[1]):
        E = (ops.matmul(M, MtY * filt[:, i:i + 1]) - yw) / D[:, i:i + 1]
        sums.append(ones @ (E * E))
    return xp.stack(sums), MtM



# --- client side ------------------------------------------------------------------------
def _stats_dtype(X, factor):
    """float32 chunks give a float32 Gram for PCA (as in memory); everything else,
    and every fold, is float64."""
    return np.float32 if factor == "gram32" and X.dtype == np.float32 else np.float64


def _combined_stats(X, y, w, fit_intercept, factor, run=None):
    """Chunk statistics folded on the workers and then on the client (one pass over X).

    Returns n, Σw, the means (zero without an intercept), the factor of the centred,
    weighted X (its Gram XcᵀWXc, or an R with RᵀR equal to that Gram) and XcᵀWyc, all
    NumPy float64. ``factor``: 'gram', 'gram32' (the chunks' Gram in float32 for float32
    X) or 'r'. ``run``: a :func:`.runner.for_fit` for X, y and w (made here if not given).
    """
    run = runner.for_fit(X, (y, w)) if run is None else run
    kind = "r" if factor == "r" else "gram"
    logger.debug("dask pass: chunk statistics (%s)", factor)
    parts = run(_chunk_stats, args=(kind, _stats_dtype(X, factor)), reduce=_fold_chunks(kind),
                operations=("gram", "matmul", "qr_r"))
    return _finish_stats(parts, kind, fit_intercept)


def _finish_stats(parts, kind, fit_intercept):
    """The groups' folded statistics (NumPy) folded into the whole's, checked finite."""
    from ..backends import get_backend

    cpu = get_backend("cpu")
    parts = [p._replace(ops=cpu) for p in parts]
    with np.errstate(invalid="ignore", over="ignore"):  # non-finite input: raised below
        whole = _fold(parts, kind, centre=fit_intercept)
        # the data's own means (zero is used without an intercept) must be finite
        data = whole if fit_intercept else _fold(parts, kind)
        mean, y_mean = _anchored(whole.mean, whole.anchor), _anchored(whole.y_mean,
                                                                      whole.y_anchor)
        m_all, e_all = _anchored(data.mean, data.anchor), _anchored(data.y_mean,
                                                                    data.y_anchor)
    if whole.factor is None or m_all is None or not np.all(np.isfinite(m_all)) or (
            e_all is not None and not np.all(np.isfinite(e_all))):
        raise InvalidChunks()
    return Stats(None, whole.n, float(whole.weight), mean, y_mean, whole.factor,
                 whole.cross)


def _anchored(mean, anchor):
    return mean if anchor is None or mean is None else anchor + mean


def pca_covariance(X):
    """(n, mean, covariance) of a row-chunked dask X, in float64, in one pass of chunked
    Gram blocks (float32 chunks: float32 Gram blocks, as an in-memory fit computes)."""
    check_row_chunked(X)
    whole = _combined_stats(X, None, None, True, "gram32")
    if whole.n < 2:
        raise ValueError("PCA needs at least 2 samples to estimate a covariance.")
    return whole.n, whole.mean, whole.factor / (whole.n - 1)


def pca_r_factor(X):
    """(n, mean, R) of a row-chunked dask X, with RᵀR the centred Gram matrix XcᵀXc, in
    one pass of chunked R factors (TSQR, each chunk centred by its own mean, folded
    exactly): the SVD of R is that of Xc (its singular values and right vectors), as
    accurate as the in-memory 'full' solver's, where a Gram matrix squares the
    condition."""
    check_row_chunked(X)
    whole = _combined_stats(X, None, None, True, "r")
    return whole.n, whole.mean, whole.factor


def ridge_normal_equations(X, y, w, fit_intercept):
    """XcᵀWXc, XcᵀWyc and the means, in one pass of chunked Gram blocks."""
    check_row_chunked(X)
    whole = _combined_stats(X, y, w, fit_intercept, "gram")
    return whole.factor, whole.cross, whole.mean, whole.y_mean


def _small_svd(R, device):
    """SVD of a small square factor, on the GPU where this process can use one (cuSOLVER
    beats the one-thread LAPACK of a dask worker), else with NumPy."""
    from ..backends import select_backend

    # ('gpu' asks for the chunks' work; this step may run where there is no GPU)
    ops = select_backend("cpu" if device == "cpu" else "auto", operations=("svd",))[0]
    U, s, Vt = ops.svd(ops.asarray(R))
    return ops.to_host(U), ops.to_host(s), ops.to_host(Vt)


def _small_eigh(G, device):
    """Eigenvalues (descending) and eigenvectors of a small symmetric matrix, on the GPU
    where this process can use one, as :func:`_small_svd`."""
    from ..backends import select_backend

    ops = select_backend("cpu" if device == "cpu" else "auto", operations=("eigh",))[0]
    w, V = ops.eigh(ops.asarray(G))
    return ops.to_host(w), ops.to_host(V)


def _loo_args(whole, R, alphas, fit_intercept, device, svd=None) -> LooArgs:
    """The LOO pass's shared arguments for the data's :class:`Stats` statistics and a
    factor R (RᵀR = XcᵀWXc; ``whole.factor`` is not read): the SVD ``R = Ũ S Vᵀ``
    (``svd``, when the caller has it), MᵀY = Vᵀ XcᵀWyc and the inverse filters
    1/(s² + α)."""
    U, s, Vt = _small_svd(R, device) if svd is None else svd
    V = np.ascontiguousarray(Vt.T)
    MtY = V.T @ whole.cross  # (XwV)ᵀ yw
    filt = 1.0 / ((s * s)[:, None] + np.asarray(alphas)[None, :])
    return LooArgs(whole.mean, whole.y_mean, V, filt, MtY, whole.weight, fit_intercept,
                   Factor(whole.n, R, whole.cross, U, s))


def _loo_args_from_gram(stats, alphas, fit_intercept, device) -> LooArgs:
    """:func:`_loo_args` for the factor R = S Vᵀ of XcᵀWXc = V S² Vᵀ (``stats``, the
    :class:`Stats` of the Gram pass), from the Gram's
    eigendecomposition (so Ũ = I); a LinAlgError if the Gram's Cholesky factorisation
    fails (it is not positive definite to working precision: the TSQR route).

    It is as accurate as the SVD of the Gram's Cholesky factor (both start from the
    Gram, whose rounding bounds them), and it is on each fit's critical path between
    the passes: 256 × 256 on the H200 host, one thread's LAPACK as in a dask worker
    beside it, cuSOLVER's syevd took 2.5 ms, the Cholesky factor's SVD 9.8 ms (gesvd;
    NumPy's 14.3 ms)."""
    np.linalg.cholesky(stats.factor)  # the test only (~1 ms at 256 × 256 on one core)
    lam, V = _small_eigh(stats.factor, device)
    if not lam[-1] > 0:
        raise np.linalg.LinAlgError("the Gram matrix is not positive definite")
    s = np.sqrt(lam)
    Vt = np.ascontiguousarray(V.T)
    return _loo_args(stats, s[:, None] * Vt, alphas, fit_intercept, device,
                     svd=(np.eye(len(s)), s, Vt))


def _gram_to_loo_args(parts, alphas, fit_intercept, device):
    """The Gram pass's groups to the LOO pass's arguments: the task between the two
    passes on a worker when they are chained (its errors reach the client)."""
    return _loo_args_from_gram(_finish_stats(parts, "gram", fit_intercept), alphas,
                               fit_intercept, device)


_GRAM_ARGS = ("gram", np.float64)
_GRAM_OPERATIONS = ("gram", "matmul", "qr_r")


def _loo_task(blocks, vectors, first, parts, alphas, fit_intercept, device):
    """RidgeCV's LOO pass over one group of chunks, chained to the Gram pass on the
    worker: the factorisation from the Gram pass's ``parts`` (every group's; None: this
    is the only group, and its Gram pass runs here first), then the group's LOO sums.
    Returns (sums, the LOO arguments), the arguments from the ``first`` group only."""
    if parts is None:
        parts = [runner.group_task(_chunk_stats, _fold_chunks("gram"), blocks, vectors,
                                   _GRAM_ARGS, device, _GRAM_OPERATIONS)]
    args = _gram_to_loo_args(parts, alphas, fit_intercept, device)
    sums = runner.group_task(_loo_block, runner.sum_pairs, blocks, vectors, args, device,
                             ("matmul",))
    return sums, (args if first else None)


def _checked_loo(args, sums, MtM):
    """A LOO pass's result and the check of its R (see :func:`ridgecv_loo`):
    ``(LooResult, error / limit, QᵀQ)``; QᵀQ None where R is singular."""
    eps = np.finfo(np.float64).eps
    n, s, U = args.info.n, args.info.s, args.info.U
    p = len(s)
    result = LooResult(sums / n, args.V, args.MtY, args.filt, args.mean, args.y_mean, n)
    if not s[-1] > 0:
        return result, np.inf, None
    QtQ = MtM / np.outer(s, s)  # Ũᵀ (QᵀQ) Ũ
    # M = Xc V is formed from the data, so even an exact R leaves ~eps·cond(X) here
    # (an in-memory fit forms the same M); beyond that and tau, R is inaccurate.
    tau = min(10.0 * eps * np.sqrt(n) * p, 1e-6)
    limit = tau + 10.0 * eps * np.sqrt(p) * s[0] / s[-1]
    error = float(np.linalg.norm(QtQ - np.eye(p))) / limit
    return result, error, U @ QtQ @ U.T


def ridgecv_loo(X, y, w, alphas, fit_intercept):
    """RidgeCV over row chunks, normally in two passes: the Gram matrix of the centred,
    weighted X (and XcᵀWyc), checked positive definite by its Cholesky factorisation,
    and its eigendecomposition V S² Vᵀ, giving the factor R = S Vᵀ (RᵀR is the Gram;
    its SVD ``R = Ũ S Vᵀ`` has Ũ = I); then the
    LOO squared-error sums per alpha and target, each chunk using the small shared
    factors, together with MᵀM for M = Xc V. On a distributed cluster with persisted
    data the two passes are submitted as one graph and the client waits once: each
    group's LOO task starts with the factorisation, from every group's Gram part (no
    task of its own between the passes, so one scheduler round trip fewer), and with
    all chunks in one group (one worker of one thread) both passes are a single task
    (:func:`_loo_task`).

    The second pass is also the check of the first, as in an in-memory CholeskyQR:
    ``S⁻¹ MᵀM S⁻¹`` is QᵀQ for Q = Xc R⁻¹ (rotated by Ũ), whose distance from I grows
    with cond(X)². Beyond the in-memory tolerance (plus the ~eps·cond(X) that forming
    M from the data leaves), that same matrix is CholeskyQR2's
    second Gram matrix: ``R ← chol(Ũ S⁻¹ MᵀM S⁻¹ Ũᵀ)ᵀ R`` and one more LOO pass (three
    in all). If a Cholesky factorisation fails or the check still fails, R comes from
    TSQR (the chunks' QR factors, stacked) and the LOO pass is repeated. Each pass is
    logged (DEBUG, "skgpu").

    Returns a :class:`LooResult`.
    """
    check_row_chunked(X)
    device = runner.configured_device()
    run = runner.for_fit(X, (y, w))
    plan = run.plan  # the graph below submits on it directly

    def loo_pass(args):
        logger.debug("dask pass: leave-one-out")
        return _checked_loo(args, *runner.sum_pairs(run(_loo_block, args=args,
                                                        reduce=runner.sum_pairs)))

    result = args = None
    try:
        if plan:
            logger.debug("dask pass: chunk statistics (gram)")
            # one group (all chunks on one worker of one thread): both passes in one task
            parts = None if len(plan.groups) == 1 else runner.submit(
                plan, _chunk_stats, _GRAM_ARGS, _fold_chunks("gram"), _GRAM_OPERATIONS, device)
            out = runner.gather(plan.client, runner.per_group(plan, _loo_task, parts, alphas,
                                                          fit_intercept, device))
            logger.debug("dask pass: leave-one-out")
            args = out[0][1]
            result, error, QtQ = _checked_loo(args,
                                              *runner.sum_pairs([sums for sums, _ in out]))
        else:
            stats = _combined_stats(X, y, w, fit_intercept, "gram", run)
            args = _loo_args_from_gram(stats, alphas, fit_intercept, device)
            result, error, QtQ = loo_pass(args)
        if error > 1.0:  # CholeskyQR2: the LOO pass's MᵀM refines R
            if QtQ is None:  # R is singular
                raise np.linalg.LinAlgError("singular R")
            info = args.info
            R = np.linalg.cholesky(QtQ).T @ info.R
            whole = Stats(None, info.n, args.w_sum, args.mean, args.y_mean, None, info.C)
            args = _loo_args(whole, R, alphas, fit_intercept, device)
            result, error, _ = loo_pass(args)
            if error > 1.0:
                result = None
    except np.linalg.LinAlgError:
        result = None
    if result is None:  # TSQR: R from the chunks' QR factors
        whole = _combined_stats(X, y, w, fit_intercept, "r", run)
        args = _loo_args(whole, whole.factor, alphas, fit_intercept, device)
        result, _, _ = loo_pass(args)
    return result


# --- randomized SVD (TruncatedSVD) -------------------------------------------------------
def _chunk(ops, block, mean):
    """The chunk on its backend in float64, centred by ``mean`` when given (PCA).

    float64 whatever X's dtype: the power iterations orthonormalise through YᵀY, whose
    rounding (ε·λ₁) hides the directions below √ε·σ₁; in float32 that is 3e-4 σ₁, and a
    float32 X far from the origin (σ₁ its offset) lost every direction of its spread."""
    X = ops.asarray(block, dtype=np.float64)
    return X if mean is None else X - ops.asarray(mean, dtype=np.float64)


def _range_r_block(ops, block, Q, mean=None):
    """R of the chunk's X_i Q (the product is not kept)."""
    X = _chunk(ops, block, mean)
    return ops.to_host(ops.qr_r(ops.matmul(X, ops.asarray(Q, dtype=np.float64))))


def _power_block(ops, block, Q, mean=None):
    """X_iᵀ Y_i and Y_iᵀ Y_i for Y_i = X_i Q: one power iteration's pass gives both the
    next range (XᵀY) and the Gram matrix of Y that orthonormalises it (float64)."""
    X = _chunk(ops, block, mean)
    Y = ops.matmul(X, ops.asarray(Q, dtype=np.float64))
    return ops.to_host(ops.matmul(X.T, Y)), ops.to_host(ops.matmul(Y.T, Y))


def _moments_block(ops, block, V, mean, mean_t):
    """Column sums (mean None) or centred sums of squares of X_i and of X_i V."""
    X = ops.asarray(block, dtype=np.float64)
    T = ops.matmul(X, V)
    if mean is None:
        ones = ops.xp.ones(X.shape[0])  # a GEMV: axis-0 sums of a tall array are slow
        return ops.to_host(ones @ X), ops.to_host(ones @ T)
    Xc, Tc = X - mean, T - mean_t
    return float(ops.xp.vdot(Xc, Xc)), ops.to_host(ops.xp.ones(X.shape[0]) @ (Tc * Tc))


def _centred_sq_sum(ops, block, mean):
    X = ops.asarray(block, dtype=np.float64) - mean
    return float(ops.xp.vdot(X, X))


class _Sums(NamedTuple):
    """A chunk's row count, column sums, and whether it is finite."""

    n: int
    sums: Any
    finite: bool


def _chunk_sums(ops, block):
    X = ops.asarray(block, dtype=np.float64)
    return _Sums(X.shape[0], ops.to_host(ops.xp.ones(X.shape[0]) @ X), runner.finite(ops, X))


def _means(run):
    """n and the column means of X (one pass), for the randomized route."""
    parts = run(_chunk_sums, operations=("column_mean",))
    if not all(part.finite for part in parts):
        raise InvalidChunks()
    n = sum(part.n for part in parts)
    return n, sum(part.sums for part in parts) / n


#: The largest feature count whose R factor a randomized fit gathers in place of its
#: passes (a float64 p x p partial per worker group: 128 MiB at 4,096).
FACTOR_MAX_FEATURES = 4096


def _n_iter(n_iter, k, n, p):
    return (7 if k < 0.1 * min(n, p) else 4) if n_iter == "auto" else n_iter


def factor_pays(shape, k, *, n_oversamples, n_iter, passes_after=2):
    """Whether a randomized fit of a row-chunked X of ``shape`` runs on a small factor F
    of X (FᵀF = XᵀX, from one TSQR pass) rather than over X once per power iteration:
    where the TSQR's ~2·n·p² multiply-adds are no more than the 2·n·p·(k + n_oversamples)
    of each of the passes it replaces (the power iterations, the final range's two and
    ``passes_after`` more for the variances), and the p × p factor is small
    (:data:`FACTOR_MAX_FEATURES`). The passes' own cost, a scheduler round trip and a read
    of every chunk each, is saved on top."""
    n, p = shape
    passes = _n_iter(n_iter, k, n, p) + 2 + passes_after
    return p <= FACTOR_MAX_FEATURES and p <= passes * (k + n_oversamples)


def pca_randomized(X, k, *, n_oversamples, n_iter, random_state):
    """PCA by the randomized SVD of the implicitly centred X (each chunk centred where it
    lives): (n, mean, S, Vt, total variance). Where :func:`factor_pays`, on the R factor
    of the centred X from one TSQR pass (mean and total variance from the same pass)."""
    check_row_chunked(X)
    if factor_pays(X.shape, k, n_oversamples=n_oversamples, n_iter=n_iter):
        whole = _combined_stats(X, None, None, True, "r")
        R = whole.factor
        S, Vt = randomized_svd(X, k, n_oversamples=n_oversamples, n_iter=n_iter,
                               random_state=random_state, factor=_data_factor(R))
        return whole.n, whole.mean, S, Vt, float(np.vdot(R, R)) / (whole.n - 1)
    run = runner.for_fit(X)
    n, mean = _means(run)
    S, Vt = randomized_svd(X, k, n_oversamples=n_oversamples, n_iter=n_iter,
                           random_state=random_state, mean=mean, run=run)
    total = sum(run(_centred_sq_sum, args=(mean,), reduce=sum))
    return n, mean, S, Vt, total / (n - 1)


def truncated_svd(X, k, *, n_oversamples, n_iter, random_state):
    """TruncatedSVD's randomized fit: (S, Vt, Σ_j var(X[:, j]), var(X Vᵀ) per
    component), the variances with ddof 0. Where :func:`factor_pays`, everything comes
    from one TSQR pass: the R of the centred X and the mean give the factor of
    XᵀX = RᵀR + n·μμᵀ for the SVD (:func:`_data_factor`), ‖R‖²/n and ‖R vⱼ‖²/n for the
    variances. Else the randomized SVD's passes over X and two more for the
    variances."""
    check_row_chunked(X)
    if factor_pays(X.shape, k, n_oversamples=n_oversamples, n_iter=n_iter):
        whole = _combined_stats(X, None, None, True, "r")
        R, n = whole.factor, whole.n
        S, Vt = randomized_svd(X, k, n_oversamples=n_oversamples, n_iter=n_iter,
                               random_state=random_state,
                               factor=_data_factor(R, n, whole.mean))
        RV = R @ Vt.T
        explained = np.einsum("ij,ij->j", RV, RV) / n
        return S, Vt, float(np.vdot(R, R)) / n, explained
    S, Vt = randomized_svd(X, k, n_oversamples=n_oversamples, n_iter=n_iter,
                           random_state=random_state)
    full_var, explained = column_and_projection_variances(X, Vt.T)
    return S, Vt, full_var, explained


def randomized_svd(X, k, *, n_oversamples, n_iter, random_state, mean=None, run=None,
                   factor=None):
    """Halko et al. over row chunks, with scikit-learn's random draws. Each power
    iteration is one pass: XᵀY and YᵀY for Y = X Q; the range's orthonormal basis Y M
    (M from YᵀY's eigendecomposition, directions below its rounding dropped) gives the
    next Q = qr(XᵀY M) without another pass, since only the span matters there. The
    final range is made accurately, in two passes: the R of X Q (TSQR), then Xᵀ Y and
    YᵀY for Y = X Q M (M from R's SVD), the latter making the projection exact. X is
    float32 or float64 (see :mod:`.input`); the chunks' products are float64 either way
    (:func:`_chunk`). Returns (S, Vt) of the top ``k``.

    ``factor``: a small matrix F with FᵀF = XᵀX (X centred for PCA) where the caller
    made one from a single pass (:func:`factor_pays`): the same steps then run on F in
    memory, and X is not read again (X Q and F Q have the same Gram matrix, so XᵀY,
    YᵀY and the R of X Q are F's).
    """
    from sklearn.utils import check_random_state

    from ..backends import get_backend

    check_row_chunked(X)
    n, p = X.shape
    if n < p:
        raise ValueError(f"Dask input needs n_samples >= n_features, got {n} < {p}.")
    cpu = get_backend("cpu")
    random_state = check_random_state(random_state)
    n_iter = _n_iter(n_iter, k, n, p)
    # the in-memory fit's start (drawn, then in X's dtype), worked on in float64
    Q = random_state.normal(size=(p, k + n_oversamples)).astype(X.dtype).astype(np.float64)
    if factor is not None:
        def power(Q):
            Y = factor @ Q
            return factor.T @ Y, Y.T @ Y

        def range_r(Q):
            return cpu.qr_r(factor @ Q)
    else:
        run = runner.for_fit(X) if run is None else run

        def power(Q):
            return runner.sum_pairs(run(_power_block, args=(Q, mean),
                                        reduce=runner.sum_pairs))

        def range_r(Q):
            return cpu.qr_r(np.vstack(run(_range_r_block, args=(Q, mean),
                                          operations=("matmul", "qr_r"))))
    return _sketch(power, range_r, Q, k, n_iter, cpu, passes_free=factor is not None)


def _sketch(power, range_r, Q, k, n_iter, cpu, *, passes_free=False):
    """:func:`randomized_svd`'s steps, given ``power(Q) = (XᵀY, YᵀY)`` for Y = X Q and
    ``range_r(Q)``, the R factor of X Q (float64).

    A power iteration takes one pass while it can: Q = qr(XᵀY M), M from YᵀY's
    eigendecomposition. YᵀY holds Y's squared singular values, rounded to ε·λ₁, and XᵀY
    carries rounding of ε·σ₁² in every direction; so a direction of X below ~√ε·σ₁
    (an offset's σ₁ against the spread, column scales far apart) is lost there, where
    the in-memory fit keeps it. Once Y's condition passes ε^(-1/4) (its squared rounding
    above √ε of the span), the iterations take two passes each, as the final range
    does: the R of X Q (TSQR), then Xᵀ X Q M with M from R's SVD, whose rounding is
    ε·σ₁ (not squared), as the in-memory QR's. ``passes_free``: the steps run on a small
    factor in memory, so every iteration takes the accurate form."""
    eps = np.finfo(np.float64).eps
    accurate = passes_free
    for _ in range(n_iter):
        if not accurate:
            Z, G = power(Q)
            if not np.all(np.isfinite(G)):
                raise InvalidChunks()
            lam, W = np.linalg.eigh(G)
            lam, W = lam[::-1], W[:, ::-1]
            accurate = not (lam[-1] > 0.0 and lam[-1] >= lam[0] * np.sqrt(eps))
            if not accurate:
                Q = np.linalg.qr(Z @ (W / np.sqrt(lam)))[0]
                continue
            logger.debug("randomized SVD: X Q's condition %.3g; power iterations in two "
                         "passes from here", np.sqrt(lam[0] / lam[-1]) if lam[-1] > 0.0 else np.inf)
        basis = _range_basis(range_r(Q), Q)
        if basis is None:
            break
        Q = np.linalg.qr(power(basis)[0])[0]
    # the final range: Y = X Q M is orthonormal up to ~eps·cond(R): B = (Y L⁻ᵀ)ᵀ X with
    # G = YᵀY = L Lᵀ is exactly the projection on its range (one CholeskyQR step, no
    # pass of its own)
    basis = _range_basis(range_r(Q), Q)
    if basis is None:  # X Q = 0: X is zero (centred: constant), as in memory
        return _top(np.zeros((0, Q.shape[0])), k, cpu)
    Z, G = power(basis)
    L = np.linalg.cholesky(G)
    return _top(sla.solve_triangular(L, Z.T, lower=True), k, cpu)


def _range_basis(R, Q):
    """Q M with X Q M orthonormal, given R, the R factor of X Q: M = W S⁻¹ from the SVD
    R = U S Wᵀ, over the singular values above rounding (a rank-deficient X Q, say with a
    constant column, keeps its rank); None where R is zero."""
    if not np.all(np.isfinite(R)):
        raise InvalidChunks()
    eps = np.finfo(np.float64).eps
    tiny = np.finfo(np.float64).tiny
    _, s, Wt = np.linalg.svd(R)
    if not s[0] > 0.0:
        return None
    keep = max(1, int(np.count_nonzero(s > s[0] * len(s) * eps)))
    return Q @ (Wt[:keep].T / np.maximum(s[:keep], tiny))


def _top(B, k, cpu):
    """(S, Vt) of the top ``k`` of B's SVD, zeros beyond B's rank."""
    if B.shape[0] >= k:
        _, s, Vt = cpu.svd(B)
    else:  # X's numerical rank is below k: the remaining singular values are zero
        _, s, Vt = np.linalg.svd(B, full_matrices=True)
        s = np.concatenate([s, np.zeros(k - len(s))])
    return s[:k], Vt[:k]


def _data_factor(R, n=None, mean=None):
    """F with FᵀF = RᵀR + n·μμᵀ (or RᵀR): ``[√n μᵀ; R]`` for the R factor of the centred
    X. The mean's row is exact and R holds only the spread, as accurately as X's own
    products: a Gram matrix would square the condition (σ₁²/σ_k² ε: at an offset of 1e6,
    1e-5 of σ₄ lost; with a spread of column scales, every direction below √ε σ₁)."""
    if not np.all(np.isfinite(R)):
        raise InvalidChunks()
    return R if mean is None else np.vstack([np.sqrt(n) * mean[None, :], R])


def column_and_projection_variances(X, V):
    """(Σ_j var(X[:, j]), var(X V, axis=0)) in two passes (means, then centred sums)."""
    n = X.shape[0]
    run = runner.for_fit(X)
    sums = run(_moments_block, args=(V, None, None))
    mean, mean_t = sum(s[0] for s in sums) / n, sum(s[1] for s in sums) / n
    sq = run(_moments_block, args=(V, mean, mean_t))
    return sum(s[0] for s in sq) / n, sum(s[1] for s in sq) / n
