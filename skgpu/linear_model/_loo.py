"""RidgeCV's efficient leave-one-out (and GCV) from the spectrum of the design: every
alpha's hat diagonal and residuals at once, residuals refined against X as given where
float64 loses them (ill-conditioned tall X), and the choice of alpha.
"""


import logging
import warnings
from dataclasses import dataclass

import numpy as np

from ..utils._sklearn_private import (
    _IdentityRegressor,
)
from ._spectrum import _decompose, _host, _preprocess, rescaled_solve

logger = logging.getLogger("skgpu")

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
    r: 4e-12–2e-10 against 1e-8–1e-7; the probe ``ridgecv_error_parts``,
    benchmarks/README.md)."""
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
    dtype = np.dtype(np.float64)
    design, yw, X_offset, y_offset, sqrt_sw = _preprocess(ops, inp, y, sample_weight,
                                                          fit_intercept, dtype, owner)
    spec = _decompose(ops, design, yw, mode, fit_intercept=fit_intercept)
    if spec.s is not None:
        _drop_rounding_singular_values(ops, spec)
    a_dev = ops.asarray(np.asarray(alphas, dtype=dtype))
    inv = 1.0 / (spec.lam[:, None] + a_dev[None, :])  # (r, n_alphas)
    G, D, R0 = _loo_parts(ops, spec, yw, sqrt_sw, a_dev, inv, fit_intercept)
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
    scoring = _LOOScoring(ops, y, yw, sqrt_sw, ops.to_host(y_offset), scorer, score_params,
                          store_cv_results, alpha_per_target, len(alphas))
    scores = scoring.scores(spec, G, D, R0, refined)
    t = yw.shape[1]
    per_target = alpha_per_target and t > 1
    best_alpha, best_score, chosen = _select_alphas(alphas, scores, per_target, t)
    if per_target:
        inv_best = inv[:, ops.asarray(chosen)]
    else:
        inv_best = ops.xp.repeat(inv[:, chosen:chosen + 1], t, axis=1)
    coef = ops.to_host(spec.coef(design, inv_best)).T
    if _badly_scaled(ops, design, spec):
        # the spectrum's coefficients lose the small columns' digits
        exact = rescaled_solve(ops, design, yw, np.broadcast_to(
            np.asarray(best_alpha, dtype=dtype), (t,)))
        if exact is not None:
            coef = ops.to_host(exact).T
    return _GCVResult(alpha=best_alpha, best_score=best_score, coef=coef,
                      X_offset=ops.to_host(X_offset), y_offset=scoring.y_offset,
                      cv_results=scoring.cv_results)


#: Ratio of the largest to the smallest nonzero column norm of the design beyond which
#: RidgeCV's coefficients for the chosen alpha are solved again scaling-invariantly
#: (:func:`._spectrum.rescaled_solve`): beyond it the spectrum's coefficients lose the
#: smallest column's leading digits, the Gram's eigenvectors soonest
#: (``tests/test_ridge_scaling.py`` holds them to exact rational solutions).
_SCALE_SPREAD = 1e4


def _badly_scaled(ops, design, spec):
    """Whether the tall design's columns differ in norm by more than ``_SCALE_SPREAD``,
    read from the spectrum (``diag(XwᵀXw) = (V ∘ V) lam``: no pass over X). A small
    column's norm comes out as rounding there, which only makes the spread look larger,
    and the coefficients are then solved again where they did not need to be."""
    n, p = design.shape
    if n < p or spec.V is None:
        return False
    squares = ops.to_host((spec.V * spec.V) @ spec.lam)
    norms = np.sqrt(np.maximum(squares, 0.0))
    norms = norms[norms > 0]
    return norms.size > 1 and float(norms.max()) > _SCALE_SPREAD * float(norms.min())


def _loo_parts(ops, spec, yw, sqrt_sw, a_dev, inv, fit_intercept):
    """``(G, D, R0)`` with the leave-one-out errors of every alpha ``E = (R0 + M (MtY ∘
    G)) / D`` (D = 1 - h, the hat matrix's diagonal; R0 None where it is zero)."""
    xp = ops.xp
    dtype = np.dtype(np.float64)
    n = yw.shape[0]
    M = spec.M
    MM = M * M
    sw = 0.0
    if fit_intercept:  # the intercept's share of the hat matrix, w_i / Σw
        sw = (xp.ones(n, dtype=dtype) / n if sqrt_sw is None
              else sqrt_sw * sqrt_sw / (sqrt_sw @ sqrt_sw))
    if not spec.orthonormal:  # M = Xw V (the eigen route for n > p): h = (M ∘ M) @ inv
        D = 1.0 - ops.matmul(MM, inv)
        if fit_intercept:
            D -= sw[:, None]
        return -inv, D, yw
    # With U = M orthonormal: 1 - h_i = (1 - ‖U_i‖² - w_i/Σw) + Σ_j U_ij² α/(s_j²+α) and
    # yw - ŷ = (yw - U Uᵀyw) + U (α/(s²+α) ∘ Uᵀyw). When U spans all of the space left
    # by the intercept (n <= p) the first terms are exactly zero: both are then sums of
    # positive terms, free of the cancellation 1 - h has when h is close to one (wide X,
    # small alpha: it cost up to 1e-3 relative).
    G = _shrinkage(spec.lam[:, None], a_dev[None, :], xp)
    if M.shape[1] == n - (1 if fit_intercept else 0):
        return G, ops.matmul(MM, G), None
    # ‖U_i‖² beside the sums of every alpha: one pass over M ∘ M
    D = ops.matmul(MM, xp.concatenate([G, xp.ones((M.shape[1], 1), dtype=dtype)], axis=1))
    base = 1.0 - D[:, -1] - sw
    D = D[:, :-1]
    D += base[:, None]
    # yw - U Uᵀyw projected once more: the first projection leaves a component in U's
    # span of ε‖yw‖ (the residual is far smaller than yw when y is well fitted); the
    # second removes it (classical Gram-Schmidt twice), which halves the worst error
    # against the exact LOO on ill-conditioned data
    # (benchmarks/results/ridgecv_accuracy_refined_h200.json).
    R0 = yw - ops.matmul(M, spec.MtY)
    R0 -= ops.matmul(M, ops.matmul(M.T, R0))
    return G, D, R0


class _LOOScoring:
    """Scores of the leave-one-out errors, alpha by alpha, by scikit-learn's rules: the
    mean squared error, or ``scorer`` on the leave-one-out predictions; stores
    ``cv_results`` when asked."""

    def __init__(self, ops, y, yw, sqrt_sw, y_offset, scorer, score_params,
                 store_cv_results, alpha_per_target, n_alphas):
        dtype = np.dtype(np.float64)
        n, t = yw.shape
        self.ops, self.y, self.yw, self.sqrt_sw = ops, y, yw, sqrt_sw
        self.y_offset = y_offset
        self.scorer, self.score_params = scorer, score_params
        self.alpha_per_target, self.n_alphas = alpha_per_target, n_alphas
        self.y_host = _host(y).astype(dtype, copy=False) if scorer is not None else None
        self.store = store_cv_results
        self.cv_results = (np.empty((n * t, n_alphas), dtype=dtype) if store_cv_results
                           else None)
        self.need_errors = scorer is not None or store_cv_results
        self.ones = ops.xp.full(n, 1.0 / n, dtype=dtype)

    def mean_squared(self, F, d=None):
        """Column means of ``(F / d)²`` by one GEMV (CuPy's axis-0 reductions are slow);
        ``F`` is overwritten."""
        F *= F
        return self.ops.to_host((self.ones if d is None else self.ones / (d * d)) @ F)

    def score(self, col):
        if self.alpha_per_target:
            return col if self.y.ndim == 2 else col[0]
        return float(np.mean(col))

    def finish(self, E, i):
        """Score (and store) the (n, t) LOO errors ``E`` of alpha ``i``."""
        ops, y = self.ops, self.y
        if self.scorer is None:
            if self.store:
                self.cv_results[:, i] = ops.to_host(E * E).ravel()
            return self.score(self.mean_squared(E))
        pred = self.yw - E
        if self.sqrt_sw is not None:
            pred /= self.sqrt_sw[:, None]
        pred = ops.to_host(pred) + self.y_offset
        if self.store:
            self.cv_results[:, i] = pred.ravel()
        identity, scorer, params, y_host = (_IdentityRegressor(), self.scorer,
                                            self.score_params, self.y_host)
        if y.ndim == 1:
            return scorer(identity, pred[:, 0], y_host, **params)
        if self.alpha_per_target:
            return np.asarray([scorer(identity, pred[:, j], y_host[:, j], **params)
                               for j in range(pred.shape[1])])
        return scorer(identity, pred, y_host, **params)

    def scores(self, spec, G, D, R0, refined):
        """Every alpha's score (negated errors without a scorer: larger is better)."""
        ops, M = self.ops, spec.M
        t = self.yw.shape[1]
        scores = []
        if t == 1:
            # All alphas in one GEMM: column i of E is the LOO error for alpha i.
            E = ops.matmul(M, spec.MtY * G)
            if R0 is not None:
                E += R0
            for (i, _), r in refined.items():
                E[:, i] = r
            E /= D
            if self.need_errors:
                scores = [self.finish(E[:, i:i + 1], i) for i in range(self.n_alphas)]
            else:
                scores = [self.score(col[None]) for col in self.mean_squared(E)]
            del E
        else:
            for i in range(self.n_alphas):
                E = ops.matmul(M, spec.MtY * G[:, i:i + 1])
                if R0 is not None:
                    E += R0
                for j in range(t):
                    if (i, j) in refined:
                        E[:, j] = refined[i, j]
                if self.need_errors:
                    scores.append(self.finish(E / D[:, i:i + 1], i))
                else:
                    scores.append(self.score(self.mean_squared(E, D[:, i])))
                del E
        return scores if self.scorer is not None else [-s for s in scores]


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


