"""skgpu's own supernodal sparse Cholesky factor, for SPD matrices whose pattern is "the
pairs of points within a radius" (a sparse GP's kernel matrix): the symbolic structure on
the host, once per pattern; the numeric work per supernode on the backend's dense kernels
(potrf, trsm, GEMM), so one implementation serves the CPU and the GPU.

Symbolic part (:class:`SupernodalSymbolic`, NumPy):

- **Ordering**: geometric nested dissection of the points. A set is cut at the median of
  its widest coordinate; the points of the lower half within the radius of the cut are
  its separator (an edge crossing the cut has both ends within the radius of it, so
  removing them disconnects the halves); the halves are dissected in turn, down to
  ``LEAF_SIZE`` points. Children come first and their separator last (a postorder), so
  the top separators are the last, largest supernodes.
- **Supernodes**: each separator and each leaf is one supernode, its columns consecutive
  in the new order and its block stored dense (a relaxed supernode: the zeros inside are
  kept).
- **Row structure and tree**: a supernode's rows below its diagonal block are its
  columns' neighbours past it together with its children's rows past it; its parent is
  the supernode of its first such row (the supernodal elimination tree, Liu 1990). Every
  row of a child then lies in its parent's columns or rows, which the multifrontal
  update needs.

Numeric part (:class:`SupernodalFactor`, on ``ops``): the multifrontal method (Duff and
Reid 1983; Liu 1992). In postorder each supernode's panel ``[A_JJ; A_RJ]`` is assembled
from A (one scatter for all panels) and from its children's update matrices
(extend-add), factored in place into ``[L_JJ; L_RJ]`` (``ops.panel_cholesky``), and
leaves the update ``U = (assembled) − L_RJ L_RJᵀ`` for its parent. All panels live in one
buffer. ``logdet`` is twice the sum of the logs of the diagonal; ``solve`` runs forward
and back through the panels; :meth:`SupernodalFactor.quadratic_forms` solves
``L⁻¹ P b`` for sparse b only through the supernodes b reaches (the ancestors of the
supernodes holding its non-zeros), test points taken in chunks that are close in the
order, each chunk's reach solved as one dense block (Gilbert and Peierls 1988).

Why our own: neither cuDSS nor a kept-up Python package hands out L in supernodal form
(cuDSS keeps it; CHOLMOD through cvxopt exports it as a CSC matrix on the host, after a
host factorisation) and the predictive variance of a sparse GP needs L's forward solves
with sparse right-hand sides.
"""

from __future__ import annotations

import logging

import numpy as np

logger = logging.getLogger("skgpu")

#: Points below which a set is not dissected further (one dense supernode).
LEAF_SIZE = 256
#: A set whose separator would hold more than this fraction of it is one supernode: the
#: points are too close together for a sparse factor to pay.
MAX_SEPARATOR_FRACTION = 0.5
#: Bytes of a chunk's dense forward-solve block in :meth:`SupernodalFactor.quadratic_forms`.
CHUNK_BYTES = 1 << 30


def nested_dissection(points, radius, leaf_size=LEAF_SIZE):
    """``(order, bounds)``: the new order of the points (``order[new] = old``) and the
    supernodes' column ranges ``bounds[s]:bounds[s + 1]`` in it, children before their
    separator (see the module docstring)."""
    points = np.asarray(points, dtype=np.float64)
    n = points.shape[0]
    pieces = []
    stack = [(np.arange(n), False)]
    # an explicit stack (no recursion limit): ("dissect", idx) or ("emit", separator),
    # pushed so that they pop as left subtree, right subtree, separator
    while stack:
        idx, emit = stack.pop()
        if emit:
            pieces.append(idx)
            continue
        if idx.size <= leaf_size:
            if idx.size:
                pieces.append(idx)
            continue
        P = points[idx]
        span = P.max(axis=0) - P.min(axis=0)
        dim = int(np.argmax(span))
        x = P[:, dim]
        half = idx.size // 2
        part = np.argpartition(x, half)
        lower, upper = part[:half], part[half:]
        cut = x[part[half]]
        in_separator = x[lower] >= cut - radius
        separator = lower[in_separator]
        if span[dim] == 0.0 or separator.size > MAX_SEPARATOR_FRACTION * idx.size:
            pieces.append(idx)  # no useful cut: one dense supernode
            continue
        stack.append((idx[separator], True))
        stack.append((idx[upper], False))
        stack.append((idx[lower[~in_separator]], False))
    # the stack emits a left subtree completely before its right one: pieces is a
    # postorder already
    order = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int64)
    bounds = np.concatenate([[0], np.cumsum([p.size for p in pieces])]).astype(np.int64)
    return order.astype(np.int64), bounds


class SupernodalSymbolic:
    """The symbolic factorisation of a symmetric pattern (CSR ``indptr``/``indices``, both
    triangles and the diagonal, host arrays) under the ordering ``order`` with supernodes
    ``bounds`` (:func:`nested_dissection`): rows, tree, panel layout and the maps that
    assemble A's values (in the CSR's order) and the children's updates."""

    def __init__(self, indptr, indices, order, bounds):
        indptr = np.asarray(indptr, dtype=np.int64)
        indices = np.asarray(indices, dtype=np.int64)
        n = order.size
        self.n = n
        self.order = order
        self.position = np.empty(n, dtype=np.int64)
        self.position[order] = np.arange(n)
        self.bounds = bounds
        ns = bounds.size - 1
        self.n_supernodes = ns
        owner = np.repeat(np.arange(ns), np.diff(bounds))
        self.owner = owner
        r = self.position[np.repeat(np.arange(n), np.diff(indptr))]
        c = self.position[indices]
        lower = np.flatnonzero(r >= c)
        r, c = r[lower], c[lower]
        s_of = owner[c]
        end = bounds[1:][s_of]
        below = r >= end
        key = np.unique(s_of[below] * n + r[below])
        adj_owner, adj_rows = np.divmod(key, n)
        adj_start = np.searchsorted(adj_owner, np.arange(ns + 1))
        rows, parent = [], np.full(ns, -1, dtype=np.int64)
        pending = [[] for _ in range(ns)]  # each supernode's children's rows
        for s in range(ns):
            own = adj_rows[adj_start[s]:adj_start[s + 1]]
            kids = [R[R >= bounds[s + 1]] for R in pending[s]]
            R = np.unique(np.concatenate([own] + kids)) if kids else own
            rows.append(R)
            pending[s] = []
            if R.size:
                parent[s] = owner[R[0]]
                pending[parent[s]].append(R)
        self.rows = rows
        self.parent = parent
        widths = np.diff(bounds)
        heights = widths + np.array([R.size for R in rows], dtype=np.int64)
        self.widths, self.heights = widths, heights
        self.offsets = np.concatenate([[0], np.cumsum(widths * heights)]).astype(np.int64)
        self.children = [[] for _ in range(ns)]
        for s in range(ns):
            if parent[s] >= 0:
                self.children[parent[s]].append(s)
        # A's lower entries into the panels: local row (within the block, or the place in
        # R below it), local column, panel offset; flat Fortran positions
        r_cat = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
        r_owner = np.repeat(np.arange(ns), [R.size for R in rows])
        r_start = np.concatenate([[0], np.cumsum([R.size for R in rows])])
        a = bounds[:-1][s_of]
        local_row = r - a
        if below.any():
            place = np.searchsorted(r_owner * n + r_cat, s_of[below] * n + r[below])
            local_row[below] = widths[s_of[below]] + place - r_start[s_of[below]]
        self.value_index = lower  # positions in the CSR's values, one per entry
        self.panel_position = self.offsets[s_of] + local_row + (c - a) * heights[s_of]
        # each child's rows as places in its parent's panel rows [J_p; R_p]: sorted, so
        # those in the parent's columns come first (``split`` of them)
        self.relative, self.split = [None] * ns, np.zeros(ns, dtype=np.int64)
        for s in range(ns):
            p = parent[s]
            if p < 0:
                continue
            R = rows[s]
            inside = R < bounds[p + 1]
            rel = np.empty(R.size, dtype=np.int64)
            rel[inside] = R[inside] - bounds[p]
            rel[~inside] = widths[p] + np.searchsorted(rows[p], R[~inside])
            self.relative[s] = rel
            self.split[s] = int(np.count_nonzero(inside))
        self.nnz = int(self.offsets[-1])

    @classmethod
    def from_points(cls, points, indptr, indices, radius, leaf_size=LEAF_SIZE):
        """The symbolic factorisation of the pattern of the pairs of ``points`` within
        ``radius`` (the CSR ``indptr``/``indices``; no pair farther apart)."""
        order, bounds = nested_dissection(points, radius, leaf_size)
        return cls(indptr, indices, order, bounds)

    def reach(self, columns):
        """The supernodes (ascending) on the paths to the root from those holding the
        new ``columns``."""
        mask = np.zeros(self.n_supernodes, dtype=bool)
        frontier = np.unique(self.owner[columns])
        while frontier.size:
            frontier = frontier[~mask[frontier]]
            mask[frontier] = True
            frontier = np.unique(self.parent[frontier])
            frontier = frontier[frontier >= 0]
        return np.flatnonzero(mask)


class SupernodalFactor:
    """``P A Pᵀ = L Lᵀ`` for the SPD A (a CSR matrix on ``ops``'s device, on the pattern
    of ``symbolic``), numeric work on ``ops`` (see the module docstring). Satisfies the
    backends' ``SparseFactor`` protocol, and holds L (``exposes_factor``)."""

    exposes_factor = True

    def __init__(self, ops, symbolic, A, what="matrix"):
        self.ops = ops
        self.symbolic = symbolic
        self.what = what
        xp = ops.xp
        self._value_index = xp.asarray(symbolic.value_index)
        self._panel_position = xp.asarray(symbolic.panel_position)
        self._relative = [None if r is None else xp.asarray(r) for r in symbolic.relative]
        self._rows = [xp.asarray(R) for R in symbolic.rows]
        self._order = xp.asarray(symbolic.order)
        self.refactor(A)

    @property
    def shape(self):
        return (self.symbolic.n, self.symbolic.n)

    def _panel(self, s):
        sym = self.symbolic
        off, m, w = int(sym.offsets[s]), int(sym.heights[s]), int(sym.widths[s])
        return self.buffer[off:off + m * w].reshape((m, w), order="F"), w

    def refactor(self, A):
        """Factor ``A`` (CSR on the pattern, values in the pattern's order)."""
        ops, sym = self.ops, self.symbolic
        xp = ops.xp
        values = xp.asarray(A.data if ops.is_sparse(A) else A, dtype=np.float64)
        buffer = xp.zeros(sym.nnz, dtype=np.float64)
        buffer[self._panel_position] = values[self._value_index]
        self.buffer = buffer
        status = xp.zeros(sym.n_supernodes, dtype=np.int32)
        updates = {}  # the children's update matrices, until their parent takes them
        for s in range(sym.n_supernodes):
            P, w = self._panel(s)
            m = P.shape[0]
            U = xp.zeros((m - w, m - w), order="F") if m > w else None
            for c in sym.children[s]:
                Uc = updates.pop(c)
                rel, k = self._relative[c], int(sym.split[c])
                if k:
                    P[rel[:, None], rel[None, :k]] += Uc[:, :k]
                if k < rel.size:
                    out = rel[k:] - w
                    U[out[:, None], out[None, :]] += Uc[k:, k:]
            ops.panel_cholesky(P, w, status, s)
            if U is not None:
                below = P[w:]
                U -= below @ below.T
                updates[s] = U
        bad = np.flatnonzero(ops.to_host(status))
        if bad.size:
            from ._common import not_positive_definite

            s = int(bad[0])
            column = int(sym.bounds[s]) + int(ops.to_host(status)[s])
            raise not_positive_definite(
                self.what, f"leading minor of order {column} (in the fill-reducing "
                "order) is not positive")

    def logdet(self):
        xp = self.ops.xp
        sym = self.symbolic
        total = 0.0
        diag = []
        for s in range(sym.n_supernodes):
            P, w = self._panel(s)
            diag.append(xp.diagonal(P[:w, :w]))
        if diag:
            total = 2.0 * float(xp.log(xp.concatenate(diag)).sum())
        return total

    def solve(self, B):
        """``A⁻¹ B`` for a dense B (n,) or (n, k) on the factor's device."""
        ops, sym = self.ops, self.symbolic
        xp = ops.xp
        B = xp.asarray(B, dtype=np.float64)
        one_d = B.ndim == 1
        X = (B.reshape(-1, 1) if one_d else B)[self._order]
        for s in range(sym.n_supernodes):
            P, w = self._panel(s)
            a = int(sym.bounds[s])
            y = ops.solve_triangular(P[:w, :w], X[a:a + w])
            X[a:a + w] = y
            if P.shape[0] > w:
                X[self._rows[s]] -= P[w:] @ y
        for s in range(sym.n_supernodes - 1, -1, -1):
            P, w = self._panel(s)
            a = int(sym.bounds[s])
            rhs = X[a:a + w]
            if P.shape[0] > w:
                rhs = rhs - P[w:].T @ X[self._rows[s]]
            X[a:a + w] = ops.solve_triangular(P[:w, :w], rhs, transpose=True)
        out = xp.empty_like(X)
        out[self._order] = X
        return out.ravel() if one_d else out

    # --- sparse right-hand sides -------------------------------------------------------
    def _chunks(self, B):
        """The rows of the sparse (m, n) B (host CSR) in chunks close in the new order:
        ``(points, reach, height, columns, local points, values)`` per chunk, the
        entries as host arrays (columns in the new order), ``height`` the reach's
        columns."""
        import scipy.sparse as sp

        sym = self.symbolic
        B = sp.csr_matrix(B)
        m = B.shape[0]
        cols = sym.position[B.indices]
        counts = np.diff(B.indptr)
        first = np.full(m, sym.n, dtype=np.int64)
        has = counts > 0
        if B.nnz:
            first[has] = np.minimum.reduceat(cols, B.indptr[:-1][has])
        points = np.flatnonzero(has)[np.argsort(first[has], kind="stable")]
        # the entries in the points' order: chunk c's are a slice
        take = counts[points]
        ends = np.cumsum(take)
        entries = np.repeat(B.indptr[points] - (ends - take), take) + np.arange(int(ends[-1])
                                                                               if take.size else 0)
        ends = np.concatenate([[0], ends])
        start = 0
        while start < points.size:
            # the largest chunk (up to 4,096 points) whose dense block stays under
            # CHUNK_BYTES (points close in the order share most of their reach)
            size = min(points.size - start, 4096)
            while True:
                chunk = points[start:start + size]
                mine = entries[ends[start]:ends[start + size]]
                reach = sym.reach(cols[mine])
                height = int(np.sum(sym.widths[reach]))
                if height * size * 8 <= CHUNK_BYTES or size == 1:
                    break
                size = max(1, size // 2)
            local = np.repeat(np.arange(size), take[start:start + size])
            yield chunk, reach, height, cols[mine], local, B.data[mine]
            start += size

    def _forward_chunks(self, B, keep):
        """Forward solves ``L⁻¹ P bᵢ`` through each chunk's reach; yields per chunk
        ``(points, reach, Y)`` with Y (height × points) on the device, or the chunk's
        quadratic forms only (``keep`` False: ``(points, None, forms)``)."""
        ops, sym = self.ops, self.symbolic
        xp = ops.xp
        for chunk, reach, height, cols, pts, vals in self._chunks(B):
            widths = sym.widths[reach]
            starts = np.concatenate([[0], np.cumsum(widths)])
            local_of = np.full(sym.n, -1, dtype=np.int64)
            local_of[np.repeat(sym.bounds[reach] - starts[:-1], widths)
                     + np.arange(height)] = np.arange(height)
            local_dev = xp.asarray(local_of)
            work = xp.zeros((height, chunk.size))
            work[xp.asarray(local_of[cols]), xp.asarray(pts)] = xp.asarray(vals)
            forms = xp.zeros(chunk.size)
            for s, st in zip(reach.tolist(), starts[:-1].tolist()):
                P, w = self._panel(s)
                y = ops.solve_triangular(P[:w, :w], work[st:st + w])
                if keep:
                    work[st:st + w] = y
                else:
                    forms += (y * y).sum(axis=0)
                if P.shape[0] > w:
                    work[local_dev[self._rows[s]]] -= P[w:] @ y
            yield chunk, reach, (work if keep else forms)

    def quadratic_forms(self, B, block_bytes=1 << 30):
        """``bᵢᵀ A⁻¹ bᵢ = ‖L⁻¹ P bᵢ‖²`` (host array) for each row of the sparse (m, n)
        B, by forward solves through the supernodes each chunk of rows reaches. Rows
        without an entry give 0."""
        out = np.zeros(B.shape[0])
        for chunk, _, forms in self._forward_chunks(self._host_csr(B), keep=False):
            out[chunk] = self.ops.to_host(forms)
        return out

    def quadratic_form_matrix(self, B):
        """``B A⁻¹ Bᵀ`` (dense (m, m), on the device) for the sparse (m, n) B: the Gram of
        the forward solves, each chunk's kept on its reach and the pairs of chunks
        multiplied where their reaches meet."""
        xp = self.ops.xp
        sym = self.symbolic
        m = B.shape[0]
        out = xp.zeros((m, m))
        solved = []
        for chunk, reach, Y in self._forward_chunks(self._host_csr(B), keep=True):
            widths = sym.widths[reach]
            starts = np.concatenate([[0], np.cumsum(widths)])
            columns = (np.repeat(sym.bounds[reach] - starts[:-1], widths)
                       + np.arange(int(starts[-1])))
            solved.append((chunk, columns, Y))
        for i, (ci, cols_i, Yi) in enumerate(solved):
            for cj, cols_j, Yj in solved[i:]:
                common, a, b = np.intersect1d(cols_i, cols_j, assume_unique=True,
                                              return_indices=True)
                if not common.size:
                    continue
                G = Yi[xp.asarray(a)].T @ Yj[xp.asarray(b)]
                ri, rj = xp.asarray(ci), xp.asarray(cj)
                out[ri[:, None], rj[None, :]] = G
                out[rj[:, None], ri[None, :]] = G.T
        return out

    def _host_csr(self, B):
        import scipy.sparse as sp

        if sp.issparse(B):
            return B.tocsr()
        # a device CSR: its structure and values to the host (the bookkeeping is there)
        return sp.csr_matrix((self.ops.to_host(B.data), self.ops.to_host(B.indices),
                              self.ops.to_host(B.indptr)), shape=B.shape)

    def free(self):
        self.buffer = None
