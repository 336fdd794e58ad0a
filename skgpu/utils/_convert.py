"""Conversion between skgpu's fitted estimators and scikit-learn's own classes.

skgpu's estimators subclass scikit-learn's and keep scikit-learn's fitted attributes, with
a few of their own (``backend_``, device caches). ``est.as_sklearn()`` gives scikit-learn's
class with the same parameters and fitted attributes; ``PCA.from_sklearn(fitted)`` takes a
scikit-learn fit into skgpu's class. Arrays are shared, not copied.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sklearn.utils.validation import check_is_fitted

from ._doc_link import DocumentationLinkMixin


def _sklearn_class(cls):
    """scikit-learn's class that ``cls`` stands for (found by inheritance, so this holds
    while ``skgpu.accel`` has replaced scikit-learn's public names)."""
    for base in cls.__mro__[1:]:
        if base.__module__.startswith("sklearn.") and base.__name__ == cls.__name__:
            return base
    raise TypeError(f"{cls.__name__} has no scikit-learn counterpart")


class SklearnConversionMixin(DocumentationLinkMixin):
    """``as_sklearn()`` and ``from_sklearn()`` for an estimator subclassing scikit-learn's
    (and, from :class:`DocumentationLinkMixin`, its HTML repr's link to skgpu's page)."""

    #: Fitted attributes skgpu adds to scikit-learn's (left out by ``as_sklearn``).
    _skgpu_attributes: tuple[str, ...] = ("backend_", "_device_cache")
    #: (skgpu attribute, scikit-learn attribute) pairs set by ``from_sklearn``.
    _from_sklearn_aliases: tuple[tuple[str, str], ...] = ()
    #: Where the fit ran ("gpu", "cpu" or "dask"); set by fitting (an annotation only).
    backend_: str

    get_params: Callable[..., dict[str, Any]]  # scikit-learn's (annotation only)

    def as_sklearn(self) -> Any:
        """Return this fitted estimator as an instance of scikit-learn's own class.

        The same parameters and fitted attributes (arrays shared); it predicts and
        transforms with scikit-learn's code, and pickles without skgpu.

        Returns
        -------
        estimator : scikit-learn estimator
            The fitted scikit-learn estimator, e.g. a ``sklearn.decomposition.PCA``.
        """
        check_is_fitted(self)
        if getattr(self, "cholesky_", "dense") == "sparse":
            raise ValueError(
                "This GaussianProcessRegressor was fitted on the sparse path: it has no dense "
                "Cholesky factor L_, which scikit-learn's class needs to predict.")
        theirs = _sklearn_class(type(self))
        their_params = set(theirs().get_params(deep=False))
        ours = self.get_params(deep=False)
        est = theirs(**{k: v for k, v in ours.items() if k in their_params})
        skip = set(self._skgpu_attributes) | set(ours)
        for name, value in vars(self).items():
            if name not in skip:
                setattr(est, name, value)
        return est

    @classmethod
    def from_sklearn(cls, estimator: Any) -> Any:
        """Return skgpu's estimator holding the fit of scikit-learn's ``estimator``.

        The same parameters and fitted attributes (arrays shared); ``backend_`` is
        "cpu".

        Parameters
        ----------
        estimator : scikit-learn estimator
            A fitted instance of the scikit-learn class this one stands for.

        Returns
        -------
        estimator : skgpu estimator
            The fitted skgpu estimator.
        """
        theirs = _sklearn_class(cls)
        if type(estimator) is not theirs:
            raise TypeError(f"{cls.__name__}.from_sklearn takes a fitted "
                            f"{theirs.__module__.split('._')[0]}.{theirs.__name__}, got "
                            f"{type(estimator).__module__}.{type(estimator).__name__}")
        check_is_fitted(estimator)
        params = estimator.get_params(deep=False)
        ours = cls(**params)
        for name, value in vars(estimator).items():
            if name not in params:
                setattr(ours, name, value)
        for our_name, their_name in cls._from_sklearn_aliases:
            setattr(ours, our_name, getattr(estimator, their_name))
        ours.backend_ = "cpu"  # fitted by scikit-learn, on the host
        return ours
