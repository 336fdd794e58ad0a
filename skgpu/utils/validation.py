"""Input validation that accepts GPU arrays as well as what scikit-learn accepts.

NumPy, lists, pandas and SciPy sparse input go through scikit-learn's own
``validate_data``, so errors read exactly as scikit-learn's. CuPy arrays, CuPy sparse
matrices and CUDA torch tensors stay on the device and get the same checks there.
"""

from __future__ import annotations

import numpy as np
from sklearn.utils.validation import _check_feature_names, _check_n_features
from sklearn.utils.validation import validate_data as _sk_validate_data

from ..backends._arrays import is_cupy_sparse, is_device_array, is_torch_tensor, to_cupy


def validate_data(estimator, X, *, reset=True, dtype=("float64", "float32"),
                  accept_sparse=False, ensure_min_samples=1, ensure_min_features=1):
    """Validate ``X`` for ``estimator``; device arrays are returned as CuPy (sparse).

    ``n_features_in_`` (and ``feature_names_in_`` for DataFrames) are set when ``reset``
    and checked otherwise, as scikit-learn's ``validate_data`` does.
    """
    if is_torch_tensor(X) and not is_device_array(X):
        X = X.detach().numpy()
    if not is_device_array(X):
        return _sk_validate_data(
            estimator, X, reset=reset, dtype=list(dtype), accept_sparse=accept_sparse,
            ensure_min_samples=ensure_min_samples, ensure_min_features=ensure_min_features,
        )
    X = to_cupy(X)
    name = type(estimator).__name__
    sparse = is_cupy_sparse(X)
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
    _assert_all_finite_on_device(X.data if sparse else X, name)
    _check_n_features(estimator, X, reset=reset)
    _check_feature_names(estimator, X, reset=reset)
    return X


def _assert_all_finite_on_device(values, name):
    """One fused reduction over ``values`` (no temporary array); detail only on failure.

    A sum accumulated in float64 is finite exactly when every element is (NaN and ±inf
    propagate), short of float64 overflow, which the detailed check then rules out.
    """
    import cupy as cp

    if values.size == 0 or bool(cp.isfinite(cp.sum(values, dtype=cp.float64))):
        return
    if bool(cp.isnan(values).any()):
        raise ValueError(f"Input X contains NaN.\n{name} does not accept missing "
                         "values encoded as NaN natively.")
    if not bool(cp.isfinite(values).all()):
        raise ValueError(
            f"Input X contains infinity or a value too large for {np.dtype(values.dtype)!r}."
        )
