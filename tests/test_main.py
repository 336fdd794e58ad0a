"""``python -m skgpu``: --help, --json, --no-demo, and warnings let through."""

import json
import re
import subprocess
import sys


def _run(*args):
    return subprocess.run([sys.executable, "-m", "skgpu", *args], capture_output=True,
                          text=True)


def test_help_does_not_run_the_demo():
    out = _run("--help")
    assert out.returncode == 0
    assert "--no-demo" in out.stdout and "--json" in out.stdout
    assert "Demo on data" not in out.stdout


def test_json_status_is_machine_readable():
    """Stable snake_case keys and typed values (scripts test ``status["gpu"]["usable"]``,
    not the string "yes")."""
    import skgpu

    out = _run("--json")
    assert out.returncode == 0, out.stderr
    status = json.loads(out.stdout)
    assert set(status) == {"skgpu_version", "python", "packages", "gpu",
                           "cpu_sparse_solver", "thread_pools"}
    assert status["skgpu_version"] == skgpu.__version__
    assert isinstance(status["gpu"]["usable"], bool)
    assert isinstance(status["gpu"]["sparse_cholesky_usable"], bool)
    assert status["gpu"]["usable"] or status["gpu"]["reason"]
    assert status["packages"]["scikit_learn"] and status["packages"]["numpy"]
    assert all(v is None or isinstance(v, str) for v in status["packages"].values())
    assert status["cpu_sparse_solver"] in ("cholmod", "supernodal")
    assert all(isinstance(p["num_threads"], int) for p in status["thread_pools"])
    key = re.compile(r"^[a-z][a-z0-9_]*$")
    stack = [status]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            assert all(key.match(k) for k in node), list(node)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


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


def test_no_driver_reads_in_plain_words():
    """CUDA says "insufficient driver" both without any driver and with an old one."""
    import ctypes

    from skgpu.backends import _driver_explanation

    error = RuntimeError("cudaErrorInsufficientDriver: CUDA driver version is "
                         "insufficient for CUDA runtime version")

    def missing(name):
        raise OSError(f"{name}: cannot open shared object file")

    class OldDriver:
        def cuDriverGetVersion(self, out):
            ctypes.cast(out, ctypes.POINTER(ctypes.c_int)).contents.value = 12040

    assert "no NVIDIA driver is installed" in _driver_explanation(error, missing)
    old = _driver_explanation(error, lambda name: OldDriver())
    assert "supports CUDA up to 12.4" in old and "580" in old
    assert _driver_explanation(RuntimeError("cudaErrorNoDevice"), missing) is None
