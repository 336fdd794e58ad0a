"""Start-up hook of the Python processes that ``python -m skgpu.accel`` starts.

The accelerator puts this folder first on ``PYTHONPATH`` and sets ``SKGPU_ACCEL=1``;
every Python process started from the accelerated one inherits both (joblib's loky
workers, multiprocessing's spawned processes, ``subprocess`` calls of ``sys.executable``),
and its ``site`` module imports this file at start-up, before anything is unpickled or
imported. It installs the accelerator there, so that a helper module imported in a
worker (``from sklearn.decomposition import PCA``) gets skgpu's class as the main
process does; then it runs the ``sitecustomize`` module it hides, if there is one.
Nothing here may stop the interpreter from starting: a failure is a warning.
"""

import importlib
import os
import sys


def _install():
    if os.environ.get("SKGPU_ACCEL") != "1":
        return
    try:
        import skgpu.accel

        skgpu.accel.install()
    except Exception as exc:  # pragma: no cover - a broken environment
        import warnings

        warnings.warn(f"skgpu.accel could not be installed in this process: {exc!r}",
                      RuntimeWarning, stacklevel=1)


def _run_hidden_sitecustomize():
    here = os.path.dirname(os.path.abspath(__file__))
    ours = sys.modules.pop("sitecustomize", None)
    saved = sys.path[:]
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    try:
        importlib.import_module("sitecustomize")
    except ModuleNotFoundError as exc:
        if exc.name != "sitecustomize":
            raise
        if ours is not None:
            sys.modules["sitecustomize"] = ours
    finally:
        sys.path[:] = saved


if __name__ == "sitecustomize":  # imported by site, not by a test collector
    _install()
    _run_hidden_sitecustomize()
