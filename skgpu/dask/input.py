"""Dask input prepared once per public call, as an in-memory input is validated once.

A dask fit is the in-memory fit computed another way, so whatever shape the user's dask
collection has, the chunked algorithms see one form: a 2-D dask array of float32 or
float64 (other numeric dtypes become float64, as scikit-learn's ``check_array`` converts
them), chunked along rows only, every chunk size known and none of them empty; ``y`` and
a dask ``sample_weight`` chunked along the same rows (all of ``y``'s columns in each
chunk). Unknown chunk sizes (boolean masks, ``to_dask_array()`` of a dask DataFrame) are
computed here, in one pass, and logged. A dask DataFrame gives ``feature_names_in_``
like a pandas one; an array refit drops them, as scikit-learn does.

What can only be seen in the data (NaN or infinity in any chunk, negative weights) is
found by the chunked algorithms on their first pass, which raise :class:`InvalidChunks`;
:meth:`DaskInput.raise_invalid` then looks for what was wrong, in one more pass, and
raises the in-memory fit's own error.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import warnings
from typing import Any

import numpy as np

from ..backends import is_dask_array, is_dask_collection, to_numpy
from ..utils.validation import _STRINGS_MESSAGE
from ..utils._sklearn_private import (
    _assert_all_finite,
    _check_feature_names,
    _check_n_features,
    _check_sample_weight,
)

logger = logging.getLogger("skgpu")


class InvalidChunks(ValueError):
    """A chunk's statistics were not finite, or a chunk held a negative weight: the
    chunked algorithms' signal, turned into the in-memory error by
    :meth:`DaskInput.raise_invalid`."""

    def __init__(self, what="Input contains NaN or infinity."):
        super().__init__(what)


@dataclasses.dataclass(frozen=True)
class DaskInput:
    """What a dask fit works on (see the module's description).

    X : 2-D dask array, float32 or float64, row chunks of known, non-zero sizes.
    y : dask array on X's row chunks (1-D or 2-D with one column chunk), or None.
    sample_weight : dask array on X's row chunks, NumPy array, scalar or None.
    estimator : the name used in error messages.
    """

    X: Any
    y: Any
    sample_weight: Any
    estimator: str

    @property
    def shape(self):
        return self.X.shape

    @property
    def dtype(self):
        return self.X.dtype

    @contextlib.contextmanager
    def errors(self):
        """Turn the chunked algorithms' :class:`InvalidChunks` into the in-memory error."""
        try:
            yield
        except InvalidChunks:
            try:
                self.raise_invalid()
            except ValueError as error:  # (the chunked algorithms' signal is no context)
                raise error from None

    def raise_invalid(self):
        """Find, in one pass, what is wrong with the data, and raise the error an
        in-memory fit raises for it (X checked first, then y, then the weights, as
        scikit-learn's validation orders them)."""
        import dask

        from . import runner

        vectors = [self.y, self.sample_weight if is_dask_array(self.sample_weight)
                   else None]
        tasks = [runner.delayed(_problems)(x, y, w) for x, y, w in zip(
            runner.blocks(self.X), *(runner.vector_blocks(v, self.X) for v in vectors))]
        found = np.any(np.array(dask.compute(*tasks)), axis=0)
        x_nan, x_inf, y_nan, y_inf, w_nan, w_inf, w_neg = map(bool, found)
        if x_nan or x_inf:
            _assert_all_finite(_proxy(x_nan, x_inf, False, self.dtype), input_name="X",
                               estimator_name=self.estimator)
        if y_nan or y_inf:
            _assert_all_finite(_proxy(y_nan, y_inf, False, self.y.dtype), input_name="y")
        if w_nan or w_inf or w_neg:
            proxy = _proxy(w_nan, w_inf, w_neg, np.float64)
            _check_sample_weight(proxy, proxy[:, None], ensure_non_negative=True)
        raise ValueError(
            f"{self.estimator}: the chunks' sums overflowed float64 although every value "
            "is finite; scale X and y (for example with StandardScaler) before fitting.")


def _proxy(nan, inf, negative, dtype):
    """A small array holding the kinds of bad values found (for scikit-learn's own
    checks to word the error exactly as in memory)."""
    values = [1.0] + [np.nan] * nan + [np.inf] * inf + [-1.0] * negative
    return np.asarray(values, dtype=dtype)


def _problems(x, y, w):
    """Which kinds of bad values a chunk holds: NaN/inf in X, in y, in w; negative w."""
    def kinds(a):
        if a is None or a.dtype.kind != "f":
            return False, False
        return bool(np.isnan(a).any()), bool(np.isinf(a).any())

    x, y, w = (None if a is None else to_numpy(a) for a in (x, y, w))
    return (*kinds(x), *kinds(y), *kinds(w), w is not None and bool((w < 0).any()))


def _known_rows(a, what):
    """``a`` with its row chunk sizes computed where unknown (one pass, logged)."""
    if any(np.isnan(c) for c in a.chunks[0]):
        logger.info("dask input: %s has unknown chunk sizes (a boolean mask, or a "
                    "DataFrame's to_dask_array() without lengths); computing them in one "
                    "pass", what)
        a = a.compute_chunk_sizes()
    return a


def _as_array(a, what):
    """A dask DataFrame or Series as a dask array with known row chunk sizes."""
    if not is_dask_array(a):
        logger.info("dask input: %s is a dask %s; its partition lengths are computed "
                    "(one pass)", what, type(a).__name__)
        a = a.to_dask_array(lengths=True)
    return _known_rows(a, what)


def _names_proxy(X):
    """What scikit-learn reads feature names from: a dask DataFrame's empty pandas
    frame of the same columns (its ``_meta``); None for an array."""
    if is_dask_array(X):
        return None
    meta = getattr(X, "_meta", None)
    return meta if hasattr(meta, "columns") else None


def _float_X(X, estimator):
    kind = X.dtype.kind
    if kind in "USV":
        raise ValueError(_STRINGS_MESSAGE)
    if kind not in "fiubO":
        raise ValueError(f"Dask input X must be numeric for {estimator}, got dtype "
                         f"{X.dtype}.")
    if X.dtype not in (np.float32, np.float64):  # as check_array(dtype=[f64, f32])
        X = X.astype(np.float64)
    return X


def _min_shape(X, estimator, min_samples, min_features):
    n, p = X.shape
    context = f" by {estimator}"
    if n < min_samples:
        raise ValueError(f"Found array with {n} sample(s) (shape={X.shape}) while a "
                         f"minimum of {min_samples} is required{context}.")
    if p < min_features:
        raise ValueError(f"Found array with {p} feature(s) (shape={X.shape}) while a "
                         f"minimum of {min_features} is required{context}.")


def dask_X(estimator, X, *, reset, min_samples=1, min_features=1):
    """X (dask array, DataFrame) as the chunked algorithms take it; with ``reset``,
    ``n_features_in_`` and ``feature_names_in_`` set (or dropped) from it, otherwise
    checked against them, as ``validate_data`` does for in-memory X."""
    name = type(estimator).__name__
    names = _names_proxy(X)
    X = _as_array(X, "X")
    if X.ndim != 2:
        raise ValueError(f"Expected 2D array, got {X.ndim}D dask array instead. Reshape "
                         "your data either using array.reshape(-1, 1) if your data has a "
                         "single feature or array.reshape(1, -1) if it contains a single "
                         "sample.")
    X = _float_X(X, name)
    _min_shape(X, name, min_samples, min_features)
    _check_n_features(estimator, X, reset=reset)
    _check_feature_names(estimator, names, reset=reset)
    if len(X.chunks[1]) != 1:
        logger.debug("dask input: X's %d column chunks joined (rows are what is "
                     "distributed)", len(X.chunks[1]))
        X = X.rechunk({1: -1})
    if 0 in X.chunks[0] and X.shape[0]:
        X = X.rechunk({0: tuple(c for c in X.chunks[0] if c)})
    return X


def _dask_vector(v, X, what, ndims):
    """y or a dask sample weight: rows as X's, columns in one chunk."""
    import dask.array as da

    if is_dask_collection(v):
        v = _as_array(v, what)
    else:
        v = np.asarray(v)
    if v.ndim not in ndims:
        raise ValueError(f"{what} must be {' or '.join(f'{d}-D' for d in ndims)}, got "
                         f"shape {v.shape}.")
    if v.shape[0] != X.shape[0] and what == "sample_weight":  # scikit-learn's words
        raise ValueError(f"sample_weight.shape == {v.shape}, expected {(X.shape[0],)}!")
    if v.shape[0] != X.shape[0]:
        raise ValueError("Found input variables with inconsistent numbers of samples: "
                         f"[{X.shape[0]}, {v.shape[0]}]")
    whole = tuple((s,) for s in v.shape[1:])
    if not is_dask_array(v):
        return da.from_array(v, chunks=(X.chunks[0],) + whole)
    if v.chunks[0] != X.chunks[0] or len(v.chunks) > 1 and len(v.chunks[1]) != 1:
        v = v.rechunk((X.chunks[0],) + whole)
    return v


def prepare_dask_fit(estimator, X, y=None, sample_weight=None, *, min_samples=1,
                     min_features=1) -> DaskInput:
    """The dask fit's input (see the module's description): X, and y and
    ``sample_weight`` when given, validated as an in-memory fit validates them up to
    what only the chunks can tell."""
    name = type(estimator).__name__
    X = dask_X(estimator, X, reset=True, min_samples=min_samples,
               min_features=min_features)
    if y is not None:
        y = _dask_vector(y, X, "y", (1, 2))
        if y.dtype.kind in "USV":
            raise ValueError(_STRINGS_MESSAGE)
        if y.dtype.kind != "f":
            y = y.astype(np.float64)
    if sample_weight is not None and np.ndim(sample_weight) == 0 and not is_dask_collection(
            sample_weight):
        sample_weight = float(sample_weight)
    elif sample_weight is not None and is_dask_collection(sample_weight):
        sample_weight = _dask_vector(sample_weight, X, "sample_weight", (1,)).astype(
            np.float64)
    elif sample_weight is not None:  # in memory: scikit-learn's own checks
        sample_weight = _check_sample_weight(np.asarray(sample_weight), X,
                                             dtype=np.float64, ensure_non_negative=True)
    return DaskInput(X=X, y=y, sample_weight=sample_weight, estimator=name)


def map_rows(estimator, method, X, n_columns, dtype):
    """``method`` of a fitted estimator on each row chunk of dask X (a DataFrame too),
    lazily: n_features and feature names checked once here, as in memory.
    ``n_columns`` None: a 1-D result."""
    names = _names_proxy(X)
    if not is_dask_array(X):
        X = X.to_dask_array()  # (unknown row chunk sizes are fine for a lazy result)
    _check_n_features(estimator, X, reset=False)
    _check_feature_names(estimator, names, reset=False)
    if len(X.chunks[1]) != 1:
        X = X.rechunk({1: -1})
    chunks = (X.chunks[0],) if n_columns is None else (X.chunks[0], (n_columns,))
    return X.map_blocks(_block_call, method, n_columns, np.dtype(dtype), dtype=dtype, chunks=chunks,
                        drop_axis=1 if n_columns is None else None)


def _block_call(block, method, n_columns, dtype):
    if block.shape[0] == 0:  # an empty chunk (rows masked out): an empty result
        shape = (0,) if n_columns is None else (0, n_columns)
        return block[:, :0].reshape(shape).astype(dtype)
    with warnings.catch_warnings():
        # the names were checked once for the whole collection
        warnings.filterwarnings("ignore", message="X does not have valid feature names")
        return method(block)
