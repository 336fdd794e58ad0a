"""A cluster started with dask's own command lines, as on several hosts (issue 23): the
user guide's ``dask scheduler`` / ``dask worker ADDRESS`` / ``Client(ADDRESS)``, run here
on one machine. skgpu needs nothing but the scheduler's address."""

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

from skgpu.decomposition import PCA  # noqa: E402
from skgpu.linear_model import RidgeCV  # noqa: E402


def _dask(*args):
    """``dask ...`` as the user runs it (the console script beside this Python)."""
    exe = os.path.join(os.path.dirname(sys.executable), "dask")
    return subprocess.Popen([exe, *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def test_fit_on_a_cluster_started_from_the_command_line(tmp_path):
    rng = np.random.default_rng(7)  # one seed: starting processes is the cost here
    scheduler_file = tmp_path / "scheduler.json"
    procs = [_dask("scheduler", "--port", "0", "--dashboard-address", ":0",
                   "--scheduler-file", str(scheduler_file))]
    try:
        for _ in range(300):
            if scheduler_file.exists() and scheduler_file.stat().st_size:
                break
            time.sleep(0.1)
        address = json.loads(scheduler_file.read_text())["address"]  # tcp://host:port
        procs.append(_dask("worker", address, "--nworkers", "2", "--nthreads", "1",
                           "--memory-limit", "0", "--dashboard-address", ":0"))
        with distributed.Client(address) as client:
            client.wait_for_workers(2, timeout=60)
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
