"""Quadratic forms ``bᵀ A⁻¹ b`` for many sparse vectors b, by forward solves that touch
only the parts of A's sparse Cholesky factor that each b reaches.

A sparse GP's predictive variance at a test point is ``k** - kᵀ K⁻¹ k``, where k (the
point's covariance with the training points) has a few dozen non-zeros under a compactly
supported kernel. With ``P K Pᵀ = L Lᵀ``, ``kᵀ K⁻¹ k = ‖L⁻¹ P k‖²``, and the forward
solve with a sparse right-hand side is non-zero only on the *reach* of its non-zeros:
the supernodes on their paths to the root of the elimination tree (Gilbert and Peierls,
1988). In two dimensions that is a few per cent of the factor (the separators above the
point), against all of it for a dense right-hand side.

Test points are taken in chunks ordered by the factor's ordering (points close in space
reach the same supernodes), each chunk in sub-batches. A sub-batch solves through the
supernodes it reaches that are not shared by the whole chunk; the supernodes every
sub-batch reaches (the top separators) are then solved once for the whole chunk, as wide
dense products. The work is dense triangular solves and products (BLAS), about
``Σ_reach (w² + 2 w r)`` flops a point for supernodes of w columns and r rows below.

No kept-up Python package was found that solves with sparse right-hand sides on a
supernodal factor (CHOLMOD's ``cholmod_solve2`` with a sparse ``Bset`` is not exposed by
cvxopt, and solves one column at a time), so this is skgpu's own, tested against dense
solves.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.linalg.blas import dgemm, dtrsm

from ._selinv import supernodes

#: Test points solved together below the chunk's shared supernodes ...
SUB_BATCH = 128
#: ... and together through them.
CHUNK = 4096
#: Entries of the factor and of b this far below their largest are taken as zero. A
#: compact kernel's factor holds entries down to ~1e-154; their products are subnormal
#: numbers, on which x86 arithmetic is ~100x slower (measured: 13 s against 0.4 s for
#: 10,000 forms at n = 50,000), while their share of a form is below 1e-200 of it.
FLUSH = 1e-120


class SupernodalForward:
    """A lower-triangular CSC factor L (sorted row indices) as dense supernodal blocks,
    for :meth:`quadratic_forms`. Any lower-triangular pattern is accepted whose columns
    in a supernode (:func:`~skgpu.backends._selinv.supernodes`) have their rows among
    the supernode's first column's; ValueError otherwise."""

    def __init__(self, L):
        L = sp.csc_matrix(L)
        if not L.has_sorted_indices:
            raise ValueError("the factor's row indices must be sorted")
        n = L.shape[0]
        self.n = n
        indptr, indices, data = L.indptr, L.indices, L.data
        bounds = supernodes(L)
        self.bounds = bounds
        n_super = bounds.size - 1
        owner = np.repeat(np.arange(n_super), np.diff(bounds))
        self.owner = owner
        flush = FLUSH * max(float(data.max(initial=0.0)), -float(data.min(initial=0.0)))
        self.diagonal, self.below_t, self.rows, self.targets = [], [], [], []
        # supernode by supernode (no temporary the size of L: on a fresh process
        # each one costs its page faults)
        for s in range(n_super):
            a, b = int(bounds[s]), int(bounds[s + 1])
            w = b - a
            k0, k1 = int(indptr[a]), int(indptr[b])
            rows = indices[k0:int(indptr[a + 1])]
            # column a + j holds the first column's rows from the j-th on; an entry's
            # place in the block is its place in its column plus j
            counts = np.diff(indptr[a:b + 1])
            j = np.repeat(np.arange(w), counts)
            place = np.arange(k1 - k0) - np.repeat(indptr[a:b] - k0, counts) + j
            entries = indices[k0:k1]
            if (rows.size < w or np.any(place >= rows.size)
                    or not np.array_equal(rows[np.minimum(place, rows.size - 1)], entries)
                    or not np.array_equal(rows[:w], np.arange(a, b))):
                raise ValueError("the factor's columns do not form supernodes (a row "
                                 "outside its supernode's first column's pattern)")
            block = np.zeros((rows.size, w))
            block[place, j] = data[k0:k1]
            block[np.abs(block) < flush] = 0.0
            if not np.all(np.diagonal(block)):
                raise np.linalg.LinAlgError("a diagonal entry of the factor is zero")
            self.diagonal.append(np.asfortranarray(block[:w]))
            self.below_t.append(block[w:].T)  # F-ordered: the C-ordered rows below
            R = rows[w:]
            self.rows.append(R)
            own = owner[R]
            self.targets.append(own[np.r_[True, own[1:] != own[:-1]]].tolist()
                                if own.size else [])

    def _reach(self, starts):
        """The supernodes reached from the supernodes ``starts``, ascending."""
        reached = set()
        stack = list(set(starts.tolist()))
        targets = self.targets
        while stack:
            s = stack.pop()
            if s in reached:
                continue
            reached.add(s)
            stack.extend(t for t in targets[s] if t not in reached)
        return np.array(sorted(reached), dtype=np.int64)

    def _solve_through(self, s, work, offset, acc):
        """Solve supernode s's rows of ``work`` (rows × points) in place, add the
        solution's squared column norms to ``acc``; returns the update ``L_RJ y`` for
        the rows below."""
        a, b = int(self.bounds[s]), int(self.bounds[s + 1])
        x = work[offset:offset + b - a]
        # y = L_JJ⁻¹ x, as yᵀ = xᵀ L_JJ⁻ᵀ on the F-ordered transpose (no copy)
        yt = dtrsm(1.0, self.diagonal[s], x.T, side=1, lower=1, trans_a=1)
        acc += np.einsum("ij,ij->i", yt, yt)
        if not self.rows[s].size:
            return None
        # (L_RJ y)ᵀ = yᵀ L_RJᵀ, by the same BLAS library as the solve: NumPy and SciPy
        # link two OpenBLAS builds, whose thread pools fight for the cores when calls
        # alternate between them (measured 13 s against 1.6 s)
        return dgemm(1.0, yt, self.below_t[s], trans_b=0).T

    def quadratic_forms(self, B):
        """``‖L⁻¹ bᵢ‖²`` for each row bᵢ of the sparse (m, n) matrix B."""
        B = sp.csr_matrix(B, dtype=np.float64, copy=True)
        if B.nnz:
            B.data[np.abs(B.data) < FLUSH * np.max(np.abs(B.data))] = 0.0
        m = B.shape[0]
        if B.shape[1] != self.n:
            raise ValueError(f"B has {B.shape[1]} columns; the factor has {self.n} rows")
        out = np.zeros(m)
        counts = np.diff(B.indptr)
        first = np.full(m, self.n, dtype=np.int64)
        has = counts > 0
        first[has] = np.minimum.reduceat(B.indices, B.indptr[:-1][has]) if B.nnz else 0
        order = np.argsort(first[has], kind="stable")
        points = np.flatnonzero(has)[order]  # rows with no entry have form 0
        for c0 in range(0, points.size, CHUNK):
            chunk = points[c0:c0 + CHUNK]
            out[chunk] = self._chunk(B[chunk])
        return out

    def _chunk(self, B):
        m = B.shape[0]
        bounds, owner = self.bounds, self.owner
        batches = [(k, min(m, k + SUB_BATCH)) for k in range(0, m, SUB_BATCH)]
        reaches = [self._reach(owner[B.indices[B.indptr[k0]:B.indptr[k1]]])
                   for k0, k1 in batches]
        count = np.zeros(bounds.size - 1, dtype=np.int64)
        for r in reaches:
            count[r] += 1
        shared = count == len(batches)
        top = np.flatnonzero(shared)
        where = np.full(self.n, -1, dtype=np.int64)
        widths = bounds[top + 1] - bounds[top]
        start = np.r_[0, np.cumsum(widths)]
        for s, o in zip(top.tolist(), start[:-1].tolist()):
            where[bounds[s]:bounds[s + 1]] = np.arange(o, o + bounds[s + 1] - bounds[s])
        top_rows = where.copy()  # the shared supernodes' rows, in `top_work`
        top_work = np.zeros((int(start[-1]), m))
        acc = np.zeros(m)
        for (k0, k1), reach in zip(batches, reaches):
            own = reach[~shared[reach]]
            widths = bounds[own + 1] - bounds[own]
            offsets = np.r_[0, np.cumsum(widths)]
            local = np.full(self.n, -1, dtype=np.int64)
            for s, o, w in zip(own.tolist(), offsets[:-1].tolist(), widths.tolist()):
                local[bounds[s]:bounds[s] + w] = np.arange(o, o + w)
            work = np.zeros((int(offsets[-1]), k1 - k0))
            part = B[k0:k1].tocoo()
            mine = local[part.col] >= 0
            work[local[part.col[mine]], part.row[mine]] = part.data[mine]
            top_work[top_rows[part.col[~mine]], k0 + part.row[~mine]] = part.data[~mine]
            part_acc = acc[k0:k1]
            for s, o in zip(own.tolist(), offsets[:-1].tolist()):
                update = self._solve_through(s, work, o, part_acc)
                if update is None:
                    continue
                R = self.rows[s]
                lo = local[R]
                below = lo >= 0
                if below.all():
                    work[lo] -= update
                else:
                    work[lo[below]] -= update[below]
                    top_work[top_rows[R[~below]], k0:k1] -= update[~below]
        for s, o in zip(top.tolist(), start[:-1].tolist()):
            update = self._solve_through(s, top_work, o, acc)
            if update is not None:
                top_work[top_rows[self.rows[s]]] -= update
        return acc
