"""The benchmark guard's verdict (benchmarks/_guard.py) on synthetic per-call times: a
slowdown beyond the noise fails, noise alone does not; and the command runs."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import _guard  # noqa: E402


def _times(rng, median, spread, n=300):
    return median * np.exp(spread * rng.standard_normal(n))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_slowdown_beyond_the_noise_is_slower(seed):
    rng = np.random.default_rng(seed)
    theirs = _times(rng, 100e-6, 0.1)
    same = _times(rng, 110e-6, 0.1)
    ratio, lo, hi = _guard.bootstrap_ratio(same, theirs)
    assert lo < ratio < hi and ratio == pytest.approx(1.1, rel=0.05)
    assert _guard.verdict(ratio, lo, hi, baseline=1.1) == "same"
    slow = _times(rng, 130e-6, 0.1)
    assert _guard.verdict(*_guard.bootstrap_ratio(slow, theirs), baseline=1.1) == "slower"
    fast = _times(rng, 90e-6, 0.1)
    assert _guard.verdict(*_guard.bootstrap_ratio(fast, theirs), baseline=1.1) == "faster"


def test_noise_widens_the_interval_and_a_noisy_run_is_not_called_slower():
    rng = np.random.default_rng(3)
    theirs = _times(rng, 100e-6, 0.8, n=40)
    ours = _times(rng, 115e-6, 0.8, n=40)  # 15 % slower, but too noisy to tell
    ratio, lo, hi = _guard.bootstrap_ratio(ours, theirs)
    assert hi - lo > 0.2
    assert _guard.verdict(ratio, lo, hi, baseline=1.0) == "same"


def test_a_host_bound_gpu_row_has_the_allowance_the_hosts_need():
    """The streamed PCA row (host memory copies and PCIe, 40-52 ms on H100 hosts for the
    same code) is allowed 30 %; a row of the GPU's own is allowed GPU_TOLERANCE. A 27 %
    slowdown is 'same' on the first and 'slower' on the second, the same per-call times."""
    rng = np.random.default_rng(4)
    base = _times(rng, 40e-3, 0.02, n=20)
    slow = _times(rng, 51e-3, 0.02, n=20)
    ratio, lo, hi = _guard.bootstrap_ratio(slow, base)
    names = _guard.gpu_case_names()
    streamed = names["streamed"]
    for start in _guard.HOST_BOUND_TOLERANCE:  # rows the guard runs, at every scale
        for scale in (0.5, 1.0, 2.0):
            assert any(name.startswith(start)
                       for name in _guard.gpu_case_names(scale).values())
    assert _guard.verdict(ratio, lo, hi, 1.0, _guard.gpu_tolerance(streamed)) == "same"
    ridge = names["ridge"]
    assert _guard.gpu_tolerance(ridge) == _guard.GPU_TOLERANCE
    assert _guard.verdict(ratio, lo, hi, 1.0, _guard.gpu_tolerance(ridge)) == "slower"
    faster = _times(rng, 30e-3, 0.02, n=20)
    assert _guard.verdict(*_guard.bootstrap_ratio(faster, base), 1.0,
                          _guard.gpu_tolerance(streamed)) == "faster"


def test_the_check_command_reports_every_row(tmp_path):
    """``run_all.py --check --quick --report-only``: every small-call row with its ratio,
    interval, the committed baseline and a verdict (timings are not asserted)."""
    out_file = tmp_path / "guard.json"
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run_all.py"), "--check", "--quick",
         "--report-only", "--out", str(out_file)], capture_output=True, text=True,
        cwd=ROOT / "benchmarks")
    assert out.returncode == 0, out.stderr[-2000:]
    import sklearn

    rows = json.loads(out_file.read_text())["results"]
    assert len(rows) == 10
    baseline = json.loads((ROOT / "benchmarks" / "results" / "guard_baseline_cpu.json")
                          .read_text())
    comparable = baseline["machine"]["scikit-learn"] == sklearn.__version__
    for row in rows:
        lo, hi = row["interval"]
        assert lo <= row["ratio"] <= hi
        if comparable:
            assert row["baseline"] is not None
            assert row["verdict"] in ("same", "faster", "slower")
        else:  # a ratio to another scikit-learn's time is not compared
            assert row["baseline"] is None and row["verdict"] == "no baseline"


def test_the_gpu_rows_keep_the_baselines_names_and_scale_their_sizes():
    """At scale 1 the GPU rows are named exactly as the committed baseline's rows (a
    renamed row would go unguarded, 'no baseline'); at 0.5 and 2 every name differs from
    them and carries the scaled sizes."""
    committed = json.loads(_guard.GPU_BASELINE.read_text())
    names = {r["case"] for r in committed["results"]}
    assert names == set(_guard.gpu_case_names().values())
    half, double = _guard.gpu_case_names(0.5), _guard.gpu_case_names(2.0)
    assert not set(half.values()) & names
    assert not set(double.values()) & names
    assert double["ridge"].startswith("RidgeCV.fit CuPy 1M x 256 f64")
    assert half["pca"] == "PCA(16).fit CuPy 500k x 256 f32"
    assert double["dense"] == "GP dense LML + gradient n=40,000 d=8"
    assert half["std"] == "GP sparse predict std, 5,000 of n=100,000"
    assert _guard.gpu_sizes(2.0)["pca"] == 2_000_000


def _git_works():
    return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"],
                          capture_output=True).returncode == 0


def test_the_other_tree_is_a_directory_or_an_exported_revision(tmp_path):
    """``--against``'s tree: a directory holding skgpu/ as it is; a revision exported
    whole (its skgpu/__init__.py the revision's, byte for byte) to a directory of its
    own; anything else refused by name."""
    tree, label, exported = _guard.resolve_tree(str(ROOT))
    assert tree == ROOT and not exported
    with pytest.raises(SystemExit, match="no-such-revision"):
        _guard.resolve_tree("no-such-revision")
    (tmp_path / "skgpu").mkdir()
    with pytest.raises(SystemExit):  # a directory without skgpu/__init__.py
        _guard.resolve_tree(str(tmp_path))
    if not _git_works():
        pytest.skip("not a git checkout")
    import shutil

    tree, label, exported = _guard.resolve_tree("HEAD")
    try:
        assert exported and not tree.is_relative_to(ROOT) and label.startswith("HEAD (")
        committed = subprocess.run(["git", "-C", str(ROOT), "show", "HEAD:skgpu/__init__.py"],
                                   capture_output=True, check=True).stdout
        assert (tree / "skgpu" / "__init__.py").read_bytes() == committed
        assert (tree / "benchmarks" / "_harness.py").is_file()
    finally:
        shutil.rmtree(tree)


def test_the_check_command_against_another_tree(tmp_path):
    """``run_all.py --check --against HEAD --quick``: every small-call row timed in both
    trees' processes, each importing its own skgpu (the exported revision's is removed
    afterwards), both pinned to one core, the same number of calls on both sides, a ratio
    inside its interval and a verdict (timings are not asserted)."""
    if not _git_works():
        pytest.skip("not a git checkout")
    import tempfile

    before = set(Path(tempfile.gettempdir()).glob("skgpu-guard-*"))
    out_file = tmp_path / "ab.json"
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run_all.py"), "--check", "--against",
         "HEAD", "--quick", "--report-only", "--out", str(out_file)], capture_output=True,
        text=True, cwd=ROOT / "benchmarks")
    assert out.returncode == 0, out.stderr[-2000:]
    doc = json.loads(out_file.read_text())
    assert doc["against"].startswith("HEAD (")
    this, other = Path(doc["skgpu"]["this"]), Path(doc["skgpu"]["other"])
    assert this == ROOT / "skgpu" / "__init__.py"
    assert other.name == "__init__.py" and not other.is_relative_to(ROOT)
    assert not other.exists()  # the exported tree is gone
    assert set(Path(tempfile.gettempdir()).glob("skgpu-guard-*")) <= before
    if hasattr(os, "sched_getaffinity"):  # both processes on the same one core
        assert doc["cpus"]["this"] == doc["cpus"]["other"]
        assert len(doc["cpus"]["this"]) == 1
        assert doc["cpus"]["this"][0] in os.sched_getaffinity(0)
    assert len(doc["results"]) == 10
    for row in doc["results"]:
        assert len(row["times_s"]) == len(row["other_times_s"]) == 20 * 3
        lo, hi = row["interval"]
        assert lo <= row["ratio"] <= hi
        assert row["verdict"] in ("same", "faster", "slower")
