"""Input validation that accepts GPU arrays as well as what scikit-learn accepts.

NumPy, lists, pandas and SciPy sparse input go through scikit-learn's own
``validate_data``, so errors read exactly as scikit-learn's. CuPy arrays, CuPy sparse
matrices and CUDA torch tensors stay on the device and get the same checks there.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.utils.validation import check_consistent_length
from sklearn.utils.validation import validate_data as _sk_validate_data

from ._sklearn_private import _check_feature_names, _check_n_features, _check_y
from ..backends import (
    ContainerSpec,
    container_of,
    cupy_module,
    is_device_array,
    to_cupy,
    to_numpy,
)


#: scikit-learn's error for text where ``dtype='numeric'`` is asked (its wording).
_STRINGS_MESSAGE = ("dtype='numeric' is not compatible with arrays of bytes/strings."
                    "Convert your data to numeric values explicitly instead.")


def _has_strings(a, spec):
    """Whether input ``a`` (classified as ``spec``) holds bytes or strings (NumPy kinds
    U, S, V), as scikit-learn's ``check_array(dtype='numeric')`` tests it; pandas columns
    one by one. Only NumPy-like host input can."""
    if a is None or spec.kind != "numpy":
        return False
    dtypes = getattr(a, "dtypes", None)
    if dtypes is not None and not hasattr(dtypes, "kind"):  # a DataFrame
        return any(getattr(d, "kind", "O") in "USV" for d in dtypes)
    dtype = getattr(a, "dtype", None)
    if dtype is None:
        dtype = np.asarray(a).dtype if isinstance(a, (list, tuple)) else None
    return dtype is not None and getattr(dtype, "kind", "") in "USV"


@dataclasses.dataclass(frozen=True)
class Input:
    """An estimator's X, validated once per public call, with what the later steps need
    to know about it: made by :func:`prepare` and passed on, so that no later step asks
    again what kind of array X is or whether it is finite.

    data : NumPy array, SciPy sparse matrix, or CuPy array or sparse matrix (what
        :func:`validate_data` returned).
    spec : the caller's container; outputs are returned in it.
    sparse, on_device : what ``data`` is.
    finite : whether NaN and infinity are ruled out (False: validation left that check
        to the solver or to the product, see :func:`checked_product`).
    """

    data: Any
    spec: ContainerSpec
    sparse: bool
    on_device: bool
    finite: bool

    @property
    def shape(self):
        return self.data.shape

    @property
    def dtype(self):
        return self.data.dtype

    def checked_finite(self, estimator) -> Input:
        """This input, with scikit-learn's NaN/infinity check of X done if it was not."""
        if self.finite:
            return self
        assert_all_finite(self.data, estimator, on_device=self.on_device)
        return dataclasses.replace(self, finite=True)

    def known_finite(self) -> Input:
        """This input, marked finite (a solver found it so on its way)."""
        return self if self.finite else dataclasses.replace(self, finite=True)

    def on_backend(self, ops, data) -> Input:
        """This input with ``data``, X moved to the backend ``ops`` (its container, for
        the output, stays the caller's)."""
        return dataclasses.replace(self, data=data, on_device=ops.memory == "device")

    def with_data(self, data) -> Input:
        """This input with ``data`` replaced by an equivalent array (another sparse
        format, say)."""
        return dataclasses.replace(self, data=data)


def prepare(estimator, X, *, spec=None, ensure_all_finite=True, **kwargs) -> Input:
    """:func:`validate_data` for X alone, with X's kind recorded: an :class:`Input`.

    ``spec``: X's container where the caller already classified X (to check a parameter
    against it first, as scikit-learn does); the other keywords are
    :func:`validate_data`'s.
    """
    spec = container_of(X) if spec is None else spec
    data = validate_data(estimator, X, spec=spec, ensure_all_finite=ensure_all_finite,
                         **kwargs)
    return _input(data, spec, ensure_all_finite)


def prepare_xy(estimator, X, y, *, spec=None, **kwargs) -> tuple[Input, Any]:
    """:func:`validate_data` for X and y: ``(Input of X, y)``, y as validated there."""
    spec = container_of(X) if spec is None else spec
    data, y = validate_data(estimator, X, y, spec=spec, **kwargs)
    return _input(data, spec, kwargs.get("ensure_all_finite", True)), y


def _input(data, spec, ensure_all_finite):
    # device input is validated on the device, in its own kind; host input may change
    # kind in scikit-learn's validation (a DataFrame of sparse columns becomes a SciPy
    # matrix), so the validated array, not X, is asked
    sparse = spec.sparse if spec.on_device else sp.issparse(data)
    return Input(data=data, spec=spec, sparse=sparse, on_device=spec.on_device,
                 finite=ensure_all_finite is True)


def validate_data(estimator, X, y="no_validation", *, spec=None, reset=True,
                  dtype=("float64", "float32"), accept_sparse=False, ensure_min_samples=1,
                  ensure_min_features=1, multi_output=False, y_numeric=False,
                  ensure_all_finite=True, reject_strings=False):
    """Validate ``X`` (and ``y`` when given) for ``estimator``.

    Device arrays are returned as CuPy (sparse); ``y`` follows ``X`` (moved to the
    device when ``X`` is there, to the host otherwise). ``spec``: X's container where
    the caller classified X already (:func:`~skgpu.backends.container_of`).
    ``n_features_in_`` (and ``feature_names_in_`` for DataFrames) are set when ``reset``
    and checked otherwise, as scikit-learn's ``validate_data`` does. Returns ``X`` or ``(X, y)``.

    ``ensure_all_finite=False`` leaves the NaN/infinity check of X to the caller (see
    :func:`check_finite_through`). ``reject_strings=True`` raises scikit-learn's
    ``dtype='numeric'`` error for text in X or y where the scikit-learn estimator
    validates with ``dtype='numeric'`` (a float dtype list would parse ``"1.5"``).
    A floating ``y`` is checked for NaN/infinity after its conversion (an object ``y``
    holding None becomes NaN there, which scikit-learn's ``_check_y`` lets through).
    """
    spec = container_of(X) if spec is None else spec
    if spec.host_torch:
        X = X.detach().numpy()
    no_y = isinstance(y, str) and y == "no_validation"
    y_spec = None if no_y or y is None else container_of(y)
    if reject_strings and (_has_strings(X, spec) or (
            y_spec is not None and _has_strings(y, y_spec))):
        raise ValueError(_STRINGS_MESSAGE)
    if no_y:
        return _validate_X(estimator, X, spec, reset=reset, dtype=dtype,
                           accept_sparse=accept_sparse,
                           ensure_min_samples=ensure_min_samples,
                           ensure_min_features=ensure_min_features,
                           ensure_all_finite=ensure_all_finite)
    y_on_device = y_spec is not None and y_spec.on_device
    if not spec.on_device:
        X, y = _sk_validate_data(
            estimator, X, to_numpy(y) if y_on_device else y, reset=reset, dtype=list(dtype),
            accept_sparse=accept_sparse, ensure_min_samples=ensure_min_samples,
            ensure_min_features=ensure_min_features, multi_output=multi_output,
            y_numeric=y_numeric, ensure_all_finite=ensure_all_finite,
        )
        if y_numeric and getattr(y, "dtype", None) is not None and y.dtype.kind == "f":
            _assert_y_finite(y)
        return X, y
    X = _validate_X(estimator, X, spec, reset=reset, dtype=dtype,
                    accept_sparse=accept_sparse, ensure_min_samples=ensure_min_samples,
                    ensure_min_features=ensure_min_features,
                    ensure_all_finite=ensure_all_finite)
    if y is None:
        raise ValueError(
            f"{type(estimator).__name__} requires y to be passed, but the target y is None."
        )
    if y_on_device:
        y = _check_y_on_device(to_cupy(y), multi_output=multi_output)
    else:
        y = _check_y(y, multi_output=multi_output, y_numeric=y_numeric)
        if y_numeric and y.dtype.kind == "f":
            _assert_y_finite(y)
        y = to_cupy(y)
    check_consistent_length(X, y)
    return X, y


def _assert_y_finite(y):
    """scikit-learn's NaN/infinity error for a host ``y`` (dense or sparse)."""
    data = y.data if sp.issparse(y) else y
    if data.size and not np.isfinite(np.sum(data, dtype=np.float64)):
        if np.isnan(data).any():
            raise ValueError("Input y contains NaN.")
        if not np.isfinite(data).all():
            raise ValueError(
                f"Input y contains infinity or a value too large for {data.dtype!r}.")


def validate_inverse_input(estimator, X, spec, n_columns, *, reject_strings=False):
    """X for ``inverse_transform``, classified by the caller as ``spec``: scikit-learn's
    ``check_array(X, dtype=[float64, float32])`` checks (2-D, numeric, finite, dense, at
    least one row), on the device for device input, and the column count checked against
    the ``n_columns`` components (scikit-learn leaves that to NumPy's matmul error; the
    message here names it)."""
    if spec.host_torch:
        X = X.detach().numpy()
    if reject_strings and _has_strings(X, spec):
        raise ValueError(_STRINGS_MESSAGE)
    if spec.on_device:
        X = _validate_X(estimator, X, spec, reset=None, dtype=("float64", "float32"),
                        accept_sparse=False, ensure_min_samples=1, ensure_min_features=1)
    else:
        from sklearn.utils import check_array

        X = check_array(X, input_name="X", dtype=["float64", "float32"])
    if X.shape[1] != n_columns:
        raise ValueError(
            f"X has {X.shape[1]} columns, but {type(estimator).__name__}.inverse_transform "
            f"expects {n_columns} (one per component)."
        )
    return X


def _check_y_on_device(y, *, multi_output):
    """scikit-learn's ``_check_y`` checks for a CuPy ``y``, done on the device."""
    if y.dtype.kind == "c":
        raise ValueError("Complex data not supported\n{}\n".format(y))
    if y.dtype.kind not in "fiub":
        raise ValueError(f"Unknown label type: y of dtype {y.dtype} is not numeric.")
    if y.dtype.kind != "f":
        y = y.astype("float64")
    if multi_output:
        if y.ndim not in (1, 2):
            raise ValueError(f"Found array with dim {y.ndim}, while dim <= 2 is required.")
    else:
        if y.ndim == 2 and y.shape[1] == 1:
            y = y.ravel()
        if y.ndim != 1:
            raise ValueError(
                f"y should be a 1d array, got an array of shape {y.shape} instead."
            )
    cp = cupy_module()

    if y.size and not bool(cp.isfinite(cp.sum(y, dtype=cp.float64))):
        if bool(cp.isnan(y).any()):
            raise ValueError("Input y contains NaN.")
        raise ValueError(
            f"Input y contains infinity or a value too large for {np.dtype(y.dtype)!r}."
        )
    return y


def _validate_X(estimator, X, spec, *, reset, dtype, accept_sparse, ensure_min_samples,
                ensure_min_features, ensure_all_finite=True):
    if not spec.on_device:
        return _sk_validate_data(
            estimator, X, reset=reset, dtype=list(dtype), accept_sparse=accept_sparse,
            ensure_min_samples=ensure_min_samples, ensure_min_features=ensure_min_features,
            ensure_all_finite=ensure_all_finite,
        )
    X = to_cupy(X)
    name = type(estimator).__name__
    sparse = spec.sparse
    if sparse:
        if not accept_sparse:
            raise TypeError(
                "Sparse data was passed for X, but dense data is required. Use "
                "'.toarray()' to convert to a dense numpy array."
            )
        allowed = [accept_sparse] if isinstance(accept_sparse, str) else accept_sparse
        if isinstance(allowed, (list, tuple)) and X.format not in allowed:
            X = X.asformat(allowed[0])
    if X.dtype.kind == "c":
        raise ValueError("Complex data not supported\n{}\n".format(X))
    if X.ndim != 2:
        raise ValueError(
            f"Expected 2D array, got {X.ndim}D array instead. Reshape your data either "
            "using array.reshape(-1, 1) if your data has a single feature or "
            "array.reshape(1, -1) if it contains a single sample."
        )
    if X.dtype.name not in dtype:
        X = X.astype(dtype[0])
    n_samples, n_features = X.shape
    if n_samples < ensure_min_samples:
        raise ValueError(
            f"Found array with {n_samples} sample(s) (shape={X.shape}) while a minimum "
            f"of {ensure_min_samples} is required by {name}."
        )
    if n_features < ensure_min_features:
        raise ValueError(
            f"Found array with {n_features} feature(s) (shape={X.shape}) while a minimum "
            f"of {ensure_min_features} is required by {name}."
        )
    if ensure_all_finite:
        _assert_all_finite_on_device(X.data if sparse else X, name)
    if reset is None:  # not data of the fitted features (inverse_transform's input)
        return X
    if reset:
        _check_n_features(estimator, X, reset=True)
        _check_feature_names(estimator, X, reset=True)
        return X
    # scikit-learn's checks against the fit, short-cut for device arrays (they have no
    # feature names): this is on the path of every transform and predict
    expected = getattr(estimator, "n_features_in_", None)
    if expected is not None and n_features != expected:
        raise ValueError(f"X has {n_features} features, but {name} is expecting "
                         f"{expected} features as input.")
    if getattr(estimator, "feature_names_in_", None) is not None:
        _check_feature_names(estimator, X, reset=False)  # its warning
    return X


def _assert_all_finite_on_device(values, name):
    """One fused reduction over ``values`` (no temporary array); detail only on failure.

    A sum accumulated in float64 is finite exactly when every element is (NaN and ±inf
    propagate), short of float64 overflow, which the detailed check then rules out.
    """
    cp = cupy_module()

    if values.size == 0 or bool(cp.isfinite(cp.sum(values, dtype=cp.float64))):
        return
    from ._sklearn_private import _assert_all_finite

    # scikit-learn's own message (its advice on NaN included), from one value of X's dtype
    for bad, found in ((np.nan, lambda: bool(cp.isnan(values).any())),
                       (np.inf, lambda: not bool(cp.isfinite(values).all()))):
        if found():
            _assert_all_finite(np.array([bad], dtype=np.dtype(values.dtype)),
                               input_name="X", estimator_name=name)


def checked_product(ops, inp, W, estimator, bias=None):
    """``X @ W (+ bias)`` on ``ops`` for a transform of the :class:`Input` ``inp``, with
    scikit-learn's NaN/infinity error for X where it was validated with
    ``ensure_all_finite=False``: on the CPU X is checked first (NumPy would warn on the
    arithmetic), on the GPU the product is (:func:`check_finite_through`)."""
    check_finite = not inp.finite
    if check_finite and ops.finite_check == "input":
        inp.checked_finite(estimator)
    Xd = ops.asarray(inp.data)
    # NumPy's promotion, as scikit-learn's ``X @ components_.T``: float32 X on a float64
    # fit gives float64
    dtype = np.result_type(Xd.dtype, W.dtype)
    if Xd.dtype != dtype:
        Xd = Xd.astype(dtype)
    out = ops.matmul(Xd, ops.asarray(W, dtype=Xd.dtype),
                     bias=None if bias is None else ops.asarray(bias, dtype=Xd.dtype))
    if check_finite and ops.finite_check == "output":
        check_finite_through(ops, out, inp, estimator)
    return out


def check_finite_through(ops, out, inp, estimator):
    """Raise scikit-learn's NaN/infinity error for the :class:`Input` ``inp`` if the
    product ``out`` of its X (``X @ W + b``, validated with ``ensure_all_finite=False``)
    is not finite.

    A NaN or infinity in a row of X makes that row of any product with it non-finite
    (``inf·0`` is NaN), so checking the small output replaces a pass over X; X itself is
    examined only when the output is not finite, to tell NaN from infinity (a finite X
    whose product overflows passes, as in scikit-learn).
    """
    values = out.data if ops.is_sparse(out) else out
    # summed in its own dtype: an overflow of finite values only costs the look at X
    if values.size == 0 or np.isfinite(float(ops.xp.sum(values))):
        return
    inp.checked_finite(estimator)


def assert_all_finite(X, estimator, *, on_device=None):
    """scikit-learn's NaN/infinity check of X (dense or sparse, host or device), for
    input validated with ``ensure_all_finite=False``; ``on_device``: where X is, if the
    caller knows (else X is asked)."""
    if is_device_array(X) if on_device is None else on_device:
        data = X.data if hasattr(X, "tocsr") else X
        _assert_all_finite_on_device(data, type(estimator).__name__)
    else:
        from ._sklearn_private import _assert_all_finite

        _assert_all_finite(X.data if hasattr(X, "tocsr") else X, input_name="X",
                           estimator_name=type(estimator).__name__)


def check_row_chunked(X, name="X"):
    """Raise the error a user can act on unless the dask array X is 2-D and chunked along
    rows only."""
    if X.ndim != 2:
        raise ValueError(f"Expected a 2-D dask array for {name}, got {X.ndim} dimensions.")
    if len(X.chunks[1]) != 1:
        raise ValueError(
            f"{name} is chunked along features ({len(X.chunks[1])} column chunks); skgpu "
            f"needs row chunks with all features in each: use {name}.rechunk({{1: -1}})."
        )
    if X.dtype.kind not in "fiub":
        raise ValueError(f"{name} must be numeric, got dtype {X.dtype}.")
