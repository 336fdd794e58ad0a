"""A fit that fails leaves the estimator exactly as it was before the call."""

from __future__ import annotations

import functools


def atomic_fit(method):
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

    return wrapper
