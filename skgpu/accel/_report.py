"""What the accelerator says while it runs: each accelerated call (estimator, method,
where it ran and, for work that did not run on the GPU, why), with ``verbose >= 2`` its
time, and at exit a summary of the calls per estimator and backend.

Switched on by ``python -m skgpu.accel -v`` / ``-vv``, by ``SKGPU_ACCEL_VERBOSE=1`` / ``2``
in the environment (notebooks, workers: the command line sets it for the processes it
starts) or by ``skgpu.accel.install(verbose=...)``. Lines go to standard error through the
``skgpu.accel`` logger.

Where a call ran is what the backend seam reports (:func:`skgpu.backends.observe_backends`:
the GPU, the CPU backend with the reason, the CPU after a GPU out-of-memory error), else
"scikit-learn" (the call ran scikit-learn's own code: an option skgpu hands over, or a
method skgpu does not implement); the reason is then the last message skgpu logged during
the call. A fit on Dask reports "dask".
"""

from __future__ import annotations

import atexit
import functools
import logging
import os
import sys
import threading
import time
from collections import defaultdict
from typing import Any

from ..backends import observe_backends
from . import _profile

#: The methods reported, where an estimator class defines them.
METHODS = ("fit", "fit_transform", "transform", "inverse_transform", "predict", "score",
           "score_samples", "sample_y", "log_marginal_likelihood")

log = logging.getLogger("skgpu.accel")
_skgpu_log = logging.getLogger("skgpu")

_state = threading.local()
_lock = threading.Lock()
_verbose = 0
_wrapped: dict[tuple[type, str], Any] = {}
#: (estimator, backend) -> [calls, seconds, calls with a reason]
_totals: dict[tuple[str, str], list] = defaultdict(lambda: [0, 0.0, 0])
#: reason -> [its number (order of first appearance), calls that gave it]
_reasons: dict[str, list] = {}
_handler: logging.Handler | None = None
_summary_registered = False
_INHERITED = object()  # a reported method the class did not define itself
_saved_level: int | None = None  # the skgpu logger's level before reporting set INFO


def level_from_environment() -> int:
    value = os.environ.get("SKGPU_ACCEL_VERBOSE", "").strip()
    try:
        return max(0, int(value)) if value else 0
    except ValueError:
        return 1 if value.lower() in ("true", "yes", "on") else 0


class _Stderr(logging.StreamHandler):
    """Writes to the standard error of the moment (a test's capture, a notebook's)."""

    stream = property(lambda self: sys.stderr, lambda self, value: None)


class _Collect(logging.Handler):
    """skgpu's messages of one thread during one call."""

    def __init__(self, thread):
        super().__init__(logging.INFO)
        self.thread, self.messages = thread, []

    def emit(self, record):
        if record.thread == self.thread and record.name == "skgpu":
            self.messages.append(record.getMessage())


def _where(estimator, method, seen, messages):
    """(backend, reason or None) of a call."""
    if seen:
        _, backend, reason = seen[-1]
        if backend == "gpu":
            return "gpu", None
        return backend, reason
    if method.startswith("fit") and getattr(estimator, "backend_", None) == "dask":
        return "dask", None
    return "scikit-learn", messages[-1] if messages else None


def _report(name, method, backend, reason, seconds):
    if _profile.active():
        _profile.record(name, method, backend, reason, seconds)
    if _verbose <= 0:
        return
    with _lock:
        entry = _totals[(name, backend)]
        entry[0] += 1
        entry[1] += seconds
        entry[2] += reason is not None
        first = False
        if reason:
            seen = _reasons.get(reason)
            if seen is None:
                seen = _reasons[reason] = [len(_reasons) + 1, 0]
                first = True
            seen[1] += 1
    line = f"{name}.{method}: {backend}"
    if _verbose >= 2:
        line += f", {seconds * 1e3:.3g} ms"
    if reason:
        # a reason in full once; after that its number (the summary counts them)
        line += f" (reason {seen[0]}: {reason})" if first else f" (reason {seen[0]})"
    log.info(line)


def _wrap(cls, method):
    original = getattr(cls, method)

    @functools.wraps(original)
    def reported(self, *args, **kwargs):
        if getattr(_state, "depth", 0):  # a call inside a reported one (fit_transform's fit)
            return original(self, *args, **kwargs)
        collect = _Collect(threading.get_ident())
        _skgpu_log.addHandler(collect)
        _state.depth = 1
        start = time.perf_counter()
        try:
            with observe_backends() as seen:
                out = original(self, *args, **kwargs)
        finally:
            seconds = time.perf_counter() - start
            _state.depth = 0
            _skgpu_log.removeHandler(collect)
        backend, reason = _where(self, method, seen, collect.messages)
        _report(type(self).__name__, method, backend, reason, seconds)
        return out

    return reported


def start(classes, verbose: int) -> None:
    """Report the calls of ``classes``' methods at ``verbose`` (0: nothing, unless the
    profile is recording: :mod:`._profile`)."""
    global _verbose, _handler, _summary_registered, _saved_level
    with _lock:
        _verbose = int(verbose)
        if _verbose <= 0 and not _profile.active():
            return
        if _handler is None:
            _handler = _Stderr()
            _handler.setFormatter(logging.Formatter("[skgpu.accel] %(message)s"))
            log.addHandler(_handler)
            log.setLevel(logging.INFO)
            log.propagate = False
        # skgpu's INFO messages are the reasons (the profile's too); records below the
        # root's level still show nowhere else
        if _skgpu_log.getEffectiveLevel() > logging.INFO and _saved_level is None:
            _saved_level = _skgpu_log.level
            _skgpu_log.setLevel(logging.INFO)
        for cls in classes:
            for method in METHODS:
                if callable(getattr(cls, method, None)) and (cls, method) not in _wrapped:
                    _wrapped[(cls, method)] = cls.__dict__.get(method, _INHERITED)
                    setattr(cls, method, _wrap(cls, method))
        if not _summary_registered:
            atexit.register(summary)
            _summary_registered = True


def stop() -> None:
    """Stop reporting (the classes get their own methods back, the ``skgpu`` logger its
    level)."""
    global _verbose, _saved_level
    with _lock:
        if _saved_level is not None:
            _skgpu_log.setLevel(_saved_level)
            _saved_level = None
        for (cls, method), original in _wrapped.items():
            if original is _INHERITED:
                delattr(cls, method)
            else:
                setattr(cls, method, original)
        _wrapped.clear()
        _verbose = 0


def summary_table() -> str:
    """The calls so far, per estimator and backend: count, time, and how many had a
    reason (work not on the GPU)."""
    with _lock:
        rows = sorted((name, backend, *values) for (name, backend), values in _totals.items())
    if not rows:
        return "no accelerated estimator was called"
    header = ("estimator", "ran on", "calls", "time (s)", "with a reason")
    body = [(n, b, str(c), f"{s:.3f}", str(r)) for n, b, c, s, r in rows]
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip()
             for row in [header, *body]]
    with _lock:
        reasons = sorted((number, count, text) for text, (number, count) in _reasons.items())
    if reasons:
        lines.append("reasons (each printed in full once):")
        lines += [f"  {number}  {count} call{'s' if count > 1 else ''}: {text}"
                  for number, count, text in reasons]
    return "\n".join(["summary of the accelerated calls", *lines])


def summary() -> None:
    """At exit, while reporting is on."""
    if _verbose > 0 and _totals:
        log.info(summary_table())


def reset() -> None:
    with _lock:
        _totals.clear()
        _reasons.clear()
