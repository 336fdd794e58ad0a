"""The dense GP likelihood, fit and predict in panels of rows: one n × n
matrix and a few panels at a time, the same numbers as scikit-learn's whole-matrix
evaluation, on both backends. The panel sizes of large n are forced onto small data
here (``SINGLE_PANEL_MAX_N`` and ``PANEL_FRACTION`` patched), so that every test runs
the code a 100,000-point fit runs."""

import tracemalloc
from fractions import Fraction

import numpy as np
import pytest
from conftest import DEVICES
from sklearn.gaussian_process import GaussianProcessRegressor as SkGPR
from sklearn.gaussian_process.kernels import (
    RBF,
    DotProduct,
    ExpSineSquared,
    Matern,
    RationalQuadratic,
    WhiteKernel,
)
from sklearn.gaussian_process.kernels import ConstantKernel as C

import skgpu
from skgpu.backends import get_backend
from skgpu.gaussian_process import GaussianProcessRegressor
from skgpu.gaussian_process import _dense, _gpr
from skgpu.gaussian_process._dense import _LogMarginalLikelihood
from skgpu.gaussian_process._kernel_eval import (
    EXPANSION_MAX_SPAN,
    _ard_gradient,
    evaluate,
    panels_supported,
)

KERNELS = {
    "C*RBF(ARD)+White": lambda d: C(1.3) * RBF(np.linspace(0.4, 0.9, d)) + WhiteKernel(0.01),
    "C*Matern(2.5)+White": lambda d: C(0.7) * Matern(0.5, nu=2.5) + WhiteKernel(0.02),
    "Matern(1.5, ARD)*White+RBF": lambda d: (Matern(np.linspace(0.3, 0.8, d), nu=1.5)
                                             * WhiteKernel(0.5) + RBF(0.3)),
    "Matern(0.5)+C": lambda d: Matern(0.6, nu=0.5) + C(0.2),
    "RQ+C": lambda d: RationalQuadratic(0.6, 1.5) + C(0.1),
    "ExpSineSquared*RBF+White": lambda d: (ExpSineSquared(0.8, 2.0) * RBF(1.1)
                                           + WhiteKernel(0.1)),
    "DotProduct**2+White": lambda d: DotProduct(0.5) ** 2 + WhiteKernel(0.3),
}


def _data(rng, n, d=3):
    X = rng.uniform(0, 1, (n, d))
    y = np.sin(5 * X[:, 0]) + np.cos(3 * X[:, 1]) + 0.1 * rng.standard_normal(n)
    return X, y


@pytest.fixture
def panels(monkeypatch):
    """Force panels of ``rows`` rows on any n (the large-n path on small data)."""
    def force(rows):
        monkeypatch.setattr(_dense, "SINGLE_PANEL_MAX_N", 0)
        monkeypatch.setattr(_dense, "panel_rows", lambda n, ops=None: rows)
    return force


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(KERNELS))
@pytest.mark.parametrize("rows", [1, 17, 64, 1000])
def test_panel_likelihood_and_gradient_equal_sklearn(device, rng, panels, name, rows):
    """Every panel size (one row, ragged last panel, one panel of all) gives
    scikit-learn's LML and gradient, with several targets too."""
    n = 150
    X, y = _data(rng, n)
    Y = np.column_stack([y, rng.standard_normal(n)])
    kernel = KERNELS[name](X.shape[1])
    panels(rows)
    for target in (y, Y):
        ref = SkGPR(kernel, alpha=1e-6, optimizer=None, normalize_y=False).fit(X, target)
        want, want_grad = ref.log_marginal_likelihood(kernel.theta, eval_gradient=True)
        with skgpu.config_context(device=device):
            ours = GaussianProcessRegressor(kernel, alpha=1e-6, optimizer=None).fit(X, target)
            got, got_grad = ours.log_marginal_likelihood(kernel.theta, eval_gradient=True)
        assert got == pytest.approx(want, rel=1e-9, abs=1e-9)
        np.testing.assert_allclose(got_grad, want_grad, rtol=1e-7,
                                   atol=1e-8 * np.max(np.abs(want_grad)))
        np.testing.assert_allclose(ours.L_, ref.L_, rtol=1e-8, atol=1e-9)
        assert np.all(np.triu(ours.L_, 1) == 0.0)


def _fits_equal_sklearn(device, kernel, X, y, rel):
    """Ours and scikit-learn's fits with the default optimizer (one restart, seed 0): the
    same kernel_ (to 1e-4) and log-marginal likelihood (to ``rel``)."""
    ref = SkGPR(kernel, random_state=0).fit(X, y)
    with skgpu.config_context(device=device):
        ours = GaussianProcessRegressor(kernel, random_state=0).fit(X, y)
    np.testing.assert_allclose(ours.kernel_.theta, ref.kernel_.theta, rtol=1e-4, atol=1e-4)
    assert ours.log_marginal_likelihood_value_ == pytest.approx(
        ref.log_marginal_likelihood_value_, rel=rel)
    return ours, ref


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("seed", [0, 1])
def test_panel_fit_with_the_optimizer_and_predict_equal_sklearn(device, panels, seed):
    """The default optimizer on the panelled likelihood reaches scikit-learn's theta;
    predict (mean, std and cov) agrees."""
    rng = np.random.default_rng(seed)
    X, y = _data(rng, 120)
    Xt = rng.uniform(0, 1, (40, X.shape[1]))
    kernel = C(1.0) * RBF(np.ones(X.shape[1])) + WhiteKernel(0.1)
    panels(23)
    ours, ref = _fits_equal_sklearn(device, kernel, X, y, rel=1e-7)
    for kw in ({}, {"return_std": True}, {"return_cov": True}):
        with skgpu.config_context(device=device):
            got = ours.predict(Xt, **kw)
        want = ref.predict(Xt, **kw)
        got, want = (got, want) if kw else ((got,), (want,))
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-7)


@pytest.mark.gpu
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("name", ["C*RBF(ARD)+White", "C*Matern(2.5)+White",
                                  "ExpSineSquared*RBF+White"])
def test_gpu_predict_std_solved_from_the_right_equals_the_cpu_path(monkeypatch, seed, name):
    """The GPU's predictive std comes from K(X_train, X*) solved in place from the right;
    in several blocks of test rows it equals the CPU path's (left, scipy) to 1e-10 and
    scikit-learn's, and the mean is unchanged."""
    from skgpu.backends.gpu import backend

    rng = np.random.default_rng(seed)
    X, y = _data(rng, 400)
    Xt = rng.uniform(-0.2, 1.2, (230, X.shape[1]))
    kernel = KERNELS[name](X.shape[1])
    ref = SkGPR(kernel, alpha=1e-8, optimizer=None).fit(X, y)
    want_mean, want_std = ref.predict(Xt, return_std=True)
    with skgpu.config_context(device="cpu"):
        cpu = GaussianProcessRegressor(kernel, alpha=1e-8, optimizer=None).fit(X, y)
        cpu_mean, cpu_std = cpu.predict(Xt, return_std=True)
    calls = []
    real = backend.GPUBackend.solve_triangular_right
    monkeypatch.setattr(backend.GPUBackend, "solve_triangular_right",
                        lambda self, L, C: calls.append(C.shape) or real(self, L, C))
    monkeypatch.setattr(_dense, "_PREDICT_BLOCK_BYTES", 8 * 400 * 50)  # 50-row blocks
    with skgpu.config_context(device="gpu"):
        gp = GaussianProcessRegressor(kernel, alpha=1e-8, optimizer=None).fit(X, y)
        mean, std = gp.predict(Xt, return_std=True)
    assert [c[0] for c in calls] == [50, 50, 50, 50, 30]
    np.testing.assert_allclose(std, cpu_std, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(mean, cpu_mean, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(std, want_std, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(mean, want_mean, rtol=1e-9, atol=1e-12)


def test_panels_refused_for_kernels_sklearn_evaluates(rng):
    """A part scikit-learn evaluates (Matern nu=1.2) has no panels: the likelihood takes
    the whole-matrix path, explicitly, and still equals scikit-learn's."""
    kernel = C(1.0) * Matern(0.5, nu=1.2) + WhiteKernel(0.1)
    assert not panels_supported(kernel)
    X, y = _data(rng, 60)
    cpu = get_backend("cpu")
    with pytest.raises(ValueError, match="no panels"):
        evaluate(cpu, kernel, X, None, True, rows=(0, 10))
    lml = _LogMarginalLikelihood(cpu, X, y, 1e-6)
    lml.panel_rows = 7
    assert lml._rows(kernel) is None
    got, got_grad = lml(kernel, True)
    want, want_grad = SkGPR(kernel, alpha=1e-6, optimizer=None).fit(
        X, y).log_marginal_likelihood(kernel.theta, eval_gradient=True)
    assert got == pytest.approx(want, rel=1e-10)
    np.testing.assert_allclose(got_grad, want_grad, rtol=1e-7)


def _peak_in_n2(func, n):
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        func()
        return (tracemalloc.get_traced_memory()[1] - base) / (8.0 * n * n)
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("name", ["C*RBF(ARD)+White", "C*Matern(2.5)+White"])
def test_cpu_peak_memory_is_one_matrix_and_panels(rng, name):
    """At n = 1,600 with large-n panels (n/32 rows), one LML + gradient, the fit and
    predict(return_std) peak at ≤ 1.3 n² float64 on the CPU (tracemalloc), where the
    whole-matrix evaluation holds 5-8 n²."""
    n, d = 1600, 8
    X, y = _data(rng, n, d)
    kernel = KERNELS[name](d)
    cpu = get_backend("cpu")
    rows = int(np.ceil(n / 32))

    def likelihood(rows):
        lml = _LogMarginalLikelihood(cpu, X, y, 1e-6)
        lml.panel_rows = rows
        return lml(kernel, True)

    whole = _peak_in_n2(lambda: likelihood(n), n)
    panelled = _peak_in_n2(lambda: likelihood(rows), n)
    assert whole > 4.0
    assert panelled <= 1.3
    np.testing.assert_allclose(likelihood(rows)[1], likelihood(n)[1], rtol=1e-8,
                               atol=1e-10)

    gp = GaussianProcessRegressor(kernel, alpha=1e-6, optimizer=None)
    Xt = rng.uniform(0, 1, (3 * n, d))
    with pytest.MonkeyPatch.context() as mp, skgpu.config_context(device="cpu"):
        mp.setattr(_dense, "SINGLE_PANEL_MAX_N", 0)
        mp.setattr(_dense, "_PREDICT_BLOCK_BYTES", 0)  # blocks by PREDICT_BLOCK_FRACTION
        fit = _peak_in_n2(lambda: gp.fit(X, y), n)
        pred = _peak_in_n2(lambda: gp.predict(Xt, return_std=True), n)
    # the fit keeps L_ (one n²); predict holds a block's kernel terms and its solve
    assert fit <= 1.3
    assert pred <= 0.3


@pytest.mark.parametrize("device", DEVICES)
def test_factor_reaches_the_host_when_first_read(device, rng):
    """A GPU fit keeps its Cholesky factor on the device (its host copy cost more than
    the fit at n = 50,000); L_ is copied on first read and equals scikit-learn's; a
    pickle, ``as_sklearn`` and predict on the CPU after a GPU fit all see it."""
    import pickle

    X, y = _data(rng, 200)
    kernel = C(1.0) * RBF(0.5) + WhiteKernel(0.05)
    ref = SkGPR(kernel, optimizer=None).fit(X, y)
    Xt = rng.uniform(0, 1, (30, X.shape[1]))
    for first in ("L_", "pickle", "as_sklearn", "cpu predict"):
        with skgpu.config_context(device=device):
            gp = GaussianProcessRegressor(kernel, optimizer=None).fit(X, y)
        assert ("L_" in vars(gp)) == (device == "cpu")
        if first == "L_":
            np.testing.assert_allclose(gp.L_, ref.L_, rtol=1e-10, atol=1e-13)
        elif first == "pickle":
            back = pickle.loads(pickle.dumps(gp))
            np.testing.assert_allclose(back.L_, ref.L_, rtol=1e-10, atol=1e-13)
            np.testing.assert_allclose(back.predict(Xt), ref.predict(Xt), rtol=1e-9)
        elif first == "as_sklearn":
            theirs = gp.as_sklearn()
            np.testing.assert_allclose(theirs.predict(Xt, return_std=True)[1],
                                       ref.predict(Xt, return_std=True)[1], rtol=1e-8)
        else:
            with skgpu.config_context(device="cpu"):
                np.testing.assert_allclose(gp.predict(Xt, return_std=True)[1],
                                           ref.predict(Xt, return_std=True)[1], rtol=1e-8)
        assert "_pending_L" not in vars(gp) and "L_" in vars(gp)
    unfitted = GaussianProcessRegressor(kernel)
    assert not hasattr(unfitted, "L_")
    with pytest.raises(AttributeError, match="no attribute 'L_'"):
        _ = unfitted.L_


def test_pending_factor_lifecycle_on_any_machine(rng, monkeypatch):
    """The GPU fit's pending L_, run on the CPU backend through the seam: unset after the
    fit, fetched once on first read, carried by pickles, copies and as_sklearn, kept by
    a failed refit (the estimator exactly as it was), and gone after a refit on a path
    that sets L_ at once."""
    import copy
    import pickle

    from sklearn.base import clone

    monkeypatch.setattr(_gpr, "_factor_stays_on", lambda ops: True)
    X, y = _data(rng, 150)
    kernel = C(1.0) * RBF(0.5) + WhiteKernel(0.05)
    ref = SkGPR(kernel, optimizer=None).fit(X, y)
    with skgpu.config_context(device="cpu"):
        gp = GaussianProcessRegressor(kernel, optimizer=None).fit(X, y)
        assert "L_" not in vars(gp) and vars(gp)["_pending_L"]
        twice = np.vstack([X, X])  # duplicated points: K singular without alpha
        with pytest.raises(np.linalg.LinAlgError):  # a refit that fails in the Cholesky
            gp.set_params(alpha=0.0, kernel=RBF(0.5)).fit(twice, np.concatenate([y, y]))
        gp.set_params(alpha=1e-10, kernel=kernel)
        assert "L_" not in vars(gp) and vars(gp)["_pending_L"]
        deep = copy.deepcopy(gp)
        assert not hasattr(clone(gp), "L_")
        np.testing.assert_allclose(gp.L_, ref.L_, rtol=1e-10, atol=1e-13)
        assert "_pending_L" not in vars(gp) and gp.L_ is vars(gp)["L_"]
        for other in (pickle.loads(pickle.dumps(deep)), deep.as_sklearn()):
            np.testing.assert_allclose(other.L_, ref.L_, rtol=1e-10, atol=1e-13)
        monkeypatch.setattr(_gpr, "_factor_stays_on", lambda ops: False)
        gp.fit(X[:100], y[:100])
        assert "_pending_L" not in vars(gp) and gp.L_.shape == (100, 100)


def test_panels_are_n_over_32_rows_and_at_least_2500_on_the_gpu():
    """Panel rows: the whole matrix up to SINGLE_PANEL_MAX_N; then n/32 rows on the
    CPU, and on the GPU at least PANEL_MIN_ROWS (its host cost per panel), n/32 once that
    is larger (n ≥ 80,000, where the peak stays ~1.3 n²); never more than n."""
    class Device:
        memory = "device"

    cpu, gpu = get_backend("cpu"), Device()
    rows = _dense.panel_rows
    for ops in (None, cpu, gpu):
        assert rows(1, ops) == 1 and rows(4096, ops) == 4096
        assert rows(100_000, ops) == 3125 and rows(1_000_000, ops) == 31_250
    assert rows(20_000) == rows(20_000, cpu) == 625
    assert rows(4097, gpu) == rows(20_000, gpu) == rows(80_000, gpu) == 2500
    for n in (5000, 7919, 50_000, 80_001, 123_457):
        assert rows(n, cpu) == max(64, int(np.ceil(n / 32)))
        assert min(n, 2500) <= rows(n, gpu) <= n and rows(n, gpu) >= n / 32


@pytest.mark.parametrize("name", ["C*RBF(ARD)+White", "C*Matern(2.5)+White"])
def test_cpu_peak_memory_with_the_smallest_panels_is_n2_and_eight_panels(rng, name):
    """On the GPU below n = 80,000 the panels are PANEL_MIN_ROWS rows, more than n/32:
    one LML + gradient at n = 1,600 in panels of 200 rows (n/8, as 2,500 at n = 20,000)
    peaks within one n² and eight panels (tracemalloc: 2.006 n²), its gradient the
    whole evaluation's."""
    n, d = 1600, 8
    X, y = _data(rng, n, d)
    kernel = KERNELS[name](d)
    lml = _LogMarginalLikelihood(get_backend("cpu"), X, y, 1e-6)
    lml.panel_rows = 200
    peak = _peak_in_n2(lambda: lml(kernel, True), n)
    assert peak <= 1.0 + 8 * 200 / n + 0.02  # (and the O(n) vectors: 0.006 n² measured)
    whole = _LogMarginalLikelihood(get_backend("cpu"), X, y, 1e-6)
    whole.panel_rows = n
    np.testing.assert_allclose(lml(kernel, True)[1], whole(kernel, True)[1], rtol=1e-8,
                               atol=1e-10)


def _exact_ard_contraction(W, C, X, length_scale, start):
    """``Σ_ik W_ik C_ik ((X_{start+i} - X_k) / l)²`` in exact rational arithmetic on the
    float inputs (the reference the contraction's rounding is measured against), and
    the same sum of absolute values (its condition: what rounding is relative to)."""
    l2 = Fraction(length_scale) ** 2
    total = scale = Fraction(0)
    for i in range(W.shape[0]):
        xi = Fraction(X[start + i])
        for k in range(W.shape[1]):
            term = Fraction(W[i, k]) * Fraction(C[i, k]) * (xi - Fraction(X[k])) ** 2 / l2
            total += term
            scale += abs(term)
    return float(total), float(scale)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("offset, spread, length_scale, route", [
    (0.0, 2.0, 1.35, "sqdiff"),         # the expansion, data about the origin
    (1e12, 3.0, 1.35, "sqdiff"),        # the expansion, far from the origin
    (0.0, 63.0 * 0.7, 0.7, "sqdiff"),   # the expansion near its widest
    (0.0, 65.0 * 0.7, 0.7, "full"),     # differences per pair, just past it
    (5e8, 1e8, 1.0, "full"),            # unscaled features under the default length scale
])
def test_ard_gradient_contraction_equals_exact_arithmetic(seed, offset, spread,
                                                          length_scale, route):
    """The ARD gradient's contraction Σ W ∘ C ∘ ((x_i - x_k)/l)² over a panel of rows
    against exact rational arithmetic: within 1e-11 of the sum's condition Σ|·| on either
    route. (Before: at a spread of 10⁸ length scales the expansion's error was O(1) of
    it; at an offset of 10¹² the column scaled before centring lost 1e-4.)"""
    rng = np.random.default_rng(seed)
    n, start, m = 40, 9, 13
    u = np.sort(rng.uniform(0, 1, n))
    u[0], u[-1] = 0.0, 1.0  # the column spans ``spread`` exactly
    X = offset + spread * u
    X[5] = X[6]  # a duplicate point: (x_i - x_k)² exactly 0
    cpu = get_backend("cpu")
    D = (X[start:start + m, None] - X[None, :]) / length_scale
    C = np.exp(-0.5 * D * D) * rng.uniform(0.5, 1.5, (m, n))  # weight on close pairs
    W = rng.standard_normal((m, n))
    span = float(X.max() - X.min())
    lml = _LogMarginalLikelihood(cpu, X[:, None], np.zeros(n), 1e-6)
    grad = np.zeros(1)
    lml._contract([lambda: _ard_gradient(C, X, length_scale, span, start)], W, start, grad)
    want, condition = _exact_ard_contraction(W, C, X, length_scale, start)
    assert abs(grad[0] - want) <= 1e-11 * condition
    assert _ard_gradient(C, X, length_scale, span, start).kind == route
    assert (route == "sqdiff") == (span <= EXPANSION_MAX_SPAN * length_scale)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("rows", [17, None])
@pytest.mark.parametrize("offset, scale", [(1e12, 1.0), (1e8, 1.0), (0.0, 1e8),
                                           (3e9, 1e8)])
def test_ard_gradient_far_from_the_origin_and_wide_equals_sklearn(device, rng, panels,
                                                                   rows, offset, scale):
    """Hard data through the public likelihood, in panels and whole: columns offset to
    10¹² and spread over 10⁸ length scales (unscaled features under length scales near
    1). scikit-learn's gradient takes the differences of the unscaled inputs; ours
    equals it where the expansion once lost 1e-4 (offsets) or everything (spreads)."""
    n = 90
    X = offset + scale * rng.uniform(-1, 1, (n, 2))
    y = np.sin(3 * (X[:, 0] - offset) / scale) + 0.1 * rng.standard_normal(n)
    kernel = C(1.0) * RBF([1.35, 0.7]) + WhiteKernel(0.1)
    if rows is not None:
        panels(rows)
    want, want_grad = SkGPR(kernel, alpha=1e-6, optimizer=None).fit(
        X, y).log_marginal_likelihood(kernel.theta, eval_gradient=True)
    with skgpu.config_context(device=device):
        ours = GaussianProcessRegressor(kernel, alpha=1e-6, optimizer=None).fit(X, y)
        got, got_grad = ours.log_marginal_likelihood(kernel.theta, eval_gradient=True)
    assert got == pytest.approx(want, rel=1e-9)
    np.testing.assert_allclose(got_grad, want_grad, rtol=1e-8,
                               atol=1e-10 * np.max(np.abs(want_grad)))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("scale", [1e3, 1e8])
def test_fit_on_an_unscaled_feature_finds_sklearns_kernel(device, scale):
    """An unscaled feature (spread over 10³ or 10⁸ of its length scale) beside a scaled
    one, fitted with the default optimizer from length scales of 1: the same kernel_ and
    likelihood as scikit-learn's. (Before: at 10⁸ the gradient along the flat length
    scale was -32, and the fit stopped at another theta: [-0.815, -1.161, 0, -2.367]
    against [-0.802, 0, 0, -2.429].)"""
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, (80, 2)) * [scale, 1.0]
    y = np.sin(3 * X[:, 1]) + 0.1 * rng.standard_normal(80)
    _fits_equal_sklearn(device, C(1.0) * RBF([1.0, 1.0]) + WhiteKernel(0.1), X, y, rel=1e-9)
