"""Every private scikit-learn name skgpu uses, in one place, each with its reason.

skgpu's estimators subclass scikit-learn's and must behave exactly like them, which a few
private helpers make possible without copying their code. A scikit-learn release that
moves or changes one of these breaks this module's import first, with the name in the
traceback; ``tests/test_sklearn_private.py`` checks each is still what skgpu expects.
Everything else skgpu imports from scikit-learn is public API.
"""

# Parameter validation of ``fit`` exactly as scikit-learn's estimators do it
# (``_parameter_constraints``, ``prefer_skip_nested_validation``); no public equivalent.
# (Estimators use it re-typed, as ``skgpu.utils._fitting.fit_context``.)
from sklearn.base import _fit_context

# PCA(n_components='mle'): Minka's dimension estimate, scikit-learn's own implementation
# (the same answer bit for bit).
from sklearn.decomposition._pca import _infer_dimension

# RidgeCV with a scorer: the identity "estimator" scikit-learn passes to scorers so that
# they score the leave-one-out predictions directly.
from sklearn.linear_model._ridge import _IdentityRegressor

# GaussianProcessRegressor(normalize_y=True): scikit-learn's handling of a zero std.
from sklearn.preprocessing._data import _handle_zeros_in_scale

# ARPACK's starting vector, drawn as scikit-learn draws it (same results for a seed).
from sklearn.utils._arpack import _init_arpack_v0

# A ``StrOptions`` constraint for skgpu's own string parameter (``cholesky``) beside
# scikit-learn's constraints.
from sklearn.utils._param_validation import StrOptions

# Metadata routing in RidgeCV.fit, as scikit-learn's RidgeCV routes to its scorer.
from sklearn.utils.metadata_routing import _raise_for_params, _routing_enabled

# PCA on sparse X: centring without densifying, as scikit-learn's PCA does.
from sklearn.utils.sparsefuncs import _implicit_column_offset

# Validation of device arrays and of inputs validated with ensure_all_finite=False: the
# same checks and messages as scikit-learn's ``validate_data`` pieces.
from sklearn.utils.validation import (
    _assert_all_finite,
    _check_feature_names,
    _check_n_features,
    _check_sample_weight,
    _check_y,
)

__all__ = [
    "StrOptions", "_IdentityRegressor", "_assert_all_finite", "_check_feature_names",
    "_check_n_features", "_check_sample_weight", "_check_y", "_fit_context",
    "_handle_zeros_in_scale", "_implicit_column_offset", "_infer_dimension",
    "_init_arpack_v0", "_raise_for_params", "_routing_enabled",
]
