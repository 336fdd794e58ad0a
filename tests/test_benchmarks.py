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
         str(tmp_path)], capture_output=True, text=True, env={**os.environ, "MPLBACKEND": "Agg"},
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


def test_accel_sklearn_tests_counts_each_outcome(tmp_path):
    """The per-file comparison of scikit-learn's tests with and without the accelerator
    reads every test's outcome from the two runs."""
    pytest.importorskip("sklearn.decomposition.tests.test_truncated_svd")
    out_file = tmp_path / "accel.json"
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "accel_sklearn_tests.py"), "--device",
         "cpu", "--modules", "sklearn.decomposition.tests.test_truncated_svd", "--out",
         str(out_file)], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    (result,) = json.loads(out_file.read_text())["results"]
    assert result["sklearn"] == result["accel"]
    assert result["sklearn"]["passed"] >= 40 and result["fraction"] == 1.0
    assert result["differences"] == {}


def test_bench_gp_large_runs_small(tmp_path):
    """The large-GP benchmark at small sizes on this machine's backend: every row
    written, the backends agreeing, the fit no slower than ~one likelihood evaluation."""
    out_file = tmp_path / "gp.json"
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_gp_large.py"), "--sizes", "300",
         "900", "--test", "500", "--agree", "200", "--out", str(out_file)],
        capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = json.loads(out_file.read_text())["results"]
    assert len(rows) == 6
    agree = rows[0]
    assert agree["lml_rel_diff"] < 1e-8 and agree["std_rel_diff"] < 1e-8
    assert rows[1]["skgpu"]["repeats"] == 3 and rows[3]["skgpu"]["repeats"] == 1
    assert rows[5]["case"].startswith("predict(return_std=True), 500 test points, n=900")


def test_benchmark_page_escapes_free_text():
    """The docs' benchmark page renders JSON text as reStructuredText: ``L_`` in a note
    would be a link target (the -W docs build failed on one)."""
    sys.path.insert(0, str(ROOT / "docs"))
    try:
        from benchmark_tables import _text, render
    finally:
        sys.path.remove(str(ROOT / "docs"))
    assert _text("the copy of L_ (80 GB)") == "the copy of L\\_ (80 GB)"
    assert _text("a*b `x` |y|") == "a\\*b \\`x\\` \\|y\\|"
    assert _text("n_samples") == "n_samples"
    page = render(ROOT / "benchmarks" / "results")
    assert "L_ " not in page and "**" in page


def test_bench_sparse_gp_variance_runs_small(tmp_path):
    """The sparse variance benchmark at a small size: every row written, the forward
    solves' std and covariance equal to the full solves'."""
    out_file = tmp_path / "variance.json"
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_sparse_gp_variance.py"), "--n",
         "1500", "--points", "300", "--reference-points", "100", "--cov-points", "200",
         "--out", str(out_file)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = json.loads(out_file.read_text())["results"]
    assert not [r for r in rows if "error" in r]
    std = [r for r in rows if r["case"].startswith("predict std")]
    cov = [r for r in rows if r["case"].startswith("predict cov")]
    assert std and cov and len(std) == len(cov)
    assert all(r["std_max_rel_diff_vs_reference"] < 1e-10 for r in std)
    assert all(r["cov_max_abs_diff_vs_reference_over_max"] < 1e-12 for r in cov)
    assert [r for r in rows if r["case"].startswith("public log_marginal_likelihood")]
