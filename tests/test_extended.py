"""Error-free products (``skgpu.backends._extended``), against exact rational arithmetic.

The residual ``Y - A @ B`` must come back as the exact value rounded once to float64
(within a few ulps and the documented truncation), whatever the cancellation: the
fixtures make ``A @ B`` cancel ``Y`` to 1e-12 of its terms, where a float64 GEMM keeps no
correct digit.
"""

from fractions import Fraction

import numpy as np
import pytest

from skgpu.backends._extended import SlicedMatrix, slice_bits, slice_count, two_sum


def _exact(Y, A, B, Y_lo=None, A_lo=None, B_lo=None):
    """(Y + Y_lo) - (A + A_lo) @ (B + B_lo) in rationals, as a float64 array."""
    def val(M, lo, i, j):
        v = Fraction(float(M[i, j]))
        return v if lo is None else v + Fraction(float(lo[i, j]))

    n, m = Y.shape
    k = A.shape[1]
    out = np.empty((n, m))
    for i in range(n):
        row = [val(A, A_lo, i, q) for q in range(k)]
        for j in range(m):
            acc = val(Y, Y_lo, i, j)
            for q in range(k):
                acc -= row[q] * val(B, B_lo, q, j)
            out[i, j] = float(acc)
    return out


def _cancelling_case(rng, n, k, m, spread):
    """A with rows and columns scaled over ``spread`` decades (samples and features in
    different units), B with rows scaled inversely (coefficients of such features) and
    columns over ``spread`` decades, and Y = A B + a residual 1e-12 of the terms' scale
    (A B computed exactly, so the exact residual is known to be small)."""
    cols = 10.0 ** rng.uniform(-spread, spread, k)
    A = (rng.standard_normal((n, k)) * 10.0 ** rng.uniform(-spread, spread, (n, 1))
         * cols)
    B = rng.standard_normal((k, m)) / cols[:, None] * 10.0 ** rng.uniform(-spread, spread,
                                                                          m)
    Y = np.array([[float(sum(Fraction(float(A[i, q])) * Fraction(float(B[q, j]))
                             for q in range(k))) for j in range(m)] for i in range(n)])
    Y += 1e-12 * np.abs(A) @ np.abs(B) * rng.standard_normal((n, m))
    return Y, A, B


def _assert_one_rounding(ours, exact, A, B):
    """Within 2 ulps of the exact value, plus the truncation the module documents
    (2^-64 of |A||B|)."""
    bound = 2 * np.spacing(np.abs(exact)) + 2.0 ** -64 * (np.abs(A) @ np.abs(B))
    assert np.all(np.abs(ours - exact) <= bound), np.max(np.abs(ours - exact) / bound)


@pytest.mark.parametrize("k", [7, 40, 300])
@pytest.mark.parametrize("spread", [0, 3])
def test_residual_is_exact_rounded(ops, seed, k, spread):
    rng = np.random.default_rng(seed)
    Y, A, B = _cancelling_case(rng, 6, k, 3, spread)
    ours = ops.to_host(SlicedMatrix(ops, ops.asarray(A)).residual(ops.asarray(Y),
                                                                    ops.asarray(B)))
    exact = _exact(Y, A, B)
    _assert_one_rounding(ours, exact, A, B)
    naive = Y - A @ B  # what float64 gives: wrong in every digit here
    assert np.max(np.abs(naive - exact) / np.abs(exact)) > 1e-8


def test_transposed_and_low_parts_are_exact(ops, seed):
    """``transpose=True`` represents Aᵀ; the low parts of Y, A and B count."""
    rng = np.random.default_rng(seed)
    Y, At, B = _cancelling_case(rng, 5, 90, 2, 2)
    A = np.ascontiguousarray(At.T)  # (90, 5): its transpose is the (5, 90) operand
    A_lo = A * 1e-17 * rng.standard_normal(A.shape)
    Y_lo = Y * 1e-17 * rng.standard_normal(Y.shape)
    B_lo = B * 1e-17 * rng.standard_normal(B.shape)
    sliced = SlicedMatrix(ops, ops.asarray(A), ops.asarray(A_lo), transpose=True)
    ours = ops.to_host(sliced.residual(ops.asarray(Y), ops.asarray(B), ops.asarray(Y_lo),
                                       ops.asarray(B_lo)))
    exact = _exact(Y, At, B, Y_lo, np.ascontiguousarray(A_lo.T), B_lo)
    _assert_one_rounding(ours, exact, At, B)
    # the low parts matter at this cancellation: leaving them out is visibly wrong
    without = _exact(Y, At, B)
    assert np.max(np.abs(without - exact) / np.abs(exact)) > 1e-6


def test_slices_keep_sums_below_2_to_53():
    for k in [2, 8, 40, 256, 2000, 500_000, 10**7]:
        b = slice_bits(k)
        assert 2 * b + np.ceil(np.log2(k)) <= 53
        assert slice_count(k) * b >= 64 + np.log2(k) / 2


def test_two_sum_is_exact(seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(200) * 10.0 ** rng.uniform(-20, 20, 200)
    b = rng.standard_normal(200) * 10.0 ** rng.uniform(-20, 20, 200)
    s, e = two_sum(a, b)
    for x, y, hi, lo in zip(a, b, s, e):
        assert Fraction(float(x)) + Fraction(float(y)) == Fraction(float(hi)) + Fraction(
            float(lo))
