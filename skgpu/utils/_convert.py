"""Conversion between skgpu's fitted estimators and scikit-learn's own classes.

skgpu's estimators subclass scikit-learn's and keep scikit-learn's fitted attributes, with
a few of their own (``backend_``, device caches). ``est.as_sklearn()`` gives scikit-learn's
class with the same parameters and fitted attributes; ``PCA.from_sklearn(fitted)`` takes a
scikit-learn fit into skgpu's class. Arrays are shared, not copied.
"""

from __future__ import annotations

import copy
import types
from collections.abc import Callable
from typing import Any, Generic, Literal, TypeVar

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from ._doc_link import DocumentationLinkMixin


def _sklearn_class(cls):
    """scikit-learn's class that ``cls`` stands for (found by inheritance, so this holds
    while ``skgpu.accel`` has replaced scikit-learn's public names)."""
    for base in cls.__mro__[1:]:
        if base.__module__.startswith("sklearn.") and base.__name__ == cls.__name__:
            return base
    raise TypeError(f"{cls.__name__} has no scikit-learn counterpart")


#: scikit-learn's class an skgpu estimator stands for (what ``as_sklearn`` returns).
_Theirs = TypeVar("_Theirs")


class SklearnConversionMixin(DocumentationLinkMixin, Generic[_Theirs]):
    """``as_sklearn()`` and ``from_sklearn()`` for an estimator subclassing scikit-learn's
    (and, from :class:`DocumentationLinkMixin`, its HTML repr's link to skgpu's page);
    parametrised by that scikit-learn class, the type ``as_sklearn`` returns."""

    #: Fitted attributes skgpu adds to scikit-learn's (left out by ``as_sklearn``).
    _skgpu_attributes: tuple[str, ...] = ("backend_", "_device_cache")
    #: (skgpu attribute, scikit-learn attribute) pairs set by ``from_sklearn``.
    _from_sklearn_aliases: tuple[tuple[str, str], ...] = ()
    #: Where the fit ran; set by fitting (an annotation only).
    backend_: Literal["gpu", "cpu", "dask"]

    get_params: Callable[..., dict[str, Any]]  # scikit-learn's (annotation only)

    def as_sklearn(self) -> _Theirs:
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
        _refuse_partial(est, type(self).__name__)
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


def as_sklearn_graph(obj: Any) -> Any:
    """``obj`` with every skgpu estimator in it replaced by scikit-learn's own class.

    Walks a fitted object graph: estimators' attributes (a Pipeline's ``steps``, a
    ColumnTransformer's ``transformers_``, a search's ``best_estimator_`` and
    ``cv_results_`` and ``scorer_``, nested ones: any object's attributes), lists, tuples,
    dicts and object arrays. A fitted skgpu
    estimator becomes :meth:`SklearnConversionMixin.as_sklearn`'s copy, an unfitted one
    scikit-learn's class with the same parameters. Other objects are shallow-copied where
    they hold something converted, and shared otherwise; ``obj`` itself is not changed.
    """
    out = _convert(obj, {})
    _refuse_partial(out, type(obj).__name__)
    return out


def _from_skgpu(obj):
    """Whether unpickling ``obj`` (not what it holds) would import skgpu."""
    if isinstance(obj, (type, types.FunctionType, types.BuiltinFunctionType)):
        module = getattr(obj, "__module__", "") or ""
    else:
        module = type(obj).__module__
    return module == "skgpu" or module.startswith("skgpu.")


def _skgpu_objects(obj, path, seen, found):
    """Append ``(path, object)`` for every object in ``obj``'s graph that is skgpu's own
    (walked as :func:`_convert` walks it)."""
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if _from_skgpu(obj):
        found.append((path, obj))
        return
    if isinstance(obj, BaseEstimator) or _plain_instance(obj):
        for name, value in vars(obj).items():
            _skgpu_objects(value, f"{path}.{name}", seen, found)
    elif isinstance(obj, (list, tuple)):
        for i, value in enumerate(obj):
            _skgpu_objects(value, f"{path}[{i}]", seen, found)
    elif isinstance(obj, dict):
        for key, value in obj.items():
            _skgpu_objects(value, f"{path}[{key!r}]", seen, found)
    elif isinstance(obj, np.ndarray) and obj.dtype == object:
        for i, value in enumerate(obj.ravel()):
            _skgpu_objects(value, f"{path}[{i}]", seen, found)


def _refuse_partial(converted, name):
    """Raise where ``converted`` still holds an object of skgpu's (a kernel scikit-learn
    has no counterpart for, say): a converted model must load without skgpu."""
    found = []
    _skgpu_objects(converted, name, set(), found)
    if found:
        listed = "; ".join(
            f"{path}: {getattr(o, '__qualname__', type(o).__qualname__)} from "
            f"{getattr(o, '__module__', None) if isinstance(o, type) else type(o).__module__}"
            for path, o in found[:5])
        more = f" (and {len(found) - 5} more)" if len(found) > 5 else ""
        raise ValueError(
            f"Cannot convert to scikit-learn only: no scikit-learn counterpart for "
            f"{listed}{more}; the result would need skgpu to load.")


def _plain_instance(obj):
    """An instance of a Python class with attributes to walk (a scorer holding its
    estimator), not a class, module, function or NumPy object."""
    return (hasattr(obj, "__dict__") and not isinstance(obj, (
        type, types.ModuleType, types.FunctionType, types.MethodType,
        types.BuiltinFunctionType, np.ndarray, np.random.RandomState,
        np.random.Generator)))


def _convert(obj, memo):
    key = id(obj)
    if key in memo:
        return memo[key]
    memo[key] = obj  # (until converted: a graph may refer back to it)
    if isinstance(obj, SklearnConversionMixin):
        try:
            out = obj.as_sklearn()
        except NotFittedError:
            params = {k: _convert(v, memo) for k, v in obj.get_params(deep=False).items()}
            theirs = _sklearn_class(type(obj))
            accepted = set(theirs().get_params(deep=False))
            out = theirs(**{k: v for k, v in params.items() if k in accepted})
    elif isinstance(obj, BaseEstimator) or _plain_instance(obj):
        out = copy.copy(obj)
        memo[key] = out  # (a graph may refer back to it)
        for name, value in vars(obj).items():
            converted = _convert(value, memo)
            if converted is not value:
                out.__dict__[name] = converted
        if all(out.__dict__[k] is v for k, v in vars(obj).items()):
            out = obj
    elif isinstance(obj, (list, tuple)):
        items = [_convert(v, memo) for v in obj]
        changed = any(a is not b for a, b in zip(items, obj))
        if not changed:
            out = obj
        elif isinstance(obj, list):
            out = items
        elif hasattr(obj, "_fields"):  # a named tuple
            out = type(obj)(*items)
        else:
            out = tuple(items)
    elif isinstance(obj, dict):
        items = {k: _convert(v, memo) for k, v in obj.items()}
        out = obj if all(items[k] is v for k, v in obj.items()) else type(obj)(items)
    elif isinstance(obj, np.ndarray) and obj.dtype == object:
        flat = [_convert(v, memo) for v in obj.ravel()]
        if all(a is b for a, b in zip(flat, obj.ravel())):
            out = obj
        else:
            out = obj.copy()
            out.ravel()[...] = np.array(flat + [None], dtype=object)[:-1]
    else:
        out = obj
    memo[key] = out
    return out
