"""The sparse path of GaussianProcessRegressor: compactly supported kernels, sparse Cholesky.

With a kernel that is zero beyond a distance R (Wendland, Tapered, and their products with
ConstantKernel plus a WhiteKernel), only pairs closer than R enter the Gram matrix. The
pairs come from a k-d tree (scipy.spatial.cKDTree, on the host); the kernel is evaluated
on them as vectors on the backend; the SPD matrix is factored by the factor
:func:`default_factorization` picks: on the GPU cuDSS (``ops.sparse_spd``) or, from
200,000 points or where cuDSS does not load, skgpu's supernodal factor; on the CPU
CHOLMOD where cvxopt is installed, else skgpu's supernodal factor (SciPy's SuperLU, the
backend's factor without cvxopt, is slower at every n measured).
The factorisation's symbolic analysis is kept: each new theta writes new values into the
same pattern and refactorises, and the pattern is rebuilt only when the support radius
grows past it (or shrinks well below it).

The LML gradient ``½ αᵀ ∂K α - ½ tr(K⁻¹ ∂K)`` (α = K⁻¹y) for each hyperparameter in
log-theta. Where ``∂K = a K + b I`` exactly on the pattern (a ConstantKernel's scale,
a WhiteKernel's noise level; checked on the values, not assumed from the kernel's
type), the quadratic term is one sparse product and the trace is ``a n + b tr(K⁻¹)``,
with ``tr(K⁻¹)`` from one central difference of ``logdet(K + tI)``: two refactorisations
for all such hyperparameters together. Any other hyperparameter (a length scale) takes
the central difference of the LML in its log-theta (step ``FD_STEP``), two
refactorisations each. The differences are accurate to ~1e-7 relative and deterministic.
(The exact trace needs K⁻¹ on the sparsity pattern, a selected inversion that neither
cuDSS nor SciPy provides.) For ``C * Tapered(Matern) + WhiteKernel`` that is five
factorisations for the value and gradient, not seven.
"""

from __future__ import annotations

import logging
import time

import numpy as np
import scipy.sparse as sp
from sklearn.gaussian_process import kernels as skk

from ._kernel_eval import exp_sine_squared_values, matern_nu, matern_values, rq_values
from .kernels import Tapered, Wendland, wendland, wendland_log_radius_gradient

logger = logging.getLogger("skgpu")

#: Step in log-theta of the central-difference LML gradient.
FD_STEP = 1e-4

#: Most test points for which return_cov / sample_y form the dense covariance.
MAX_COV_POINTS = 10_000

#: A pattern is built this much wider than needed, so that small increases of the
#: support radius (an optimizer's steps) reuse it and its symbolic analysis, where a
#: hyperparameter moves the radius (:func:`radius_moves`); where none does (a Tapered
#: kernel's taper range, a Wendland kernel's fixed support) the pattern is the support
#: itself (the width only rounding's: its extra pairs are explicit zeros, and added fill) ...
_PATTERN_GROWTH = 1.1
_PATTERN_EXACT = 1.0000001
#: ... and it is reused while the needed radius is within this factor below it.
_PATTERN_SLACK = 1.5


def support_radius(kernel):
    """Distance beyond which ``kernel`` is zero (inf if none; 0 for WhiteKernel)."""
    t = type(kernel)
    if t in (Wendland, Tapered):
        return kernel.support()
    if t is skk.WhiteKernel:
        return 0.0
    if t is skk.Sum:
        return max(support_radius(kernel.k1), support_radius(kernel.k2))
    if t is skk.Product:
        return min(support_radius(kernel.k1), support_radius(kernel.k2))
    if t is skk.Exponentiation:
        return support_radius(kernel.kernel)
    return np.inf


def radius_moves(kernel):
    """Whether a hyperparameter of ``kernel`` moves its support radius: a Wendland
    kernel's support radius that is not fixed, where the radius comes from it (a
    Tapered kernel's taper range is a parameter, not a hyperparameter)."""
    t = type(kernel)
    if t is Wendland:
        return not kernel.hyperparameter_support_radius.fixed
    if t in (skk.Sum, skk.Product):
        return radius_moves(kernel.k1) or radius_moves(kernel.k2)
    if t is skk.Exponentiation:
        return radius_moves(kernel.kernel)
    return False  # Tapered (its range), a leaf without a support: no radius of theirs


_PAIR_LEAVES = (Wendland, Tapered, skk.ConstantKernel, skk.WhiteKernel, skk.RBF, skk.Matern,
                skk.RationalQuadratic, skk.ExpSineSquared)


def sparse_unsupported_reason(kernel):
    """None if the sparse path can evaluate ``kernel``, else why not."""
    if not np.isfinite(support_radius(kernel)):
        return (f"the kernel {kernel} is not compactly supported (wrap it in Tapered or "
                "multiply it by a Wendland kernel)")
    stack = [kernel]
    while stack:
        k = stack.pop()
        t = type(k)
        if t in (skk.Sum, skk.Product):
            stack += [k.k1, k.k2]
        elif t is skk.Exponentiation:
            stack.append(k.kernel)
        elif t is Tapered:
            stack.append(k.kernel)
        elif t not in _PAIR_LEAVES:
            return f"{t.__name__} is not supported on the sparse path"
        elif t is skk.Matern and k.nu not in (0.5, 1.5, 2.5, np.inf):
            return f"Matern(nu={k.nu}) is not supported on the sparse path"
    return None


class Pairs:
    """Index pairs (rows into X, cols into Y) on a backend, and per-pair geometry."""

    def __init__(self, ops, X, Y, rows, cols, same):
        self.ops, self.X, self.Y, self.same = ops, X, Y, same
        self.rows, self.cols = ops.asarray(rows), ops.asarray(cols)
        self.size = int(rows.shape[0])
        self._diagonal = None

    def diffs(self, d, scale=1.0):
        out = self.X[self.rows, d] - self.Y[self.cols, d]
        if scale != 1.0:
            out /= scale
        return out

    def sq_dist(self, scales=None):
        """Σ_d ((x_d - y_d) / scale_d)² per pair; the unscaled one is kept (a Tapered
        kernel and its taper, and every finite-difference step, reuse it)."""
        if scales is None and getattr(self, "_sq_dist", None) is not None:
            return self._sq_dist
        D = None
        for d in range(self.X.shape[1]):
            t = self.diffs(d, 1.0 if scales is None else float(scales[d]))
            t *= t
            D = t if D is None else D + t
        if scales is None:
            self._sq_dist = D
        return D

    def on_diagonal(self):
        if self._diagonal is None:
            self._diagonal = (self.rows == self.cols) if self.same else None
        return self._diagonal


def _max_abs(xp, a):
    """Largest |entry| as a float, 0 for an empty array (CuPy's max has no ``initial``)."""
    return float(xp.max(xp.abs(a))) if a.size else 0.0


def pair_values(kernel, pairs, eval_gradient=False):
    """k(x_i, y_j) for every pair, as a scalar or a vector, and gradient thunks (log-theta
    order, as scikit-learn's ``theta``), evaluated with the same formulas as the dense
    path."""
    xp = pairs.ops.xp
    t = type(kernel)
    if t is skk.Sum:
        v1, g1 = pair_values(kernel.k1, pairs, eval_gradient)
        v2, g2 = pair_values(kernel.k2, pairs, eval_gradient)
        return v1 + v2, g1 + g2
    if t is skk.Product:
        v1, g1 = pair_values(kernel.k1, pairs, eval_gradient)
        v2, g2 = pair_values(kernel.k2, pairs, eval_gradient)
        grads = [(lambda g=g: g() * v2) for g in g1] + [(lambda g=g: v1 * g()) for g in g2]
        return v1 * v2, grads
    if t is skk.Exponentiation:
        v, g1 = pair_values(kernel.kernel, pairs, eval_gradient)
        e = float(kernel.exponent)
        factor = e * v ** (e - 1)
        return v**e, [(lambda g=g: g() * factor) for g in g1]
    if t is skk.ConstantKernel:
        c = float(kernel.constant_value)
        fixed = kernel.hyperparameter_constant_value.fixed
        return c, ([] if fixed or not eval_gradient else [lambda: c])
    if t is skk.WhiteKernel:
        noise = float(kernel.noise_level)
        diag = pairs.on_diagonal()
        value = 0.0 if diag is None else xp.where(diag, noise, 0.0)
        fixed = kernel.hyperparameter_noise_level.fixed
        return value, ([] if fixed or not eval_gradient else [lambda: value])
    if t is Wendland:
        dim = kernel._dimension(pairs.X)
        r = xp.sqrt(pairs.sq_dist()) / kernel.support_radius
        value = wendland(r, kernel.smoothness, dim, xp)
        grads = []
        if eval_gradient and not kernel.hyperparameter_support_radius.fixed:
            grads = [lambda: wendland_log_radius_gradient(r, kernel.smoothness, dim, xp)]
        return value, grads
    if t is Tapered:
        dim = int(kernel.dimension) if kernel.dimension is not None else pairs.X.shape[1]
        taper = wendland(xp.sqrt(pairs.sq_dist()) / kernel.taper_range,
                         kernel.taper_smoothness, dim, xp)
        v, g = pair_values(kernel.kernel, pairs, eval_gradient)
        return v * taper, [(lambda g=g: g() * taper) for g in g]
    if t in (skk.RBF, skk.Matern):
        ls = np.atleast_1d(np.asarray(kernel.length_scale, dtype=np.float64))
        ard = ls.size > 1
        r2 = pairs.sq_dist(ls) if ard else pairs.sq_dist() / ls[0] ** 2
        K, common_of = matern_values(xp, r2, matern_nu(kernel))
        grads = []
        if eval_gradient and not kernel.hyperparameter_length_scale.fixed:
            common = common_of()
            if ard:
                grads = [(lambda d=d: common * pairs.diffs(d, ls[d]) ** 2)
                         for d in range(pairs.X.shape[1])]
            else:
                grads = [lambda: common * r2]
        return K, grads
    if t is skk.RationalQuadratic:
        return rq_values(xp, pairs.sq_dist(), kernel, eval_gradient)
    if t is skk.ExpSineSquared:
        return exp_sine_squared_values(xp, pairs.sq_dist(), kernel, eval_gradient)
    raise ValueError(f"{t.__name__} is not supported on the sparse path")


#: ``cholesky='auto'`` takes the dense path where K's pattern is denser than
#: ``min(DENSE_MAX_DENSITY, c / √n)`` (its non-zero fraction), c = DENSE_DENSITY_SCALE[0]
#: for points in one or two dimensions and [1] in more: the sparse factor's fill grows
#: with the neighbour count, faster in more dimensions, while the dense factor's cost
#: does not. On the CPU the sparse fit was the faster one below a density of ~0.13 at
#: n = 3,000 and ~0.08 at n = 8,000 in two dimensions, ~0.075 at n = 3,000 in three
#: (``benchmarks/results/gp_density_cpu_2core.json``).
DENSE_DENSITY_SCALE = (7.0, 4.0)
DENSE_MAX_DENSITY = 0.25
#: Rows compared with a sample of the points to estimate the density.
_DENSITY_ROWS = 1_000
_DENSITY_COLUMNS = 4_000


def dense_density_threshold(n, n_features):
    """The density above which ``cholesky='auto'`` takes the dense path."""
    scale = DENSE_DENSITY_SCALE[0 if n_features <= 2 else 1]
    return min(DENSE_MAX_DENSITY, scale / np.sqrt(max(n, 1)))


def pattern_density(X, radius):
    """The fraction of pairs of X's rows within ``radius`` (K's non-zero fraction): exact
    for a small X, otherwise estimated from up to 1,000 × 4,000 pairs of rows drawn
    without replacement (a fixed draw: the estimate is the same on every call)."""
    from scipy.spatial import cKDTree

    n = X.shape[0]
    if n == 0:
        return 0.0
    draw = np.random.RandomState(0)
    rows = X if n <= _DENSITY_ROWS else X[draw.choice(n, _DENSITY_ROWS, replace=False)]
    cols = X if n <= _DENSITY_COLUMNS else X[draw.choice(n, _DENSITY_COLUMNS, replace=False)]
    counts = cKDTree(cols).query_ball_point(rows, radius, return_length=True)
    return float(np.sum(counts)) / (rows.shape[0] * cols.shape[0])


def neighbour_pairs(X, Y, radius):
    """(rows, cols) of all pairs with ‖X[i] - Y[j]‖ <= radius (Y None: X with itself,
    both orders and the diagonal), by scipy's k-d tree on the host."""
    from scipy.spatial import cKDTree

    tree = cKDTree(X)
    if Y is None:
        upper = tree.query_pairs(radius, output_type="ndarray")
        n = X.shape[0]
        diag = np.arange(n)
        rows = np.concatenate([upper[:, 0], upper[:, 1], diag])
        cols = np.concatenate([upper[:, 1], upper[:, 0], diag])
        return rows, cols
    coo = cKDTree(Y).sparse_distance_matrix(tree, radius, output_type="coo_matrix")
    return coo.col.astype(np.int64), coo.row.astype(np.int64)


def cell_list_pairs(xp, X, radius, Y=None):
    """All (i, j) with ‖X[i] - Y[j]‖ <= radius (Y None: X with itself, both orders and
    i = j), rows ascending and the columns ascending within a row, by a cell list: the
    points of Y binned in cells of side ``radius``, each point of X compared with those
    in the 3^d cells around its own. Array operations only (NumPy or CuPy), d <= 3."""
    if Y is None:
        Y = X
    n, d = X.shape
    n_y = Y.shape[0]
    if n == 0 or n_y == 0:
        empty = xp.zeros(0, dtype=xp.int64)
        return empty, empty
    lo = xp.minimum(X.min(axis=0), Y.min(axis=0))
    cells = xp.floor((X - lo) / radius).astype(xp.int64)
    cells_y = cells if Y is X else xp.floor((Y - lo) / radius).astype(xp.int64)
    shape = xp.maximum(cells.max(axis=0), cells_y.max(axis=0)) + 1
    shape_host = [int(v) for v in (shape.get() if hasattr(shape, "get") else shape)]
    strides = np.cumprod([1] + shape_host[::-1][:-1])[::-1].copy()

    def flat(c):
        # Σ_d c_d·stride_d elementwise: CuPy's integer matmul fails past ~10⁷ rows
        # (CUDA_ERROR_INVALID_VALUE at n = 10,000,000 in two dimensions)
        out = c[:, 0] * int(strides[0])
        for k in range(1, d):
            out = out + c[:, k] * int(strides[k])
        return out

    cell_id = flat(cells_y)
    order = xp.argsort(cell_id)
    sorted_ids = cell_id[order]
    # the occupied cells only (no dense grid, however sparse the points): their ids, and
    # where each one's points start and end in the sorted order
    bounds = xp.flatnonzero(sorted_ids[1:] != sorted_ids[:-1]) + 1
    cell_starts = xp.concatenate([xp.zeros(1, dtype=bounds.dtype), bounds])
    cell_ends = xp.concatenate([bounds, xp.full(1, n_y, dtype=bounds.dtype)])
    occupied = sorted_ids[cell_starts]
    rows_out, cols_out = [], []
    r2 = radius * radius
    for offset in np.ndindex(*(3,) * d):
        delta = xp.asarray(np.asarray(offset) - 1)
        neighbour = cells + delta
        inside = xp.all((neighbour >= 0) & (neighbour < shape), axis=1)
        nid = flat(neighbour)
        pos = xp.minimum(xp.searchsorted(occupied, nid), occupied.shape[0] - 1)
        found = inside & (occupied[pos] == nid)
        first = xp.where(found, cell_starts[pos], 0)
        counts = xp.where(found, cell_ends[pos] - first, 0)
        ends_cum = xp.cumsum(counts)
        total = int(ends_cum[-1]) if n else 0
        if total == 0:
            continue
        k = xp.arange(total)
        row = xp.searchsorted(ends_cum, k, side="right")
        col = order[first[row] + (k - (ends_cum - counts)[row])]
        diff = X[row] - Y[col]
        keep = (diff * diff).sum(axis=1) <= r2
        rows_out.append(row[keep])
        cols_out.append(col[keep])
    if not rows_out:
        empty = xp.zeros(0, dtype=xp.int64)
        return empty, empty
    rows = xp.concatenate(rows_out)
    cols = xp.concatenate(cols_out)
    key = xp.argsort(rows * n_y + cols)
    return rows[key], cols[key]


def brute_force_pairs(ops, X, radius, block_bytes=1 << 28):
    """The same pairs by tiled all-pairs distances (any d; for the GPU above d = 3)."""
    xp = ops.xp
    n = X.shape[0]
    block = max(1, min(n, block_bytes // (8 * n)))
    rows_out, cols_out = [], []
    for start in range(0, n, block):
        D = ops.sq_dist(X[start:start + block], X)
        r, c = xp.nonzero(D <= radius * radius)
        rows_out.append(r + start)
        cols_out.append(c)
    return xp.concatenate(rows_out), xp.concatenate(cols_out)


class _Pattern:
    """The sparsity pattern of K(X, X) for a radius, in CSR order, on a backend."""

    def __init__(self, ops, X_host, X, radius):
        n = X_host.shape[0]
        self.radius = radius
        self.n = n
        if ops.neighbour_search == "cell-list":
            # on the device: a cell list in low dimension, tiled all-pairs above
            xp = ops.xp
            if X.shape[1] <= 3:
                rows, cols = cell_list_pairs(xp, X, radius)
            else:
                rows, cols = brute_force_pairs(ops, X, radius)
                key = xp.argsort(rows * n + cols)
                rows, cols = rows[key], cols[key]
            # CuPy's sparse matrices (and cuDSS through them) take 32-bit indices
            self.indptr = xp.searchsorted(rows, xp.arange(n + 1)).astype(xp.int32)
            self.indices = cols.astype(xp.int32)
        else:
            rows, cols = neighbour_pairs(X_host, None, radius)
            # CSR structure by SciPy's O(nnz) conversion; values are then computed in
            # CSR order, so no permutation is ever applied to them.
            S = sp.coo_matrix((np.ones(rows.size, dtype=np.int8), (rows, cols)),
                              shape=(n, n)).tocsr()
            S.sort_indices()
            self.indptr = S.indptr.astype(np.int64)
            self.indices = S.indices.astype(np.int64)
            rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(self.indptr))
            cols = self.indices
        self.pairs = Pairs(ops, X, X, rows, cols, same=True)
        self.diagonal = ops.xp.flatnonzero(self.pairs.rows == self.pairs.cols)

    def matrix(self, ops, values):
        return ops.csr_matrix(values, self.indices, self.indptr, (self.n, self.n))


def default_factorization(ops, n=None):
    """The sparse factorisation the likelihood of ``n`` points uses on ``ops``, as
    ``SPARSE_FACTORIZATION`` names it for the backend: ``"backend"`` (``ops.sparse_spd``:
    CHOLMOD or SuperLU on the CPU, cuDSS on the GPU), ``"supernodal"`` (skgpu's), or
    ``"auto"``: skgpu's from ``SUPERNODAL_FROM_N[ops.sparse_factor]`` points on, where it
    measured faster, the backend's below (and at every n where that factor has no entry:
    CHOLMOD). On a GPU without a loadable cuDSS, skgpu's supernodal factor (dense
    cuSOLVER/cuBLAS kernels only), not the CPU. The choice and its reason are logged."""
    from ..backends import sparse_spd_unavailable

    choice = SPARSE_FACTORIZATION.get(ops.name, "backend")
    if choice == "auto":
        backend_factor = ops.sparse_factor
        threshold = SUPERNODAL_FROM_N.get(backend_factor)
        large = threshold is not None and (n or 0) >= threshold
        choice = "supernodal" if large else "backend"
        if large:
            logger.info("sparse GP on %s, n=%s: skgpu's supernodal factor (measured faster "
                        "than %s from %s points)", ops.name, n, backend_factor, threshold)
        else:
            logger.info("sparse GP on %s, n=%s: the backend's factor, %s (%s)", ops.name, n,
                        backend_factor, "measured faster than skgpu's at every n"
                        if threshold is None else f"skgpu's faster from {threshold} points")
    why = sparse_spd_unavailable(ops) if choice == "backend" else None
    if why:
        logger.info("sparse GP on %s: %s; skgpu's supernodal factor instead", ops.name, why)
        return "supernodal"
    return choice


#: backend name -> "supernodal", "backend" or "auto" (see :func:`default_factorization`).
#: GPU: measured on an H100 (``benchmarks/results/sparse_gp_factorizations_h100.json``,
#: each factorisation in turn at each n in one process, CuPy's kernels compiled): cuDSS
#: faster at n = 20,000 (fit(optimizer=None) 0.17 s against 0.22 s, the default fit
#: 1.17 against 1.57 s), skgpu's at 200,000 (0.38 against 1.00 s; 3.65 against 4.64 s)
#: and 1,000,000 (1.64 against 5.55 s; 20.8 against 27.4 s; the std of 100,000 points
#: after it 1.86 against 3.14 s cold, one factor serving both). The "first fit at a
#: new size" cost seen before (3.2-3.6 s at 200,000) was NVRTC compiling CuPy's
#: kernels (5.0 s of a 5.7 s first fit), not the factor: partly once per machine (CuPy
#: keeps them on disk), mostly once per batch size (reductions in the batched
#: Cholesky's checks, now elementwise kernels: a cold fit at 1,000,000 42.2 -> 3.2 s,
#: ``benchmarks/results/cold_fit_compiles_h100.json``). On the H200
#: (``benchmarks/results/sparse_gp_factorizations_h200.json``) skgpu's was faster at
#: 200,000 too (0.55 against 1.37 s; 4.36 against 5.00 s) and at 1,000,000 (1.39
#: against 8.05 s; 20.9 against 29.0 s). Since the minimum-cover separators (H100,
#: ``benchmarks/results/sparse_gp_factorizations_cover_h100.json``, skgpu's / cuDSS's):
#: n = 20,000 the default fit 1.48 / 1.03 s (cuDSS still the faster); 100,000: 2.07 /
#: 2.41 s, fit(optimizer=None) 0.21 / 0.44 s; 200,000: 2.79 / 4.03 s; 1,000,000: 12.2 /
#: 21.9 s: so skgpu's from 100,000 (the crossing lies between 20,000 and 100,000,
#: not measured finer).
#: CPU, 2 cores (``benchmarks/results/sparse_gp_cpu_three_factors_2core.json``, the
#: three in turn in one run): CHOLMOD is the fastest (one LML + gradient at n = 50,000
#: 1.05 s, the default fit at 10,000 5.2 s, at 50,000 36.2 s), so it stays where cvxopt
#: is installed; without it skgpu's factor (1.15 s; 6.1 s; 38.1 s) replaces SciPy's
#: SuperLU (5.30 s; 16.0 s; at 2,000 points 1.86 against 2.51 s).
SPARSE_FACTORIZATION = {"cpu": "auto", "gpu": "auto"}
#: the backend's factor (``ops.sparse_factor``) -> the n from which ``"auto"`` takes
#: skgpu's supernodal factor instead (none: never, CHOLMOD being the faster at every n
#: measured; SuperLU: from any n).
SUPERNODAL_FROM_N = {"cudss": 100_000, "superlu": 0}

#: The backend operations the sparse GP needs: cuDSS's ``sparse_spd`` is not among them,
#: skgpu's supernodal factor (dense kernels) standing in where cuDSS does not load.
OPERATIONS = ("spmm", "cholesky", "solve_triangular")


class SparseLogMarginalLikelihood:
    """LML and its gradient with a sparse K on one backend: exact where the factor gives
    K⁻¹ on the pattern (CHOLMOD on the CPU; skgpu's supernodal factor, with
    ``factorization="supernodal"``, on either), else exact for the hyperparameters whose
    ∂K is a K + b I and by central differences for the others.

    Holds the pattern and the factor between calls: refactorisation reuses the analysis.
    """

    def __init__(self, ops, X, y, alpha, factorization=None):
        self.ops = ops
        #: "supernodal" (skgpu's factor: exact gradient by selected inversion, L for the
        #: variance) or "backend" (``ops.sparse_spd``: CHOLMOD / SuperLU, cuDSS)
        self.factorization = (default_factorization(ops, np.shape(X)[0])
                              if factorization is None else factorization)
        self.X_host = np.asarray(ops.to_host(X), dtype=np.float64)
        self.X = ops.asarray(self.X_host)
        y = ops.asarray(y, dtype=np.float64)
        self.y = y.reshape(-1, 1) if y.ndim == 1 else y
        self.alpha = alpha if np.ndim(alpha) == 0 else ops.asarray(
            np.asarray(alpha, dtype=np.float64))
        self.pattern = None
        self.factor = None
        #: (kernel, its theta, pattern) whose K the factor and ``_alpha_vec`` hold
        #: exactly (set by :meth:`_value`, cleared by every other factorisation)
        self._holds = None
        self.n_evaluations = 0
        self.n_factorizations = 0
        self._no_selected_inverse = False

    def _ensure_pattern(self, radius, kernel=None):
        """The pattern of the pairs within ``radius`` (``kernel``'s support radius, or
        wider), kept while it covers the radius without being much wider; built
        ``_PATTERN_GROWTH`` wider unless ``kernel`` is given and no hyperparameter of it
        moves the radius."""
        p = self.pattern
        if p is not None and radius <= p.radius <= _PATTERN_SLACK * radius:
            return
        if self.factor is not None and hasattr(self.factor, "free"):
            self.factor.free()
        # what was made from the old pattern goes with it (the analysis holds its maps
        # on the device)
        self._symbolic_of = self._variance = None
        grow = (_PATTERN_EXACT if kernel is not None and not radius_moves(kernel)
                else _PATTERN_GROWTH)
        self.pattern = _Pattern(self.ops, self.X_host, self.X, radius * grow)
        self.factor = None

    def _values(self, value):
        xp = self.ops.xp
        return xp.broadcast_to(xp.asarray(value, dtype=np.float64),
                               (self.pattern.pairs.size,)).copy()

    def kernel_matrix(self, kernel, shift=0.0, value=None):
        """K + alpha·I (+ shift·I) on the current pattern (CSR on the backend); ``value``:
        the kernel's values on the pattern's pairs, if already evaluated."""
        if value is None:
            value, _ = pair_values(kernel, self.pattern.pairs)
        values = self._values(value)
        alpha = self.alpha if np.ndim(self.alpha) == 0 else self.alpha[
            self.pattern.pairs.rows[self.pattern.diagonal]]
        values[self.pattern.diagonal] += alpha
        if shift:
            values[self.pattern.diagonal] += shift
        return self.pattern.matrix(self.ops, values)

    def factorize(self, kernel, shift=0.0, value=None):
        self._holds = None
        K = self.kernel_matrix(kernel, shift, value)
        self.n_factorizations += 1
        if self.factor is None:
            if self.factorization == "supernodal":
                from ..backends import SupernodalFactor

                self.factor = SupernodalFactor(self.ops, self._symbolic(), K,
                                               what="kernel matrix")
            else:
                self.factor = self.ops.sparse_spd(K, what="kernel matrix")
            logger.info("sparse GP likelihood on %s: %s factors the kernel matrix (n=%d)",
                        self.ops.name, type(self.factor).__name__, self.y.shape[0])
        else:
            self.factor.refactor(K)
        return self.factor

    def factor_at(self, kernel):
        """``(factor, K⁻¹ y)`` of ``K(kernel)`` where the last factorisation was of
        exactly that matrix (the same kernel object, its theta unchanged to the bit, on
        the current pattern: the optimizer's last evaluation at its optimum), else
        None: then the caller factorises."""
        held = self._holds
        if (held is None or self.factor is None or held[0] is not kernel
                or held[2] is not self.pattern
                or held[1].tobytes() != np.asarray(kernel.theta).tobytes()):
            return None
        return self.factor, self._alpha_vec

    def _symbolic(self):
        """skgpu's supernodal analysis of the current pattern (made once per pattern)."""
        from ..backends import SupernodalSymbolic

        cached = getattr(self, "_symbolic_of", None)
        if cached is not None and cached[0] is self.pattern:
            return cached[1]
        pattern = self.pattern
        start = time.perf_counter()
        # the pattern where it is (the passes over its entries run on its device)
        symbolic = SupernodalSymbolic.from_points(
            self.X_host, pattern.indptr, pattern.indices, pattern.radius)
        logger.debug("sparse GP: supernodal analysis, %d supernodes, %d stored entries of "
                     "L, %.2f s", symbolic.n_supernodes, symbolic.nnz,
                     time.perf_counter() - start)
        self._symbolic_of = (pattern, symbolic)
        return symbolic

    def variance_factor(self, kernel):
        """A factor of K(kernel) (+ alpha·I) whose quadratic forms solve with L through
        the supernodes each test point reaches: the likelihood's own factor where it
        exposes L (CHOLMOD, SuperLU), else skgpu's supernodal factor
        (:class:`~skgpu.backends.SupernodalFactor`; cuDSS keeps L to
        itself), its symbolic part made once per pattern and its numeric part once per
        matrix (one factorisation, reused while the kernel's values on the pattern are
        the same)."""
        from ..backends import SupernodalFactor

        self._ensure_pattern(support_radius(kernel), kernel)
        factor = self.factor
        if factor is not None and factor.exposes_factor:
            return factor
        K = self.kernel_matrix(kernel)
        cached = getattr(self, "_variance", None)
        xp = self.ops.xp
        if cached is not None and cached[0] is self.pattern and bool(
                xp.array_equal(cached[1], K.data)):
            return cached[2]
        self._variance = None
        factor = SupernodalFactor(self.ops, self._symbolic(), K, what="kernel matrix")
        self._variance = (self.pattern, K.data.copy(), factor)
        return factor

    def solve_y(self, factor):
        """K⁻¹ y, (n, T). One target goes in as a vector: cuDSS ties each solver (and
        every refactorisation) to a right-hand-side shape, so one shape keeps one."""
        y = self.y[:, 0] if self.y.shape[1] == 1 else self.y
        return factor.solve(y).reshape(self.y.shape)

    def _value(self, kernel, value=None):
        from numpy.linalg import LinAlgError

        n, n_targets = self.y.shape
        try:
            factor = self.factorize(kernel, value=value)
        except LinAlgError:
            self.factor = None  # a failed factorisation leaves no usable state
            return -np.inf
        a = self.solve_y(factor)
        self._alpha_vec = a
        self._holds = (kernel, kernel.theta, self.pattern)
        return (-0.5 * float(self.ops.xp.vdot(self.y, a)) - 0.5 * n_targets * factor.logdet()
                - n_targets * n / 2 * np.log(2 * np.pi))

    def _logdet_shifted(self, kernel, shift, value=None):
        """logdet(K + shift·I), or None when that matrix is not positive definite."""
        from numpy.linalg import LinAlgError

        try:
            return self.factorize(kernel, shift, value).logdet()
        except LinAlgError:
            self.factor = None
            return None

    def _affine_parts(self, kernel, n_theta, evaluated=None):
        """For each hyperparameter, ``(a, b, ∂K values)`` when ``∂K = a K + b I`` on the
        pattern (to 1e-12 of ∂K's scale), else None; all None when the gradient thunks
        do not match theta (then every one is differenced). ``evaluated``: the kernel's
        ``pair_values`` with gradient on the pattern, if already computed."""
        xp = self.ops.xp
        pairs, diag = self.pattern.pairs, self.pattern.diagonal
        value, thunks = evaluated or pair_values(kernel, pairs, eval_gradient=True)
        if len(thunks) != n_theta or np.ndim(self.alpha) != 0:
            return [None] * n_theta  # (per-sample alpha: b would vary along the diagonal)
        K = self._values(value)
        off = xp.ones(K.shape[0], dtype=bool)
        off[diag] = False
        K_off = K[off]
        K_diag = K[diag] + self.alpha
        out = []
        for thunk in thunks:
            g = self._values(thunk())
            g_off, g_diag = g[off], g[diag]
            scale = float(xp.max(xp.abs(g))) if g.size else 0.0
            norm = float(K_off @ K_off)
            a = float(g_off @ K_off) / norm if norm > 0 else 0.0
            b_all = g_diag - a * K_diag
            b = float(xp.mean(b_all)) if b_all.size else 0.0
            tol = 1e-12 * max(scale, abs(a) * float(xp.max(K_diag)) if K_diag.size else 0.0)
            exact = (_max_abs(xp, g_off - a * K_off) <= tol
                     and _max_abs(xp, b_all - b) <= tol)
            out.append((a, b, g) if exact else None)
        return out

    def _exact_gradient(self, kernel, n_theta, alpha_vec, thunks):
        """The gradient from K⁻¹ on the pattern, where the factor gives it (selected
        inversion: CHOLMOD's factor on the CPU, skgpu's supernodal one on either
        backend): ``½ Σ_t α_tᵀ ∂K α_t - ½ T tr(K⁻¹ ∂K)`` for every
        hyperparameter, with ``tr(K⁻¹ ∂K) = Σ (K⁻¹)_ik ∂K_ik`` over the pattern's
        entries. None where the factor has no selected inverse (cuDSS, SuperLU) or the
        kernel's gradient terms do not match theta; those are differenced. Also None,
        from then on, once the selected inversion has run out of memory (CHOLMOD's
        holds about four times the factor's bytes, skgpu's twice)."""
        inverse_on = getattr(self.factor, "inverse_on", None)
        if inverse_on is None or len(thunks) != n_theta or self._no_selected_inverse:
            return None
        pairs = self.pattern.pairs
        try:
            Z = inverse_on(pairs.rows, pairs.cols)
        except MemoryError:
            self._no_selected_inverse = True
            logger.info("sparse LML: the selected inversion ran out of memory (n=%d); the "
                        "gradient's traces are differenced instead", self.y.shape[0])
            return None
        n_targets = self.y.shape[1]
        grad = np.empty(n_theta)
        for j, thunk in enumerate(thunks):
            g = self._values(thunk())
            grad[j] = 0.5 * self._quadratic(g, alpha_vec) - 0.5 * n_targets * float(Z @ g)
        return grad

    def _quadratic(self, g, alpha_vec):
        """``αᵀ ∂K α`` summed over the targets, ∂K the pattern's values ``g``."""
        dK = self.pattern.matrix(self.ops, g)
        return float(self.ops.xp.vdot(alpha_vec, self.ops.spmm(dK, alpha_vec)))

    def __call__(self, kernel, eval_gradient=False):
        start = time.perf_counter()
        out = self._evaluate(kernel, eval_gradient)
        logger.debug("sparse LML evaluation %d on %s (n=%d, nnz=%d%s): %.10g in %.3f s",
                     self.n_evaluations, self.ops.name, self.y.shape[0],
                     self.pattern.pairs.size, ", with gradient" if eval_gradient else "",
                     out[0] if eval_gradient else out, time.perf_counter() - start)
        return out

    def _evaluate(self, kernel, eval_gradient):
        self.n_evaluations += 1
        radius = support_radius(kernel)
        theta = kernel.theta
        if eval_gradient:
            # the widest radius any of the perturbed kernels can have
            wide = kernel.clone_with_theta(theta + FD_STEP)
            radius = max(radius, support_radius(wide))
        self._ensure_pattern(radius, kernel)
        if not eval_gradient:
            return self._value(kernel)
        # the kernel's values and gradient terms on the pattern, evaluated once
        evaluated = pair_values(kernel, self.pattern.pairs, eval_gradient=True)
        value = self._value(kernel, evaluated[0])
        grad = np.zeros(theta.shape[0])
        if not np.isfinite(value):
            return value, grad
        n, n_targets = self.y.shape
        alpha_vec = self._alpha_vec
        exact = self._exact_gradient(kernel, theta.shape[0], alpha_vec, evaluated[1])
        if exact is not None:
            return value, exact
        affine = self._affine_parts(kernel, theta.shape[0], evaluated)
        shifts = [abs(part[1]) for part in affine if part is not None and part[1] != 0.0]
        trace = None  # tr(K⁻¹)
        if shifts:
            t = FD_STEP * min(shifts)  # K - tI stays positive definite: see _affine_parts
            up = self._logdet_shifted(kernel, t, evaluated[0])
            down = self._logdet_shifted(kernel, -t, evaluated[0])
            if up is not None and down is not None:
                trace = (up - down) / (2 * t)
        for j in range(theta.shape[0]):
            part = affine[j]
            if part is not None and (part[1] == 0.0 or trace is not None):
                a, b, g = part
                tr = a * n + (b * trace if b != 0.0 else 0.0)
                grad[j] = 0.5 * self._quadratic(g, alpha_vec) - 0.5 * n_targets * tr
                continue
            step = np.zeros_like(theta)
            step[j] = FD_STEP
            up = self._value(kernel.clone_with_theta(theta + step))
            down = self._value(kernel.clone_with_theta(theta - step))
            grad[j] = (up - down) / (2 * FD_STEP)
        return value, grad  # the factor now holds the last step's matrix, not theta's


def sparse_predict(ops, kernel, lml, X_test, alpha_vec, *, kdiag, return_std, return_cov,
                   block_bytes):
    """Mean (and variance or covariance) with sparse K(X*, X); host arrays out."""
    xp = ops.xp
    X_test = np.asarray(ops.to_host(X_test), dtype=np.float64)
    m, n = X_test.shape[0], lml.X_host.shape[0]
    radius = support_radius(kernel) * 1.0000001
    Xt = ops.asarray(X_test)
    if ops.neighbour_search == "cell-list" and X_test.shape[1] <= 3:
        # on the device, as the training pattern's
        rows, cols = cell_list_pairs(xp, Xt, radius, Y=lml.X)
    else:
        rows, cols = neighbour_pairs(X_test, lml.X_host, radius)
    pairs = Pairs(ops, Xt, lml.X, rows, cols, same=False)
    value, _ = pair_values(kernel, pairs)
    values = xp.broadcast_to(xp.asarray(value, dtype=np.float64), (pairs.size,)).copy()
    Ks = ops.csr_from_coo(values, pairs.rows, pairs.cols, (m, n))
    mean = ops.to_host(ops.spmm(Ks, alpha_vec))
    if not (return_std or return_cov):
        return mean, None
    # kᵢᵀ K⁻¹ kᵢ by forward solves with L through the supernodes each test point's
    # neighbours reach (a factor that exposes L: skgpu's supernodal one on the GPU)
    factor = lml.variance_factor(kernel)
    if return_cov:
        if m > MAX_COV_POINTS:
            raise ValueError(
                f"return_cov / sample_y on the sparse path form a dense {m} x {m} "
                f"covariance; ask for at most {MAX_COV_POINTS} points at a time."
            )
        cov = evaluate_dense_cov(ops, kernel, Xt)
        cov -= ops.asarray(factor.quadratic_form_matrix(Ks))
        return mean, ops.to_host(cov)
    forms = factor.quadratic_forms(Ks, block_bytes=block_bytes)
    return mean, kdiag - forms


def evaluate_dense_cov(ops, kernel, X):
    """K(X, X) dense for a modest number of points (the prior part of return_cov),
    evaluated on the pairs within the kernel's support only (all pairs where it has
    none)."""
    xp = ops.xp
    m = X.shape[0]
    radius = support_radius(kernel)
    if np.isfinite(radius):
        rows, cols = neighbour_pairs(np.asarray(ops.to_host(X), dtype=np.float64), None,
                                     radius * 1.0000001)
    else:
        rows, cols = np.divmod(np.arange(m * m), m)
    pairs = Pairs(ops, X, X, rows, cols, same=True)
    value, _ = pair_values(kernel, pairs)
    out = xp.zeros((m, m))
    out[pairs.rows, pairs.cols] = xp.asarray(value, dtype=np.float64)
    return out
