"""cuBLAS (``nvmath.bindings.cublas``): trmm and syrk for the blocked inverse of a large
Cholesky factor, and triangular solves (trsm through ``cupyx.scipy.linalg``; by halves with
GEMM for many right-hand sides against a large factor)."""

from __future__ import annotations

import cupy as cp
import numpy as np
from nvmath.bindings import cublas

from .handles import blas_handle

#: Order of the diagonal blocks inverted by trsm in the blocked inverse.
INVERSE_BLOCK = 512

#: Largest order of the diagonal blocks (leaves) of :class:`LowerSolver`, whose inverses
#: it forms once; the split by halves makes them between SOLVE_LEAF / 2 and SOLVE_LEAF.
SOLVE_LEAF = 2048


class ColumnMajor:
    """Pointers to square blocks of a Fortran-ordered n × n device matrix, for cuBLAS."""

    def __init__(self, F):
        self.F, self.n, self.item = F, F.shape[0], F.dtype.itemsize
        self.prefix = {np.dtype(np.float32): "s", np.dtype(np.float64): "d"}[F.dtype]
        self.handle = blas_handle()

    def at(self, row, col):
        return self.F.data.ptr + (row + col * self.n) * self.item

    def scalar(self, value):
        return np.array([value], dtype=self.F.dtype)  # host pointer mode

    def trmm(self, side, trans, m, k, alpha, a, b):
        """In place ``B ← alpha op(A) B`` (side LEFT) or ``B ← alpha B op(A)`` (RIGHT) for
        a lower-triangular A; B is m × k. cuBLAS is out of place, in place when C is B."""
        s = self.scalar(alpha)
        getattr(cublas, self.prefix + "trmm")(
            self.handle, side, cublas.FillMode.LOWER, trans, cublas.DiagType.NON_UNIT,
            m, k, s.ctypes.data, a, self.n, b, self.n, b, self.n)

    def syrk_lower_t(self, order, inner, a, c):
        """``C += Aᵀ A`` on C's lower triangle, A inner × order."""
        one = self.scalar(1.0)
        getattr(cublas, self.prefix + "syrk")(
            self.handle, cublas.FillMode.LOWER, cublas.Operation.T, order, inner,
            one.ctypes.data, a, self.n, one.ctypes.data, c, self.n)


def trtri_lower(cm, r0, r1):
    """In place: the lower-triangular block ``F[r0:r1, r0:r1]`` becomes its inverse.

    ``[[L11, 0], [L21, L22]]⁻¹ = [[W11, 0], [-W22 L21 W11, W22]]``: both halves, then
    two triangular products (trmm), n³/3 flops in all; small blocks by trsm.
    """
    from cupyx.scipy.linalg import solve_triangular

    m = r1 - r0
    if m <= INVERSE_BLOCK:
        block = cm.F[r0:r1, r0:r1]
        block[...] = solve_triangular(cp.tril(block), cp.eye(m, dtype=block.dtype),
                                      lower=True, check_finite=False)
        return
    mid = r0 + m // 2
    trtri_lower(cm, r0, mid)
    trtri_lower(cm, mid, r1)
    left, right = cublas.SideMode.LEFT, cublas.SideMode.RIGHT
    cm.trmm(right, cublas.Operation.N, r1 - mid, mid - r0, 1.0, cm.at(r0, r0), cm.at(mid, r0))
    cm.trmm(left, cublas.Operation.N, r1 - mid, mid - r0, -1.0, cm.at(mid, mid),
            cm.at(mid, r0))


def lauum_lower(cm, r0, r1):
    """In place: the lower triangle of block ``W = F[r0:r1, r0:r1]`` (lower triangular)
    becomes that of ``Wᵀ W`` (LAPACK's lauum): ``[[W11ᵀW11 + W21ᵀW21, ·], [W22ᵀW21,
    W22ᵀW22]]`` by halves, with syrk and trmm; n³/3 flops. The strict upper triangle of
    the block is left unspecified."""
    m = r1 - r0
    if m <= INVERSE_BLOCK:
        block = cm.F[r0:r1, r0:r1]
        W = cp.tril(block)
        block[...] = W.T @ W
        return
    mid = r0 + m // 2
    lauum_lower(cm, r0, mid)
    cm.syrk_lower_t(mid - r0, r1 - mid, cm.at(mid, r0), cm.at(r0, r0))
    cm.trmm(cublas.SideMode.LEFT, cublas.Operation.T, r1 - mid, mid - r0, 1.0,
            cm.at(mid, mid), cm.at(mid, r0))
    lauum_lower(cm, mid, r1)


class LowerSolver:
    """``L⁻¹ B`` for many B against one lower-triangular L held in the lower triangle of a
    Fortran-ordered n × n device buffer (a Cholesky factor's), in place in B.

    cuBLAS trsm reaches ~47 TFLOP/s on an H200 in float64 against ~57 for GEMM, and a
    predictive variance at n = m = 100,000 is n²m = 1e15 flops of triangular solve. Here
    the solve goes by halves, ``[[L11, 0], [L21, L22]]``: ``B1 ← L11⁻¹ B1``, then
    ``B2 ← B2 - L21 B1`` (GEMM, large in all three dimensions near the top), then
    ``B2 ← L22⁻¹ B2``, down to diagonal blocks of at most ``leaf`` rows, whose inverses
    are formed once (trsm against the identity, ``n·leaf²`` flops) and applied by GEMM.
    The extra work is ``2·leaf/n`` of the solve's.

    Rounding: a block solve through inverted diagonal blocks is not backward stable row
    by row as substitution is; its error carries the diagonal blocks' condition numbers
    (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., §13.2), which for
    a Cholesky factor of A are at most √κ(A). The tests compare it with substitution.
    """

    def __init__(self, F, leaf=None):
        if not F.flags.f_contiguous:
            raise ValueError("LowerSolver needs the factor's Fortran-ordered buffer")
        self.cm = ColumnMajor(F)
        self.leaf = SOLVE_LEAF if leaf is None else int(leaf)
        self.inverses = {}
        self._leaves(0, F.shape[0])

    def _leaves(self, r0, r1):
        from cupyx.scipy.linalg import solve_triangular

        if r1 - r0 <= self.leaf:
            block = cp.tril(self.cm.F[r0:r1, r0:r1])
            eye = cp.eye(r1 - r0, dtype=block.dtype, order="F")
            self.inverses[r0, r1] = cp.asfortranarray(
                solve_triangular(block, eye, lower=True, check_finite=False))
            return
        mid = r0 + (r1 - r0) // 2
        self._leaves(r0, mid)
        self._leaves(mid, r1)

    def __call__(self, B):
        """``B ← L⁻¹ B`` for a Fortran-ordered n × k device array B; returns B."""
        n = self.cm.n
        if (B.ndim != 2 or B.shape[0] != n or B.shape[1] == 0 or not B.flags.f_contiguous
                or B.dtype != self.cm.F.dtype):
            raise ValueError("LowerSolver takes a Fortran-ordered n x k array of L's dtype")
        self._work = cp.empty((max(w.shape[0] for w in self.inverses.values()), B.shape[1]),
                              dtype=B.dtype, order="F")
        try:
            self._solve(B, 0, n)
        finally:
            del self._work
        return B

    def _gemm(self, m, k, inner, alpha, a, lda, b, ldb, beta, c, ldc):
        cm = self.cm
        alpha, beta = cm.scalar(alpha), cm.scalar(beta)  # alive through the call
        getattr(cublas, cm.prefix + "gemm")(
            cm.handle, cublas.Operation.N, cublas.Operation.N, m, k, inner,
            alpha.ctypes.data, a, lda, b, ldb, beta.ctypes.data, c, ldc)

    def _solve(self, B, r0, r1):
        n, k, item = self.cm.n, B.shape[1], B.dtype.itemsize
        rows = B.data.ptr + r0 * item
        W = self.inverses.get((r0, r1))
        if W is not None:
            m = r1 - r0
            T = self._work.ravel(order="F")[: m * k].reshape((m, k), order="F")  # ld m
            self._gemm(m, k, m, 1.0, W.data.ptr, m, rows, n, 0.0, T.data.ptr, m)
            B[r0:r1] = T
            return
        mid = r0 + (r1 - r0) // 2
        self._solve(B, r0, mid)
        self._gemm(r1 - mid, k, mid - r0, -1.0, self.cm.at(mid, r0), n, rows, n, 1.0,
                   B.data.ptr + mid * item, n)
        self._solve(B, mid, r1)


def triangular_inverse(L):
    from cupyx.scipy.linalg import solve_triangular

    return solve_triangular(L, cp.eye(L.shape[0], dtype=L.dtype), lower=True)


def solve_triangular(L, B):
    """``L⁻¹ B`` for a lower-triangular L (trsm; only the lower triangle is read)."""
    from cupyx.scipy.linalg import solve_triangular

    return solve_triangular(L, B, lower=True, overwrite_b=False, check_finite=False)
