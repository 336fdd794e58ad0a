"""Ridge's linear algebra on the backend seam: the centred, weighted design (dense, or
sparse with the centring carried through every product), its spectrum and deflation, the
checks of alphas and conditioning, and Ridge's solve.

Notation: ``Xw = diag(√w) (X - 1 x̄ᵀ)`` and ``yw = diag(√w) (y - ȳ)`` are the centred,
weighted data scikit-learn's leave-one-out works on (``w`` the sample weights, one when
absent; no centring without an intercept). For sparse X the centring is never applied to
the matrix: :class:`_Design` carries it through every product.
"""


import logging
import warnings
from dataclasses import dataclass

import numpy as np

from ..backends import centre_columns
from ..backends import (
    is_device_array,
    to_numpy,
)
from ..utils.validation import (
    assert_all_finite,
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
    sparse = inp.sparse
    on_device = ops.memory == "device"
    # On the GPU a dense X's column sums, which the centring takes anyway, are not finite
    # where X is not (NaN or infinity propagates through the sums of x - x₀): the check
    # then reads X only where they say so (or where a finite X's sums overflow).
    deferred = (not inp.finite and on_device and fit_intercept and not sparse
                and X.shape[0] > 0 and X.flags.c_contiguous)
    if not inp.finite and not deferred:  # on the converted X (scikit-learn's message
        # names float64): one fused sum on the GPU, scikit-learn's check on the CPU
        assert_all_finite(X, owner, on_device=on_device)
    y = ops.asarray(y, dtype=dtype)
    y2 = y.reshape(-1, 1) if y.ndim == 1 else y
    n, p = X.shape
    sw = None if sample_weight is None else ops.asarray(sample_weight, dtype=dtype)
    if fit_intercept:
        if sparse:
            X_offset = ops.column_mean(X, sw)
        else:
            given = X
            X, X_offset = centre_columns(ops, X, sw)
            if deferred and not np.isfinite(float(X_offset @ X_offset)):
                assert_all_finite(given, owner, on_device=True)
            del given
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
            if need_u:
                M, s, Vt = ops.svd_tall(design.X)
                MtY = ops.matmul(M.T, yw)
            else:
                Q, R = ops.qr(design.X)
                Ut, s, Vt = ops.svd(R)
                M = None
                MtY = ops.matmul(Ut.T, ops.matmul(Q.T, yw))
                del Q
            V = Vt.T
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
    tried_normal_equations = solver == "cholesky"
    if solver == "cholesky":
        kernel = p > n
        A = design.gram_samples() if kernel else design.gram_features()
        B = yw if kernel else design.rmatmul(yw)
        _require_finite(ops, A, inp.data, inp.sparse, "Ridge.fit")
        try:
            sol = normal_equations_solve(ops, A, B, alphas)
            coef = design.rmatmul(sol) if kernel else sol
        except LinAlgError:
            solver = "svd"
    if solver == "svd" and n >= p:
        # (after a failed 'cholesky' the same normal equations would fail again)
        coef = rescaled_solve(ops, design, yw, alphas,
                              normal_equations=not tried_normal_equations)
    if solver == "svd" and coef is None:
        # sparse X has no QR here: its fallback is the Gram's eigendecomposition (the
        # normal equations' accuracy, with the pseudo-inverse rule below); alpha = 0
        # needs the pseudo-inverse rule, wide X the n-sized spectrum
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


def normal_equations_solve(ops, A, B, alphas, rcond_floor=None):
    """``(A + αI)⁻¹ B`` column by column (alpha per column of B) by Cholesky, whose
    accuracy is that of the matrix equilibrated by its diagonal; raises LinAlgError (with
    scikit-learn's warning) where that is singular to rounding, or (no warning) where its
    reciprocal condition estimate is below ``rcond_floor`` (:func:`_check_conditioning`)."""
    xp = ops.xp
    dtype = np.dtype(A.dtype)
    sol = xp.empty_like(B)
    eye = xp.eye(A.shape[0], dtype=dtype)
    for a in np.unique(alphas):
        cols = np.flatnonzero(alphas == a)
        M = A + dtype.type(a) * eye
        scale = ops.to_host(xp.sqrt(xp.diag(M)))
        factor = ops.cholesky(M, what="regularised Gram matrix")
        _check_conditioning(ops, factor, dtype, scale, rcond_floor)
        sol[:, cols] = factor.solve(B[:, cols])
    return sol


def rescaled_solve(ops, design, yw, alphas, normal_equations=True):
    """Ridge's coefficients (p, t) for a tall design and finite positive alphas, solved
    scaling-invariantly, or None where no such route is accurate to √ε (then only the
    spectral route, which drops near-null directions, answers well).

    The SVD of Xw, and the spectra RidgeCV uses, are not scaling-invariant: at column
    scales spread over 1e±8 the smallest column's coefficient came out wrong in every
    digit (scikit-learn's in most of them). Cholesky of the
    normal equations is as accurate as they are conditioned once equilibrated by their
    diagonal (van der Sluis), and is taken where that is 1/√ε or better; then a QR of the
    column-equilibrated augmented matrix (the square root of that conditioning) for dense
    X. ``normal_equations=False`` goes straight to the QR (the caller's Cholesky of the
    same matrix failed already).
    """
    from numpy.linalg import LinAlgError

    if not (np.all(np.isfinite(alphas)) and np.all(alphas > 0)):
        return None
    floor = float(np.sqrt(np.finfo(yw.dtype).eps))
    if normal_equations:
        try:
            return normal_equations_solve(ops, design.gram_features(),
                                          design.rmatmul(yw), alphas, rcond_floor=floor)
        except LinAlgError:
            pass
    return None if design.sparse else _augmented_qr_solve(ops, design, yw, alphas)


def _augmented_qr_solve(ops, design, yw, alphas):
    """Ridge's coefficients (p, t) for a dense tall ``Xw`` and positive alphas as the
    least-squares solution of ``[Xw; √α I] w ≈ [yw; 0]``, by a QR factorisation of that
    matrix with its columns scaled to unit norm (column j by ``√(‖x_j‖² + α)``): as
    accurate as that scaled matrix is conditioned, the square root of the equilibrated
    normal equations' conditioning. Where it is singular to √ε (R's diagonal, min over
    max), None: the coefficients along its near-null directions would be large and
    cancel in the predictions, and the spectral route, which drops those directions, is
    the better answer.
    """
    xp = ops.xp
    n, p = design.shape
    X = design.X
    coef = xp.empty((p, yw.shape[1]), dtype=yw.dtype)
    norms2 = xp.sum(X * X, axis=0)
    for a in np.unique(alphas):
        cols = np.flatnonzero(alphas == a)
        s = xp.sqrt(norms2 + X.dtype.type(a))
        A = xp.concatenate([X / s, xp.diag(X.dtype.type(np.sqrt(a)) / s)])
        Q, R = ops.qr(A)
        d = ops.to_host(xp.abs(xp.diag(R)))
        if not float(np.min(d)) >= np.sqrt(np.finfo(d.dtype).eps) * float(np.max(d)):
            return None
        b = ops.matmul(Q[:n].T, xp.ascontiguousarray(yw[:, cols]))
        # R upper triangular: R z = b is the lower-triangular solve of the flipped system
        z = ops.solve_triangular(xp.ascontiguousarray(R[::-1, ::-1]),
                                 xp.ascontiguousarray(b[::-1]))[::-1]
        coef[:, cols] = z / s[:, None]
    return coef


def _check_conditioning(ops, factor, dtype, scale, rcond_floor=None):
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
    if rcond_floor is not None and rcond < rcond_floor:
        raise LinAlgError("regularised Gram matrix conditioned worse than asked")
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

def _host(a):
    """A device array on the host; anything else (None, scalars, lists) unchanged."""
    return to_numpy(a) if is_device_array(a) else a
