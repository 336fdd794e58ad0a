"""The estimators Ridge and RidgeCV: they validate, pick a backend and set attributes.

The solvers are module-level functions of a backend ``ops`` (the style of scikit-learn's
``linear_model/_ridge.py``): the design, its spectrum and Ridge's solve in
:mod:`._spectrum`, RidgeCV's leave-one-out in :mod:`._loo`.
"""
from __future__ import annotations

import logging
import numbers
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import numpy as np
from sklearn.linear_model import Ridge as _SkRidge
from sklearn.linear_model import RidgeCV as _SkRidgeCV
from sklearn.model_selection import GridSearchCV
from sklearn.utils import check_scalar
from sklearn.utils.metadata_routing import process_routing
from sklearn.utils.validation import check_is_fitted

from .._typing import ArrayLike, MatrixLike, RandomStateLike
from ..backends import NOT_RUN, get_backend, run_reference_on_host, run_with_fallback
from ..backends import (
    container_of,
    convert_output,
    to_numpy,
)
from ..utils._cache import cached
from ..utils._convert import SklearnConversionMixin
from ..utils._fitting import atomic_fit, fit_context
from ..utils._scoring import RegressorScoreMixin
from ..utils._sklearn_private import (
    _check_sample_weight,
    _raise_for_params,
    _routing_enabled,
)
from ..utils.validation import (
    checked_product,
    prepare,
    prepare_xy,
)

from ._loo import _gcv_fit, _resolve_gcv_mode, _select_alphas
from ._spectrum import (
    _as_score,
    _check_alpha_for_targets,
    _factorisation_flops,
    _raise_alpha_too_small,
    _raise_not_finite,
    _host,
    _ridge_fit,
    _set_intercept,
    _SPARSE_GRAM_LIMIT,
)

_SelfRidge = TypeVar("_SelfRidge", bound="Ridge")
_SelfRidgeCV = TypeVar("_SelfRidgeCV", bound="RidgeCV")

logger = logging.getLogger("skgpu")


class _DevicePredictMixin(RegressorScoreMixin):
    """``predict`` as one matmul with the intercept in the BIAS epilog, output following
    the input's container; device copies of the weights are cached per backend."""

    coef_: Any  # set by fit (annotations only: no class attribute)
    intercept_: Any

    def _linear_weights(self, ops):
        coef = np.atleast_2d(np.asarray(self.coef_))
        intercept = np.asarray(self.intercept_)

        def make():
            b = np.broadcast_to(intercept.astype(coef.dtype), (coef.shape[0],))
            return (ops.asarray(np.ascontiguousarray(coef.T)),
                    ops.asarray(np.ascontiguousarray(b)))

        return cached(self, ops.name, (coef, intercept), make)

    def predict(self, X: MatrixLike) -> MatrixLike:
        """Predict using the linear model.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            NumPy, pandas, SciPy sparse, CuPy (dense or sparse) or torch.

        Returns
        -------
        C : array of shape (n_samples,) or (n_samples, n_targets)
            In the container of ``X``.
        """
        what = f"{type(self).__name__}.predict"
        # host data on the CPU: scikit-learn's own predict (it checks the fit first)
        spec = container_of(X)
        out = run_reference_on_host(lambda: super(_DevicePredictMixin, self).predict(X),
                                    spec=spec, operations=("matmul",), what=what,
                                    elements=getattr(X, "size", None))
        if out is not NOT_RUN:
            return out
        check_is_fitted(self)
        if spec.dask:
            from ..dask import map_rows

            return map_rows(self, self.predict, X,
                            None if np.ndim(self.coef_) == 1 else np.shape(self.coef_)[0],
                            np.result_type(self.coef_.dtype, np.float32))
        # NaN and infinity are checked by checked_product (on the GPU in the product)
        inp = prepare(self, X, spec=spec, reset=False, accept_sparse=("csr", "csc", "coo"),
                      reject_strings=True, ensure_all_finite=False)
        one_target = np.ndim(self.coef_) == 1

        def work(ops):
            W, b = self._linear_weights(ops)  # in coef_'s dtype: NumPy's promotion with X
            out = checked_product(ops, inp, W, self, bias=b)
            return out.ravel() if one_target else out

        out, _ = run_with_fallback(work, operations=("matmul",), X=inp, what=what)
        return convert_output(out, inp.spec)

    def __getstate__(self):
        state = super().__getstate__()
        state.pop("_device_cache", None)
        return state




class Ridge(SklearnConversionMixin["_SkRidge"], _DevicePredictMixin, _SkRidge):
    """Linear least squares with l2 regularisation on the GPU, a drop-in for scikit-learn's.

    Same parameters, attributes and results as :class:`sklearn.linear_model.Ridge`.
    ``solver='auto'``, ``'cholesky'`` and ``'svd'`` run on the backend chosen by
    :func:`skgpu.config_context` (``device``):

    - ``'cholesky'`` (what ``'auto'`` picks): the normal equations ``XᵀX + αI`` (or the
      kernel form ``XXᵀ + αI`` when p > n) factored by potrf, one factorisation per
      distinct alpha; a singular matrix falls back to ``'svd'``, as in scikit-learn.
      Sparse X with an intercept is handled here too when ``solver='auto'`` and
      ``min(n, p) <= 8192``, the centring folded into the products (scikit-learn picks
      the iterative 'sparse_cg' there; this solves the same system exactly).
    - ``'svd'``: the QR route of :class:`RidgeCV` (R of a tall-skinny QR, SVD of R).

    The other solvers (``'lsqr'``, ``'sparse_cg'``, ``'sag'``, ``'saga'``, ``'lbfgs'``,
    and ``positive=True``) run scikit-learn's implementation on the CPU, with the reason
    logged on the ``"skgpu"`` logger.

    Parameters
    ----------
    alpha : float or array-like of shape (n_targets,), default=1.0
        Regularisation strength (one per target allowed).
    fit_intercept : bool, default=True
        Whether to fit the intercept.
    copy_X : bool, default=True
        Kept for compatibility; X is never modified.
    max_iter : int, default=None
        Iterations of the iterative (CPU) solvers.
    tol : float, default=1e-4
        Precision of the iterative (CPU) solvers.
    solver : {'auto', 'svd', 'cholesky', 'lsqr', 'sparse_cg', 'sag', 'saga', 'lbfgs'}, \
default='auto'
        Solver; see above for which run on the GPU.
    positive : bool, default=False
        Force positive coefficients (scikit-learn's 'lbfgs' on the CPU).
    random_state : int, RandomState instance or None, default=None
        Used by 'sag' and 'saga'.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,) or (n_targets, n_features)
        Weight vector(s).
    intercept_ : float or ndarray of shape (n_targets,)
        Independent term in the decision function (0.0 without an intercept).
    n_iter_ : None or ndarray of shape (n_targets,)
        Iterations of the iterative solvers; None for 'cholesky' and 'svd'.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (n_features,)
        Defined only when X has string feature names.
    solver_ : str
        The solver used.
    backend_ : {'gpu', 'cpu', 'dask'}
        Where the last fit ran ('dask': on the workers of a dask array's scheduler).

    See Also
    --------
    RidgeCV : Ridge regression with built-in cross-validation of alpha.
    sklearn.linear_model.Ridge : The scikit-learn estimator this one stands for.

    Examples
    --------
    >>> import numpy as np
    >>> from skgpu.linear_model import Ridge
    >>> X = np.array([[0.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, 1.0]])
    >>> y = np.array([0.0, 1.0, 2.0, 3.5])
    >>> Ridge(alpha=0.1).fit(X, y).coef_.round(4)
    array([1.2298, 0.8266])
    """

    if TYPE_CHECKING:  # scikit-learn's constructor (untyped there), as type checkers see it
        def __init__(self, alpha: float | ArrayLike = 1.0, *, fit_intercept: bool = True,
                     copy_X: bool = True, max_iter: int | None = None, tol: float = 1e-4,
                     solver: Literal["auto", "svd", "cholesky", "lsqr", "sparse_cg", "sag",
                                     "saga", "lbfgs"] = "auto",
                     positive: bool = False, random_state: RandomStateLike = None
                     ) -> None: ...

    def _backend_solver(self, X, spec):
        """The solver run on the backend seam, or None for scikit-learn's on the CPU
        (``spec``: X's container, classified before validation)."""
        if self.positive or self.solver not in ("auto", "cholesky", "svd"):
            return None
        if spec.sparse:
            if self.solver == "svd":
                return None  # scikit-learn's TypeError
            if self.fit_intercept and self.solver == "cholesky":
                return None  # scikit-learn's ValueError
            if min(X.shape) > _SPARSE_GRAM_LIMIT:
                return None
            return "cholesky"
        return "svd" if self.solver == "svd" else "cholesky"

    @fit_context(prefer_skip_nested_validation=True)
    @atomic_fit
    def fit(self: _SelfRidge, X: MatrixLike, y: ArrayLike,
            sample_weight: ArrayLike | float | None = None) -> _SelfRidge:
        """Fit Ridge regression model.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data: NumPy, pandas, SciPy sparse, CuPy (dense or sparse) or torch.
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Target values.
        sample_weight : float or array-like of shape (n_samples,), default=None
            Individual weights for each sample.

        Returns
        -------
        self : object
            Fitted estimator.
        """
        spec = container_of(X)
        if spec.dask:
            return self._fit_dask(X, y, sample_weight)
        solver = self._backend_solver(X, spec)
        if solver is None:
            logger.info("Ridge.fit: solver=%r (positive=%s) runs scikit-learn's "
                        "implementation on the CPU", self.solver, self.positive)
            _SkRidge.fit(self, to_numpy(X) if spec.on_device else X, _host(y),
                         sample_weight=_host(sample_weight))
            self.backend_ = "cpu"
            self.__dict__.pop("_device_cache", None)
            return self
        inp, y = prepare_xy(self, X, y, spec=spec, accept_sparse=("csr", "csc", "coo"),
                            multi_output=True, y_numeric=True)
        if inp.sparse and inp.data.format != "csr":
            inp = inp.with_data(inp.data.tocsr())
        X = inp.data
        dtype = X.dtype
        if sample_weight is not None:
            # negative weights: scikit-learn's message (its Ridge fails later, on the
            # square root's NaN)
            sample_weight = _check_sample_weight(_host(sample_weight), X, dtype=dtype,
                                                 ensure_non_negative=True)
        _check_alpha_for_targets(self.alpha, y)

        def work(ops):
            return _ridge_fit(ops, inp, y, sample_weight, self.alpha,
                              fit_intercept=self.fit_intercept, solver=solver)

        operations = ("cholesky", "qr", "svd", "matmul")
        (coef, (X_offset, y_offset), used), backend = run_with_fallback(
            work, operations=operations, X=inp, what=f"Ridge.fit ({solver})",
            flops=_factorisation_flops(X))
        if not np.all(np.isfinite(coef)):
            _raise_not_finite("Ridge.fit", X, inp.sparse)
        if coef.shape[0] == 1:  # one target: scikit-learn ravels coef_ (y 1-D or (n, 1))
            coef = coef.ravel()
        if y.ndim == 1:
            y_offset = y_offset[0]
        self.coef_ = coef
        self.intercept_ = _set_intercept(self.fit_intercept, X_offset, y_offset, coef)
        self.n_iter_ = None
        self.solver_ = used
        self.backend_ = backend.name
        self._device_cache: dict = {}
        return self

    def _fit_dask(self, X, y, sample_weight):
        """Normal equations from chunked Gram blocks (centred by the global means)."""
        from ..dask import prepare_dask_fit, ridge_normal_equations

        if self.positive or self.solver not in ("auto", "cholesky"):
            raise ValueError(
                f"With dask input Ridge solves the normal equations from per-chunk Gram "
                f"blocks: use solver='auto' or 'cholesky' (got solver={self.solver!r}, "
                f"positive={self.positive})."
            )
        if y is None:
            raise ValueError("Ridge requires y to be passed, but the target y is None.")
        inp = prepare_dask_fit(self, X, y, sample_weight)
        X, y = inp.X, inp.y
        n, p = X.shape
        if n < p:
            raise ValueError(f"Dask input needs n_samples >= n_features, got {n} < {p}.")
        t = _check_alpha_for_targets(self.alpha, y)
        with inp.errors():
            A, B, mean, y_mean = ridge_normal_equations(X, y, inp.sample_weight,
                                                        self.fit_intercept)
        alphas = np.broadcast_to(np.asarray(self.alpha, dtype=np.float64).ravel(), (t,))
        cpu = get_backend("cpu")
        coef = np.empty((p, t))
        for a in np.unique(alphas):
            cols = np.flatnonzero(alphas == a)
            factor = cpu.cholesky(A + a * np.eye(p), what="regularised Gram matrix")
            coef[:, cols] = factor.solve(B[:, cols])
        coef = coef.T
        dtype = X.dtype
        if coef.shape[0] == 1:
            coef = coef.ravel()
        if y.ndim == 1:
            y_mean = y_mean[0]
        intercept = _set_intercept(self.fit_intercept, mean, y_mean, coef)
        if type(intercept) is not float:
            intercept = np.asarray(intercept).astype(dtype, copy=False)[()]
        self.coef_ = coef.astype(dtype, copy=False)
        self.intercept_ = intercept
        self.n_iter_ = None
        self.solver_ = "cholesky"
        self.backend_ = "dask"
        self._device_cache = {}
        return self

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # fitted attributes are NumPy, not in X's namespace as the tag promises
        tags.array_api_support = False
        return tags




class RidgeCV(SklearnConversionMixin["_SkRidgeCV"], _DevicePredictMixin, _SkRidgeCV):
    """Ridge regression with built-in cross-validation, on the GPU.

    A drop-in for scikit-learn's :class:`~sklearn.linear_model.RidgeCV`.

    With ``cv=None`` (the default) the efficient leave-one-out runs on the backend chosen
    by :func:`skgpu.config_context` for every alpha and target at once:

    - dense X (``gcv_mode`` None, ``'auto'`` or ``'svd'``): the **QR route**. With Xw the
      centred, weighted data, ``Xw = QR`` (CholeskyQR on the GPU while it is orthogonal
      to working precision, Householder beyond), ``R = Ũ S Vᵀ`` and ``U = QŨ``; the
      hat-matrix diagonal is ``h_i(α) = Σ_j U_ij² s_j²/(s_j² + α)`` and the fits
      ``U diag(s²/(s²+α)) Uᵀ y`` — a few GEMMs for all alphas, no XᵀX, so the condition
      number is never squared. When n <= p the transposed form is used: ``Xwᵀ = QR``,
      and the SVD of ``Rᵀ`` (n × n) gives U directly; with an intercept its direction is
      first removed exactly (a Householder reflection), and ``1 - h`` and ``y - ŷ`` are
      then sums of positive terms. Against exact references (ball arithmetic) the
      leave-one-out errors are within 1e-6 for cond(X) up to 1e10, ~1e-13 for wide X.
    - ``gcv_mode='eigen'``: scikit-learn's route, an eigendecomposition of ``XwᵀXw``
      (n > p) or ``Xw Xwᵀ`` (n <= p). Sparse X always takes it (``'svd'`` warns as in
      scikit-learn), with the centring carried through SpMM products: X is never
      densified, only the min(n, p)² Gram matrix is.

    The computation is in float64 whatever the input dtype, and ``coef_``,
    ``intercept_`` and ``cv_results_`` are cast back to a floating input's dtype, as in
    scikit-learn. With ``cv`` given, a GridSearchCV over :class:`Ridge` is run.

    Parameters
    ----------
    alphas : array-like of shape (n_alphas,), default=(0.1, 1.0, 10.0)
        Regularisation strengths to try (positive).
    fit_intercept : bool, default=True
        Whether to fit the intercept.
    scoring : str, callable or None, default=None
        Scorer; None means the mean squared LOO error (negated).
    cv : int, cross-validation generator, iterable or None, default=None
        None: efficient leave-one-out; otherwise GridSearchCV's ``cv``.
    gcv_mode : {'auto', 'svd', 'eigen'} or None, default=None
        Route of the leave-one-out, see above.
    store_cv_results : bool, default=False
        Keep the per-sample LOO squared errors (or predictions, with a scorer).
    alpha_per_target : bool, default=False
        Pick the best alpha for each target separately.

    Attributes
    ----------
    cv_results_ : ndarray of shape (n_samples, n_alphas) or (n_samples, n_targets, n_alphas)
        Only with ``store_cv_results=True`` and ``cv=None``.
    coef_ : ndarray of shape (n_features,) or (n_targets, n_features)
        Weight vector(s).
    intercept_ : float or ndarray of shape (n_targets,)
        Independent term in the decision function (0.0 without an intercept).
    alpha_ : float or ndarray of shape (n_targets,)
        The selected regularisation strength (one per target with alpha_per_target).
    best_score_ : float or ndarray of shape (n_targets,)
        Score of the selected alpha (one per target with alpha_per_target).
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (n_features,)
        Defined only when X has string feature names.
    backend_ : {'gpu', 'cpu', 'dask'}
        Where the leave-one-out ran (with ``cv`` given: where the final Ridge ran;
        'dask': on the workers of a dask array's scheduler).

    See Also
    --------
    Ridge : Ridge regression at a given alpha.
    sklearn.linear_model.RidgeCV : The scikit-learn estimator this one stands for.

    Examples
    --------
    >>> from sklearn.datasets import load_diabetes
    >>> from skgpu.linear_model import RidgeCV
    >>> X, y = load_diabetes(return_X_y=True)
    >>> reg = RidgeCV(alphas=[1e-3, 1e-2, 1e-1, 1]).fit(X, y)
    >>> float(reg.alpha_), round(reg.score(X, y), 4)
    (0.01, 0.5166)
    """

    if TYPE_CHECKING:  # scikit-learn's constructor (untyped there), as type checkers see it
        def __init__(self, alphas: ArrayLike = (0.1, 1.0, 10.0), *, fit_intercept: bool = True,
                     scoring: str | Callable[..., Any] | None = None, cv: Any = None,
                     gcv_mode: Literal["auto", "svd", "eigen"] | None = None,
                     store_cv_results: bool = False, alpha_per_target: bool = False
                     ) -> None: ...

    def _checked_alphas(self):
        """scikit-learn's checks of ``alphas`` (positive; zero allowed with ``cv``)."""
        check = dict(target_type=numbers.Real, min_val=0.0,
                     include_boundaries="neither" if self.cv is None else "left")
        if np.size(self.alphas) == 0:
            # scikit-learn fits NaN coefficients here, or fails inside GridSearchCV
            raise ValueError(f"alphas must hold at least one value, got {self.alphas!r}.")
        if isinstance(self.alphas, (np.ndarray, list, tuple)):
            if np.ndim(self.alphas) == 0 or len(self.alphas) == 1:
                first = np.ravel(self.alphas)[0]
                check_scalar(first, "alphas", **check)
            else:
                for index, alpha in enumerate(self.alphas):
                    check_scalar(alpha, f"alphas[{index}]", **check)
        values = np.asarray(self.alphas, dtype=np.float64).ravel()
        if np.any(np.isnan(values)):  # (scikit-learn fits NaN coefficients)
            index = int(np.flatnonzero(np.isnan(values))[0])
            raise ValueError(f"alphas[{index}] is NaN: every alpha must be a positive "
                             "number (np.inf gives the intercept-only model).")
        return np.asarray(self.alphas)

    @fit_context(prefer_skip_nested_validation=True)
    @atomic_fit
    def fit(self: _SelfRidgeCV, X: MatrixLike, y: ArrayLike,
            sample_weight: ArrayLike | float | None = None, **params: Any) -> _SelfRidgeCV:
        """Fit Ridge regression model with cv.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data: NumPy, pandas, SciPy sparse, CuPy (dense or sparse) or torch.
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Target values.
        sample_weight : float or array-like of shape (n_samples,), default=None
            Individual weights for each sample.
        **params : dict
            Parameters routed to the scorer (metadata routing).

        Returns
        -------
        self : object
            Fitted estimator.
        """
        _raise_for_params(params, self, "fit")
        scorer = self._get_scorer()
        alphas = self._checked_alphas()
        if sample_weight is not None:
            params["sample_weight"] = sample_weight
        self.__dict__.pop("cv_results_", None)
        self._device_cache: dict = {}

        spec = container_of(X)
        if self.cv is not None:
            if spec.dask:
                raise ValueError("With dask input RidgeCV supports cv=None (the "
                                 "efficient leave-one-out) only.")
            return self._fit_grid_search(X, y, alphas, scorer, params)
        if spec.dask:
            return self._fit_dask(X, y, sample_weight, alphas)

        if _routing_enabled():
            score_params = process_routing(self, "fit", **params).scorer.score
        else:
            score_params = {} if sample_weight is None else {
                "sample_weight": _host(sample_weight)}
        if self.scoring is None:
            scorer = None
        floating = getattr(getattr(X, "dtype", None), "kind", None) == "f"
        original_dtype = X.dtype if floating else None
        inp, y, sample_weight = self._loo_input(X, spec, y, sample_weight)
        X = inp.data
        mode = _resolve_gcv_mode(self.gcv_mode, inp.sparse)
        alpha_list = [float(alphas)] if alphas.ndim == 0 else list(map(float, alphas))

        def work(ops):
            return _gcv_fit(ops, inp, y, sample_weight, alpha_list, owner=self,
                            fit_intercept=self.fit_intercept, mode=mode,
                            alpha_per_target=self.alpha_per_target, scorer=scorer,
                            score_params=dict(score_params),
                            store_cv_results=self.store_cv_results)

        operations = ("qr", "svd", "matmul") if mode == "svd" else ("eigh", "gram",
                                                                     "matmul")
        result, backend = run_with_fallback(work, operations=operations, X=inp,
                                            what=f"RidgeCV.fit (leave-one-out, {mode})",
                                            flops=_factorisation_flops(X))
        if not np.all(np.isfinite(result.coef)):
            _raise_alpha_too_small(alpha_list)
            _raise_not_finite("RidgeCV.fit", X, inp.sparse)
        self._set_loo_result(result, X.shape[0], y, len(alpha_list), original_dtype)
        self.backend_ = backend.name
        return self

    def _loo_input(self, X, spec, y, sample_weight):
        """``(inp, y, sample_weight)`` validated for the leave-one-out fit (X classified
        by the caller as ``spec``).

        Dense X keeps its float32 (converted to float64 on the backend: half the bytes to
        the GPU, no host copy) and its NaN/infinity check is a sum on the backend
        (``_preprocess``): on a search's folds the host upcast and check cost more than the
        fit. Sparse X is converted to float64 CSR and checked on the host, in float64, as
        scikit-learn's message says.
        """
        inp, y = prepare_xy(self, X, y, spec=spec, accept_sparse=("csr", "csc", "coo"),
                            dtype=("float64", "float32"), multi_output=True,
                            y_numeric=True, ensure_all_finite=False)
        if inp.sparse:
            data = inp.data.tocsr()
            inp = inp.with_data(data if data.dtype == np.float64 else data.astype(np.float64))
            inp = inp.checked_finite(self)
        if sample_weight is not None:
            sample_weight = _check_sample_weight(_host(sample_weight), inp.data,
                                                 dtype=np.float64, ensure_non_negative=True)
        return inp, y, sample_weight

    def _set_loo_result(self, result, n_samples, y, n_alphas, original_dtype):
        """The fitted attributes from a finite leave-one-out result, in X's float dtype
        (``original_dtype``, None for non-float X) and y's shape, as scikit-learn's."""
        coef, y_offset = result.coef, result.y_offset
        if y.ndim == 1 or y.shape[1] == 1:
            coef = coef.ravel()
        if y.ndim == 1:
            y_offset = y_offset[0]
        intercept = _set_intercept(self.fit_intercept, result.X_offset, y_offset, coef)
        if original_dtype is not None:
            coef = coef.astype(original_dtype, copy=False)
            if type(intercept) is not float:
                intercept = np.asarray(intercept).astype(original_dtype, copy=False)[()]
        self.alpha_ = result.alpha
        self.best_score_ = _as_score(result.best_score)
        self.coef_ = coef
        self.intercept_ = intercept
        if self.store_cv_results:
            shape = ((n_samples, n_alphas) if y.ndim == 1
                     else (n_samples, y.shape[1], n_alphas))
            cv = result.cv_results.reshape(shape)
            self.cv_results_ = (cv if original_dtype is None
                                else cv.astype(original_dtype, copy=False))

    def _fit_dask(self, X, y, sample_weight, alphas):
        """Leave-one-out over row chunks: R from the Gram matrix, checked (and refined, or
        replaced by TSQR) to the QR route's accuracy, then per-chunk LOO errors (see
        skgpu.dask.linalg.ridgecv_loo)."""
        from ..dask import prepare_dask_fit, ridgecv_loo

        if self.scoring is not None or self.store_cv_results:
            raise ValueError("With dask input RidgeCV supports scoring=None and "
                             "store_cv_results=False (the LOO squared errors are summed "
                             "per chunk).")
        if self.gcv_mode == "eigen":
            raise ValueError("With dask input RidgeCV uses the QR route: leave gcv_mode "
                             "at None, 'auto' or 'svd'.")
        if y is None:
            raise ValueError("RidgeCV requires y to be passed, but the target y is None.")
        inp = prepare_dask_fit(self, X, y, sample_weight)
        X, y = inp.X, inp.y
        alpha_list = [float(alphas)] if alphas.ndim == 0 else list(map(float, alphas))
        with inp.errors():
            loo = ridgecv_loo(X, y, inp.sample_weight, alpha_list, self.fit_intercept)
        mse, V, MtY, inv, mean, y_mean = loo.mse, loo.V, loo.MtY, loo.filt, loo.mean, loo.y_mean
        t = MtY.shape[1]
        per_target = self.alpha_per_target and t > 1
        if self.alpha_per_target:
            scores = [-row if y.ndim == 2 else -row[0] for row in mse]
        else:
            scores = [-float(np.mean(row)) for row in mse]
        best_alpha, best_score, chosen = _select_alphas(alpha_list, scores, per_target, t)
        inv_best = inv[:, chosen] if per_target else np.repeat(inv[:, [chosen]], t, axis=1)
        coef = (V @ (MtY * inv_best)).T
        if y.ndim == 1 or t == 1:
            coef = coef.ravel()
        if y.ndim == 1:
            y_mean = y_mean[0]
        intercept = _set_intercept(self.fit_intercept, mean, y_mean, coef)
        coef = coef.astype(X.dtype, copy=False)
        if type(intercept) is not float:
            intercept = np.asarray(intercept).astype(X.dtype, copy=False)[()]
        self.alpha_, self.best_score_ = best_alpha, _as_score(best_score)
        self.coef_, self.intercept_ = coef, intercept
        self.backend_ = "dask"
        return self

    def _fit_grid_search(self, X, y, alphas, scorer, params):
        if self.store_cv_results:
            raise ValueError("cv!=None and store_cv_results=True are incompatible")
        if self.alpha_per_target:
            raise ValueError("cv!=None and alpha_per_target=True are incompatible")
        estimator = Ridge(fit_intercept=self.fit_intercept)
        if _routing_enabled():
            estimator.set_fit_request(sample_weight=True)
        search = GridSearchCV(estimator, {"alpha": alphas}, cv=self.cv, scoring=scorer)
        search.fit(X, y, **params)
        best = search.best_estimator_
        self.alpha_ = best.alpha
        self.best_score_ = search.best_score_
        self.coef_ = best.coef_
        self.intercept_ = best.intercept_
        self.n_features_in_ = best.n_features_in_
        if hasattr(best, "feature_names_in_"):
            self.feature_names_in_ = best.feature_names_in_
        self.backend_ = best.backend_
        return self

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # fitted attributes are NumPy, not in X's namespace as the tag promises
        tags.array_api_support = False
        return tags
