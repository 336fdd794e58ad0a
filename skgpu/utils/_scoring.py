"""``score`` where the data is: scikit-learn's R² for device arrays.

``RegressorMixin.score`` calls ``r2_score``, which turns its input into NumPy arrays; CuPy
refuses that, and CUDA torch tensors cannot do it, so a search over device data would
record NaN for every fold. Here the sums R² is made of are taken on the device and only
one number per output comes back to the host, where they are assembled by scikit-learn's
rule for ``r2_score(force_finite=True)`` (a constant target scores 1 if predicted exactly,
else 0; outputs averaged uniformly). Anything the fast path does not cover (invalid
shapes or values, an overflow) is handed to scikit-learn on the host, so errors and edge
cases read exactly as scikit-learn's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.metrics import r2_score

from .._typing import ArrayLike, MatrixLike
from ..backends import cupy_module, is_cupy_array, is_device_array, to_cupy, to_numpy


def r2_score_where_the_data_is(y_true, y_pred, sample_weight=None):
    """``r2_score(y_true, y_pred, sample_weight=sample_weight)`` as a Python float.

    With any argument on the GPU (CuPy, CUDA torch) the reductions run there, in float64;
    otherwise this is scikit-learn's ``r2_score``.
    """
    if not any(is_device_array(a) for a in (y_true, y_pred, sample_weight)):
        return float(r2_score(y_true, y_pred, sample_weight=sample_weight))
    parts = _r2_parts_on_device(y_true, y_pred, sample_weight)
    if parts is None:  # not the common case: scikit-learn's checks and arithmetic decide
        return float(r2_score(to_numpy(y_true), to_numpy(y_pred),
                              sample_weight=to_numpy(sample_weight)))
    return r2_from_sums(*parts)


def r2_from_sums(numerator, denominator):
    """R² averaged over outputs from each output's ``Σ w (y - ŷ)²`` and ``Σ w (y - ȳ)²``,
    with scikit-learn's ``force_finite=True`` rule for constant targets."""
    scores = np.ones(numerator.shape[0])
    nonzero_numerator = numerator != 0
    nonzero_denominator = denominator != 0
    valid = nonzero_numerator & nonzero_denominator
    scores[valid] = 1.0 - numerator[valid] / denominator[valid]
    scores[nonzero_numerator & ~nonzero_denominator] = 0.0
    return float(np.mean(scores))


class RegressorScoreMixin:
    """``score`` of a regressor: scikit-learn's R² of ``predict``, on the device for device
    data (for Ridge, RidgeCV and GaussianProcessRegressor)."""

    predict: Callable[..., Any]  # the estimator's (annotation only)

    def score(self, X: MatrixLike, y: ArrayLike,
              sample_weight: ArrayLike | None = None) -> float:
        """Coefficient of determination R² of the prediction, as scikit-learn's.

        On device data (CuPy, CUDA torch) it is computed on the device.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Test samples.
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            True values for ``X``.
        sample_weight : array-like of shape (n_samples,), default=None
            Sample weights.

        Returns
        -------
        score : float
            R² of ``self.predict(X)`` against ``y``, averaged over targets.
        """
        return r2_score_where_the_data_is(y, self.predict(X), sample_weight)


def _as_device_values(a):
    """``a`` as a dense numeric CuPy array, or None where scikit-learn must look at it."""
    if a is None:
        return None
    if not is_device_array(a):
        a = np.asarray(a)
        if a.dtype.kind not in "fiub":
            return None
    a = to_cupy(a)
    if not is_cupy_array(a) or a.dtype.kind not in "fiub":
        return None
    return a


def _r2_parts_on_device(y_true, y_pred, sample_weight):
    """Per output, ``Σ w (y - ŷ)²`` and ``Σ w (y - ȳ_w)²`` as NumPy float64 vectors, or
    None when the input is not the plain valid case (then scikit-learn decides)."""
    cp = cupy_module()
    y, p = _as_device_values(y_true), _as_device_values(y_pred)
    if y is None or p is None or y.ndim not in (1, 2) or p.ndim not in (1, 2):
        return None
    n = y.shape[0]
    y = y.reshape(n, -1).astype(cp.float64, copy=False)
    p = p.reshape(p.shape[0], -1).astype(cp.float64, copy=False)
    if p.shape != y.shape or n < 2:
        return None
    if sample_weight is None:
        mean = y.mean(axis=0)
        numerator = ((y - p) ** 2).sum(axis=0)
        denominator = ((y - mean) ** 2).sum(axis=0)
    else:
        w = _as_device_values(sample_weight)
        if w is None or w.shape != (n,):
            return None
        w = w.astype(cp.float64, copy=False)
        W = w[:, None]
        # a zero or NaN total weight makes the mean, and so the sums, NaN: handed over below
        mean = (W * y).sum(axis=0) / w.sum()
        numerator = (W * (y - p) ** 2).sum(axis=0)
        denominator = (W * (y - mean) ** 2).sum(axis=0)
    parts = cp.stack([numerator, denominator]).get()
    # the one transfer; NaN or infinity anywhere in the input (weights included) reaches
    # these sums, and so does an overflow
    if not np.isfinite(parts).all():
        return None
    return parts[0], parts[1]
