"""Truncated SVD (LSA) on the backend seam."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, TypeVar

import numpy as np
from sklearn.decomposition import TruncatedSVD as _SkTruncatedSVD
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from .._typing import MatrixLike, RandomStateLike
from ..backends import NOT_RUN, get_backend, run_reference_on_host, run_with_fallback
from ..backends import container_of, convert_output, to_numpy
from ..utils._cache import cached
from ..utils._convert import SklearnConversionMixin
from ..utils._fitting import atomic_fit, fit_context
from ..utils.validation import (
    checked_product,
    prepare,
    validate_inverse_input,
)
from ._pca import _arpack_svd, _flip_signs, _max_abs, _power_of_two, _row_signs

_Self = TypeVar("_Self", bound="TruncatedSVD")


#: scikit-learn's own transform, without its set_output wrapper (TruncatedSVD.transform's
#: wraps the call already).
_sk_transform = getattr(_SkTruncatedSVD.transform, "__wrapped__", _SkTruncatedSVD.transform)

#: Bytes of the centred row block formed at a time by :func:`_variances`.
_VARIANCE_BLOCK_BYTES = 1 << 26


def _variances(ops, X, Vt, Xt):
    """``(var(X Vᵀ, axis=0), Σ_j var(X[:, j]))``, ddof 0, in one pass over X: the
    explained variances of the components ``Vt`` (``Xt = X Vᵀ`` given) and the total.

    Both are exact where X is far from the origin. The one-pass n⁻¹‖X‖² − ‖mean‖²
    cancels (5e-5 relative error at an offset of 1e6, every digit lost at 1e8), a
    float32 mean is 3 units off at an offset of 1e6, and the projection Xt carries the
    offset: in float32 at 1e6 its rounding (~0.4 an entry) swamps a spread of a few units
    (its variance came out 28 × too large; scikit-learn's 800 ×). Dense X is therefore
    shifted by its approximate column mean in X's dtype (the subtraction of nearby
    numbers is exact, and variances do not depend on the shift) and projected again, a
    row block at a time (no copy of X); the shifted sums are accumulated in float64, and
    their means are small, so the one pass does not cancel. Sparse X (no offset to speak
    of: its zeros) uses Xt in float64, and its total comes from the stored entries plus
    ``(n - nnz_j)·mean_j²`` for the zeros."""
    xp = ops.xp
    n, p = X.shape
    mean = ops.column_mean(X)
    if ops.is_sparse(X):
        X = X.tocsr()
        if not X.has_canonical_format:  # duplicates summed, as the mean saw them
            X = X.copy()
            X.sum_duplicates()
        D = X.data - mean[X.indices]
        zeros = n - xp.bincount(X.indices, minlength=p)
        total = float(xp.vdot(D, D) + zeros.astype(mean.dtype) @ (mean * mean)) / n
        return _column_variances(ops, Xt.astype(np.float64)), total
    centre = mean.astype(X.dtype)
    W = xp.ascontiguousarray(Vt.T, dtype=X.dtype)
    k = W.shape[1]
    d1, d2 = xp.zeros(p, dtype=np.float64), xp.zeros((), dtype=np.float64)
    t1, t2 = xp.zeros(k, dtype=np.float64), xp.zeros(k, dtype=np.float64)
    rows = max(1, _VARIANCE_BLOCK_BYTES // max(1, p * 8))
    for start in range(0, n, rows):
        D = X[start:start + rows] - centre
        T = ops.matmul(D, W).astype(np.float64)
        D = D.astype(np.float64, copy=False)
        ones = xp.ones(D.shape[0])
        d1 += ones @ D
        d2 += xp.vdot(D, D)
        t1 += ones @ T
        t2 += ones @ (T * T)
    d1 /= n
    t1 /= n
    # a sum of squares past the float64 range is a variance past it (the shifted means
    # are small against the spread), as numpy's var reports it: inf, not inf - inf
    explained = xp.where(xp.isinf(t2), xp.inf, xp.maximum(t2 / n - t1 * t1, 0.0))
    d2 = float(d2)
    total = d2 if np.isinf(d2) else max(d2 / n - float(d1 @ d1), 0.0)
    return explained, total


def _column_variances(ops, A):
    """``A.var(axis=0)`` in two GEMV passes (the backend's ``column_mean``: axis-0
    reductions of a tall C-ordered CuPy array are ~10× slower than a GEMV); A is not
    modified."""
    D = A - ops.column_mean(A)
    D *= D
    return ops.column_mean(D)


def _fit_randomized(ops, X, k, *, n_iter, n_oversamples, normalizer, random_state):
    X = ops.asarray(X)
    U, S, Vt = ops.randomized_svd(X, k, n_oversamples=n_oversamples, n_iter=n_iter,
                                  power_iteration_normalizer=normalizer,
                                  random_state=random_state)
    # flipped where it lives: a wide Vt is flipped on the device before it is copied
    Vt = ops.xp.ascontiguousarray(Vt, dtype=X.dtype)
    Vt = Vt * _row_signs(ops.xp, Vt)[:, None]
    Xt = ops.matmul(X, Vt.T)
    explained, total = _variances(ops, X, Vt, Xt)
    return ops.to_host(Vt), ops.to_host(S), Xt, ops.to_host(explained).astype(X.dtype), total


class TruncatedSVD(SklearnConversionMixin["_SkTruncatedSVD"], _SkTruncatedSVD):
    """Dimensionality reduction by truncated SVD on the GPU, a drop-in for scikit-learn's.

    Same parameters, attributes and results as :class:`sklearn.decomposition.TruncatedSVD`.
    ``algorithm='randomized'`` runs on the backend chosen by :func:`skgpu.config_context`
    (GEMM or SpMM power iterations with a CholeskyQR3 orthonormalisation and scikit-learn's
    random draws); ``'arpack'`` runs on the CPU through SciPy, with the reason logged.
    Dense or sparse (CSR/CSC/COO, SciPy or CuPy) input; the data is never centred.

    Parameters
    ----------
    n_components : int, default=2
        Desired dimensionality of output data.
    algorithm : {'arpack', 'randomized'}, default='randomized'
        SVD solver.
    n_iter : int, default=5
        Power iterations for 'randomized'.
    n_oversamples : int, default=10
        Oversampling for 'randomized'.
    power_iteration_normalizer : {'auto', 'QR', 'LU', 'none'}, default='auto'
        Normalizer of the power iterations (any but 'none' spans the same subspace).
    random_state : int, RandomState instance or None, default=None
        Seed of the random draws: scikit-learn's own draws (a RandomState instance is
        advanced by them as scikit-learn advances it), except that on the GPU a test
        matrix of 2²⁰ entries or more (n_features × (n_components + n_oversamples)) is
        drawn on the device from a generator seeded by one integer drawn from it.
    tol : float, default=0.0
        Tolerance for 'arpack'.

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
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (n_features,)
        Names of features seen during fit; defined only when X has string feature names.
    backend_ : {'gpu', 'cpu', 'dask'}
        Where the last fit ran ('dask': on the workers of a dask array's scheduler).

    See Also
    --------
    PCA : Principal component analysis (centred).

    Examples
    --------
    >>> import numpy as np
    >>> from scipy.sparse import random as sparse_random
    >>> from skgpu.decomposition import TruncatedSVD
    >>> X = sparse_random(100, 40, density=0.05, random_state=0, format="csr")
    >>> svd = TruncatedSVD(n_components=5, random_state=0).fit(X)
    >>> svd.components_.shape
    (5, 40)
    """

    if TYPE_CHECKING:  # scikit-learn's constructor (untyped there), as type checkers see it
        def __init__(self, n_components: int = 2, *,
                     algorithm: Literal["arpack", "randomized"] = "randomized",
                     n_iter: int = 5, n_oversamples: int = 10,
                     power_iteration_normalizer: Literal["auto", "QR", "LU", "none"] = "auto",
                     random_state: RandomStateLike = None, tol: float = 0.0) -> None: ...

    @fit_context(prefer_skip_nested_validation=True)
    @atomic_fit
    def fit(self: _Self, X: MatrixLike, y: object = None) -> _Self:
        """Fit the model on X (dense or sparse).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data.
        y : Ignored
            Not used, present for API consistency by convention.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        self.fit_transform(X)
        return self

    @fit_context(prefer_skip_nested_validation=True)
    @atomic_fit
    def fit_transform(self, X: MatrixLike, y: object = None) -> MatrixLike:
        """Fit the model and return X reduced, in the container of X.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data.
        y : Ignored
            Not used, present for API consistency by convention.

        Returns
        -------
        X_new : array of shape (n_samples, n_components)
            X in the space of the components.
        """
        spec = container_of(X)
        if spec.dask:
            return self._fit_transform_dask(X)
        inp = prepare(self, X, spec=spec, accept_sparse=["csr", "csc"],
                      ensure_min_features=2, reject_strings=True)
        X = inp.data
        random_state = check_random_state(self.random_state)
        if self.algorithm == "randomized" and self.n_components > X.shape[1]:
            raise ValueError(
                f"n_components({self.n_components}) must be <= n_features({X.shape[1]})."
            )
        if self.algorithm == "arpack":
            def work(ops):
                Xh = to_numpy(X)
                U, S, Vt = _arpack_svd(Xh, self.n_components, tol=self.tol,
                                       scale=_power_of_two(_max_abs(Xh)),
                                       random_state=random_state)
                Xt = np.asarray(Xh @ Vt.T) if self.tol > 0 else U * S
                explained, total = _variances(ops, Xh, Vt, Xt)
                return Vt, S, Xt, explained.astype(Xt.dtype), total

            (Vt, S, Xt, explained, full_var), backend = run_with_fallback(
                work, X=inp, what="TruncatedSVD.fit",
                cpu_because="algorithm='arpack' runs on the CPU (SciPy's ARPACK), whatever "
                            "the device")
        else:
            def work(ops):
                return _fit_randomized(
                    ops, X, self.n_components, n_iter=self.n_iter,
                    n_oversamples=self.n_oversamples,
                    normalizer=self.power_iteration_normalizer, random_state=random_state)

            (Vt, S, Xt, explained, full_var), backend = run_with_fallback(
                work, operations=("randomized_svd", "matmul"), X=inp,
                what="TruncatedSVD.fit (randomized)")
        self.components_ = np.ascontiguousarray(Vt)
        self.explained_variance_ = explained
        self.explained_variance_ratio_ = explained / full_var
        self.singular_values_ = S
        self.backend_ = backend.name
        self._device_cache: dict = {}
        return convert_output(Xt, inp.spec)

    def _fit_transform_dask(self, X):
        """Randomized SVD over row chunks (skgpu.dask); returns the lazy transform."""
        from ..dask import prepare_dask_fit, truncated_svd

        if self.algorithm != "randomized":
            raise ValueError(
                f"algorithm={self.algorithm!r} needs the whole matrix in one memory; with "
                "dask input use algorithm='randomized'."
            )
        given = X  # (transformed as given: its names and row chunks)
        inp = prepare_dask_fit(self, X, min_features=2)
        X = inp.X
        if self.n_components > X.shape[1]:
            raise ValueError(
                f"n_components({self.n_components}) must be <= n_features({X.shape[1]})."
            )
        with inp.errors():
            S, Vt, full_var, explained = truncated_svd(
                X, self.n_components, n_oversamples=self.n_oversamples,
                n_iter=self.n_iter, random_state=self.random_state)
            # (the variances do not depend on the components' signs)
            _, Vt = _flip_signs(get_backend("cpu"), None, np.ascontiguousarray(Vt))
        dtype = X.dtype
        self.components_ = np.ascontiguousarray(Vt, dtype=dtype)
        self.explained_variance_ = explained.astype(dtype)
        self.explained_variance_ratio_ = (explained / full_var).astype(dtype)
        self.singular_values_ = S.astype(dtype)
        self.backend_ = "dask"
        self._device_cache = {}
        return self.transform(given)

    def _components_on(self, ops, transposed):
        C = self.components_.T if transposed else self.components_
        return cached(self, (ops.name, transposed), (self.components_,),
                      lambda: ops.asarray(np.ascontiguousarray(C)))

    def transform(self, X: MatrixLike) -> MatrixLike:
        """Reduce X: ``X @ components_.T``, in the container of X.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            The data.

        Returns
        -------
        X_new : array of shape (n_samples, n_components)
            X in the space of the components.
        """
        # host data on the CPU: scikit-learn's own transform (it checks the fit first)
        spec = container_of(X)
        out = run_reference_on_host(lambda: _sk_transform(self, X), spec=spec,
                                    operations=("matmul",), what="TruncatedSVD.transform",
                                    elements=getattr(X, "size", None))
        if out is not NOT_RUN:
            return out
        check_is_fitted(self)
        if spec.dask:
            from ..dask import map_rows

            return map_rows(self, self.transform, X, self.components_.shape[0],
                            self.components_.dtype)
        # NaN and infinity are looked for in the (much smaller) product, not in X.
        inp = prepare(self, X, spec=spec, accept_sparse=["csr", "csc"], reset=False,
                      ensure_all_finite=False, reject_strings=True)

        def work(ops):
            return checked_product(ops, inp, self._components_on(ops, True), self)

        out, _ = run_with_fallback(work, operations=("matmul",), X=inp,
                                   what="TruncatedSVD.transform")
        return convert_output(out, inp.spec)

    def inverse_transform(self, X: MatrixLike) -> MatrixLike:
        """Transform X back to its original space: ``X @ components_``.

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
        X = validate_inverse_input(self, X, spec, self.components_.shape[0],
                                   reject_strings=True)
        dtype = np.result_type(X.dtype, self.components_.dtype)  # NumPy's, as scikit-learn's

        def work(ops):
            Xd = ops.asarray(X, dtype=dtype)
            return ops.matmul(Xd, ops.asarray(self._components_on(ops, False), dtype=dtype))

        out, _ = run_with_fallback(work, operations=("matmul",), X=spec,
                                   what="TruncatedSVD.inverse_transform")
        return convert_output(out, spec)

    def __getstate__(self):
        state = super().__getstate__()
        state.pop("_device_cache", None)
        return state
