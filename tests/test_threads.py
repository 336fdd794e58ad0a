"""BLAS threads on the CPU backend (skgpu/backends/_threads.py): one thread for small work
and for works running at once (from any thread), every thread for one large work, the
pools always given back."""

import threading

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

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
    the main thread: pytest-xdist runs tests there too). Every core for the test's
    duration: the suite's conftest shares the cores between xdist's workers."""
    import os

    with threadpool_limits(os.cpu_count() or 1, user_api="blas"):
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


def test_small_work_in_a_worker_thread_runs_on_one_thread(pools):
    seen = []

    def work():
        with managed_blas_threads(flops=1.0):
            seen.append(_blas_threads())

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert [set(s) for s in seen] == [{1}]
    assert _blas_threads() == pools


def test_works_at_once_share_one_thread_each_and_give_it_back(pools):
    """Two large works at once (one in the main thread, one in a worker): one BLAS thread
    while both run, every thread again for the one left, the found limits at the end,
    whichever thread ends last."""
    started, release, seen = threading.Event(), threading.Event(), {}

    def worker():
        with managed_blas_threads(flops=10 * SMALL_WORK_FLOPS):
            started.set()
            release.wait(10)
            seen["worker, alone"] = _blas_threads()

    with managed_blas_threads(flops=10 * SMALL_WORK_FLOPS):
        assert _blas_threads() == pools
        t = threading.Thread(target=worker)
        t.start()
        assert started.wait(10)
        seen["both"] = _blas_threads()
    seen["main done"] = _blas_threads()
    release.set()
    t.join()
    assert set(seen["both"]) == {1}
    assert seen["main done"] == pools  # the worker's large work, alone now: every thread
    assert seen["worker, alone"] == pools
    assert _blas_threads() == pools


def test_many_threads_at_once_end_with_the_limits_found(pools):
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=2, user_api="blas"):  # a user's own limit is kept
        found = _blas_threads()

        def work(flops):
            for _ in range(20):
                with managed_blas_threads(flops=flops):
                    np.linalg.cholesky(np.eye(50))

        threads = [threading.Thread(target=work, args=(f,))
                   for f in (1.0, 10 * SMALL_WORK_FLOPS, None, 1.0)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        assert _blas_threads() == found
    assert _blas_threads() == pools


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
    def counting(self, *a, **k):
        seen.append(_blas_threads())
        return real(self, *a, **k)

    monkeypatch.setattr(_cpu.CPUBackend, "cholesky", counting)
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, (60, 2))
    with skgpu.config_context(device="cpu"):
        GaussianProcessRegressor(optimizer=None).fit(X, np.sin(X).sum(axis=1))
        RidgeCV().fit(X, X.sum(axis=1))
    assert seen and all(set(s) == {1} for s in seen)


def test_a_host_reference_call_counts_as_work_only_past_the_small_size():
    """scikit-learn's own transform/predict on host data counts for the thread policy
    when it is large (another work then holds one thread); a serving-sized call does not
    pay for the accounting."""
    from skgpu.backends import (
        SMALL_HOST_CALL_ELEMENTS,
        container_of,
        run_reference_on_host,
    )

    spec = container_of(np.zeros((2, 2)))
    seen = []

    def probe():
        seen.append(dict(_threads._running))
        return 1

    with skgpu.config_context(device="cpu"):
        assert run_reference_on_host(probe, spec=spec, elements=20) == 1
        assert run_reference_on_host(probe, spec=spec,
                                     elements=SMALL_HOST_CALL_ELEMENTS) == 1
        assert run_reference_on_host(probe, spec=spec) == 1  # size not known: counted
    assert seen[0] == {}
    assert len(seen[1]) == 1 and len(seen[2]) == 1
    assert _threads._running == {}
