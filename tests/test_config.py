import threading

import pytest

import skgpu


def test_config_context_restores():
    assert skgpu.get_config() == {"device": "auto", "matmul_precision": "highest"}
    with skgpu.config_context(device="cpu", matmul_precision="high"):
        assert skgpu.get_config() == {"device": "cpu", "matmul_precision": "high"}
        with skgpu.config_context(device="gpu"):
            assert skgpu.get_config()["device"] == "gpu"
        assert skgpu.get_config()["device"] == "cpu"
    assert skgpu.get_config()["device"] == "auto"


def test_config_is_thread_local():
    seen = {}
    with skgpu.config_context(device="cpu"):
        t = threading.Thread(target=lambda: seen.setdefault("d", skgpu.get_config()["device"]))
        t.start()
        t.join()
    assert seen["d"] == "auto"


def test_bad_precision():
    with pytest.raises(ValueError, match="matmul_precision must be one of"):
        with skgpu.config_context(matmul_precision="low"):
            pass


def test_show_versions(capsys):
    skgpu.show_versions()
    out = capsys.readouterr().out
    assert "scikit-learn" in out and "GPU backend" in out and "usable" in out


def test_main_runs(capsys):
    from skgpu.__main__ import main

    assert main([]) == 0
    out = capsys.readouterr().out
    assert "Demo on data bundled with scikit-learn" in out
    for name in ("PCA(16, covariance_eigh)", "TruncatedSVD(16)", "RidgeCV(13 alphas, LOO)",
                 "GaussianProcessRegressor"):
        assert name in out
    # every row's results agree with scikit-learn's
    rows = [line.split(" | ") for line in out.splitlines() if line.count(" | ") == 7]
    assert len(rows) == 6  # header and five estimators
    assert all(float(row[-1]) < 1e-6 for row in rows[1:])


@pytest.mark.parametrize("backend", ["loky", "threading", "multiprocessing"])
def test_config_reaches_joblib_workers(backend):
    """Inside config_context(device="gpu") on a machine without a usable GPU, every
    worker of a search must refuse to fit (it ran with device="auto" before)."""
    import joblib
    import numpy as np
    from sklearn.model_selection import GridSearchCV

    from skgpu.backends import gpu_status
    from skgpu.decomposition import PCA

    if gpu_status()[0]:
        pytest.skip("needs a machine where device='gpu' fails")
    X = np.random.default_rng(0).standard_normal((60, 5))
    # error_score=nan, not "raise": every fit fails, and scikit-learn then raises once all
    # of them have come back, quoting the workers' error. With "raise", joblib aborts its
    # pool mid-flight, and terminating the multiprocessing backend's pool can hang for good
    # in joblib's own task-handler thread (seen here, 1 run in 6: CI ran out of time).
    # refit=False: only the workers fit (a refit in this thread would raise anyway).
    search = GridSearchCV(PCA(), {"n_components": [1, 2]}, cv=3, n_jobs=2,
                          error_score=np.nan, refit=False)
    with joblib.parallel_backend(backend), skgpu.config_context(device="gpu"):
        with pytest.raises(ValueError, match="All the 6 fits failed") as failed:
            search.fit(X)
    assert str(failed.value).count("GPUUnavailableError: device='gpu' was requested") == 1
    assert "6 fits failed with the following error" in str(failed.value)
    # and the default configuration still fits
    with joblib.parallel_backend(backend):
        assert search.fit(X).best_params_["n_components"] in (1, 2)


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["loky", "threading"])
def test_cpu_config_reaches_joblib_workers_on_a_gpu_machine(backend):
    import joblib
    import numpy as np
    from sklearn.model_selection import cross_validate

    from skgpu.decomposition import PCA

    X = np.random.default_rng(0).standard_normal((60, 5))
    with joblib.parallel_backend(backend), skgpu.config_context(device="cpu"):
        out = cross_validate(PCA(2), X, cv=3, n_jobs=2, return_estimator=True)
    assert {est.backend_ for est in out["estimator"]} == {"cpu"}
    out = cross_validate(PCA(2), X, cv=3, n_jobs=2, return_estimator=True)
    assert {est.backend_ for est in out["estimator"]} == {"gpu"}


def test_joblib_propagation_installed_once():
    from sklearn.utils import parallel

    skgpu._config._propagate_to_joblib_workers()
    call = parallel.Parallel.__call__
    assert call._skgpu_config and not getattr(call.__wrapped__, "_skgpu_config", False)


def test_import_leaves_scikit_learn_untouched_until_a_configuration_is_set():
    """``import skgpu`` changes nothing in scikit-learn; the first configuration other
    than the defaults wraps ``Parallel.__call__`` (to carry it to joblib's workers)."""
    import subprocess
    import sys

    script = (
        "from sklearn.utils import parallel\n"
        "before = parallel.Parallel.__call__\n"
        "import skgpu, skgpu.decomposition, skgpu.linear_model, skgpu.gaussian_process\n"
        "with skgpu.config_context(device='auto'):\n"
        "    pass\n"
        "assert parallel.Parallel.__call__ is before, 'changed by import'\n"
        "with skgpu.config_context(device='cpu'):\n"
        "    assert parallel.Parallel.__call__.__wrapped__ is before\n"
        "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
