"""Pieces shared by both backends."""

import numpy as np


def not_positive_definite(what, detail):
    return np.linalg.LinAlgError(
        f"The {what} is not positive definite ({detail}). Make it better conditioned, "
        "for example by adding a small positive value to its diagonal (for Gaussian "
        "processes: increase alpha or add a WhiteKernel)."
    )


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


def exact_constant_columns(X, mean, C, n_samples):
    """Make the covariance ``C`` (and ``mean``) exact for X's constant columns, in place.

    ``C`` from the one-pass ``XᵀX - n x̄x̄ᵀ`` leaves rounding residues (~n·eps·x̄²) where
    a column is constant. Columns whose variance is at that level are candidates; each
    is compared with its first entry (a strided pass over that column only), and a
    constant one gets its exact mean and a zero row and column in C. A column with a
    tiny but real spread is left as the formula computed it.
    """
    diag = C.diagonal()
    d = diag.get() if hasattr(diag, "get") else np.asarray(diag)
    m = mean.get() if hasattr(mean, "get") else np.asarray(mean)
    eps = np.finfo(np.dtype(C.dtype)).eps
    tol = 64.0 * eps * max(n_samples, 1) * (m.astype(np.float64) ** 2 + np.abs(d))
    for j in np.flatnonzero(np.abs(d) <= tol):
        column = X[:, j]
        first = column[0]
        if bool((column == first).all()):
            C[j, :] = 0
            C[:, j] = 0
            mean[j] = first
