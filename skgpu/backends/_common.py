"""Pieces shared by both backends."""

import numpy as np


def not_positive_definite(what, detail):
    return np.linalg.LinAlgError(
        f"The {what} is not positive definite ({detail}). Make it better conditioned, "
        "for example by adding a small positive value to its diagonal (for Gaussian "
        "processes: increase alpha or add a WhiteKernel)."
    )


def tril_in_place(A, xp=np):
    """Zero the strict upper triangle of the square array A (of the array module ``xp``)
    in place, by row blocks: ``tril`` would copy, a second n × n matrix beside a large
    Cholesky factor or inverse."""
    n = A.shape[0]
    block = min(1024, max(16, n // 32))  # tril's copy of a block: small beside n²
    for start in range(0, n, block):
        stop = min(n, start + block)
        A[start:stop, stop:] = 0.0
        A[start:stop, start:stop] = xp.tril(A[start:stop, start:stop])
    return A


def centre_columns(ops, X, sample_weight=None):
    """``(X - x̄, x̄)`` for a dense X on ``ops``, x̄ the (weighted) column mean taken about
    X's first row: ``x̄ = x₀ + mean(X - x₀)``.

    A constant column is centred to exact zeros and its mean is exact (a plain GEMV mean
    leaves residues of ~1e-16 relative: variances of 1e-32 and Ridge coefficients of
    1e-29 where exact arithmetic gives 0), and a large offset cancels before the mean is
    summed. It costs one copy of X, as the plain centring, and one GEMV.
    """
    if X.shape[0] == 0:
        return X.copy(), ops.column_mean(X, sample_weight)
    shift = X[0].copy()
    centred = X - shift
    offset = ops.column_mean(centred, sample_weight)
    centred -= offset
    return centred, shift + offset


#: Rows of the first comparison of candidate constant columns, and of each later one
#: (which bounds the temporary mask).
_CONSTANT_HEAD_ROWS = 1 << 10
_CONSTANT_BLOCK_ROWS = 1 << 15


def exact_constant_columns(X, mean, C, n_samples):
    """Make the covariance ``C`` (and ``mean``) exact for X's constant columns, in place.

    ``C`` (the centred Gram matrix, not yet divided by ``n - 1``) from the one-pass
    ``XᵀX - n x̄x̄ᵀ`` leaves rounding residues where a column is constant, of at most
    ~n²·eps·x̄² for a plain running sum (BLAS blocks the sum; the bound is loose).
    Columns whose diagonal entry is below that bound are candidates. They are compared
    with their first entry, all candidates at once: first on a head of rows (a contiguous
    read that rejects almost every column with a real spread), then the survivors over
    all rows, in row blocks. A constant column gets its exact mean and a zero row and
    column in C. A column with a tiny but real spread is left as the formula computed it.
    ``X`` is NumPy or CuPy (one device synchronisation per step); ``mean`` is on the host.
    """
    diag = C.diagonal()
    d = diag.get() if hasattr(diag, "get") else np.asarray(diag)
    m = np.asarray(mean.get() if hasattr(mean, "get") else mean, dtype=np.float64)
    n = max(int(n_samples), 1)
    eps = float(np.finfo(np.dtype(C.dtype)).eps)
    tol = eps * n * max(n, 64) * m**2
    candidates = np.flatnonzero(np.abs(d) <= tol)
    if candidates.size == 0 or X.shape[0] == 0:
        return
    on_device = hasattr(X, "get")
    if on_device:
        import cupy as xp
    else:
        xp = np
    first = X[0][xp.asarray(candidates)]
    edges = [0, *range(_CONSTANT_HEAD_ROWS, X.shape[0], _CONSTANT_BLOCK_ROWS), X.shape[0]]
    for start, stop in zip(edges[:-1], edges[1:]):
        block = X[start:stop][:, xp.asarray(candidates)]
        same = (block == first[None, :]).all(axis=0)
        same = same.get() if on_device else np.asarray(same)
        candidates, first = candidates[same], first[xp.asarray(same)]
        if candidates.size == 0:
            return
    index = xp.asarray(candidates) if hasattr(C, "get") else candidates
    C[index, :] = 0
    C[:, index] = 0
    first = first.get() if on_device else first
    if hasattr(mean, "get"):
        import cupy

        mean[cupy.asarray(candidates)] = cupy.asarray(first)
    else:
        mean[candidates] = first
