"""Ridge on columns of very different scales: every coefficient, the smallest columns'
too, against the exact solution in rational arithmetic of the data as given."""

from fractions import Fraction

import numpy as np
import pytest
from conftest import DEVICES

import skgpu
from skgpu.linear_model import Ridge


def _exact_coef(X, y, alpha, fit_intercept=True):
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


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype,spread", [(np.float64, 8), (np.float64, 4),
                                          (np.float32, 2)])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_badly_scaled_columns_exact(device, dtype, spread, fit_intercept, seed):
    rng = np.random.RandomState(seed)
    X = (rng.randn(40, 6) * np.logspace(-spread, spread, 6)).astype(dtype)
    y = rng.randn(40).astype(dtype)
    with skgpu.config_context(device=device):
        coef = Ridge(alpha=1.0, fit_intercept=fit_intercept).fit(X, y).coef_
    exact = _exact_coef(X, y, 1.0, fit_intercept)
    # every coefficient to a relative accuracy set by the precision and the
    # conditioning of the diagonally scaled problem (well conditioned here)
    tol = 1e-9 if dtype == np.float64 else 2e-3
    np.testing.assert_allclose(coef, exact, rtol=tol, atol=0)
