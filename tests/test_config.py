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

    assert main() == 0
    out = capsys.readouterr().out
    assert "Demo on data bundled with scikit-learn" in out
    for name in ("PCA(16, covariance_eigh)", "TruncatedSVD(16)", "RidgeCV(13 alphas, LOO)",
                 "GaussianProcessRegressor"):
        assert name in out
    # every row's results agree with scikit-learn's
    rows = [line.split(" | ") for line in out.splitlines() if line.count(" | ") == 7]
    assert len(rows) == 6  # header and five estimators
    assert all(float(row[-1]) < 1e-6 for row in rows[1:])
