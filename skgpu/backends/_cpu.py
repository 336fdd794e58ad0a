"""The CPU backend: the operation set of DESIGN.md on NumPy and SciPy."""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from sklearn.utils.extmath import randomized_svd as _sk_randomized_svd

from ._arrays import to_numpy
from ._common import (
    accurate_centred_gram,
    blas_gemm,
    not_positive_definite,
    quadratic_form_matrix_by_solves,
    quadratic_forms_by_solves,
    tril_in_place,
)
from ._sparse_rhs import SupernodalForward

if TYPE_CHECKING:
    from .interface import SparseFactor

logger = logging.getLogger("skgpu")


#: Above this order, an eigh asked for its top few pairs computes only those (SciPy).
_SUBSET_EIGH_MIN = 1024


class CholeskyFactor:
    """Dense Cholesky factor ``A = L Lᵀ`` on the host (LAPACK potrf/potrs/potri)."""

    def __init__(self, L, what):
        self.L = L
        self._what = what

    @property
    def lower(self):
        """An array whose lower triangle is L (the strict upper one is unspecified)."""
        return self.L

    def solve(self, B):
        return sla.cho_solve((self.L, True), B, check_finite=False)

    def logdet(self):
        return 2.0 * float(np.sum(np.log(np.diag(self.L))))

    def _potri(self, overwrite):
        potri = sla.get_lapack_funcs("potri", (self.L,))
        inv, info = potri(self.L, lower=True, overwrite_c=overwrite)
        if info != 0:
            raise np.linalg.LinAlgError(f"potri failed on the {self._what} (info={info}).")
        return inv

    def inverse(self):
        inv = self._potri(False)
        return np.tril(inv) + np.tril(inv, -1).T

    def half_inverse(self):
        """P with ``P + Pᵀ = A⁻¹`` (a triangle of A⁻¹, diagonal halved), C-contiguous,
        computed in place: the factor is unusable afterwards. ``tr(A⁻¹ B) =
        2·vdot(P, B)`` for a symmetric B, without forming the full inverse."""
        P = self._potri(True)  # in L's memory where LAPACK could write in place
        self.L = None
        tril_in_place(P)
        P[np.diag_indices_from(P)] *= 0.5
        # C-contiguous without a copy: the transpose of a Fortran-ordered P (its upper
        # triangle then; P + Pᵀ is the same)
        return P.T if P.flags.f_contiguous and not P.flags.c_contiguous else (
            np.ascontiguousarray(P))


class SparseSPDFactor:
    """Sparse SPD factor through SciPy's SuperLU in symmetric mode (no pivoting).

    With ``diag_pivot_thresh=0`` and symmetric ordering, ``U``'s diagonal holds the
    pivots of an LDLᵀ-like elimination, which are all positive exactly when the matrix
    is positive definite; ``logdet`` is the sum of their logarithms.
    """

    #: quadratic forms by forward solves with L (:mod:`._sparse_rhs`)
    exposes_factor = True

    def __init__(self, A, what):
        self._what = what
        self._A = sp.csc_matrix(A, dtype=np.float64, copy=True)
        self._A.sort_indices()
        self._factorize()

    def _factorize(self):
        try:
            lu = spla.splu(
                self._A,
                permc_spec="MMD_AT_PLUS_A",
                diag_pivot_thresh=0.0,
                options={"SymmetricMode": True},
            )
        except RuntimeError as exc:  # "Factor is exactly singular"
            raise not_positive_definite(self._what, str(exc)) from exc
        pivots = lu.U.diagonal()
        if not np.all(pivots > 0):
            raise not_positive_definite(
                self._what, f"{int(np.sum(pivots <= 0))} non-positive pivot(s)"
            )
        self._lu = lu
        self._pivots = pivots
        self._logdet = float(np.sum(np.log(pivots)))
        self._forward = None

    def quadratic_forms(self, B, block_bytes=1 << 30):
        """``bᵢᵀ A⁻¹ bᵢ`` for each row of the sparse host matrix B (m, n).

        In symmetric mode without pivoting (``perm_r == perm_c``) SuperLU's
        ``A[q][:, q] = L̃ U`` with ``U = D L̃ᵀ``, so ``bᵀ A⁻¹ b = ‖L⁻¹ P b‖²`` for the
        Cholesky-like ``L = L̃ D^½``: forward solves with sparse right-hand sides
        (:mod:`._sparse_rhs`). Where the permutations differ or L̃'s pattern does not
        form supernodes, full solves on dense blocks instead (logged)."""
        forward, position_of = self._forward_solver()
        B = sp.csr_matrix(B, dtype=np.float64)
        if forward is None:
            return quadratic_forms_by_solves(self, B, np, block_bytes)
        return forward.quadratic_forms(_columns_to(B, position_of))

    def quadratic_form_matrix(self, B):
        """``B A⁻¹ Bᵀ`` (dense) for the sparse host matrix B (m, n), as the CHOLMOD
        factor's :meth:`CholmodSPDFactor.quadratic_form_matrix` does."""
        forward, position_of = self._forward_solver()
        B = sp.csr_matrix(B, dtype=np.float64)
        if forward is None:
            return quadratic_form_matrix_by_solves(self, B, np)
        return forward.gram(_columns_to(B, position_of))

    def _forward_solver(self):
        """``(SupernodalForward or None, position_of)`` for the current factor."""
        if self._forward is None:
            lu = self._lu
            forward = None
            if np.array_equal(lu.perm_r, lu.perm_c):
                L = sp.csc_matrix(lu.L @ sp.diags(np.sqrt(self._pivots)))
                L.sort_indices()
                try:
                    forward = SupernodalForward(L)
                except ValueError as exc:
                    logger.debug("SuperLU factor: %s; quadratic forms by full solves", exc)
            else:
                logger.debug("SuperLU factor: row and column orders differ; quadratic "
                             "forms by full solves")
            self._forward = (forward, np.asarray(lu.perm_c, dtype=np.int64))
        return self._forward

    @property
    def shape(self):
        return self._A.shape

    def solve(self, B):
        return self._lu.solve(np.asarray(B, dtype=np.float64))

    def logdet(self):
        return self._logdet

    def refactor(self, A):
        """Factor ``A``, a matrix with the same sparsity pattern, reusing this object."""
        B = sp.csc_matrix(to_numpy(A), dtype=np.float64)
        B.sort_indices()
        if B.nnz != self._A.nnz or not np.array_equal(B.indices, self._A.indices):
            raise ValueError("refactor needs a matrix with the same sparsity pattern.")
        self._A.data[:] = B.data
        self._factorize()


def _columns_to(B, position_of):
    """A new CSR matrix: B with column j moved to ``position_of[j]`` (B is untouched:
    sorting the new one's indices moves its values)."""
    B = sp.csr_matrix((B.data.copy(), position_of[B.indices], B.indptr.copy()),
                      shape=B.shape)
    B.sort_indices()
    return B


def _cholmod():
    """cvxopt's CHOLMOD module, or None when the ``sparse`` extra is not installed."""
    try:
        from cvxopt import cholmod
    except ImportError:
        return None
    return cholmod


def host_available_bytes() -> int | None:
    """Memory the host can give without swapping (Linux: MemAvailable), or None."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def cholmod_available() -> bool:
    """Whether the CPU backend's sparse factor is CHOLMOD (else SciPy's SuperLU)."""
    return _cholmod() is not None


class CholmodSPDFactor:
    """Sparse SPD factor ``A = L Lᵀ`` by CHOLMOD (SuiteSparse, through cvxopt: the
    ``sparse`` extra), supernodal; ``logdet`` from L's diagonal.

    The symbolic analysis (fill-reducing ordering and the supernodes) is done once;
    :meth:`refactor` gives the same pattern new values and re-runs only the numeric
    factorisation. Measured on a 2-core machine, one LML with its central-difference
    gradient of a tapered GP at n = 50,000 (2-D, ~30 neighbours a row): 1.7 s, against
    8.5 s with SuperLU, which repeats its analysis and factors LU.

    :meth:`inverse_on` reads L out of CHOLMOD, which cvxopt's ``getfactor`` does by
    turning the factor object back into a symbolic one; the analysis (~0.09 s at
    n = 50,000, against 0.17 s for a numeric factorisation) is then redone, with the same
    ordering, when the factor is next needed.
    """

    #: quadratic forms by forward solves with L (:mod:`._sparse_rhs`)
    exposes_factor = True

    def __init__(self, A, what):
        from cvxopt import matrix, spmatrix

        self._what = what
        A = sp.csc_matrix(to_numpy(A), dtype=np.float64, copy=True)
        A.sum_duplicates()
        A.sort_indices()
        n = A.shape[0]
        self._indptr, self._indices = A.indptr.copy(), A.indices.copy()
        # the lower triangle in column-major order, the order of cvxopt's values
        cols = np.repeat(np.arange(n), np.diff(A.indptr))
        self._lower = A.indices >= cols
        self._matrix = matrix
        self._S = spmatrix(matrix(A.data[self._lower]),
                           matrix(A.indices[self._lower].astype(np.int64)),
                           matrix(cols[self._lower].astype(np.int64)), (n, n))
        self._F = None  # CHOLMOD's factor object; None until analysed (again)
        self._numeric_ready = False
        self._selinv = None
        self._positions = None
        self._forward = None  # (SupernodalForward, position_of) of the current values
        self._numeric()

    def _analyse(self):
        cholmod = _cholmod()
        saved = dict(cholmod.options)
        cholmod.options["supernodal"] = 2  # L's diagonal (for logdet) needs supernodes
        try:
            self._F = cholmod.symbolic(self._S, uplo="L")
        finally:
            cholmod.options.clear()
            cholmod.options.update(saved)

    def _numeric(self):
        cholmod = _cholmod()
        if self._F is None:
            self._analyse()
        self._numeric_ready = False
        try:
            cholmod.numeric(self._S, self._F)
        except ArithmeticError as exc:  # CHOLMOD: "not positive definite"
            raise not_positive_definite(self._what, f"CHOLMOD: {exc}") from exc
        self._numeric_ready = True
        diag = np.asarray(cholmod.diag(self._F)).ravel()
        self._logdet = 2.0 * float(np.sum(np.log(diag)))

    def _factor(self):
        """CHOLMOD's numeric factor of the current values (refactored when
        :meth:`inverse_on` has taken it apart)."""
        if not self._numeric_ready:
            self._numeric()
        return self._F

    @property
    def shape(self):
        return self._S.size

    def solve(self, B):
        B = np.asarray(B, dtype=np.float64)
        b = self._matrix(B.reshape(B.shape[0], -1).copy(order="F"))
        _cholmod().solve(self._factor(), b)
        return np.asarray(b).reshape(B.shape)

    def logdet(self):
        return self._logdet

    def _read_factor(self):
        """``(L, order)``: CHOLMOD's current factor as a SciPy CSC matrix (sorted rows)
        and the ordering with ``A[order][:, order] = L Lᵀ``. cvxopt's ``getfactor``
        leaves F symbolic: the numeric factor is redone when next needed."""
        cholmod = _cholmod()
        F = self._factor()
        n = self._S.size[0]
        order = self._matrix(np.arange(n, dtype=np.float64))
        cholmod.solve(F, order, sys=7)  # the p with A[p][:, p] = L Lᵀ
        order = np.asarray(order).ravel().astype(np.int64)
        colptr, rowind, values = cholmod.getfactor(F).CCS  # F is symbolic after this
        self._numeric_ready = False
        self._F = None
        L = sp.csc_matrix((np.asarray(values).ravel(), np.asarray(rowind).ravel(),
                           np.asarray(colptr).ravel()), shape=(n, n))
        if not L.has_sorted_indices:
            L.sort_indices()
        return L, order

    def quadratic_forms(self, B, block_bytes=1 << 30):
        """``bᵢᵀ A⁻¹ bᵢ = ‖L⁻¹ P bᵢ‖²`` for each row of the sparse host matrix B (m, n),
        by forward solves that touch only the supernodes each row reaches
        (:mod:`._sparse_rhs`). The factor's dense supernodal blocks are kept until the
        values change (:meth:`refactor`); they take about L's bytes."""
        forward, position_of = self._forward_solver()
        B = sp.csr_matrix(B, dtype=np.float64)
        return forward.quadratic_forms(_columns_to(B, position_of))

    def quadratic_form_matrix(self, B):
        """``B A⁻¹ Bᵀ = (L⁻¹ P Bᵀ)ᵀ (L⁻¹ P Bᵀ)`` (dense) for the sparse host matrix B
        (m, n): the Gram of the forward solves of :meth:`quadratic_forms`. (Full solves
        were slower at every size measured: 19 s against 11 s for m = 10,000 at
        n = 5,000, ~200 s against 13 s at n = 50,000.)"""
        forward, position_of = self._forward_solver()
        B = sp.csr_matrix(B, dtype=np.float64)
        return forward.gram(_columns_to(B, position_of))

    def _forward_solver(self):
        if self._forward is None:
            L, order = self._read_factor()
            position_of = np.empty(order.size, dtype=np.int64)
            position_of[order] = np.arange(order.size)
            self._forward = (SupernodalForward(L), position_of)
        return self._forward

    def inverse_on(self, rows, cols):
        """``A⁻¹`` at the pairs ``(rows[e], cols[e])`` of A's pattern (host integer
        arrays), by selected inversion of the current factor
        (:mod:`skgpu.backends._selinv`): exact to rounding, where a difference of
        log-determinants is not. The symbolic part and the pairs' places are kept while
        the pattern and the pairs (the same array objects) stay."""
        from ._selinv import SelectedInverse

        L, order = self._read_factor()
        n = order.size
        same = (self._selinv is not None and np.array_equal(order, self._order)
                and np.array_equal(L.indptr, self._selinv.indptr)
                and np.array_equal(L.indices, self._selinv.indices))
        if not same:  # a first call, or an analysis that ordered differently
            self._order = order
            self._position_of = np.empty(n, dtype=np.int64)
            self._position_of[order] = np.arange(n)
            self._selinv = SelectedInverse(L)
            self._positions = None
        if self._positions is None or self._positions[0] is not rows or (
                self._positions[1] is not cols):
            where = self._selinv.positions(self._position_of[np.asarray(rows)],
                                           self._position_of[np.asarray(cols)])
            self._positions = (rows, cols, where)
        return self._selinv(L.data)[self._positions[2]]

    def refactor(self, A):
        """Factor ``A``, a matrix with the same sparsity pattern, reusing the analysis."""
        B = sp.csc_matrix(to_numpy(A), dtype=np.float64)
        B.sum_duplicates()
        B.sort_indices()
        if (B.nnz != self._indices.size or not np.array_equal(B.indptr, self._indptr)
                or not np.array_equal(B.indices, self._indices)):
            raise ValueError("refactor needs a matrix with the same sparsity pattern.")
        self._S.V = self._matrix(B.data[self._lower])
        self._forward = None  # the blocks copy the old values
        self._numeric()


class CPUBackend:
    """NumPy/SciPy implementation of the backend operation set."""

    name = "cpu"
    is_gpu = False
    xp = np
    # policies (see the Backend protocol)
    finite_check = "input"
    memory = "host"
    defers_host_copies = False
    neighbour_search = "kd-tree"
    batched_blocks = False
    forward_order = "C"

    @property
    def sparse_factor(self):
        """The factor ``sparse_spd`` makes: "cholmod" (the ``sparse`` extra), else
        "superlu" (see the Backend protocol)."""
        return "cholmod" if _cholmod() is not None else "superlu"

    # arrays ---------------------------------------------------------------------------
    def asarray(self, X, dtype=None):
        X = to_numpy(X)
        if sp.issparse(X):
            return X if dtype is None or X.dtype == dtype else X.astype(dtype)
        return np.asarray(X, dtype=dtype)

    def to_host(self, a):
        return to_numpy(a)

    def is_sparse(self, X):
        return sp.issparse(X)

    def free_memory(self):
        pass

    def free_bytes(self):
        """Memory the host can give without swapping (Linux: MemAvailable), or None."""
        return host_available_bytes()

    # dense ----------------------------------------------------------------------------
    def column_mean(self, X, sample_weight=None):
        n = X.shape[0]
        w = np.full(n, 1.0 / n, dtype=X.dtype) if sample_weight is None else (
            np.asarray(sample_weight, dtype=X.dtype) / np.sum(sample_weight)
        )
        return np.asarray(X.T @ w).ravel()

    def centre_about_first_row(self, X, sample_weight=None):
        """None: NumPy centres as fast in :func:`._common.centre_columns`'s passes."""
        return None

    def gram(self, X, mean=None):
        G = X.T @ X
        G = G.toarray() if sp.issparse(G) else np.asarray(G)
        if mean is not None:
            G -= X.shape[0] * np.outer(mean, mean)
        return G

    def centred_gram(self, X, return_X=False, mean=None, anchored=False):
        """``(mean, (X - mean)ᵀ(X - mean))``, and X with ``return_X``: the one-pass
        formula, made exact for constant columns and formed again from shifted data
        where a column's mean dwarfs its spread (:func:`._common.accurate_centred_gram`).
        ``mean``, when given, is X's column mean, already computed. ``anchored``: the
        mean in two parts, ``(anchor, rest, G)`` with the mean ``anchor + rest`` (rest
        None or float64), for a caller combining the means of several blocks."""
        X = self.asarray(X)
        mean = self.column_mean(X) if mean is None else mean
        mean, rest, G = accurate_centred_gram(self, X, mean, X.shape[0])
        if anchored:
            return (mean, rest, G, X) if return_X else (mean, rest, G)
        if rest is not None:
            mean = (mean.astype(np.float64) + rest).astype(G.dtype)
        return (mean, G, X) if return_X else (mean, G)

    def csr_matrix(self, values, indices, indptr, shape):
        """A CSR matrix on this backend from its arrays."""
        return sp.csr_matrix((values, indices, indptr), shape=shape)

    def csr_from_coo(self, values, rows, cols, shape):
        """A CSR matrix on this backend from coordinates (duplicates summed)."""
        return sp.coo_matrix((values, (rows, cols)), shape=shape).tocsr()

    def matmul(self, a, b, bias=None):
        out = a @ b
        out = np.asarray(out.toarray() if sp.issparse(out) else out)
        if bias is not None:
            out += bias
        return out

    def spmm(self, A, B):
        return np.asarray(A @ B)

    def sq_dist(self, X, Y):
        """``D[i, j] = Σ_d (X[i, d] - Y[j, d])²`` by exact differences (scipy's cdist
        arithmetic, not ‖x‖² + ‖y‖² - 2xᵀy)."""
        D = None
        for d in range(X.shape[1]):
            diff = X[:, d][:, None] - Y[:, d][None, :]
            diff *= diff
            if D is None:
                D = diff
            else:
                D += diff
        return D

    def scale_rows(self, X, s):
        if sp.issparse(X):
            return sp.csr_matrix(sp.diags(s) @ X)
        return X * s[:, None]

    def eigh(self, A, top=None):
        n = A.shape[0]
        if top is None or n <= _SUBSET_EIGH_MIN:
            # NumPy's LAPACK, the library the Gram's GEMM just ran in, as scikit-learn
            # does. SciPy's wheels carry a second OpenBLAS whose threads can contend with
            # NumPy's still-spinning ones on a many-core host: with SciPy's eigh here,
            # the CPU PCA fit of 10,000 × 256 took 146 ms beside scikit-learn's 14 ms on
            # the 32-core GPU host.
            w, V = np.linalg.eigh(A)
            if top is not None:
                w, V = w[n - top:], V[:, n - top:]
        elif top < n:
            w, V = sla.eigh(A, subset_by_index=(n - top, n - 1), check_finite=False)
        else:
            w, V = sla.eigh(A, check_finite=False)
        return w[::-1].copy(), V[:, ::-1].copy()

    def svd(self, A):
        # NumPy's gesdd, not SciPy's (see eigh: SciPy's second OpenBLAS took 194 ms for a
        # 256 × 256 SVD on the 32-core GPU host while dask's threads were busy).
        return np.linalg.svd(A, full_matrices=False)

    def randomized_svd(
        self, A, k, *, n_oversamples=10, n_iter="auto", power_iteration_normalizer="auto",
        random_state=None, transpose="auto",
    ):
        return _sk_randomized_svd(
            A, k, n_oversamples=n_oversamples, n_iter=n_iter,
            power_iteration_normalizer=power_iteration_normalizer, transpose=transpose,
            flip_sign=False, random_state=random_state,
        )

    def qr(self, X):
        """Economy ``X = QR`` of a tall X (LAPACK geqrf + orgqr), R with a positive
        diagonal."""
        Q, R = sla.qr(X, mode="economic", check_finite=False)
        signs = np.where(np.diag(R) < 0, -1.0, 1.0).astype(R.dtype)
        return Q * signs, R * signs[:, None]

    def svd_tall(self, X):
        """``U, s, Vt`` of a tall X by a QR first (``X = QR``, ``R = Ũ S Vᵀ``,
        ``U = Q Ũ``): U orthonormal to working precision whatever X's conditioning, not
        ``X V / s``."""
        Q, R = self.qr(X)
        Ut, s, Vt = self.svd(R)
        return self.matmul(Q, Ut), s, Vt

    def qr_r(self, X):
        R = sla.qr(X, mode="r", check_finite=False)[0][: min(X.shape)]
        signs = np.where(np.diag(R) < 0, -1.0, 1.0).astype(R.dtype)
        return R * signs[:, None]

    def gemm(self, a, b, trans_a=False, trans_b=False, alpha=1.0):
        """``alpha · op(a) · op(b)`` for 2-D blocks (``op`` transposes where asked), by
        SciPy's BLAS, the library of this backend's triangular solves and panel
        kernels (:func:`._common.blas_gemm`: why one library)."""
        return blas_gemm(a, b, trans_a, trans_b, alpha)

    def solve_triangular(self, L, B, transpose=False):
        """``L⁻¹ B`` (``L⁻ᵀ B`` with ``transpose``) for a lower-triangular L (only its
        lower triangle is read); stacks of them (3-D L and B) one by one."""
        if L.ndim == 3:
            return np.stack([self.solve_triangular(Li, Bi, transpose)
                             for Li, Bi in zip(L, B)]) if len(L) else np.zeros(B.shape)
        return sla.solve_triangular(L, B, trans=1 if transpose else 0, lower=True,
                                    check_finite=False)

    def solve_triangular_right(self, L, C):
        """In place ``C ← C L⁻ᵀ`` (rows ``(L⁻¹ cᵢ)ᵀ``) for a Fortran-ordered k × n C and
        a lower-triangular L (only its lower triangle is read): BLAS trsm from the right,
        as the GPU backend's."""
        if not C.flags.f_contiguous:
            raise ValueError("solve_triangular_right needs a Fortran-ordered C")
        trsm = sla.get_blas_funcs("trsm", (L, C))
        out = trsm(1.0, L, C, side=1, lower=1, trans_a=1, overwrite_b=1)
        if out is not C:  # (BLAS wrote a copy: a dtype or an alignment it needed)
            C[...] = out
        return C

    def panel_cholesky(self, P, w, status, index):
        """In place: a supernode's Fortran-ordered m × w panel P becomes ``[L_JJ; L_RJ]``
        (LAPACK potrf of its top w × w block, BLAS trsm of the rows below), potrf's
        status written to ``status[index]``."""
        potrf = sla.lapack.get_lapack_funcs("potrf", (P,))
        L, info = potrf(P[:w, :w], lower=True, clean=False)
        status[index] = info
        if info != 0:
            return
        P[:w, :w] = L
        if P.shape[0] > w:
            trsm = sla.get_blas_funcs("trsm", (P,))
            P[w:] = trsm(1.0, L, P[w:], side=1, lower=1, trans_a=1)

    def cholesky_batched(self, A):
        """The lower Cholesky factors of a stack of SPD blocks (g × w × w), or None
        where one of them is not positive definite (LAPACK potrf through NumPy, and every
        diagonal entry finite and positive: a NaN passes potrf), as on the GPU."""
        try:
            L = np.linalg.cholesky(A)
        except np.linalg.LinAlgError:
            return None
        diagonal = np.diagonal(L, axis1=1, axis2=2)
        return L if np.all(np.isfinite(diagonal) & (diagonal > 0)) else None

    def panel_update(self, P, w, out):
        """``out ← L_RJ L_RJᵀ`` on its lower triangle for a factored panel ``[L_JJ;
        L_RJ]`` (BLAS syrk; the strict upper triangle is unspecified)."""
        below = P[w:]
        syrk = sla.get_blas_funcs("syrk", (below,))
        out[...] = syrk(1.0, below, lower=1)

    def panel_forward(self, P, w, Y, out):
        """In place ``Y ← L_JJ⁻¹ Y``, then ``out ← −L_RJ Y`` (the update the rows below
        take). Y and out C-ordered (``forward_order``): BLAS works on their transposes,
        Fortran-ordered, in place (``Yᵀ ← Yᵀ L_JJ⁻ᵀ``, ``outᵀ ← −Yᵀ L_RJᵀ``); else
        through copies."""
        if not (Y.flags.c_contiguous and out.flags.c_contiguous):
            Y[...] = sla.solve_triangular(P[:w, :w], Y, lower=True, check_finite=False)
            if P.shape[0] > w:
                out[...] = self.gemm(P[w:], Y, alpha=-1.0)  # (SciPy's BLAS: see gemm)
            return
        if Y.size == 0:
            return
        self.solve_triangular_right(P[:w, :w], Y.T)
        if P.shape[0] > w:
            gemm = sla.get_blas_funcs("gemm", (P, Y))
            result = gemm(-1.0, Y.T, P[w:], beta=0.0, c=out.T, trans_b=1, overwrite_c=1)
            if not np.shares_memory(result, out):
                out.T[...] = result  # (BLAS wrote a copy)

    def scatter_add(self, target, index, values, unique=False):
        """In place ``target[index] += values``, repeated indices summed (``unique``: the
        caller knows there are none, and the plain indexed update is taken)."""
        if unique:
            target[index] += values
        else:
            np.add.at(target, index, values)

    def cholesky(self, A, *, what="matrix", overwrite=False):
        """Factor of the SPD ``A``; ``overwrite=True`` may reuse A's memory (A must
        then be symmetric, contiguous, and not used again by the caller)."""
        if overwrite and A.flags.c_contiguous:
            A = A.T  # the same symmetric matrix, Fortran-ordered: LAPACK works in place
        potrf = sla.lapack.get_lapack_funcs("potrf", (A,))
        L, info = potrf(A, lower=True, clean=True, overwrite_a=overwrite)
        if info > 0:
            raise not_positive_definite(what, f"leading minor of order {info} is not positive")
        if info < 0:
            raise ValueError(f"potrf: illegal value in argument {-info}")
        return CholeskyFactor(L, what)

    # sparse ---------------------------------------------------------------------------
    def sparse_spd(self, A, *, what="matrix") -> SparseFactor:
        """CHOLMOD's supernodal Cholesky where cvxopt is installed (the ``sparse``
        extra), else SciPy's SuperLU in symmetric mode."""
        if _cholmod() is not None:
            return CholmodSPDFactor(A, what)
        return SparseSPDFactor(A, what)
