"""Ridge regression and RidgeCV (efficient leave-one-out through QR) on the backend seam.

The solvers are module-level functions of a backend ``ops`` (the style of scikit-learn's
``linear_model/_ridge.py``); the estimators validate, pick a backend and set attributes.

Notation: ``Xw = diag(√w) (X - 1 x̄ᵀ)`` and ``yw = diag(√w) (y - ȳ)`` are the centred,
weighted data scikit-learn's leave-one-out works on (``w`` the sample weights, one when
absent; no centring without an intercept). For sparse X the centring is never applied to
the matrix: :class:`_Design` carries it through every product.
"""

from __future__ import annotations

import logging
import numbers
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.linear_model import Ridge as _SkRidge
from sklearn.linear_model import RidgeCV as _SkRidgeCV
from sklearn.model_selection import GridSearchCV
from sklearn.utils import check_scalar
from sklearn.utils.metadata_routing import process_routing
from sklearn.utils.validation import check_is_fitted

from .._typing import ArrayLike, MatrixLike
from ..backends import get_backend, run_with_fallback
from ..backends import centre_columns
from ..backends import (
    container_of,
    convert_output,
    is_dask_collection,
    is_device_array,
    to_numpy,
)
from ..utils._cache import cached
from ..utils._convert import SklearnConversionMixin
from ..utils._fitting import atomic_fit, fit_context
from ..utils._scoring import RegressorScoreMixin
from ..utils._sklearn_private import (
    _check_sample_weight,
    _IdentityRegressor,
    _raise_for_params,
    _routing_enabled,
)
from ..utils.validation import (
    assert_all_finite,
    checked_product,
    prepare,
    prepare_xy,
)

logger = logging.getLogger("skgpu")

#: Largest min(n_samples, n_features) for which sparse X goes through the dense
#: min(n, p)² normal-equations matrix; beyond it scikit-learn's iterative solver is used.
_SPARSE_GRAM_LIMIT = 8192


# --------------------------------------------------------------------------------------
# shared pieces
# --------------------------------------------------------------------------------------
class _Design:
    """``Xw`` on a backend: dense (centred and weighted in memory) or sparse (row-scaled
    by ``√w``; the centring ``- √w x̄ᵀ`` is applied implicitly in every product).

    A dense X comes centred already, as a private copy (:func:`_preprocess`), and is
    weighted in place.
    """

    def __init__(self, ops, X, X_offset, sqrt_sw, fit_intercept, sparse):
        self.ops = ops
        self.sparse = sparse
        self.shape = X.shape
        self.sqrt_sw = sqrt_sw
        if self.sparse:
            self.X = X if sqrt_sw is None else ops.scale_rows(X, sqrt_sw)
            self.mean = X_offset if fit_intercept else None
            self._sqrt_sw = (ops.xp.ones(X.shape[0], dtype=X.dtype)
                             if sqrt_sw is None else sqrt_sw)
        else:
            Xw = X
            if sqrt_sw is not None:
                Xw *= sqrt_sw[:, None]
            self.X, self.mean = Xw, None

    def matmul(self, B):
        """``Xw @ B`` for a dense ``B`` of shape (p, k)."""
        ops = self.ops
        if not self.sparse:
            return ops.matmul(self.X, B)
        out = ops.spmm(self.X, B)
        if self.mean is not None:
            out -= self._sqrt_sw[:, None] * (self.mean @ B)[None, :]
        return out

    def rmatmul(self, Z):
        """``Xwᵀ @ Z`` for a dense ``Z`` of shape (n, k)."""
        ops = self.ops
        if not self.sparse:
            return ops.matmul(self.X.T, Z)
        out = ops.spmm(self.X.T, Z)
        if self.mean is not None:
            out -= self.mean[:, None] * (self._sqrt_sw @ Z)[None, :]
        return out

    def gram_features(self):
        """``Xwᵀ Xw`` (p × p)."""
        ops = self.ops
        if not self.sparse:
            return ops.matmul(self.X.T, self.X)
        G = ops.gram(self.X)
        if self.mean is not None:
            G -= (self._sqrt_sw @ self._sqrt_sw) * ops.xp.outer(self.mean, self.mean)
        return G

    def gram_samples(self):
        """``Xw Xwᵀ`` (n × n)."""
        ops = self.ops
        if not self.sparse:
            return ops.matmul(self.X, self.X.T)
        K = ops.gram(self.X.T)
        if self.mean is not None:
            xp, s = ops.xp, self._sqrt_sw
            Xm = ops.spmm(self.X, self.mean[:, None]).ravel()
            K -= xp.outer(Xm, s) + xp.outer(s, Xm)
            K += float(self.mean @ self.mean) * xp.outer(s, s)
        return K


def _preprocess(ops, inp, y, sample_weight, fit_intercept, dtype, owner=None):
    """Offsets and the weighted, centred design of the input ``inp`` (an
    :class:`~skgpu.utils.validation.Input`); everything on ``ops`` in ``dtype``. An
    input not checked for NaN/infinity yet is checked here, by one sum on the backend
    (scikit-learn's error, naming ``owner``; a finite X whose sum overflows passes).

    Returns ``design, yw (n, t), X_offset, y_offset, sqrt_sw`` (``sqrt_sw`` None without
    sample weights); ``X_offset``/``y_offset`` are the (weighted) means, zero without an
    intercept, as in scikit-learn's ``_preprocess_data``.
    """
    xp = ops.xp
    X = ops.asarray(inp.data, dtype=dtype)
    if not inp.finite:  # on the converted X (scikit-learn's message names float64): one
        assert_all_finite(X, owner)  # fused sum on the GPU, scikit-learn's check on the CPU
    y = ops.asarray(y, dtype=dtype)
    y2 = y.reshape(-1, 1) if y.ndim == 1 else y
    n, p = X.shape
    sw = None if sample_weight is None else ops.asarray(sample_weight, dtype=dtype)
    sparse = inp.sparse
    if fit_intercept:
        if sparse:
            X_offset = ops.column_mean(X, sw)
        else:
            X, X_offset = centre_columns(ops, X, sw)
        w = xp.full(n, 1.0 / n, dtype=dtype) if sw is None else sw / sw.sum()
        y_offset = w @ y2
    else:
        X_offset = xp.zeros(p, dtype=dtype)
        y_offset = xp.zeros(y2.shape[1], dtype=dtype)
        if not sparse:
            X = X.copy()  # the design is weighted in place
    sqrt_sw = None if sw is None else xp.sqrt(sw)
    design = _Design(ops, X, X_offset, sqrt_sw, fit_intercept, sparse)
    yw = y2 - y_offset if fit_intercept else y2.copy()
    if sqrt_sw is not None:
        yw *= sqrt_sw[:, None]
    if fit_intercept and n > 1:
        # yw is orthogonal to c = √w/‖√w‖ in exact arithmetic; the weighted mean's
        # rounding (ε·|ȳ|) leaves a component along c, which the leave-one-out keeps in
        # full (the intercept's direction is outside the spectrum): at an offset of 3,
        # a 1e-5 relative error for samples with small LOO errors. One projection
        # removes it to ε‖yw‖.
        c = xp.ones(n, dtype=dtype) if sqrt_sw is None else sqrt_sw.copy()
        c /= xp.sqrt(c @ c)
        yw -= c[:, None] * (c @ yw)[None, :]
    return design, yw, X_offset, y_offset, sqrt_sw


@dataclass
class _Spectrum:
    """``Xw`` through its spectrum, for every alpha at once.

    ``lam`` are the squared singular values of Xw. Two forms:

    - ``orthonormal``: ``M = U`` holds orthonormal left singular vectors of Xw (the QR
      route, and the eigen route when n <= p): the hat-matrix diagonal is
      ``h(α) = (M ∘ M) @ (lam/(lam+α))``;
    - otherwise ``M = Xw V`` (the eigen route when n > p, scikit-learn's), with
      ``h(α) = (M ∘ M) @ (1/(lam+α))``.

    ``MtY = Mᵀ yw`` (see :func:`_gcv_fit` for the fitted values). The coefficients are
    ``V (s ∘ MtY / (lam+α))`` with the right singular vectors V (QR route),
    ``V (MtY / (lam+α))`` (eigen, n > p) or ``Xwᵀ U (MtY / (lam+α))`` (eigen, n <= p).
    """

    lam: object
    M: object
    MtY: object
    orthonormal: bool
    V: object = None
    s: object = None  # singular values (QR route) for the pseudo-inverse threshold
    dropped: bool = False  # rounding-level singular values set to zero (RidgeCV)

    def coef(self, design, inv):
        """Coefficients (p, t) for ``inv`` = 1/(lam+α) of shape (r, t)."""
        ops = design.ops
        if self.s is not None:
            return ops.matmul(self.V, self.MtY * (self.s[:, None] * inv))
        if self.orthonormal:
            return design.rmatmul(ops.matmul(self.M, self.MtY * inv))
        return ops.matmul(self.V, self.MtY * inv)


class _Deflation:
    """The Householder reflector H (symmetric, orthogonal) with ``H c = ±e₁`` for the
    unit vector ``c = √w/‖√w‖``: the direction an intercept removes from Xw.

    With an intercept ``cᵀXw = 0``, so ``H Xw = [0; Z]`` and the spectrum of Xw
    without that direction is Z's ((n - 1) × p). Left singular vectors of Z, lifted by
    ``H [0; U_Z]``, are orthogonal to c to rounding, whatever the conditioning; when
    n <= p, computing the spectrum of Xw itself leaves a singular value of rounding
    size along c, whose share of the hat matrix (~ rounding / α) made the leave-one-out
    of wide X with small alphas wrong by up to 1e-3.
    """

    def __init__(self, ops, sqrt_sw, n, dtype):
        xp = ops.xp
        c = (xp.ones(n, dtype=dtype) if sqrt_sw is None else sqrt_sw.astype(dtype))
        c = c / xp.sqrt(c @ c)
        v = c.copy()
        v[0] += 1.0 if float(c[0]) >= 0 else -1.0
        self.v, self.scale = v, 2.0 / float(v @ v)
        self.ops = ops

    def apply(self, A):
        """``H A`` for A of shape (n, k)."""
        return A - self.v[:, None] * (self.scale * (self.v @ A))[None, :]

    def reduce(self, A):
        """``(H A)[1:]``: the rows of H A orthogonal to c."""
        return self.apply(A)[1:]

    def lift(self, U):
        """``H [0; U]`` for U of shape (n - 1, k)."""
        xp = self.ops.xp
        return self.apply(xp.concatenate([xp.zeros((1, U.shape[1]), dtype=U.dtype), U]))


def _decompose(ops, design, yw, mode, *, fit_intercept=False, need_u=True):
    """Spectrum of ``Xw`` by the QR route (``mode='svd'``, dense only) or by an
    eigendecomposition of its Gram matrix (``mode='eigen'``, scikit-learn's route).

    QR route, n > p: ``Xw = QR``, ``R = Ũ S Vᵀ``, and ``U = Q Ũ``: the left singular
    vectors come orthonormal from the QR, not as ``Xw V / s`` (whose columns for small
    singular values carry errors of ε‖Xw‖/s, which the leave-one-out divides by again:
    errors up to 0.7 relative at cond 1e10). ``need_u=False`` (Ridge's fit) forms only
    ``Uᵀ yw = Ũᵀ (Qᵀ yw)``. n <= p: the transposed form ``Xwᵀ = QR`` so that
    ``Xw = Rᵀ Qᵀ``, and the SVD ``Rᵀ = U S Wᵀ`` gives U directly and ``V = Q W``.
    The condition number is never squared. With an intercept and n <= p the intercept's
    direction is deflated exactly first (:class:`_Deflation`).
    """
    n, p = design.shape
    wide = n <= p
    deflate = _Deflation(ops, design.sqrt_sw, n, yw.dtype) if (
        wide and fit_intercept and n > 1) else None
    V = s = None
    if mode == "svd":
        if wide:
            Z = design.X if deflate is None else deflate.reduce(design.X)
            Q, R = ops.qr(Z.T)
            M, s, Wt = ops.svd(R.T)
            V = ops.matmul(Q, Wt.T)
            if deflate is not None:
                M = deflate.lift(M)
            MtY = ops.matmul(M.T, yw)
        else:
            Q, R = ops.qr(design.X)
            Ut, s, Vt = ops.svd(R)
            V = Vt.T
            if need_u:
                M = ops.matmul(Q, Ut)
                MtY = ops.matmul(M.T, yw)
            else:
                M = None
                MtY = ops.matmul(Ut.T, ops.matmul(Q.T, yw))
            del Q
        lam = s * s
        orthonormal = True
    elif wide:
        K = design.gram_samples()
        if deflate is not None:
            K = ops.xp.ascontiguousarray(deflate.reduce(deflate.reduce(K).T))  # (HKH)[1:, 1:]
        lam, M = ops.eigh(K)
        if deflate is not None:
            M = deflate.lift(M)
        MtY = ops.matmul(M.T, yw)
        orthonormal = True
    else:
        lam, V = ops.eigh(design.gram_features())
        M = design.matmul(V)
        MtY = ops.matmul(M.T, yw)
        orthonormal = False
    _require_finite(ops, lam, design.X, design.sparse, "the spectrum of X (Ridge, RidgeCV)")
    return _Spectrum(lam=lam, M=M, MtY=MtY, orthonormal=orthonormal, V=V, s=s)


def _set_intercept(fit_intercept, X_offset, y_offset, coef):
    """scikit-learn's ``LinearModel._set_intercept`` (X_scale is one)."""
    if fit_intercept:
        return y_offset - X_offset @ coef.T
    return 0.0


# --------------------------------------------------------------------------------------
# Ridge
# --------------------------------------------------------------------------------------
def _ridge_fit(ops, inp, y, sample_weight, alpha, *, fit_intercept, solver):
    """Ridge coefficients (t, p) on ``ops`` by 'cholesky' (normal equations, potrf; the
    n × n kernel form when p > n) or 'svd' (QR route); 'cholesky' falls back to 'svd'
    when the matrix is singular, as scikit-learn's does. Returns host arrays."""
    from numpy.linalg import LinAlgError

    dtype = inp.dtype
    design, yw, X_offset, y_offset, _ = _preprocess(ops, inp, y, sample_weight,
                                                    fit_intercept, dtype)
    xp = ops.xp
    n, p = design.shape
    t = yw.shape[1]
    alphas = np.broadcast_to(np.asarray(alpha, dtype=dtype).ravel(), (t,))
    coef = None
    if solver == "cholesky":
        kernel = p > n
        A = design.gram_samples() if kernel else design.gram_features()
        B = yw if kernel else design.rmatmul(yw)
        _require_finite(ops, A, inp.data, inp.sparse, "Ridge.fit")
        sol = xp.empty_like(B)
        eye = xp.eye(A.shape[0], dtype=dtype)
        try:
            for a in np.unique(alphas):
                cols = np.flatnonzero(alphas == a)
                M = A + dtype.type(a) * eye
                scale = ops.to_host(xp.sqrt(xp.diag(M)))
                factor = ops.cholesky(M, what="regularised Gram matrix")
                _check_conditioning(ops, factor, dtype, scale)
                sol[:, cols] = factor.solve(B[:, cols])
            coef = design.rmatmul(sol) if kernel else sol
        except LinAlgError:
            solver = "svd"
    if solver == "svd":
        # sparse X has no QR here: its fallback is the Gram's eigendecomposition (the
        # normal equations' accuracy, with the pseudo-inverse rule below)
        spec = _decompose(ops, design, yw, "eigen" if design.sparse else "svd",
                          fit_intercept=fit_intercept, need_u=False)
        a = ops.asarray(np.ascontiguousarray(alphas))
        s = spec.s if spec.s is not None else xp.sqrt(xp.maximum(spec.lam, 0.0))
        # Pseudo-inverse rule (NumPy's pinv/lstsq): singular values below
        # max(n, p)·eps·s_max count as zero. scikit-learn uses an absolute 1e-15, which
        # lets rounding noise through for numerically rank-deficient X when alpha = 0.
        keep = (s > max(n, p) * np.finfo(dtype).eps * s[0])[:, None]
        denom = xp.where(keep, spec.lam[:, None] + a[None, :], 1.0)
        inv = xp.where(keep, 1.0 / denom, 0.0).astype(dtype)
        coef = spec.coef(design, inv)
    coef = ops.to_host(coef).T
    intercept_offsets = (ops.to_host(X_offset), ops.to_host(y_offset))
    return coef, intercept_offsets, solver


def _check_conditioning(ops, factor, dtype, scale):
    """Warn scikit-learn's ``LinAlgWarning`` and raise LinAlgError (so that the caller
    takes the SVD route) when the regularised Gram matrix is numerically singular.

    The test is on the matrix equilibrated by its diagonal (``scale`` = √diag(A)): the
    Cholesky factor of D⁻¹AD⁻¹ is D⁻¹L, and Cholesky's solution is as accurate as that
    scaled matrix is conditioned (van der Sluis; Higham, *Accuracy and Stability of
    Numerical Algorithms*, §10.1), so columns of very different scales alone never send
    a well-posed problem to the SVD route, which is not scaling-invariant and loses the
    small columns' coefficients. ``(min / max of L_ii/D_i)²`` bounds the scaled
    reciprocal condition number from above: near machine epsilon the normal equations
    carry no digits, and scikit-learn warns and returns their noise; here the warning is
    the same and the answer is the SVD route's.
    """
    from numpy.linalg import LinAlgError
    from scipy.linalg import LinAlgWarning

    d = ops.to_host(ops.xp.diag(factor.lower)) / np.where(scale > 0, scale, 1.0)
    if d.size == 0:
        return
    big = float(np.max(d))
    rcond = (float(np.min(d)) / big) ** 2 if big > 0 else 0.0
    # 100 ε, not ε: a matrix singular to rounding gets a computed L_nn of about
    # √(ε·A_nn), which puts the estimate itself at ~ε; below 100 ε the normal equations
    # keep at most two digits, and the SVD route is the better answer
    if rcond < 100 * np.finfo(dtype).eps:
        warnings.warn(f"Ill-conditioned matrix (rcond={rcond:.6g}): result may not be "
                      "accurate. skgpu solves this Ridge problem by the SVD route instead "
                      "of the normal equations.", LinAlgWarning, stacklevel=4)
        raise LinAlgError("ill-conditioned regularised Gram matrix")


def _check_alpha_for_targets(alpha, y):
    """Ridge's ``alpha`` checked (:func:`_check_alpha`) and against y's targets: one
    value, or one per target. Returns the number of targets."""
    t = 1 if y.ndim == 1 else y.shape[1]
    n_alpha = np.asarray(alpha).size
    if n_alpha not in (1, t):
        raise ValueError(
            "Number of targets and number of penalties do not correspond: "
            f"{n_alpha} != {t}"
        )
    _check_alpha(alpha)
    return t


def _check_alpha(alpha):
    """Ridge's ``alpha``, which may be an array (one per target): finite, non-negative."""
    values = np.asarray(alpha, dtype=np.float64)
    if not np.all(np.isfinite(values)) or np.any(values < 0):
        raise ValueError(f"alpha must be finite and non-negative, got {alpha!r}.")


def _require_finite(ops, a, X, sparse, what):
    """:func:`_raise_not_finite` unless every entry of the intermediate ``a`` (a Gram
    matrix, a spectrum) is finite: an overflow there gives zero or NaN coefficients."""
    if not np.isfinite(float(ops.xp.sum(a))):
        _raise_not_finite(what, X, sparse)


def _as_score(score):
    """``best_score_`` as scikit-learn's RidgeCV gives it: a NumPy float64 scalar (an
    array per target with ``alpha_per_target``)."""
    return score if isinstance(score, np.ndarray) else np.float64(score)


def _raise_alpha_too_small(alphas):
    """A ValueError naming the first alpha whose reciprocal overflows float64 (a
    subnormal alpha, 1/α = ∞ along a direction outside X's span)."""
    tiny = [(i, a) for i, a in enumerate(alphas) if 0 < a and not np.isfinite(1.0 / a)]
    if tiny:
        i, a = tiny[0]
        raise ValueError(f"alphas[{i}]={a!r} is too small: 1/alpha overflows float64 "
                         "(alphas below ~5.6e-309 cannot be used); use a larger alpha.")


def _raise_not_finite(what, X, sparse):
    """A finite X whose products overflow float64 (X of order 1e300, say)."""
    from numpy.linalg import LinAlgError

    scale = float(np.max(np.abs(to_numpy(X).data if sparse else to_numpy(X)), initial=0.0))
    raise LinAlgError(
        f"{what}: the solution is not finite; the data's magnitude (max |X| = {scale:.3g}) "
        "overflows floating-point arithmetic in its products. Rescale X (for example "
        "with sklearn.preprocessing.StandardScaler) or y."
    )


def _factorisation_flops(X):
    """Floating-point operations of the fit's factorisation, n·p·min(n, p) (a QR, or the
    Gram matrix and its decomposition); BLAS threads on the CPU are managed by it."""
    n, p = X.shape
    return float(n) * p * min(n, p)


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
        check_is_fitted(self)
        if is_dask_collection(X):
            from ..dask import map_rows

            return map_rows(self, self.predict, X,
                            None if np.ndim(self.coef_) == 1 else np.shape(self.coef_)[0],
                            np.result_type(self.coef_.dtype, np.float32))
        # NaN and infinity are checked by checked_product (on the GPU in the product)
        inp = prepare(self, X, reset=False, accept_sparse=("csr", "csc", "coo"),
                      reject_strings=True, ensure_all_finite=False)
        one_target = np.ndim(self.coef_) == 1

        def work(ops):
            W, b = self._linear_weights(ops)  # in coef_'s dtype: NumPy's promotion with X
            out = checked_product(ops, inp.data, W, self, bias=b)
            return out.ravel() if one_target else out

        out, _ = run_with_fallback(work, operations=("matmul",), X=inp,
                                   what=f"{type(self).__name__}.predict")
        return convert_output(out, inp.spec)

    def __getstate__(self):
        state = super().__getstate__()
        state.pop("_device_cache", None)
        return state


def _host(a):
    """A device array on the host; anything else (None, scalars, lists) unchanged."""
    return to_numpy(a) if is_device_array(a) else a


class Ridge(SklearnConversionMixin, _DevicePredictMixin, _SkRidge):
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
    def fit(self, X: MatrixLike, y: ArrayLike,
            sample_weight: ArrayLike | float | None = None) -> Ridge:
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
        if is_dask_collection(X):
            return self._fit_dask(X, y, sample_weight)
        spec = container_of(X)
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
        tags.array_api_support = False
        return tags


# --------------------------------------------------------------------------------------
# RidgeCV
# --------------------------------------------------------------------------------------
def _resolve_gcv_mode(gcv_mode, sparse):
    """'svd' (QR route) for dense X unless 'eigen' is asked; sparse X: 'eigen'."""
    if sparse:
        if gcv_mode == "svd":
            warnings.warn(
                "The 'svd' mode is not supported for sparse X, we fallback to "
                "`gcv_mode='eigen'`. Passing `gcv_mode='svd'` on sparse X will raise "
                "an error in 1.11, use the default or pass `gcv_mode='eigen'` to "
                "suppress this warning.",
                FutureWarning,
                stacklevel=3,
            )
        return "eigen"
    return "eigen" if gcv_mode == "eigen" else "svd"


# --------------------------------------------------------------------------------------
# RidgeCV: residuals refined against X as given (ill-conditioned tall X)
# --------------------------------------------------------------------------------------
#: A column (alpha, target) of the leave-one-out residuals is refined when the estimated
#: relative error of its float64 value, ε·κ(α)·‖yw‖/‖r(α)‖, exceeds this.
_REFINE_TOLERANCE = 1e-10
#: Refinement steps at most (each an error-free gradient and residual); two suffice at
#: cond 1e10 (each step gains a factor of about ε·κ(α), below 1e-5 there).
_REFINE_STEPS = 3
#: Refinement converges while ε·κ(α) (the float64 spectrum's relative error in the
#: ridge system) is below one; it is not attempted beyond this.
_REFINE_KAPPA_LIMIT = 1e-3


def _shrinkage(lam, a, xp):
    """``α/(λ+α)``, the share of a direction a penalty α leaves in the residual: 1 for
    α = ∞ (the intercept-only model), where the quotient itself is ∞/∞."""
    finite = xp.where(xp.isinf(a), 1.0, a)  # (∞/∞ is not evaluated)
    return xp.where(xp.isinf(a), 1.0, finite / (lam + finite))


def _residual_error_estimate(s, alphas, MtY, r0_norm, yw_norm):
    """``(n_alphas, t)`` estimates of the relative error of the float64 residuals
    ``r(α) = yw - ŷ(α)`` of the QR route, and ``(n_alphas,)`` the ``ε·κ(α)`` they grow
    with. ``κ(α) = s₁ · max_j s_j/(s_j² + α)`` is the condition number of the regularised
    problem as the residual sees it (s₁/s_min for α → 0, s₁/(2√α) when α is inside the
    spectrum): a rounding of Xw of relative size ε moves r by about ε·κ(α)·‖yw‖. ``‖r(α)‖``
    comes from the spectrum: ``‖R0‖² + Σ_j (α/(s_j²+α))² (Uᵀyw)_j²``."""
    eps = np.finfo(np.float64).eps
    s = np.asarray(s, dtype=np.float64)
    a = np.asarray(alphas, dtype=np.float64)[:, None]
    lam = s * s
    growth = eps * (float(s.max(initial=0.0)) * np.max(s[None, :] / (lam[None, :] + a),
                                                       axis=1, initial=0.0))
    g = _shrinkage(lam[None, :], a, np)
    r_norm = np.sqrt(np.asarray(r0_norm)[None, :] ** 2 + (g * g) @ (np.asarray(MtY) ** 2))
    yw_norm = np.asarray(yw_norm)[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        est = growth[:, None] * yw_norm / r_norm  # an exact fit (r = 0): refined
    return np.where(yw_norm == 0, 0.0, np.where(np.isfinite(est), est, np.inf)), growth


class _ExactResiduals:
    """The ridge problem as given, for iterative refinement: residuals
    ``rw(β) = √w ∘ (yc - Xc β)`` (projected off the intercept's direction c when there is
    one) and gradients ``Xcᵀ (√w ∘ r)``, both in about twice float64's precision.

    ``Xc = X - 1 x̄ᵀ`` and ``yc = y - ȳ`` are held exactly as double-doubles (TwoSum). The
    exact value of x̄ does not matter (an intercept absorbs any shift), only that Xc is X
    shifted exactly: the float64 centred design differs from it by a rounding of each
    entry, which at cond 1e10 moves the leave-one-out errors by ~1e-8, the floor every
    float64 method shares. The products are error-free
    (:class:`~skgpu.backends._extended.SlicedMatrix`). Memory on the backend: X's size
    ``2 + (1 + s_rows) + (1 + s_cols)`` times (Xc's two parts, and for each product a
    scaled copy and its slices): 2 + 5 + 6 = 13 for 500,000 × 256."""

    def __init__(self, ops, inp, y, X_offset, y_offset, sqrt_sw, fit_intercept):
        from ..backends import SlicedMatrix, two_sum

        xp = ops.xp
        X = ops.asarray(inp.data, dtype=np.float64)
        Y = ops.asarray(y, dtype=np.float64)
        Y = Y.reshape(-1, 1) if Y.ndim == 1 else Y
        if fit_intercept:
            X, X_lo = two_sum(X, -X_offset[None, :])
            Y, Y_lo = two_sum(Y, -y_offset[None, :])
        else:
            X_lo = Y_lo = None
        self.rows = SlicedMatrix(ops, X, X_lo)
        self.cols = SlicedMatrix(ops, X, X_lo, transpose=True)
        self.Y, self.Y_lo, self.sqrt_sw = Y, Y_lo, sqrt_sw
        self.c = None
        if fit_intercept:
            c = xp.ones(X.shape[0], dtype=np.float64) if sqrt_sw is None else sqrt_sw.copy()
            self.c = c / xp.sqrt(c @ c)

    def residual(self, B, B_lo, targets):
        """Residuals (n, k) for coefficients ``B + B_lo`` (p, k) of the targets
        ``targets`` (k,)."""
        r = self.rows.residual(self.Y[:, targets], B,
                               None if self.Y_lo is None else self.Y_lo[:, targets], B_lo)
        if self.sqrt_sw is not None:
            r *= self.sqrt_sw[:, None]
        if self.c is not None:
            r -= self.c[:, None] * (self.c @ r)[None, :]
        return r

    def gradient(self, r, penalty):
        """``Xcᵀ (√w ∘ r) - penalty`` (p, k), ``penalty = α ∘ β``."""
        if self.sqrt_sw is not None:
            r = r * self.sqrt_sw[:, None]
        return -self.cols.residual(penalty, r)


def _refined_residuals(ops, spec, exact, a_cols, targets):
    """Residuals (n, k) of the columns ``(alpha a_cols[k], target targets[k])``, by
    iterative refinement of the ridge coefficients against X as given: β from the
    float64 spectrum, then ``β += (XwᵀXw + α)⁻¹ (Xwᵀ r - α β)`` with the residual r and
    the gradient error-free (:class:`_ExactResiduals`), the inverse through the same
    spectrum and β a double-double (a rounding of β alone moves r by ε·|X||β|, far more
    than r where X β cancels y), until the step is below 1e-11 of β (at most
    ``_REFINE_STEPS``). The float64 route's error at cond 1e10 lies entirely in r (exact
    r: 4e-12–2e-10 against 1e-8–1e-7; ``benchmarks/probes/ridgecv_error_parts.py``)."""
    from ..backends import two_sum

    xp = ops.xp
    lam = spec.s * spec.s
    a_dev = ops.asarray(np.asarray(a_cols, dtype=np.float64))
    t_dev = ops.asarray(np.asarray(targets, dtype=np.int64))
    inv = 1.0 / (lam[:, None] + a_dev[None, :])
    B = ops.matmul(spec.V, spec.MtY[:, t_dev] * (spec.s[:, None] * inv))
    B_lo = xp.zeros_like(B)
    r = exact.residual(B, B_lo, t_dev)
    for _ in range(_REFINE_STEPS):
        g = exact.gradient(r, a_dev[None, :] * B)
        step = ops.matmul(spec.V, ops.matmul(spec.V.T, g) * inv)
        B, err = two_sum(B, step)
        B_lo += err
        r = exact.residual(B, B_lo, t_dev)
        if bool(ops.to_host(xp.all(xp.max(xp.abs(step), axis=0)
                                   <= 1e-11 * xp.max(xp.abs(B), axis=0)))):
            break
    return r


def _refine_plan(ops, design, spec, yw, R0, alphas):
    """The columns ``(alpha index, target)`` whose float64 residuals are refined: the QR
    route on dense tall X only (the eigen route squares the condition number by design;
    wide X's residuals are sums without that cancellation), where the estimated error
    exceeds ``_REFINE_TOLERANCE`` and refinement converges; none when singular values
    were dropped as rounding (:func:`_drop_rounding_singular_values`)."""
    if spec.s is None or design.sparse or R0 is None:
        return []
    if spec.dropped:
        # X is numerically rank-deficient: against X as given, the refinement would fit
        # the directions the spectrum has dropped (their exact singular values may be
        # far above √α), and need not converge
        logger.debug("RidgeCV: no refinement: X is numerically rank-deficient.")
        return []
    ones = ops.xp.ones((1, R0.shape[0]), dtype=R0.dtype)

    def column_norms(A):  # a GEMV: CuPy's axis-0 sums of (500,000 x 100) take ~10 ms
        return np.sqrt(ops.to_host(ops.matmul(ones, A * A))[0])

    est, growth = _residual_error_estimate(ops.to_host(spec.s), alphas,
                                           ops.to_host(spec.MtY), column_norms(R0),
                                           column_norms(yw))
    cols = [(int(a), int(t)) for a, t in zip(*np.nonzero(est > _REFINE_TOLERANCE))]
    far = [a for a, _ in cols if growth[a] >= _REFINE_KAPPA_LIMIT]
    if far:
        logger.info("RidgeCV: %d of %d leave-one-out columns are left in float64: X is "
                    "too ill-conditioned for alpha=%g to refine them (ε·κ = %.2g).",
                    len(far), est.size, alphas[far[0]], growth[far[0]])
    cols = [(a, t) for a, t in cols if growth[a] < _REFINE_KAPPA_LIMIT]
    if cols:
        logger.debug("RidgeCV: refining %d of %d leave-one-out columns (largest "
                     "estimated float64 error %.2g).", len(cols), est.size, float(est.max()))
    return cols


def _drop_rounding_singular_values(ops, spec):
    """Singular values of Xw at or below ``max(n, p)·ε·s₁`` (NumPy's ``lstsq`` threshold)
    are rounding: the QR route computes every singular value to ~ε·s₁, so below that
    the data as given cannot tell them from zero. They are set to zero, so that their
    directions count as outside X's span. Kept, a rounding-size singular value far above
    √α (X of scale 1e150 with two equal columns, α = 0.1) enters the hat matrix in full:
    its best_score_ was 900 times the exact one (scikit-learn's is off too). Left out, the
    answer is the exact one for exactly rank-deficient X. Where the exact value is nonzero
    but below the threshold, no float64 method resolves it."""
    n, p = spec.M.shape[0], spec.V.shape[0]
    s_host = ops.to_host(spec.s)
    if s_host.size == 0:
        return
    tol = max(n, p) * np.finfo(np.float64).eps * float(s_host.max())
    small = s_host <= tol
    if np.any(small & (s_host > 0)):
        logger.debug("RidgeCV: %d singular value(s) of X at rounding level (<= %.3g) "
                     "taken as zero.", int(np.sum(small & (s_host > 0))), tol)
        keep = ops.asarray((~small).astype(np.float64))
        spec.s = spec.s * keep  # (Uᵀyw stays: the residual keeps that component whole)
        spec.lam = spec.lam * keep
        spec.dropped = True


@dataclass
class _GCVResult:
    alpha: object
    best_score: object
    coef: np.ndarray  # (t, p)
    X_offset: np.ndarray
    y_offset: np.ndarray
    cv_results: np.ndarray | None = None  # (n * t, n_alphas)


def _gcv_fit(ops, inp, y, sample_weight, alphas, *, fit_intercept, mode, alpha_per_target,
             scorer, score_params, store_cv_results, owner=None):
    """Leave-one-out errors (or predictions, with a scorer) for every alpha at once, the
    best alpha(s) by scikit-learn's rules, and the coefficients for them. ``owner``: the
    estimator named by the NaN/infinity error of an input not checked yet."""
    xp = ops.xp
    dtype = np.dtype(np.float64)
    design, yw, X_offset, y_offset, sqrt_sw = _preprocess(ops, inp, y, sample_weight,
                                                          fit_intercept, dtype, owner)
    spec = _decompose(ops, design, yw, mode, fit_intercept=fit_intercept)
    if spec.s is not None:
        _drop_rounding_singular_values(ops, spec)
    n, t = yw.shape
    n_alphas = len(alphas)
    a_dev = ops.asarray(np.asarray(alphas, dtype=dtype))
    inv = 1.0 / (spec.lam[:, None] + a_dev[None, :])  # (r, n_alphas)
    M = spec.M
    MM = M * M
    sw = 0.0
    if fit_intercept:  # the intercept's share of the hat matrix, w_i / Σw
        sw = (xp.ones(n, dtype=dtype) / n if sqrt_sw is None
              else sqrt_sw * sqrt_sw / (sqrt_sw @ sqrt_sw))
    # LOO error E = (yw - ŷ) / D with D = 1 - h, written E = (R0 + M (MtY ∘ G)) / D.
    if spec.orthonormal:
        # With U = M orthonormal: 1 - h_i = (1 - ‖U_i‖² - w_i/Σw) + Σ_j U_ij² α/(s_j²+α)
        # and yw - ŷ = (yw - U Uᵀyw) + U (α/(s²+α) ∘ Uᵀyw). When U spans all of the
        # space left by the intercept (n <= p) the first terms are exactly zero: both
        # are then sums of positive terms, free of the cancellation 1 - h has when h
        # is close to one (wide X, small alpha: it cost up to 1e-3 relative).
        G = _shrinkage(spec.lam[:, None], a_dev[None, :], xp)
        D = ops.matmul(MM, G)
        if M.shape[1] == n - (1 if fit_intercept else 0):
            R0 = None
        else:
            base = 1.0 - ops.matmul(MM, xp.ones((M.shape[1], 1), dtype=dtype)).ravel() - sw
            D += base[:, None]
            # yw - U Uᵀyw projected once more: the first projection leaves a component
            # in U's span of ε‖yw‖ (the residual is far smaller than yw when y is well
            # fitted); the second removes it (classical Gram-Schmidt twice), which
            # halves the worst error against the exact LOO on ill-conditioned data
            # (benchmarks/results/ridgecv_accuracy_refined_h200.json).
            R0 = yw - ops.matmul(M, spec.MtY)
            R0 -= ops.matmul(M, ops.matmul(M.T, R0))
    else:  # M = Xw V (the eigen route for n > p): h = (M ∘ M) @ 1/(lam + α)
        G = -inv
        D = 1.0 - ops.matmul(MM, inv)
        if fit_intercept:
            D -= sw[:, None]
        R0 = yw
    del MM
    refined = {}  # (alpha index, target) -> refined residual (n,)
    plan = _refine_plan(ops, design, spec, yw, R0, alphas)
    if plan:
        exact = _ExactResiduals(ops, inp, y, X_offset, y_offset, sqrt_sw, fit_intercept)
        for start in range(0, len(plan), 256):
            chunk = plan[start:start + 256]
            R = _refined_residuals(ops, spec, exact, [alphas[a] for a, _ in chunk],
                                   [t for _, t in chunk])
            refined.update({col: R[:, k] for k, col in enumerate(chunk)})
            del R
        del exact
    y_host = _host(y).astype(dtype, copy=False) if scorer is not None else None
    y_off_host = ops.to_host(y_offset)
    cv_results = np.empty((n * t, n_alphas), dtype=dtype) if store_cv_results else None
    need_errors = scorer is not None or store_cv_results
    ones = xp.full(n, 1.0 / n, dtype=dtype)

    def mean_squared(F, d=None):
        """Column means of ``(F / d)²`` by one GEMV (CuPy's axis-0 reductions are slow);
        ``F`` is overwritten."""
        F *= F
        return ops.to_host((ones if d is None else ones / (d * d)) @ F)

    def score(col):
        if alpha_per_target:
            return col if y.ndim == 2 else col[0]
        return float(np.mean(col))

    def finish(E, i):
        """Score (and store) the (n, t) LOO errors ``E`` of alpha ``i``."""
        if scorer is None:
            if store_cv_results:
                cv_results[:, i] = ops.to_host(E * E).ravel()
            return score(mean_squared(E))
        pred = yw - E
        if sqrt_sw is not None:
            pred /= sqrt_sw[:, None]
        pred = ops.to_host(pred) + y_off_host
        if store_cv_results:
            cv_results[:, i] = pred.ravel()
        identity = _IdentityRegressor()
        if y.ndim == 1:
            return scorer(identity, pred[:, 0], y_host, **score_params)
        if alpha_per_target:
            return np.asarray([scorer(identity, pred[:, j], y_host[:, j], **score_params)
                               for j in range(t)])
        return scorer(identity, pred, y_host, **score_params)

    scores = []
    if t == 1:
        # All alphas in one GEMM: column i of E is the LOO error for alpha i.
        E = ops.matmul(M, spec.MtY * G)
        if R0 is not None:
            E += R0
        for (i, _), r in refined.items():
            E[:, i] = r
        E /= D
        if need_errors:
            scores = [finish(E[:, i:i + 1], i) for i in range(n_alphas)]
        else:
            scores = [score(col[None]) for col in mean_squared(E)]
        del E
    else:
        for i in range(n_alphas):
            E = ops.matmul(M, spec.MtY * G[:, i:i + 1])
            if R0 is not None:
                E += R0
            for j in range(t):
                if (i, j) in refined:
                    E[:, j] = refined[i, j]
            if need_errors:
                scores.append(finish(E / D[:, i:i + 1], i))
            else:
                scores.append(score(mean_squared(E, D[:, i])))
            del E
    if scorer is None:
        scores = [-s for s in scores]

    per_target = alpha_per_target and t > 1
    best_alpha, best_score, chosen = _select_alphas(alphas, scores, per_target, t)
    if per_target:
        inv_best = inv[:, ops.asarray(chosen)]
    else:
        inv_best = xp.repeat(inv[:, chosen:chosen + 1], t, axis=1)
    coef = ops.to_host(spec.coef(design, inv_best)).T
    return _GCVResult(alpha=best_alpha, best_score=best_score, coef=coef,
                      X_offset=ops.to_host(X_offset), y_offset=y_off_host,
                      cv_results=cv_results)


def _select_alphas(alphas, scores, per_target, n_targets):
    """scikit-learn's selection: the first best alpha (per target when asked); returns
    (alpha_, best_score_, index or indices of the chosen alpha)."""
    best_alpha = best_score = chosen = None
    for i, (alpha, score) in enumerate(zip(alphas, scores)):
        if best_score is None:
            if per_target:
                best_score = np.array(score, dtype=np.float64).reshape(-1)
                best_alpha = np.full(n_targets, alpha)
                chosen = np.zeros(n_targets, dtype=int)
            else:
                best_score, best_alpha, chosen = score, alpha, i
        elif per_target:
            update = score > best_score
            best_score[update] = score[update]
            best_alpha[update] = alpha
            chosen[update] = i
        elif score > best_score:
            best_score, best_alpha, chosen = score, alpha, i
    return best_alpha, best_score, chosen


class RidgeCV(SklearnConversionMixin, _DevicePredictMixin, _SkRidgeCV):
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
    def fit(self, X: MatrixLike, y: ArrayLike,
            sample_weight: ArrayLike | float | None = None, **params: Any) -> RidgeCV:
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

        if self.cv is not None:
            if is_dask_collection(X):
                raise ValueError("With dask input RidgeCV supports cv=None (the "
                                 "efficient leave-one-out) only.")
            return self._fit_grid_search(X, y, alphas, scorer, params)
        if is_dask_collection(X):
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
        # Dense X keeps its float32 (converted to float64 on the backend: half the bytes
        # to the GPU, no host copy) and its NaN/infinity check is a sum on the backend
        # (_preprocess): on a search's folds of 400,000 x 64 float32 the host upcast and
        # check took ~40 ms a fit. Sparse X is validated as before.
        inp, y = prepare_xy(self, X, y, accept_sparse=("csr", "csc", "coo"),
                            dtype=("float64", "float32"), multi_output=True,
                            y_numeric=True, ensure_all_finite=False)
        if inp.sparse:  # checked in float64, as scikit-learn's message says
            data = inp.data.tocsr()
            inp = inp.with_data(data if data.dtype == np.float64 else data.astype(np.float64))
            inp = inp.checked_finite(self)
        X = inp.data
        if sample_weight is not None:
            sample_weight = _check_sample_weight(_host(sample_weight), X, dtype=np.float64,
                                                 ensure_non_negative=True)
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
            n = X.shape[0]
            shape = (n, len(alpha_list)) if y.ndim == 1 else (n, y.shape[1],
                                                              len(alpha_list))
            cv = result.cv_results.reshape(shape)
            self.cv_results_ = (cv if original_dtype is None
                                else cv.astype(original_dtype, copy=False))
        self.backend_ = backend.name
        return self

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
            mse, V, MtY, inv, mean, y_mean, n = ridgecv_loo(X, y, inp.sample_weight,
                                                            alpha_list, self.fit_intercept)
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
        tags.array_api_support = False
        return tags
