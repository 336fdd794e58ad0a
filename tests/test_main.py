"""``python -m skgpu``: --help, --json, --no-demo, and warnings let through."""

import json
import subprocess
import sys


def _run(*args):
    return subprocess.run([sys.executable, "-m", "skgpu", *args], capture_output=True,
                          text=True, timeout=300)


def test_help_does_not_run_the_demo():
    out = _run("--help")
    assert out.returncode == 0
    assert "--no-demo" in out.stdout and "--json" in out.stdout
    assert "Demo on data" not in out.stdout


def test_json_status_is_machine_readable():
    out = _run("--json")
    assert out.returncode == 0, out.stderr
    status = json.loads(out.stdout)
    assert status["GPU backend"]["usable"] in ("yes", "no")
    assert status["GPU backend"]["reason"]
    assert status["Python dependencies"]["scikit-learn"]
    pools = status["BLAS and OpenMP thread pools (CPU backend)"]
    assert any("thread" in value for value in pools.values())


def test_no_demo_prints_the_status_only():
    out = _run("--no-demo")
    assert out.returncode == 0, out.stderr
    assert "GPU backend:" in out.stdout and "thread pools" in out.stdout
    assert "Demo on data" not in out.stdout


def test_version():
    import skgpu

    out = _run("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"skgpu {skgpu.__version__}"


def test_unknown_option_is_an_error():
    out = _run("--bogus")
    assert out.returncode == 2 and "unrecognized arguments" in out.stderr
