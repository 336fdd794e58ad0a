"""skgpu's supernodal sparse Cholesky factor (``skgpu.backends._supernodal``) against dense
factorisations: the nested-dissection ordering, logdet, solves, quadratic forms with
sparse right-hand sides and their Gram matrix, on every backend; and the sparse GP's
variance through it."""

import numpy as np
import pytest
import scipy.linalg as sla
import scipy.sparse as sp
from conftest import DEVICES
from sklearn.gaussian_process.kernels import ConstantKernel as C
from sklearn.gaussian_process.kernels import Matern, WhiteKernel
from skgpu_testing import assert_allclose_rel, skip_unless_supported

import skgpu
from skgpu.backends import _cpu, get_backend
from skgpu.backends._supernodal import (
    SupernodalFactor,
    SupernodalSymbolic,
    _cover_separator,
    nested_dissection,
)
from skgpu.gaussian_process import GaussianProcessRegressor
from skgpu.gaussian_process._sparse import neighbour_pairs
from skgpu.gaussian_process.kernels import Tapered, Wendland


def _points(rng, kind, n, d):
    if kind == "uniform":
        return rng.uniform(0, 1, (n, d))
    if kind == "clustered":  # dense clumps and empty space between them
        centres = rng.uniform(0, 1, (5, d))
        return centres[rng.integers(0, 5, n)] + 0.02 * rng.standard_normal((n, d))
    if kind == "duplicates":  # every point three times
        return np.repeat(rng.uniform(0, 1, (n // 3, d)), 3, axis=0)
    if kind == "offset":  # far from the origin: coordinates rounded to ~1e-4
        return rng.uniform(0, 1, (n, d)) + 1e12
    if kind == "line":  # spread along one axis only
        X = np.zeros((n, d))
        X[:, 0] = rng.uniform(0, 1, n)
        return X
    raise AssertionError(kind)


def _system(rng, X, radius):
    """The Wendland kernel matrix (+ 1e-2 I) on the pairs within ``radius`` (its CSR
    pattern exactly those pairs) and its dense copy, zero off the pattern (far from the
    origin the kernel's own distances round across the radius: at 1e12, values ~1e-10 on
    pairs 0.05003 apart for a radius of 0.05; nearer, nothing is off the pattern)."""
    n = X.shape[0]
    rows, cols = neighbour_pairs(X, None, radius)
    S = sp.coo_matrix((np.ones(rows.size), (rows, cols)), shape=(n, n)).tocsr()
    S.sort_indices()
    kernel = Wendland(radius, smoothness=1, dimension=X.shape[1])
    on_pattern = np.zeros((n, n), dtype=bool)
    on_pattern[rows, cols] = True
    dense = np.where(on_pattern, kernel(X), 0.0) + 1e-2 * np.eye(n)
    values = dense[np.repeat(np.arange(n), np.diff(S.indptr)), S.indices]
    return S, values, dense, kernel


def _assert_forms_exact(ops, factor, cross, dense):
    """The factor's quadratic forms and their Gram for the rows of ``cross`` (a dense
    cross-covariance, taken sparse) against the dense Cholesky's; ``(Ks, L⁻¹ Ksᵀ)``."""
    Ks = sp.csr_matrix(cross)
    L = np.linalg.cholesky(dense)
    W = sla.solve_triangular(L, Ks.toarray().T, lower=True)
    np.testing.assert_allclose(factor.quadratic_forms(Ks), np.sum(W * W, axis=0),
                               rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(ops.to_host(factor.quadratic_form_matrix(Ks)), W.T @ W,
                               rtol=1e-10, atol=1e-13)
    return Ks, W


@pytest.mark.parametrize("kind", ["uniform", "clustered", "duplicates", "line", "offset"])
@pytest.mark.parametrize("d", [1, 2, 3])
@pytest.mark.parametrize("cover_from", [0, 10**9])
def test_nested_dissection_separates(rng, kind, d, cover_from):
    """A permutation whose supernodes partition it, children before parents, and no
    pattern edge between two supernodes neither of which is an ancestor of the other
    (what makes the elimination tree's structure hold)."""
    X = _points(rng, kind, 900, d)
    radius = 0.06
    S, _, _, _ = _system(rng, X, radius)
    order, bounds = nested_dissection(X, radius, leaf_size=40, cover_from=cover_from)
    np.testing.assert_array_equal(np.sort(order), np.arange(X.shape[0]))
    assert bounds[0] == 0 and bounds[-1] == X.shape[0] and np.all(np.diff(bounds) > 0)
    sym = SupernodalSymbolic(S.indptr, S.indices, order, bounds)
    ancestors = []
    for s in range(sym.n_supernodes):
        chain, p = {s}, sym.parent[s]
        while p >= 0:
            assert p > s  # a postorder
            chain.add(int(p))
            p = sym.parent[p]
        ancestors.append(chain)
    coo = S.tocoo()
    a, b = sym.owner[sym.position[coo.row]], sym.owner[sym.position[coo.col]]
    for u, v in set(zip(a.tolist(), b.tolist())):
        assert v in ancestors[u] or u in ancestors[v]


def _crossing_pairs(X, lower, upper, radius):
    """Every pair (i in lower, j in upper) within ``radius``, by brute force."""
    D = np.sqrt(((X[lower][:, None, :] - X[upper][None, :, :]) ** 2).sum(axis=2))
    i, j = np.nonzero(D <= radius)
    return lower[i], upper[j]


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("d", [1, 2, 3])
def test_the_cover_separator_is_a_smallest_cover_of_the_crossing_pairs(seed, d):
    """At a median cut, the separator touches every pair within the radius with one end
    on each side (brute force), and no smaller set does (every subset of the points
    near the cut, by size); duplicated points straddle the cut."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (90, d)) * np.r_[1.0, np.full(d - 1, 0.15)]
    X = np.vstack([X, X[rng.integers(0, 90, 20)]])  # duplicates, some at the median
    radius = 0.06
    idx = rng.permutation(X.shape[0])
    x = np.ascontiguousarray(X[idx, 0])
    half = idx.size // 2
    part = np.argpartition(x, half)
    lower, upper = part[:half], part[half:]
    cut = x[part[half]]
    separator = _cover_separator(X, idx, lower, upper, x, cut, radius)
    assert np.unique(separator).size == separator.size
    a, b = _crossing_pairs(X[idx], lower, upper, radius)
    assert a.size > 0
    in_separator = np.zeros(idx.size, dtype=bool)
    in_separator[separator] = True
    assert np.all(in_separator[a] | in_separator[b])
    near = np.union1d(a, b)
    assert near.size <= 22  # small enough to try every subset
    ends_a, ends_b = np.searchsorted(near, a), np.searchsorted(near, b)
    subsets = (np.arange(1 << near.size)[:, None] >> np.arange(near.size)) & 1
    covers = np.all(subsets[:, ends_a] | subsets[:, ends_b], axis=1)
    assert subsets[covers].sum(axis=1).min() == separator.size


@pytest.mark.parametrize("seed", [0, 1])
def test_the_cover_separators_make_a_sparser_factor(seed):
    """On uniform points in the square, the dissection by minimum covers stores fewer
    entries of L than the one by the lower half's strip (at n = 5,000 about a fifth
    fewer), and both partition the points."""
    rng = np.random.default_rng(seed)
    n = 5000
    X = rng.uniform(0, 1, (n, 2))
    radius = np.sqrt(30 / (np.pi * n))
    S, _, _, _ = _system(rng, X, radius)
    stored = {}
    for name, cover_from in (("cover", 0), ("strip", n + 1)):
        order, bounds = nested_dissection(X, radius, leaf_size=64, cover_from=cover_from)
        np.testing.assert_array_equal(np.sort(order), np.arange(n))
        stored[name] = SupernodalSymbolic(S.indptr, S.indices, order, bounds).nnz
    assert stored["cover"] < 0.9 * stored["strip"]


def test_a_cut_through_empty_space_makes_no_empty_supernode():
    """Two clusters with a gap at the median: the first cut has no point within the
    radius, so no separator; no supernode is empty (a zero-width panel is an invalid
    value to cuSOLVER, found on the GPU with duplicated points in 1-D), and the factor
    is still exact."""
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.uniform(0, 0.1, 300), rng.uniform(0.9, 1, 300)])[:, None]
    S, values, dense, _ = _system(rng, X, 0.01)
    order, bounds = nested_dissection(X, 0.01, leaf_size=40)
    assert np.all(np.diff(bounds) > 0)
    np.testing.assert_array_equal(np.sort(order), np.arange(600))
    sym = SupernodalSymbolic(S.indptr, S.indices, order, bounds)
    factor = SupernodalFactor(_cpu.CPUBackend(), sym, values)
    assert factor.logdet() == pytest.approx(np.linalg.slogdet(dense)[1], rel=1e-12)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind,d,radius", [("uniform", 2, 0.05), ("clustered", 2, 0.04),
                                           ("duplicates", 2, 0.08), ("line", 1, 0.01),
                                           ("uniform", 3, 0.15)])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_the_analysis_is_the_same_wherever_the_pattern_is(rng, device, kind, d, radius,
                                                          index_dtype):
    """The analysis of a pattern held on the backend's device (its passes over the
    entries and its relative-index tables made there) is the host's, array for array;
    and it serves a factor there."""
    ops = get_backend(device)
    X = _points(rng, kind, 1200, d)
    S, values, dense, _ = _system(rng, X, radius)
    indptr, indices = S.indptr.astype(index_dtype), S.indices.astype(index_dtype)
    order, bounds = nested_dissection(X, radius, leaf_size=40)
    host = SupernodalSymbolic(indptr, indices, order, bounds)
    here = SupernodalSymbolic(ops.asarray(indptr), ops.asarray(indices), order, bounds)
    for name in ("parent", "level", "offsets", "widths", "heights", "row_start",
                 "rows_cat", "rows_key", "value_index", "panel_position", "run_first",
                 "run_start", "run_ancestor", "run_relative", "relative", "relative_base",
                 "column_base"):
        np.testing.assert_array_equal(ops.to_host(getattr(here, name)),
                                      getattr(host, name), err_msg=name)
    assert [R.tolist() for R in here.rows] == [R.tolist() for R in host.rows]
    assert here.nnz == host.nnz > 0
    factor = SupernodalFactor(ops, here, ops.asarray(values))
    assert factor.logdet() == pytest.approx(np.linalg.slogdet(dense)[1], rel=1e-11)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind,d,radius", [("uniform", 2, 0.05), ("uniform", 1, 0.01),
                                           ("uniform", 3, 0.15), ("clustered", 2, 0.04),
                                           ("duplicates", 2, 0.08), ("line", 2, 0.03),
                                           ("offset", 2, 0.05)])
@pytest.mark.parametrize("cover_from", [0, 10**9])
def test_factor_equals_dense(rng, device, kind, d, radius, cover_from):
    ops = get_backend(device)
    X = _points(rng, kind, 1500, d)
    S, values, dense, kernel = _system(rng, X, radius)
    sym = SupernodalSymbolic.from_points(X, S.indptr, S.indices, radius, leaf_size=48,
                                         cover_from=cover_from)
    factor = SupernodalFactor(ops, sym, ops.asarray(values))
    L = np.linalg.cholesky(dense)
    exact_logdet = 2 * np.sum(np.log(np.diag(L)))
    assert factor.logdet() == pytest.approx(exact_logdet, rel=1e-12)
    B = rng.standard_normal((X.shape[0], 3))
    assert_allclose_rel(ops.to_host(factor.solve(ops.asarray(B))),
                        sla.cho_solve((L, True), B), 1e-9)
    b = B[:, 0]
    assert_allclose_rel(ops.to_host(factor.solve(ops.asarray(b))),
                        sla.cho_solve((L, True), b), 1e-9)
    # test points: inside, on training points, and far away (an empty row)
    X_test = np.vstack([rng.uniform(0, 1, (60, d)), X[:7], np.full((3, d), 9.0)])
    Ks = sp.csr_matrix(kernel(X_test, X))
    Ks.eliminate_zeros()
    W = sla.solve_triangular(L, Ks.toarray().T, lower=True)
    exact_forms = np.sum(W * W, axis=0)
    forms = factor.quadratic_forms(Ks)
    np.testing.assert_allclose(forms, exact_forms, rtol=1e-10, atol=1e-13)
    assert np.all(forms[-3:] == 0.0)
    gram = ops.to_host(factor.quadratic_form_matrix(Ks))
    np.testing.assert_allclose(gram, W.T @ W, rtol=1e-10, atol=1e-13)
    # a refactorisation with new values on the same pattern
    factor.refactor(ops.asarray(values * 2.0))
    assert factor.logdet() == pytest.approx(exact_logdet + X.shape[0] * np.log(2.0),
                                            rel=1e-12)


@pytest.mark.parametrize("device", DEVICES)
def test_forms_in_many_chunks_and_the_gram_across_them(rng, monkeypatch, device):
    """Chunks of a few points (a chunk's block capped small): every chunk's reach solved
    on its own, the Gram matrix assembled from pairs of chunks."""
    from skgpu.backends import _supernodal

    ops = get_backend(device)
    X = _points(rng, "uniform", 1200, 2)
    S, values, dense, kernel = _system(rng, X, 0.06)
    sym = SupernodalSymbolic.from_points(X, S.indptr, S.indices, 0.06, leaf_size=32)
    factor = SupernodalFactor(ops, sym, ops.asarray(values))
    monkeypatch.setattr(_supernodal, "CHUNK_BYTES", 8 * 300 * 5)
    X_test = rng.uniform(0, 1, (80, 2))
    _assert_forms_exact(ops, factor, kernel(X_test, X), dense)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("points", [37, 80])
def test_gram_in_chunks_of_its_own_size(rng, monkeypatch, device, points):
    """The Gram's chunks hold at most m / GRAM_CHUNKS points (at least GRAM_CHUNK_MIN):
    here chunks of a few points each, their pairs meeting on the supernodes both
    reach, and the Gram equals the exact one; the quadratic forms keep their own
    chunks."""
    from skgpu.backends import _supernodal

    ops = get_backend(device)
    X = _points(rng, "uniform", 1200, 2)
    S, values, dense, kernel = _system(rng, X, 0.06)
    sym = SupernodalSymbolic.from_points(X, S.indptr, S.indices, 0.06, leaf_size=32)
    factor = SupernodalFactor(ops, sym, ops.asarray(values))
    monkeypatch.setattr(_supernodal, "GRAM_CHUNKS", 9)
    monkeypatch.setattr(_supernodal, "GRAM_CHUNK_MIN", 2)
    sizes = []
    real = SupernodalFactor._chunks
    monkeypatch.setattr(SupernodalFactor, "_chunks", lambda self, B, max_points=None: (
        sizes.append(max_points) or real(self, B, max_points)))
    X_test = rng.uniform(0, 1, (points, 2))
    _assert_forms_exact(ops, factor, kernel(X_test, X), dense)
    assert sizes == [None, -(-points // 9)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("route", ["batched", "one by one", "batches do not fit"])
def test_forms_by_level_batches_and_one_by_one_equal_exact_ones(rng, monkeypatch, device,
                                                                route):
    """The forward solves with the small supernodes of a level in one batched product
    (padded blocks, siblings' updates to shared rows summed), and without (every
    supernode wider than the batch width, or the batches refused for memory): the
    forms and their Gram equal exact ones, and the batches are used exactly where
    they should be; a refactorisation drops the batches made from the old values."""
    from skgpu.backends import _supernodal

    monkeypatch.setattr(type(get_backend(device)), "batched_blocks", True)  # (CPU too)
    if route == "one by one":
        monkeypatch.setattr(_supernodal, "BATCH_WIDTH", 0)
    if route == "batches do not fit":
        monkeypatch.setattr(_supernodal, "BATCH_MEMORY_FRACTION", 0.0)
        monkeypatch.setattr(type(get_backend(device)), "free_bytes", lambda self: 10**12)
    calls = []
    real = SupernodalFactor._forward_batch
    monkeypatch.setattr(SupernodalFactor, "_forward_batch",
                        lambda self, *a: calls.append(1) or real(self, *a))
    ops = get_backend(device)
    X = _points(rng, "clustered", 1500, 2)
    S, values, dense, kernel = _system(rng, X, 0.05)
    sym = SupernodalSymbolic.from_points(X, S.indptr, S.indices, 0.05, leaf_size=24)
    assert sym.level.max() >= 3
    factor = SupernodalFactor(ops, sym, ops.asarray(values))
    X_test = np.vstack([rng.uniform(0, 1, (150, 2)), X[:20]])
    Ks, W = _assert_forms_exact(ops, factor, kernel(X_test, X), dense)
    assert (len(calls) > 0) == (route == "batched")
    factor.refactor(ops.asarray(values * 4.0))  # forms of (4A)⁻¹: a quarter
    np.testing.assert_allclose(factor.quadratic_forms(Ks), np.sum(W * W, axis=0) / 4.0,
                               rtol=1e-10, atol=1e-13)
    assert bool(factor._batches) == (route == "batched")
    factor.free()  # the factor's memory given back: its batches with it
    assert factor._batches is None and factor.buffer is None


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("route", ["batched", "one by one"])
def test_factor_by_level_batches_equals_dense(rng, monkeypatch, device, route):
    """The numeric factorisation and the solves with a level's small supernodes at once
    (padded stacks, batched Cholesky, triangular solves and products; the stacks in
    several pieces) and one by one: L's panels equal the dense Cholesky factor's
    entries on L's structure, and logdet and solves (one and several right-hand sides)
    agree, after a refactorisation too."""
    from skgpu.backends import _supernodal

    monkeypatch.setattr(type(get_backend(device)), "batched_blocks", True)  # (CPU too)
    if route == "one by one":
        monkeypatch.setattr(_supernodal, "BATCH_WIDTH", 0)
    monkeypatch.setattr(_supernodal, "UPDATE_ENTRIES", 20_000)
    calls, solved = [], []
    real = SupernodalFactor._factor_batch
    monkeypatch.setattr(SupernodalFactor, "_factor_batch",
                        lambda self, *a: calls.append(len(a[0])) or real(self, *a))
    real_solve = SupernodalFactor._solve_batch
    monkeypatch.setattr(SupernodalFactor, "_solve_batch", lambda self, X, nodes, *a, **k: (
        solved.append(len(nodes)) or real_solve(self, X, nodes, *a, **k)))
    ops = get_backend(device)
    X = _points(rng, "clustered", 1200, 2)
    S, values, dense, _ = _system(rng, X, 0.05)
    sym = SupernodalSymbolic.from_points(X, S.indptr, S.indices, 0.05, leaf_size=24)
    factor = SupernodalFactor(ops, sym, ops.asarray(values))
    b = rng.standard_normal(X.shape[0])
    for scale in (1.0, 5.0):
        if scale != 1.0:
            factor.refactor(ops.asarray(values * scale))
        L = np.linalg.cholesky(dense[np.ix_(sym.order, sym.order)] * scale)
        panels = ops.to_host(factor.buffer)
        for s in range(sym.n_supernodes):
            a, e = int(sym.bounds[s]), int(sym.bounds[s + 1])
            rows = np.concatenate([np.arange(a, e), sym.rows[s]])
            block = panels[sym.offsets[s]:sym.offsets[s + 1]].reshape((rows.size, e - a),
                                                                      order="F")
            want = L[np.ix_(rows, np.arange(a, e))]
            np.testing.assert_allclose(np.tril(block, 0) if block.shape[0] else block,
                                       np.tril(want, 0), rtol=0, atol=1e-12 * np.abs(L).max())
        assert factor.logdet() == pytest.approx(np.linalg.slogdet(dense * scale)[1],
                                                rel=1e-12)
        assert_allclose_rel(ops.to_host(factor.solve(ops.asarray(b))),
                            np.linalg.solve(dense * scale, b), 1e-10)
        B = rng.standard_normal((X.shape[0], 7))
        assert_allclose_rel(ops.to_host(factor.solve(ops.asarray(B))),
                            np.linalg.solve(dense * scale, B), 1e-10)
    batched = sum(m.size for level in sym.batch_classes().values() for m, *_ in level)
    assert sum(calls) == (2 * batched if route == "batched" else 0)
    # four solves, each forward and back through every batched supernode
    assert sum(solved) == (8 * batched if route == "batched" else 0)
    assert route == "one by one" or len(calls) > 2 * sum(map(len, sym.batch_classes().values()))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("route", ["batched", "one by one"])
@pytest.mark.parametrize("kept", [True, False])
def test_kept_indices_serve_every_later_factorisation(rng, monkeypatch, device, route,
                                                      kept):
    """The index arrays kept from the first factorisation (where stacks and updates
    lie in the panels) serve the refactorisations, solves and selected inverse after
    it, each made once; with no room nothing is kept. Either way L, solves and
    ``A⁻¹`` on the pattern equal the dense ones for every matrix, after a
    refactorisation that failed too (its batches went one by one)."""
    from skgpu.backends import _supernodal

    monkeypatch.setattr(type(get_backend(device)), "batched_blocks", True)  # (CPU too)
    if route == "one by one":
        monkeypatch.setattr(_supernodal, "BATCH_WIDTH", 0)
    monkeypatch.setattr(_supernodal, "UPDATE_ENTRIES", 30_000)  # several pieces
    if kept:
        monkeypatch.setattr(type(get_backend(device)), "free_bytes", lambda self: 10**12)
    else:
        monkeypatch.setattr(_supernodal, "INDEX_CACHE_FRACTION", 0.0)
    made = []
    for name in ("_update_targets_of", "_stack_positions_of", "_pair_positions_of",
                 "_stack_rows_of"):
        real = getattr(SupernodalFactor, name)
        monkeypatch.setattr(SupernodalFactor, name,
                            lambda self, *a, real=real, name=name: made.append(name)
                            or real(self, *a))
    ops = get_backend(device)
    X = _points(rng, "uniform", 1500, 2)
    S, values, dense, _ = _system(rng, X, 0.05)
    sym = SupernodalSymbolic.from_points(X, S.indptr, S.indices, 0.05, leaf_size=24)
    rows, cols = S.nonzero()
    diagonal = np.repeat(np.arange(X.shape[0]), np.diff(S.indptr)) == S.indices
    factor = None
    for step, shift in enumerate([0.0, 0.5, -10.0, 2.0]):
        A = dense + shift * np.eye(X.shape[0])
        v = values + shift * diagonal
        if factor is None:
            factor = SupernodalFactor(ops, sym, ops.asarray(v))
        elif shift < 0:  # not positive definite: the batches fail, then one by one
            with pytest.raises(np.linalg.LinAlgError):
                factor.refactor(ops.asarray(v))
            continue
        else:
            factor.refactor(ops.asarray(v))
        if step == 0:
            first = len(made)
        b = rng.standard_normal(X.shape[0])
        assert_allclose_rel(ops.to_host(factor.solve(b)), np.linalg.solve(A, b), 1e-10)
        assert_allclose_rel(ops.to_host(factor.inverse_on(rows, cols)),
                            np.linalg.inv(A)[rows, cols], 1e-9)
        assert factor.logdet() == pytest.approx(np.linalg.slogdet(A)[1], rel=1e-11)
        if step == 0:
            after_first = len(made)
    assert first > 0
    kept_any = bool(factor._index_cache)
    assert kept_any == kept
    if kept:  # made once each: the failed refactorisation made its one-by-one groups
        assert len(made) == len(set(factor._index_cache)) >= after_first
    else:
        assert len(made) > after_first
    factor.free()
    assert factor._index_cache == {}


def test_the_cpu_goes_one_by_one(rng, monkeypatch):
    """On the CPU (``batched_blocks`` False: its padded stacks measured slower) no
    level batch is made: the factorisation, solves, selected inverse and forms go one
    supernode at a time, and equal the dense ones."""
    ops = get_backend("cpu")
    assert not ops.batched_blocks
    used = []
    for name in ("_factor_batch", "_solve_batch", "_selected_batch", "_forward_batch",
                 "_invert_blocks"):
        monkeypatch.setattr(SupernodalFactor, name,
                            lambda self, *a, name=name, **k: used.append(name))
    X = _points(rng, "uniform", 1200, 2)
    S, values, dense, kernel = _system(rng, X, 0.05)
    sym = SupernodalSymbolic.from_points(X, S.indptr, S.indices, 0.05, leaf_size=24)
    assert sym.batch_classes()  # there would be batches
    factor = SupernodalFactor(ops, sym, values)
    b = rng.standard_normal(X.shape[0])
    assert_allclose_rel(factor.solve(b), np.linalg.solve(dense, b), 1e-10)
    inverse = np.linalg.inv(dense)
    rows, cols = S.nonzero()
    assert_allclose_rel(factor.inverse_on(rows, cols), inverse[rows, cols], 1e-9)
    _assert_forms_exact(ops, factor, kernel(rng.uniform(0, 1, (40, 2)), X), dense)
    assert used == []


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("route", ["grouped", "relative"])
def test_updates_past_the_budget_go_in_blocks(rng, monkeypatch, device, route):
    """A supernode whose update product alone is past ``UPDATE_ENTRIES`` subtracts it in
    blocks of columns (the top separators at ten million points), grouped with target
    arrays (the GPU's way) or by relative indices a run at a time (the CPU's), no block
    past the budget: L still equals the dense Cholesky factor on its structure, and
    solves agree."""
    from skgpu.backends import _supernodal

    monkeypatch.setattr(_supernodal, "BATCH_WIDTH", 0)  # every update one supernode's
    monkeypatch.setattr(type(get_backend(device)), "batched_blocks", route == "grouped")
    ops = get_backend(device)
    X = _points(rng, "uniform", 1500, 2)
    S, values, dense, _ = _system(rng, X, 0.05)
    sym = SupernodalSymbolic.from_points(X, S.indptr, S.indices, 0.05, leaf_size=32)
    r = sym.heights - sym.widths
    budget = int(np.sort(r ** 2)[-8]) // 2  # the largest products go in blocks
    monkeypatch.setattr(_supernodal, "UPDATE_ENTRIES", budget)
    blocked, products = [], []
    real = SupernodalFactor._extend_add
    monkeypatch.setattr(SupernodalFactor, "_extend_add",
                        lambda self, s: blocked.append(s) or real(self, s))
    real_gemm = type(ops).gemm
    monkeypatch.setattr(type(ops), "gemm", lambda self, *a, **k: (
        lambda out: products.append(out.size) or out)(real_gemm(self, *a, **k)))
    factor = SupernodalFactor(ops, sym, ops.asarray(values))
    monkeypatch.setattr(type(ops), "gemm", real_gemm)
    # by relative indices a run at a time: the supernodes past the budget (grouped),
    # every supernode with rows below its block (relative); no product past the
    # budget, and some runs took several blocks
    big = np.flatnonzero(r ** 2 > budget)
    assert big.size >= 8
    assert sorted(blocked) == (big.tolist() if route == "grouped"
                               else np.flatnonzero(r > 0).tolist())
    assert 0 < max(products) <= budget
    runs = sum(int(sym.run_first[s + 1] - sym.run_first[s]) for s in blocked)
    assert len(products) > runs
    L = np.linalg.cholesky(dense[np.ix_(sym.order, sym.order)])
    panels = ops.to_host(factor.buffer)
    for s in range(sym.n_supernodes):
        a, e = int(sym.bounds[s]), int(sym.bounds[s + 1])
        rows = np.concatenate([np.arange(a, e), sym.rows[s]])
        block = panels[sym.offsets[s]:sym.offsets[s + 1]].reshape((rows.size, e - a),
                                                                  order="F")
        np.testing.assert_allclose(np.tril(block), np.tril(L[np.ix_(rows, np.arange(a, e))]),
                                   rtol=0, atol=1e-12 * np.abs(L).max())
    b = rng.standard_normal(X.shape[0])
    assert_allclose_rel(ops.to_host(factor.solve(ops.asarray(b))),
                        np.linalg.solve(dense, b), 1e-10)
    # many right-hand sides go in blocks of columns (here of 3)
    monkeypatch.setattr(_supernodal, "CHUNK_BYTES", 8 * 3 * (X.shape[0] + 1))
    B = rng.standard_normal((X.shape[0], 8))
    assert_allclose_rel(ops.to_host(factor.solve(ops.asarray(B))),
                        np.linalg.solve(dense, B), 1e-10)


@pytest.mark.parametrize("device", DEVICES)
def test_a_batch_not_positive_definite_is_found_one_by_one(rng, monkeypatch, device):
    """A matrix that is not positive definite only in one small supernode of a batched
    level: the batch is refused, its supernodes go one by one, and the error names the
    leading minor in the fill-reducing order."""
    monkeypatch.setattr(type(get_backend(device)), "batched_blocks", True)  # (CPU too)
    ops = get_backend(device)
    X = _points(rng, "uniform", 1200, 2)
    S, values, dense, _ = _system(rng, X, 0.05)
    sym = SupernodalSymbolic.from_points(X, S.indptr, S.indices, 0.05, leaf_size=24)
    # a supernode of the highest batched level: the levels below it factor in batches
    # first (a level's other batches may not exist, and once the victim's panel fails,
    # its ancestors' batches see what it left and fail too)
    classes = sym.batch_classes()
    members = classes[max(level for level in classes if level < sym.level.max())][0][0]
    victim = int(members[len(members) // 2])
    column = int(sym.bounds[victim]) + 1  # its second column, in the new order
    bad = values.copy()
    point = int(sym.order[column])
    diagonal = np.flatnonzero((np.repeat(np.arange(1200), np.diff(S.indptr)) == point)
                              & (S.indices == point))
    bad[diagonal] = -1.0
    outcomes = []
    real = SupernodalFactor._factor_batch
    monkeypatch.setattr(SupernodalFactor, "_factor_batch",
                        lambda self, *a: outcomes.append(real(self, *a)) or outcomes[-1])
    with pytest.raises(np.linalg.LinAlgError,
                       match=f"leading minor of order {column + 1} .* not positive"):
        SupernodalFactor(ops, sym, ops.asarray(bad), what="kernel matrix")
    assert True in outcomes and False in outcomes[outcomes.index(True):]


@pytest.mark.parametrize("device", DEVICES)
def test_not_positive_definite_is_refused(rng, device):
    ops = get_backend(device)
    X = _points(rng, "uniform", 400, 2)
    S, values, dense, _ = _system(rng, X, 0.1)
    sym = SupernodalSymbolic.from_points(X, S.indptr, S.indices, 0.1, leaf_size=32)
    diagonal = np.repeat(np.arange(400), np.diff(S.indptr)) == S.indices
    bad = values.copy()
    bad[diagonal] -= 2.0  # far from positive definite
    with pytest.raises(np.linalg.LinAlgError, match="not positive"):
        SupernodalFactor(ops, sym, ops.asarray(bad), what="kernel matrix")


KERNELS = {
    "c_wendland_white": lambda: C(1.3) * Wendland(0.08),
    "tapered_matern": lambda: Tapered(Matern(0.05, nu=1.5), taper_range=0.1),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(KERNELS))
def test_gp_variance_through_the_supernodal_factor_equals_dense(rng, monkeypatch, device,
                                                                 name):
    """The sparse GP's std, cov and samples through skgpu's factor (where the
    likelihood's factor keeps L to itself: cuDSS on the GPU; on the CPU made so here)
    equal the dense path's."""
    ops = get_backend(device)
    skip_unless_supported(ops, "sparse_spd")
    monkeypatch.setattr(_cpu.CholmodSPDFactor, "exposes_factor", False)
    monkeypatch.setattr(_cpu.SparseSPDFactor, "exposes_factor", False)
    kernel = KERNELS[name]() + WhiteKernel(0.05)
    X = rng.uniform(0, 1, (1500, 2))
    y = np.sin(20 * X[:, 0]) * np.cos(15 * X[:, 1]) + 0.1 * rng.standard_normal(1500)
    X_test = np.vstack([rng.uniform(0, 1, (200, 2)), X[:5], [[4.0, 4.0]]])
    params = dict(kernel=kernel, optimizer=None, alpha=1e-8)
    with skgpu.config_context(device=device):
        dense = GaussianProcessRegressor(cholesky="dense", **params).fit(X, y)
        sparse = GaussianProcessRegressor(cholesky="sparse", **params).fit(X, y)
        mean_s, std_s = sparse.predict(X_test, return_std=True)
        mean_d, std_d = dense.predict(X_test, return_std=True)
        cov_s = sparse.predict(X_test[:60], return_cov=True)[1]
        cov_d = dense.predict(X_test[:60], return_cov=True)[1]
        # the factor is made once and reused while the kernel is the same
        state = sparse._device_cache["state"][1]
        first = state.lml.variance_factor(sparse.kernel_)
        assert state.lml.variance_factor(sparse.kernel_) is first
        assert isinstance(first, SupernodalFactor)
    assert_allclose_rel(mean_s, mean_d, 1e-8)
    assert_allclose_rel(std_s, std_d, 1e-8)
    assert_allclose_rel(cov_s, cov_d, 1e-8)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", ["uniform", "clustered", "duplicates"])
@pytest.mark.parametrize("d", [1, 2, 3])
def test_selected_inverse_equals_the_dense_inverse(rng, device, kind, d):
    """The inverse on the pattern by Takahashi's recurrences on the supernodal factor,
    against the dense inverse (float64), in several supernodes and levels."""
    ops = get_backend(device)
    X = _points(rng, kind, 700, d)
    radius = {1: 0.01, 2: 0.07, 3: 0.15}[d]
    S, values, dense, _ = _system(rng, X, radius)
    sym = SupernodalSymbolic.from_points(X, S.indptr, S.indices, radius, leaf_size=40)
    assert sym.level.max() >= 2 or kind == "duplicates"
    factor = SupernodalFactor(ops, sym, ops.asarray(values))
    coo = S.tocoo()
    got = ops.to_host(factor.inverse_on(coo.row, coo.col))
    want = np.linalg.inv(dense)[coo.row, coo.col]
    assert_allclose_rel(got, want, 1e-10)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("seed", [0, 1])
def test_inverse_on_keeps_where_the_pairs_are(monkeypatch, device, seed):
    """Where the pairs lie in Z is searched once for the same two arrays and kept
    across refactorisations (the inverse then that of the new values); other arrays,
    or a freed factor, search again; with no room to keep them, every call searches."""
    ops = get_backend(device)
    rng = np.random.default_rng(seed)
    X = _points(rng, "uniform", 600, 2)
    S, values, dense, _ = _system(rng, X, 0.07)
    sym = SupernodalSymbolic.from_points(X, S.indptr, S.indices, 0.07, leaf_size=40)
    factor = SupernodalFactor(ops, sym, ops.asarray(values))
    searches = []
    real = SupernodalFactor._positions
    monkeypatch.setattr(SupernodalFactor, "_positions",
                        lambda self, r, c: searches.append(1) or real(self, r, c))
    coo = S.tocoo()
    rows, cols = ops.asarray(coo.row), ops.asarray(coo.col)
    for step in range(3):
        scaled = dense + step * np.eye(dense.shape[0])
        if step:
            factor.refactor(ops.asarray(values + step * (coo.row == coo.col)))  # (CSR order)
        got = ops.to_host(factor.inverse_on(rows, cols))
        assert_allclose_rel(got, np.linalg.inv(scaled)[coo.row, coo.col], 1e-10)
    assert len(searches) == 1
    factor.inverse_on(rows.copy(), cols)  # other arrays: searched (and kept instead)
    assert len(searches) == 2
    factor.free()
    factor.refactor(ops.asarray(values))
    got = ops.to_host(factor.inverse_on(rows, cols))
    assert_allclose_rel(got, np.linalg.inv(dense)[coo.row, coo.col], 1e-10)
    assert len(searches) == 3
    factor._index_room = 0  # no room: nothing kept
    factor._kept_positions = None
    factor.inverse_on(rows, cols)
    factor.inverse_on(rows, cols)
    assert len(searches) == 5


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("route", ["batched", "one by one", "batches do not fit"])
@pytest.mark.parametrize("kind", ["uniform", "clustered"])
def test_selected_inverse_by_level_batches_and_one_by_one(rng, monkeypatch, device, route,
                                                          kind):
    """The selected inverse with a level's small supernodes at once (their ``Z_RR``
    gathered into padded stacks, batched products with the blocks the forward solves
    use), and without: equal to the dense inverse on the pattern and on L's whole
    structure, the batched step taken exactly where it should be, again after a
    refactorisation with new values."""
    from skgpu.backends import _supernodal

    monkeypatch.setattr(type(get_backend(device)), "batched_blocks", True)  # (CPU too)
    if route == "one by one":
        monkeypatch.setattr(_supernodal, "BATCH_WIDTH", 0)
    if route == "batches do not fit":
        monkeypatch.setattr(_supernodal, "BATCH_MEMORY_FRACTION", 0.0)
        monkeypatch.setattr(type(get_backend(device)), "free_bytes", lambda self: 10**12)
    # a small budget: the batches' stacks go in several pieces
    monkeypatch.setattr(_supernodal, "UPDATE_ENTRIES", 20_000)
    calls = []
    real = SupernodalFactor._selected_batch
    monkeypatch.setattr(SupernodalFactor, "_selected_batch",
                        lambda self, *a: calls.append(len(a[1])) or real(self, *a))
    ops = get_backend(device)
    X = _points(rng, kind, 1200, 2)
    S, values, dense, _ = _system(rng, X, 0.05)
    sym = SupernodalSymbolic.from_points(X, S.indptr, S.indices, 0.05, leaf_size=24)
    assert sym.level.max() >= 3
    factor = SupernodalFactor(ops, sym, ops.asarray(values))
    coo = S.tocoo()
    for scale in (1.0, 3.0):
        if scale != 1.0:
            factor.refactor(ops.asarray(values * scale))
        inverse = np.linalg.inv(dense * scale)
        got = ops.to_host(factor.inverse_on(coo.row, coo.col))
        assert_allclose_rel(got, inverse[coo.row, coo.col], 1e-10)
        # every stored entry of the selected inverse, against the dense one
        Z = ops.to_host(factor.selected_inverse())
        permuted = inverse[np.ix_(sym.order, sym.order)]
        for s in range(sym.n_supernodes):
            a, b = int(sym.bounds[s]), int(sym.bounds[s + 1])
            rows = np.concatenate([np.arange(a, b), sym.rows[s]])
            block = Z[sym.offsets[s]:sym.offsets[s + 1]].reshape((rows.size, b - a),
                                                                  order="F")
            assert_allclose_rel(block, permuted[np.ix_(rows, np.arange(a, b))], 1e-10)
    assert (len(calls) > 0) == (route == "batched")
    if route == "batched":  # each batched supernode once a selected inverse (four of
        # them), its level's stacks in more pieces than there are stacks
        stacks = [members for level in factor._batches.values() for members, *_ in level]
        assert sum(calls) == 4 * sum(m.size for m in stacks)
        assert len(calls) > 4 * len(stacks)


@pytest.mark.parametrize("device", DEVICES)
def test_a_factor_that_does_not_fit_is_refused_before_any_numeric_work(rng, device,
                                                                       monkeypatch):
    """The bytes from the symbolic structure against the backend's free memory: past
    it, a MemoryError (the GPU's GPUOutOfMemoryError) naming the bytes needed and free
    and about the largest n that fits; the likelihood's gradient then falls back to the
    split one when only the selected inverse does not fit."""
    ops = get_backend(device)
    X = rng.uniform(0, 1, (2000, 2))
    radius = np.sqrt(30 / (np.pi * 2000))
    S, values, dense, _ = _system(rng, X, radius)
    sym = SupernodalSymbolic.from_points(X, S.indptr, S.indices, radius, leaf_size=64)
    total, panels = sym.device_bytes()
    assert panels == 8 * sym.nnz and total > panels
    assert sym.device_bytes(selected_inverse=True)[0] >= total + panels
    assert sym.pattern_bytes() == 36 * S.nnz
    assert sym.largest_n(total + sym.pattern_bytes()) == pytest.approx(2000, rel=0.01)
    assert sym.largest_n(total) < 2000
    assert sym.largest_n(4 * (total + sym.pattern_bytes())) > 3 * 2000
    monkeypatch.setattr(type(ops), "free_bytes", lambda self: total // 2)
    error = skgpu.GPUOutOfMemoryError if device == "gpu" else MemoryError
    with pytest.raises(error, match=r"needs about .* GB at n = 2,000 .* GB free\. .*"
                                    r"largest n that fits is about 1,"):
        SupernodalFactor(ops, sym, ops.asarray(values))
    monkeypatch.setattr(type(ops), "free_bytes", lambda self: 10 * total)
    factor = SupernodalFactor(ops, sym, ops.asarray(values))
    monkeypatch.setattr(type(ops), "free_bytes", lambda self: panels // 2)
    with pytest.raises(MemoryError, match="selected inverse"):  # beside it, no room
        factor.selected_inverse()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("g,w", [(1, 1), (7, 5), (40, 33)])
def test_the_batched_cholesky_and_its_refusals(rng, device, g, w):
    """The backend's batched Cholesky equals NumPy's block by block (upper triangles
    zero); one block not positive definite, or with a NaN or an infinity on its
    diagonal, refuses the whole stack."""
    ops = get_backend(device)
    M = rng.standard_normal((g, w, w))
    A = M @ M.transpose(0, 2, 1) + w * np.eye(w)
    L = ops.to_host(ops.cholesky_batched(ops.asarray(A)))
    np.testing.assert_allclose(L, np.linalg.cholesky(A), rtol=1e-12, atol=1e-12)
    assert np.all(np.triu(L, 1) == 0)
    for bad in (-1.0, np.nan, np.inf):
        B = A.copy()
        B[g // 2, w - 1, w - 1] = bad
        assert ops.cholesky_batched(ops.asarray(B)) is None, bad


@pytest.mark.parametrize("device", DEVICES)
def test_kept_indices_narrow_only_where_they_fit(device):
    from skgpu.backends._supernodal import _fits_int32

    ops = get_backend(device)
    for values, fits in (([0, 5, 2**31 - 1], True), ([-(2**31), -1], True),
                         ([3, 2**31], False), ([-(2**31) - 1, 0], False),
                         ([], True)):
        assert _fits_int32(ops.asarray(np.array(values, dtype=np.int64))) is fits, values
