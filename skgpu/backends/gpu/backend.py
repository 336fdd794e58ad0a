"""The GPU backend class: the operation set of DESIGN.md, each operation a call into the
library module that does the work (see the package's docstring for the map)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import cupy as cp
import cupyx.scipy.sparse as csp
import numpy as np
from sklearn.utils import check_random_state

from .._arrays import is_cupy_sparse, is_sparse, to_cupy
from .._common import accurate_centred_gram, not_positive_definite
from . import cublas, cublaslt, cusolver, cusparse, kernels, staging, tsqr
from .cudss import GPUSparseSPDFactor

if TYPE_CHECKING:
    from ..interface import SparseFactor

logger = logging.getLogger("skgpu")

#: From this many entries on, randomized SVD draws its test matrix on the device.
DEVICE_DRAW_MIN = 1 << 20
#: Up to this order a symmetric eigensolve runs on the host (LAPACK, with the matrix copied
#: there and the result back): measured on the H200 host, with the result needed on the
#: host as PCA needs it, the host won up to n = 96 (0.5 against 0.9 ms at n = 64) and
#: cuSOLVER's syevd from n = 128 (1.6 against 1.8 ms; 2.3 against 6.6 ms at n = 256).
HOST_EIGH_MAX = 100
#: ``svd``: matrices up to this size whose singular values span more than 1/GESVDJ_RCOND
#: are decomposed again by LAPACK on the host (see GPUBackend.svd).
HOST_SVD_MAX = 2048
GESVDJ_RCOND = 1e-3


class GPUBackend:
    """nvmath-python + CuPy implementation of the backend operation set."""

    name = "gpu"
    is_gpu = True
    xp = cp
    # policies (see the Backend protocol)
    finite_check = "output"
    memory = "device"
    defers_host_copies = True
    neighbour_search = "cell-list"
    batched_blocks = True
    forward_order = "F"
    sparse_factor = "cudss"

    # arrays ---------------------------------------------------------------------------
    def asarray(self, X, dtype=None):
        if (isinstance(X, np.ndarray) and X.flags.c_contiguous and X.ndim >= 1
                and X.nbytes >= staging.STREAM_MIN_BYTES
                and (dtype is None or np.can_cast(X.dtype, dtype, "same_kind"))):
            return staging.to_device(X, dtype)  # large host X: pinned, threaded copies
        X = to_cupy(X)
        if dtype is not None and X.dtype != dtype:
            X = X.astype(dtype)
        return X

    def to_host(self, a):
        if a is None or isinstance(a, np.ndarray):
            return a
        if isinstance(a, cp.ndarray) and a.nbytes >= staging.TO_HOST_MIN_BYTES:
            return staging.to_host(a)  # through pinned buffers (a covariance of 800 MB)
        return a.get()

    def is_sparse(self, X):
        return is_sparse(X)

    def free_memory(self):
        cublaslt.free_plans()
        cp.get_default_memory_pool().free_all_blocks()
        cp.get_default_pinned_memory_pool().free_all_blocks()

    # dense ----------------------------------------------------------------------------
    def column_mean(self, X, sample_weight=None):
        n = X.shape[0]
        w = (cp.full(n, 1.0 / n, dtype=X.dtype) if sample_weight is None
             else _mean_weights(sample_weight, X.dtype))
        if is_sparse(X):
            # cuSPARSE's SpMV by the algorithm that sums in a fixed order (CuPy's product
            # does not: the mean, and every fit from it, would change from run to run)
            return self.spmm(X.T, w).ravel()
        # One GEMV; CuPy's X.mean(axis=0) on a C-ordered tall X is ~10x slower.
        return X.T @ w

    def centre_about_first_row(self, X, sample_weight=None):
        """``(X - x̄, x̄)`` as :func:`.._common.centre_columns` forms them (x̄ about X's
        first row, the centred data with the same two roundings), in two passes over X
        (:func:`.kernels.shifted_column_sums`, :data:`.kernels.shifted_centre`) where
        that one takes five; None where X is not a C-ordered float32/float64 array on
        the device with rows and columns (the caller then centres it as usual)."""
        if (not isinstance(X, cp.ndarray) or X.ndim != 2 or 0 in X.shape
                or not X.flags.c_contiguous or X.dtype not in (np.float32, np.float64)):
            return None
        n, p = X.shape
        if sample_weight is None:
            offset = kernels.shifted_column_sums(X) / n
        else:
            offset = kernels.shifted_column_sums(X, _mean_weights(sample_weight, X.dtype))
        first = X[0].copy()
        delta = offset.astype(X.dtype)
        return kernels.shifted_centre(X, first, delta, p), first + delta

    def gram(self, X, mean=None):
        if is_sparse(X):
            G = (X.T @ X).toarray()
        else:
            G = self.matmul(X.T, X)
        if mean is not None:
            G -= X.shape[0] * cp.outer(mean, mean)
        return G

    def free_bytes(self):
        """Free memory of the device plus what CuPy's pool holds unused."""
        free, _ = cp.cuda.runtime.memGetInfo()
        return int(free + cp.get_default_memory_pool().free_bytes())

    def centred_gram(self, X, return_X=False, mean=None, anchored=False):
        """``(mean, (X - mean)ᵀ(X - mean))``, and X on the device with ``return_X``. A
        NumPy X of ``staging.STREAM_MIN_BYTES`` or more is streamed to the GPU in chunks
        (:func:`.staging.streamed_centred_gram`), not copied whole first. Constant columns
        and large offsets as on the CPU (:func:`.._common.accurate_centred_gram`).
        ``mean``, when given, is X's column mean, already computed; ``anchored`` as on
        the CPU."""
        if (mean is None and isinstance(X, np.ndarray) and X.ndim == 2
                and X.nbytes >= staging.STREAM_MIN_BYTES):
            # (formed about the first chunk's mean: the check looks at the offset from it)
            mean, G, about, *kept = staging.streamed_centred_gram(self, X, keep=return_X)
        else:
            X = self.asarray(X)
            mean = self.column_mean(X) if mean is None else mean
            G, about, kept = None, None, [X] if return_X else []
        mean, rest, G = accurate_centred_gram(self, kept[0] if kept else X, mean,
                                              X.shape[0], G, about=about)
        if anchored:
            return (mean, rest, G, *kept)
        if rest is not None:
            mean = (mean.astype(cp.float64) + rest).astype(G.dtype)
        return (mean, G, *kept)

    def csr_matrix(self, values, indices, indptr, shape):
        """A CSR matrix on the device from its arrays (CuPy's: 32-bit indices)."""
        return csp.csr_matrix((self.asarray(values), cp.asarray(indices),
                               cp.asarray(indptr)), shape=shape)

    def csr_from_coo(self, values, rows, cols, shape):
        """A CSR matrix on the device from coordinates (duplicates summed)."""
        return csp.coo_matrix((self.asarray(values), (cp.asarray(rows), cp.asarray(cols))),
                              shape=shape).tocsr()

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
        return cublaslt.matmul(a, b, bias, cublaslt.compute_type_for(a.dtype))

    def spmm(self, A, B):
        B = self.asarray(B)
        out = cusparse.sparse_product(A, B) if is_cupy_sparse(A) else None
        return cp.asarray(A @ B) if out is None else out

    def sq_dist(self, X, Y):
        """``D[i, j] = Σ_d (X[i, d] - Y[j, d])²`` in one pass (exact differences)."""
        X = cp.ascontiguousarray(self.asarray(X))
        Y = cp.ascontiguousarray(self.asarray(Y, dtype=X.dtype))
        out = cp.empty((X.shape[0], Y.shape[0]), dtype=X.dtype)
        kernels.sq_dist_kernel(X, Y, Y.shape[0], X.shape[1], out)
        return out

    def scale_rows(self, X, s):
        if is_sparse(X):
            return csp.csr_matrix(csp.diags(s) @ X)
        return X * s[:, None]

    def eigh(self, A, top=None):
        if A.shape[0] <= HOST_EIGH_MAX:
            from .. import get_backend

            w, V = get_backend("cpu").eigh(self.to_host(A), top=top)
            return cp.asarray(w), cp.asarray(V)
        return cusolver.syevd(self.asarray(A), top=top)

    def svd(self, A):
        U, s, Vt = cusolver.gesvdj(self.asarray(A))
        m, n = A.shape
        k = min(m, n)
        if max(m, n) <= HOST_SVD_MAX and k and float(s[-1]) < GESVDJ_RCOND * float(s[0]):
            # gesvdj stops at a tolerance relative to ‖A‖_F: the singular vectors of the
            # small singular values carry errors of ε·s_max/s_j, ~20x those of LAPACK's
            # gesdd at cond 1e10 (RidgeCV's leave-one-out 6e-6 against 2e-7 relative on
            # the H200 host, the SVD of the QR's R). A small ill-conditioned matrix is
            # decomposed again by LAPACK on the host.
            Uh, sh, Vth = np.linalg.svd(cp.asnumpy(A), full_matrices=False)
            U, s, Vt = cp.asarray(Uh), cp.asarray(sh), cp.asarray(Vth)
        return U, s, Vt

    # tall-skinny QR (:mod:`.tsqr`) ----------------------------------------------------
    def qr_r(self, X):
        return tsqr.qr(self, X, want_q=False)[1]

    def qr(self, X):
        """Economy ``X = QR`` of a tall X, R with a positive diagonal (:func:`.tsqr.qr`)."""
        return tsqr.qr(self, X)

    def svd_tall(self, X):
        """``U, s, Vt`` of a tall X, U orthonormal to working precision
        (:func:`.tsqr.svd_tall`)."""
        return tsqr.svd_tall(self, X)

    def randomized_svd(
        self, A, k, *, n_oversamples=10, n_iter="auto", power_iteration_normalizer="auto",
        random_state=None, transpose="auto",
    ):
        """Halko et al. randomized SVD, the same steps as scikit-learn's.

        The range finder's normaliser only changes the basis of the same subspace, so the
        cheap CholeskyQR rescaling (and CholeskyQR3 for the final orthonormal basis) gives
        scikit-learn's result up to rounding. The Gaussian test matrix is scikit-learn's
        own draw from ``random_state`` while it has fewer than ``DEVICE_DRAW_MIN``
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
                Q = tsqr.rescale_basis(self, Q)
            Q = self.matmul(AT, Q)
            if normalize:
                Q = tsqr.rescale_basis(self, Q)
        Q = tsqr.orthonormalize(self, self.matmul(A, Q))
        Z = self.matmul(AT, Q)  # Bᵀ = (Qᵀ A)ᵀ
        if Z.shape[0] >= Z.shape[1]:
            # B = Zᵀ = Rᵀ Q_zᵀ and Rᵀ = Û S Wᵀ give B = Û S (Q_z W)ᵀ.
            out = tsqr.cholesky_qr3(self, Z)
            Qz, R = out if out is not None else cusolver.positive_diagonal(
                *cusolver.householder_qr(Z, want_q=True))
            Uhat, s, Wt = self.svd(R.T)
            Vt = self.matmul(Qz, cp.ascontiguousarray(Wt.T)).T
        else:
            Uhat, s, Vt = self.svd(Z.T)
        U = self.matmul(Q, Uhat)
        if transpose:
            return Vt[:k].T, s[:k], U[:, :k].T
        return U[:, :k], s[:k], Vt[:k]

    def gemm(self, a, b, trans_a=False, trans_b=False, alpha=1.0):
        """``alpha · op(a) · op(b)`` for 2-D blocks (``op`` transposes where asked;
        cuBLAS through CuPy)."""
        out = (a.T if trans_a else a) @ (b.T if trans_b else b)
        if alpha != 1.0:
            out *= alpha
        return out

    def solve_triangular(self, L, B, transpose=False):
        """``L⁻¹ B`` (``L⁻ᵀ B`` with ``transpose``) for a lower-triangular L (cuBLAS
        trsm; only the lower triangle is read, so a factor's buffer can be passed as it
        is); stacks of them (3-D L and B) in one batched trsm."""
        return cublas.solve_triangular(L, self.asarray(B), transpose)

    def solve_triangular_right(self, L, C):
        """In place ``C ← C L⁻ᵀ`` (rows ``(L⁻¹ cᵢ)ᵀ``) for a Fortran-ordered k × n C and
        a lower-triangular L in a Fortran-ordered buffer; cuBLAS trsm from the right,
        faster than from the left here (:func:`cublas.solve_triangular_right`)."""
        return cublas.solve_triangular_right(L, C)

    def panel_cholesky(self, P, w, status, index):
        """In place: a supernode's Fortran-ordered m × w panel P becomes ``[L_JJ; L_RJ]``
        (potrf of its top w × w block, trsm of the rows below), potrf's status written
        to ``status[index]`` (an int32 device array read once for all panels)."""
        cusolver.potrf_panel(P, w, status, index)

    def cholesky_batched(self, A):
        """The lower Cholesky factors of a stack of SPD blocks (g × w × w, cuSOLVER's
        batched potrf, :func:`cusolver.potrf_batched`), or None where one of them is not
        positive definite (potrf's status, and every diagonal entry finite and
        positive)."""
        L, positive = cusolver.potrf_batched(cp.array(A, order="C", copy=True))
        return L if positive else None

    def panel_update(self, P, w, out):
        """``out ← L_RJ L_RJᵀ`` on its lower triangle for a factored panel ``[L_JJ;
        L_RJ]`` (cuBLAS syrk with the panel's leading dimension)."""
        cublas.panel_update(P, w, out)

    def panel_forward(self, P, w, Y, out):
        """In place ``Y ← L_JJ⁻¹ Y``, then ``out ← −L_RJ Y`` (cuBLAS trsm and GEMM on the
        blocks where they lie, no copies)."""
        cublas.panel_forward(P, w, Y, out)

    def scatter_add(self, target, index, values, unique=False):
        """In place ``target[index] += values``, repeated indices summed (atomics: one
        kernel, whether or not ``unique``; ``cupy.add.at``, CuPy's successor to
        ``cupyx.scatter_add``)."""
        cp.add.at(target, index, values)

    def cholesky(self, A, *, what="matrix", overwrite=False):
        F, info = cusolver.potrf(self.asarray(A), overwrite=overwrite)
        if info > 0:
            raise not_positive_definite(what, f"leading minor of order {info} is not positive")
        if info < 0:
            raise RuntimeError(f"cuSOLVER potrf: argument {-info} had an illegal value.")
        return cusolver.GPUCholeskyFactor(F, what)

    # sparse ---------------------------------------------------------------------------
    def sparse_spd(self, A, *, what="matrix") -> SparseFactor:
        return GPUSparseSPDFactor(A, what)


def _mean_weights(sample_weight, dtype):
    """Sample weights as the device's weights of a weighted mean (summing to one)."""
    w = cp.asarray(sample_weight, dtype=dtype)
    return w / w.sum()


def _gaussian(random_state, size, dtype):
    """scikit-learn's ``random_state.normal(size=size)`` on the device, or, from
    ``DEVICE_DRAW_MIN`` entries on, a device draw seeded by ``random_state``."""
    if size[0] * size[1] < DEVICE_DRAW_MIN:
        return cp.asarray(random_state.normal(size=size), dtype=dtype)
    seed = int(random_state.randint(np.iinfo(np.int32).max))
    logger.debug("randomized SVD: %d x %d test matrix drawn on the device (seed %d)",
                 size[0], size[1], seed)
    return cp.random.default_rng(seed).standard_normal(size, dtype=dtype)


def is_out_of_memory(exc):
    """Whether ``exc`` is the GPU running out of memory (CuPy, cuBLAS, cuSOLVER, cuDSS)."""
    if isinstance(exc, (MemoryError, cp.cuda.memory.OutOfMemoryError)):
        return True
    text = f"{type(exc).__name__}: {exc}"
    return any(s in text for s in ("ALLOC_FAILED", "out of memory", "OutOfMemory",
                                   "cudaErrorMemoryAllocation"))
