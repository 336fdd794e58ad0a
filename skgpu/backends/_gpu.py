"""The GPU backend: the operation set of DESIGN.md on nvmath-python with CuPy arrays.

Heavy kernels are nvmath's: cuBLASLt matmul through ``nvmath.bindings.cublasLt`` (with
the BIAS epilog, plans cached per shape, see :class:`_LtPlan`), cuSOLVER through
``nvmath.bindings.cusolverDn`` (potrf/potrs/potri, syevd/syevdx, gesvdj, geqrf/orgqr),
cuSPARSE SpMM through ``nvmath.bindings.cusparse`` and cuDSS through
``nvmath.sparse.advanced.DirectSolver``. CuPy is the array container and runs the
elementwise work. This module imports CuPy and nvmath at import time; the seam imports
it only when the GPU is asked for.
"""

from __future__ import annotations

import glob
import logging
import os
import threading
from collections import OrderedDict

import cupy as cp
import cupyx.scipy.sparse as csp
import numpy as np
import nvmath
from nvmath.bindings import cublas, cublasLt, cusolverDn, cusparse
from nvmath.linalg.advanced import MatmulComputeType
from sklearn.utils import check_random_state

from .._config import get_config
from ._arrays import is_cupy_sparse, is_sparse, to_cupy
from ._common import not_positive_definite

logger = logging.getLogger("skgpu")
_nvmath_logger = logging.getLogger("skgpu.nvmath")

#: From this order on the inverse in ``half_inverse`` is blocked GEMMs, not potri.
_BLOCKED_INVERSE_MIN = 4096
#: Order of the diagonal blocks inverted by trsm in the blocked inverse.
_INVERSE_BLOCK = 512
_LOWER = 0  # cublasFillMode_t CUBLAS_FILL_MODE_LOWER (column-major lower triangle)
_VECTOR = 1  # cusolverEigMode_t CUSOLVER_EIG_MODE_VECTOR
_RANGE_I = 1002  # cusolverEigRange_t CUSOLVER_EIG_RANGE_I
_MATMUL_CACHE_SIZE = 16
#: From this size on a NumPy X is streamed to the GPU by ``centred_gram``, in chunks of
#: about ``_STREAM_CHUNK_BYTES``.
_STREAM_MIN_BYTES = 1 << 26
_STREAM_CHUNK_BYTES = 1 << 26
_COPY_THREADS = 8
#: From this many entries on, randomized SVD draws its test matrix on the device.
_DEVICE_DRAW_MIN = 1 << 20
#: Up to this order a symmetric eigensolve runs on the host (LAPACK, with the matrix copied
#: there and the result back): measured on the H200 host, with the result needed on the
#: host as PCA needs it, the host won up to n = 96 (0.5 against 0.9 ms at n = 64) and
#: cuSOLVER's syevd from n = 128 (1.6 against 1.8 ms; 2.3 against 6.6 ms at n = 256).
_HOST_EIGH_MAX = 100
#: cuSPARSE SpMM algorithm for CSR times a row-major dense matrix (CSR_ALG2, for
#: row-major operands; at the TruncatedSVD benchmark's shapes 0.81 / 1.13 ms for A·Q / Aᵀ·Q
#: against 2.2 ms with CSR_ALG1 and 0.94 ms with CSR_ALG3; the DEFAULT measured as ALG2).
_SPMM_ALG = cusparse.SpMMAlg.CSR_ALG2

_local = threading.local()


def _thread_state():
    """Per-thread, per-process state: library handles per device and the cuBLASLt plan
    cache.

    A forked worker sees the parent's thread-local object; the pid check gives it its own.
    """
    state = getattr(_local, "state", None)
    if state is None or state["pid"] != os.getpid():
        state = _local.state = {"pid": os.getpid(), "handles": {},
                                "plans": OrderedDict()}
    return state


def _handle(library):
    """This thread's handle of ``library`` (an nvmath bindings module with ``create``:
    cuSOLVER, cuBLAS, cuSPARSE, cuBLASLt) for the current device, bound to the current
    stream where the library binds one (cuBLASLt takes the stream per call)."""
    handles = _thread_state()["handles"]
    key = (library.__name__, cp.cuda.runtime.getDevice())
    handle = handles.get(key)
    if handle is None:
        handle = handles[key] = library.create()
    if library is not cublasLt:
        library.set_stream(handle, cp.cuda.get_current_stream().ptr)
    return handle


def _solver_handle():
    return _handle(cusolverDn)


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


def _potrf(A, overwrite=False):
    """Lower Cholesky factor of ``A`` in a Fortran-ordered buffer, and devInfo. With
    ``overwrite`` a contiguous symmetric ``A`` is factored in its own memory."""
    if overwrite and A.flags.c_contiguous:
        F = A.T  # the same symmetric matrix, Fortran-ordered
    elif overwrite and A.flags.f_contiguous:
        F = A
    else:
        F = cp.array(A, order="F", copy=True)
    n = F.shape[0]
    handle = _solver_handle()
    lwork = _routine(F.dtype, "potrf_buffer_size")(handle, _LOWER, n, F.data.ptr, n)
    work = _workspace(lwork, F.dtype)
    info = cp.zeros(1, dtype=cp.int32)
    _routine(F.dtype, "potrf")(handle, _LOWER, n, F.data.ptr, n, work.data.ptr, lwork,
                               info.data.ptr)
    return F, _info_value(info)


#: ``svd``: matrices up to this size whose singular values span more than 1/_GESVDJ_RCOND
#: are decomposed again by LAPACK on the host (see GPUBackend.svd).
_HOST_SVD_MAX = 2048
_GESVDJ_RCOND = 1e-3


def _householder_qr(Y, want_q):
    """geqrf (and orgqr for Q) on a Fortran copy of tall ``Y``: returns (Q or None, R)."""
    F = cp.array(Y, order="F", copy=True)
    m, n = F.shape
    k = min(m, n)
    dt = F.dtype
    handle = _solver_handle()
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


def _positive_diagonal(Q, R):
    signs = cp.where(cp.diag(R) < 0, -1.0, 1.0).astype(R.dtype)
    return (None if Q is None else Q * signs), R * signs[:, None]


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
        _routine(self._F.dtype, "potrs")(_solver_handle(), _LOWER, n, nrhs, self._F.data.ptr,
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

        Small n: potri in place. From ``_BLOCKED_INVERSE_MIN`` on, the same two steps as
        potri (``W = L⁻¹``, then the lower triangle of ``Wᵀ W``), also in place, but
        recursive by halves so that the work is cuBLAS trmm and syrk on large blocks
        (cuSOLVER's potri reaches ~15 TFLOP/s here, and it and trtri fail with
        INVALID_VALUE from 2³¹ elements on); 2n³/3 flops, no second n × n buffer.
        """
        F, self._F = self._F, None
        n = F.shape[0]
        if n < _BLOCKED_INVERSE_MIN:
            F = self._potri(F)
        else:
            if not F.flags.f_contiguous:
                F = cp.asfortranarray(F)
            cm = _ColumnMajor(F)
            _trtri_lower(cm, 0, n)
            _lauum_lower(cm, 0, n)
        P = F.T  # C-contiguous view: the column-major lower triangle
        _keep_upper_halve_diagonal(n, P)
        return P

    def _potri(self, F):
        n = F.shape[0]
        handle = _solver_handle()
        lwork = _routine(F.dtype, "potri_buffer_size")(handle, _LOWER, n, F.data.ptr, n)
        work = _workspace(lwork, F.dtype)
        info = cp.zeros(1, dtype=cp.int32)
        _routine(F.dtype, "potri")(handle, _LOWER, n, F.data.ptr, n, work.data.ptr, lwork,
                                   info.data.ptr)
        _check_info(info, "potri")
        return F


def _blas_handle():
    return _handle(cublas)


class _ColumnMajor:
    """Pointers to square blocks of a Fortran-ordered n × n device matrix, for cuBLAS."""

    def __init__(self, F):
        self.F, self.n, self.item = F, F.shape[0], F.dtype.itemsize
        self.prefix = {np.dtype(np.float32): "s", np.dtype(np.float64): "d"}[F.dtype]
        self.handle = _blas_handle()

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


def _trtri_lower(cm, r0, r1):
    """In place: the lower-triangular block ``F[r0:r1, r0:r1]`` becomes its inverse.

    ``[[L11, 0], [L21, L22]]⁻¹ = [[W11, 0], [-W22 L21 W11, W22]]``: both halves, then
    two triangular products (trmm), n³/3 flops in all; small blocks by trsm.
    """
    from cupyx.scipy.linalg import solve_triangular

    m = r1 - r0
    if m <= _INVERSE_BLOCK:
        block = cm.F[r0:r1, r0:r1]
        block[...] = solve_triangular(cp.tril(block), cp.eye(m, dtype=block.dtype),
                                      lower=True, check_finite=False)
        return
    mid = r0 + m // 2
    _trtri_lower(cm, r0, mid)
    _trtri_lower(cm, mid, r1)
    left, right = cublas.SideMode.LEFT, cublas.SideMode.RIGHT
    cm.trmm(right, cublas.Operation.N, r1 - mid, mid - r0, 1.0, cm.at(r0, r0), cm.at(mid, r0))
    cm.trmm(left, cublas.Operation.N, r1 - mid, mid - r0, -1.0, cm.at(mid, mid),
            cm.at(mid, r0))


def _lauum_lower(cm, r0, r1):
    """In place: the lower triangle of block ``W = F[r0:r1, r0:r1]`` (lower triangular)
    becomes that of ``Wᵀ W`` (LAPACK's lauum): ``[[W11ᵀW11 + W21ᵀW21, ·], [W22ᵀW21,
    W22ᵀW22]]`` by halves, with syrk and trmm; n³/3 flops. The strict upper triangle of
    the block is left unspecified."""
    m = r1 - r0
    if m <= _INVERSE_BLOCK:
        block = cm.F[r0:r1, r0:r1]
        W = cp.tril(block)
        block[...] = W.T @ W
        return
    mid = r0 + m // 2
    _lauum_lower(cm, r0, mid)
    cm.syrk_lower_t(mid - r0, r1 - mid, cm.at(mid, r0), cm.at(r0, r0))
    cm.trmm(cublas.SideMode.LEFT, cublas.Operation.T, r1 - mid, mid - r0, 1.0,
            cm.at(mid, mid), cm.at(mid, r0))
    _lauum_lower(cm, mid, r1)


_sq_dist_kernel = cp.ElementwiseKernel(
    "raw T X, raw T Y, int64 m, int64 d", "T out",
    """
    long long r = i / m, c = i % m;
    T s = 0;
    for (long long k = 0; k < d; ++k) { T t = X[r * d + k] - Y[c * d + k]; s += t * t; }
    out = s;
    """,
    "skgpu_sq_dist",
)

_keep_upper_halve_diagonal = cp.ElementwiseKernel(
    "int64 n", "T p",
    """
    long long r = i / n, c = i % n;
    if (c < r) { p = 0; } else if (c == r) { p = p * 0.5; }
    """,
    "skgpu_keep_upper_halve_diagonal",
)


def _cudss_threading_layer():
    """Path of cuDSS's OpenMP threading layer shipped in its wheel, or None."""
    try:
        import nvidia
    except ImportError:
        return None
    for root in list(getattr(nvidia, "__path__", [])):
        hits = sorted(glob.glob(os.path.join(root, "**", "libcudss_mtlayer_gomp.so*"),
                                recursive=True))
        if hits:
            return hits[0]
    return None


class GPUSparseSPDFactor:
    """Sparse SPD factor through cuDSS (nvmath ``DirectSolver``, SPD matrix type).

    The symbolic analysis (``plan``) is done once; :meth:`refactor` writes new values into
    the CSR matrix the solver holds and re-runs only the numeric factorisation. cuDSS ties
    a solver to its right-hand side's shape, so one solver is kept per column count.
    """

    def __init__(self, A, what):
        A = csp.csr_matrix(to_cupy(A), dtype=cp.float64, copy=True)
        A.sum_duplicates()
        A.sort_indices()
        self._A = A
        self._what = what
        self._solvers = {}
        self._logdet = None
        self._solver_for(None)

    @property
    def shape(self):
        return self._A.shape

    def _options(self):
        from nvmath.sparse.advanced import DirectSolverMatrixType, DirectSolverOptions

        return DirectSolverOptions(
            sparse_system_type=DirectSolverMatrixType.SPD,
            multithreading_lib=_cudss_threading_layer(),
            logger=_nvmath_logger,
        )

    def _record(self, info):
        diag = np.asarray(info.diag)
        if getattr(info, "info", 0) or not np.all(diag > 0):
            raise not_positive_definite(self._what, "cuDSS found a non-positive pivot")
        self._logdet = 2.0 * float(np.sum(np.log(diag)))

    def _solver_for(self, nrhs):
        solver = self._solvers.get(nrhs)
        if solver is None:
            from nvmath.sparse.advanced import DirectSolver

            n = self._A.shape[0]
            b = cp.zeros(n if nrhs is None else (n, nrhs), dtype=cp.float64, order="F")
            solver = DirectSolver(self._A, b, options=self._options())
            solver.plan()
            self._record(solver.factorize())
            self._solvers[nrhs] = solver
        return solver

    def solve(self, B):
        B = cp.asarray(to_cupy(B), dtype=cp.float64)
        nrhs = None if B.ndim == 1 else B.shape[1]
        solver = self._solver_for(nrhs)
        solver.reset_operands(b=cp.asfortranarray(B))
        return cp.array(solver.solve(), copy=True)

    def logdet(self):
        return self._logdet

    def refactor(self, A):
        """Factor ``A``, a matrix with the same sparsity pattern, reusing the plan."""
        B = csp.csr_matrix(to_cupy(A), dtype=cp.float64)
        B.sum_duplicates()
        B.sort_indices()
        if B.nnz != self._A.nnz or not bool(cp.array_equal(B.indices, self._A.indices)):
            raise ValueError("refactor needs a matrix with the same sparsity pattern.")
        self._A.data[...] = B.data
        for solver in self._solvers.values():
            self._record(solver.factorize())

    def free(self):
        for solver in self._solvers.values():
            solver.free()
        self._solvers.clear()


#: cudaDataType of the operands cuBLASLt multiplies here, and the scale type per dtype.
_LT_TYPES = {np.dtype(np.float32): 0, np.dtype(np.float64): 1}  # CUDA_R_32F, CUDA_R_64F
#: Workspace a cuBLASLt algorithm may ask for (NVIDIA's recommendation for Hopper).
_LT_WORKSPACE = 32 << 20


def _lt_operand(x):
    """How cuBLASLt (column-major) sees ``xᵀ`` for a 2-D CuPy array ``x``: (transpose,
    rows, cols, ld) of a column-major matrix over x's memory, or None when neither of x's
    dimensions is contiguous. A row-major x (r × c) is xᵀ itself (c × r, op N); a
    column-major x is a column-major r × c matrix, transposed (op T)."""
    s = x.itemsize
    r, c = x.shape
    s0, s1 = x.strides
    if s0 % s or s1 % s or s0 < 0 or s1 < 0:
        return None
    if c == 1 or s1 == s:  # rows contiguous (a one-column x is too)
        ld = s0 // s if r > 1 else c
        return (cublas.Operation.N, c, r, ld) if ld >= max(c, 1) else None
    if r == 1 or s0 == s:  # columns contiguous
        ld = s1 // s if c > 1 else r
        return (cublas.Operation.T, r, c, ld) if ld >= max(r, 1) else None
    return None


def _alignment(ptr):
    """The largest power of two, up to 256, dividing a device address."""
    return min(256, ptr & -ptr) if ptr else 256


class _LtPlan:
    """One cuBLASLt matmul ``a @ b (+ bias)`` of fixed shapes, strides, dtype and operand
    alignment, made once with nvmath's cuBLASLt bindings and executed for new operands
    with one library call. (nvmath's ``Matmul`` object took ~0.1 ms of host time per
    call for its operand reset and stream and event bookkeeping: a fifth of the product
    itself at the PCA-transform size, 1,000,000 × 256 by 256 × 16.) The algorithm is
    cuBLASLt's first heuristic choice; at that size every configuration cuBLASLt
    accepted (35 of algorithm, tile, stages, swizzle) was timed, and none beat it
    (0.49 ms).

    Row-major ``out (m × n) = a (m × k) @ b (k × n)`` is column-major
    ``outᵀ = bᵀ aᵀ``: cuBLASLt's A is b, its B is a, and its BIAS epilog (a vector added
    to every column of the column-major result) adds ``bias`` to every row of ``out``.
    """

    def __init__(self, a, b, has_bias, compute_type):
        self.m, self.n = a.shape[0], b.shape[1]
        self.dtype = a.dtype
        dtype = _LT_TYPES[a.dtype]
        scale = np.empty(2, dtype=a.dtype)  # alpha, beta
        scale[:] = (1, 0)
        self._scale = scale
        self._objects = []
        handle = _handle(cublasLt)
        desc = cublasLt.matmul_desc_create(int(compute_type), dtype)
        self._objects.append((cublasLt.matmul_desc_destroy, desc))
        layouts = []
        for x, which in ((b, "TRANSA"), (a, "TRANSB")):
            op, rows, cols, ld = _lt_operand(x)
            self._set(desc, which, np.int32(op))
            layouts.append(self._layout(dtype, rows, cols, ld))
        out = self._layout(dtype, self.n, self.m, max(self.n, 1))
        if has_bias:
            self._set(desc, "EPILOGUE", np.uint32(cublasLt.Epilogue.BIAS))
        pref = cublasLt.matmul_preference_create()
        self._objects.append((cublasLt.matmul_preference_destroy, pref))
        for attr, value in (("MAX_WORKSPACE_BYTES", np.uint64(_LT_WORKSPACE)),
                            ("MIN_ALIGNMENT_A_BYTES", np.uint32(_alignment(b.data.ptr))),
                            ("MIN_ALIGNMENT_B_BYTES", np.uint32(_alignment(a.data.ptr))),
                            ("MIN_ALIGNMENT_C_BYTES", np.uint32(256)),
                            ("MIN_ALIGNMENT_D_BYTES", np.uint32(256))):
            buf = np.array(value)
            cublasLt.matmul_preference_set_attribute(
                pref, getattr(cublasLt.MatmulPreferenceAttribute, attr), buf.ctypes.data,
                buf.nbytes)
        self._algo = cublasLt.MatmulHeuristicResult(1)
        found = np.zeros(1, dtype=np.int32)
        try:
            cublasLt.matmul_algo_get_heuristic(handle, desc, layouts[0], layouts[1], out,
                                               out, pref, 1, self._algo.ptr,
                                               found.ctypes.data)
            if found[0] < 1:
                raise RuntimeError("cuBLASLt found no algorithm for this matmul.")
        except Exception:
            self.free()
            raise
        self.workspace = int(self._algo.workspace_size)
        self._bias_ptr = np.zeros((), dtype=np.int64)
        self._call = (handle, desc, int(scale.ctypes.data), layouts[0], layouts[1],
                      int(scale[1:].ctypes.data), out, self._algo.ptr)

    def _set(self, desc, attr, value):
        buf = np.array(value)
        cublasLt.matmul_desc_set_attribute(desc, getattr(cublasLt.MatmulDescAttribute, attr),
                                           buf.ctypes.data, buf.nbytes)

    def _layout(self, dtype, rows, cols, ld):
        layout = cublasLt.matrix_layout_create(dtype, rows, cols, ld)
        self._objects.append((cublasLt.matrix_layout_destroy, layout))
        return layout

    def __call__(self, a, b, bias):
        handle, desc, alpha, a_layout, b_layout, beta, out_layout, algo = self._call
        out = cp.empty((self.m, self.n), dtype=self.dtype)
        if bias is not None:
            self._bias_ptr[()] = bias.data.ptr
            cublasLt.matmul_desc_set_attribute(desc, cublasLt.MatmulDescAttribute.BIAS_POINTER,
                                               self._bias_ptr.ctypes.data, 8)
        # the workspace comes from CuPy's pool per call (stream-ordered, so it is reused
        # safely); a cached one would pin pool memory that free_memory() cannot return
        workspace = cp.cuda.alloc(self.workspace) if self.workspace else None
        cublasLt.matmul(handle, desc, alpha, b.data.ptr, a_layout, a.data.ptr, b_layout, beta,
                        out.data.ptr, out_layout, out.data.ptr, out_layout, algo,
                        0 if workspace is None else workspace.ptr, self.workspace,
                        cp.cuda.get_current_stream().ptr)
        return out

    def free(self):
        while self._objects:
            destroy, obj = self._objects.pop()
            destroy(obj)


def _lt_matmul(a, b, bias, compute_type):
    """``a @ b (+ bias added to every row)`` for 2-D float32/float64 CuPy arrays through a
    cached :class:`_LtPlan` (the key holds shapes, strides, dtype, operand alignment,
    compute type and device). Operands with no contiguous dimension are copied first.
    Plans hold no operand: a user's array is freed when the user lets it go."""
    if a.dtype not in _LT_TYPES:
        raise TypeError(f"cuBLASLt matmul here takes float32 or float64, got {a.dtype}.")
    m, k = a.shape
    n = b.shape[1]
    if m == 0 or n == 0 or k == 0:  # nothing for cuBLASLt to do
        out = cp.zeros((m, n), dtype=a.dtype)
        return out if bias is None else out + bias
    if _lt_operand(a) is None:
        a = cp.ascontiguousarray(a)
    if _lt_operand(b) is None:
        b = cp.ascontiguousarray(b)
    key = (a.shape, a.strides, b.shape, b.strides, a.dtype.str, bias is not None,
           int(compute_type), _alignment(a.data.ptr), _alignment(b.data.ptr),
           cp.cuda.runtime.getDevice())
    plans = _thread_state()["plans"]
    plan = plans.get(key)
    if plan is None:
        plan = plans[key] = _LtPlan(a, b, bias is not None, compute_type)
        if len(plans) > _MATMUL_CACHE_SIZE:
            plans.popitem(last=False)[1].free()
    else:
        plans.move_to_end(key)
    return plan(a, b, bias)


_COMPUTE_TYPES = {
    ("float32", "highest"): MatmulComputeType.COMPUTE_32F,
    ("float32", "high"): MatmulComputeType.COMPUTE_32F_FAST_TF32,
    ("float32", "medium"): MatmulComputeType.COMPUTE_32F_FAST_16BF,
}


class GPUBackend:
    """nvmath-python + CuPy implementation of the backend operation set."""

    name = "gpu"
    is_gpu = True
    xp = cp

    # arrays ---------------------------------------------------------------------------
    def asarray(self, X, dtype=None):
        X = to_cupy(X)
        if dtype is not None and X.dtype != dtype:
            X = X.astype(dtype)
        return X

    def to_host(self, a):
        if a is None or isinstance(a, np.ndarray):
            return a
        return a.get()

    def is_sparse(self, X):
        return is_sparse(X)

    def free_memory(self):
        plans = _thread_state()["plans"]
        for plan in plans.values():
            plan.free()
        plans.clear()
        cp.get_default_memory_pool().free_all_blocks()
        cp.get_default_pinned_memory_pool().free_all_blocks()

    # dense ----------------------------------------------------------------------------
    def column_mean(self, X, sample_weight=None):
        n = X.shape[0]
        if sample_weight is None:
            w = cp.full(n, 1.0 / n, dtype=X.dtype)
        else:
            w = cp.asarray(sample_weight, dtype=X.dtype)
            w = w / w.sum()
        if is_sparse(X):
            return cp.asarray(X.T @ w).ravel()
        # One GEMV; CuPy's X.mean(axis=0) on a C-ordered tall X is ~10x slower.
        return X.T @ w

    def gram(self, X, mean=None):
        if is_sparse(X):
            G = (X.T @ X).toarray()
        else:
            G = self.matmul(X.T, X)
        if mean is not None:
            G -= X.shape[0] * cp.outer(mean, mean)
        return G

    def centred_gram(self, X):
        """``(mean, (X - mean)ᵀ(X - mean))``. A NumPy X of ``_STREAM_MIN_BYTES`` or more is
        not copied to the GPU whole: see :func:`_streamed_centred_gram`."""
        if isinstance(X, np.ndarray) and X.ndim == 2 and X.nbytes >= _STREAM_MIN_BYTES:
            return _streamed_centred_gram(self, X)
        X = self.asarray(X)
        mean = self.column_mean(X)
        return mean, self.gram(X, mean)

    def _compute_type(self, dtype):
        if np.dtype(dtype) == np.float64:
            return MatmulComputeType.COMPUTE_64F
        return _COMPUTE_TYPES[(np.dtype(dtype).name, get_config()["matmul_precision"])]

    def matmul(self, a, b, bias=None):
        if is_sparse(a):
            out = self.spmm(a, b)
            return out if bias is None else out + bias
        a = self.asarray(a)
        b = self.asarray(b, dtype=a.dtype)
        if bias is not None:
            bias = self.asarray(bias, dtype=a.dtype)
            if bias.ndim != 1 or not bias.flags.c_contiguous or bias.data.ptr % 16:
                bias = cp.array(bias.ravel())  # contiguous and aligned
        return _lt_matmul(a, b, bias, self._compute_type(a.dtype))

    def spmm(self, A, B):
        B = self.asarray(B)
        out = _sparse_product(A, B) if is_cupy_sparse(A) else None
        return cp.asarray(A @ B) if out is None else out

    def sq_dist(self, X, Y):
        """``D[i, j] = Σ_d (X[i, d] - Y[j, d])²`` in one pass (exact differences)."""
        X = cp.ascontiguousarray(self.asarray(X))
        Y = cp.ascontiguousarray(self.asarray(Y, dtype=X.dtype))
        out = cp.empty((X.shape[0], Y.shape[0]), dtype=X.dtype)
        _sq_dist_kernel(X, Y, Y.shape[0], X.shape[1], out)
        return out

    def scale_rows(self, X, s):
        if is_sparse(X):
            return csp.csr_matrix(csp.diags(s) @ X)
        return X * s[:, None]

    def eigh(self, A, top=None):
        if A.shape[0] <= _HOST_EIGH_MAX:
            from . import get_backend

            w, V = get_backend("cpu").eigh(self.to_host(A), top=top)
            return cp.asarray(w), cp.asarray(V)
        F = cp.array(self.asarray(A), order="F", copy=True)
        n = F.shape[0]
        dt = F.dtype
        handle = _solver_handle()
        w = cp.empty(n, dtype=dt)
        info = cp.zeros(1, dtype=cp.int32)
        if top is None or top >= n:
            lwork = _routine(dt, "syevd_buffer_size")(handle, _VECTOR, _LOWER, n, F.data.ptr,
                                                      n, w.data.ptr)
            work = _workspace(lwork, dt)
            _routine(dt, "syevd")(handle, _VECTOR, _LOWER, n, F.data.ptr, n, w.data.ptr,
                                  work.data.ptr, lwork, info.data.ptr)
            _check_info(info, "syevd")
            return w[::-1].copy(), F[:, ::-1].copy()
        il, iu = n - top + 1, n  # 1-based indices of the top eigenvalues
        meig = np.zeros(1, dtype=np.int32)
        lwork = _routine(dt, "syevdx_buffer_size")(
            handle, _VECTOR, _RANGE_I, _LOWER, n, F.data.ptr, n, 0.0, 0.0, il, iu,
            meig.ctypes.data, w.data.ptr)
        work = _workspace(lwork, dt)
        found = _routine(dt, "syevdx")(handle, _VECTOR, _RANGE_I, _LOWER, n, F.data.ptr, n,
                                       0.0, 0.0, il, iu, w.data.ptr, work.data.ptr, lwork,
                                       info.data.ptr)
        _check_info(info, "syevdx")
        found = int(found)
        return w[:found][::-1].copy(), F[:, :found][:, ::-1].copy()

    def svd(self, A):
        F = cp.array(self.asarray(A), order="F", copy=True)
        m, n = F.shape
        k = min(m, n)
        dt = F.dtype
        handle = _solver_handle()
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
        U, s, Vt = U[:, order], s[order], V[:, order].T
        if max(m, n) <= _HOST_SVD_MAX and k and float(s[-1]) < _GESVDJ_RCOND * float(s[0]):
            # gesvdj stops at a tolerance relative to ‖A‖_F: the singular vectors of the
            # small singular values carry errors of ε·s_max/s_j, ~20x those of LAPACK's
            # gesdd at cond 1e10 (RidgeCV's leave-one-out 6e-6 against 2e-7 relative on
            # the H200 host, the SVD of the QR's R). A small ill-conditioned matrix is
            # decomposed again by LAPACK on the host.
            Uh, sh, Vth = np.linalg.svd(cp.asnumpy(A), full_matrices=False)
            U, s, Vt = cp.asarray(Uh), cp.asarray(sh), cp.asarray(Vth)
        return U, s, Vt

    # tall-skinny orthonormalisation and QR --------------------------------------------
    def _cholesky_qr_pass(self, Q, shifted):
        """One CholeskyQR pass: ``Q L⁻ᵀ`` (dtype of Q) and ``Lᵀ`` (float64) from
        ``chol(QᵀQ [+ shift·I])``; None if the Cholesky factorisation fails (a zero or
        rank-deficient Q, for example).

        The Gram matrix and its Cholesky factor are float64 whatever Q's dtype (mixed
        precision, Yamazaki et al. 2015): for a float32 Q the products of its entries are
        exact in float64, so the pass handles cond(Q) up to ~1e8 instead of ~1e3, and the
        shift, Fukaya et al.'s 11 (mn + n(n+1)) u ‖Q‖²_F with u the float64 unit roundoff,
        stays small (with float32's u it exceeds ‖Q‖² itself once m·n ≳ 10⁷, and the pass
        stops orthogonalising). ‖Q‖²_F = trace(QᵀQ) comes from the Gram matrix on the
        device: no extra pass over Q, no host sync.
        """
        m, n = Q.shape
        Q64 = Q if Q.dtype == np.float64 else Q.astype(np.float64)
        G = self.matmul(Q64.T, Q64)
        del Q64
        if shifted:
            factor = 11.0 * (m * n + n * (n + 1)) * (np.finfo(np.float64).eps / 2)
            G = G + (factor * cp.trace(G)) * cp.eye(n, dtype=G.dtype)
        L, info = _potrf(G)
        if info != 0:
            return None
        L = cp.tril(L)
        Linv_t = cp.ascontiguousarray(_triangular_inverse(L).T, dtype=Q.dtype)  # (Lᵀ)⁻¹
        return self.matmul(Q, Linv_t), L.T

    def _cholesky_qr3(self, Y):
        """Shifted CholeskyQR3 (Fukaya et al., SIAM J. Sci. Comput. 2020): Q, R or None.

        Three Gram + Cholesky + triangular-inverse passes, all GEMMs on the tall matrix;
        the first Gram is shifted so that Cholesky succeeds for cond(Y) up to ~1/eps.
        Returns None when a Cholesky fails or Q is not orthonormal (rank deficiency),
        so the caller can use Householder QR instead.
        """
        n = Y.shape[1]
        Q, R = Y, cp.eye(n, dtype=np.float64)
        for step in range(3):
            out = self._cholesky_qr_pass(Q, shifted=step == 0)
            if out is None:
                return None
            Q, R_step = out
            R = R_step @ R
        err = float(cp.linalg.norm(self.matmul(Q.T, Q) - cp.eye(n, dtype=Y.dtype)))
        if not np.isfinite(err) or err > 100 * n * np.finfo(Y.dtype).eps ** 0.5:
            return None
        return Q, R.astype(Y.dtype, copy=False)

    def _rescale_basis(self, Y):
        """A well-conditioned basis of span(Y) for the power iterations.

        scikit-learn normalises with LU, which is not orthonormal either: only the span
        matters until the last step. One shifted CholeskyQR pass suffices here; it falls
        back to Householder QR when its Cholesky fails.
        """
        out = self._cholesky_qr_pass(Y, shifted=True)
        if out is None:
            return _householder_qr(Y, want_q=True)[0]
        return out[0]

    def _orthonormalize(self, Y):
        out = self._cholesky_qr3(Y)
        if out is None:
            out = _positive_diagonal(*_householder_qr(Y, want_q=True))
        return out[0]

    def _cholesky_qr_adaptive(self, X, first_pass_limit=0.5):
        """R of ``X = QR`` by unshifted CholeskyQR passes, stopping as soon as Q is
        orthonormal to working precision: one pass for a well-conditioned X, two
        (CholeskyQR2) up to cond(X) ~ 1e7 in float64. The Gram matrix of the next pass is
        the orthogonality check, so a pass costs two GEMMs on the tall matrix. Returns
        None when the first Cholesky fails or Q is far from orthonormal (cond(X) beyond
        CholeskyQR2's reach): the caller then runs shifted CholeskyQR3.
        ``first_pass_limit`` bounds ‖QᵀQ - I‖ after the first pass (≈ cond(X)²·ε) for a
        second pass to be tried.
        """
        m, n = X.shape
        eps = np.finfo(X.dtype).eps
        # The floor of ‖QᵀQ - I‖_F for an orthonormal Q is rounding in the Gram matrix.
        tau = min(10.0 * eps * np.sqrt(m) * n, 1e-6)
        eye = cp.eye(n, dtype=X.dtype)
        G = self.matmul(X.T, X)
        Q, R = X, eye
        for step in range(3):
            L, info = _potrf(G)
            if info != 0:
                return None
            L = cp.tril(L)
            Q = self.matmul(Q, cp.ascontiguousarray(_triangular_inverse(L).T))
            R = L.T @ R
            G = self.matmul(Q.T, Q)
            err = float(cp.linalg.norm(G - eye))
            if err <= tau:
                return Q, R
            if not np.isfinite(err) or (step == 0 and err > first_pass_limit):
                return None
        return (Q, R) if err <= 100 * n * eps**0.5 else None

    def qr_r(self, X):
        return self._qr(X, want_q=False)[1]

    def qr(self, X):
        """Economy ``X = QR`` of a tall X, R with a positive diagonal.

        Q is what the CholeskyQR passes produce anyway while they reach orthogonality
        to working precision, and a second pass is tried only when the first left
        ‖QᵀQ - I‖ ≤ 1e-4 (cond(X) up to ~7e5 in float64): near CholeskyQR2's limit of
        ~1e7 its R lost accuracy (RidgeCV's predictions on 2 × 2 float32 data at
        cond ~1e7, found by the property tests on the H200 host). Beyond that
        Householder (geqrf + orgqr), not shifted CholeskyQR3: its Q is as orthonormal,
        but its larger backward error made RidgeCV's leave-one-out at cond 1e10 ~10-40x
        less accurate than LAPACK's (up to 8.5e-6 relative against exact references,
        where Householder gives ~2e-7).
        """
        return self._qr(X, want_q=True)

    def _qr(self, X, want_q):
        X = self.asarray(X)
        m, n = X.shape
        if m >= n:
            out = self._cholesky_qr_adaptive(X, 1e-4 if want_q else 0.5)
            if out is None and not want_q:  # R alone: shifted CholeskyQR3 is enough
                out = self._cholesky_qr3(X)
            if out is not None:
                return out
        return _positive_diagonal(*_householder_qr(X, want_q=want_q))

    def randomized_svd(
        self, A, k, *, n_oversamples=10, n_iter="auto", power_iteration_normalizer="auto",
        random_state=None, transpose="auto",
    ):
        """Halko et al. randomized SVD, the same steps as scikit-learn's.

        The range finder's normaliser only changes the basis of the same subspace, so the
        cheap CholeskyQR rescaling (and CholeskyQR3 for the final orthonormal basis) gives
        scikit-learn's result up to rounding. The Gaussian test matrix is scikit-learn's
        own draw from ``random_state`` while it has fewer than ``_DEVICE_DRAW_MIN``
        entries; a larger one (a wide sparse X: 100,000 features × 74 columns took
        NumPy's legacy generator ~150 ms, longer than the whole fit on the GPU) is drawn
        on the device from a generator seeded by ``random_state``: reproducible, but a
        different draw, so the result then equals scikit-learn's only as far as both
        have converged. The small SVD at the end is that of R from a QR of ``AᵀQ``
        (never a wide gesvdj).
        """
        random_state = check_random_state(random_state)
        n_random = k + n_oversamples
        n_samples, n_features = A.shape
        if n_iter == "auto":
            n_iter = 7 if k < 0.1 * min(A.shape) else 4
        if transpose == "auto":
            transpose = n_samples < n_features
        A = A if is_sparse(A) else self.asarray(A)
        if transpose:
            A = A.T
        AT = A.T.tocsr() if is_sparse(A) else A.T
        if is_sparse(A):
            A = A.tocsr()
        dtype = A.dtype if A.dtype == np.float32 else np.float64
        Q = _gaussian(random_state, (A.shape[1], n_random), dtype)
        normalize = power_iteration_normalizer != "none" and not (
            power_iteration_normalizer == "auto" and n_iter <= 2)
        for _ in range(n_iter):
            Q = self.matmul(A, Q)
            if normalize:
                Q = self._rescale_basis(Q)
            Q = self.matmul(AT, Q)
            if normalize:
                Q = self._rescale_basis(Q)
        Q = self._orthonormalize(self.matmul(A, Q))
        Z = self.matmul(AT, Q)  # Bᵀ = (Qᵀ A)ᵀ
        if Z.shape[0] >= Z.shape[1]:
            # B = Zᵀ = Rᵀ Q_zᵀ and Rᵀ = Û S Wᵀ give B = Û S (Q_z W)ᵀ.
            out = self._cholesky_qr3(Z)
            Qz, R = out if out is not None else _positive_diagonal(
                *_householder_qr(Z, want_q=True))
            Uhat, s, Wt = self.svd(R.T)
            Vt = self.matmul(Qz, cp.ascontiguousarray(Wt.T)).T
        else:
            Uhat, s, Vt = self.svd(Z.T)
        U = self.matmul(Q, Uhat)
        if transpose:
            return Vt[:k].T, s[:k], U[:, :k].T
        return U[:, :k], s[:k], Vt[:k]

    def solve_triangular(self, L, B):
        """``L⁻¹ B`` for a lower-triangular L (cuBLAS trsm; only the lower triangle is
        read, so a factor's buffer can be passed as it is)."""
        from cupyx.scipy.linalg import solve_triangular

        return solve_triangular(L, self.asarray(B), lower=True, overwrite_b=False,
                                check_finite=False)

    def cholesky(self, A, *, what="matrix", overwrite=False):
        F, info = _potrf(self.asarray(A), overwrite=overwrite)
        if info > 0:
            raise not_positive_definite(what, f"leading minor of order {info} is not positive")
        if info < 0:
            raise RuntimeError(f"cuSOLVER potrf: argument {-info} had an illegal value.")
        return GPUCholeskyFactor(F, what)

    # sparse ---------------------------------------------------------------------------
    def sparse_spd(self, A, *, what="matrix"):
        return GPUSparseSPDFactor(A, what)


def _sparse_product(A, B):
    """``A @ B`` for a CuPy CSR or CSC ``A`` and a dense ``B`` by cuSPARSE's SpMM with
    row-major (C-ordered) B and result, or None where CuPy's own product is used instead
    (another format or index type, mixed or non-float dtypes).

    CuPy's product asks for a Fortran-ordered B (a copy of the iterate at every power
    iteration) and runs the column-major algorithm, which gathers B one column at a
    time; with row-major operands each stored entry of A reads one contiguous row of B.
    A CSC A is the CSR of Aᵀ, multiplied with the transpose operation.
    """
    if A.format not in ("csr", "csc") or B.ndim not in (1, 2) or B.dtype != A.dtype or (
            A.dtype not in (np.float32, np.float64)) or A.indptr.dtype != np.int32 or (
            A.indices.dtype != np.int32):
        return None
    vector = B.ndim == 1
    B = cp.ascontiguousarray(B.reshape(-1, 1) if vector else B)
    m, k = A.shape
    n = B.shape[1]
    C = cp.empty((m, n), dtype=A.dtype)
    if A.nnz == 0 or n == 0:
        C.fill(0)
        return C.ravel() if vector else C
    if not A.has_canonical_format:
        A.sum_duplicates()
    value_type = (nvmath.CudaDataType.CUDA_R_32F if A.dtype == np.float32
                  else nvmath.CudaDataType.CUDA_R_64F)
    index = cusparse.IndexType.INDEX_32I
    rows, cols = (m, k) if A.format == "csr" else (k, m)
    op = (cusparse.Operation.NON_TRANSPOSE if A.format == "csr"
          else cusparse.Operation.TRANSPOSE)
    alg = _SPMM_ALG if A.format == "csr" else cusparse.SpMMAlg.DEFAULT
    handle = _handle(cusparse)
    alpha, beta = np.ones(1, dtype=A.dtype), np.zeros(1, dtype=A.dtype)
    descriptors = []
    try:
        mat_a = cusparse.create_csr(rows, cols, A.nnz, A.indptr.data.ptr,
                                    A.indices.data.ptr, A.data.data.ptr, index, index,
                                    cusparse.IndexBase.ZERO, value_type)
        descriptors.append((cusparse.destroy_sp_mat, mat_a))
        mat_b = cusparse.create_dn_mat(k, n, n, B.data.ptr, value_type, cusparse.Order.ROW)
        descriptors.append((cusparse.destroy_dn_mat, mat_b))
        mat_c = cusparse.create_dn_mat(m, n, n, C.data.ptr, value_type, cusparse.Order.ROW)
        descriptors.append((cusparse.destroy_dn_mat, mat_c))
        args = (handle, op, cusparse.Operation.NON_TRANSPOSE, alpha.ctypes.data, mat_a,
                mat_b, beta.ctypes.data, mat_c, value_type, alg)
        workspace = cp.empty(max(1, cusparse.sp_mm_buffer_size(*args)), dtype=cp.uint8)
        cusparse.sp_mm(*args, workspace.data.ptr)
    finally:
        for destroy, descriptor in descriptors:
            destroy(descriptor)
    return C.ravel() if vector else C


_copy_pool_state = {"pid": None, "pool": None, "threads": 1}


def _copy_pool():
    """Threads that copy a host chunk into pinned memory in parallel (one per process)."""
    if _copy_pool_state["pid"] != os.getpid():
        from concurrent.futures import ThreadPoolExecutor

        threads = _copy_pool_state["threads"] = max(1, min(_COPY_THREADS, os.cpu_count() or 1))
        _copy_pool_state["pool"] = ThreadPoolExecutor(max_workers=threads,
                                                      thread_name_prefix="skgpu-copy")
        _copy_pool_state["pid"] = os.getpid()
    return _copy_pool_state["pool"]


def _stage(pool, dst, src):
    """``dst[...] = src`` for a (pinned) host buffer, by the copy threads in row bands
    (NumPy releases the GIL while it copies)."""
    bands = min(_copy_pool_state["threads"], max(1, src.nbytes >> 22))  # ≥ 4 MB each
    edges = np.linspace(0, src.shape[0], bands + 1).astype(int)
    for f in [pool.submit(np.copyto, dst[a:b], src[a:b])
              for a, b in zip(edges[:-1], edges[1:]) if b > a]:
        f.result()


def _streamed_centred_gram(ops, X):
    """Mean and centred Gram matrix of a host X, streamed to the GPU in row chunks.

    A three-stage pipeline: threads copy chunk i + 1 into a pinned buffer while chunk i
    travels to the device (asynchronous DMA on a copy stream) and chunk i - 1 is reduced
    on the compute stream. The GPU holds a few chunks, never X, and the parallel staging
    outruns a plain copy of X from pageable memory. Each chunk is shifted by the first
    chunk's mean before its Gram matrix (the shifted-data formula: accurate when the mean
    is large against the spread); sums and Gram blocks accumulate in float64. Without
    pinned memory the chunks are copied from X directly (the call returns once a chunk
    is staged, and the GPU works on the previous one meanwhile).
    """
    import cupyx

    n, p = X.shape
    dt = X.dtype
    rows = int(max(1, min(n, _STREAM_CHUNK_BYTES // (p * dt.itemsize))))
    starts = list(range(0, n, rows))
    slots = min(3, len(starts))
    compute = cp.cuda.get_current_stream()
    copier = cp.cuda.Stream(non_blocking=True)
    device_bufs = [cp.empty((rows, p), dtype=dt) for _ in range(slots)]
    try:
        host_bufs = [cupyx.empty_pinned((rows, p), dtype=dt) for _ in range(slots)]
        pool = _copy_pool()
    except Exception as exc:  # pinned memory is a limited resource
        logger.info("streaming X without pinned buffers (%s)", exc)
        host_bufs = pool = None
    copied = [None] * slots  # the copy out of host slot s is done
    released = [None] * slots  # compute has finished reading device slot s
    ones = cp.ones(rows, dtype=dt)
    G = cp.zeros((p, p), dtype=cp.float64)
    sums = cp.zeros(p, dtype=cp.float64)
    shift = None
    for i, start in enumerate(starts):
        stop = min(n, start + rows)
        r, slot = stop - start, i % slots
        if copied[slot] is not None:
            copied[slot].synchronize()
        if host_bufs is not None:
            src = host_bufs[slot][:r]
            _stage(pool, src, X[start:stop])
        else:
            src = np.ascontiguousarray(X[start:stop])
        buf = device_bufs[slot][:r]
        if released[slot] is not None:
            copier.wait_event(released[slot])
        buf.set(src, stream=copier)
        copied[slot] = copier.record()
        compute.wait_event(copied[slot])
        if shift is None:
            shift = (ones[:r] / r) @ buf
        buf -= shift
        G += ops.matmul(buf.T, buf)
        sums += ones[:r] @ buf
        released[slot] = compute.record()
    compute.synchronize()  # the pinned buffers go back to the pool only when unused
    offset = sums / n  # mean - shift
    G -= n * cp.outer(offset, offset)
    mean = shift.astype(cp.float64) + offset
    return mean.astype(dt), G.astype(dt)


def _gaussian(random_state, size, dtype):
    """scikit-learn's ``random_state.normal(size=size)`` on the device, or, from
    ``_DEVICE_DRAW_MIN`` entries on, a device draw seeded by ``random_state``."""
    if size[0] * size[1] < _DEVICE_DRAW_MIN:
        return cp.asarray(random_state.normal(size=size), dtype=dtype)
    seed = int(random_state.randint(np.iinfo(np.int32).max))
    logger.debug("randomized SVD: %d x %d test matrix drawn on the device (seed %d)",
                 size[0], size[1], seed)
    return cp.random.default_rng(seed).standard_normal(size, dtype=dtype)


def _triangular_inverse(L):
    from cupyx.scipy.linalg import solve_triangular

    return solve_triangular(L, cp.eye(L.shape[0], dtype=L.dtype), lower=True)


def is_out_of_memory(exc):
    """Whether ``exc`` is the GPU running out of memory (CuPy, cuBLAS, cuSOLVER, cuDSS)."""
    if isinstance(exc, (MemoryError, cp.cuda.memory.OutOfMemoryError)):
        return True
    text = f"{type(exc).__name__}: {exc}"
    return any(s in text for s in ("ALLOC_FAILED", "out of memory", "OutOfMemory",
                                   "cudaErrorMemoryAllocation"))
