"""Residuals in about twice float64's precision from float64 GEMMs, on either backend.

:class:`SlicedMatrix` gives ``Y - A @ B`` rounded once to float64, where ``Y``, ``A`` and
``B`` may each carry a low part (a double-double: the value is ``hi + lo``). The product
``A @ B`` is computed error-free by the splitting of Ozaki et al. (2012, "Error-free
transformations of matrix multiplication by using fast routines of matrix multiplication
and its applications"): ``A`` is cut into slices of ``b`` bits relative to each row's
largest entry and ``B`` into slices of ``b`` bits relative to each column's, with
``2b + ⌈log₂ k⌉ <= 53`` for the inner dimension ``k``; the product of two slices is then
a sum of integers below 2⁵³ times one power of two per entry, which every GEMM (BLAS or
cuBLAS, any summation order) returns exactly. The slice products are accumulated with
Knuth's TwoSum. Pairs of slices ``(i, j)`` with ``i + j >= s`` (``s`` slices a side) are
left out; each of their entries is below ``2^-(s·b)`` of a row's largest ``|a|`` times a
column's largest ``|b|``, and ``s`` is chosen so that ``s·b >= 64 + log₂(k)/2``: what is
left out is below a rounding of NumPy's longdouble per term, summed with random signs.

It is used where a float64 residual ``y - X β`` loses digits to cancellation (``X β``
close to ``y``, large entries of β): RidgeCV's leave-one-out on ill-conditioned X.
"""

from __future__ import annotations

import math

#: Bits kept beyond the leading ones of each row and column (see the module's text).
KEPT_BITS = 64


def two_sum(a, b):
    """``(s, e)`` with ``s = fl(a + b)`` and ``a + b = s + e`` exactly (Knuth)."""
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    return s, e


def _slices(xp, A, bits, axis, count):
    """``count`` arrays summing to ``A`` up to ``2^-(count·bits)`` of the largest entry
    along ``axis``; slice ``m`` holds integers of at most ``bits`` bits times
    ``2^(e - (m+1)·bits)``, ``2^e`` bounding the entries along ``axis``."""
    top = xp.max(xp.abs(A), axis=axis, keepdims=True)
    _, e = xp.frexp(top)  # top < 2**e (e = 0 for an all-zero row or column)
    rest = A
    out = []
    for m in range(count):
        unit = e - (m + 1) * bits
        piece = xp.ldexp(xp.rint(xp.ldexp(rest, -unit)), unit)
        out.append(piece)
        rest = rest - piece  # exact: piece is rest rounded to a multiple of 2**unit
    return out


def slice_bits(k):
    """Bits per slice for an inner dimension ``k``: sums of ``k`` products of two slice
    integers stay below 2⁵³."""
    return (53 - max(1, math.ceil(math.log2(max(k, 2))))) // 2


def slice_count(k):
    """Slices a side for an inner dimension ``k``: ``s·b >= KEPT_BITS + log₂(k)/2``."""
    return max(2, math.ceil((KEPT_BITS + math.log2(max(k, 2)) / 2) / slice_bits(k)))


class SlicedMatrix:
    """A float64 matrix ``A + A_lo`` (n, k), or its transpose, split once for error-free
    products.

    ``transpose=True`` represents ``(A + A_lo)ᵀ`` without a transposed copy: A is sliced
    per column, with the bits its inner dimension (A's rows) allows. With ``s`` slices
    (:func:`slice_count`) a product costs ``s(s+1)/2`` GEMMs; the slices hold ``s``
    arrays of A's size. The optional low part ``A_lo`` (of ε's order beside A) is
    multiplied in float64.
    """

    def __init__(self, ops, A, A_lo=None, *, transpose=False):
        xp = ops.xp
        self.ops = ops
        inner = 0 if transpose else 1  # A's axis that the products sum over
        self.bits, self.count = slice_bits(A.shape[inner]), slice_count(A.shape[inner])
        # Each index of the inner dimension is scaled by a power of two (exact) to a
        # largest |entry| in [1/2, 1): the slices are cut per row of the other axis, so
        # without it columns of very different scales (features in different units)
        # would lose the small ones' digits to the large ones' leading bits. The other
        # operand's rows are scaled back in each product.
        _, e = xp.frexp(xp.max(xp.abs(A), axis=1 - inner))
        self.scale = xp.ldexp(xp.ones(e.shape, dtype=A.dtype), e)  # multiplies B's rows
        shape = (-1, 1) if transpose else (1, -1)
        A = xp.ldexp(A, -e.reshape(shape))
        self.parts = [P.T if transpose else P
                      for P in _slices(xp, A, self.bits, inner, self.count)]
        self.A = A.T if transpose else A
        self.lo = None if A_lo is None else xp.ldexp(A_lo, -e.reshape(shape))
        if self.lo is not None and transpose:
            self.lo = self.lo.T

    def residual(self, Y, B, Y_lo=None, B_lo=None):
        """``(Y + Y_lo) - (A + A_lo) @ (B + B_lo)`` rounded once to float64, for the
        represented matrix of shape (n, k): ``Y`` (n, m), ``B`` and ``B_lo`` (k, m). The
        products of A's slices with B's are exact term by term and summed largest first
        with TwoSum; ``A @ B_lo`` and ``A_lo @ B``, of ε's order beside ``A @ B``, are
        added in float64."""
        ops, xp = self.ops, self.ops.xp
        B = B * self.scale[:, None]  # exact: powers of two
        if B_lo is not None:
            B_lo = B_lo * self.scale[:, None]
        Bs = _slices(xp, B, self.bits, 0, self.count)
        hi = Y.copy()
        lo = xp.zeros_like(hi) if Y_lo is None else Y_lo.copy()
        for total in range(self.count):
            for i in range(total + 1):
                hi, err = two_sum(hi, -ops.matmul(self.parts[i], Bs[total - i]))
                lo += err
        if self.lo is not None:
            lo -= ops.matmul(self.lo, B)
        if B_lo is not None:
            lo -= ops.matmul(self.A, B_lo)
        return hi + lo
