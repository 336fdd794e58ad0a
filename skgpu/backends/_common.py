"""Pieces shared by both backends."""

import logging

import numpy as np

from ._arrays import to_numpy

logger = logging.getLogger("skgpu")


def blas_gemm(a, b, trans_a=False, trans_b=False, alpha=1.0):
    """``alpha · op(a) · op(b)`` for 2-D host blocks by SciPy's BLAS. Host loops that
    call SciPy's LAPACK or BLAS (potrf, trsm, trtri) take their products here, not from
    NumPy's ``@``: NumPy and SciPy each load their own OpenBLAS, and a loop alternating
    between them ran 5-12 times slower on 2 cores (each library's idle threads spinning
    against the other's work; the supernodal likelihood at n = 50,000, 5.1 s against
    1.0 s); one library keeps every thread and none spinning. A C-ordered operand goes
    in as its transpose, Fortran-ordered (no copy)."""
    import scipy.linalg as sla

    if not a.flags.f_contiguous and a.flags.c_contiguous:
        a, trans_a = a.T, not trans_a
    if not b.flags.f_contiguous and b.flags.c_contiguous:
        b, trans_b = b.T, not trans_b
    gemm = sla.get_blas_funcs("gemm", (a, b))
    return gemm(alpha, a, b, trans_a=int(trans_a), trans_b=int(trans_b))


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
    summed. It costs one copy of X, as the plain centring, and one GEMV; a backend may
    do the same in fewer passes over X (``ops.centre_about_first_row``, None where it
    does not).
    """
    if X.shape[0] == 0:
        return X.copy(), ops.column_mean(X, sample_weight)
    out = ops.centre_about_first_row(X, sample_weight)
    if out is not None:
        return out
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
    ``X`` is NumPy or CuPy (one device synchronisation per step); ``mean`` is on the host
    or the device. Returns the indices of the constant columns (a NumPy array).
    """
    diag = C.diagonal()
    d = diag.get() if hasattr(diag, "get") else np.asarray(diag)
    m = np.asarray(mean.get() if hasattr(mean, "get") else mean, dtype=np.float64)
    n = max(int(n_samples), 1)
    eps = float(np.finfo(np.dtype(C.dtype)).eps)
    tol = eps * n * max(n, 64) * m**2
    candidates = np.flatnonzero(np.abs(d) <= tol)
    if candidates.size == 0 or X.shape[0] == 0:
        return candidates[:0]
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
            return candidates
    index = xp.asarray(candidates) if hasattr(C, "get") else candidates
    C[index, :] = 0
    C[:, index] = 0
    first = first.get() if on_device else first
    if hasattr(mean, "get"):
        import cupy

        mean[cupy.asarray(candidates)] = cupy.asarray(first)
    else:
        mean[candidates] = first
    return candidates


#: The one-pass covariance ``XᵀX - n·x̄x̄ᵀ`` loses about ``log10(n·x̄ⱼ² / Cⱼⱼ)`` digits of
#: column j's entries to cancellation (error ~ eps·n·|x̄ᵢ||x̄ⱼ| in ``Cᵢⱼ``). Above this
#: ratio (a mean more than four standard deviations from zero) the matrix is formed
#: from data shifted by the mean instead.
CANCELLATION_RATIO = 16.0
#: Bytes of the shifted row block formed at a time by :func:`accurate_centred_gram`.
_SHIFT_BLOCK_BYTES = 1 << 26
#: Rows of X's head whose spread is compared with the mean before the one-pass formula.
_HEAD_ROWS = 1024


def accurate_centred_gram(ops, X, mean, n_samples, C=None, about=None):
    """``(mean, rest, C)``: X's centred Gram matrix ``(X - x̄)ᵀ(X - x̄)``, accurate to the
    rounding of the centred data, and X's mean as ``mean + rest``.

    The one-pass formula ``XᵀX - n·x̄x̄ᵀ`` (one GEMM on X, no centred copy) cancels the
    digits that matter where a column's mean is large against its spread (timestamps,
    years, coordinates far from the origin: ``n·x̄ⱼ² > CANCELLATION_RATIO·Cⱼⱼ``). Such an
    offset is looked for twice: in the spread of X's first rows before the GEMM (then
    the formula is not used at all), and in C's diagonal after it (an offset the head
    did not show: then C is formed again). Either way C comes from ``X - x̄``, a row
    block at a time (the subtraction is exact where the offset dominates), with the
    shifted data's own small mean ``δ`` folded in, ``C = (X - x̄)ᵀ(X - x̄) - n·δδᵀ``, and
    ``rest = δ`` (float64): kept apart from ``mean``, the two carry digits that a
    float64 x̄ of 1e9 cannot. Otherwise ``rest`` is None. Exactly constant columns of a
    dense X get an exact mean and zero rows in C (:func:`exact_constant_columns`).

    ``mean`` is X's column mean on ``ops``; ``C``, the one-pass matrix if the caller
    formed it already (else formed here); ``about``, if C was formed from data shifted
    by ``mean - about`` (the streamed GPU pass), the offset its cancellation is judged
    by. C is not divided by ``n - 1``. X is dense or sparse, on the host or on ``ops``.
    A mean that is not finite (NaN or infinity in X) is returned as it is, for the
    caller's error.
    """
    n = int(n_samples)
    sparse = hasattr(X, "tocsr")
    m = np.asarray(ops.to_host(mean), dtype=np.float64)
    if n == 0 or not np.all(np.isfinite(m)):
        return mean, None, ops.gram(X, mean) if C is None else C
    if C is None:
        head = X[:_HEAD_ROWS]
        head = ops.asarray(head.toarray() if sparse else head)
        spread = (np.asarray(ops.to_host(ops.xp.var(head, axis=0, dtype=np.float64)))
                  if head.shape[0] > 1 else np.zeros_like(m))
        if np.any(m**2 > CANCELLATION_RATIO * spread):
            return _shifted_gram(ops, X, mean, n, sparse, "the first rows' spread")
        C = ops.gram(X, mean)
    constant = None if sparse else exact_constant_columns(X, mean, C, n)
    d = np.asarray(ops.to_host(C.diagonal()), dtype=np.float64)
    if about is not None:
        m = np.asarray(ops.to_host(about), dtype=np.float64)
    subtracted = n * m**2
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(d > 0, subtracted / np.where(d > 0, d, 1.0),
                         np.where(subtracted > 0, np.inf, 0.0))
    if constant is not None:
        ratio[constant] = 0.0
    if not np.any(ratio > CANCELLATION_RATIO):
        return mean, None, C
    return _shifted_gram(ops, X, mean, n, sparse, "the Gram matrix's diagonal")


def _shifted_gram(ops, X, mean, n, sparse, seen_in):
    """``(mean, δ, (X - mean)ᵀ(X - mean) - n·δδᵀ)`` a row block at a time, δ the shifted
    data's mean; constant columns exact."""
    logger.info("centred Gram matrix: a column's mean is far from zero against its spread "
                "(seen in %s); forming it from data shifted by the mean", seen_in)
    xp, dt = ops.xp, np.dtype(mean.dtype)
    p = X.shape[1]
    if sparse:
        X = X.tocsr()
    shift = ops.asarray(mean, dtype=dt)
    G = xp.zeros((p, p), dtype=dt)
    sums = xp.zeros(p, dtype=np.float64)
    rows = int(max(1, _SHIFT_BLOCK_BYTES // max(1, p * dt.itemsize)))
    for start in range(0, X.shape[0], rows):
        block = X[start:start + rows]
        if sparse:
            block = block.toarray()
        block = xp.subtract(ops.asarray(block, dtype=dt), shift, dtype=dt)
        G += ops.matmul(block.T, block)
        sums += block.sum(axis=0, dtype=np.float64)
    delta = sums / n
    G -= (n * xp.outer(delta, delta)).astype(dt)
    if not sparse:
        constant = exact_constant_columns(X, shift, G, n)
        if constant.size:
            delta[ops.asarray(constant) if ops.is_gpu else constant] = 0.0
    return shift, delta, G


def quadratic_forms_by_solves(factor, B, xp, block_bytes=1 << 30):
    """``bᵢᵀ A⁻¹ bᵢ`` (host array) for each row of the sparse (m, n) matrix B (of the
    array module ``xp``'s sparse kind), by full solves with ``factor``: the way for a
    factor that does not expose L (see :func:`_solved_blocks`)."""
    out = np.empty(B.shape[0])
    for start, stop, R, Z in _solved_blocks(factor, B, xp, block_bytes):
        out[start:stop] = to_numpy(xp.ones(R.shape[0]) @ (R * Z))[:stop - start]
    return out


def quadratic_form_matrix_by_solves(factor, B, xp, block_bytes=1 << 30):
    """``B A⁻¹ Bᵀ`` (dense, an ``xp`` array) for the sparse (m, n) matrix B, by full solves
    with ``factor`` (see :func:`_solved_blocks`), made exactly symmetric (the solves'
    rounding is not); holds two (m, m) matrices and two n-row blocks."""
    m = B.shape[0]
    out = xp.empty((m, m))
    for start, stop, _, Z in _solved_blocks(factor, B, xp, block_bytes):
        out[:, start:stop] = B @ Z[:, :stop - start]
    return (out + out.T) * 0.5  # not in place: CuPy does not order overlapping writes


def _solved_blocks(factor, B, xp, block_bytes):
    """``(start, stop, R, A⁻¹ R)`` for the rows of B taken as dense right-hand sides
    ``R = B[start:stop]ᵀ`` (n × block, ~``block_bytes``), of one fixed width: the last
    block is padded with zero columns, so that a solver tied to a right-hand side's shape
    (cuDSS) is planned once."""
    m, n = B.shape
    block = max(1, min(m, block_bytes // (8 * max(n, 1))))
    for start in range(0, m, block):
        stop = min(m, start + block)
        R = B[start:stop].T.toarray()
        if stop - start < block:
            R = xp.concatenate([R, xp.zeros((n, block - (stop - start)))], axis=1)
        yield start, stop, R, factor.solve(R).reshape(R.shape)
