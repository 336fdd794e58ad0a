"""A fit that fails leaves the estimator exactly as it was before the call."""

from __future__ import annotations

import contextlib
import functools
import logging
import sys
from typing import Any, Callable, TypeVar, cast

from ._sklearn_private import _fit_context

_F = TypeVar("_F", bound=Callable[..., Any])


def fit_context(*, prefer_skip_nested_validation: bool) -> Callable[[_F], _F]:
    """scikit-learn's ``_fit_context`` (parameter validation before ``fit``), typed: its
    module has no annotations, so the decorated methods' own types (``fit`` returning the
    estimator's class) would be lost to type checkers."""
    return _fit_context(prefer_skip_nested_validation=prefer_skip_nested_validation)


def atomic_fit(method: _F) -> _F:
    """Decorate ``fit``/``fit_transform`` so that an exception restores every attribute.

    scikit-learn validates and sets ``n_features_in_`` before solving, so a failure in
    the solve, the scoring or a GPU fallback would otherwise leave the new
    ``n_features_in_`` beside the previous fit's ``coef_``. The fitted attributes are
    replaced, never modified in place, by skgpu's fits, so a shallow copy of the
    instance dictionary is a complete snapshot.
    """

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        before = dict(self.__dict__)
        try:
            return method(self, *args, **kwargs)
        except BaseException:
            self.__dict__.clear()
            self.__dict__.update(before)
            raise

    return cast(_F, wrapper)


@contextlib.contextmanager
def progress_logging(verbose):
    """Make the ``"skgpu"`` logger's INFO records visible while ``verbose > 0``.

    Progress goes through logging, never ``print``; a user who configured logging sees
    it where they send it. Otherwise (no handler would show INFO), a handler writing to
    standard error is attached for the duration of the block, which is what
    scikit-learn's ``verbose`` output looks like to the user.
    """
    logger = logging.getLogger("skgpu")
    if not verbose or (logger.isEnabledFor(logging.INFO) and any(
            h.level <= logging.INFO and not isinstance(h, logging.NullHandler)
            for h in _handlers(logger))):
        yield
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("[skgpu] %(message)s"))
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)


def _handlers(logger):
    while logger is not None:
        yield from logger.handlers
        logger = logger.parent if logger.propagate else None
