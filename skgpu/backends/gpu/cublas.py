"""cuBLAS (``nvmath.bindings.cublas``): trmm, syrk and GEMM for the blocked inverse of a
large Cholesky factor, and triangular solves (trsm through ``cupyx.scipy.linalg``)."""

from __future__ import annotations

import cupy as cp
import numpy as np
from nvmath.bindings import cublas

from .handles import blas_handle

#: Order of the diagonal blocks inverted by trsm in the blocked inverse (the leaves of
#: its recursion by halves). Leaves of 1,024 rather than 512 took the half inverse at
#: n = 20,000 from 146 to 139 ms, and the public LML with its gradient there from 335.8
#: to 325.2 ms (an H100, the two alternating, medians of 5; gradients equal to 3e-15).
#: cuSOLVER's trtri in place (and a syrk for lauum's leaves) in place of the trsm was
#: slower at every leaf size: 148.7 / 154.8 / 147.0 ms at 1,024 / 512 / 2,048 against
#: 139.7 ms (n = 20,000, an H100; benchmarks/README.md, probe ``trtri_leaves``).
INVERSE_BLOCK = 1024
#: From this order of the triangle on, the blocked inverse's triangular products (trmm,
#: syrk) are GEMMs on blocks of ``GEMM_BLOCK`` rows or columns, with trmm only on the
#: diagonal blocks; below it, one cuBLAS trmm or syrk. cuBLAS's trmm and syrk ran at
#: 40-44 TFLOP/s on an H100 at order 10,000 where its GEMM ran at 57: the half inverse at
#: n = 20,000 took 173 ms with them and 146 ms with GEMMs by blocks of 1,024
#: (benchmarks/results/half_inverse_gemm_h100.json).
GEMM_FROM = 2048
GEMM_BLOCK = 1024
#: The GEMM route is taken for matrices of at most this many elements (n ≤ 46,340), the
#: largest it has run on (n = 40,000); larger ones keep cuBLAS's trmm and syrk, which ran
#: at n = 100,000.
GEMM_MAX_ELEMENTS = 2**31 - 1


class ColumnMajor:
    """Pointers to square blocks of a Fortran-ordered n × n device matrix, for cuBLAS."""

    def __init__(self, F):
        self.F, self.n, self.item = F, F.shape[0], F.dtype.itemsize
        self.by_gemm = F.size <= GEMM_MAX_ELEMENTS  # the GEMM route allowed for F
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

    def trmm_into(self, side, trans, m, k, alpha, a, b, c, ldc):
        """``C ← alpha op(A) B`` (side LEFT) or ``C ← alpha B op(A)`` (RIGHT) for a
        lower-triangular A in this matrix, B (m × k) in this matrix and C (m × k) elsewhere
        with leading dimension ``ldc``."""
        s = self.scalar(alpha)
        getattr(cublas, self.prefix + "trmm")(
            self.handle, side, cublas.FillMode.LOWER, trans, cublas.DiagType.NON_UNIT,
            m, k, s.ctypes.data, a, self.n, b, self.n, c, ldc)

    def gemm(self, ta, tb, m, k, inner, alpha, a, b, c, ldc, beta=1.0):
        """``C ← alpha op(A) op(B) + beta C``, C m × k with leading dimension ``ldc``, A and
        B in this matrix."""
        s, t = self.scalar(alpha), self.scalar(beta)
        getattr(cublas, self.prefix + "gemm")(
            self.handle, ta, tb, m, k, inner, s.ctypes.data, a, self.n, b, self.n,
            t.ctypes.data, c, ldc)

    def copy_in(self, T, m, k, dst):
        """Copy the leading m × k block of the Fortran-ordered T to ``dst`` in this
        matrix."""
        cp.cuda.runtime.memcpy2DAsync(
            dst, self.n * self.item, T.data.ptr, T.shape[0] * self.item, m * self.item, k,
            cp.cuda.runtime.memcpyDeviceToDevice, cp.cuda.get_current_stream().ptr)

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
    trmm_right(cm, r0, (mid, r0), r1 - mid, mid - r0, 1.0)
    trmm_left(cm, mid, (mid, r0), r1 - mid, mid - r0, -1.0, cublas.Operation.N)


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
    syrk_lower_t(cm, (mid, r0), r0, mid - r0, r1 - mid)
    trmm_left(cm, mid, (mid, r0), r1 - mid, mid - r0, 1.0, cublas.Operation.T)
    lauum_lower(cm, mid, r1)


def trmm_right(cm, a0, b0, m, k, alpha):
    """In place ``B ← alpha B A`` for the lower-triangular k × k block A at ``(a0, a0)``
    and the m × k block B at ``b0`` (row, column). From ``GEMM_FROM`` on, by blocks J of
    A's columns, left to right: ``B[:, J] A[J, J]`` (trmm into a buffer) plus
    ``B[:, after J] A[after J, J]`` (GEMM), then the buffer into ``B[:, J]``, whose old
    values no later block reads."""
    right, no = cublas.SideMode.RIGHT, cublas.Operation.N
    if k < GEMM_FROM or not cm.by_gemm:
        cm.trmm(right, no, m, k, alpha, cm.at(a0, a0), cm.at(*b0))
        return
    w = GEMM_BLOCK
    T = cp.empty((m, w), dtype=cm.F.dtype, order="F")
    for j0 in range(0, k, w):
        j1 = min(k, j0 + w)
        cm.trmm_into(right, no, m, j1 - j0, alpha, cm.at(a0 + j0, a0 + j0),
                     cm.at(b0[0], b0[1] + j0), T.data.ptr, m)
        if j1 < k:
            cm.gemm(no, no, m, j1 - j0, k - j1, alpha, cm.at(b0[0], b0[1] + j1),
                    cm.at(a0 + j1, a0 + j0), T.data.ptr, m)
        cm.copy_in(T, m, j1 - j0, cm.at(b0[0], b0[1] + j0))


def trmm_left(cm, a0, b0, m, k, alpha, trans):
    """In place ``B ← alpha op(A) B`` for the lower-triangular m × m block A at
    ``(a0, a0)`` (op: ``cublas.Operation.N`` or ``T``) and the m × k block B at ``b0``.
    From ``GEMM_FROM`` on, by blocks I of B's rows: ``op(A)[I, I] B[I]`` (trmm into a
    buffer) plus the GEMM of the rows of op(A)'s other nonzero blocks, then the buffer
    into ``B[I]``: bottom to top for A (row I reads B's rows up to I), top to bottom for
    Aᵀ (row I reads B's rows from I on)."""
    left, no = cublas.SideMode.LEFT, cublas.Operation.N
    if m < GEMM_FROM or not cm.by_gemm:
        cm.trmm(left, trans, m, k, alpha, cm.at(a0, a0), cm.at(*b0))
        return
    w = GEMM_BLOCK
    T = cp.empty((w, k), dtype=cm.F.dtype, order="F")
    starts = range(0, m, w)
    for i0 in (reversed(starts) if trans == no else starts):
        i1 = min(m, i0 + w)
        cm.trmm_into(left, trans, i1 - i0, k, alpha, cm.at(a0 + i0, a0 + i0),
                     cm.at(b0[0] + i0, b0[1]), T.data.ptr, w)
        if trans == no and i0 > 0:  # A[I, :I] B[:I]
            cm.gemm(no, no, i1 - i0, k, i0, alpha, cm.at(a0 + i0, a0),
                    cm.at(b0[0], b0[1]), T.data.ptr, w)
        elif trans != no and i1 < m:  # A[I:, I]ᵀ B[I:]
            cm.gemm(trans, no, i1 - i0, k, m - i1, alpha, cm.at(a0 + i1, a0 + i0),
                    cm.at(b0[0] + i1, b0[1]), T.data.ptr, w)
        cm.copy_in(T, i1 - i0, k, cm.at(b0[0] + i0, b0[1]))


def syrk_lower_t(cm, a0, c0, order, inner):
    """``C += Aᵀ A`` on the lower triangle of the order × order block C at ``(c0, c0)``,
    for the inner × order block A at ``a0``: from ``GEMM_FROM`` on by halves of C, the
    off-diagonal block a GEMM and the diagonal ones recursively."""
    if order < GEMM_FROM or not cm.by_gemm:
        cm.syrk_lower_t(order, inner, cm.at(*a0), cm.at(c0, c0))
        return
    h = order // 2
    syrk_lower_t(cm, a0, c0, h, inner)
    cm.gemm(cublas.Operation.T, cublas.Operation.N, order - h, h, inner, 1.0,
            cm.at(a0[0], a0[1] + h), cm.at(*a0), cm.at(c0 + h, c0), cm.n)
    syrk_lower_t(cm, (a0[0], a0[1] + h), c0 + h, order - h, inner)



def triangular_inverse(L):
    from cupyx.scipy.linalg import solve_triangular

    return solve_triangular(L, cp.eye(L.shape[0], dtype=L.dtype), lower=True)


def solve_triangular_right(L, C):
    """In place ``C ← C L⁻ᵀ`` for a Fortran-ordered k × n C and a lower-triangular L in a
    Fortran-ordered n × n buffer (only its lower triangle is read): cuBLAS trsm from the
    right. The rows of the result are ``(L⁻¹ cᵢ)ᵀ``, what a predictive variance needs;
    measured on an H200 at n = 100,000 with 4,000 rows it runs at 51.4 TFLOP/s, against
    48.7 for ``L⁻¹ Cᵀ`` from the left through CuPy (which copies) and 50.0 in place
    (the probe ``bench_lower_solve --sides``: benchmarks/README.md, "Probes")."""
    n = L.shape[0]
    if (C.ndim != 2 or C.shape[1] != n or not C.flags.f_contiguous
            or not L.flags.f_contiguous or C.dtype != L.dtype):
        raise ValueError("solve_triangular_right takes a Fortran-ordered k x n array and a "
                         "Fortran-ordered n x n factor of the same dtype")
    if C.shape[0] == 0:
        return C
    cm = ColumnMajor(L)
    one = cm.scalar(1.0)  # alive through the call (host pointer mode)
    getattr(cublas, cm.prefix + "trsm")(
        cm.handle, cublas.SideMode.RIGHT, cublas.FillMode.LOWER, cublas.Operation.T,
        cublas.DiagType.NON_UNIT, C.shape[0], n, one.ctypes.data, L.data.ptr, n,
        C.data.ptr, C.shape[0])
    return C


def trsm_right_lower_t(P, w):
    """In place ``P[w:] ← P[w:] L⁻ᵀ`` for L the lower triangle of ``P[:w]``, P a
    Fortran-ordered m × w panel (one trsm with leading dimension m)."""
    m = P.shape[0]
    prefix = {np.dtype(np.float32): "s", np.dtype(np.float64): "d"}[P.dtype]
    one = np.array([1.0], dtype=P.dtype)  # host pointer mode, alive through the call
    getattr(cublas, prefix + "trsm")(
        blas_handle(), cublas.SideMode.RIGHT, cublas.FillMode.LOWER, cublas.Operation.T,
        cublas.DiagType.NON_UNIT, m - w, w, one.ctypes.data, P.data.ptr, m,
        P.data.ptr + w * P.itemsize, m)


def _fortran_view(A):
    """(pointer, leading dimension) of a 2-D device array whose columns are contiguous
    (a Fortran-ordered array or a block of rows of one)."""
    if A.ndim != 2 or (A.strides[0] != A.itemsize and A.shape[0] > 1):
        raise ValueError("a block of a Fortran-ordered array is needed here")
    ld = max(A.strides[1] // A.itemsize if A.shape[1] > 1 else A.shape[0], A.shape[0], 1)
    return A.data.ptr, ld


def panel_update(P, w, out):
    """``out ← L_RJ L_RJᵀ`` on out's lower triangle (syrk; the strict upper one is left
    as it was), for the Fortran-ordered m × w panel ``P = [L_JJ; L_RJ]`` and a
    Fortran-ordered (m − w) × (m − w) ``out``."""
    m = P.shape[0]
    r = m - w
    prefix = {np.dtype(np.float32): "s", np.dtype(np.float64): "d"}[P.dtype]
    one, zero = np.array([1.0], dtype=P.dtype), np.array([0.0], dtype=P.dtype)
    c, ldc = _fortran_view(out)
    getattr(cublas, prefix + "syrk")(
        blas_handle(), cublas.FillMode.LOWER, cublas.Operation.N, r, w, one.ctypes.data,
        P.data.ptr + w * P.itemsize, m, zero.ctypes.data, c, ldc)


def panel_forward(P, w, Y, out):
    """In place ``Y ← L_JJ⁻¹ Y`` (trsm from the left), then ``out ← −L_RJ Y`` (GEMM: the
    update the rows below take), for
    the Fortran-ordered m × w panel ``P = [L_JJ; L_RJ]``, a w × k block Y with contiguous
    columns (rows of a Fortran-ordered array) and a Fortran-ordered (m − w) × k ``out``
    (m > w), or none (m = w)."""
    m = P.shape[0]
    k = Y.shape[1]
    if k == 0:
        return
    prefix = {np.dtype(np.float32): "s", np.dtype(np.float64): "d"}[P.dtype]
    one, zero = np.array([1.0], dtype=P.dtype), np.array([0.0], dtype=P.dtype)
    minus = np.array([-1.0], dtype=P.dtype)
    y, ldy = _fortran_view(Y)
    handle = blas_handle()
    getattr(cublas, prefix + "trsm")(
        handle, cublas.SideMode.LEFT, cublas.FillMode.LOWER, cublas.Operation.N,
        cublas.DiagType.NON_UNIT, w, k, one.ctypes.data, P.data.ptr, m, y, ldy)
    if m > w:
        c, ldc = _fortran_view(out)
        getattr(cublas, prefix + "gemm")(
            handle, cublas.Operation.N, cublas.Operation.N, m - w, k, w, minus.ctypes.data,
            P.data.ptr + w * P.itemsize, m, y, ldy, zero.ctypes.data, c, ldc)


def solve_triangular(L, B, transpose=False):
    """``L⁻¹ B`` (``L⁻ᵀ B`` with ``transpose``) for a lower-triangular L (trsm; only the
    lower triangle is read); for stacks (3-D L and B), one batched trsm (CuPy's
    ``solve_triangular`` takes batches; one by one where a CuPy without them refuses)."""
    from cupyx.scipy.linalg import solve_triangular

    trans = "T" if transpose else "N"
    if L.ndim == 3:
        try:
            return solve_triangular(L, B, trans=trans, lower=True, overwrite_b=False,
                                    check_finite=False)
        except ValueError:  # a CuPy whose solve_triangular takes one matrix
            return cp.stack([solve_triangular(Li, Bi, trans=trans, lower=True,
                                              check_finite=False) for Li, Bi in zip(L, B)])
    return solve_triangular(L, B, trans=trans, lower=True, overwrite_b=False,
                            check_finite=False)
