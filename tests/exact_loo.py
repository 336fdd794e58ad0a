"""Exact leave-one-out errors of ridge regression, in ball arithmetic (python-flint's arb).

The reference of the exact leave-one-out tests: every quantity is computed from the float64 data as
given, at ``PREC`` bits with rigorous error bounds, so the returned float64 values are
correct to the last bit for any conditioning a float64 X can have.

With weights w, an unpenalised intercept and penalty α, the leave-one-out error of sample
i in scikit-learn's rescaled convention (the one its ``cv_results_`` stores squared) is

    e_i = √w_i (y_i - ŷ_i) / (1 - h_i),    h_i = [W^½ Xc (XcᵀWXc + αI)⁻¹ XcᵀW^½]_ii + w_i/Σw

with Xc and yc centred by their w-weighted means (no centring, and no w_i/Σw term,
without an intercept) and ŷ the full-data fit. The p × p form is used when p <= n, the
n × n form (push-through identity) otherwise.
"""

from fractions import Fraction

import numpy as np

flint = None

#: Working precision in bits: enough for cond(X)² · 1/α far beyond float64's range.
PREC = 512


def spectrum_matrix(rng, n, p, smin_exp):
    """X = U diag(logspace(0, smin_exp, p)) Vᵀ with random orthonormal U, V: singular
    values from 1 down to 10**smin_exp (cond(X) = 10**-smin_exp)."""
    U = np.linalg.qr(rng.standard_normal((n, p)))[0]
    V = np.linalg.qr(rng.standard_normal((p, p)))[0]
    return (U * np.logspace(0, smin_exp, p)) @ V.T


def relative_error(squared, exact_sq, y, sample_weight=None, fit_intercept=True,
                   ulps=1e7):
    """Largest relative error of squared LOO errors against the exact ones (both e², as
    ``cv_results_`` stores them), worst sample.

    In float64 no method computes y - ŷ closer than about ε·‖yw‖ (yw the centred,
    rescaled targets), so a sample whose exact LOO error is below ``ulps``·ε·‖yw‖∞
    (2e-9 of the targets' scale by default) is measured against that level instead of
    its own value: an error of one ulp of y there counts as 1e-7, not as whatever its
    ratio to a near-zero error is.
    """
    Y = np.asarray(y, dtype=np.float64).reshape(len(squared), -1)
    w = np.ones(len(Y)) if sample_weight is None else np.asarray(sample_weight, float)
    if fit_intercept:
        Y = Y - (w @ Y) / w.sum()
    scale = float(np.max(np.abs(Y * np.sqrt(w)[:, None])))
    level = (ulps * np.finfo(np.float64).eps * scale) ** 2
    return float(np.max(np.abs(squared - exact_sq) / np.maximum(exact_sq, level)))


def _precision(X, alphas):
    """``PREC`` bits beyond the magnitude ratio of XᵀX to the smallest α: a penalty far
    below the Gram matrix's scale (X of 1e149, α = 0.1) must still register."""
    big = float(np.max(np.abs(X), initial=0.0))
    small = min(float(a) for a in np.atleast_1d(alphas))
    if big == 0.0 or small <= 0.0:
        return PREC
    return PREC + max(0, int(2 * np.log2(big) - np.log2(small) + 2 * np.log2(len(X) + 1)))


def _flint():
    global flint
    if flint is None:
        import pytest

        # (the test extra installs it; a machine without it, such as the GPU host, skips
        # the comparisons that need the exact reference)
        flint = pytest.importorskip("flint", reason="python-flint (the exact reference) "
                                    "is not installed")
    return flint


def _mat(rows):
    f = _flint()
    return f.arb_mat([[f.arb(float(v)) for v in row] for row in rows])


def _to_float(m):
    return np.array([[float(m[i, j].mid()) for j in range(m.ncols())]
                     for i in range(m.nrows())])


def exact_loo_errors(X, y, alphas, sample_weight=None, fit_intercept=True):
    """Array (n, n_targets, n_alphas) of the exact leave-one-out errors e_i (not
    squared), rounded to float64."""
    f = _flint()
    old = f.ctx.prec
    f.ctx.prec = _precision(X, alphas)
    try:
        return _exact(f, np.asarray(X, dtype=np.float64),
                      np.asarray(y, dtype=np.float64).reshape(len(X), -1),
                      [float(a) for a in np.atleast_1d(alphas)],
                      None if sample_weight is None else np.asarray(sample_weight, float),
                      fit_intercept)
    finally:
        f.ctx.prec = old


def _rescaled(f, X, Y, w, fit_intercept):
    """The rescaled, centred problem ``Z = W^½ (X - x̄)``, ``z = W^½ (Y - ȳ)`` in ball
    arithmetic (x̄, ȳ the w-weighted means; zero without an intercept): ``(Z, z, W,
    total_w, x̄, ȳ)``."""
    n, p = X.shape
    t = Y.shape[1]
    arb = f.arb
    W = [arb(1.0)] * n if w is None else [arb(float(v)) for v in w]
    total_w = sum(W, arb(0))
    Xa, Ya = _mat(X), _mat(Y)
    x_mean, y_mean = [arb(0)] * p, [arb(0)] * t
    if fit_intercept:
        x_mean = [sum((W[i] * Xa[i, j] for i in range(n)), arb(0)) / total_w
                  for j in range(p)]
        y_mean = [sum((W[i] * Ya[i, k] for i in range(n)), arb(0)) / total_w
                  for k in range(t)]
    sqrt_w = [wi.sqrt() for wi in W]
    Z = f.arb_mat(n, p, [(Xa[i, j] - x_mean[j]) * sqrt_w[i]
                         for i in range(n) for j in range(p)])
    z = f.arb_mat(n, t, [(Ya[i, k] - y_mean[k]) * sqrt_w[i]
                         for i in range(n) for k in range(t)])
    return Z, z, W, total_w, x_mean, y_mean


def _exact(f, X, Y, alphas, w, fit_intercept):
    n, p = X.shape
    t = Y.shape[1]
    arb = f.arb
    Xa, Ya, W, total_w, _, _ = _rescaled(f, X, Y, w, fit_intercept)
    Zt = Xa.transpose()
    out = np.empty((n, t, len(alphas)))
    if p <= n:
        G = Zt * Xa
    else:
        K = Xa * Zt
    for a_index, alpha in enumerate(alphas):
        a = arb(alpha)
        if p <= n:
            A = G + f.arb_mat(p, p, [a if i == j else 0 for i in range(p)
                                     for j in range(p)])
            B = A.solve(Zt)  # (ZᵀZ + αI)⁻¹ Zᵀ, p × n
            fitted = Xa * (B * Ya)  # rescaled, centred fits
            diag = [sum((Xa[i, j] * B[j, i] for j in range(p)), arb(0)) for i in range(n)]
        else:
            A = K + f.arb_mat(n, n, [a if i == j else 0 for i in range(n)
                                     for j in range(n)])
            H = K * A.inv()  # Z (ZᵀZ + αI)⁻¹ Zᵀ = K (K + αI)⁻¹
            fitted = H * Ya
            diag = [H[i, i] for i in range(n)]
        for i in range(n):
            h = diag[i] + (W[i] / total_w if fit_intercept else 0)
            for k in range(t):
                e = (Ya[i, k] - fitted[i, k]) / (1 - h)
                out[i, k, a_index] = float(e.mid())
    return out


def exact_ridge_predictions(X, y, alpha, X_new, sample_weight=None, fit_intercept=True):
    """Predictions (m, n_targets) at ``X_new`` of the exact ridge fit (penalty α, an
    unpenalised intercept when asked, weights w), in ball arithmetic, rounded to float64:
    the minimum-norm solution ``Zᵀ(ZZᵀ + αI)⁻¹z`` of the rescaled, centred problem."""
    f = _flint()
    old = f.ctx.prec
    f.ctx.prec = _precision(X, [alpha])
    try:
        X = np.asarray(X, dtype=np.float64)
        Y = np.asarray(y, dtype=np.float64).reshape(len(X), -1)
        n, p = X.shape
        t = Y.shape[1]
        arb = f.arb
        Z, z, _, _, x_mean, y_mean = _rescaled(f, X, Y, sample_weight, fit_intercept)
        Zt = Z.transpose()
        A = Z * Zt + f.arb_mat(n, n, [arb(float(alpha)) if i == j else 0
                                      for i in range(n) for j in range(n)])
        coef = Zt * A.solve(z)  # p × t
        Xn = _mat(np.asarray(X_new, dtype=np.float64))
        out = np.empty((Xn.nrows(), t))
        for i in range(Xn.nrows()):
            for k in range(t):
                v = y_mean[k] + sum(((Xn[i, j] - x_mean[j]) * coef[j, k] for j in range(p)),
                                    arb(0))
                out[i, k] = float(v.mid())
        return out
    finally:
        f.ctx.prec = old


def exact_ridge_coef(X, y, alpha, fit_intercept=True):
    """(XcᵀXc + αI)⁻¹ Xcᵀyc in exact rationals (Gauss-Jordan), as float64."""
    n, p = X.shape
    F = [[Fraction(float(v)) for v in row] for row in X]
    yF = [Fraction(float(v)) for v in y]
    if fit_intercept:
        means = [sum(F[i][j] for i in range(n)) / n for j in range(p)]
        ym = sum(yF) / n
        F = [[F[i][j] - means[j] for j in range(p)] for i in range(n)]
        yF = [v - ym for v in yF]
    a = Fraction(float(alpha))
    A = [[sum(F[k][i] * F[k][j] for k in range(n)) + (a if i == j else 0)
          for j in range(p)] + [sum(F[k][i] * yF[k] for k in range(n))] for i in range(p)]
    for c in range(p):
        piv = next(r for r in range(c, p) if A[r][c] != 0)
        A[c], A[piv] = A[piv], A[c]
        A[c] = [v / A[c][c] for v in A[c]]
        for r in range(p):
            if r != c and A[r][c] != 0:
                A[r] = [vr - A[r][c] * vc for vr, vc in zip(A[r], A[c])]
    return np.array([float(A[i][p]) for i in range(p)])
