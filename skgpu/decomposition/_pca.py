"""Principal component analysis on the backend seam."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeVar

import numpy as np
from scipy.sparse.linalg import svds
from sklearn.decomposition import PCA as _SkPCA
from sklearn.utils import check_random_state
from sklearn.utils.extmath import fast_logdet
from sklearn.utils.sparsefuncs import mean_variance_axis
from sklearn.utils.validation import check_is_fitted

from .._config import get_config
from .._typing import MatrixLike, RandomStateLike
from ..backends import NOT_RUN, get_backend, run_reference_on_host, run_with_fallback
from ..backends import select_backend
from ..backends import centre_columns
from ..backends import container_of, convert_output, to_numpy
from ..utils._cache import cached
from ..utils._convert import SklearnConversionMixin
from ..utils._fitting import atomic_fit, fit_context
from ..utils._sklearn_private import (
    _implicit_column_offset,
    _infer_dimension,
    _init_arpack_v0,
)
from ..utils.validation import (
    checked_product,
    prepare,
    validate_inverse_input,
)

_Self = TypeVar("_Self", bound="PCA")


#: scikit-learn's own transform, without its set_output wrapper (PCA.transform's wraps
#: the call already).
_sk_transform = getattr(_SkPCA.transform, "__wrapped__", _SkPCA.transform)


@dataclass
class _Decomposition:
    """What a PCA solver returns; all arrays but ``U`` are NumPy.

    ``S``/``Vt``/``explained_variance`` hold every component the solver computed (all of
    them for 'full' and 'covariance_eigh'); ``U`` stays on the backend (None for
    'covariance_eigh', which never forms it).
    """

    mean: np.ndarray
    S: np.ndarray
    Vt: np.ndarray
    explained_variance: np.ndarray
    total_var: float
    U: object = None


def _row_signs(xp, Vt):
    """The signs of scikit-learn's ``svd_flip(U, Vt, u_based_decision=False)``: each row
    of Vt made positive at its largest absolute entry (a zero row keeps its sign), computed
    where Vt lives (``xp``: NumPy, or CuPy for a wide Vt still on the device)."""
    rows = xp.arange(Vt.shape[0])
    signs = xp.sign(Vt[rows, xp.argmax(xp.abs(Vt), axis=1)]).astype(Vt.dtype)
    signs[signs == 0] = 1
    return signs


def _flip_signs(ops, U, Vt):
    """scikit-learn's ``svd_flip(U, Vt, u_based_decision=False)`` with Vt on the host."""
    signs = _row_signs(np, Vt)
    Vt *= signs[:, None]
    if U is not None:
        U = U * ops.asarray(signs, dtype=U.dtype)
    return U, Vt


def _fit_covariance_eigh(ops, inp, estimator, keep=False):
    """Eigendecomposition of the covariance (the backend's ``centred_gram``: the mean
    folded into the Gram matrix, formed again from shifted data where an offset would
    cancel its digits, and a NumPy X streamed to the GPU in chunks).

    An input validated without its NaN/infinity check (``inp.finite`` False) is checked
    here, on the mean: a NaN or infinity anywhere in X reaches it, and scikit-learn's
    error for X is raised before anything is fitted. (The CPU backend checks X first:
    the pass is cheap there, and NumPy would warn on the arithmetic.)

    Returns the decomposition and, with ``keep``, the input with X on ``ops`` (streamed
    there once, for a transform to follow), else None.
    """
    X = inp.data
    n_samples = X.shape[0]
    if ops.finite_check == "input":
        inp.checked_finite(estimator)
    mean, C, *on_backend = ops.centred_gram(X, return_X=keep)
    mean = ops.to_host(mean)
    if not np.all(np.isfinite(mean)):
        inp.checked_finite(estimator)
    C /= n_samples - 1
    moved = inp.on_backend(ops, on_backend[0]) if keep else None
    return _from_covariance(ops, C, mean, n_samples), moved


def _from_covariance(ops, C, mean, n_samples):
    """The decomposition from a covariance matrix (eigh, clipped, signs flipped)."""
    eigenvals, eigenvecs = ops.eigh(C)
    eigenvals = ops.to_host(eigenvals)
    eigenvals[eigenvals < 0.0] = 0.0
    Vt = np.ascontiguousarray(ops.to_host(eigenvecs).T)
    _, Vt = _flip_signs(ops, None, Vt)
    return _Decomposition(
        mean=ops.to_host(mean), S=np.sqrt(eigenvals * (n_samples - 1)), Vt=Vt,
        explained_variance=eigenvals, total_var=float(eigenvals.sum()),
    )


def _from_r_factor(ops, R, mean, n_samples):
    """The decomposition from R with RᵀR = XcᵀXc (a TSQR of the centred chunks): R's
    singular values and right vectors are Xc's, min(n_samples, n_features) of them as
    the 'full' solver gives."""
    _, S, Vt = ops.svd(ops.asarray(R, dtype=np.float64))
    k = min(n_samples, R.shape[1])
    S = ops.to_host(S)[:k]
    Vt = np.ascontiguousarray(ops.to_host(Vt)[:k])
    _, Vt = _flip_signs(ops, None, Vt)
    explained_variance = S**2 / (n_samples - 1)
    return _Decomposition(mean=np.asarray(mean), S=S, Vt=Vt,
                          explained_variance=explained_variance,
                          total_var=float(explained_variance.sum()))


def _fit_full(ops, X):
    """Exact SVD of the centred data (gesvdj on the GPU, gesdd on the CPU)."""
    X = ops.asarray(X)
    n_samples = X.shape[0]
    Xc, mean = centre_columns(ops, X)
    U, S, Vt = ops.svd(Xc)
    S, Vt = ops.to_host(S), ops.to_host(Vt)
    U, Vt = _flip_signs(ops, U, Vt)
    explained_variance = S**2 / (n_samples - 1)
    return _Decomposition(mean=ops.to_host(mean), S=S, Vt=Vt,
                          explained_variance=explained_variance,
                          total_var=float(explained_variance.sum()), U=U)


def _fit_randomized(ops, X, n_components, *, n_oversamples, n_iter, normalizer,
                    random_state):
    """Randomized SVD of the centred data (Halko et al.), scikit-learn's random draws."""
    X = ops.asarray(X)
    n_samples = X.shape[0]
    Xc, mean = centre_columns(ops, X)
    U, S, Vt = ops.randomized_svd(
        Xc, n_components, n_oversamples=n_oversamples, n_iter=n_iter,
        power_iteration_normalizer=normalizer, random_state=random_state,
    )
    total_var = np.float64(float(ops.xp.vdot(Xc, Xc))) / np.float64(n_samples - 1)
    S, Vt = ops.to_host(S), ops.to_host(Vt)
    U, Vt = _flip_signs(ops, U, Vt)
    return _Decomposition(mean=ops.to_host(mean), S=S, Vt=Vt,
                          explained_variance=S**2 / (n_samples - 1),
                          total_var=total_var, U=U)


def _power_of_two(magnitude):
    """The power of two nearest ``magnitude`` (1.0 for zero, NaN or infinity): dividing
    by it is exact."""
    magnitude = float(magnitude)
    if not np.isfinite(magnitude) or magnitude <= 0.0:
        return 1.0
    return float(np.ldexp(1.0, int(np.round(np.log2(magnitude)))))


def _max_abs(X):
    """max |X| of a host array or sparse matrix (0.0 when empty)."""
    values = X.data if hasattr(X, "tocsr") else X
    return float(np.max(np.abs(values), initial=0.0))


def _arpack_svd(A, n_components, *, tol, random_state, scale=1.0):
    """Top singular triplets by ARPACK (scipy.sparse.linalg.svds) on the host, flipped.

    ARPACK sees ``A / scale`` (``scale`` a power of two, so the division is exact) and
    the singular values are scaled back. With entries of 1e-150 unscaled (the
    arithmetic of scikit-learn's call), 17 of 400 random 3-40 × 3-8 matrices got wrong
    singular values and 25 different ones from one call to the next (LAPACK's DLASCL
    refuses the underflowing scale factors inside ARPACK, whose restarts then draw from
    its own random state); scaled by max|A|, none.
    """
    v0 = _init_arpack_v0(min(A.shape), random_state)
    with np.errstate(over="ignore", under="ignore"):
        factor = A.dtype.type(1.0 / scale)  # (a Python float would promote float32)
    if scale != 1.0 and np.isfinite(factor) and factor != 0:
        A = A * factor
    else:
        scale = 1.0
    U, S, Vt = svds(A, k=n_components, tol=tol, v0=v0)
    U, Vt = _flip_signs(get_backend("cpu"), U[:, ::-1], np.ascontiguousarray(Vt[::-1]))
    return U, S[::-1] * scale, Vt


def _fit_arpack(inp, n_components, *, tol, random_state):
    """ARPACK on the host, sparse X centred implicitly (no dense copy)."""
    X = to_numpy(inp.data)
    n_samples = X.shape[0]
    if inp.sparse:
        mean, var = mean_variance_axis(X, axis=0)
        total_var = float(var.sum() * n_samples / (n_samples - 1))
        scale = _power_of_two(max(_max_abs(X), _max_abs(mean)))
        Xc = _implicit_column_offset(X, mean)
    else:
        mean = X.mean(axis=0)
        Xc = X - mean
        total_var = float(np.sum(Xc**2) / (n_samples - 1))
        scale = _power_of_two(_max_abs(Xc))
    U, S, Vt = _arpack_svd(Xc, n_components, tol=tol, random_state=random_state,
                           scale=scale)
    return _Decomposition(mean=np.asarray(mean).ravel(), S=S, Vt=Vt,
                          explained_variance=S**2 / (n_samples - 1),
                          total_var=total_var, U=U)


class PCA(SklearnConversionMixin["_SkPCA"], _SkPCA):
    """Principal component analysis (PCA) on the GPU, a drop-in for scikit-learn's.

    Same parameters, attributes and results as :class:`sklearn.decomposition.PCA`
    (scikit-learn's 'auto' solver rules, ``svd_flip`` sign convention). The linear
    algebra runs on the backend chosen by :func:`skgpu.config_context` (``device``):

    - ``'covariance_eigh'``: one Gram matrix with the mean folded in (no centred copy of
      X; the mean by one GEMV), then a symmetric eigensolve (syevd);
    - ``'full'``: SVD of the centred data (gesvdj on the GPU);
    - ``'randomized'``: power iterations on GEMMs with a CholeskyQR3 orthonormalisation,
      the same random draws as scikit-learn, so the same result up to rounding;
    - ``'arpack'``: runs on the CPU through SciPy (logged), as in scikit-learn.

    Parameters
    ----------
    n_components : int, float, 'mle' or None, default=None
        Number of components to keep; see :class:`sklearn.decomposition.PCA`.
    copy : bool, default=True
        Kept for compatibility; X is never modified.
    whiten : bool, default=False
        Scale the projected data to unit variance.
    svd_solver : {'auto', 'full', 'covariance_eigh', 'arpack', 'randomized'}, default='auto'
        Solver; 'auto' follows scikit-learn's rules.
    tol : float, default=0.0
        Tolerance for 'arpack'.
    iterated_power : int or 'auto', default='auto'
        Power iterations for 'randomized'.
    n_oversamples : int, default=10
        Oversampling for 'randomized'.
    power_iteration_normalizer : {'auto', 'QR', 'LU', 'none'}, default='auto'
        Normalizer of the power iterations for 'randomized' (any choice other than
        'none' gives the same subspace; the GPU uses CholeskyQR3 for all of them).
    random_state : int, RandomState instance or None, default=None
        Seed for 'arpack' and 'randomized': scikit-learn's own draws (a RandomState
        instance is advanced by them as scikit-learn advances it), except that on the
        GPU a test matrix of 2²⁰ entries or more is drawn on the device from a generator
        seeded by one integer drawn from it.

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        Principal axes in feature space, sorted by decreasing explained variance.
    explained_variance_ : ndarray of shape (n_components,)
        Variance explained by each selected component.
    explained_variance_ratio_ : ndarray of shape (n_components,)
        Fraction of the total variance explained by each component.
    singular_values_ : ndarray of shape (n_components,)
        Singular values of the selected components.
    mean_ : ndarray of shape (n_features,)
        Per-feature empirical mean.
    n_components_ : int
        Number of components kept.
    n_samples_ : int
        Number of samples in the training data.
    noise_variance_ : float
        Estimated noise covariance (probabilistic PCA model).
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (n_features,)
        Defined only when X has string feature names.
    backend_ : {'gpu', 'cpu', 'dask'}
        Where the last fit ran ('dask': on the workers of a dask array's scheduler).
    solver_ : str
        The solver the last fit used ('auto' resolved).

    See Also
    --------
    TruncatedSVD : Dimensionality reduction without centering, for sparse data.

    Examples
    --------
    >>> import numpy as np
    >>> from skgpu.decomposition import PCA
    >>> X = np.array([[-1, -1], [-2, -1], [-3, -2], [1, 1], [2, 1], [3, 2]])
    >>> pca = PCA(n_components=2).fit(X)
    >>> print(pca.explained_variance_ratio_.round(4))
    [0.9924 0.0076]
    """

    if TYPE_CHECKING:  # scikit-learn's constructor (untyped there), as type checkers see it
        def __init__(self, n_components: int | float | Literal["mle"] | None = None, *,
                     copy: bool = True, whiten: bool = False,
                     svd_solver: Literal["auto", "full", "covariance_eigh", "arpack",
                                         "randomized"] = "auto",
                     tol: float = 0.0, iterated_power: int | Literal["auto"] = "auto",
                     n_oversamples: int = 10,
                     power_iteration_normalizer: Literal["auto", "QR", "LU", "none"] = "auto",
                     random_state: RandomStateLike = None) -> None: ...

    _skgpu_attributes = ("backend_", "_device_cache", "solver_")
    _from_sklearn_aliases = (("solver_", "_fit_svd_solver"),)

    def _resolve_solver(self, shape, sparse):
        solver = self.svd_solver
        n_samples, n_features = shape
        if self.n_components is None:
            n_components = min(shape) - (1 if solver == "arpack" or (
                solver == "auto" and sparse) else 0)
        else:
            n_components = self.n_components
        if solver == "auto":
            if sparse:
                solver = "arpack"
            elif n_features <= 1_000 and n_samples >= 10 * n_features:
                solver = "covariance_eigh"
            elif max(shape) <= 500 or n_components == "mle":
                solver = "full"
            elif 1 <= n_components < 0.8 * min(shape):
                solver = "randomized"
            else:
                solver = "full"
        return solver, n_components

    def _check_n_components(self, solver, n_components, n_samples, n_features):
        if solver in ("full", "covariance_eigh"):
            if n_components == "mle":
                if n_samples < n_features:
                    raise ValueError(
                        "n_components='mle' is only supported if n_samples >= n_features"
                    )
            elif not 0 <= n_components <= min(n_samples, n_features):
                raise ValueError(
                    f"n_components={n_components} must be between 0 and "
                    f"min(n_samples, n_features)={min(n_samples, n_features)} with "
                    f"svd_solver={solver!r}"
                )
            return
        if isinstance(n_components, str):
            raise ValueError(
                f"n_components={n_components!r} cannot be a string with svd_solver='{solver}'"
            )
        if not 1 <= n_components <= min(n_samples, n_features):
            raise ValueError(
                f"n_components={n_components!r} must be between 1 and "
                f"min(n_samples, n_features)={min(n_samples, n_features)!r} with "
                f"svd_solver='{solver}'"
            )
        if solver == "arpack" and n_components == min(n_samples, n_features):
            raise ValueError(
                f"n_components={n_components!r} must be strictly less than "
                f"min(n_samples, n_features)={min(n_samples, n_features)!r} with "
                f"svd_solver='{solver}'"
            )

    def _fit_dask(self, X):
        """Per-chunk partial results on the workers (skgpu.dask): Gram blocks and sums
        ('covariance_eigh'), R factors ('full': the SVD of the centred X's R) or the
        randomized SVD's passes; 'auto' resolved by the in-memory rules."""
        from ..dask import pca_covariance, pca_r_factor, pca_randomized, prepare_dask_fit

        if self.svd_solver == "arpack":
            raise ValueError(
                f"svd_solver={self.svd_solver!r} needs the whole matrix in one memory; "
                "with dask input use svd_solver='covariance_eigh', 'full' or 'auto', "
                "which need only per-chunk Gram or R factors, or 'randomized'."
            )
        inp = prepare_dask_fit(self, X)
        X = inp.X
        n_samples, n_features = X.shape
        solver, n_components = self._resolve_solver(X.shape, sparse=False)
        self._check_n_components(solver, n_components, n_samples, n_features)
        if solver == "covariance_eigh" and n_samples < 2:
            raise ValueError(
                "PCA with svd_solver='covariance_eigh' needs at least 2 samples to "
                f"estimate a covariance, got n_samples={n_samples}."
            )
        cpu = get_backend("cpu")
        # the small decompositions where this process has a GPU (as in memory)
        device = "cpu" if get_config()["device"] == "cpu" else "auto"
        with inp.errors():
            if solver == "randomized":
                n, mean, S, Vt, total_var = pca_randomized(
                    X, n_components, n_oversamples=self.n_oversamples,
                    n_iter=self.iterated_power,
                    random_state=check_random_state(self.random_state))
                _, Vt = _flip_signs(cpu, None, np.ascontiguousarray(Vt))
                result = _Decomposition(mean=mean, S=S, Vt=Vt,
                                        explained_variance=S**2 / (n - 1),
                                        total_var=total_var)
            elif solver == "full":
                n, mean, R = pca_r_factor(X)
                result = _from_r_factor(select_backend(device, operations=("svd",))[0],
                                        R, mean, n)
            else:
                n, mean, C = pca_covariance(X)
                result = _from_covariance(select_backend(device, operations=("eigh",))[0],
                                          C, mean, n)
        self._set_fitted(result, solver, n_components, n_samples, n_features, X.dtype)
        self.backend_ = "dask"
        self._fit_svd_solver = self.solver_ = solver
        return result, X, cpu

    def _fit(self, X, spec, keep_data=False):
        """Fit in-memory X, classified by the caller as ``spec``: returns the solver's
        result, the :class:`~skgpu.utils.validation.Input` made of X (marked finite once
        checked; with ``keep_data``, X on the fit's backend where the solver put it there
        anyway) and the backend."""
        if spec.sparse and self.svd_solver not in ("auto", "arpack", "covariance_eigh"):
            raise TypeError(
                'PCA only support sparse inputs with the "arpack" and'
                f' "covariance_eigh" solvers, while "{self.svd_solver}" was passed. See'
                " TruncatedSVD for a possible alternative."
            )
        # Dense X: the NaN/infinity check is left to the solver ('covariance_eigh' gets
        # it from the mean it computes anyway; a pass over a large X costs more than the
        # fit on the GPU) or done below for the others.
        inp = prepare(self, X, spec=spec, accept_sparse=("csr", "csc"),
                      ensure_all_finite=spec.sparse)
        n_samples, n_features = inp.shape
        solver, n_components = self._resolve_solver(inp.shape, inp.sparse)
        if solver != "covariance_eigh":
            inp = inp.checked_finite(self)
        X = inp.data
        self._check_n_components(solver, n_components, n_samples, n_features)
        if solver == "covariance_eigh" and n_samples < 2:
            # scikit-learn returns NaN attributes here; a NaN matrix makes cuSOLVER's
            # eigensolver fail, so both backends refuse it the same way.
            raise ValueError(
                "PCA with svd_solver='covariance_eigh' needs at least 2 samples to "
                f"estimate a covariance, got n_samples={n_samples}."
            )
        random_state = check_random_state(self.random_state)

        if solver == "arpack":
            def work(ops):
                return _fit_arpack(inp, n_components, tol=self.tol,
                                   random_state=random_state)

            result, backend = run_with_fallback(
                work, X=inp, what="PCA.fit",
                cpu_because="svd_solver='arpack' runs on the CPU (SciPy's ARPACK), "
                            "whatever the device")
            moved = None
        else:
            operations = {"covariance_eigh": ("centred_gram", "eigh"), "full": ("svd",),
                          "randomized": ("randomized_svd",)}[solver]

            def work(ops):
                if solver == "covariance_eigh":
                    return _fit_covariance_eigh(ops, inp, self, keep=keep_data)
                if solver == "full":
                    return _fit_full(ops, X), None
                return _fit_randomized(
                    ops, X, n_components, n_oversamples=self.n_oversamples,
                    n_iter=self.iterated_power, normalizer=self.power_iteration_normalizer,
                    random_state=random_state,
                ), None

            (result, moved), backend = run_with_fallback(work, operations=operations, X=inp,
                                                         what=f"PCA.fit ({solver})")
        self._set_fitted(result, solver, n_components, n_samples, n_features, X.dtype)
        self.backend_ = backend.name
        self._fit_svd_solver = self.solver_ = solver
        return result, (inp if moved is None else moved).known_finite(), backend

    def _set_fitted(self, r, solver, n_components, n_samples, n_features, dtype):
        ev, S, Vt = r.explained_variance, r.S, r.Vt
        ratio = ev / r.total_var
        # scikit-learn's types: NumPy integers from 'mle' and a fraction, a Python int
        # as given otherwise (scripts format and compare them)
        if n_components == "mle":
            n_components = _infer_dimension(ev, n_samples)
        elif 0 < n_components < 1.0:
            n_components = np.searchsorted(np.cumsum(ratio), n_components,
                                           side="right") + 1
        k = n_components
        if solver in ("full", "covariance_eigh"):
            noise = float(np.mean(ev[k:])) if k < min(n_features, n_samples) else 0.0
        else:
            noise = ((r.total_var - float(ev.sum())) / (min(n_features, n_samples) - k)
                     if k < min(n_features, n_samples) else 0.0)
        astype = lambda a: np.ascontiguousarray(a[:k], dtype=dtype)  # noqa: E731
        self.mean_ = np.asarray(r.mean, dtype=dtype)
        self.components_ = astype(Vt)
        self.explained_variance_ = astype(ev)
        self.explained_variance_ratio_ = astype(ratio)
        self.singular_values_ = astype(S)
        self.n_components_ = k
        self.n_samples_ = n_samples
        # scikit-learn's types: a Python 0.0 when every component is kept, else a
        # scalar of the data's dtype
        self.noise_variance_ = (0.0 if k >= min(n_features, n_samples)
                                else np.asarray(noise, dtype=dtype)[()])
        self._device_cache = {}

    @fit_context(prefer_skip_nested_validation=True)
    @atomic_fit
    def fit(self: _Self, X: MatrixLike, y: object = None) -> _Self:
        """Fit the model with X.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data: NumPy, pandas, SciPy sparse, CuPy (dense or sparse) or torch.
        y : Ignored
            Not used, present for API consistency by convention.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        spec = container_of(X)
        if spec.dask:
            self._fit_dask(X)
        else:
            self._fit(X, spec)
        return self

    @fit_context(prefer_skip_nested_validation=True)
    @atomic_fit
    def fit_transform(self, X: MatrixLike, y: object = None) -> MatrixLike:
        """Fit the model with X and apply the dimensionality reduction on X.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data.
        y : Ignored
            Not used, present for API consistency by convention.

        Returns
        -------
        X_new : array of shape (n_samples, n_components)
            In the container of ``X``.
        """
        spec = container_of(X)
        if spec.dask:
            self._fit_dask(X)
            return self.transform(X)
        result, inp, backend = self._fit(X, spec, keep_data=True)
        if result.U is None:
            return self._project(inp)
        k = self.n_components_
        U = result.U[:, :k]
        # a Python float, not np.sqrt's float64 scalar: NumPy 2 would promote U to float64
        U = U * (math.sqrt(inp.shape[0] - 1) if self.whiten else
                 backend.asarray(result.S[:k], dtype=U.dtype))
        return convert_output(U, inp.spec)

    def _projection(self, ops):
        """(W, bias) on ``ops`` with X @ W + bias = the transform; cached per backend."""
        def make():
            W = self.components_.T.astype(self.components_.dtype, copy=True)
            bias = -(self.mean_ @ self.components_.T)
            if self.whiten:
                scale = np.sqrt(self.explained_variance_)
                scale[scale < np.finfo(scale.dtype).eps] = np.finfo(scale.dtype).eps
                W /= scale
                bias /= scale
            return (ops.asarray(np.ascontiguousarray(W)), ops.asarray(bias.astype(W.dtype)))

        return cached(self, ("transform", ops.name),
                      (self.components_, self.mean_, self.explained_variance_, self.whiten),
                      make)

    def _project(self, inp):
        """The transform of an :class:`~skgpu.utils.validation.Input`, in its container
        (an input not yet known finite is checked through the product)."""
        def work(ops):
            W, bias = self._projection(ops)
            return checked_product(ops, inp, W, self, bias)

        out, backend = run_with_fallback(work, operations=("matmul",), X=inp,
                                         what="PCA.transform")
        return convert_output(out, inp.spec)

    def transform(self, X: MatrixLike) -> MatrixLike:
        """Project X on the principal components (one matmul with a bias epilog).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        X_new : array of shape (n_samples, n_components)
            In the container of ``X`` (NumPy, CuPy or torch on the same device).
        """
        # host data on the CPU: scikit-learn's own transform (it checks the fit first)
        spec = container_of(X)
        out = run_reference_on_host(lambda: _sk_transform(self, X), spec=spec,
                                    operations=("matmul",), what="PCA.transform",
                                    elements=getattr(X, "size", None))
        if out is not NOT_RUN:
            return out
        check_is_fitted(self)
        if spec.dask:
            from ..dask import map_rows

            return map_rows(self, self.transform, X, self.n_components_,
                            self.components_.dtype)
        # NaN and infinity are looked for in the (much smaller) projection, not in X.
        return self._project(prepare(self, X, spec=spec, reset=False,
                                     accept_sparse=("csr", "csc"), ensure_all_finite=False))

    def inverse_transform(self, X: MatrixLike) -> MatrixLike:
        """Transform data back to its original space.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_components)
            Data in the space of the components.

        Returns
        -------
        X_original : array of shape (n_samples, n_features)
            The data in the original space, in the container of X.
        """
        check_is_fitted(self)
        spec = container_of(X)
        X = validate_inverse_input(self, X, spec, self.components_.shape[0])
        components = self.components_
        if self.whiten:
            components = np.sqrt(self.explained_variance_[:, None]) * components
        dtype = np.result_type(X.dtype, components.dtype)  # NumPy's, as scikit-learn's

        def work(ops):
            Xd = ops.asarray(X, dtype=dtype)
            return ops.matmul(Xd, ops.asarray(components, dtype=dtype),
                              bias=ops.asarray(self.mean_, dtype=dtype))

        out, _ = run_with_fallback(work, operations=("matmul",), X=spec,
                                   what="PCA.inverse_transform")
        return convert_output(out, spec)

    def score_samples(self, X: MatrixLike) -> MatrixLike:
        """Log-likelihood of each sample under the probabilistic PCA model.

        Computed where X is: device data (CuPy, CUDA torch) on the device, with one
        matmul; host data by scikit-learn's code.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The data.

        Returns
        -------
        ll : array of shape (n_samples,)
            In the container of ``X``.
        """
        spec = container_of(X)
        if not spec.on_device:
            return super().score_samples(X)
        check_is_fitted(self)
        return convert_output(self._score_samples_on_device(X, spec), spec)

    def _likelihood_terms(self, ops, X_dtype):
        """``(dtype, precision, mean, constant)`` of the log-likelihood on ``ops``: the
        precision is computed on the host once per fit (as scikit-learn's), and it and the
        mean are sent to each backend once per dtype (a search scores every fold)."""
        sources = (self.components_, self.explained_variance_, self.noise_variance_,
                   self.mean_, self.whiten, self.n_components_)

        def make_precision():
            precision = self.get_precision()
            return precision, 0.5 * (
                precision.shape[0] * math.log(2.0 * math.pi) - fast_logdet(precision))

        precision, constant = cached(self, "precision", sources, make_precision)
        dtype = np.result_type(X_dtype, precision.dtype)
        on_device = cached(self, ("likelihood", ops.name, dtype.str), sources, lambda: (
            ops.asarray(precision, dtype=dtype), ops.asarray(self.mean_, dtype=dtype)))
        return (dtype, *on_device, constant)

    def _score_samples_on_device(self, X, spec):
        inp = prepare(self, X, spec=spec, reset=False)

        def work(ops):
            dtype, precision, mean, constant = self._likelihood_terms(ops, inp.dtype)
            Xr = ops.asarray(inp.data, dtype=dtype) - mean
            M = ops.matmul(Xr, precision)
            ll = ops.xp.sum(Xr * M, axis=1)
            ll *= -0.5
            ll -= constant
            return ll

        out, _ = run_with_fallback(work, operations=("matmul",), X=inp,
                                   what="PCA.score_samples")
        return out

    def score(self, X: MatrixLike, y: object = None) -> float:
        """Return the average log-likelihood of the samples under the model.

        Computed where X is, as :meth:`score_samples`.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The data.
        y : Ignored
            Not used, present for API consistency by convention.

        Returns
        -------
        ll : float
            Average log-likelihood of the samples under the current model.
        """
        spec = container_of(X)
        if not spec.on_device:
            return super().score(X)
        check_is_fitted(self)
        return float(self._score_samples_on_device(X, spec).mean())

    def __getstate__(self):
        state = super().__getstate__()
        state.pop("_device_cache", None)
        return state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # fitted attributes are NumPy, not in X's namespace as the tag promises
        tags.array_api_support = False
        return tags
