"""A dense Gaussian-process fit knows the memory it needs before it starts:
work the host cannot hold is refused with the numbers, on the CPU backend and on the CPU
fallback after a GPU out-of-memory error."""

import re
import tracemalloc

import numpy as np
import pytest
from sklearn.gaussian_process.kernels import RBF, Matern, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C
from test_fallback import oom_gpu  # noqa: F401 - the injected out-of-memory GPU fixture

import skgpu
from skgpu.backends import get_backend
from skgpu.gaussian_process import GaussianProcessRegressor, _memory
from skgpu.gaussian_process._dense import _LogMarginalLikelihood

KERNELS = {"C*RBF(ARD)+White": lambda d: C() * RBF(np.ones(d)) + WhiteKernel(),
           "C*Matern(2.5)+White": lambda d: C() * Matern(1.0, nu=2.5) + WhiteKernel()}


def _data(rng, n, d=4):
    X = rng.standard_normal((n, d))
    return X, np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n)


@pytest.mark.parametrize("name", sorted(KERNELS))
@pytest.mark.parametrize("gradient", [False, True])
def test_probe_predicts_the_peak_of_the_full_evaluation(rng, name, gradient):
    """The multiplier measured on 256 points, times n², is the peak tracemalloc sees for
    the evaluation at n = 1,200 itself, to 15%."""
    n = 1200
    X, y = _data(rng, n)
    kernel = KERNELS[name](X.shape[1])
    cpu = get_backend("cpu")

    def make(index):
        return _LogMarginalLikelihood(cpu, X[index], y[index], 1e-10)

    multiplier = _memory.measure_multiplier(make, kernel, n, gradient)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        lml = make(np.arange(n))
        lml(kernel, gradient)
        Km, _ = lml.kernel_matrix(kernel)
        factor = cpu.cholesky(Km, what="kernel matrix", overwrite=True)
        np.tril(factor.lower)
        del Km, factor
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert _memory.dense_bytes(n, multiplier, 4) == pytest.approx(peak, rel=0.15)


def test_largest_n_is_the_largest_that_fits():
    for available in (10**6, 3 * 10**8, 7 * 10**10):
        for multiplier in (1.0, 3.1, 7.0):
            n = _memory.largest_n(available, multiplier, 8, 1)
            assert _memory.dense_bytes(n, multiplier, 8, 1) <= available
            assert _memory.dense_bytes(n + 1, multiplier, 8, 1) > available


@pytest.mark.parametrize("optimizer", [None, "fmin_l_bfgs_b"])
def test_fit_the_host_cannot_hold_is_refused_with_the_numbers(rng, monkeypatch, optimizer):
    """With 60 MB available a dense fit at n = 3,000 (hundreds of MB) raises at once,
    leaves the estimator unfitted, and names the largest n that fits; a fit 2 % below
    that n then runs under the same limit (the fit measures its peak again, on its own
    subsample: 1,053 against 1,055 was seen once, a 0.2 % difference)."""
    monkeypatch.setattr(_memory, "host_available_bytes", lambda: 60 * 10**6)
    X, y = _data(rng, 3000)
    gp = GaussianProcessRegressor(KERNELS["C*Matern(2.5)+White"](4), optimizer=optimizer)
    with skgpu.config_context(device="cpu"):
        with pytest.raises(MemoryError, match=r"needs about .* GB at n = 3,000") as info:
            gp.fit(X, y)
        assert not hasattr(gp, "kernel_")
        fits = int(re.search(r"largest n that fits in the CPU's memory is ([\d,]+)",
                             str(info.value)).group(1).replace(",", ""))
        assert 500 < fits < 3000
        below = int(0.98 * fits)
        gp.fit(X[:below], y[:below])
    assert gp.kernel_ is not None


def test_log_marginal_likelihood_the_host_cannot_hold_is_refused(rng, monkeypatch):
    X, y = _data(rng, 1500)
    with skgpu.config_context(device="cpu"):
        gp = GaussianProcessRegressor(KERNELS["C*RBF(ARD)+White"](4), optimizer=None).fit(X, y)
        monkeypatch.setattr(_memory, "host_available_bytes", lambda: 20 * 10**6)
        with pytest.raises(MemoryError, match="log_marginal_likelihood: the dense path"):
            gp.log_marginal_likelihood(gp.kernel_.theta, eval_gradient=True)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_small_fits_are_not_probed(rng, monkeypatch):
    """While 24 n x n matrices fit, no probe runs (a search's many small fits)."""
    def no_probe(*args, **kwargs):
        raise AssertionError("probed")

    monkeypatch.setattr(_memory, "measure_multiplier", no_probe)
    X, y = _data(rng, 400)
    with skgpu.config_context(device="cpu"):
        GaussianProcessRegressor(KERNELS["C*RBF(ARD)+White"](4)).fit(X, y)


def test_cpu_fallback_after_gpu_oom_is_refused_when_the_host_cannot_hold_it(
        oom_gpu, rng, monkeypatch):
    """Under device='auto' a GPU out-of-memory error falls back to the CPU only where the
    host's memory can hold the work; here it cannot: a MemoryError with the numbers,
    not hours of CPU work."""
    def oom(self, A, *, what="matrix", overwrite=False):
        raise MemoryError("Out of memory allocating 80,000,000,000 bytes (injected)")

    monkeypatch.setattr(type(oom_gpu), "cholesky", oom)
    monkeypatch.setattr(_memory, "host_available_bytes", lambda: 30 * 10**6)
    X, y = _data(rng, 2500)
    gp = GaussianProcessRegressor(KERNELS["C*RBF(ARD)+White"](4), optimizer=None)
    with pytest.warns(skgpu.GPUFallbackWarning, match="ran out of GPU memory"):
        with pytest.raises(MemoryError, match="the CPU has 0.0 GB available"):
            gp.fit(X, y)
    assert not hasattr(gp, "kernel_")


@pytest.mark.parametrize("cholesky", ["dense", "sparse"])
def test_fit_without_optimizer_factors_once(rng, monkeypatch, cholesky):
    """optimizer=None: one kernel matrix and one factorisation (it was two: the fit took
    twice a likelihood evaluation), and the same log_marginal_likelihood_value_ as the
    likelihood at theta and as scikit-learn's."""
    from sklearn.gaussian_process import GaussianProcessRegressor as SkGPR

    from skgpu.backends import _cpu
    from skgpu.gaussian_process.kernels import Tapered

    calls = []
    for name in ("cholesky", "sparse_spd"):
        real = getattr(_cpu.CPUBackend, name)

        def counted(self, *args, _real=real, _name=name, **kwargs):
            calls.append(_name)
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(_cpu.CPUBackend, name, counted)
    X = rng.uniform(0, 1, (600, 2))
    y = np.sin(6 * X[:, 0]) + 0.05 * rng.standard_normal(600)
    kernel = (C(1.0) * Tapered(Matern(0.1, nu=1.5), taper_range=0.1) + WhiteKernel(0.01)
              if cholesky == "sparse" else C(1.0) * RBF([0.3, 0.3]) + WhiteKernel(0.01))
    with skgpu.config_context(device="cpu"):
        gp = GaussianProcessRegressor(kernel, optimizer=None, cholesky=cholesky).fit(X, y)
        assert calls == ["cholesky" if cholesky == "dense" else "sparse_spd"]
        assert gp._n_lml_evaluations == 1
        at_theta = gp.log_marginal_likelihood(gp.kernel_.theta)
    assert gp.log_marginal_likelihood_value_ == pytest.approx(at_theta, rel=1e-12)
    if cholesky == "dense":
        ref = SkGPR(kernel, optimizer=None).fit(X, y).log_marginal_likelihood_value_
        assert gp.log_marginal_likelihood_value_ == pytest.approx(ref, rel=1e-10)


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_large_n_estimate_is_one_matrix_and_panels(rng, monkeypatch, name):
    """At n = 100,000 the estimate is the panelled evaluation's, about one n x n matrix
    (the probe runs its panels in the same proportion): 1.1-1.6 n² · 8 bytes, not the
    3-8 of whole-matrix evaluation, so the MemoryError's largest n is ~sqrt(1/1.4) of
    what memory holds in n² · 8."""
    monkeypatch.setattr(_memory, "host_available_bytes", lambda: 24 * 10**9)
    n = 100_000
    X, y = _data(rng, n, d=8)
    with skgpu.config_context(device="cpu"), pytest.raises(MemoryError) as info:
        GaussianProcessRegressor(KERNELS[name](8)).fit(X, y)
    text = str(info.value)
    multiplier = float(re.search(r"\(([\d.]+) n x n float64 matrices", text).group(1))
    assert 1.1 <= multiplier <= 1.6, text
    fits = int(re.search(r"largest n that fits in the CPU's memory is ([\d,]+)",
                         text).group(1).replace(",", ""))
    assert 0.9 * 24e9 / (8 * 1.6) < fits**2 < 0.9 * 24e9 / (8 * 1.1)


def _count_factorisations(monkeypatch, backend_type):
    calls = []
    original = backend_type.cholesky

    def counted(self, *args, **kwargs):
        calls.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(backend_type, "cholesky", counted)
    return calls


@pytest.mark.parametrize("optimizer", [None, "fmin_l_bfgs_b"])
def test_gpu_fit_that_does_not_fit_is_refused_before_it_runs(oom_gpu, rng, monkeypatch,
                                                              optimizer):
    """device='gpu': a dense fit the GPU's free memory cannot hold raises
    GPUOutOfMemoryError with the bytes, each backend's memory and the largest n that
    fits on the GPU, before any factorisation; the estimator stays unfitted."""
    monkeypatch.setattr(_memory, "gpu_free_bytes", lambda: 40 * 10**6)
    monkeypatch.setattr(_memory, "host_available_bytes", lambda: 8 * 10**9)
    calls = _count_factorisations(monkeypatch, type(oom_gpu))
    X, y = _data(rng, 3000)
    gp = GaussianProcessRegressor(KERNELS["C*RBF(ARD)+White"](4), optimizer=optimizer)
    with skgpu.config_context(device="gpu"):
        with pytest.raises(skgpu.GPUOutOfMemoryError,
                           match=r"needs about .* GB at n = 3,000 .* the GPU has 0.0 GB "
                                 r"free, the CPU has 8.0 GB available") as info:
            gp.fit(X, y)
    assert calls == []
    assert not hasattr(gp, "kernel_")
    fits = int(re.search(r"largest n that fits in the GPU's memory is ([\d,]+)",
                         str(info.value)).group(1).replace(",", ""))
    assert 500 < fits < 3000
    assert _memory.dense_bytes(fits, 1.0, 4, 1) <= 40 * 10**6
    with skgpu.config_context(device="gpu"):
        gp.set_params(optimizer=None).fit(X[:fits], y[:fits])
    assert gp.backend_ == "gpu" and calls


def test_gpu_fit_that_does_not_fit_falls_back_to_a_host_that_holds_it(oom_gpu, rng,
                                                                      monkeypatch):
    """device='auto': the same refusal is the GPU out-of-memory error on which the fit
    runs on the CPU (the host has the memory), with the warning; no GPU work first."""
    monkeypatch.setattr(_memory, "gpu_free_bytes", lambda: 40 * 10**6)
    monkeypatch.setattr(_memory, "host_available_bytes", lambda: 8 * 10**9)
    calls = _count_factorisations(monkeypatch, type(oom_gpu))
    X, y = _data(rng, 3000)
    gp = GaussianProcessRegressor(KERNELS["C*RBF(ARD)+White"](4), optimizer=None)
    with pytest.warns(skgpu.GPUFallbackWarning, match="ran out of GPU memory.*the GPU has"):
        gp.fit(X, y)
    assert gp.backend_ == "cpu" and calls == []
    with skgpu.config_context(device="cpu"):
        ref = GaussianProcessRegressor(KERNELS["C*RBF(ARD)+White"](4), optimizer=None)
        ref.fit(X, y)
    np.testing.assert_array_equal(gp.alpha_, ref.alpha_)


def test_log_marginal_likelihood_beyond_the_gpu_is_refused(oom_gpu, rng, monkeypatch):
    """The public likelihood on the GPU is checked like a fit (a model fitted at
    n = 100,000 holds its factor: a second kernel matrix does not fit beside it)."""
    X, y = _data(rng, 1500)
    gp = GaussianProcessRegressor(KERNELS["C*RBF(ARD)+White"](4), optimizer=None)
    with skgpu.config_context(device="cpu"):
        gp.fit(X, y)
    monkeypatch.setattr(_memory, "gpu_free_bytes", lambda: 10 * 10**6)
    with skgpu.config_context(device="gpu"):
        with pytest.raises(skgpu.GPUOutOfMemoryError,
                           match="log_marginal_likelihood: the dense path needs"):
            gp.log_marginal_likelihood(gp.kernel_.theta, eval_gradient=True)


@pytest.mark.gpu
def test_gpu_memory_check_on_the_device(rng, monkeypatch):
    """On a real GPU: the free memory is read (a positive number of bytes), a fit that
    fits runs there, and one beyond the (pretended) free memory is refused with it."""
    free = _memory.gpu_free_bytes()
    assert free is not None and free > 10**8
    X, y = _data(rng, 3000)
    kernel = KERNELS["C*RBF(ARD)+White"](4)
    with skgpu.config_context(device="gpu"):
        gp = GaussianProcessRegressor(kernel, optimizer=None).fit(X, y)
        assert gp.backend_ == "gpu"
        monkeypatch.setattr(_memory, "gpu_free_bytes", lambda: 30 * 10**6)
        with pytest.raises(skgpu.GPUOutOfMemoryError, match="the GPU has 0.0 GB free"):
            GaussianProcessRegressor(kernel, optimizer=None).fit(X, y)
