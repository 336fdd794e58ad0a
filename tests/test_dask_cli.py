"""A cluster started with dask's own command lines, as on several hosts: the
user guide's ``dask scheduler`` / ``dask worker ADDRESS`` / ``Client(ADDRESS)``, run here
on one machine. skgpu needs nothing but the scheduler's address."""

import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

from skgpu.decomposition import PCA  # noqa: E402
from skgpu.linear_model import RidgeCV  # noqa: E402


def _dask_executable():
    """The ``dask`` console script beside this Python, else on PATH (None: neither)."""
    beside = os.path.join(os.path.dirname(sys.executable), "dask")
    return beside if os.path.exists(beside) else shutil.which("dask")


def _dask(exe, *args):
    """``dask ...`` as the user runs it."""
    return subprocess.Popen([exe, *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def test_fit_on_a_cluster_started_from_the_command_line(tmp_path):
    exe = _dask_executable()
    if exe is None:
        pytest.skip("the 'dask' command (distributed's console script) is neither beside "
                    "this Python nor on PATH (distributed installed into a --target "
                    "folder, say)")
    rng = np.random.default_rng(7)  # one seed: starting processes is the cost here
    scheduler_file = tmp_path / "scheduler.json"
    procs = [_dask(exe, "scheduler", "--port", "0", "--dashboard-address", ":0",
                   "--scheduler-file", str(scheduler_file))]
    try:
        # however long the scheduler takes to write its address (pytest-timeout bounds
        # the wait); a scheduler that exited fails at once
        while not (scheduler_file.exists() and scheduler_file.stat().st_size):
            assert procs[0].poll() is None, "the dask scheduler exited"
            time.sleep(0.05)
        address = json.loads(scheduler_file.read_text())["address"]  # tcp://host:port
        procs.append(_dask(exe, "worker", address, "--nworkers", "2", "--nthreads", "1",
                           "--memory-limit", "0", "--dashboard-address", ":0"))
        with distributed.Client(address) as client:
            client.wait_for_workers(2)
            Xn = rng.standard_normal((20_000, 16)) + 1.0
            yn = Xn[:, :4].sum(axis=1) + 0.1 * rng.standard_normal(20_000)
            X, y = client.persist([da.from_array(Xn, chunks=(2_500, 16)),
                                   da.from_array(yn, chunks=2_500)])
            pca = PCA(5).fit(X)
            ridge = RidgeCV(alphas=[0.1, 1.0, 10.0]).fit(X, y)
        assert pca.backend_ == ridge.backend_ == "dask"
        memory_pca = PCA(5).fit(Xn)
        memory_ridge = RidgeCV(alphas=[0.1, 1.0, 10.0]).fit(Xn, yn)
        np.testing.assert_allclose(np.abs(pca.components_), np.abs(memory_pca.components_),
                                   rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(ridge.coef_, memory_ridge.coef_, rtol=1e-8)
        assert ridge.alpha_ == memory_ridge.alpha_
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
