"""The benchmark suite's quick mode runs on a CPU-only machine and checks its own results."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_suite_quick_mode(tmp_path):
    pytest.importorskip("matplotlib")
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run_all.py"), "--quick", "--out-dir",
         str(tmp_path)], capture_output=True, text=True, timeout=600,
        env={**os.environ, "MPLBACKEND": "Agg"},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    doc = json.loads((tmp_path / "suite_quick.json").read_text())
    assert doc["rows"] and not [r for r in doc["rows"] if "error" in r]
    assert {r["estimator"] for r in doc["rows"]} >= {
        "PCA", "TruncatedSVD", "RidgeCV", "GaussianProcessRegressor",
        "GaussianProcessRegressor (sparse)"}
    # every skgpu result was checked against scikit-learn's where both ran
    checked = [r for r in doc["rows"] if "rel_diff_vs_sklearn" in r]
    assert checked and all(r["rel_diff_vs_sklearn"] < 1e-3 for r in checked)
    assert (tmp_path / "suite_quick.md").read_text().count("| skgpu-cpu |") >= 5
    assert list(tmp_path.glob("suite_quick_*_time_vs_n.png"))
    assert (tmp_path / "suite_quick_speedup.png").exists()
