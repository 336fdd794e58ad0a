"""GaussianProcessRegressor on the backend seam: the estimator, which validates, picks the
dense (:mod:`._dense`) or sparse (:mod:`._sparse`) path and a backend, runs scikit-learn's
optimizer on the likelihood and sets the fitted attributes."""

from __future__ import annotations

import contextlib
import copy
import logging
import time
import warnings
from dataclasses import dataclass
from collections.abc import Callable
from typing import Any, Literal, NamedTuple, TypeVar, overload

import numpy as np
from sklearn.base import clone
from sklearn.gaussian_process import GaussianProcessRegressor as _SkGPR
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C
from sklearn.utils import check_random_state

from .._typing import ArrayLike, MatrixLike, RandomStateLike
from ..backends import NOT_RUN, run_reference_on_host, run_with_fallback
from ..backends import container_of, convert_output, to_numpy
from ..backends import tril_in_place
from ..utils._cache import Identity, cached, store
from ..utils._convert import SklearnConversionMixin
from ..utils._fitting import atomic_fit, fit_context, progress_logging
from ..utils._scoring import RegressorScoreMixin
from ..utils._sklearn_private import StrOptions, _handle_zeros_in_scale
from ..utils.validation import validate_data
from .kernels import check_compact_kernels
from ._kernel_eval import unsupported_reason
from ._memory import (
    check_gpu_memory,
    check_host_memory,
    gpu_free_bytes,
    host_available_bytes,
)
from ._sparse import (
    SparseLogMarginalLikelihood,
    dense_density_threshold,
    pattern_density,
    sparse_predict,
    sparse_unsupported_reason,
    support_radius,
)

from . import _dense, _sparse
from ._dense import _LogMarginalLikelihood, _cholesky_flops, _lml_from, _predict

_Self = TypeVar("_Self", bound="GaussianProcessRegressor")

logger = logging.getLogger("skgpu")


@contextlib.contextmanager
def _explain_not_positive_definite(kernel):
    """scikit-learn's message (and advice) on a kernel matrix that does not factor."""
    from numpy.linalg import LinAlgError

    try:
        yield
    except LinAlgError as exc:
        exc.args = (
            f"The kernel, {kernel}, is not returning a positive definite matrix. Try "
            "gradually increasing the 'alpha' parameter of your "
            "GaussianProcessRegressor estimator.",
        ) + exc.args
        raise


#: _FitResult.L of a GPU fit: the factor stays on the device until L_ is first read.
ON_DEVICE = object()


def _factor_stays_on(ops):
    """Whether a fit on ``ops`` leaves its factor there, ``L_`` copied on first read (the
    GPU: a host copy of n² · 8 bytes); a seam the tests use to run that path anywhere."""
    return ops.defers_host_copies


#: Bytes of the cross-covariance K(X, X_train_) up to which a predict on host float64
#: data on the CPU is scikit-learn's own (a small call: its temporaries, a few times this,
#: stay far below what the panelled predict bounds at large n).
_REFERENCE_PREDICT_BYTES = 1 << 23


def _reference_predict(gp, X, return_cov):
    """Whether scikit-learn's own predict computes at X what ours does: a float64 NumPy
    query on a dense float64 fit, small enough (above). (Our compact kernels evaluate
    float32 input in float32 under scikit-learn's predict, where ours promotes it.)"""
    if (getattr(gp, "cholesky_", None) != "dense" or not isinstance(X, np.ndarray)
            or X.dtype != np.float64 or X.ndim != 2
            or getattr(gp.X_train_, "dtype", None) != np.float64):
        return False
    m, n = X.shape[0], gp.X_train_.shape[0]
    return 8 * m * max(n, m if return_cov else 0) <= _REFERENCE_PREDICT_BYTES


def _in_y_units(mean, extra, y_mean, y_std, return_std, return_cov):
    """``(mean, std or cov or None)`` of a prediction made in normalised units, in y's
    units and shapes as scikit-learn's (a negative variance warned about and set to 0)."""
    std2 = y_std**2
    mean = y_std * mean + y_mean
    if mean.ndim > 1 and mean.shape[1] == 1:
        mean = np.squeeze(mean, axis=1)
    if return_cov:
        scale = np.ravel(std2)
        if scale.size == 1:  # one target: the (m, m) prediction scaled in place (it is
            # the prediction's own array; scikit-learn's outer product is a second
            # copy, 0.26 s of a 0.83 s call at m = 10,000)
            if scale[0] != 1.0:
                extra *= scale[0]
            return mean, extra
        cov = np.outer(extra, std2).reshape(*extra.shape, -1)
        return mean, cov
    if not return_std:
        return mean, None
    var = extra
    negative = var < 0
    if np.any(negative):
        warnings.warn("Predicted variances smaller than 0. Setting those variances to 0.",
                      stacklevel=3)
        var[negative] = 0.0
    var = np.outer(var, std2).reshape(*var.shape, -1)
    if var.shape[1] == 1:
        var = np.squeeze(var, axis=1)
    return mean, np.sqrt(var)


class _FittedState(NamedTuple):
    """What predict needs of a fit, on one backend (cached on the estimator)."""

    path: str  # "dense" or "sparse"
    backend: str  # the name of the backend the arrays are on
    X: Any  # dense: the training inputs on the backend; sparse: None
    lower: Any  # dense: the Cholesky factor (its lower triangle); sparse: None
    lml: Any  # sparse: the likelihood object holding the sparse factor; dense: None
    alpha: Any  # the weights K⁻¹y on the backend


@dataclass
class _FitResult:
    kernel: object
    lml_value: float
    L: Any  # ndarray; None on the sparse path; ON_DEVICE: L_ fetched when first read
    alpha: np.ndarray
    device_state: _FittedState
    n_evaluations: int = 0


class GaussianProcessRegressor(SklearnConversionMixin["_SkGPR"], RegressorScoreMixin,
                               _SkGPR):
    """Gaussian process regression on the GPU, a drop-in for scikit-learn's.

    Same parameters, attributes and results as
    :class:`sklearn.gaussian_process.GaussianProcessRegressor`, with scikit-learn's own
    kernel objects. The log marginal likelihood (LML), its gradient, the final
    factorisation and predictions run on the backend chosen by
    :func:`skgpu.config_context` (``device``), in float64:

    - K and each ∂K/∂θ are evaluated on the device for RBF (isotropic and ARD), Matern
      (nu 0.5, 1.5, 2.5, inf), RationalQuadratic, ExpSineSquared, DotProduct,
      WhiteKernel, ConstantKernel and their sums, products and exponentiations; any
      other kernel is evaluated by scikit-learn on the host and moved (logged).
    - potrf, then potrs for ``α = K⁻¹y``; the gradient's trace term uses potri in place
      and contracts each ∂K/∂θ_j as it is produced — no n × n × n_params tensor
      (scikit-learn builds one: 32 GB at n = 20,000 with 10 parameters).
    - The optimizer is SciPy's L-BFGS-B on the host driving the device objective, with
      scikit-learn's restarts and random draws, so the same data give the same optimum.
    - predict works in blocks of test points, so memory stays bounded for any number.

    Parameters
    ----------
    kernel : kernel instance, default=None
        A scikit-learn kernel; None means ``ConstantKernel(1.0) * RBF(1.0)``.
    alpha : float or ndarray of shape (n_samples,), default=1e-10
        Value added to the diagonal of the kernel matrix during fitting.
    optimizer : 'fmin_l_bfgs_b', callable or None, default='fmin_l_bfgs_b'
        Optimizer of the kernel's hyperparameters (None keeps them fixed).
    n_restarts_optimizer : int, default=0
        Restarts from thetas drawn log-uniformly within the bounds.
    normalize_y : bool, default=False
        Normalise the targets to zero mean and unit variance.
    copy_X_train : bool, default=True
        Store a copy of the training data.
    n_targets : int, default=None
        Number of targets, used by ``sample_y`` before fitting.
    random_state : int, RandomState instance or None, default=None
        Draws of the optimizer's restarts, as scikit-learn's: an int gives the same
        restarts on every fit; a RandomState instance is drawn from and advanced by the
        same draws (also by a fit that fails); None uses NumPy's global generator.
    cholesky : {'auto', 'dense', 'sparse'}, default='auto'
        'auto' takes the sparse path for compactly supported kernels (see below)
        unless their covariance matrix is dense enough for the dense factorisation to
        be faster (more than ``min(0.25, c/√n)`` of its entries non-zero at the initial
        hyperparameters, c = 7 for one or two features and 4 for more, the density
        estimated from a sample of pairs; the choice is logged with the density), and
        the dense one otherwise; 'sparse' raises if the kernel is not
        compactly supported.
    verbose : int, default=0
        Progress of the fit, from 1: every likelihood evaluation (its count, the
        log-marginal-likelihood, the gradient's norm, the time since the optimizer
        started), each optimizer run (the initial theta and every restart: its
        log-marginal-likelihood, evaluations and time) and the end of the fit, on the
        dense and sparse paths alike. Reported on the ``"skgpu"`` logger at INFO; while
        ``verbose > 0`` and nothing would show INFO records, they are written to
        standard error for the duration of the fit.

    Attributes
    ----------
    X_train_ : ndarray of shape (n_samples, n_features)
        Training data (a copy unless ``copy_X_train=False``).
    y_train_ : ndarray of shape (n_samples,) or (n_samples, n_targets)
        Training targets (normalised when ``normalize_y=True``).
    kernel_ : kernel instance
        The kernel with the optimised hyperparameters.
    L_ : ndarray of shape (n_samples, n_samples) or None
        Lower-triangular Cholesky factor of ``K(X_train_) + alpha·I``; None on the
        sparse path, where the factor lives in the sparse solver (cuDSS, CHOLMOD or skgpu's),
        is dropped on pickling and rebuilt on demand. After a GPU fit the factor stays on
        the GPU (predict uses it there) and ``L_`` is copied to the host when first read
        (or pickled, or converted by ``as_sklearn``): the copy of n² · 8 bytes cost more
        than the fit itself at n = 50,000.
    alpha_ : ndarray of shape (n_samples,) or (n_samples, n_targets)
        ``(K + alpha·I)⁻¹ y_train_``.
    log_marginal_likelihood_value_ : float
        Log marginal likelihood of ``kernel_.theta``.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (n_features,)
        Defined only when X has string feature names.
    backend_ : {'gpu', 'cpu'}
        Where the last fit ran.
    cholesky_ : {'dense', 'sparse'}
        The path the last fit took.

    See Also
    --------
    skgpu.gaussian_process.kernels.Tapered : A kernel made compactly supported, for
        the sparse path.
    skgpu.gaussian_process.kernels.Wendland : A compactly supported kernel.
    sklearn.gaussian_process.GaussianProcessRegressor : The scikit-learn estimator
        this one stands for.

    Notes
    -----
    The sparse path: with a kernel that is zero beyond a distance R — a
    :class:`~skgpu.gaussian_process.kernels.Wendland` kernel or a
    :class:`~skgpu.gaussian_process.kernels.Tapered` one, times ConstantKernels, plus a
    WhiteKernel — only pairs closer than R enter K. They are found by a k-d tree, the
    kernel is evaluated on them, and K is factored by a sparse Cholesky (cuDSS on the
    GPU below 200,000 points, skgpu's supernodal factor from there; on the CPU CHOLMOD
    with the ``sparse`` extra, else skgpu's supernodal factor); each optimizer step
    refactorises on the same pattern, which is rebuilt only when the support radius
    outgrows it. With CHOLMOD and skgpu's factor the LML gradient is exact: K⁻¹ on the
    pattern comes from the factor by selected inversion, one factorisation per
    evaluation. With cuDSS it is exact in its quadratic term and differenced
    in its trace, ~1e-7 relative at worst: the trace of a scale or a noise level
    (``∂K = a K + b I``) needs one shared difference of ``logdet(K + tI)``; any other
    hyperparameter takes two refactorisations. No dense n × n matrix is formed;
    ``return_cov`` and ``sample_y`` are limited to 10,000 query points.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.gaussian_process.kernels import RBF, WhiteKernel
    >>> from skgpu.gaussian_process import GaussianProcessRegressor
    >>> X = np.linspace(0, 5, 30)[:, None]
    >>> y = np.sin(X).ravel() + 0.1 * np.random.default_rng(0).standard_normal(30)
    >>> gpr = GaussianProcessRegressor(RBF() + WhiteKernel(1e-2), random_state=0).fit(X, y)
    >>> mean, std = gpr.predict(np.array([[2.5]]), return_std=True)
    >>> print(np.round(mean, 3), np.round(std, 3))
    [0.517] [0.076]
    """

    _skgpu_attributes = ("backend_", "_device_cache", "cholesky_", "_fit_alpha",
                         "_n_lml_evaluations", "_pending_L")

    _parameter_constraints: dict = {
        **_SkGPR._parameter_constraints,
        "cholesky": [StrOptions({"auto", "dense", "sparse"})],
        "verbose": ["verbose"],
    }

    def __init__(self, kernel: Any = None, *, alpha: float | ArrayLike = 1e-10,
                 optimizer: Literal["fmin_l_bfgs_b"] | Callable[..., Any] | None = (
                     "fmin_l_bfgs_b"),
                 n_restarts_optimizer: int = 0, normalize_y: bool = False,
                 copy_X_train: bool = True, n_targets: int | None = None,
                 random_state: RandomStateLike = None,
                 cholesky: Literal["auto", "dense", "sparse"] = "auto",
                 verbose: int = 0) -> None:
        super().__init__(kernel=kernel, alpha=alpha, optimizer=optimizer,
                         n_restarts_optimizer=n_restarts_optimizer,
                         normalize_y=normalize_y, copy_X_train=copy_X_train,
                         n_targets=n_targets, random_state=random_state)
        self.cholesky = cholesky
        self.verbose = verbose

    def _validate(self, X, spec, y="no_validation", reset=True):
        """X (and y) validated as scikit-learn's GP does; ``spec``: X's container."""
        kernel = self.kernel if self.kernel is not None else C() * RBF()
        vector = kernel.requires_vector_input
        predict = isinstance(y, str) and y == "no_validation"
        if not vector:
            X = to_numpy(X) if spec.on_device else X
            from sklearn.utils.validation import validate_data as sk_validate

            kwargs = dict(ensure_2d=False, dtype=None, reset=reset)
            if predict:
                return sk_validate(self, X, **kwargs)
            return sk_validate(self, X, y, multi_output=True, y_numeric=True, **kwargs)
        # scikit-learn validates with dtype='numeric' here: text is refused, not parsed
        if predict:
            return validate_data(self, X, spec=spec, reset=reset,
                                 dtype=("float64", "float32"), reject_strings=True)
        return validate_data(self, X, y, spec=spec, reset=reset,
                             dtype=("float64", "float32"), multi_output=True,
                             y_numeric=True, reject_strings=True)

    @fit_context(prefer_skip_nested_validation=True)
    @atomic_fit
    def fit(self: _Self, X: MatrixLike, y: ArrayLike) -> _Self:
        """Fit Gaussian process regression model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or list of object
            Training data: NumPy, pandas, CuPy or torch (objects for kernels on
            structures, evaluated by scikit-learn on the host).
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Target values.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        with progress_logging(self.verbose):
            return self._fit(X, y)

    def _fit(self, X, y):
        start = time.perf_counter()
        kernel = C() * RBF() if self.kernel is None else clone(self.kernel)
        rng = check_random_state(self.random_state)
        spec = container_of(X)
        X, y = self._validate(X, spec, y)
        X, y = to_numpy(X), to_numpy(y)
        if kernel.requires_vector_input:
            check_compact_kernels(kernel, X.shape[1])
        y, y_mean, y_std, alpha = self._checked_targets(y)
        X_train = np.copy(X) if self.copy_X_train else X
        y_train = np.copy(y) if self.copy_X_train else y
        vector = kernel.requires_vector_input
        sparse = self._use_sparse(kernel, X)
        why = None if sparse else (
            unsupported_reason(kernel) if vector else "the kernel works on structures")
        if why:
            logger.info("GaussianProcessRegressor.fit: %s", why)

        def work(ops):
            if not vector:
                from ..backends import get_backend

                ops = get_backend("cpu")
            if not sparse:
                self._check_memory("GaussianProcessRegressor.fit", ops, kernel, X_train,
                                   y_train, alpha, gradient=self.optimizer is not None)
            fit_kernel = kernel.clone_with_theta(kernel.theta)
            # each attempt (a CPU rerun after a GPU out-of-memory) draws the same restarts,
            # from a copy: the caller's generator takes the state the last attempt left
            attempt_rng = attempts[0] = copy.deepcopy(start_state)
            if sparse:
                return self._fit_sparse_on(ops, fit_kernel, X_train, y_train, alpha,
                                           attempt_rng)
            return self._fit_on(ops, fit_kernel, X_train, y_train, alpha, attempt_rng)

        # scikit-learn draws the restarts from the generator random_state gives (the
        # caller's own RandomState instance is advanced by them), also when a restart
        # fails: so is the caller's here, by the attempt that ran last
        start_state = copy.deepcopy(rng)
        attempts = [start_state]
        try:
            result, backend = run_with_fallback(
                work, device=None if vector else "cpu",
                operations=_sparse.OPERATIONS if sparse else ("cholesky", "matmul"),
                X=spec,
                what=f"GaussianProcessRegressor.fit ({'sparse' if sparse else 'dense'})",
                flops=None if sparse else _cholesky_flops(X_train.shape[0]))
        finally:
            rng.set_state(attempts[0].get_state())
        self._rng = rng
        self._y_train_mean, self._y_train_std = y_mean, y_std
        self.X_train_, self.y_train_ = X_train, y_train
        self._fit_alpha = alpha
        self.backend_ = backend.name
        self.cholesky_ = "sparse" if sparse else "dense"
        self._set_fit_result(result)
        if self.verbose > 0:
            logger.info("GaussianProcessRegressor.fit: done on %s (%s path), %d "
                        "evaluations, %.2f s", backend.name, self.cholesky_,
                        result.n_evaluations, time.perf_counter() - start)
        return self

    def _checked_targets(self, y):
        """``(y, y_mean, y_std, alpha)``: y normalised as asked, its statistics, and alpha
        checked against it (scikit-learn's checks and messages)."""
        n_targets_seen = y.shape[1] if y.ndim > 1 else 1
        if self.n_targets is not None and n_targets_seen != self.n_targets:
            raise ValueError(
                "The number of targets seen in `y` is different from the parameter "
                f"`n_targets`. Got {n_targets_seen} != {self.n_targets}."
            )
        if self.normalize_y:
            y_mean = np.mean(y, axis=0)
            y_std = _handle_zeros_in_scale(np.std(y, axis=0), copy=False)
            y = (y - y_mean) / y_std
        else:
            shape = (y.shape[1],) if y.ndim == 2 else 1
            y_mean, y_std = np.zeros(shape=shape), np.ones(shape=shape)
        alpha = self.alpha
        if np.iterable(alpha) and np.shape(alpha)[0] != y.shape[0]:
            if np.shape(alpha)[0] == 1:
                alpha = np.asarray(alpha)[0]
            else:
                raise ValueError(
                    "alpha must be a scalar or an array with same number of "
                    f"entries as y. ({np.shape(alpha)[0]} != {y.shape[0]})"
                )
        return y, y_mean, y_std, alpha

    def _set_fit_result(self, result):
        """The fitted kernel, likelihood, factor and weights from a fit's result (the
        training data and the path already set), and the device state recorded last, as
        made from every attribute set before it."""
        self.kernel_ = result.kernel
        # (a NumPy float64, as scikit-learn's)
        self.log_marginal_likelihood_value_ = np.float64(result.lml_value)
        if result.L is ON_DEVICE:  # a GPU fit: L_ comes to the host when first read
            self.__dict__.pop("L_", None)
            self._pending_L = True
        else:
            self.L_ = result.L
            self.__dict__.pop("_pending_L", None)
        self.alpha_ = result.alpha.reshape(self.y_train_.shape)
        self._n_lml_evaluations = result.n_evaluations
        self._device_cache = {}
        if self.__dict__.get("L_") is not None:  # replaced, never edited in place
            self.L_.flags.writeable = False
        store(self, "state", self._state_sources(), result.device_state)

    @staticmethod
    def _check_memory(what, ops, kernel, X, y, alpha, gradient):
        """Refuse, with the numbers, a dense evaluation the memory of ``ops``' device
        (the host's, or the GPU's) cannot hold (:mod:`._memory`); the probe runs on a
        subsample, on the CPU."""
        from ..backends import get_backend

        n = len(X)
        cpu = get_backend("cpu")

        def make_lml(index):
            sub_alpha = alpha if np.ndim(alpha) == 0 else np.asarray(alpha)[index]
            Xs = X[index] if hasattr(X, "shape") else [X[i] for i in index]
            lml = _LogMarginalLikelihood(cpu, Xs, np.asarray(y)[index], sub_alpha)
            # panels in the same proportion as at n points: the probe's peak in n² then
            # scales to n's
            lml.panel_rows = max(1, int(np.ceil(len(index) * _dense.panel_rows(n, ops)
                                                / n)))
            return lml

        n_features = X.shape[1] if getattr(X, "ndim", 1) == 2 else 1
        n_targets = y.shape[1] if np.ndim(y) == 2 else 1
        check = check_gpu_memory if ops.memory == "device" else check_host_memory
        check(what, make_lml, kernel, n, gradient, n_features, n_targets)

    def _use_sparse(self, kernel, X):
        """Whether the fit takes the sparse path (``cholesky`` resolved)."""
        if self.cholesky == "dense":
            return False
        why = (sparse_unsupported_reason(kernel) if kernel.requires_vector_input
               else "the kernel works on structures, not feature vectors")
        kernel_fits = why is None
        if kernel_fits and X.size:
            # the sparse path's neighbour search and pair values use unscaled squared
            # distances; the dense path scales X first
            span = float(np.max(X)) - float(np.min(X))
            if not np.isfinite(span * span * X.shape[1]):
                why = (f"the squared distances of X overflow float64 (coordinates span "
                       f"{span:.3g}); rescale X")
        if self.cholesky == "sparse" and why is not None:
            raise ValueError(f"cholesky='sparse' is not possible: {why}.")
        if why is not None and kernel_fits:
            logger.info("GaussianProcessRegressor.fit: dense path: %s", why)
        if why is not None or self.cholesky == "sparse":
            return why is None
        return self._sparse_by_density(kernel, X)

    @staticmethod
    def _sparse_by_density(kernel, X):
        """``cholesky='auto'`` with a compactly supported kernel: the sparse path unless
        K's pattern (at the initial hyperparameters) is dense enough for the dense
        factorisation to be faster and the dense matrix fits in memory; logged."""
        n = X.shape[0]
        density = pattern_density(X, support_radius(kernel))
        limit = dense_density_threshold(n, X.shape[1])
        if density <= limit:
            logger.info("GaussianProcessRegressor.fit: sparse path: K is %.3g%% non-zero "
                        "(the dense path above %.3g%%)", 100 * density, 100 * limit)
            return True
        needed = 3 * 8 * n * n  # K, its factor and a work matrix, in float64
        room = max(host_available_bytes() or 0, gpu_free_bytes() or 0)
        if needed > room:
            logger.info("GaussianProcessRegressor.fit: sparse path: K is %.3g%% non-zero, "
                        "but a dense K (%.3g GB) does not fit in memory",
                        100 * density, needed / 1e9)
            return True
        logger.info("GaussianProcessRegressor.fit: dense path: K is %.3g%% non-zero "
                    "(the sparse factorisation is slower above %.3g%%; cholesky='sparse' "
                    "forces it)", 100 * density, 100 * limit)
        return False

    def _optimize(self, lml, kernel, rng):
        """scikit-learn's optimizer loop on the objective ``lml``; returns the LML value
        at the optimum and leaves ``kernel`` there."""
        if self.optimizer is not None and kernel.n_dims > 0:
            began = time.perf_counter()

            def obj_func(theta, eval_gradient=True):
                kernel.theta = theta
                grad = None
                if eval_gradient:
                    value, grad = lml(kernel, eval_gradient=True)
                    out = -value, -grad
                else:
                    value = lml(kernel)
                    out = -value
                if self.verbose > 0:  # a long fit shows that it is moving, and where
                    logger.info(
                        "GaussianProcessRegressor.fit: evaluation %d, "
                        "log-marginal-likelihood %.8g, gradient norm %s, %.2f s",
                        lml.n_evaluations, value,
                        "-" if grad is None else f"{float(np.linalg.norm(grad)):.3g}",
                        time.perf_counter() - began)
                return out

            runs = 1 + self.n_restarts_optimizer

            def run(index, theta_initial, bounds):
                start, before = time.perf_counter(), lml.n_evaluations
                optimum = self._constrained_optimization(obj_func, theta_initial, bounds)
                if self.verbose > 0:
                    logger.info(
                        "GaussianProcessRegressor.fit: optimizer run %d of %d (%s): "
                        "log-marginal-likelihood %.8g after %d evaluations, %.2f s",
                        index, runs, "initial theta" if index == 1 else "random start",
                        -optimum[1], lml.n_evaluations - before, time.perf_counter() - start)
                return optimum

            optima = [run(1, kernel.theta, kernel.bounds)]
            if self.n_restarts_optimizer > 0:
                if not np.isfinite(kernel.bounds).all():
                    raise ValueError(
                        "Multiple optimizer restarts (n_restarts_optimizer>0) "
                        "requires that all bounds are finite."
                    )
                bounds = kernel.bounds
                for index in range(2, runs + 1):
                    theta_initial = rng.uniform(bounds[:, 0], bounds[:, 1])
                    optima.append(run(index, theta_initial, bounds))
            values = [opt[1] for opt in optima]
            kernel.theta = optima[int(np.argmin(values))][0]
            kernel._check_bounds_params()
            return -float(np.min(values))
        return lml(kernel)

    def _fit_sparse_on(self, ops, kernel, X, y, alpha, rng):
        """The sparse-path fit on ``ops``: pattern, refactorisations, final factor (the
        LML without an optimizer from that factor, as on the dense path)."""
        lml = SparseLogMarginalLikelihood(ops, X, y, alpha)
        lml_value = self._optimize(lml, kernel, rng) if self._optimizes(kernel) else None
        logger.debug("GaussianProcessRegressor.fit (sparse): %d LML evaluations, %d "
                     "factorisations on %s", lml.n_evaluations, lml.n_factorizations,
                     ops.name)
        lml._ensure_pattern(support_radius(kernel), kernel)
        held = lml.factor_at(kernel)  # the optimizer's last step at its optimum: kept
        if held is not None:
            factor, alpha_dev = held
        else:
            with _explain_not_positive_definite(kernel):
                factor = lml.factorize(kernel)
            alpha_dev = lml.solve_y(factor)
        if lml_value is None:
            lml.n_evaluations += 1
            lml_value = _lml_from(ops, lml.y, alpha_dev, factor.logdet())
        state = _FittedState("sparse", ops.name, None, None, lml, alpha_dev)
        return _FitResult(kernel=kernel, lml_value=lml_value, L=None,
                          alpha=ops.to_host(alpha_dev), device_state=state,
                          n_evaluations=lml.n_evaluations)

    def _optimizes(self, kernel):
        return self.optimizer is not None and kernel.n_dims > 0

    def _fit_on(self, ops, kernel, X, y, alpha, rng):
        """The whole fit on ``ops``; touches nothing on ``self`` but the optimizer.

        Without an optimizer the LML at the given theta comes from the fit's own
        factorisation: one kernel matrix and one Cholesky in all (it was two, the fit
        taking twice a likelihood evaluation)."""
        lml = _LogMarginalLikelihood(ops, X, y, alpha)
        lml_value = self._optimize(lml, kernel, rng) if self._optimizes(kernel) else None
        logger.debug("GaussianProcessRegressor.fit: %d LML evaluations on %s",
                     lml.n_evaluations, ops.name)
        Km, _ = lml.kernel_matrix(kernel)
        with _explain_not_positive_definite(kernel):
            factor = ops.cholesky(Km, what="kernel matrix", overwrite=True)
        del Km
        alpha_dev = factor.solve(lml.y)
        if lml_value is None:
            lml.n_evaluations += 1
            lml_value = _lml_from(ops, lml.y, alpha_dev, factor.logdet())
        # L_: the strict upper triangle zeroed where the factor is (only its lower one is
        # ever read). A GPU fit keeps it there; the host copy (n² · 8 bytes into fresh
        # host pages: the n = 50,000 fit took 8.2 s with it, 1.1 s without) is made when
        # L_ is first read (pickling, as_sklearn, or the user): see __getattr__.
        lower = tril_in_place(factor.lower, ops.xp)
        L = ON_DEVICE if _factor_stays_on(ops) else lower
        state = _FittedState("dense", ops.name, lml.X, factor.lower, None, alpha_dev)
        return _FitResult(kernel=kernel, lml_value=lml_value, L=L,
                          alpha=ops.to_host(alpha_dev), device_state=state,
                          n_evaluations=lml.n_evaluations)

    def _state_on(self, ops):
        """The :class:`_FittedState` on ``ops``, cached after the fit (rebuilt after
        unpickling, or on the other backend)."""
        def make():
            alpha = ops.asarray(self.alpha_.reshape(self.alpha_.shape[0], -1))
            if getattr(self, "cholesky_", "dense") == "sparse":
                lml = SparseLogMarginalLikelihood(ops, self.X_train_, self.y_train_,
                                                  getattr(self, "_fit_alpha", self.alpha))
                lml._ensure_pattern(support_radius(self.kernel_), self.kernel_)
                lml.factorize(self.kernel_)
                state = _FittedState("sparse", ops.name, None, None, lml, alpha)
            else:
                state = _FittedState(
                    "dense", ops.name,
                    ops.asarray(np.asarray(self.X_train_, dtype=np.float64)),
                    ops.asarray(np.asfortranarray(self.L_)), None, alpha)
            return state

        state = cached(self, "state", self._state_sources(), make)
        if state.backend != ops.name:  # made on the other backend
            state = make()
            store(self, "state", self._state_sources(), state)
        return state

    def _state_sources(self):
        """What the cached fitted state copies: compared on each use (the n × n factor by
        identity: it is read-only once on the host, so it is replaced, never edited)."""
        d = self.__dict__
        L = "pending" if d.get("_pending_L") else Identity(d.get("L_"))
        return (self.X_train_, self.y_train_, self.alpha_, L, self.kernel_,
                d.get("_fit_alpha", self.alpha), d.get("cholesky_", "dense"))

    def log_marginal_likelihood(
            self, theta: ArrayLike | None = None, eval_gradient: bool = False,
            clone_kernel: bool = True) -> float | tuple[float, np.ndarray]:
        """Log marginal likelihood of theta for the training data (and its gradient).

        Parameters
        ----------
        theta : array-like of shape (n_kernel_params,), default=None
            Log-transformed hyperparameters; None returns the value at the optimum.
        eval_gradient : bool, default=False
            Also return the gradient with respect to theta.
        clone_kernel : bool, default=True
            Evaluate on a copy of ``kernel_`` (otherwise its theta is set).

        Returns
        -------
        log_likelihood : float
            Log-marginal likelihood of theta for the training data.
        log_likelihood_gradient : ndarray of shape (n_kernel_params,)
            Its gradient with respect to the kernel's hyperparameters at theta; only
            with ``eval_gradient=True``.
        """
        if theta is None:
            if eval_gradient:
                raise ValueError("Gradient can only be evaluated for theta!=None")
            return self.log_marginal_likelihood_value_
        if clone_kernel:
            kernel = self.kernel_.clone_with_theta(theta)
        else:
            kernel = self.kernel_
            kernel.theta = theta
        alpha = getattr(self, "_fit_alpha", self.alpha)
        vector = kernel.requires_vector_input

        sparse = getattr(self, "cholesky_", "dense") == "sparse"

        def work(ops):
            if not vector:
                from ..backends import get_backend

                ops = get_backend("cpu")
            if sparse:
                # kept between calls: its pattern and the solver's analysis are reused
                lml = cached(self, ("lml", ops.name),
                             (self.X_train_, self.y_train_, alpha),
                             lambda: SparseLogMarginalLikelihood(ops, self.X_train_,
                                                                 self.y_train_, alpha))
                return lml(kernel, eval_gradient)
            self._check_memory("GaussianProcessRegressor.log_marginal_likelihood", ops,
                               kernel, self.X_train_, self.y_train_, alpha,
                               gradient=eval_gradient)
            X = self._state_on(ops).X if vector else self.X_train_
            return _LogMarginalLikelihood(ops, X, self.y_train_, alpha)(kernel, eval_gradient)

        out, _ = run_with_fallback(
            work, cpu_because=None if vector else (
                "a kernel on non-vector input (requires_vector_input False) is "
                "evaluated on the host"),
            operations=_sparse.OPERATIONS if sparse else ("cholesky", "matmul"),
            what="GaussianProcessRegressor.log_marginal_likelihood",
            flops=None if sparse else _cholesky_flops(self.X_train_.shape[0]))
        return out

    @overload
    def predict(self, X: MatrixLike, return_std: Literal[False] = False,
                return_cov: Literal[False] = False) -> MatrixLike: ...

    @overload
    def predict(self, X: MatrixLike, return_std: Literal[True],
                return_cov: Literal[False] = False) -> tuple[MatrixLike, MatrixLike]: ...

    @overload
    def predict(self, X: MatrixLike, return_std: Literal[False] = False, *,
                return_cov: Literal[True]) -> tuple[MatrixLike, MatrixLike]: ...

    @overload
    def predict(self, X: MatrixLike, return_std: bool = False, return_cov: bool = False
                ) -> MatrixLike | tuple[MatrixLike, MatrixLike]: ...

    def predict(self, X: MatrixLike, return_std: bool = False, return_cov: bool = False
                ) -> MatrixLike | tuple[MatrixLike, MatrixLike]:
        """Predict using the Gaussian process regression model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or list of object
            Query points: NumPy, pandas, CuPy or torch.
        return_std : bool, default=False
            Also return the standard deviation of the predictive distribution.
        return_cov : bool, default=False
            Also return the covariance of the joint predictive distribution.

        Returns
        -------
        y_mean : array of shape (n_samples,) or (n_samples, n_targets)
            Mean of the predictive distribution at X, in the container of ``X``.
        y_std : array of shape (n_samples,) or (n_samples, n_targets), optional
            Standard deviation of the predictive distribution at X (with
            ``return_std=True``).
        y_cov : array of shape (n_samples, n_samples) or \
(n_samples, n_samples, n_targets), optional
            Covariance of the joint predictive distribution at X (with
            ``return_cov=True``).
        """
        spec = container_of(X)
        if _reference_predict(self, X, return_cov):
            # a small call on host data on the CPU: scikit-learn's own predict, on L_
            out: Any = run_reference_on_host(
                lambda: super(GaussianProcessRegressor, self).predict(
                    X, return_std=return_std, return_cov=return_cov),
                spec=spec, operations=("cholesky", "solve_triangular", "matmul"),
                what="GaussianProcessRegressor.predict",
                # the kernel's entries (the mean), times n for the variance's solves
                elements=X.shape[0] * self.X_train_.shape[0] * (
                    self.X_train_.shape[0] if return_std or return_cov else 1))
            if out is not NOT_RUN:
                return out
        if return_std and return_cov:
            raise RuntimeError("At most one of return_std or return_cov can be requested.")
        kernel = self.kernel_ if hasattr(self, "kernel_") else self.kernel
        if (not hasattr(self, "X_train_") or kernel is None
                or not kernel.requires_vector_input):
            return super().predict(to_numpy(X) if spec.on_device else X,
                                   return_std=return_std, return_cov=return_cov)
        X = self._validate(X, spec, reset=False)
        kdiag = self.kernel_.diag(to_numpy(X)) if return_std else None

        sparse = getattr(self, "cholesky_", "dense") == "sparse"

        def work(ops):
            state = self._state_on(ops)
            if state.path == "sparse":
                return sparse_predict(ops, self.kernel_, state.lml, X, state.alpha,
                                      kdiag=kdiag, return_std=return_std,
                                      return_cov=return_cov,
                                      block_bytes=_dense._PREDICT_BLOCK_BYTES)
            return _predict(ops, self.kernel_, X, state.X, state.lower, state.alpha,
                            kdiag=kdiag, return_std=return_std, return_cov=return_cov)

        operations = (_sparse.OPERATIONS if sparse
                      else ("cholesky", "solve_triangular", "matmul"))
        out, _ = run_with_fallback(work, operations=operations, X=spec,
                                   what="GaussianProcessRegressor.predict",
                                   flops=None if sparse else 2.0 * X.shape[0]
                                   * self.X_train_.shape[0] ** 2)
        mean, extra = out
        mean, extra = _in_y_units(mean, extra, self._y_train_mean, self._y_train_std,
                                  return_std, return_cov)
        if extra is None:
            return convert_output(mean, spec)
        return convert_output(mean, spec), convert_output(extra, spec)

    def sample_y(self, X: MatrixLike, n_samples: int = 1,
                 random_state: RandomStateLike = 0) -> MatrixLike:
        """Draw samples from the Gaussian process and evaluate them at X.

        Drawn on the host, with scikit-learn's random draws; returned in the container
        of ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples_X, n_features) or list of object
            Query points where the process is evaluated.
        n_samples : int, default=1
            Number of samples drawn from the process per query point.
        random_state : int, RandomState instance or None, default=0
            Seed of the draws (see scikit-learn's Glossary).

        Returns
        -------
        y_samples : ndarray of shape (n_samples_X, n_samples) or \
(n_samples_X, n_targets, n_samples)
            Values of n_samples draws of the process at the query points.
        """
        spec = container_of(X)
        out = super().sample_y(to_numpy(X) if spec.on_device else X,
                               n_samples=n_samples, random_state=random_state)
        return convert_output(out, spec)

    def __getattr__(self, name):
        # Only reached where normal lookup fails: L_ of a GPU fit, copied to the host on
        # first use (F.T is C-contiguous: one direct copy, no reordering on the device).
        d = self.__dict__
        if name == "L_" and d.get("_pending_L"):
            entry = d.get("_device_cache", {}).get("state")  # (sources, state)
            state = None if entry is None else entry[1]
            if state is not None and state.path == "dense":
                from ..backends import get_backend

                L = get_backend(state.backend).to_host(state.lower.T).T
                L.flags.writeable = False  # replaced, never edited (see _state_sources)
                d["L_"] = L
                del d["_pending_L"]
                store(self, "state", self._state_sources(), state)
                return L
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def as_sklearn(self) -> _SkGPR:
        """Return this fitted estimator as an instance of scikit-learn's own class.

        The same parameters and fitted attributes (arrays shared; a GPU fit's ``L_``
        copied to the host first), predicting with scikit-learn's code.

        Returns
        -------
        estimator : sklearn.gaussian_process.GaussianProcessRegressor
            The fitted scikit-learn estimator.
        """
        getattr(self, "L_", None)
        return super().as_sklearn()

    def __getstate__(self):
        getattr(self, "L_", None)  # a GPU fit's factor to the host first
        state = super().__getstate__()
        state.pop("_device_cache", None)
        state.pop("_pending_L", None)
        return state
