"""Backend selection, its reasons, and the fallback from the GPU to the CPU."""

import logging
import subprocess
import sys

import numpy as np
import pytest
from sklearn.decomposition import PCA as SkPCA

import skgpu
from skgpu import backends
from skgpu.backends import _cpu
from skgpu.decomposition import PCA


def test_import_skgpu_does_not_import_gpu_stack():
    code = ("import sys, skgpu, skgpu.decomposition, skgpu.linear_model, skgpu.gaussian_process; "
            "print(sorted(m for m in ('cupy', 'nvmath', 'torch', 'dask') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_stack_missing_auto_runs_on_cpu_and_logs_why(no_gpu_stack, caplog):
    usable, reason = backends.gpu_status()
    assert not usable and "CuPy is not importable" in reason
    X = np.random.default_rng(0).standard_normal((50, 4))
    with caplog.at_level(logging.INFO, logger="skgpu"):
        pca = PCA(n_components=2).fit(X)
    assert pca.backend_ == "cpu"
    records = [r for r in caplog.records if r.name == "skgpu"]
    assert any("running on the CPU: CuPy is not importable" in r.getMessage() for r in records)
    np.testing.assert_allclose(pca.components_, SkPCA(n_components=2).fit(X).components_,
                               rtol=1e-10, atol=1e-12)


def test_device_gpu_without_stack_raises_clearly(no_gpu_stack):
    X = np.random.default_rng(0).standard_normal((50, 4))
    with skgpu.config_context(device="gpu"):
        with pytest.raises(skgpu.GPUUnavailableError, match="device='gpu'.*CuPy is not importable"):
            PCA(n_components=2).fit(X)
    pca = PCA(n_components=2)
    with skgpu.config_context(device="gpu"), pytest.raises(skgpu.GPUUnavailableError):
        pca.fit(X)
    assert not hasattr(pca, "components_"), "a failed fit must not leave fitted attributes"


def test_device_cpu_is_honoured_and_explained():
    backend, reason = backends.select_backend("cpu")
    assert backend.name == "cpu" and reason == "device='cpu' was requested"


@pytest.mark.parametrize("device", ["auto", "cpu"])
@pytest.mark.parametrize("estimator", ["PCA", "TruncatedSVD"])
def test_the_log_says_who_chose_the_cpu(caplog, device, estimator):
    """A solver that only runs on the CPU says so; 'requested' only where the user
    asked for the CPU; and where the GPU stack is missing, that."""
    from skgpu.decomposition import TruncatedSVD

    X = np.random.default_rng(0).standard_normal((60, 6))
    model = (PCA(n_components=2, svd_solver="arpack") if estimator == "PCA"
             else TruncatedSVD(n_components=2, algorithm="arpack"))
    with caplog.at_level(logging.INFO, logger="skgpu"), skgpu.config_context(device=device):
        model.fit(X)
    messages = [r.getMessage() for r in caplog.records if r.name == "skgpu"
                and r.getMessage().startswith(f"{estimator}.fit:")]
    assert messages, [r.getMessage() for r in caplog.records]
    assert all("'arpack' runs on the CPU (SciPy's ARPACK)" in m for m in messages), messages
    assert not any("requested" in m for m in messages), messages
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="skgpu"), skgpu.config_context(device="cpu"):
        PCA(n_components=2).fit(X)
    assert any(r.getMessage().endswith(": device='cpu' was requested")
               for r in caplog.records), [r.getMessage() for r in caplog.records]


def test_bad_device_rejected():
    with pytest.raises(ValueError, match="device must be one of"):
        skgpu.set_config(device="tpu")
    with pytest.raises(ValueError, match="device must be"):
        backends.select_backend("tpu")


class _OOMBackend(_cpu.CPUBackend):
    """Looks like a GPU backend whose Gram matrix runs out of memory."""

    name = "gpu"
    is_gpu = True
    # the GPU backend's policies
    finite_check = "output"
    memory = "device"
    defers_host_copies = True
    neighbour_search = "cell-list"
    freed = 0

    def gram(self, X, mean=None):
        raise MemoryError("Out of memory allocating 1,000,000,000 bytes (injected)")

    def free_memory(self):
        type(self).freed += 1


@pytest.fixture
def oom_gpu(monkeypatch):
    fake = _OOMBackend()
    monkeypatch.setattr(backends, "gpu_unsupported_reason", lambda operations=(): None)
    monkeypatch.setattr(backends, "gpu_status", lambda: (True, "fake GPU"))
    monkeypatch.setattr(backends, "get_backend",
                        lambda name: fake if name == "gpu" else backends._CPU)
    return fake


def test_injected_oom_falls_back_with_warning(oom_gpu, rng):
    X = rng.standard_normal((200, 6))
    with pytest.warns(skgpu.GPUFallbackWarning, match="ran out of GPU memory.*running on the CPU"):
        pca = PCA(n_components=3, svd_solver="covariance_eigh").fit(X)
    assert pca.backend_ == "cpu"
    assert _OOMBackend.freed >= 1
    ref = PCA(n_components=3, svd_solver="covariance_eigh")
    with skgpu.config_context(device="cpu"):
        ref.fit(X)
    np.testing.assert_array_equal(pca.components_, ref.components_)
    np.testing.assert_array_equal(pca.explained_variance_, ref.explained_variance_)


def test_injected_oom_with_device_gpu_raises_and_leaves_estimator_unfitted(oom_gpu, rng):
    X = rng.standard_normal((200, 6))
    pca = PCA(n_components=3, svd_solver="covariance_eigh")
    with skgpu.config_context(device="gpu"):
        with pytest.raises(skgpu.GPUOutOfMemoryError, match="use device='auto'"):
            pca.fit(X)
    assert not hasattr(pca, "components_")


def test_non_memory_errors_are_not_swallowed(monkeypatch, oom_gpu, rng):
    def broken(self, X, mean=None):
        raise RuntimeError("CUSOLVER_STATUS_INTERNAL_ERROR")

    monkeypatch.setattr(_OOMBackend, "gram", broken)
    with pytest.raises(RuntimeError, match="INTERNAL_ERROR"):
        PCA(n_components=2, svd_solver="covariance_eigh").fit(rng.standard_normal((30, 4)))


def test_unsupported_operation_reason(monkeypatch):
    monkeypatch.setattr(backends, "gpu_status", lambda: (True, "fake GPU"))
    monkeypatch.setattr(backends, "_requirement_status",
                        lambda req: (False, "cuDSS is not loadable (OSError: libcudss.so.0)"))
    assert "needs cudss" in backends.gpu_unsupported_reason(["sparse_spd"])
    backend, reason = backends.select_backend("auto", operations=["sparse_spd"])
    assert backend.name == "cpu" and "cuDSS is not loadable" in reason
    with pytest.raises(skgpu.GPUUnavailableError, match="cuDSS"):
        backends.select_backend("gpu", operations=["sparse_spd"])


@pytest.mark.gpu
def test_real_gpu_out_of_memory_falls_back(rng):
    import cupy as cp

    X = rng.standard_normal((20_000, 64))
    ref = PCA(n_components=4, svd_solver="covariance_eigh")
    with skgpu.config_context(device="cpu"):
        ref.fit(X)
    pool = cp.get_default_memory_pool()
    pool.free_all_blocks()
    pool.set_limit(size=1 << 20)  # 1 MiB: X alone is 10 MiB
    try:
        with pytest.warns(skgpu.GPUFallbackWarning, match="out of GPU memory"):
            pca = PCA(n_components=4, svd_solver="covariance_eigh").fit(X)
    finally:
        pool.set_limit(size=0)
    assert pca.backend_ == "cpu"
    np.testing.assert_array_equal(pca.components_, ref.components_)


@pytest.mark.gpu
def test_gpu_status_reports_device():
    usable, reason = backends.gpu_status()
    assert usable and "nvmath-python" in reason


def test_gpr_oom_at_the_last_step_reruns_with_the_same_restarts(monkeypatch, rng):
    """A GPU out-of-memory error after the optimizer's restarts were drawn: the CPU rerun
    draws the same restarts and ends where a CPU fit does."""
    from sklearn.gaussian_process.kernels import RBF, WhiteKernel

    from skgpu.gaussian_process import GaussianProcessRegressor

    X = rng.uniform(-2, 2, (40, 2))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(40)
    params = dict(kernel=RBF([1.0, 1.0]) + WhiteKernel(0.1), n_restarts_optimizer=2,
                  random_state=np.random.RandomState(7))
    calls = []
    real = _cpu.CPUBackend.cholesky

    def counting(self, A, **kwargs):
        calls.append(1)
        return real(self, A, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(_cpu.CPUBackend, "cholesky", counting)
        with skgpu.config_context(device="cpu"):
            ref = GaussianProcessRegressor(**params).fit(X, y)
    total = len(calls)

    class LastStepOOM(_cpu.CPUBackend):
        name, is_gpu, seen = "gpu", True, 0

        def cholesky(self, A, **kwargs):
            type(self).seen += 1
            if type(self).seen == total:  # the final factorisation, after all restarts
                raise MemoryError("Out of memory (injected at the last step)")
            return real(self, A, **kwargs)

        def free_memory(self):
            pass

    fake = LastStepOOM()
    monkeypatch.setattr(backends, "gpu_unsupported_reason", lambda operations=(): None)
    monkeypatch.setattr(backends, "gpu_status", lambda: (True, "fake GPU"))
    monkeypatch.setattr(backends, "get_backend",
                        lambda name: fake if name == "gpu" else backends._CPU)
    params["random_state"] = np.random.RandomState(7)
    with pytest.warns(skgpu.GPUFallbackWarning, match="ran out of GPU memory"):
        ours = GaussianProcessRegressor(**params).fit(X, y)
    assert ours.backend_ == "cpu" and LastStepOOM.seen == total
    np.testing.assert_allclose(ours.kernel_.theta, ref.kernel_.theta, rtol=1e-12)
    assert ours.log_marginal_likelihood_value_ == ref.log_marginal_likelihood_value_


def _small_call_cases(rng):
    from sklearn import decomposition as skd
    from sklearn import gaussian_process as skg
    from sklearn import linear_model as skl

    from skgpu.decomposition import TruncatedSVD
    from skgpu.gaussian_process import GaussianProcessRegressor
    from skgpu.linear_model import Ridge, RidgeCV

    X, y = rng.standard_normal((300, 6)), rng.standard_normal(300)
    return [(Ridge(), skl.Ridge(), "predict", X, y),
            (RidgeCV(), skl.RidgeCV(), "predict", X, y),
            (PCA(3, whiten=True), skd.PCA(3, whiten=True), "transform", X, None),
            (TruncatedSVD(3, random_state=0), skd.TruncatedSVD(3, random_state=0),
             "transform", X, None),
            (GaussianProcessRegressor(optimizer=None),
             skg.GaussianProcessRegressor(optimizer=None), "predict", X, y)]


@pytest.mark.parametrize("case", range(5))
def test_small_calls_on_the_cpu_are_scikit_learns_own_and_reported(rng, case):
    """A transform or predict of host data on the CPU backend runs scikit-learn's own
    method on the fitted attributes: its output to the bit, reported like any call."""
    ours, theirs, method, X, y = _small_call_cases(rng)[case]
    args = (X,) if y is None else (X, y)
    with skgpu.config_context(device="cpu"):
        ours.fit(*args)
    theirs.fit(*args)
    for name in ("coef_", "intercept_", "components_", "mean_", "explained_variance_",
                 "alpha_", "X_train_", "L_", "_y_train_mean", "_y_train_std"):
        if hasattr(theirs, name):  # the same model in both: the call is what is compared
            setattr(theirs, name, getattr(ours, name))
    name = f"{type(ours).__name__}.{method}"
    for rows in (X[:1], X[:100], X[:7].tolist()):
        with skgpu.config_context(device="cpu"), backends.observe_backends() as seen:
            out = getattr(ours, method)(rows)
        np.testing.assert_array_equal(out, getattr(theirs, method)(rows))
        assert [(what, where) for what, where, _ in seen] == [(name, "cpu")]
    if method == "predict" and type(ours).__name__ == "GaussianProcessRegressor":
        # a float32 query is ours (it is promoted; scikit-learn's kernel may not)
        X32 = X[:5].astype(np.float32)
        with skgpu.config_context(device="cpu"), backends.observe_backends() as seen:
            np.testing.assert_allclose(ours.predict(X32),
                                       theirs.predict(X32.astype(np.float64)), rtol=1e-12)
        assert [(what, where) for what, where, _ in seen] == [(name, "cpu")]
