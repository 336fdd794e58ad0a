"""skgpu's own supernodal sparse Cholesky factor, for SPD matrices whose pattern is "the
pairs of points within a radius" (a sparse GP's kernel matrix): the symbolic structure on
the host, once per pattern; the numeric work per supernode on the backend's dense kernels
(potrf, trsm, GEMM), so one implementation serves the CPU and the GPU.

Symbolic part (:class:`SupernodalSymbolic`, NumPy):

- **Ordering**: geometric nested dissection of the points. A set is cut at the median of
  its widest coordinate, and its separator is the smallest set of points touching every
  pair within the radius that crosses the cut (a minimum vertex cover of the crossing
  pairs, from a maximum bipartite matching; below ``COVER_FROM`` points, where that
  search costs more than it saves, the points of the lower half within the radius of
  the cut, which touch every crossing pair too); removing it disconnects the halves,
  which are dissected in turn, down to ``LEAF_SIZE`` points. Children come first and
  their separator last (a postorder), so the top separators are the last, largest
  supernodes.
- **Supernodes**: each separator and each leaf is one supernode, its columns consecutive
  in the new order and its block stored dense (a relaxed supernode: the zeros inside are
  kept).
- **Row structure and tree**: a supernode's rows below its diagonal block are its
  columns' neighbours past it together with its children's rows past it; its parent is
  the supernode of its first such row (the supernodal elimination tree, Liu 1990). Every
  row of a child then lies in its parent's columns or rows, and every pair of a
  supernode's rows is an entry of L's structure (where its update goes).

Numeric part (:class:`SupernodalFactor`, on ``ops``): right-looking by levels of the
tree (a leaf at level 0, a parent above its highest child). A's values are scattered into
the panels ``[A_JJ; A_RJ]`` (one buffer for all); then, level by level, each supernode's
panel is factored in place into ``[L_JJ; L_RJ]`` (``ops.panel_cholesky``: potrf and
trsm), and the level's updates ``L_RJ L_RJᵀ`` (``ops.panel_update``: syrk) are
subtracted from its ancestors' panels in one scatter per group of supernodes
(``ops.scatter_add``), their targets computed on the device by array arithmetic from
the rows (``_update_targets``). A level's supernodes are independent and every update
reaching a panel comes from a lower level, so three dense kernels a supernode and one
scatter a group replace the per-child assembly of the multifrontal method. Where an
update lands is read from relative indices made once in the symbolic part (a
supernode's rows fall in runs by the ancestor holding them, and each run's rows have
fixed places in that ancestor's panel: :meth:`SupernodalSymbolic._relative_indices`),
two gathers an entry instead of a search. One supernode at a time (the CPU, and a
supernode whose product alone is past ``UPDATE_ENTRIES``) the update goes a run at a
time as a dense block at those places (``_extend_add``), with no target array at all. ``logdet``
is twice the sum of the logs of the diagonal; ``solve`` runs forward and back through
the panels; :meth:`SupernodalFactor.quadratic_forms` solves ``L⁻¹ P b`` for sparse b
only through the supernodes b reaches (the ancestors of the supernodes holding its
non-zeros), test points taken in chunks that are close in the order, each chunk's reach
solved as one dense block (Gilbert and Peierls 1988): a trsm and a GEMM on the blocks
where they lie (``ops.panel_forward``) and a scatter into the rows below, a supernode.
:meth:`SupernodalFactor.selected_inverse` gives ``A⁻¹`` on L's structure by Takahashi's
recurrences, from the root down by the same levels, gathering from the positions the
factorisation scattered to; :meth:`SupernodalFactor.inverse_on` reads it on A's
pattern (the likelihood's exact gradient).

Level batches: most supernodes are small (the leaves and the lower separators), and one
by one their kernel launches, not their arithmetic, take the time. So a level's
supernodes at most ``BATCH_WIDTH`` wide go at once, by width class
(:meth:`SupernodalSymbolic.batch_classes`), in stacks zero-padded to the class's widest
block and longest rows (ones on the padded diagonal where a block is factored or
inverted): in the factorisation, a gather of their panels, a batched Cholesky, a batched
triangular solve, a batched update product scattered into the ancestors and a scatter
back; in the dense solves, batched triangular solves and products on the gathered
panels; for the forward solves with sparse right-hand sides and the selected inverse,
the stacks ``[L_JJ⁻¹; L_RJ L_JJ⁻¹]`` made once per factorisation
(:meth:`SupernodalFactor._level_batches`), used as batched products. Stacks go in
pieces of at most ``UPDATE_ENTRIES`` entries; a piece whose Cholesky fails goes one by
one (where the failing leading minor is found). Only where the backend says stacks pay
(``ops.batched_blocks``: the GPU); the CPU goes one supernode at a time, measured
faster there.

Kept indices: where a stack's entries lie in the panels and where each update goes
depend on the structure alone, so the first factorisation keeps them (32-bit where
they fit, in up to ``INDEX_CACHE_FRACTION`` of the free memory, only where there is
plenty) for every refactorisation, solve and selected inverse after it (at n =
1,000,000 on an H100: a likelihood with its exact gradient 1.30 s without, 0.58 s
with, 11.8 GB kept). The selected inverse gathers the lower triangles the updates
went to, with the same indices, and makes them symmetric.

Why our own: neither cuDSS nor a kept-up Python package hands out L in supernodal form
(cuDSS keeps it; CHOLMOD through cvxopt exports it as a CSC matrix on the host, after a
host factorisation) and the predictive variance of a sparse GP needs L's forward solves
with sparse right-hand sides.
"""

from __future__ import annotations

import logging

import numpy as np
import scipy.sparse as sp

logger = logging.getLogger("skgpu")

#: Points below which a set is not dissected further (one dense supernode).
LEAF_SIZE = 128
#: A set whose separator would hold more than this fraction of it is one supernode: the
#: points are too close together for a sparse factor to pay.
MAX_SEPARATOR_FRACTION = 0.5
#: Sets of at least this many points are cut by a minimum vertex cover of the pairs
#: crossing the median (:func:`_cover_separator`); smaller ones by the lower half's
#: points within the radius of it. At n = 1,000,000 (2-D uniform, ~30 neighbours, 128
#: points a leaf) the covers take L from 434M stored entries and 427 Gflop to 326M and
#: 214 Gflop, for 0.75-0.9 s of ordering instead of 0.33 s (2 host cores); covers down
#: to the leaves save 6 % more entries and 3 % more flops for 1.3-1.7 s more, and the
#: default fit took 15.0 s with them against 13.7 s (H100,
#: ``benchmarks/results/sparse_gp_ordering_h100.json``).
COVER_FROM = 1024
#: Bytes of a chunk's dense forward-solve block in :meth:`SupernodalFactor.quadratic_forms`.
CHUNK_BYTES = 1 << 30
#: Test points at most in a chunk of the forward solves, by ``ops.forward_order``.
CHUNK_POINTS = {"F": 4096, "C": 128}
#: :meth:`SupernodalFactor.quadratic_form_matrix` takes its m points in chunks of at
#: most ``m / GRAM_CHUNKS`` (and ``CHUNK_POINTS``), at least ``GRAM_CHUNK_MIN``.
GRAM_CHUNKS = 16
GRAM_CHUNK_MIN = 128
#: Supernodes at most this wide go through the forward solves a level at a time: per
#: chunk and level, one batched product with their ``[L_JJ⁻¹; L_RJ L_JJ⁻¹]`` blocks
#: (made once per factorisation, zero-padded by width class) instead of a
#: triangular solve, a product and a scatter each: most supernodes are small, and one
#: by one their launches, not their arithmetic, took the time (11,000 of the 11,800
#: steps of 100,000 variances at n = 1,000,000 on an H100).
BATCH_WIDTH = 512
#: The batched blocks are made only where they take at most this fraction of the
#: device's free memory (else the forward solves go supernode by supernode).
BATCH_MEMORY_FRACTION = 0.5
#: Entries of the update products scattered at once in the numeric factorisation (their
#: values and target positions, and the index arithmetic's temporaries, scale with it).
UPDATE_ENTRIES = 1 << 24
#: The index arrays the numeric work computes from the structure alone (where a stack's
#: entries lie in the panels, where an update goes) are kept for the next
#: refactorisation, solve and selected inverse in up to this fraction of the free
#: memory, and only where at least ``INDEX_CACHE_MIN_FREE`` times L's bytes are free
#: (at ten million points on one GPU nothing is: the factor's work keeps the room).
INDEX_CACHE_FRACTION = 0.25
INDEX_CACHE_MIN_FREE = 4
#: Bytes a sparse GP holds per stored entry of its kernel matrix's pattern beside the
#: factor (the pairs' rows and columns, 64-bit; the CSR's indices; the values, and their
#: lower half gathered into the panels), for the memory estimate.
PATTERN_BYTES = 36


def _fits_int32(a):
    """Whether every value of the int64 array ``a`` (NumPy or CuPy) fits in 32 bits. On
    the device by an elementwise flag, not a reduction: CuPy's reductions compiled anew
    for every array size (see ``gpu/kernels.py``), and these arrays have a new size per
    batch."""
    if a.size == 0:
        return True
    if isinstance(a, np.ndarray):
        return int(a.max()) < 2**31 and int(a.min()) >= -(2**31)
    import cupy as cp

    from .gpu.kernels import flag_outside_int32

    flag = cp.zeros(1, dtype=cp.int32)
    flag_outside_int32(a, flag)
    return not bool(flag.get()[0])


def _ranges(first, lengths):
    """The ranges ``first[i]:first[i] + lengths[i]`` end to end (int64)."""
    ends = np.cumsum(lengths)
    total = int(ends[-1]) if ends.size else 0
    return np.repeat(np.asarray(first, dtype=np.int64) - ends + lengths, lengths) + np.arange(
        total, dtype=np.int64)


def _cover_separator(points, idx, lower, upper, x, cut, radius):
    """The smallest set of the points ``idx[lower]`` and ``idx[upper]`` (returned as
    positions in ``idx``) that touches every pair of ``points`` within ``radius`` with
    one end on each side: a minimum vertex cover of the crossing pairs' bipartite graph
    (König: from a maximum matching, the lower points not reached by alternating paths
    from the unmatched lower points, and the upper points reached). Only the points
    within the radius of the cut (``x`` the coordinate cut at ``cut``) can be in a
    crossing pair."""
    from scipy.sparse.csgraph import maximum_bipartite_matching
    from scipy.spatial import cKDTree

    reach = radius * (1.0 + 1e-9)  # pairs at the radius to the last rounding
    near_lower = lower[x[lower] >= cut - reach]
    near_upper = upper[x[upper] <= cut + reach]
    if near_lower.size == 0 or near_upper.size == 0:
        return near_lower[:0]
    pairs = cKDTree(points[idx[near_lower]]).sparse_distance_matrix(
        cKDTree(points[idx[near_upper]]), reach, output_type="ndarray")
    a, b = pairs["i"].astype(np.int64), pairs["j"].astype(np.int64)
    if a.size == 0:
        return near_lower[:0]
    nl, nu = near_lower.size, near_upper.size
    by_lower = np.argsort(a, kind="stable")
    heads = b[by_lower].astype(np.int32)
    starts = np.zeros(nl + 1, dtype=np.int32)
    np.cumsum(np.bincount(a, minlength=nl), out=starts[1:])
    graph = sp.csr_matrix((np.ones(heads.size, dtype=np.int8), heads, starts),
                          shape=(nl, nu))
    match = maximum_bipartite_matching(graph, perm_type="column")  # lower -> upper, -1
    partner = np.full(nu, -1, dtype=np.int64)  # upper -> lower along the matching
    partner[match[match >= 0]] = np.flatnonzero(match >= 0)
    # alternating paths, a level at a time: from lower points along any pair to upper
    # points not reached yet, from those along the matching back to lower points
    lower_seen = match < 0
    upper_seen = np.zeros(nu, dtype=bool)
    frontier = np.flatnonzero(lower_seen)
    while frontier.size:
        counts = starts[frontier + 1] - starts[frontier]
        at = np.repeat(starts[frontier] - np.cumsum(counts) + counts, counts)
        step = heads[at + np.arange(at.size)]
        step = np.unique(step[~upper_seen[step]])
        upper_seen[step] = True
        frontier = partner[step]  # matched: an unmatched upper point ends the path
        frontier = frontier[frontier >= 0]
        frontier = frontier[~lower_seen[frontier]]
        lower_seen[frontier] = True
    return np.concatenate([near_lower[~lower_seen], near_upper[upper_seen]])


def nested_dissection(points, radius, leaf_size=None, cover_from=None):
    """``(order, bounds)``: the new order of the points (``order[new] = old``) and the
    supernodes' column ranges ``bounds[s]:bounds[s + 1]`` in it, children before their
    separator (see the module docstring)."""
    leaf_size = LEAF_SIZE if leaf_size is None else leaf_size
    cover_from = COVER_FROM if cover_from is None else cover_from
    points = np.asarray(points, dtype=np.float64)
    n = points.shape[0]
    # one contiguous array per coordinate: a set's extent is then a gather and two
    # contiguous reductions per coordinate (a row-major (m, d) reduction over axis 0 took
    # two thirds of the dissection at n = 1,000,000)
    coords = [np.ascontiguousarray(points[:, j]) for j in range(points.shape[1])]
    pieces = []
    stack = [(np.arange(n), False)]
    # an explicit stack (no recursion limit): ("dissect", idx) or ("emit", separator),
    # pushed so that they pop as left subtree, right subtree, separator
    while stack:
        idx, emit = stack.pop()
        if emit:
            if idx.size:  # no point within the radius of the cut: the halves are
                pieces.append(idx)  # apart already, and no supernode is empty
            continue
        if idx.size <= leaf_size:
            if idx.size:
                pieces.append(idx)
            continue
        x, widest = None, -1.0
        for coordinate in coords:  # the widest coordinate, the first of equals
            v = coordinate[idx]
            extent = v.max() - v.min()
            if extent > widest:
                x, widest = v, extent
        half = idx.size // 2
        part = np.argpartition(x, half)
        lower, upper = part[:half], part[half:]
        cut = x[part[half]]
        if idx.size >= cover_from:
            separator = _cover_separator(points, idx, lower, upper, x, cut, radius)
            rest = np.ones(idx.size, dtype=bool)
            rest[separator] = False
            lower, upper = lower[rest[lower]], upper[rest[upper]]
        else:  # (the strip: all of it from the lower half)
            in_separator = x[lower] >= cut - radius
            separator, lower = lower[in_separator], lower[~in_separator]
        if widest == 0.0 or separator.size > MAX_SEPARATOR_FRACTION * idx.size:
            pieces.append(idx)  # no useful cut: one dense supernode
            continue
        stack.append((idx[separator], True))
        stack.append((idx[upper], False))
        stack.append((idx[lower], False))
    # the stack emits a left subtree completely before its right one: pieces is a
    # postorder already
    order = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int64)
    bounds = np.concatenate([[0], np.cumsum([p.size for p in pieces])]).astype(np.int64)
    return order.astype(np.int64), bounds


class SupernodalSymbolic:
    """The symbolic factorisation of a symmetric pattern (CSR ``indptr``/``indices``, both
    triangles and the diagonal) under the ordering ``order`` with supernodes ``bounds``
    (:func:`nested_dissection`): rows, tree and its levels, panel layout, the map that
    assembles A's values (in the CSR's order) and the rows' keys the update targets are
    found by.

    The pattern may be on the device (CuPy arrays): the passes over its entries (their
    new rows and columns, the rows below each block, where each value goes in the
    panels) then run there, and only the rows below the blocks (one per supernode and
    row, a fraction of the entries) come to the host for the tree; ``value_index`` and
    ``panel_position``, the entries' maps, stay in the pattern's array module, and so do
    the relative-index tables (``relative``, ``relative_base``, ``column_base``: made
    there from the runs, which are NumPy). Everything else is NumPy."""

    def __init__(self, indptr, indices, order, bounds):
        from ._arrays import cupy_module, is_cupy_array, to_numpy

        xp = cupy_module() if is_cupy_array(indices) else np
        indptr = xp.asarray(indptr)
        indices = xp.asarray(indices)
        if indices.dtype not in (np.int32, np.int64):
            indices = indices.astype(np.int64)
        self.pattern_entries = int(indices.size)
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
        # the entries' new rows and columns, 32-bit where they fit (half the traffic:
        # this pass over all the entries is most of the analysis); what is per column
        # (its supernode, where its block ends) is looked up in arrays of n
        small = np.int32 if n < 2**31 else np.int64
        position = xp.asarray(self.position.astype(small))
        if xp is np:
            r = np.repeat(position, np.diff(indptr))
        else:  # CuPy repeats by a scalar or a host list only: each entry's CSR row
            r = position[xp.searchsorted(indptr[1:], xp.arange(indices.size),
                                         side="right")]
        c = position[indices]
        lower = xp.flatnonzero(r >= c)
        r, c = r[lower], c[lower]
        s_of = xp.asarray(owner.astype(small))[c]
        below = r >= xp.asarray(bounds[1:].astype(small)[owner])[c]
        query = s_of[below].astype(np.int64) * n + r[below]  # (supernode, row) below
        key = xp.sort(query)
        if key.size:
            key = key[xp.concatenate([xp.ones(1, dtype=bool), key[1:] != key[:-1]])]
        adj_owner, adj_rows = np.divmod(to_numpy(key), n)
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
        # the rows of all supernodes end to end, and a sorted key for finding a row's
        # place in its supernode's rows: owner · n + row
        r_cat = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
        r_owner = np.repeat(np.arange(ns), [R.size for R in rows])
        r_start = np.concatenate([[0], np.cumsum([R.size for R in rows])])
        self.row_start = r_start.astype(np.int64)
        self.rows_cat = r_cat
        self.rows_key = r_owner * n + r_cat
        self._relative_indices(r_owner, xp)
        # A's lower entries into the panels, as flat Fortran positions: a column's
        # place in its panel (per column, n of them) plus the entry's row in the panel,
        # its row in the block or, below it, the place of the row in R after the block
        a_col = bounds[:-1][owner]
        column_base = self.offsets[owner] + (np.arange(n) - a_col) * heights[owner]
        self.value_index = lower  # positions in the CSR's values, one per entry
        panel_position = xp.asarray(column_base - a_col)[c]
        panel_position += r
        if key.size:
            place = xp.searchsorted(xp.asarray(self.rows_key), query)
            row_in_panel = widths[r_owner] + np.arange(r_cat.size) - r_start[r_owner]
            panel_position[below] = (xp.asarray(column_base)[c[below]]
                                     + xp.asarray(row_in_panel)[place])
        self.panel_position = panel_position
        # levels: a leaf is at 0, a parent one above its highest child; a level's
        # supernodes are independent, and all their descendants lie below them
        level = np.zeros(ns, dtype=np.int64)
        for s in range(ns):
            if parent[s] >= 0:
                level[parent[s]] = max(level[parent[s]], level[s] + 1)
        self.level = level
        self.nnz = int(self.offsets[-1])

    def _relative_indices(self, r_owner, xp=np):
        """Where a supernode's updates land, as relative indices (the classic supernodal
        extend-add's): its rows (sorted) fall in runs by the ancestor a whose columns
        hold them, and a run's columns take their updates from the run's rows and every
        row after them, all in a's structure. Per run, those rows' places in a's panel
        (``relative``, from ``run_relative[t]``: a row of a's block is its column minus
        a's first, a row below it is w_a plus its place in a's rows); per row position
        p of ``rows_cat``: ``relative_base[p]`` (with the row position p' of the row it
        is paired with, ``relative[relative_base[p] + p']`` is the place of that row in
        the panel of p's run's ancestor) and ``column_base[p]`` (where p's row begins as
        a column of that panel). L's entry (R[i], R[j]), i ≥ j, of a supernode whose
        rows start at position b is then ``relative[relative_base[b + j] + b + i] +
        column_base[b + j]`` in the panel buffer: two gathers and no search. The runs
        are few (1,500 for 90,000 rows at n = 50,000) and their tails short, so the
        table is a small multiple of the rows."""
        rows, bounds, owner = self.rows_cat, self.bounds, self.owner
        start = self.row_start
        anc = owner[rows]
        new_run = np.ones(rows.size, dtype=bool)
        new_run[1:] = (anc[1:] != anc[:-1]) | (r_owner[1:] != r_owner[:-1])
        run_start = np.flatnonzero(new_run)
        run_ancestor = anc[run_start]
        run_end = start[r_owner[run_start] + 1]  # where the supernode's rows end
        tails = run_end - run_start
        run_relative = np.concatenate([[0], np.cumsum(tails)]).astype(np.int64)
        # per supernode, its runs: [run_first[s], run_first[s + 1])
        self.run_first = np.searchsorted(r_owner[run_start], np.arange(self.n_supernodes + 1))
        self.run_start, self.run_ancestor, self.run_relative = (
            run_start, run_ancestor, run_relative)
        # the tables (entries per run tail, per row) in xp: on the device they are made
        # there and stay for the factor (on the host they took 0.06-0.13 s at
        # n = 200,000 on 2 cores; about five times that at 1,000,000)
        total = int(run_relative[-1])
        if xp is np:
            run_of = np.repeat(np.arange(run_start.size), tails)
        else:  # CuPy repeats by a scalar or a host list only
            run_of = xp.searchsorted(xp.asarray(run_relative[1:]),
                                     xp.arange(total, dtype=np.int64), side="right")
        p = (xp.asarray(run_start - run_relative[:-1])[run_of]
             + xp.arange(total, dtype=np.int64))
        a = xp.asarray(run_ancestor)[run_of]
        del run_of
        d_rows = xp.asarray(rows)
        row = d_rows[p]
        del p
        d_bounds, d_start = xp.asarray(bounds), xp.asarray(start)
        place = xp.searchsorted(xp.asarray(self.rows_key), a * self.n + row) - d_start[a]
        self.relative = xp.where(row < d_bounds[a + 1], row - d_bounds[a],
                                 xp.asarray(self.widths)[a] + place)
        del a, row, place
        run_of_row = xp.cumsum(xp.asarray(new_run), dtype=np.int64) - 1
        self.relative_base = xp.asarray(run_relative[:-1] - run_start)[run_of_row]
        del run_of_row
        d_anc = xp.asarray(anc)
        self.column_base = (xp.asarray(self.offsets)[d_anc]
                            + (d_rows - d_bounds[d_anc])
                            * xp.asarray(self.heights)[d_anc])

    def schedule(self, budget=None):
        """The numeric factorisation's order: per level, its supernodes (all factored
        before any of their updates is applied) and their updates in groups of at most
        ``budget`` (default ``UPDATE_ENTRIES``) product entries (a supernode past it
        alone): ``[(level's supernodes, [(group, offsets of each one's r × r product in
        the group)])]``."""
        return [(nodes, self.update_groups(nodes, budget))
                for nodes in (np.flatnonzero(self.level == L) for L in range(
                    int(self.level.max()) + 1 if self.n_supernodes else 0))]

    def update_groups(self, nodes, budget=None):
        """``nodes``' supernodes with rows below their blocks in groups of at most
        ``budget`` entries of their r × r products (a supernode past it alone):
        ``[(group, offsets of each one's product in the group)]``."""
        budget = UPDATE_ENTRIES if budget is None else budget
        r = self.heights - self.widths
        with_rows = nodes[r[nodes] > 0]
        groups, start = [], 0
        sizes = r[with_rows] ** 2
        while start < with_rows.size:
            total = np.cumsum(sizes[start:])
            stop = start + max(1, int(np.searchsorted(total, budget, side="right")))
            group = with_rows[start:stop]
            groups.append((group, np.concatenate([[0], np.cumsum(sizes[start:stop])])))
            start = stop
        return groups

    def batch_classes(self):
        """The supernodes at most ``BATCH_WIDTH`` wide that go a level at a time, per
        level and width class (up to 64, 128, 256, 512 columns, so that the padding
        stays a fraction of the blocks: one class for a whole level tripled the leaves'
        bytes at n = 1,000,000), classes of two or more: ``{level: [(supernodes, W,
        R), ...]}``, W and R the class's widest block and longest rows."""
        cached = getattr(self, "_batch_classes", None)
        if cached is not None and cached[0] == BATCH_WIDTH:
            return cached[1]
        r_all = self.heights - self.widths
        classes = {}
        for L in range(int(self.level.max()) + 1 if self.n_supernodes else 0):
            level = np.flatnonzero(self.level == L)
            width_class = np.ceil(np.log2(np.maximum(self.widths[level], 64))).astype(int)
            small = self.widths[level] <= BATCH_WIDTH
            for c in np.unique(width_class[small]).tolist():
                nodes = level[(width_class == c) & small]
                if nodes.size >= 2:
                    classes.setdefault(L, []).append(
                        (nodes, int(self.widths[nodes].max()), int(r_all[nodes].max())))
        self._batch_classes = (BATCH_WIDTH, classes)
        return classes

    def device_bytes(self, selected_inverse=False):
        """``(total, L's)``: the bytes a :class:`SupernodalFactor` of this structure
        holds on its device at its peak: L's panels (and, with ``selected_inverse``, the
        inverse's, laid out alike), the symbolic arrays it copies there, and the
        temporaries of its updates (about ten arrays of ``UPDATE_ENTRIES``; the
        selected inverse gathers a supernode's r × r block whole, about fourteen)."""
        panels = 8 * self.nnz
        arrays = 8 * (2 * self.value_index.size + 3 * self.rows_cat.size
                      + 2 * self.n + 6 * (self.n_supernodes + 1))
        r = self.heights - self.widths
        largest = int(np.max(r.astype(np.int64) ** 2)) if self.n_supernodes else 0
        work = 10 * 8 * max(1, min(UPDATE_ENTRIES, largest))
        if selected_inverse:
            work = max(work, 14 * 8 * largest)
        total = panels * (2 if selected_inverse else 1) + arrays + work
        return int(total), int(panels)

    def pattern_bytes(self):
        """The bytes a sparse GP holds beside the factor for the pattern this structure
        was made from: ``PATTERN_BYTES`` per stored entry."""
        return PATTERN_BYTES * self.pattern_entries

    def largest_n(self, available, selected_inverse=False):
        """About the largest number of points whose factor, and the pattern beside it
        (:meth:`pattern_bytes`), fit in ``available`` bytes at this structure's
        density: the factor's bytes scaled as ``n log n`` (nested dissection in two
        dimensions; sharper growth in three makes this an upper bound there), the
        pattern's as n."""
        total, _ = self.device_bytes(selected_inverse)
        if self.n < 2 or total <= 0:
            return self.n
        per = total / (self.n * np.log(self.n))
        linear = self.pattern_bytes() / self.n

        def need(m):
            return m * np.log(m) * per + m * linear

        lo, hi = 2.0, float(self.n)
        while need(hi) < available:
            hi *= 2.0
        for _ in range(60):  # bisection on need(n) = available
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if need(mid) < available else (lo, mid)
        return int(lo)

    @classmethod
    def from_points(cls, points, indptr, indices, radius, leaf_size=None,
                    cover_from=None):
        """The symbolic factorisation of the pattern of the pairs of ``points`` within
        ``radius`` (the CSR ``indptr``/``indices``; no pair farther apart), ordered by
        :func:`nested_dissection` (``leaf_size``, ``cover_from``: its)."""
        order, bounds = nested_dissection(points, radius, leaf_size, cover_from)
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


def check_memory(ops, symbolic, what="matrix", selected_inverse=False):
    """Raise ``MemoryError`` (:class:`~skgpu.GPUOutOfMemoryError` on the GPU) before
    any numeric work where the factor would not fit in ``ops``'s free memory, with the
    bytes needed, those free and about the largest n that fits at this density."""
    free = ops.free_bytes()
    if free is None:
        return
    total, panels = symbolic.device_bytes(selected_inverse)
    if total <= free:
        logger.debug("supernodal factor of the %s: about %.2f GB (L %.2f GB) of the %.1f "
                     "GB free on %s", what, total / 1e9, panels / 1e9, free / 1e9, ops.name)
        return
    where = "GPU" if ops.is_gpu else "CPU"
    rest = total - panels * (2 if selected_inverse else 1)
    message = (
        f"skgpu's supernodal factor of the {what} needs about {total / 1e9:.1f} GB at "
        f"n = {symbolic.n:,} (L: {panels / 1e9:.1f} GB in {symbolic.n_supernodes:,} "
        f"supernodes{', twice for the selected inverse' if selected_inverse else ''}; "
        f"its index arrays and work: {rest / 1e9:.1f} GB), "
        f"but the {where} has {free / 1e9:.1f} GB free. At this density of neighbours "
        f"the largest n that fits is about "
        f"{symbolic.largest_n(free + symbolic.pattern_bytes(), selected_inverse):,}.")
    if ops.is_gpu:
        from ..exceptions import GPUOutOfMemoryError

        raise GPUOutOfMemoryError(message)
    raise MemoryError(message)


class SupernodalFactor:
    """``P A Pᵀ = L Lᵀ`` for the SPD A (a CSR matrix on ``ops``'s device, on the pattern
    of ``symbolic``), numeric work on ``ops`` (see the module docstring). Satisfies the
    backends' ``SparseFactor`` protocol, and holds L (``exposes_factor``)."""

    exposes_factor = True

    def __init__(self, ops, symbolic, A, what="matrix"):
        self.ops = ops
        self.symbolic = symbolic
        self.what = what
        check_memory(ops, symbolic, what)
        xp = ops.xp
        self._value_index = ops.asarray(symbolic.value_index)
        self._panel_position = ops.asarray(symbolic.panel_position)
        self._order = xp.asarray(symbolic.order)
        # the symbolic arrays the update targets are computed from, on the device
        self._dev = {name: xp.asarray(getattr(symbolic, name)) for name in (
            "owner", "bounds", "offsets", "heights", "widths", "row_start", "rows_cat",
            "rows_key", "relative", "relative_base", "column_base")}
        self._dev["r"] = self._dev["heights"] - self._dev["widths"]
        self._index_cache, self._index_room = {}, None
        self._kept_positions = None  # inverse_on's (rows, cols, where they are in Z)
        self._schedule = symbolic.schedule()
        diag = (np.repeat(symbolic.offsets[:-1], symbolic.widths)
                + (np.arange(symbolic.n) - np.repeat(symbolic.bounds[:-1], symbolic.widths))
                * np.repeat(symbolic.heights + 1, symbolic.widths))
        self._diagonal = xp.asarray(diag)
        self.refactor(A)

    @property
    def shape(self):
        return (self.symbolic.n, self.symbolic.n)

    def _rows_of(self, s):
        """Supernode s's rows below its block (new order), a slice of the device copy of
        all supernodes' rows end to end."""
        start = self.symbolic.row_start
        return self._dev["rows_cat"][int(start[s]):int(start[s + 1])]

    def _panel(self, s):
        sym = self.symbolic
        off, m, w = int(sym.offsets[s]), int(sym.heights[s]), int(sym.widths[s])
        return self.buffer[off:off + m * w].reshape((m, w), order="F"), w

    def _batch_classes(self):
        """The level batches (:meth:`SupernodalSymbolic.batch_classes`) where the backend
        runs padded stacks faster (``ops.batched_blocks``: the GPU), else none."""
        return self.symbolic.batch_classes() if self.ops.batched_blocks else {}

    def refactor(self, A):
        """Factor ``A`` (CSR on the pattern, values in the pattern's order)."""
        ops, sym = self.ops, self.symbolic
        xp = ops.xp
        values = xp.asarray(A.data if ops.is_sparse(A) else A, dtype=np.float64)
        buffer = getattr(self, "buffer", None)
        if buffer is None:  # the first factorisation (a refactorisation reuses it: one
            buffer = xp.zeros(sym.nnz, dtype=np.float64)  # L's bytes at the peak, not two)
        else:
            buffer.fill(0.0)
        buffer[self._panel_position] = values[self._value_index]
        self.buffer = buffer
        self._batches = None  # made from L's values: gone with them
        status = xp.zeros(sym.n_supernodes, dtype=np.int32)
        classes = self._batch_classes()
        for L, (nodes, groups) in enumerate(self._schedule):
            batched = []
            for members, W, R in classes.get(L, ()):
                step = max(1, UPDATE_ENTRIES // max(R * R, (W + R) * W))
                for lo in range(0, members.size, step):
                    if self._factor_batch(members[lo:lo + step], W, R):
                        batched.append(members[lo:lo + step])
            if batched:  # the rest one by one (and any piece not positive definite:
                # there its leading minor is found)
                nodes = np.setdiff1d(nodes, np.concatenate(batched), assume_unique=True)
                groups = sym.update_groups(nodes)
            for s in nodes.tolist():
                P, w = self._panel(s)
                ops.panel_cholesky(P, w, status, s)
            if not ops.batched_blocks:  # one supernode at a time, by relative indices
                for s in nodes[sym.heights[nodes] > sym.widths[nodes]].tolist():
                    self._extend_add(s)
                continue
            for group, product_offsets in groups:
                if group.size == 1 and int(product_offsets[-1]) > UPDATE_ENTRIES:
                    self._extend_add(int(group[0]))  # (alone past the budget)
                    continue
                products = xp.empty(int(product_offsets[-1]), dtype=np.float64)
                for s, o in zip(group.tolist(), product_offsets[:-1].tolist()):
                    P, w = self._panel(s)
                    r = P.shape[0] - w
                    ops.panel_update(P, w, products[o:o + r * r].reshape((r, r), order="F"))
                targets, lower = self._update_targets(group, product_offsets)
                products = products[lower]
                xp.negative(products, out=products)
                ops.scatter_add(buffer, targets, products)
                del products, targets, lower
        bad = np.flatnonzero(ops.to_host(status))
        if bad.size:
            from ._common import not_positive_definite

            s = int(bad[0])
            column = int(sym.bounds[s]) + int(ops.to_host(status)[s])
            raise not_positive_definite(
                self.what, f"leading minor of order {column} (in the fill-reducing "
                "order) is not positive")

    def _factor_batch(self, nodes, W, R):
        """``nodes`` of one level factored at once: their panels gathered into a stack
        zero-padded to (W + R) × W (ones on the padded diagonal), one batched Cholesky
        of the diagonal blocks (``ops.cholesky_batched``), one batched triangular solve
        for the rows below, one batched product for their updates, scattered (lower
        triangles) into the ancestors' panels, and the panels written back. False, and
        nothing written, where a block is not positive definite."""
        ops = self.ops
        xp = ops.xp
        D, flat, positions = self._gather_stack(nodes, W, R)
        blocks = D[:, :W]  # (only their lower triangles were assembled)
        blocks += xp.tril(blocks, -1).transpose(0, 2, 1)
        L = ops.cholesky_batched(blocks)
        if L is None:
            return False
        D[:, :W] = L
        if R:
            below = ops.solve_triangular(L, D[:, W:].transpose(0, 2, 1))
            D[:, W:] = below.transpose(0, 2, 1)
            del below
            update = xp.matmul(D[:, W:], D[:, W:].transpose(0, 2, 1))
            where, targets = self._pair_positions(nodes, R)
            values = update.reshape(-1)[where]
            del update, where
            xp.negative(values, out=values)
            ops.scatter_add(self.buffer, targets, values)
            del values, targets
        self.buffer[positions] = D.reshape(-1)[flat]
        return True

    def _runs(self, s):
        """Supernode s's runs of rows (:meth:`SupernodalSymbolic._relative_indices`):
        ``(ancestor, j0, j1, relative)`` per run, its rows j0..j1 of s's rows below the
        block (columns of the ancestor's panel), ``relative`` the places of rows j0.. in
        that panel (the first j1 − j0 of them the columns' own)."""
        sym = self.symbolic
        first, end = int(sym.row_start[s]), int(sym.row_start[s + 1])
        t0, t1 = int(sym.run_first[s]), int(sym.run_first[s + 1])
        starts = sym.run_start[t0:t1].tolist() + [end]
        relative = self._dev["relative"]
        for t, (p0, p1) in enumerate(zip(starts[:-1], starts[1:]), start=t0):
            yield (int(sym.run_ancestor[t]), p0 - first, p1 - first,
                   relative[int(sym.run_relative[t]):int(sym.run_relative[t + 1])])

    def _extend_add(self, s):
        """Supernode s's update ``L_RJ L_RJᵀ`` (lower triangle) subtracted from its
        ancestors' panels one run at a time (:meth:`_runs`): the run's columns of the
        product (a GEMM, the rows from the run's first on; in blocks of columns of at
        most ``UPDATE_ENTRIES`` entries) taken from the ancestor's panel at the relative
        indices as one dense block. No index array is made, so nothing is kept: the
        CPU's way (one supernode at a time), and the GPU's for a supernode whose
        product alone is past the budget (the top separators at ten million points:
        their products and target arrays whole took more than 10 GB)."""
        xp = self.ops.xp
        P, w = self._panel(s)
        below = P[w:]
        r = below.shape[0]
        for a, j0, j1, relative in self._runs(s):
            Q, _ = self._panel(a)
            step = max(1, UPDATE_ENTRIES // (r - j0))
            for c0 in range(j0, j1, step):
                c1 = min(j1, c0 + step)
                block = self.ops.gemm(below[c0:], below[c0:c1], trans_b=True)
                k = c1 - c0
                block[:k] = xp.tril(block[:k])  # (the strict upper triangle is not L's)
                rows = relative[c0 - j0:]
                Q.T[xp.ix_(rows[:k], rows)] -= block.T  # (Q.T: in its memory order)

    def _gather_runs(self, s, Z):
        """The lower triangle of ``Z_RR`` for supernode s (Z in the panels' layout,
        its ancestors' panels done) gathered one run at a time, the inverse of
        :meth:`_extend_add`'s scatter, then made symmetric."""
        xp = self.ops.xp
        sym = self.symbolic
        r = int(sym.heights[s] - sym.widths[s])
        B = xp.zeros((r, r), order="F")
        for a, j0, j1, relative in self._runs(s):
            off, m, w = int(sym.offsets[a]), int(sym.heights[a]), int(sym.widths[a])
            Q = Z[off:off + m * w].reshape((m, w), order="F")
            # (transposed: both in their memory order)
            B.T[j0:j1, j0:] = Q.T[xp.ix_(relative[:j1 - j0], relative)]
        B = xp.tril(B)
        return B + xp.tril(B, -1).T

    def _indices(self, kind, nodes, make):
        """The index arrays ``make()`` gives for ``nodes`` (a tuple of device arrays of
        integers that depend on the structure alone), kept for the next call with the
        same ``kind`` and nodes while the room lasts (``INDEX_CACHE_FRACTION``), 32-bit
        where their values fit. The key is the nodes themselves, not where they start:
        a batch that failed and went one by one makes other groups."""
        key = (kind, np.asarray(nodes, dtype=np.int64).tobytes())
        hit = self._index_cache.get(key)
        if hit is not None:
            return hit
        arrays = make()
        narrow = self._room_for(arrays)
        if narrow is None:
            return arrays
        self._index_cache[key] = narrow
        return narrow

    def _room_for(self, arrays):
        """``arrays`` (integers) narrowed to 32 bits where their values fit, their bytes
        taken from the room the kept indices have (``INDEX_CACHE_FRACTION`` of the
        memory free when first asked); None, nothing taken, where they do not fit."""
        if self._index_room is None:
            free = self.ops.free_bytes()
            enough = free is not None and free >= INDEX_CACHE_MIN_FREE * 8 * self.symbolic.nnz
            self._index_room = int(INDEX_CACHE_FRACTION * free) if enough else 0
        if self._index_room <= 0:
            return None
        narrow = tuple(a.astype(np.int32) if a is not None and a.dtype == np.int64
                       and _fits_int32(a) else a for a in arrays)
        nbytes = sum(a.nbytes for a in narrow if a is not None)
        if nbytes > self._index_room:
            return None
        self._index_room -= nbytes
        return narrow

    def _update_targets(self, group, product_offsets):
        """:meth:`_update_targets_of`, kept (:meth:`_indices`)."""
        return self._indices("update", group,
                             lambda: self._update_targets_of(group, product_offsets))

    def _update_targets_of(self, group, product_offsets):
        """Where the lower triangles of ``group``'s update products ``L_RJ L_RJᵀ`` (end to
        end, each r × r Fortran-ordered at ``product_offsets``) go in the panel buffer:
        ``(targets, lower)``, ``lower`` the products' entries on or below their diagonals.
        Entry (i, j), i ≥ j, of supernode s's product is L's entry at (R[i], R[j]), found
        by the relative indices (:meth:`_pair_targets`). Array arithmetic on the
        backend's device."""
        xp = self.ops.xp
        d = self._dev
        nodes = xp.asarray(group)
        offsets = xp.asarray(product_offsets)
        k = xp.arange(int(product_offsets[-1]), dtype=np.int64)
        g = xp.searchsorted(offsets[1:], k, side="right")
        local = k - offsets[g]
        del k
        r = d["r"][nodes][g]
        i, j = local % r, local // r
        del local, r
        lower = xp.flatnonzero(i >= j)
        g, i, j = g[lower], i[lower], j[lower]
        base = d["row_start"][nodes][g]
        del g
        i += base
        j += base
        del base
        return self._pair_targets(i, j), lower

    def _pair_targets(self, p, q):
        """Where L's entries (R[p], R[q]) lie in the panel buffer, for positions p ≥ q in
        ``rows_cat`` of one supernode's rows (device arrays): by the symbolic part's
        relative indices (:meth:`SupernodalSymbolic._relative_indices`), two gathers
        an entry."""
        d = self._dev
        return d["relative"][d["relative_base"][q] + p] + d["column_base"][q]

    def _positions(self, row, col):
        """Where L's entries ``(row, col)`` (new order, row ≥ col, in the factor's
        structure; device arrays) are in the panel buffer."""
        xp = self.ops.xp
        d = self._dev
        a = d["owner"][col]
        first = d["bounds"][a]
        inside = row < d["bounds"][a + 1]
        place = xp.searchsorted(d["rows_key"], a * self.symbolic.n + row) - d["row_start"][a]
        row_local = xp.where(inside, row - first, d["widths"][a] + place)
        return d["offsets"][a] + row_local + (col - first) * d["heights"][a]

    # --- selected inversion -----------------------------------------------------------
    def selected_inverse(self):
        """``Z = (P A Pᵀ)⁻¹`` on the factor's structure, in the panels' layout (a buffer
        like L's): Takahashi's recurrences by supernodes, from the root down (a level's
        supernodes at once, their ancestors done). With ``L̃ = L_RJ L_JJ⁻¹``:
        ``Z_RJ = −Z_RR L̃`` and ``Z_JJ = L_JJ⁻ᵀ L_JJ⁻¹ − L̃ᵀ Z_RJ``, ``Z_RR`` gathered
        from the ancestors' panels where the factorisation scattered its updates (the
        same positions). About twice the factorisation's arithmetic."""
        ops, sym = self.ops, self.symbolic
        xp = ops.xp
        free = ops.free_bytes()
        total, panels = sym.device_bytes()
        # beside the factor: Z's panels, the gathers' temporaries past the factor's
        need = sym.device_bytes(selected_inverse=True)[0] - total + (total - panels) // 2
        if free is not None and need > free:
            raise MemoryError(
                f"the selected inverse of the {self.what} needs about "
                f"{need / 1e9:.1f} GB beside its factor, {free / 1e9:.1f} GB are free")
        Z = xp.zeros(sym.nnz, dtype=np.float64)
        batches = self._level_batches()
        for L in range(len(self._schedule) - 1, -1, -1):
            nodes = self._schedule[L][0]
            batched = [members for members, *_ in batches.get(L, ())]
            for members, W, R, C in batches.get(L, ()):
                step = max(1, UPDATE_ENTRIES // max(R * R, (W + R) * W))
                for lo in range(0, members.size, step):
                    self._selected_batch(Z, members[lo:lo + step], W, R,
                                         C[lo:lo + step])
            if batched:
                nodes = np.setdiff1d(nodes, np.concatenate(batched), assume_unique=True)
            gathered = {}
            if not ops.batched_blocks:  # one supernode at a time, by relative indices
                gathered = {s: self._gather_runs(s, Z) for s in nodes.tolist()
                            if sym.heights[s] > sym.widths[s]}
            for group, product_offsets in (
                    sym.update_groups(nodes) if ops.batched_blocks else ()):
                if group.size == 1 and int(product_offsets[-1]) > UPDATE_ENTRIES:
                    s = int(group[0])  # (alone past the budget: no target arrays)
                    gathered[s] = self._gather_runs(s, Z)
                    continue
                targets, lower = self._update_targets(group, product_offsets)
                flat = xp.zeros(int(product_offsets[-1]), dtype=np.float64)
                flat[lower] = Z[targets]
                del targets, lower
                for s, o in zip(group.tolist(), product_offsets[:-1].tolist()):
                    r = int(sym.heights[s] - sym.widths[s])
                    B = flat[o:o + r * r].reshape((r, r), order="F")
                    gathered[s] = B + B.T - xp.diag(xp.diagonal(B))
            for s in nodes.tolist():
                P, w = self._panel(s)
                off, m = int(sym.offsets[s]), P.shape[0]
                Zp = Z[off:off + m * w].reshape((m, w), order="F")
                L_inv = ops.solve_triangular(P[:w, :w], xp.eye(w))
                Z_JJ = ops.gemm(L_inv, L_inv, trans_a=True)
                if m > w:
                    tilde = ops.gemm(P[w:], L_inv)
                    Z_RJ = ops.gemm(gathered.pop(s), tilde, alpha=-1.0)
                    Z_JJ -= ops.gemm(tilde, Z_RJ, trans_a=True)
                    Zp[w:] = Z_RJ
                Zp[:w] = Z_JJ
        return Z

    def _selected_batch(self, Z, nodes, W, R, C):
        """:meth:`selected_inverse`'s step for ``nodes`` of one level at once, from
        their stack ``C`` of ``[L_JJ⁻¹; L̃]`` (:meth:`_level_batches`): ``Z_RR``
        gathered into a zero-padded R × R stack, two batched products, and the
        panels' ``[Z_JJ; Z_RJ]`` scattered into Z."""
        xp = self.ops.xp
        inverse, tilde = C[:, :W], C[:, W:]
        Z_JJ = xp.matmul(inverse.transpose(0, 2, 1), inverse)
        if R:
            # the lower triangles gathered where the factorisation scattered its
            # updates (the same kept indices), then made symmetric
            flat, positions = self._pair_positions(nodes, R)
            Z_RR = xp.zeros((len(nodes), R, R))
            Z_RR.reshape(-1)[flat] = Z[positions]
            del flat, positions
            k = xp.arange(R)
            diagonal = Z_RR[:, k, k]
            Z_RR += Z_RR.transpose(0, 2, 1)
            Z_RR[:, k, k] = diagonal
            del diagonal
            Z_RJ = xp.matmul(Z_RR, tilde)
            del Z_RR
            xp.negative(Z_RJ, out=Z_RJ)
            Z_JJ -= xp.matmul(tilde.transpose(0, 2, 1), Z_RJ)
            Z_JJ = xp.concatenate([Z_JJ, Z_RJ], axis=1)
            del Z_RJ
        flat, positions = self._stack_positions(nodes, W, R)
        Z[positions] = Z_JJ.reshape(-1)[flat]

    def inverse_on(self, rows, cols):
        """``(A⁻¹)[rows, cols]`` for pairs in A's pattern (original indices, device or
        host arrays), from :meth:`selected_inverse`. Where the pairs are in Z is kept
        for the next call with the same two array objects (the likelihood asks for its
        pattern's pairs at every evaluation: at n = 50,000 on 2 cores their search
        took 0.4 s of a 3 s evaluation), while the kept indices' room lasts; the
        arrays must not change in between (a pattern's do not)."""
        xp = self.ops.xp
        kept = self._kept_positions
        if kept is not None and kept[0] is rows and kept[1] is cols:
            positions = kept[2]
        else:
            position = self._dev.get("position")
            if position is None:
                position = self._dev["position"] = xp.asarray(self.symbolic.position)
            r = position[xp.asarray(rows)]
            c = position[xp.asarray(cols)]
            positions = self._positions(xp.maximum(r, c), xp.minimum(r, c))
            del r, c
            if kept is not None:  # (its room back before the new ones are weighed)
                self._index_room += kept[2].nbytes
            narrow = self._room_for((positions,))
            self._kept_positions = None if narrow is None else (rows, cols, narrow[0])
        Z = self.selected_inverse()
        return Z[positions]

    def logdet(self):
        xp = self.ops.xp
        return 2.0 * float(xp.log(self.buffer[self._diagonal]).sum())

    def solve(self, B):
        """``A⁻¹ B`` for a dense B (n,) or (n, k) on the factor's device: forward and
        back through the panels by levels, a level's batched supernodes a stack at a
        time (:meth:`_solve_batch`), the others one by one."""
        ops, sym = self.ops, self.symbolic
        xp = ops.xp
        B = xp.asarray(B, dtype=np.float64)
        one_d = B.ndim == 1
        B2 = B.reshape(-1, 1) if one_d else B
        k = B2.shape[1]
        if k == 0:
            return xp.zeros(B.shape)
        width = max(1, CHUNK_BYTES // (8 * (sym.n + 1)))
        if k > width:  # many right-hand sides: in blocks of columns (three n × k copies
            out = xp.empty(B2.shape)  # a block, not of all: 15 GB for 64 at 10⁷)
            for j in range(0, k, width):
                out[:, j:j + width] = self.solve(B2[:, j:j + width])
            return out
        X = xp.zeros((sym.n + 1, k))  # the last row: where padded entries go (stays 0)
        X[:sym.n] = B2[self._order]
        plan = self._solve_plan()
        for batched, nodes in plan:
            for members, W, R in batched:
                step = max(1, UPDATE_ENTRIES // ((W + R) * (W + k)))
                for lo in range(0, members.size, step):
                    self._solve_batch(X, members[lo:lo + step], W, R, forward=True)
            for s in nodes.tolist():
                P, w = self._panel(s)
                a = int(sym.bounds[s])
                y = ops.solve_triangular(P[:w, :w], X[a:a + w])
                X[a:a + w] = y
                if P.shape[0] > w:
                    X[self._rows_of(s)] -= ops.gemm(P[w:], y)
        for batched, nodes in reversed(plan):
            for s in nodes.tolist()[::-1]:
                P, w = self._panel(s)
                a = int(sym.bounds[s])
                rhs = X[a:a + w]
                if P.shape[0] > w:
                    rhs = rhs - ops.gemm(P[w:], X[self._rows_of(s)], trans_a=True)
                X[a:a + w] = ops.solve_triangular(P[:w, :w], rhs, transpose=True)
            for members, W, R in batched:
                step = max(1, UPDATE_ENTRIES // ((W + R) * (W + k)))
                for lo in range(0, members.size, step):
                    self._solve_batch(X, members[lo:lo + step], W, R, forward=False)
        out = xp.empty_like(B2)
        out[self._order] = X[:sym.n]
        return out.ravel() if one_d else out

    def _solve_plan(self):
        """Per level (leaves first): ``(batched, nodes)``, the level's width classes
        ``[(supernodes, W, R)]`` (:meth:`SupernodalSymbolic.batch_classes`) and its
        other supernodes, one by one."""
        key = (BATCH_WIDTH, self.ops.batched_blocks)
        cached = getattr(self, "_plan", None)
        if cached is not None and cached[0] == key:
            return cached[1]
        classes = self._batch_classes()
        plan = []
        for L, (nodes, _) in enumerate(self._schedule):
            batched = classes.get(L, [])
            if batched:
                nodes = np.setdiff1d(nodes, np.concatenate([m for m, *_ in batched]),
                                     assume_unique=True)
            plan.append((batched, nodes))
        self._plan = (key, plan)
        return plan

    def _solve_batch(self, X, nodes, W, R, forward):
        """One step of :meth:`solve` for ``nodes`` of one level at once, X (n + 1) × k
        in the new order (its last row zero, where padded entries point): their panels
        gathered into a padded stack (:meth:`_gather_stack`), then forward ``y_J =
        L_JJ⁻¹ x_J`` and ``x_R −= L_RJ y_J`` (a scatter: rows below are shared), or
        back ``x_J = L_JJ⁻ᵀ (x_J − L_RJᵀ x_R)``, as batched triangular solves and
        products (substitution, not the blocks' inverses: the solve's accuracy is that
        of the one-by-one route)."""
        ops = self.ops
        xp = ops.xp
        D, _, _ = self._gather_stack(nodes, W, R)
        J, rows = self._stack_rows(nodes, W, R)
        if forward:
            y = ops.solve_triangular(D[:, :W], X[J])
            X[J] = y
            if R:
                update = xp.matmul(D[:, W:], y)
                xp.negative(update, out=update)
                k = X.shape[1]
                index = (rows[:, :, None] * k + xp.arange(k)).reshape(-1)
                ops.scatter_add(X.reshape(-1), index, update.reshape(-1))
            return
        rhs = X[J]
        if R:
            rhs -= xp.matmul(D[:, W:].transpose(0, 2, 1), X[rows])
        X[J] = ops.solve_triangular(D[:, :W], rhs, transpose=True)

    def _gather_stack(self, nodes, W, R):
        """``nodes``' panels gathered into a stack zero-padded to (W + R) × W each, ones
        on the padded part of the diagonal (so a padded block stays triangular and
        invertible, its padded rows and columns apart): ``(stack, flat, positions)``
        with :meth:`_stack_positions`'s ``flat`` and ``positions``."""
        xp = self.ops.xp
        D = xp.zeros((len(nodes), W + R, W))
        flat, positions = self._stack_positions(nodes, W, R)
        D.reshape(-1)[flat] = self.buffer[positions]
        k = xp.arange(W)
        padded = k[None, :] >= xp.asarray(self.symbolic.widths[nodes])[:, None]
        D[:, k, k] = xp.where(padded, 1.0, D[:, k, k])
        return D, flat, positions

    def _stack_rows(self, nodes, W, R):
        """:meth:`_stack_rows_of`, kept (:meth:`_indices`)."""
        return self._indices(("rows", W, R), nodes,
                             lambda: self._stack_rows_of(nodes, W, R))

    def _stack_rows_of(self, nodes, W, R):
        """``(J, rows)``: the new-order indices of ``nodes``' block columns (g × W) and
        of their rows below (g × R), n where a stack is padded."""
        xp = self.ops.xp
        d = self._dev
        n = self.symbolic.n
        s = xp.asarray(nodes)
        k = xp.arange(W)[None, :]
        J = xp.where(k < d["widths"][s][:, None], d["bounds"][s][:, None] + k, n)
        if not R:
            return J, None
        i = xp.arange(R)[None, :]
        inside = i < d["r"][s][:, None]
        at = xp.where(inside, d["row_start"][s][:, None] + i, 0)
        return J, xp.where(inside, d["rows_cat"][at], n)

    # --- sparse right-hand sides -------------------------------------------------------
    def _chunks(self, B, max_points=None):
        """The rows of the sparse (m, n) B (host CSR) in chunks close in the new order
        (of at most ``max_points``, default ``CHUNK_POINTS``): ``(points, reach,
        height, columns, local points, values)`` per chunk, the entries as host arrays
        (columns in the new order), ``height`` the reach's columns."""
        import scipy.sparse as sp

        sym = self.symbolic
        if max_points is None:
            max_points = CHUNK_POINTS[self.ops.forward_order]
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
            # the largest chunk (up to max_points) whose dense block stays under
            # CHUNK_BYTES (points close in the order share most of their reach)
            size = min(points.size - start, max_points)
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

    def _level_batches(self):
        """The supernodes at most ``BATCH_WIDTH`` wide, per level and width class (up to
        64, 128, 256, 512 columns), as zero-padded stacks ``C`` (g × (W + R) × W, W and
        R the class's widest block and longest rows): ``C[i] = [L_JJ⁻¹; L_RJ L_JJ⁻¹]``
        of its i-th supernode, so that one product ``C[i] y_J`` gives both the solved
        ``L_JJ⁻¹ y_J`` and the update of the rows below. ``{level: [(supernodes, W, R,
        C), ...]}``, made once per factorisation; an empty dict where they would take
        more than ``BATCH_MEMORY_FRACTION`` of the free memory (the forward solves then
        go one supernode at a time). The inverse of a diagonal block is a triangular
        solve with the identity (``ops.solve_triangular``); products with it agree with
        the triangular solves to rounding at the blocks' condition (the tests hold the
        forms to 1e-10 of exact ones)."""
        if getattr(self, "_batches", None) is not None:
            return self._batches
        ops = self.ops
        xp = ops.xp
        plan = [(L, nodes, W, R) for L, classes in self._batch_classes().items()
                for nodes, W, R in classes]
        total = sum(8 * nodes.size * (W + R) * W for _, nodes, W, R in plan)
        free = ops.free_bytes()
        if free is not None and total > BATCH_MEMORY_FRACTION * free:
            logger.debug("supernodal forward solves one supernode at a time: the level "
                         "batches would take %.2f GB of %.2f GB free", total / 1e9, free / 1e9)
            self._batches = {}
            return self._batches
        batches = {}
        for L, nodes, W, R in plan:
            C = xp.zeros((nodes.size, W + R, W))
            step = max(1, UPDATE_ENTRIES // ((W + R) * W))
            for lo in range(0, nodes.size, step):
                self._invert_blocks(nodes[lo:lo + step], W, R, C[lo:lo + step])
            batches.setdefault(L, []).append((nodes, W, R, C))
        self._batches = batches
        return batches

    def _stack_positions(self, nodes, W, R):
        """:meth:`_stack_positions_of`, kept (:meth:`_indices`)."""
        return self._indices(("stack", W, R), nodes,
                             lambda: self._stack_positions_of(nodes, W, R))

    def _stack_positions_of(self, nodes, W, R):
        """Where ``nodes``' panels lie in a stack of them zero-padded to (W + R) × W each
        (the block's W rows, then R rows below it; C order): ``(flat, positions)``, the
        stack's flat indices of the entries that are in a panel and their positions in
        the panel buffer. Array arithmetic on the device."""
        xp = self.ops.xp
        d = self._dev
        s = xp.asarray(nodes)
        w, r = d["widths"][s], d["r"][s]
        a = xp.arange(W + R)[None, :, None]
        b = xp.arange(W)[None, None, :]
        valid = (b < w[:, None, None]) & xp.where(a < W, a < w[:, None, None],
                                                  a - W < r[:, None, None])
        flat = xp.flatnonzero(valid)
        del valid
        i, rest = xp.divmod(flat, (W + R) * W)
        a, b = xp.divmod(rest, W)
        del rest
        s = s[i]
        row = xp.where(a < W, a, d["widths"][s] + a - W)
        return flat, d["offsets"][s] + row + b * d["heights"][s]

    def _pair_positions(self, nodes, R):
        """:meth:`_pair_positions_of`, kept (:meth:`_indices`)."""
        return self._indices(("pairs", R), nodes,
                             lambda: self._pair_positions_of(nodes, R))

    def _pair_positions_of(self, nodes, R):
        """Where the pairs p ≥ q of ``nodes``' rows below their blocks (entries
        ``(R[p], R[q])`` of L's structure: an update's lower triangle) lie in the panel
        buffer, for a stack of r × r blocks zero-padded to R × R (C order): ``(flat,
        positions)`` as :meth:`_stack_positions`'s."""
        xp = self.ops.xp
        d = self._dev
        s = xp.asarray(nodes)
        r = d["r"][s][:, None, None]
        p = xp.arange(R)
        valid = (p[None, :, None] < r) & (p[None, :, None] >= p[None, None, :])
        flat = xp.flatnonzero(valid)
        del valid, r
        i, rest = xp.divmod(flat, R * R)
        pp, qq = xp.divmod(rest, R)
        del rest
        base = d["row_start"][s][i]
        del i
        pp += base
        qq += base
        del base
        return flat, self._pair_targets(pp, qq)

    def _invert_blocks(self, nodes, W, R, out):
        """``out[i] = [L_JJ⁻¹; L_RJ L_JJ⁻¹]`` (zero-padded to (W + R) × W) for each of
        ``nodes``: the panels gathered into ``out``, their diagonal blocks made
        invertible where padded (ones on the padded diagonal), inverted by one batched
        triangular solve with the identity, the rows below multiplied by one batched
        product, and the padded diagonal set back to zero."""
        ops = self.ops
        xp = ops.xp
        g = len(nodes)
        flat, positions = self._stack_positions(nodes, W, R)
        out.reshape(-1)[flat] = self.buffer[positions]
        del flat, positions
        k = xp.arange(W)
        padded = k[None, :] >= xp.asarray(self.symbolic.widths[nodes])[:, None]
        blocks = out[:, :W]
        blocks[:, k, k] = xp.where(padded, 1.0, blocks[:, k, k])
        identity = xp.zeros((g, W, W))
        identity[:, k, k] = 1.0
        inverse = ops.solve_triangular(blocks, identity)
        del identity
        inverse[:, k, k] = xp.where(padded, 0.0, inverse[:, k, k])
        if R:
            out[:, W:] = xp.matmul(out[:, W:], inverse)
        out[:, :W] = inverse

    def _forward_chunks(self, B, keep, max_points=None):
        """Forward solves ``L⁻¹ P bᵢ`` through each chunk's reach; yields per chunk
        ``(points, reach, Y)`` with Y (height × points, ``ops.forward_order``) on the device,
        or the chunk's quadratic forms only (``keep`` False: ``(points, None, forms)``).
        The reach goes level by level: its supernodes in a level's batch
        (:meth:`_level_batches`) as one gather of their rows of the block, one batched
        product and one scatter of the updates into the rows below (a level's
        supernodes are independent, and all they update lies above them); the others
        one by one, a triangular solve and a product where the blocks lie and a
        scatter each. The block has one more row, kept zero: the padded rows of a
        batch read it and write zeros to it."""
        ops, sym = self.ops, self.symbolic
        xp = ops.xp
        d = self._dev
        batches = self._level_batches()
        local = xp.empty(sym.n, dtype=np.int64)  # a reach column's row in the chunk's block
        r_all = sym.heights - sym.widths
        for chunk, reach, height, cols, pts, vals in self._chunks(B, max_points):
            widths = sym.widths[reach]
            starts = np.concatenate([[0], np.cumsum(widths)])
            r = r_all[reach]
            row_ends = np.cumsum(r)
            local[xp.asarray(np.repeat(sym.bounds[reach] - starts[:-1], widths)
                             + np.arange(height))] = xp.arange(height)
            # every reach supernode's rows, as rows of the block, end to end
            first_row = sym.row_start[reach]
            rows_at = (np.repeat(first_row - (row_ends - r), r)
                       + np.arange(int(row_ends[-1]) if r.size else 0))
            block_rows = local[d["rows_cat"][xp.asarray(rows_at)]]
            work = xp.zeros((height + 1, chunk.size), order=ops.forward_order)
            work[local[xp.asarray(cols)], xp.asarray(pts)] = xp.asarray(vals)
            update = xp.empty(int(r.max()) * chunk.size if r.size else 0)
            level = sym.level[reach]
            for L in np.unique(level).tolist():
                here = np.flatnonzero(level == L)  # places in the reach
                for nodes, W, R, C in batches.get(L, ()):
                    mine = np.searchsorted(nodes, reach[here])
                    inside = (mine < nodes.size) & (nodes[np.minimum(mine, nodes.size - 1)]
                                                    == reach[here])
                    if inside.sum() >= 2:
                        self._forward_batch(work, height, block_rows, here[inside],
                                            mine[inside], starts, row_ends, r, W, R, C)
                        here = here[~inside]
                for j in here.tolist():
                    s, st, re, rs = int(reach[j]), int(starts[j]), int(row_ends[j]), int(r[j])
                    P, w = self._panel(s)
                    out = update[:rs * chunk.size].reshape((rs, chunk.size),
                                                           order=ops.forward_order)
                    ops.panel_forward(P, w, work[st:st + w], out)
                    if rs:
                        ops.scatter_add(work, block_rows[re - rs:re], out, unique=True)
            work = work[:height]
            yield chunk, reach, (work if keep else (work * work).sum(axis=0))

    def _forward_batch(self, work, height, block_rows, places, members, starts, row_ends,
                       r, W, R, C):
        """One level's batched step of :meth:`_forward_chunks` for the reach supernodes
        at ``places`` (members ``members`` of the level's stack ``C``)."""
        ops = self.ops
        xp = ops.xp
        w = np.diff(starts)[places]
        k = np.arange(W)
        rows_in = np.where(k < w[:, None], starts[places][:, None] + k, height)
        Y = work[xp.asarray(rows_in)]  # b × W × points, padded rows zero
        Z = xp.matmul(C[xp.asarray(members)], Y)
        work[xp.asarray(rows_in)] = Z[:, :W]  # padded rows write zeros to the zero row
        if R:
            rs = r[places]
            k = np.arange(R)
            at = np.where(k < rs[:, None], (row_ends[places] - rs)[:, None] + k, -1)
            rows_out = xp.where(xp.asarray(at >= 0), block_rows[xp.asarray(
                np.maximum(at, 0))], height) if block_rows.size else xp.full(at.shape, height)
            xp.negative(Z[:, W:], out=Z[:, W:])
            ops.scatter_add(work, rows_out, Z[:, W:])  # siblings share rows: summed

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
        multiplied where their reaches meet (the supernodes both reach). The chunks
        hold at most ``m / GRAM_CHUNKS`` points (not fewer than ``GRAM_CHUNK_MIN``): a
        chunk's block is dense over its reach, zeros included. Measured (H100, 10,000
        points at n = 1,000,000, ``benchmarks/results/gram_chunks_h100.json``): m/16
        0.82 s, the std's 4,096-point chunks 0.86 s, m/64 1.9 s (launches); the pair
        products are a small part of the call (0.07 s), the forward solves most."""
        xp = self.ops.xp
        sym = self.symbolic
        m = B.shape[0]
        out = xp.zeros((m, m))
        cap = min(CHUNK_POINTS[self.ops.forward_order],
                  max(GRAM_CHUNK_MIN, -(-m // GRAM_CHUNKS)))
        solved = []
        for chunk, reach, Y in self._forward_chunks(self._host_csr(B), keep=True,
                                                    max_points=cap):
            starts = np.concatenate([[0], np.cumsum(sym.widths[reach])])
            solved.append((xp.asarray(chunk), reach, starts, Y))
        for i, (ci, reach_i, starts_i, Yi) in enumerate(solved):
            for cj, reach_j, starts_j, Yj in solved[i:]:
                common, a, b = np.intersect1d(reach_i, reach_j, assume_unique=True,
                                              return_indices=True)
                if not common.size:
                    continue
                widths = sym.widths[common]
                G = self.ops.gemm(Yi[xp.asarray(_ranges(starts_i[a], widths))],
                                  Yj[xp.asarray(_ranges(starts_j[b], widths))],
                                  trans_a=True)
                out[ci[:, None], cj[None, :]] = G
                out[cj[:, None], ci[None, :]] = G.T
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
        self._batches = None  # made from L: they go with it
        self._index_cache, self._index_room = {}, None
        self._kept_positions = None
