"""Compactly supported kernels and the sparse-Cholesky path of GaussianProcessRegressor."""

import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import DEVICES
from sklearn.base import clone
from sklearn.gaussian_process import GaussianProcessRegressor as SkGPR
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C
from sklearn.gaussian_process.kernels import Matern
from skgpu_testing import assert_allclose_rel

import skgpu
from skgpu.backends import _cpu, get_backend
from skgpu.gaussian_process import GaussianProcessRegressor
from skgpu.gaussian_process import _sparse
from skgpu.gaussian_process.kernels import Tapered, Wendland

# The optimizer on small test data reaches its bounds (ConvergenceWarning); the tests
# compare values, not convergence.
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

COMPACT = {
    "wendland0": Wendland(0.3, smoothness=0),
    "wendland1": Wendland(0.3, smoothness=1),
    "wendland2": Wendland(0.3, smoothness=2),
    "wendland3": Wendland(0.3, smoothness=3),
    "wendland_fixed_dim3": Wendland(0.4, smoothness=1, dimension=3),
    "tapered_matern": Tapered(C(2.0) * Matern(0.2, nu=1.5), taper_range=0.35),
    "tapered_rbf_ard": Tapered(RBF([0.2, 0.3]), taper_range=0.3, taper_smoothness=2),
    "c_wendland_white": C(1.5) * Wendland(0.25) + WhiteKernel(0.1),
}


@pytest.mark.parametrize("name", list(COMPACT))
def test_kernel_conventions(rng, name):
    kernel = COMPACT[name]
    X = rng.uniform(0, 1, (40, 2))
    K, G = kernel(X, eval_gradient=True)
    # symmetric, positive semi-definite, one on the diagonal (before the white noise)
    np.testing.assert_allclose(K, K.T, atol=1e-15)
    assert np.linalg.eigvalsh(K).min() > -1e-12
    np.testing.assert_allclose(np.diag(K), kernel.diag(X), rtol=1e-14)
    # zero beyond the support
    radius = _sparse.support_radius(kernel)
    dist = np.linalg.norm(X[:, None] - X[None, :], axis=2)
    off = ~np.eye(40, dtype=bool)
    assert np.all(K[(dist >= radius) & off] == 0.0)
    # gradient against central differences in log space
    theta = kernel.theta
    assert G.shape == (40, 40, theta.size)
    for j in range(theta.size):
        step = np.zeros_like(theta)
        step[j] = 1e-6
        fd = (kernel.clone_with_theta(theta + step)(X)
              - kernel.clone_with_theta(theta - step)(X)) / 2e-6
        np.testing.assert_allclose(G[:, :, j], fd, atol=1e-7 * max(1, np.abs(fd).max()))
    # clone, parameters, theta round trip, K(X, Y)
    twin = clone(kernel)
    assert twin == kernel and twin is not kernel
    twin.theta = theta + 0.2
    np.testing.assert_allclose(twin.theta, theta + 0.2)
    assert twin != kernel
    assert set(kernel.get_params()) >= {h.name for h in kernel.hyperparameters}
    Y = rng.uniform(0, 1, (7, 2))
    np.testing.assert_allclose(kernel(X, Y), kernel(np.vstack([X, Y]))[:40, 40:],
                               atol=1e-15)


@pytest.mark.parametrize("dimension", [1, 2, 3])
@pytest.mark.parametrize("smoothness", [0, 1, 2, 3])
def test_wendland_positive_definite_in_its_dimension(rng, dimension, smoothness):
    X = rng.uniform(0, 1, (150, dimension))
    K = Wendland(0.5, smoothness=smoothness)(X)
    assert np.linalg.eigvalsh(K).min() > -1e-10
    assert Wendland(0.5, smoothness=smoothness)(np.zeros((1, dimension)))[0, 0] == 1.0


def test_bad_smoothness():
    with pytest.raises(ValueError, match="smoothness must be 0, 1, 2 or 3"):
        Wendland(1.0, smoothness=4)(np.zeros((2, 1)))


def test_scikit_learn_gpr_accepts_the_kernels(rng):
    X = rng.uniform(0, 1, (60, 2))
    y = np.sin(6 * X[:, 0])
    for kernel in (C(1.0) * Wendland(0.5) + WhiteKernel(0.01),
                   Tapered(Matern(0.3), 0.6) + WhiteKernel(0.01)):
        gpr = SkGPR(kernel, random_state=0).fit(X, y)
        assert np.all(np.isfinite(gpr.predict(X)))


def test_support_and_path_resolution():
    assert _sparse.support_radius(C(2.0) * Wendland(0.3) + WhiteKernel()) == 0.3
    assert _sparse.support_radius(Tapered(RBF(), 0.7) * C()) == 0.7
    assert _sparse.support_radius(Wendland(0.3) + RBF()) == np.inf
    assert "not compactly supported" in _sparse.sparse_unsupported_reason(RBF())
    assert _sparse.sparse_unsupported_reason(Tapered(RBF(), 1.0)) is None
    X, y = np.random.default_rng(0).uniform(size=(30, 2)), np.arange(30.0)
    assert GaussianProcessRegressor(Wendland(0.1) + WhiteKernel(), optimizer=None).fit(
        X, y).cholesky_ == "sparse"
    assert GaussianProcessRegressor(RBF(), optimizer=None).fit(X, y).cholesky_ == "dense"
    assert GaussianProcessRegressor(Wendland(0.5), cholesky="dense",
                                    optimizer=None).fit(X, y).cholesky_ == "dense"
    with pytest.raises(ValueError, match="cholesky='sparse' is not possible"):
        GaussianProcessRegressor(RBF(), cholesky="sparse").fit(X, y)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dimension", [1, 2, 3, 5])
def test_device_neighbour_search_matches_kd_tree(rng, device, dimension):
    """The cell list (d <= 3) and tiled all-pairs search the GPU uses find exactly the
    pairs scipy's k-d tree finds (run here on either backend's arrays)."""
    ops = get_backend(device)
    n = 1500
    X = rng.uniform(0, 1, (n, dimension))
    radius = {1: 0.004, 2: 0.05, 3: 0.12, 5: 0.35}[dimension]
    rows, cols = _sparse.neighbour_pairs(X, None, radius)
    expected = np.sort(rows * n + cols)
    Xd = ops.asarray(X)
    if dimension <= 3:
        r, c = _sparse.cell_list_pairs(ops.xp, Xd, radius)
        found = ops.to_host(r * n + c)
        assert np.all(np.diff(found) > 0), "cell-list pairs come sorted, row-major"
        np.testing.assert_array_equal(found, expected)
    r, c = _sparse.brute_force_pairs(ops, Xd, radius, block_bytes=8 * n * 97)
    np.testing.assert_array_equal(np.sort(ops.to_host(r * n + c)), expected)


@pytest.mark.parametrize("device", DEVICES)
def test_cell_list_with_widely_spread_points(rng, device):
    """Cells are looked up among the occupied ones only: a dense grid here would have
    10^12 cells."""
    ops = get_backend(device)
    X = np.vstack([rng.uniform(0, 1e4, (500, 3)), rng.uniform(0, 1, (1500, 3))])
    rows, cols = _sparse.neighbour_pairs(X, None, 0.1)
    r, c = _sparse.cell_list_pairs(ops.xp, ops.asarray(X), 0.1)
    np.testing.assert_array_equal(ops.to_host(r * 2000 + c), np.sort(rows * 2000 + cols))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dimension", [1, 2, 3])
@pytest.mark.parametrize("kind", ["inside", "outside", "duplicates", "offset"])
def test_cell_list_cross_pairs_match_kd_tree(rng, device, dimension, kind):
    """The test-to-training pairs the GPU's predict searches by the cell list are exactly
    scipy's k-d tree's: test points among the training points, past their box on every
    side (some reaching none), repeated, and far from the origin."""
    ops = get_backend(device)
    radius = {1: 0.004, 2: 0.05, 3: 0.12}[dimension]
    X = rng.uniform(0, 1, (1200, dimension))
    if kind == "inside":
        Y = rng.uniform(0, 1, (700, dimension))
    elif kind == "outside":
        Y = rng.uniform(-0.5, 1.5, (700, dimension))
    elif kind == "duplicates":
        Y = np.repeat(X[rng.choice(1200, 100)], 4, axis=0)
        X = np.vstack([X, X[:300]])
    else:
        X, Y = X + 1e6, rng.uniform(0, 1, (700, dimension)) + 1e6
    n = X.shape[0]
    rows, cols = _sparse.neighbour_pairs(Y, X, radius)
    expected = np.sort(rows * n + cols)
    r, c = _sparse.cell_list_pairs(ops.xp, ops.asarray(Y), radius, Y=ops.asarray(X))
    found = ops.to_host(r * n + c)
    assert np.all(np.diff(found) > 0), "cell-list pairs come sorted, row-major"
    np.testing.assert_array_equal(found, expected)
    assert expected.size > 0 or kind == "outside"


@pytest.mark.parametrize("device", DEVICES)
def test_cell_list_cross_pairs_none_within_reach(device):
    ops = get_backend(device)
    X, Y = np.zeros((5, 2)), np.full((3, 2), 10.0)
    r, c = _sparse.cell_list_pairs(ops.xp, ops.asarray(Y), 0.5, Y=ops.asarray(X))
    assert r.size == 0 and c.size == 0
    r, c = _sparse.cell_list_pairs(ops.xp, ops.asarray(Y[:0]), 0.5, Y=ops.asarray(X))
    assert r.size == 0 and c.size == 0


def _field(rng, n):
    """A rough 2-D field: correlation lengths a few times the point spacing."""
    X = rng.uniform(0, 1, (n, 2))
    y = (np.sin(25 * X[:, 0]) * np.cos(20 * X[:, 1]) + 0.5 * np.sin(40 * X[:, 0] * X[:, 1])
         + 0.1 * rng.standard_normal(n))
    return X, y


SPARSE_VS_DENSE = {
    "c_wendland_white": C(1.0) * Wendland(0.08, support_radius_bounds=(0.02, 0.2))
    + WhiteKernel(0.05),
    "tapered_matern": Tapered(C(1.0) * Matern(0.05, nu=1.5), taper_range=0.1)
    + WhiteKernel(0.05),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(SPARSE_VS_DENSE))
@pytest.mark.parametrize("n_targets", [None, 2])
def test_sparse_path_equals_dense_path(rng, device, name, n_targets):
    ops = get_backend(device)
    from skgpu_testing import skip_unless_supported

    skip_unless_supported(ops, "sparse_spd")
    kernel = SPARSE_VS_DENSE[name]
    X, y = _field(rng, 2000)
    if n_targets:
        y = np.column_stack([y, -2 * y + 1])
    X_test = rng.uniform(0, 1, (300, 2))
    params = dict(kernel=kernel, optimizer=None, alpha=1e-8, normalize_y=True)
    with skgpu.config_context(device=device):
        dense = GaussianProcessRegressor(cholesky="dense", **params).fit(X, y)
        sparse = GaussianProcessRegressor(cholesky="sparse", **params).fit(X, y)
        assert sparse.cholesky_ == "sparse" and sparse.backend_ == device
        assert sparse.L_ is None
        assert sparse.log_marginal_likelihood_value_ == pytest.approx(
            dense.log_marginal_likelihood_value_, rel=1e-8)
        assert_allclose_rel(sparse.alpha_, dense.alpha_, 1e-8)
        theta = kernel.theta + 0.1
        lml_d, grad_d = dense.log_marginal_likelihood(theta, eval_gradient=True)
        lml_s, grad_s = sparse.log_marginal_likelihood(theta, eval_gradient=True)
        assert lml_s == pytest.approx(lml_d, rel=1e-8)
        # central differences: the 1e-4, met with room to spare
        assert_allclose_rel(grad_s, grad_d, 1e-6)
        for a, b in zip(sparse.predict(X_test, return_std=True),
                        dense.predict(X_test, return_std=True)):
            assert_allclose_rel(a, b, 1e-8)
        cov_s = sparse.predict(X_test[:50], return_cov=True)[1]
        cov_d = dense.predict(X_test[:50], return_cov=True)[1]
        assert_allclose_rel(cov_s, cov_d, 1e-8)


@pytest.mark.parametrize("device", DEVICES)
def test_sparse_fit_optimizes_to_the_dense_optimum(rng, device):
    from skgpu_testing import skip_unless_supported

    skip_unless_supported(get_backend(device), "sparse_spd")
    X, y = _field(rng, 800)
    kernel = SPARSE_VS_DENSE["tapered_matern"]
    with skgpu.config_context(device=device):
        dense = GaussianProcessRegressor(kernel, cholesky="dense", random_state=0).fit(X, y)
        sparse = GaussianProcessRegressor(kernel, random_state=0).fit(X, y)
    assert sparse.cholesky_ == "sparse"
    assert sparse.log_marginal_likelihood_value_ == pytest.approx(
        dense.log_marginal_likelihood_value_, rel=1e-7)
    assert_allclose_rel(sparse.kernel_.theta, dense.kernel_.theta, 1e-3, atol_scale=1.0)
    assert_allclose_rel(sparse.predict(X[:100]), dense.predict(X[:100]), 1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_the_pattern_is_the_support_unless_a_hyperparameter_moves_it(rng, device):
    """No hyperparameter moves a Tapered kernel's range or a fixed Wendland support: the
    pattern is the support itself (no pairs that are zeros); a Wendland support radius
    being fitted gets the slack its steps reuse. The likelihood is the dense one's either
    way."""
    tapered = C(1.0) * Tapered(Matern(0.05, nu=1.5), taper_range=0.1) + WhiteKernel(0.05)
    fixed = C(1.0) * Wendland(0.08, support_radius_bounds="fixed") + WhiteKernel(0.05)
    free = C(1.0) * Wendland(0.08, support_radius_bounds=(0.02, 0.2)) + WhiteKernel(0.05)
    assert [_sparse.radius_moves(k) for k in (tapered, fixed, free)] == [False, False, True]
    X, y = _field(rng, 600)
    slack = np.exp(_sparse.FD_STEP) * _sparse._PATTERN_GROWTH  # (the gradient's step too)
    for kernel, widest in ((tapered, 0.1 * 1.000001), (fixed, 0.08 * 1.000001),
                           (free, 0.08 * slack * 1.000001)):
        with skgpu.config_context(device=device):
            lml = _sparse.SparseLogMarginalLikelihood(get_backend(device), X, y, 1e-8,
                                                      factorization="supernodal")
            value, grad = lml(kernel, eval_gradient=True)
        assert widest / 1.1 < lml.pattern.radius <= widest
        dense = SkGPR(kernel, alpha=1e-8, optimizer=None).fit(X, y)
        want, want_grad = dense.log_marginal_likelihood(kernel.theta, eval_gradient=True)
        assert value == pytest.approx(want, rel=1e-10)
        assert_allclose_rel(grad, want_grad, 1e-8, atol_scale=1.0)


def test_pattern_and_analysis_are_reused(rng, monkeypatch):
    X, y = _field(rng, 500)
    built = []
    original = _sparse._Pattern.__init__

    def counting(self, *args, **kwargs):
        built.append(args[-1])
        original(self, *args, **kwargs)

    monkeypatch.setattr(_sparse._Pattern, "__init__", counting)
    gpr = GaussianProcessRegressor(SPARSE_VS_DENSE["tapered_matern"], random_state=0)
    gpr.fit(X, y)
    assert len(built) == 1, "a fixed taper needs one pattern for the whole fit"
    lml = gpr._device_cache["state"][1].lml  # (what it copies, the state)
    assert lml.n_factorizations > 10  # refactorisations on that one pattern


@pytest.mark.parametrize("device", DEVICES)
def test_a_new_pattern_drops_what_the_old_one_made(rng, device):
    """The supernodal analysis and the variance factor are made once per pattern and go
    with it: a kernel whose support outgrows the pattern makes a new pattern, a new
    analysis and a new factor (nothing of the old one answers), and the variances on
    either pattern equal dense solves."""
    ops = get_backend(device)
    X, y = _field(rng, 600)
    kernel = Wendland(0.08, smoothness=1, dimension=2) + WhiteKernel(1e-2)
    lml = _sparse.SparseLogMarginalLikelihood(ops, X, y, 1e-10, factorization="backend")
    X_test = rng.uniform(0, 1, (40, 2))
    made = []
    for radius in (0.08, 0.2):  # (0.2: past the pattern's slack, a new one)
        kernel.k1.support_radius = radius
        lml._ensure_pattern(_sparse.support_radius(kernel))
        if made:  # the old pattern's analysis and factor are gone with it at once
            assert lml._symbolic_of is None and lml._variance is None
        factor = lml.variance_factor(kernel)
        assert lml.variance_factor(kernel) is factor  # kept while the values are
        assert lml._symbolic_of[0] is lml.pattern
        made.append((lml._symbolic_of[1], factor))
        K = kernel(X) + 1e-10 * np.eye(X.shape[0])
        Ks = kernel(X_test, X)
        forms = ops.to_host(factor.quadratic_forms(sp.csr_matrix(Ks)))
        exact = np.einsum("ij,ji->i", Ks, np.linalg.solve(K, Ks.T))
        np.testing.assert_allclose(forms, exact, rtol=1e-9, atol=1e-12)
        if radius == 0.08:
            first_pattern = lml.pattern
    assert lml.pattern is not first_pattern
    assert made[0][0] is not made[1][0] and made[0][1] is not made[1][1]


def test_sample_y_and_cov_limits(rng, monkeypatch):
    X, y = _field(rng, 300)
    gpr = GaussianProcessRegressor(SPARSE_VS_DENSE["c_wendland_white"], optimizer=None,
                                   random_state=0).fit(X, y)
    dense = GaussianProcessRegressor(SPARSE_VS_DENSE["c_wendland_white"], optimizer=None,
                                     cholesky="dense", random_state=0).fit(X, y)
    # Draws from the same N(mean, cov); rng.multivariate_normal's SVD makes single draws
    # sensitive to rounding, so compare the distribution: cov itself is compared to the
    # dense path in test_sparse_path_equals_dense_path.
    draws = gpr.sample_y(X[:20], 4000, random_state=1)
    assert draws.shape == (20, 4000)
    mean, cov = dense.predict(X[:20], return_cov=True)
    np.testing.assert_allclose(draws.mean(axis=1), mean, atol=5 * np.sqrt(cov.max() / 4000))
    np.testing.assert_allclose(np.cov(draws), cov, atol=0.1 * cov.max())
    monkeypatch.setattr(_sparse, "MAX_COV_POINTS", 10)
    with pytest.raises(ValueError, match="at most 10 points"):
        gpr.sample_y(X[:20])


def test_sparse_pickle_rebuilds_the_factor(rng):
    X, y = _field(rng, 400)
    gpr = GaussianProcessRegressor(SPARSE_VS_DENSE["tapered_matern"], optimizer=None).fit(
        X, y)
    expected = gpr.predict(X[:50], return_std=True)
    restored = pickle.loads(pickle.dumps(gpr))
    assert "_device_cache" not in restored.__dict__
    with skgpu.config_context(device="cpu"):
        for a, b in zip(restored.predict(X[:50], return_std=True), expected):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
def test_sparse_predict_in_padded_blocks(rng, monkeypatch, device):
    from skgpu.gaussian_process import _dense
    from skgpu_testing import skip_unless_supported

    skip_unless_supported(get_backend(device), "sparse_spd")
    X, y = _field(rng, 600)
    X_test = rng.uniform(0, 1, (101, 2))
    with skgpu.config_context(device=device):
        gpr = GaussianProcessRegressor(SPARSE_VS_DENSE["tapered_matern"], optimizer=None,
                                       cholesky="sparse").fit(X, y)
        whole = gpr.predict(X_test, return_std=True)
        monkeypatch.setattr(_dense, "_PREDICT_BLOCK_BYTES", 8 * 600 * 16)  # 16 points a block
        blocked = gpr.predict(X_test, return_std=True)
    for a, b in zip(blocked, whole):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


SPLIT_GRADIENT_KERNELS = {
    # scale and noise affine in K (trace from one shift difference), length differenced
    "c_tapered_white": (lambda r: C(1.0) * Tapered(Matern(r, nu=1.5), taper_range=r)
                        + WhiteKernel(0.01), 5, 1e-8),
    "tapered_c_white": (lambda r: Tapered(Matern(r, nu=1.5), taper_range=r) * C(2.0)
                        + WhiteKernel(0.01), 5, 1e-8),
    # no noise kernel: the scale's b is -alpha (GaussianProcessRegressor's alpha is the
    # only diagonal term); two ARD lengths differenced
    "c_tapered_ard": (lambda r: C(1.0) * Tapered(RBF([r, 2 * r]), taper_range=3 * r), 7,
                      1e-3),
    # a fixed scale leaves theta = (length, noise): 1 + 2 + 2
    "fixed_c": (lambda r: C(1.5, constant_value_bounds="fixed")
                * Tapered(Matern(r, nu=1.5), taper_range=r) + WhiteKernel(0.01), 5, 1e-8),
}


@pytest.fixture
def split_path(monkeypatch):
    """The differenced / split gradient on a backend: cuDSS on the GPU; on the CPU,
    SuperLU (CHOLMOD's factor gives the exact gradient by selected inversion instead)."""
    def on(device):
        if device == "cpu":
            monkeypatch.setattr(_cpu, "_cholmod", lambda: None)
            # named: without CHOLMOD "auto" would take skgpu's factor (exact gradient)
            monkeypatch.setitem(_sparse.SPARSE_FACTORIZATION, "cpu", "backend")
        return get_backend(device)
    return on


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(SPLIT_GRADIENT_KERNELS))
@pytest.mark.parametrize("n_targets", [1, 2])
def test_sparse_gradient_split_matches_the_exact_dense_gradient(rng, device, name,
                                                               n_targets, split_path):
    """Hyperparameters whose ∂K is a K + b I (checked on the values) get the exact
    quadratic term and a trace from one shift difference: fewer factorisations, and their
    gradient within 1e-8 of the dense path's exact one (central differences of the LML
    reach ~1e-9 to 4e-8 there)."""
    from skgpu_testing import skip_unless_supported

    ops = split_path(device)
    skip_unless_supported(ops, "sparse_spd")
    make, factorisations, alpha = SPLIT_GRADIENT_KERNELS[name]
    n = 1500
    X = rng.uniform(0, 1, (n, 2))
    y = np.sin(6 * X[:, 0]) * np.cos(4 * X[:, 1]) + 0.05 * rng.standard_normal(n)
    if n_targets == 2:
        y = np.column_stack([y, 0.5 - y])
    kernel = make(np.sqrt(30 / (np.pi * n)))
    theta = kernel.theta + 0.1
    with skgpu.config_context(device="cpu"):
        dense = GaussianProcessRegressor(kernel, optimizer=None, alpha=alpha,
                                         cholesky="dense").fit(X, y)
        value_d, grad_d = dense.log_marginal_likelihood(theta, eval_gradient=True)
    lml = _sparse.SparseLogMarginalLikelihood(ops, X, y, alpha)
    value_s, grad_s = lml(kernel.clone_with_theta(theta), eval_gradient=True)
    assert lml.n_factorizations == factorisations
    assert value_s == pytest.approx(value_d, rel=1e-9)
    split = [part is not None for part in lml._affine_parts(kernel.clone_with_theta(theta),
                                                            theta.size)]
    assert any(split)
    rel = np.abs(grad_s - grad_d) / np.abs(grad_d)
    # the split ones: exact quadratic term, trace by one shift difference; the others:
    # central differences of the LML, as before
    assert np.all(rel[split] <= 1e-8), rel
    assert np.all(rel <= 1e-6), rel


@pytest.mark.parametrize("device", DEVICES)
def test_sparse_gradient_differences_what_is_not_affine(rng, device, split_path):
    """Per-sample alpha makes b vary along the diagonal: no split, every hyperparameter
    differenced (1 + 2·3 factorisations), still equal to the dense gradient."""
    from skgpu_testing import skip_unless_supported

    ops = split_path(device)
    skip_unless_supported(ops, "sparse_spd")
    n = 800
    X = rng.uniform(0, 1, (n, 2))
    y = np.sin(6 * X[:, 0]) + 0.05 * rng.standard_normal(n)
    alpha = rng.uniform(1e-8, 1e-6, n)
    kernel = SPLIT_GRADIENT_KERNELS["c_tapered_white"][0](np.sqrt(30 / (np.pi * n)))
    with skgpu.config_context(device="cpu"):
        dense = GaussianProcessRegressor(kernel, optimizer=None, alpha=alpha,
                                         cholesky="dense").fit(X, y)
        _, grad_d = dense.log_marginal_likelihood(kernel.theta, eval_gradient=True)
    lml = _sparse.SparseLogMarginalLikelihood(ops, X, y, alpha)
    _, grad_s = lml(kernel, eval_gradient=True)
    assert lml.n_factorizations == 7
    assert_allclose_rel(grad_s, grad_d, 1e-6)


EXACT_KERNELS = {  # the kernel and GaussianProcessRegressor's alpha (the only noise of one)
    "c_tapered_white": (lambda r: C(1.0) * Tapered(Matern(r, nu=1.5), taper_range=r)
                        + WhiteKernel(0.01), 1e-6),
    "c_tapered_ard": (lambda r: C(1.0) * Tapered(RBF([r, 2 * r]), taper_range=3 * r), 1e-3),
    "wendland_white": (lambda r: C(0.8) * Wendland(2.5 * r, smoothness=2)
                       + WhiteKernel(0.05), 1e-6),
    "tapered_rbf_times_c_white": (lambda r: Tapered(RBF(r), taper_range=2 * r) * C(2.0)
                                  + WhiteKernel(0.02), 1e-6),
}


@pytest.mark.parametrize("name", list(EXACT_KERNELS))
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("n_targets", [1, 2])
@pytest.mark.parametrize("per_sample_alpha", [False, True])
def test_cholmod_gradient_is_exact(name, seed, n_targets, per_sample_alpha):
    """With CHOLMOD (the ``sparse`` extra) every hyperparameter's gradient comes from K⁻¹
    on the pattern (selected inversion): one factorisation per evaluation, and the dense
    path's exact gradient to 1e-10 relative — length scales included, which central
    differences get to ~1e-8 at best — per-sample alpha and several targets too."""
    pytest.importorskip("cvxopt")
    rng = np.random.default_rng(seed)
    n = 1200
    X = rng.uniform(0, 1, (n, 2))
    y = np.sin(6 * X[:, 0]) * np.cos(4 * X[:, 1]) + 0.05 * rng.standard_normal(n)
    if n_targets == 2:
        y = np.column_stack([y, 0.5 - y])
    make, alpha = EXACT_KERNELS[name]
    if per_sample_alpha:
        alpha = alpha * rng.uniform(0.5, 1.5, n)
    kernel = make(np.sqrt(30 / (np.pi * n)))
    theta = kernel.theta + rng.uniform(-0.2, 0.2, kernel.theta.size)
    with skgpu.config_context(device="cpu"):
        dense = GaussianProcessRegressor(kernel, optimizer=None, alpha=alpha,
                                         cholesky="dense").fit(X, y)
        value_d, grad_d = dense.log_marginal_likelihood(theta, eval_gradient=True)
    lml = _sparse.SparseLogMarginalLikelihood(get_backend("cpu"), X, y, alpha)
    for _ in range(2):  # the second evaluation re-analyses after the selected inversion
        value_s, grad_s = lml(kernel.clone_with_theta(theta), eval_gradient=True)
        assert value_s == pytest.approx(value_d, rel=1e-11)
        np.testing.assert_allclose(grad_s, grad_d, rtol=1e-10,
                                   atol=1e-10 * np.max(np.abs(grad_d)))
    assert lml.n_factorizations == 2
    # the factor still solves after the selected inversion took CHOLMOD's object apart
    b = rng.standard_normal(n)
    K = lml.kernel_matrix(kernel.clone_with_theta(theta)).toarray()
    np.testing.assert_allclose(lml.factor.solve(b), np.linalg.solve(K, b), rtol=1e-9,
                               atol=1e-12 * np.max(np.abs(np.linalg.solve(K, b))))


SUPERNODAL_KERNELS = {
    **EXACT_KERNELS,
    # four length scales: one factorisation and one selected inversion all the same
    "c_tapered_ard4": (lambda r: C(1.0) * Tapered(RBF([r, 2 * r, 1.5 * r, 3 * r]),
                                                  taper_range=3 * r) + WhiteKernel(0.02),
                       1e-6),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(SUPERNODAL_KERNELS))
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("n_targets", [1, 2])
def test_supernodal_likelihood_gradient_is_exact(device, name, seed, n_targets):
    """skgpu's supernodal factor under the likelihood: the value and every
    hyperparameter's gradient (by selected inversion on the factor, length scales
    included) equal the dense path's exact ones to 1e-10 relative, one factorisation per
    evaluation whatever the number of hyperparameters."""
    rng = np.random.default_rng(seed)
    n = 1200
    name_d = SUPERNODAL_KERNELS[name]
    d = 4 if name == "c_tapered_ard4" else 2
    X = rng.uniform(0, 1, (n, d))
    y = np.sin(6 * X[:, 0]) * np.cos(4 * X[:, 1]) + 0.05 * rng.standard_normal(n)
    if n_targets == 2:
        y = np.column_stack([y, 0.5 - y])
    make, alpha = name_d
    kernel = make(np.sqrt(30 / (np.pi * n)) * (3.0 if d == 4 else 1.0))
    theta = kernel.theta + rng.uniform(-0.2, 0.2, kernel.theta.size)
    with skgpu.config_context(device="cpu"):
        dense = GaussianProcessRegressor(kernel, optimizer=None, alpha=alpha,
                                         cholesky="dense").fit(X, y)
        value_d, grad_d = dense.log_marginal_likelihood(theta, eval_gradient=True)
    lml = _sparse.SparseLogMarginalLikelihood(get_backend(device), X, y, alpha,
                                              factorization="supernodal")
    for _ in range(2):
        value_s, grad_s = lml(kernel.clone_with_theta(theta), eval_gradient=True)
        assert value_s == pytest.approx(value_d, rel=1e-11)
        np.testing.assert_allclose(grad_s, grad_d, rtol=1e-10,
                                   atol=1e-10 * np.max(np.abs(grad_d)))
    assert lml.n_factorizations == 2
    assert type(lml.factor).__name__ == "SupernodalFactor"


@pytest.mark.parametrize("device", DEVICES)
def test_a_fit_on_the_supernodal_likelihood_equals_the_dense_fit(rng, device, monkeypatch):
    """The default fit with skgpu's factor under the likelihood reaches the dense fit's
    optimum, and its mean and std agree."""
    monkeypatch.setitem(_sparse.SPARSE_FACTORIZATION, device, "supernodal")
    X, y = _field(rng, 700)
    kernel = SPARSE_VS_DENSE["tapered_matern"]
    with skgpu.config_context(device="cpu"):
        dense = GaussianProcessRegressor(kernel, cholesky="dense", random_state=0).fit(X, y)
        mean_d, std_d = dense.predict(X[:50] + 0.01, return_std=True)
    with skgpu.config_context(device=device):
        sparse = GaussianProcessRegressor(kernel, random_state=0,
                                          cholesky="sparse").fit(X, y)
        mean, std = sparse.predict(X[:50] + 0.01, return_std=True)
        lml = sparse._state_on(get_backend(device)).lml
    assert type(lml.factor).__name__ == "SupernodalFactor"
    assert lml.variance_factor(sparse.kernel_) is lml.factor  # no second factor
    assert_allclose_rel(sparse.kernel_.theta, dense.kernel_.theta, 1e-5, atol_scale=1.0)
    assert sparse.log_marginal_likelihood_value_ == pytest.approx(
        dense.log_marginal_likelihood_value_, rel=1e-10)
    assert_allclose_rel(mean, mean_d, 1e-6)
    assert_allclose_rel(std, std_d, 1e-6)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("factor", ["supernodal", "backend"])
@pytest.mark.parametrize("seed", [0, 1])
def test_the_fit_keeps_the_factor_of_the_optimizers_step_at_its_optimum(
        monkeypatch, device, factor, seed):
    """With exact gradients each evaluation factors once, at its theta; where the
    optimizer's last one was at its optimum the fit keeps that factor instead of
    factoring the same matrix again. With differenced gradients (cuDSS) the last
    factorisation is a shifted or moved one, so the fit factors at the optimum. Either
    way the model equals a fit at the optimum without the optimizer, and the kept factor
    is refused for another kernel object, another theta, and after any other
    factorisation."""
    from skgpu_testing import skip_unless_supported

    ops = get_backend(device)
    if factor == "backend":
        skip_unless_supported(ops, "sparse_spd")
    monkeypatch.setitem(_sparse.SPARSE_FACTORIZATION, device, factor)
    rng = np.random.default_rng(seed)
    X, y = _field(rng, 600)
    seen = []
    real = _sparse.SparseLogMarginalLikelihood.factorize

    def spy(self, k, shift=0.0, value=None):
        seen.append((np.asarray(k.theta).tobytes(), shift))
        return real(self, k, shift, value)

    monkeypatch.setattr(_sparse.SparseLogMarginalLikelihood, "factorize", spy)
    with skgpu.config_context(device=device):
        gp = GaussianProcessRegressor(SPARSE_VS_DENSE["tapered_matern"], random_state=0,
                                      cholesky="sparse").fit(X, y)
        in_fit = list(seen)
        plain = GaussianProcessRegressor(gp.kernel_, optimizer=None,
                                         cholesky="sparse").fit(X, y)
        mean, std = gp.predict(X[:40] + 0.01, return_std=True)
        mean_p, std_p = plain.predict(X[:40] + 0.01, return_std=True)
    lml = gp._state_on(ops).lml
    optimum = (gp.kernel_.theta.tobytes(), 0.0)
    evaluations = lml.n_evaluations
    exact = factor == "supernodal" or (device == "cpu" and ops.sparse_factor == "cholmod")
    if exact:
        assert in_fit[evaluations - 1] == optimum  # L-BFGS-B ended on its last step
        assert len(in_fit) == evaluations  # and nothing was factored after it
        assert lml.factor_at(gp.kernel_) is not None
    else:
        assert len(in_fit) > evaluations and in_fit[-1] == optimum
    assert gp.log_marginal_likelihood_value_ == pytest.approx(
        plain.log_marginal_likelihood_value_, rel=1e-12)
    assert_allclose_rel(gp.alpha_, plain.alpha_, 1e-9)
    assert_allclose_rel(mean, mean_p, 1e-9)
    assert_allclose_rel(std, std_p, 1e-9)
    if exact:
        same = gp.kernel_.clone_with_theta(gp.kernel_.theta)  # equal, another object
        assert lml.factor_at(same) is None
        kernel = gp.kernel_
        theta = kernel.theta
        kernel.theta = theta + 1e-3
        assert lml.factor_at(kernel) is None
        kernel.theta = theta
        assert lml.factor_at(kernel) is not None
        with skgpu.config_context(device=device):
            lml.factorize(kernel, shift=1e-3)
        assert lml.factor_at(kernel) is None


@pytest.mark.parametrize("loadable", [True, False])
def test_the_gpu_likelihood_factor_is_cudss_or_ours_where_cudss_does_not_load(
        monkeypatch, caplog, loadable):
    """On the GPU the likelihood factors with cuDSS below ``SUPERNODAL_FROM_N`` points
    where it loads, with skgpu's supernodal factor from there on and where cuDSS does
    not load (saying why), never moving to the CPU for it; the CPU keeps its own at
    any n; a factor named in SPARSE_FACTORIZATION is kept."""
    import logging

    from skgpu import backends

    why = "cuDSS is not loadable (OSError: libcudss.so.0)"
    monkeypatch.setattr(backends, "_requirement_status",
                        lambda req: (loadable, "" if loadable else why))

    class FakeGPU:  # what the policy asks of a backend (no CuPy needed)
        name, is_gpu, sparse_factor = "gpu", True, "cudss"

    from_n = _sparse.SUPERNODAL_FROM_N["cudss"]
    with caplog.at_level(logging.INFO, logger="skgpu"):
        got = _sparse.default_factorization(FakeGPU(), from_n - 1)
    assert got == ("backend" if loadable else "supernodal")
    assert any(why in r.getMessage() for r in caplog.records) is not loadable
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="skgpu"):  # from there on, ours (logged)
        assert _sparse.default_factorization(FakeGPU(), from_n) == "supernodal"
    assert any("skgpu's supernodal factor (measured faster than cudss" in r.getMessage()
               for r in caplog.records)
    assert _sparse.default_factorization(get_backend("cpu"), 10**7) == "backend"
    monkeypatch.setitem(_sparse.SPARSE_FACTORIZATION, "gpu", "supernodal")
    assert _sparse.default_factorization(FakeGPU(), 10) == "supernodal"
    monkeypatch.setitem(_sparse.SPARSE_FACTORIZATION, "gpu", "backend")  # named: kept
    assert _sparse.default_factorization(FakeGPU(), 10**7) == (
        "backend" if loadable else "supernodal")
    assert "sparse_spd" not in _sparse.OPERATIONS


@pytest.mark.parametrize("has_cholmod", [True, False])
def test_the_cpu_likelihood_factor_is_cholmod_else_ours(rng, monkeypatch, caplog,
                                                        has_cholmod):
    """On the CPU the likelihood factors with CHOLMOD where the sparse extra gives it,
    else with skgpu's supernodal factor (not SciPy's SuperLU, slower at every n
    measured), saying so; SuperLU stays reachable by naming "backend". A default fit
    without CHOLMOD reaches the dense fit's optimum on the exact gradient."""
    import logging

    if has_cholmod:
        pytest.importorskip("cvxopt")
    else:
        monkeypatch.setattr(_cpu, "_cholmod", lambda: None)
    cpu = get_backend("cpu")
    with caplog.at_level(logging.INFO, logger="skgpu"):
        got = _sparse.default_factorization(cpu, 5000)
    assert got == ("backend" if has_cholmod else "supernodal")
    assert cpu.sparse_factor == ("cholmod" if has_cholmod else "superlu")
    assert any(("the backend's factor, cholmod" if has_cholmod else
                "skgpu's supernodal factor (measured faster than superlu")
               in r.getMessage() for r in caplog.records)
    monkeypatch.setitem(_sparse.SPARSE_FACTORIZATION, "cpu", "backend")  # named: kept
    assert _sparse.default_factorization(cpu, 5000) == "backend"
    monkeypatch.setitem(_sparse.SPARSE_FACTORIZATION, "cpu", "auto")
    X, y = _field(rng, 700)
    kernel = SPARSE_VS_DENSE["tapered_matern"]
    with skgpu.config_context(device="cpu"):
        dense = GaussianProcessRegressor(kernel, cholesky="dense", random_state=0).fit(X, y)
        sparse = GaussianProcessRegressor(kernel, cholesky="sparse",
                                          random_state=0).fit(X, y)
        mean, std = sparse.predict(X[:50] + 0.01, return_std=True)
        mean_d, std_d = dense.predict(X[:50] + 0.01, return_std=True)
    lml = sparse._state_on(cpu).lml
    assert lml.factorization == got
    assert type(lml.factor).__name__ == ("CholmodSPDFactor" if has_cholmod
                                         else "SupernodalFactor")
    assert_allclose_rel(sparse.kernel_.theta, dense.kernel_.theta, 1e-5, atol_scale=1.0)
    assert sparse.log_marginal_likelihood_value_ == pytest.approx(
        dense.log_marginal_likelihood_value_, rel=1e-8)
    assert_allclose_rel(mean, mean_d, 1e-6)
    assert_allclose_rel(std, std_d, 1e-6)


@pytest.mark.gpu
def test_a_gpu_without_cudss_fits_on_our_factor_and_equals_the_dense_fit(rng, monkeypatch):
    """cuDSS reported missing: the sparse GP still runs on the GPU (backend_ 'gpu'),
    factored by skgpu's supernodal factor, and its likelihood, mean and std equal the
    dense path's."""
    from skgpu import backends

    monkeypatch.setattr(backends, "_requirement_status", lambda req: (
        (False, "cuDSS is not loadable (test)") if req == "cudss" else (True, "")))
    X, y = _field(rng, 700)
    kernel = SPARSE_VS_DENSE["tapered_matern"]
    with skgpu.config_context(device="cpu"):
        dense = GaussianProcessRegressor(kernel, optimizer=None,
                                         cholesky="dense").fit(X, y)
        mean_d, std_d = dense.predict(X[:50] + 0.01, return_std=True)
    with skgpu.config_context(device="gpu"):
        sparse = GaussianProcessRegressor(kernel, optimizer=None,
                                          cholesky="sparse").fit(X, y)
        mean, std = sparse.predict(X[:50] + 0.01, return_std=True)
    assert sparse.backend_ == "gpu"
    lml = sparse._state_on(get_backend("gpu")).lml
    assert type(lml.factor).__name__ == "SupernodalFactor"
    assert sparse.log_marginal_likelihood_value_ == pytest.approx(
        dense.log_marginal_likelihood_value_, rel=1e-10)
    assert_allclose_rel(mean, mean_d, 1e-9)
    assert_allclose_rel(std, std_d, 1e-9)


def test_cholmod_fit_predict_after_exact_gradients_equal_dense(rng):
    """A default fit on the exact sparse gradient reaches the dense fit's optimum, and
    predict (its solves use the factor the last gradient took apart) agrees."""
    pytest.importorskip("cvxopt")
    X, y = _field(rng, 700)
    kernel = SPARSE_VS_DENSE["tapered_matern"]
    with skgpu.config_context(device="cpu"):
        dense = GaussianProcessRegressor(kernel, cholesky="dense", random_state=0).fit(X, y)
        sparse = GaussianProcessRegressor(kernel, random_state=0).fit(X, y)
        mean, std = sparse.predict(X[:50] + 0.01, return_std=True)
        mean_d, std_d = dense.predict(X[:50] + 0.01, return_std=True)
    assert sparse.cholesky_ == "sparse"
    assert_allclose_rel(sparse.kernel_.theta, dense.kernel_.theta, 1e-5, atol_scale=1.0)
    assert sparse.log_marginal_likelihood_value_ == pytest.approx(
        dense.log_marginal_likelihood_value_, rel=1e-10)
    assert_allclose_rel(mean, mean_d, 1e-6)
    assert_allclose_rel(std, std_d, 1e-6)


def test_cholmod_gradient_falls_back_when_the_selected_inverse_runs_out_of_memory(
        rng, monkeypatch, caplog):
    """A MemoryError in the selected inversion: the split / differenced gradient instead
    (logged once), still the dense path's gradient to its accuracy, and no second try."""
    pytest.importorskip("cvxopt")
    import logging

    n = 600
    X = rng.uniform(0, 1, (n, 2))
    y = np.sin(6 * X[:, 0]) + 0.05 * rng.standard_normal(n)
    kernel = EXACT_KERNELS["c_tapered_white"][0](np.sqrt(30 / (np.pi * n)))
    calls = []

    def no_memory(self, rows, cols):
        calls.append(1)
        raise MemoryError("test")

    monkeypatch.setattr(_cpu.CholmodSPDFactor, "inverse_on", no_memory)
    with skgpu.config_context(device="cpu"):
        dense = GaussianProcessRegressor(kernel, optimizer=None, alpha=1e-6,
                                         cholesky="dense").fit(X, y)
        _, grad_d = dense.log_marginal_likelihood(kernel.theta, eval_gradient=True)
    lml = _sparse.SparseLogMarginalLikelihood(get_backend("cpu"), X, y, 1e-6)
    with caplog.at_level(logging.INFO, logger="skgpu"):
        for _ in range(2):
            _, grad_s = lml(kernel, eval_gradient=True)
            assert_allclose_rel(grad_s, grad_d, 1e-6)
    assert len(calls) == 1
    assert sum("ran out of memory" in r.getMessage() for r in caplog.records) == 1
    assert lml.n_factorizations == 10  # 5 a split evaluation, twice
