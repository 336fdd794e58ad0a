"""BLAS threads on the CPU backend (skgpu/backends/_threads.py): one thread for small work
in the main thread, every thread for large work, the pools always given back, and worker
threads never touching them (OpenBLAS takes limits only from the thread that set first)."""

import threading

import numpy as np
import pytest
from threadpoolctl import threadpool_info

import skgpu
from skgpu.backends import _threads
from skgpu.backends._threads import SMALL_WORK_FLOPS, managed_blas_threads
from skgpu.gaussian_process import GaussianProcessRegressor
from skgpu.linear_model import RidgeCV


def _blas_threads():
    return sorted(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")


@pytest.fixture
def pools():
    """The BLAS pools' sizes before the test (the test needs more than one thread, and
    the main thread: pytest-xdist runs tests there too)."""
    before = _blas_threads()
    if not before or max(before) < 2:
        pytest.skip("BLAS has one thread here: nothing to limit")
    assert threading.current_thread() is threading.main_thread()
    yield before
    assert _blas_threads() == before  # always given back


def test_small_work_runs_on_one_thread(pools):
    with managed_blas_threads(flops=SMALL_WORK_FLOPS / 10):
        assert set(_blas_threads()) == {1}
        with managed_blas_threads(flops=10 * SMALL_WORK_FLOPS):  # nested: the same work
            assert set(_blas_threads()) == {1}
    assert _blas_threads() == pools


def test_large_or_unsized_work_keeps_every_thread(pools):
    with managed_blas_threads(flops=10 * SMALL_WORK_FLOPS):
        assert _blas_threads() == pools
    with managed_blas_threads():
        assert _blas_threads() == pools


def test_worker_threads_leave_the_pools_alone(pools):
    seen = []

    def work():
        with managed_blas_threads(flops=1.0):
            seen.append(_blas_threads())

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert seen == [pools]


def test_disabled_changes_nothing(pools, monkeypatch):
    monkeypatch.setattr(_threads, "enabled", False)
    with managed_blas_threads(flops=1.0):
        assert _blas_threads() == pools


def test_small_fits_run_on_one_thread(pools, monkeypatch):
    """Through the estimators: a small GP and RidgeCV fit on the CPU see one BLAS thread,
    and leave the pools as they found them."""
    from skgpu.backends import _cpu

    seen = []
    real = _cpu.CPUBackend.cholesky
    monkeypatch.setattr(_cpu.CPUBackend, "cholesky",
                        lambda self, *a, **k: (seen.append(_blas_threads()), real(self, *a, **k))[1])
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, (60, 2))
    with skgpu.config_context(device="cpu"):
        GaussianProcessRegressor(optimizer=None).fit(X, np.sin(X).sum(axis=1))
        RidgeCV().fit(X, X.sum(axis=1))
    assert seen and all(set(s) == {1} for s in seen)
