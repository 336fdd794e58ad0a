import builtins
import sys

import numpy as np
import pytest

from skgpu import backends


def _gpu_usable():
    return backends.gpu_status()[0]


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a usable GPU backend (skipped without one)")
    config.addinivalue_line("markers", HEAVY_MARKER)
    _share_the_cores_between_xdist_workers()


HEAVY_MARKER = ("heavy: starts Python processes (the accelerator's command line, loky "
                "workers, a Dask cluster, mypy, the benchmarks), runs a whole suite, or "
                "runs the matrix of Dask chunkings; left out by the quick subset, "
                "-m 'not heavy'")
#: The heavy tests (marked at collection): whole modules, or tests by name prefix.
HEAVY = {
    "test_typing.py": (),
    "test_benchmarks.py": (),
    "test_guard.py": ("test_the_check_command",),
    "test_main.py": (),
    "test_dask_cli.py": (),
    "test_dask_failures.py": (),
    "test_accel.py": ("test_sklearns_own_tests", "test_loky_workers",
                      "test_python_m_skgpu_accel", "test_verbose_accelerator",
                      "test_profile"),
    "test_convert.py": ("test_a_model_fitted_under_the_accelerator",
                        "test_a_converted_model_loads", "test_every_converted_model"),
    "test_config.py": ("test_config_reaches_joblib_workers",
                       "test_import_leaves_scikit_learn_untouched"),
    "test_random_state.py": ("test_a_shared_generator_optimisation_loop",),
    "test_dask_inputs.py": (),  # every Dask chunking against the in-memory fit
}


def _heavy(item):
    prefixes = HEAVY.get(item.path.name)
    return prefixes is not None and (not prefixes or item.name.startswith(prefixes))


def _share_the_cores_between_xdist_workers():
    """Each of pytest-xdist's N worker processes gets cores // N BLAS threads, as joblib
    gives its process workers: unlimited, 8 workers on 16 cores ran 128 BLAS threads and a
    dense GP likelihood at n = 1,500 took ~40 s on the GPU host instead of ~1 s."""
    import os

    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        from threadpoolctl import threadpool_limits

        threadpool_limits(max(1, (os.cpu_count() or 1) // workers))


def pytest_collection_modifyitems(config, items):
    for item in items:
        if _heavy(item):
            item.add_marker(pytest.mark.heavy)
    if _gpu_usable():
        return
    skip = pytest.mark.skip(reason=f"GPU backend not usable: {backends.gpu_status()[1]}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


#: Backends to parametrise tests over; the GPU one carries the ``gpu`` marker.
BACKENDS = ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)]
DEVICES = BACKENDS


@pytest.fixture(params=BACKENDS)
def ops(request):
    """A backend object, once per backend."""
    return backends.get_backend(request.param)


@pytest.fixture(params=[0, 1, 42])
def seed(request):
    return request.param


@pytest.fixture
def rng(seed):
    return np.random.default_rng(seed)


@pytest.fixture
def no_gpu_stack(monkeypatch):
    """Make CuPy and nvmath-python look not installed, on any machine."""
    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name.split(".")[0] in ("cupy", "cupyx", "nvmath"):
            raise ImportError(f"No module named {name!r} (hidden by the no_gpu_stack fixture)")
        return real_import(name, *args, **kwargs)

    for mod in list(sys.modules):
        if mod.split(".")[0] in ("cupy", "cupyx", "nvmath") or (
                mod == "skgpu.backends.gpu" or mod.startswith("skgpu.backends.gpu.")):
            monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setattr(builtins, "__import__", fake_import)
    backends.gpu_status.cache_clear()
    backends._requirement_status.cache_clear()
    backends._gpu_backend.cache_clear()
    yield
    backends.gpu_status.cache_clear()
    backends._requirement_status.cache_clear()
    backends._gpu_backend.cache_clear()




def pytest_report_teststatus(report, config):
    """No progress letter for a GPU test skipped on a machine without one: half of the
    suite, they are counted in one line at the end instead (the run fits a screen)."""
    if report.skipped and "GPU backend not usable" in str(report.longrepr):
        return "skipped", "", "SKIPPED"
    return None


def pytest_terminal_summary(terminalreporter):
    """The GPU skips in one line (``-ra`` is not in addopts: it listed ~70 of them)."""
    skipped = terminalreporter.stats.get("skipped", [])
    gpu = [r for r in skipped if "GPU backend not usable" in str(r.longrepr)]
    if gpu:
        terminalreporter.write_line(
            f"{len(gpu)} GPU tests skipped: {backends.gpu_status()[1]}")
    other = len(skipped) - len(gpu)
    if other:
        terminalreporter.write_line(f"{other} other tests skipped (pytest -rs lists why)")


@pytest.fixture(scope="module")
def client():
    """A dask.distributed client of two in-process workers, one thread each (the Dask
    tests' cluster), with both workers up (waited for, however long: pytest-timeout
    bounds it on a busy machine)."""
    distributed = pytest.importorskip("distributed")
    # ":0", a free port: None still starts the scheduler's HTTP server on 8787, which the
    # other test process may hold (a warning in every run)
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                       dashboard_address=":0")
    with distributed.Client(cluster) as c:
        c.wait_for_workers(2)
        yield c
    cluster.close()
