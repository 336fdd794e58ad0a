"""Selected inversion: the entries of ``A⁻¹`` on the pattern of A's sparse Cholesky factor.

A sparse GP's exact likelihood gradient needs ``tr(K⁻¹ ∂K/∂θ)``, with ∂K on K's pattern:
only the entries of K⁻¹ on that pattern, which lies inside the factor's. They follow from
the factor by Takahashi's recurrences (Takahashi, Fagan and Chen, 1973; in supernodal
form as in Lin Lin et al.'s SelInv, ACM TOMS 37(4), 2011): with ``Z = A⁻¹ = L⁻ᵀ L⁻¹``,
``Z L = L⁻ᵀ`` is upper triangular, so for a supernode of columns J with rows R below it

    Z_RJ = -Z_RR L_RJ L_JJ⁻¹,        Z_JJ = L_JJ⁻ᵀ (L_JJ⁻¹ - L_RJᵀ Z_RJ),

where Z_RR lies in supernodes to the right (the factor's pattern is closed under this:
for i, k in R, entry (max, min) of (i, k) is in L's pattern), so the supernodes are taken
from the last to the first. The work is about twice the factorisation's, in dense blocks
(BLAS). No Python package kept up for this was found installable here (SelInv's wrapper
needs a Fortran build; scikit-sparse and cvxopt's CHOLMOD have no selected inversion), so
this is skgpu's own, tested against dense inverses.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.linalg.lapack import dtrtri

from ._common import blas_gemm


def lower_factor(L):
    """L as a SciPy CSC matrix, checked to have sorted row indices (the factors this
    module and :mod:`._sparse_rhs` read are laid out in dense blocks by position)."""
    L = sp.csc_matrix(L)
    if not L.has_sorted_indices:
        raise ValueError("the factor's row indices must be sorted")
    return L


def supernodes(L):
    """Boundaries of L's fundamental supernodes (``[0, ..., n]``): column j + 1 joins j's
    supernode when it is j's only parent and holds j's pattern less j itself."""
    n = L.shape[0]
    count = np.diff(L.indptr)
    below = np.full(n, -1)
    has = count > 1
    below[has] = L.indices[L.indptr[:-1][has] + 1]
    joins = np.zeros(n, dtype=bool)
    joins[:-1] = (below[:-1] == np.arange(1, n)) & (count[:-1] == count[1:] + 1)
    return np.r_[np.flatnonzero(np.r_[True, ~joins[:-1]]), n]


class SelectedInverse:
    """The symbolic part, computed once per pattern, of the selected inverse of
    ``A = L Lᵀ`` for a lower-triangular CSC L with sorted row indices."""

    def __init__(self, L):
        L = lower_factor(L)
        n = L.shape[0]
        self.n = n
        self.indptr, self.indices = L.indptr.copy(), L.indices.copy()
        self.bounds = supernodes(L)
        self.owner = np.repeat(np.arange(self.bounds.size - 1), np.diff(self.bounds))
        # each stored entry's place in its supernode's dense block: (row, column)
        col_in = np.arange(n) - self.bounds[self.owner]
        entry_col = np.repeat(np.arange(n), np.diff(self.indptr))
        places = (np.arange(self.indptr[-1]) - self.indptr[entry_col] + col_in[entry_col],
                  col_in[entry_col])
        if n < np.iinfo(np.int32).max:  # 4 bytes an entry fewer, twice
            places = tuple(p.astype(np.int32) for p in places)
        self.entry_row, self.entry_col_in = places
        # column-major keys of the stored entries, ascending: to look entries up
        self.keys = entry_col.astype(np.int64) * n + self.indices
        self.plan = [self._gathers(s) for s in range(self.bounds.size - 1)]

    def _gathers(self, s):
        """Where supernode s's ``Z_RR`` comes from: for each run of R's columns that one
        later supernode t holds, ``(p0, p1, t, rows in t's block, columns in it)``."""
        bounds, indptr, indices = self.bounds, self.indptr, self.indices
        a, b = bounds[s], bounds[s + 1]
        R = indices[indptr[a]:indptr[a + 1]][b - a:]
        if R.size == 0:
            return []
        own = self.owner[R]
        cuts = np.flatnonzero(own[1:] != own[:-1]) + 1
        out = []
        for p0, p1 in zip(np.r_[0, cuts].tolist(), np.r_[cuts, R.size].tolist()):
            t = int(own[p0])
            rows_t = indices[indptr[bounds[t]]:indptr[bounds[t] + 1]]
            at = np.searchsorted(rows_t, R[p0:])
            if np.any(at >= rows_t.size) or not np.array_equal(
                    rows_t[np.minimum(at, rows_t.size - 1)], R[p0:]):
                raise ValueError("L's pattern is not a Cholesky factor's pattern (not "
                                 "closed under elimination)")
            out.append((p0, p1, t, at[:, None], R[p0:p1] - bounds[t]))
        return out

    def positions(self, rows, cols):
        """Index into L's stored entries of each (row, col) or (col, row), whichever is
        in the lower triangle; ValueError for a pair outside the pattern."""
        rows, cols = np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)
        lo, hi = np.minimum(rows, cols), np.maximum(rows, cols)
        keys = lo * self.n + hi
        pos = np.searchsorted(self.keys, keys)
        pos_ok = np.minimum(pos, self.keys.size - 1)
        if keys.size and not np.array_equal(self.keys[pos_ok], keys):
            raise ValueError("an entry asked for lies outside the factor's pattern")
        return pos

    def __call__(self, data):
        """``A⁻¹`` on L's pattern, aligned with L's stored values ``data``."""
        indptr, indices, bounds = self.indptr, self.indices, self.bounds
        entry_row, entry_col_in = self.entry_row, self.entry_col_in
        data = np.asarray(data, dtype=np.float64)
        if data.shape != (indptr[-1],):
            raise ValueError("the factor's values do not match its pattern")
        n_super = bounds.size - 1
        blocks = [None] * n_super
        out = np.empty_like(data)
        for s in range(n_super - 1, -1, -1):
            a, b = int(bounds[s]), int(bounds[s + 1])
            w = b - a
            rows = indices[indptr[a]:indptr[a + 1]]
            k0, k1 = indptr[a], indptr[b]
            places = (entry_row[k0:k1], entry_col_in[k0:k1])
            Lb = np.zeros((rows.size, w))
            Lb[places] = data[k0:k1]
            W, info = dtrtri(Lb[:w], lower=1)
            if info != 0:
                raise np.linalg.LinAlgError("a diagonal block of the factor is singular")
            # W = L_JJ⁻¹: dtrtri leaves the upper triangle as given, zeros here
            Z = np.empty((rows.size, w))
            R = rows[w:]
            if R.size:
                L_RJ = Lb[w:]
                Z_RR = np.empty((R.size, R.size))
                for p0, p1, t, at, cols in self.plan[s]:
                    part = blocks[t][at, cols]
                    Z_RR[p0:, p0:p1] = part  # columns of R in supernode t, rows below
                    Z_RR[p0:p1, p0:] = part.T  # and by symmetry (BLAS symm was slower)
                # products by SciPy's BLAS, as dtrtri (blas_gemm: why)
                Z_RJ = blas_gemm(blas_gemm(Z_RR, L_RJ), W, alpha=-1.0)
                Z[w:] = Z_RJ
                Z[:w] = blas_gemm(W, W - blas_gemm(L_RJ, Z_RJ, trans_a=True), trans_a=True)
            else:
                Z[:w] = blas_gemm(W, W, trans_a=True)
            blocks[s] = Z
            out[k0:k1] = Z[places]
        return out
