"""Zero-code-change mode: scikit-learn's own names for skgpu's five estimators resolve to
skgpu's classes, so an unchanged scikit-learn script runs them.

::

    python -m skgpu.accel script.py [args]       # a script
    python -m skgpu.accel -m package.module      # a module, as python -m runs it
    python -m skgpu.accel -v script.py           # and report each call (-vv: timed)
    %load_ext skgpu.accel                        # IPython / Jupyter
    import skgpu.accel; skgpu.accel.install()    # from Python (uninstall() undoes it)

``sklearn.decomposition.PCA`` and ``TruncatedSVD``, ``sklearn.linear_model.Ridge`` and
``RidgeCV`` and ``sklearn.gaussian_process.GaussianProcessRegressor`` are replaced in those
public modules, so ``from sklearn.decomposition import PCA`` after installing, and every
Pipeline or search built from those names, gets skgpu's estimator. skgpu's classes subclass
scikit-learn's and print the same ``repr``; hyper-parameters or inputs they do not run on
the backend are handed to scikit-learn's implementation, with the reason logged at INFO on
the ``skgpu`` logger. Names bound before installing (an ``import`` that already ran, or
scikit-learn's private modules such as ``sklearn.decomposition._pca``) are left alone.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import threading
import warnings
from collections.abc import Iterator
from typing import Any

logger = logging.getLogger("skgpu")

#: scikit-learn's public module -> {name: (skgpu module, name)}.
TARGETS = {
    "sklearn.decomposition": {"PCA": ("skgpu.decomposition", "PCA"),
                              "TruncatedSVD": ("skgpu.decomposition", "TruncatedSVD")},
    "sklearn.linear_model": {"Ridge": ("skgpu.linear_model", "Ridge"),
                             "RidgeCV": ("skgpu.linear_model", "RidgeCV")},
    "sklearn.gaussian_process": {
        "GaussianProcessRegressor": ("skgpu.gaussian_process", "GaussianProcessRegressor")},
}

#: (module, name) -> scikit-learn's own class, while installed.
_originals: dict[tuple[str, str], Any] = {}

#: install() and uninstall() are each one step for other threads: a second install
#: while the first is halfway would record skgpu's class as "the original".
_lock = threading.RLock()


def install(verbose: int | None = None) -> None:
    """Make scikit-learn's names for the five estimators resolve to skgpu's (idempotent,
    thread-safe).

    Parameters
    ----------
    verbose : int, default=None
        1: report each accelerated call on standard error (estimator, method, where it
        ran and why, for work not on the GPU) and a summary at exit; 2: with each call's
        time. None takes ``SKGPU_ACCEL_VERBOSE`` from the environment (0 if unset).
    """
    from . import _profile, _report

    level = _report.level_from_environment() if verbose is None else int(verbose)
    _profile.from_environment()  # python -m skgpu.accel --profile / --line-profile
    with _lock:
        if _originals:
            classes: list[type] = []
        else:
            replaced: list[str] = []
            classes = []
            for module_name, names in TARGETS.items():
                module = importlib.import_module(module_name)
                for name, (ours_module, ours_name) in names.items():
                    ours = getattr(importlib.import_module(ours_module), ours_name)
                    _originals[(module_name, name)] = getattr(module, name)
                    setattr(module, name, ours)
                    replaced.append(f"{module_name}.{name}")
                    classes.append(ours)
            logger.info("skgpu.accel: %s now resolve to skgpu's estimators",
                        ", ".join(replaced))
        if level > 0 or _profile.active():
            _report.start(classes or _accelerated_classes(), level)


def uninstall() -> None:
    """Give scikit-learn its own classes back, and stop reporting calls (thread-safe)."""
    from . import _report

    with _lock:
        for (module_name, name), original in _originals.items():
            setattr(importlib.import_module(module_name), name, original)
        _originals.clear()
        _report.stop()


def _accelerated_classes() -> list[type]:
    return [getattr(importlib.import_module(module), name)
            for names in TARGETS.values() for module, name in names.values()]


def summary() -> str:
    """The accelerated calls reported so far (with ``verbose``): per estimator and
    backend, the number of calls, their time and how many did not run on the GPU."""
    from . import _report

    return _report.summary_table()


def is_installed() -> bool:
    return bool(_originals)


@contextlib.contextmanager
def installed() -> Iterator[None]:
    """Install within a ``with`` block; undone at its end unless it was installed before."""
    already = is_installed()
    install()
    try:
        yield
    finally:
        if not already:
            uninstall()


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext skgpu.accel``; warns about names the notebook bound to scikit-learn's
    classes before (``from sklearn.decomposition import PCA`` in an earlier cell keeps
    scikit-learn's class under that name)."""
    install()
    with _lock:
        originals = {id(cls): f"{module}.{name}" for (module, name), cls in _originals.items()}
    early = sorted(f"{var} ({originals[id(value)]})"
                   for var, value in getattr(ipython, "user_ns", {}).items()
                   if id(value) in originals and not var.startswith("_"))
    if early:
        warnings.warn(
            "skgpu.accel was loaded after these names were bound to scikit-learn's own "
            f"classes, which they keep: {', '.join(early)}. Run their imports again (or "
            "load the extension first) to use skgpu's estimators.", UserWarning,
            stacklevel=2)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext skgpu.accel``."""
    uninstall()


__all__ = ["TARGETS", "install", "installed", "is_installed", "summary", "uninstall"]
