"""cuSOLVER (``nvmath.bindings.cusolverDn``): the dense factorizations.

potrf/potrs/potri (the Cholesky factor class), syevd/syevdx (symmetric eigenpairs),
gesvdj (SVD) and geqrf/orgqr (Householder QR). The blocked inverse of a large factor is
cuBLAS work: :mod:`.cublas`.
"""

from __future__ import annotations

import cupy as cp
import numpy as np
from nvmath.bindings import cusolverDn

from .._arrays import to_cupy
from . import cublas
from .handles import solver_handle
from .kernels import flag_nonzero, flag_not_positive, keep_upper_halve_diagonal

#: From this order on the inverse in ``half_inverse`` is blocked GEMMs, not potri.
BLOCKED_INVERSE_MIN = 4096
LOWER = 0  # cublasFillMode_t CUBLAS_FILL_MODE_LOWER (column-major lower triangle)
UPPER = 1  # CUBLAS_FILL_MODE_UPPER
_VECTOR = 1  # cusolverEigMode_t CUSOLVER_EIG_MODE_VECTOR
_RANGE_I = 1002  # cusolverEigRange_t CUSOLVER_EIG_RANGE_I


def _routine(dtype, name):
    prefix = {np.dtype(np.float32): "s", np.dtype(np.float64): "d"}.get(np.dtype(dtype))
    if prefix is None:
        raise TypeError(f"cuSOLVER routines here take float32 or float64, got {dtype}.")
    return getattr(cusolverDn, prefix + name)


def _info_value(info):
    return int(info.get()[0])


def _check_info(info, routine):
    value = _info_value(info)
    if value < 0:
        raise RuntimeError(f"cuSOLVER {routine}: argument {-value} had an illegal value.")
    if value > 0:
        raise np.linalg.LinAlgError(f"cuSOLVER {routine} did not converge (info={value}).")


def _workspace(lwork, dtype):
    return cp.empty(max(int(lwork), 1), dtype=dtype)


def potrf(A, overwrite=False):
    """Lower Cholesky factor of ``A`` in a Fortran-ordered buffer, and devInfo. With
    ``overwrite`` a contiguous symmetric ``A`` is factored in its own memory."""
    if overwrite and A.flags.c_contiguous:
        F = A.T  # the same symmetric matrix, Fortran-ordered
    elif overwrite and A.flags.f_contiguous:
        F = A
    else:
        F = cp.array(A, order="F", copy=True)
    n = F.shape[0]
    handle = solver_handle()
    lwork = _routine(F.dtype, "potrf_buffer_size")(handle, LOWER, n, F.data.ptr, n)
    work = _workspace(lwork, F.dtype)
    info = cp.zeros(1, dtype=cp.int32)
    _routine(F.dtype, "potrf")(handle, LOWER, n, F.data.ptr, n, work.data.ptr, lwork,
                               info.data.ptr)
    return F, _info_value(info)


def potrf_panel(P, w, status, index):
    """In place, for the Fortran-ordered m × w panel P of a supernode: the lower Cholesky
    factor of its top w × w block, and the rows below times that factor's inverse
    transpose (potrf with leading dimension m, then trsm from the right). potrf's status
    goes to ``status[index]`` on the device (int32), read by the caller once for all
    panels: no synchronisation here."""
    m = P.shape[0]
    if not P.flags.f_contiguous:
        raise ValueError("potrf_panel takes a Fortran-ordered panel")
    handle = solver_handle()
    lwork = _routine(P.dtype, "potrf_buffer_size")(handle, LOWER, w, P.data.ptr, m)
    work = _workspace(lwork, P.dtype)
    _routine(P.dtype, "potrf")(handle, LOWER, w, P.data.ptr, m, work.data.ptr, lwork,
                               status.data.ptr + index * status.itemsize)
    if m > w:
        cublas.trsm_right_lower_t(P, w)


def potrf_batched(A):
    """The lower Cholesky factors of a C-contiguous stack of symmetric blocks (g × w ×
    w, factored in place; the factors returned with their upper triangles zero), and
    whether every block was positive definite: potrf's status and every diagonal
    entry finite and positive, read through one flag on the device (one
    synchronisation). cuSOLVER's batched potrf called directly: CuPy's
    ``linalg.cholesky`` checks the statuses with a reduction compiled anew for every
    batch size (:mod:`.kernels`)."""
    g, w, _ = A.shape
    if not A.flags.c_contiguous:
        raise ValueError("potrf_batched takes a C-contiguous stack")
    # a C-ordered symmetric block read column-major is itself: its upper triangle there
    # is the lower one here, so the factor U (A = UᵀU) comes out as L = Uᵀ, row-major
    pointers = cp.arange(g, dtype=cp.uint64) * np.uint64(w * w * A.itemsize)
    pointers += np.uint64(A.data.ptr)
    info = cp.zeros(g, dtype=cp.int32)
    _routine(A.dtype, "potrf_batched")(solver_handle(), UPPER, w, pointers.data.ptr, w,
                                       info.data.ptr, g)
    flag = cp.zeros(1, dtype=cp.int32)
    flag_nonzero(info, flag)
    flag_not_positive(cp.diagonal(A, axis1=1, axis2=2), flag)
    return cp.tril(A), not bool(flag.get()[0])


def householder_qr(Y, want_q):
    """geqrf (and orgqr for Q) on a Fortran copy of tall ``Y``: returns (Q or None, R)."""
    F = cp.array(Y, order="F", copy=True)
    m, n = F.shape
    k = min(m, n)
    dt = F.dtype
    handle = solver_handle()
    tau = cp.empty(k, dtype=dt)
    info = cp.zeros(1, dtype=cp.int32)
    lwork = _routine(dt, "geqrf_buffer_size")(handle, m, n, F.data.ptr, m)
    work = _workspace(lwork, dt)
    _routine(dt, "geqrf")(handle, m, n, F.data.ptr, m, tau.data.ptr, work.data.ptr, lwork,
                          info.data.ptr)
    _check_info(info, "geqrf")
    R = cp.triu(F[:k, :])
    if not want_q:
        return None, R
    lwork = _routine(dt, "orgqr_buffer_size")(handle, m, k, k, F.data.ptr, m, tau.data.ptr)
    work = _workspace(lwork, dt)
    _routine(dt, "orgqr")(handle, m, k, k, F.data.ptr, m, tau.data.ptr, work.data.ptr, lwork,
                          info.data.ptr)
    _check_info(info, "orgqr")
    return F[:, :k], R


def positive_diagonal(Q, R):
    signs = cp.where(cp.diag(R) < 0, -1.0, 1.0).astype(R.dtype)
    return (None if Q is None else Q * signs), R * signs[:, None]



def syevd(A, top=None):
    """Eigenpairs of the symmetric ``A`` (its lower triangle), all (syevd) or the ``top``
    largest (syevdx), eigenvalues descending."""
    F = cp.array(A, order="F", copy=True)
    n = F.shape[0]
    dt = F.dtype
    handle = solver_handle()
    w = cp.empty(n, dtype=dt)
    info = cp.zeros(1, dtype=cp.int32)
    if top is None or top >= n:
        lwork = _routine(dt, "syevd_buffer_size")(handle, _VECTOR, LOWER, n, F.data.ptr,
                                                  n, w.data.ptr)
        work = _workspace(lwork, dt)
        _routine(dt, "syevd")(handle, _VECTOR, LOWER, n, F.data.ptr, n, w.data.ptr,
                              work.data.ptr, lwork, info.data.ptr)
        _check_info(info, "syevd")
        return w[::-1].copy(), F[:, ::-1].copy()
    il, iu = n - top + 1, n  # 1-based indices of the top eigenvalues
    meig = np.zeros(1, dtype=np.int32)
    lwork = _routine(dt, "syevdx_buffer_size")(
        handle, _VECTOR, _RANGE_I, LOWER, n, F.data.ptr, n, 0.0, 0.0, il, iu,
        meig.ctypes.data, w.data.ptr)
    work = _workspace(lwork, dt)
    found = _routine(dt, "syevdx")(handle, _VECTOR, _RANGE_I, LOWER, n, F.data.ptr, n,
                                   0.0, 0.0, il, iu, w.data.ptr, work.data.ptr, lwork,
                                   info.data.ptr)
    _check_info(info, "syevdx")
    found = int(found)
    return w[:found][::-1].copy(), F[:, :found][:, ::-1].copy()


def gesvdj(A):
    """Economy SVD ``(U, s, Vt)`` of ``A`` by gesvdj, singular values descending."""
    F = cp.array(A, order="F", copy=True)
    m, n = F.shape
    k = min(m, n)
    dt = F.dtype
    handle = solver_handle()
    s = cp.empty(k, dtype=dt)
    U = cp.empty((m, k), dtype=dt, order="F")
    V = cp.empty((n, k), dtype=dt, order="F")
    info = cp.zeros(1, dtype=cp.int32)
    params = cusolverDn.create_gesvdj_info()
    try:
        lwork = _routine(dt, "gesvdj_buffer_size")(
            handle, _VECTOR, 1, m, n, F.data.ptr, m, s.data.ptr, U.data.ptr, m,
            V.data.ptr, n, params)
        work = _workspace(lwork, dt)
        _routine(dt, "gesvdj")(handle, _VECTOR, 1, m, n, F.data.ptr, m, s.data.ptr,
                               U.data.ptr, m, V.data.ptr, n, work.data.ptr, lwork,
                               info.data.ptr, params)
        _check_info(info, "gesvdj")
    finally:
        cusolverDn.destroy_gesvdj_info(params)
    order = cp.argsort(-s)
    return U[:, order], s[order], V[:, order].T


class GPUCholeskyFactor:
    """Dense Cholesky factor ``A = L Lᵀ`` on the device (cuSOLVER potrf/potrs/potri)."""

    def __init__(self, F, what):
        self._F = F  # Fortran-ordered; its lower triangle is L
        self._what = what

    @property
    def L(self):
        return cp.tril(self._F)

    @property
    def lower(self):
        """An array whose lower triangle is L (the strict upper one is unspecified)."""
        return self._F

    def solve(self, B):
        B = to_cupy(B)
        one_d = B.ndim == 1
        Bf = cp.array(B.reshape(-1, 1) if one_d else B, order="F", copy=True,
                      dtype=self._F.dtype)
        n, nrhs = Bf.shape
        info = cp.zeros(1, dtype=cp.int32)
        _routine(self._F.dtype, "potrs")(solver_handle(), LOWER, n, nrhs, self._F.data.ptr,
                                         n, Bf.data.ptr, n, info.data.ptr)
        _check_info(info, "potrs")
        return Bf.ravel() if one_d else Bf

    def logdet(self):
        return 2.0 * float(cp.log(cp.diag(self._F)).sum())

    def inverse(self):
        F = self._potri(self._F.copy(order="F"))
        lower = cp.tril(F)
        return lower + cp.tril(F, -1).T

    def half_inverse(self):
        """P with ``P + Pᵀ = A⁻¹`` (a triangle of A⁻¹, diagonal halved), C-contiguous;
        the factor is unusable afterwards. ``tr(A⁻¹ B) = 2·vdot(P, B)`` for a
        symmetric B.

        Small n: potri in place. From ``BLOCKED_INVERSE_MIN`` on, the same two steps as
        potri (``W = L⁻¹``, then the lower triangle of ``Wᵀ W``), also in place, but
        recursive by halves so that the work is GEMMs on large blocks (:mod:`.cublas`;
        cuSOLVER's potri reaches ~15 TFLOP/s here, and it and trtri fail with
        INVALID_VALUE from 2³¹ elements on); 2n³/3 flops, no second n × n buffer (a
        buffer of 1,024 rows or columns beside it).
        """
        F, self._F = self._F, None
        n = F.shape[0]
        if n < BLOCKED_INVERSE_MIN:
            F = self._potri(F)
        else:
            if not F.flags.f_contiguous:
                F = cp.asfortranarray(F)
            cm = cublas.ColumnMajor(F)
            cublas.trtri_lower(cm, 0, n)
            cublas.lauum_lower(cm, 0, n)
        P = F.T  # C-contiguous view: the column-major lower triangle
        keep_upper_halve_diagonal(n, P)
        return P

    def _potri(self, F):
        n = F.shape[0]
        handle = solver_handle()
        lwork = _routine(F.dtype, "potri_buffer_size")(handle, LOWER, n, F.data.ptr, n)
        work = _workspace(lwork, F.dtype)
        info = cp.zeros(1, dtype=cp.int32)
        _routine(F.dtype, "potri")(handle, LOWER, n, F.data.ptr, n, work.data.ptr, lwork,
                                   info.data.ptr)
        _check_info(info, "potri")
        return F
