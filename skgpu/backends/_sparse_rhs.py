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
from scipy.linalg.blas import dgemm, dsyrk, dtrsm

from ._selinv import lower_factor, supernodes

#: Test points solved together below the chunk's shared supernodes ...
SUB_BATCH = 128
#: ... and together through them.
CHUNK = 4096


def _mirror_upper(G, block=512):
    """Copy the upper triangle of the square G onto its lower one, in place, by blocks
    (no temporary of G's size)."""
    k = G.shape[0]
    for c in range(0, k, block):
        d = min(k, c + block)
        G[d:, c:d] = G[c:d, d:].T
        D = G[c:d, c:d]
        D[...] = np.triu(D) + np.triu(D, 1).T


class SupernodalForward:
    """A lower-triangular CSC factor L (sorted row indices) as dense supernodal blocks,
    for :meth:`quadratic_forms` and :meth:`gram`. Any lower-triangular pattern is
    accepted in which column ``a + j`` of a supernode starting at column a
    (:func:`~skgpu.backends._selinv.supernodes`) holds the first column's rows from the
    j-th on, or a leading run of them (a Cholesky factor's pattern does); ValueError
    otherwise."""

    def __init__(self, L):
        L = lower_factor(L)
        n = L.shape[0]
        self.n = n
        indptr, indices, data = L.indptr, L.indices, L.data
        bounds = supernodes(L)
        self.bounds = bounds
        n_super = bounds.size - 1
        owner = np.repeat(np.arange(n_super), np.diff(bounds))
        self.owner = owner
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

    def _solve_through(self, s, work, offset):
        """Solve supernode s's rows of ``work`` (rows × points): returns ``yᵀ``
        (points × w, F-ordered) and the update ``L_RJ y`` for the rows below (None
        where there are none)."""
        a, b = int(self.bounds[s]), int(self.bounds[s + 1])
        x = work[offset:offset + b - a]
        # y = L_JJ⁻¹ x, as yᵀ = xᵀ L_JJ⁻ᵀ on the F-ordered transpose (no copy)
        yt = dtrsm(1.0, self.diagonal[s], x.T, side=1, lower=1, trans_a=1)
        if not self.rows[s].size:
            return yt, None
        # (L_RJ y)ᵀ = yᵀ L_RJᵀ, by the same BLAS library as the solve: NumPy and SciPy
        # link two OpenBLAS builds, whose thread pools fight for the cores when calls
        # alternate between them (measured 13 s against 1.6 s)
        return yt, dgemm(1.0, yt, self.below_t[s], trans_b=0).T

    def _prepare(self, B):
        """B as CSR and its non-empty rows in the order they are solved in (by their
        first column in the factor's order)."""
        B = sp.csr_matrix(B, dtype=np.float64)
        if B.shape[1] != self.n:
            raise ValueError(f"B has {B.shape[1]} columns; the factor has {self.n} rows")
        m = B.shape[0]
        counts = np.diff(B.indptr)
        first = np.full(m, self.n, dtype=np.int64)
        has = counts > 0
        first[has] = np.minimum.reduceat(B.indices, B.indptr[:-1][has]) if B.nnz else 0
        order = np.argsort(first[has], kind="stable")
        return B, np.flatnonzero(has)[order]  # rows with no entry give zeros

    def quadratic_forms(self, B):
        """``‖L⁻¹ bᵢ‖²`` for each row bᵢ of the sparse (m, n) matrix B."""
        B, points = self._prepare(B)
        out = np.zeros(B.shape[0])
        for c0 in range(0, points.size, CHUNK):
            chunk = points[c0:c0 + CHUNK]
            acc = np.zeros(chunk.size)

            def take(s, k0, k1, yt, shared, acc=acc):
                acc[k0:k1] += np.einsum("ij,ij->i", yt, yt)

            self._chunk(B[chunk], take)
            out[chunk] = acc
        return out

    def gram(self, B):
        """``(L⁻¹ Bᵀ)ᵀ (L⁻¹ Bᵀ)``, dense (m, m), for the sparse (m, n) matrix B: all m
        rows are solved as one chunk (the product couples every pair)."""
        B, points = self._prepare(B)
        m, k = B.shape[0], points.size
        G = [np.zeros((k, k), order="F")]
        pieces = {}

        def take(s, k0, k1, yt, shared):
            if shared:  # the whole chunk: G += Y Yᵀ, one triangle (the upper)
                G[0] = dsyrk(1.0, yt, beta=1.0, c=G[0], overwrite_c=1)
            else:
                pieces.setdefault(s, []).append((k0, k1, yt))

        self._chunk(B[points], take)
        G = G[0]
        for parts in pieces.values():
            # consecutive sub-batches are one run of columns: products into slices
            runs = []
            for k0, k1, yt in parts:
                if runs and runs[-1][1] == k0:
                    runs[-1][1] = k1
                    runs[-1][2].append(yt)
                else:
                    runs.append([k0, k1, [yt]])
            runs = [(a0, a1, ys[0] if len(ys) == 1 else np.vstack(ys))
                    for a0, a1, ys in runs]
            for i, (a0, a1, Ya) in enumerate(runs):
                # the upper triangle's blocks (the diagonal one's upper half, by syrk)
                G[a0:a1, a0:a1] = dsyrk(1.0, Ya, beta=1.0, c=G[a0:a1, a0:a1])
                for b0, b1, Yb in runs[i + 1:]:
                    G[a0:a1, b0:b1] += dgemm(1.0, Ya, Yb, trans_b=1)
        _mirror_upper(G)  # the upper triangle is complete: mirror it
        # undo the solving order, out[points[i], points[j]] = G[i, j], by row blocks of
        # G's C-ordered view (G is symmetric): whole rows, then columns within a block
        # (two takes over the whole matrix took 7.6 s at m = 10,000, strided)
        rows = G.T
        if k == m:
            back = np.empty(m, dtype=np.int64)
            back[points] = np.arange(m)
            out = np.empty((m, m))
            for r0 in range(0, m, 512):
                out[r0:r0 + 512] = np.take(rows[back[r0:r0 + 512]], back, axis=1)
            return out
        out = np.zeros((m, m))  # rows without an entry (no training point in reach)
        for i0 in range(0, k, 512):
            out[points[i0:i0 + 512, None], points[None, :]] = rows[i0:i0 + 512]
        return out

    def _chunk(self, B, take):
        """Solve the rows of B (one chunk, in solving order), calling ``take(s, k0, k1,
        yᵀ, shared)`` with each supernode's solution for the chunk's rows k0:k1
        (``shared``: a supernode every sub-batch reaches, solved for the whole chunk)."""
        m = B.shape[0]
        if not m:  # no row reaches the factor: nothing to solve
            return
        bounds, owner = self.bounds, self.owner
        batches = [(k, min(m, k + SUB_BATCH)) for k in range(0, m, SUB_BATCH)]
        reaches = [self._reach(owner[B.indices[B.indptr[k0]:B.indptr[k1]]])
                   for k0, k1 in batches]
        count = np.zeros(bounds.size - 1, dtype=np.int64)
        for r in reaches:
            count[r] += 1
        shared = count == len(batches)
        top = np.flatnonzero(shared)
        top_rows = np.full(self.n, -1, dtype=np.int64)  # the shared supernodes' rows
        widths = bounds[top + 1] - bounds[top]
        start = np.r_[0, np.cumsum(widths)]
        top_rows[np.repeat(bounds[top] - start[:-1], widths) + np.arange(start[-1])] = (
            np.arange(start[-1]))
        top_work = np.zeros((int(start[-1]), m))
        for (k0, k1), reach in zip(batches, reaches):
            own = reach[~shared[reach]]
            widths = bounds[own + 1] - bounds[own]
            offsets = np.r_[0, np.cumsum(widths)]
            local = np.full(self.n, -1, dtype=np.int64)
            total = int(offsets[-1])
            local[np.repeat(bounds[own] - offsets[:-1], widths) + np.arange(total)] = (
                np.arange(total))
            work = np.zeros((total, k1 - k0))
            part = B[k0:k1].tocoo()
            mine = local[part.col] >= 0
            work[local[part.col[mine]], part.row[mine]] = part.data[mine]
            top_work[top_rows[part.col[~mine]], k0 + part.row[~mine]] = part.data[~mine]
            for s, o in zip(own.tolist(), offsets[:-1].tolist()):
                yt, update = self._solve_through(s, work, o)
                take(s, k0, k1, yt, False)
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
            yt, update = self._solve_through(s, top_work, o)
            take(s, 0, m, yt, True)
            if update is not None:
                top_work[top_rows[self.rows[s]]] -= update
