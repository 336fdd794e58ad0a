"""Device copies of fitted state that can never answer stale.

An estimator keeps device copies of small fitted arrays (weights, components, factors) so
that repeated ``predict``/``transform`` calls do not send them again. scikit-learn reads
its attributes on every call, so a user who assigns ``coef_``, edits ``components_`` in
place or changes a parameter sees the change; a cached copy must too. Each entry records
what it was made from (a copy of every source array, the parameters' values) and is
rebuilt whenever one of them differs: comparing a few small arrays costs microseconds,
a fraction of any call that uses the cache.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np


#: Arrays up to this size are compared as bytes (a copy costs less than array_equal's
#: checks); larger ones element-wise, without a copy.
_SMALL = 1 << 16


def _snapshot(source):
    if isinstance(source, np.ndarray):
        return source.copy()
    if hasattr(source, "get_params") and hasattr(source, "clone_with_theta"):
        return source.clone_with_theta(source.theta)  # a kernel: its own copy
    return source


def _same(saved, source) -> bool:
    if isinstance(saved, np.ndarray) or isinstance(source, np.ndarray):
        if not (isinstance(saved, np.ndarray) and isinstance(source, np.ndarray)):
            return False
        if saved.shape != source.shape or saved.dtype != source.dtype:
            return False
        if saved.nbytes <= _SMALL:  # bit for bit (NaN equals itself): ~0.2 µs
            return saved.tobytes() == source.tobytes()
        # (a NaN compares unequal here: the entry is rebuilt, never stale)
        return bool(np.array_equal(saved, source))
    if saved is source:
        return True
    try:
        return type(saved) is type(source) and bool(saved == source)
    except (TypeError, ValueError):
        return False


def cached(owner: Any, key: Any, sources: tuple, make: Callable[[], Any]) -> Any:
    """``make()``, kept in ``owner._device_cache[key]`` while every one of ``sources``
    (fitted arrays, parameter values, kernels) equals what it was when the entry was
    made; rebuilt otherwise."""
    cache = owner.__dict__.setdefault("_device_cache", {})
    entry = cache.get(key)
    if entry is not None and len(entry[0]) == len(sources) and all(
            _same(saved, source) for saved, source in zip(entry[0], sources)):
        return entry[1]
    value = make()
    cache[key] = (tuple(_snapshot(s) for s in sources), value)
    return value


class Identity:
    """A source compared by identity, not value: a large array (a GP's n × n factor)
    whose comparison would cost as much as the call; it is marked read-only instead, so
    that it can be replaced, never edited in place."""

    def __init__(self, obj):
        self.obj = obj

    def __eq__(self, other):
        return isinstance(other, Identity) and other.obj is self.obj

    __hash__ = None  # type: ignore[assignment]


def store(owner: Any, key: Any, sources: tuple, value: Any) -> None:
    """Record ``value`` as made from ``sources`` (what :func:`cached` would have made)."""
    owner.__dict__.setdefault("_device_cache", {})[key] = (
        tuple(_snapshot(s) for s in sources), value)
