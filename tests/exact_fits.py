"""Exact fits of PCA, TruncatedSVD, Ridge and RidgeCV, for comparing two float64 fits
(the Dask and the in-memory one) against the truth, and the rounding floor below which
no float64 fit can be held to account.

Every quantity is computed from the data as given (float64, or float32 widened exactly)
in python-flint's ball arithmetic at several hundred bits: centring, Gram matrices and
solves are exact to far beyond float64, and the eigendecompositions are of those exact
matrices (flint's high-precision ``approx`` eigensolver, which also takes repeated
eigenvalues). The results are rounded to float64 once.

The floors (:func:`floors`) follow from first-order perturbation theory for a backward
stable float64 computation on the data: the data's rounding at its own magnitude
(ε·max|X| an entry, which centring far from the origin incurs), carried to each
attribute (an eigenvalue moves by ‖E‖(2σ₁ + ‖E‖), an eigenvector by that over its gap,
a solve by that over its smallest eigenvalue).
"""

from types import SimpleNamespace

import numpy as np
from exact_loo import _flint, _mat, _rescaled, exact_loo_errors

#: Bits of working precision beyond the data's dynamic range.
_BITS = 256
#: The constant in front of every floor: the arithmetic's own ~√(np) is written out,
#: this covers the rest (several roundings an entry, the eigensolvers' constants).
_C = 16.0


def _precision(*arrays):
    values = np.concatenate([np.abs(np.ravel(a)) for a in arrays if a is not None])
    values = values[values > 0]
    if not values.size:
        return _BITS
    return _BITS + 4 * int(np.ceil(np.log2(values.max() / values.min()) + 1))


class _Precision:
    def __init__(self, *arrays):
        self.prec = _precision(*arrays)

    def __enter__(self):
        f = _flint()
        self.old = f.ctx.prec
        f.ctx.prec = self.prec
        return f

    def __exit__(self, *exc):
        _flint().ctx.prec = self.old


def _eigh(f, M):
    """Eigenvalues (descending, float64) and eigenvectors (rows, float64, unit) of the
    symmetric arb matrix M, and the eigenvectors as arb columns (for exact products)."""
    E, R = f.acb_mat(M).eig(right=True, algorithm="approx")
    p = M.nrows()
    lam = [E[i].real for i in range(p)]
    order = sorted(range(p), key=lambda i: -float(lam[i].mid()))
    vectors = []
    for i in order:
        col = [R[r, i].real for r in range(p)]
        norm = sum((c * c for c in col), f.arb(0)).sqrt()
        vectors.append([c / norm for c in col])
    values = np.array([float(lam[i].mid()) for i in order])
    V = np.array([[float(c.mid()) for c in v] for v in vectors])
    return values, V, vectors


def _centred(f, Xa, n, p):
    mean = [sum((Xa[i, j] for i in range(n)), f.arb(0)) / n for j in range(p)]
    Xc = f.arb_mat(n, p, [Xa[i, j] - mean[j] for i in range(n) for j in range(p)])
    return mean, Xc


def exact_pca(X, n_components):
    """PCA's attributes (scikit-learn's definitions, ddof 1) for the data as given."""
    X = np.asarray(X, dtype=np.float64)
    n, p = X.shape
    with _Precision(X) as f:
        mean, Xc = _centred(f, _mat(X), n, p)
        C = Xc.transpose() * Xc
        lam, V, _ = _eigh(f, C)
        total = float(sum((C[j, j] for j in range(p)), f.arb(0)).mid()) / (n - 1)
        mean = np.array([float(m.mid()) for m in mean])
    lam = np.maximum(lam, 0.0)
    k = n_components
    ev = lam / (n - 1)
    rest = ev[k:min(n, p)]
    with np.errstate(divide="ignore", invalid="ignore"):  # (no spread: 0 / 0)
        ratio = ev[:k] / total
    return SimpleNamespace(
        mean_=mean, components_=V[:k], singular_values_=np.sqrt(lam[:k]),
        explained_variance_=ev[:k], explained_variance_ratio_=ratio,
        noise_variance_=float(rest.mean()) if rest.size else 0.0,
        _eigenvalues=lam, _centred_eigenvalues=lam, _total=total)


def exact_truncated_svd(X, n_components):
    """TruncatedSVD's attributes (the uncentred SVD; variances ddof 0)."""
    X = np.asarray(X, dtype=np.float64)
    n, p = X.shape
    k = n_components
    with _Precision(X) as f:
        Xa = _mat(X)
        lam, V, vectors = _eigh(f, Xa.transpose() * Xa)
        _, Xc = _centred(f, Xa, n, p)
        Cc = Xc.transpose() * Xc
        explained = []
        for v in vectors[:k]:
            col = f.arb_mat(p, 1, v)
            explained.append(float(((col.transpose() * Cc * col)[0, 0] / n).mid()))
        total = float(sum((Cc[j, j] for j in range(p)), f.arb(0)).mid()) / n
        centred_lam = _eigh(f, Cc)[0]
    explained = np.array(explained)
    with np.errstate(divide="ignore", invalid="ignore"):  # (no spread: 0 / 0)
        ratio = explained / total
    return SimpleNamespace(
        components_=V[:k], singular_values_=np.sqrt(np.maximum(lam[:k], 0.0)),
        explained_variance_=explained, explained_variance_ratio_=ratio,
        _eigenvalues=np.maximum(lam, 0.0), _centred_eigenvalues=np.maximum(centred_lam, 0.0),
        _total=total)


def _ridge(f, X, Y, w, alphas, n, p, t):
    """Coefficients (t, p), intercepts (t,) and the centred Gram's eigenvalues of the
    weighted ridge fit with an intercept, penalty ``alphas[k]`` for target k."""
    Z, z, _, _, x_mean, y_mean = _rescaled(f, X, Y, w, True)
    G = Z.transpose() * Z
    rhs = Z.transpose() * z
    coef = np.empty((t, p))
    intercept = np.empty(t)
    for k in range(t):
        A = G + f.arb_mat(p, p, [f.arb(float(alphas[k])) if i == j else 0
                                 for i in range(p) for j in range(p)])
        b = f.arb_mat(p, 1, [rhs[j, k] for j in range(p)])
        c = A.solve(b)
        coef[k] = [float(c[j, 0].mid()) for j in range(p)]
        intercept[k] = float((y_mean[k] - sum((x_mean[j] * c[j, 0] for j in range(p)),
                                              f.arb(0))).mid())
    lam = np.maximum(_eigh(f, G)[0], 0.0)
    return coef, intercept, lam


def exact_ridge(X, Y, alpha, sample_weight=None):
    """Ridge's ``coef_`` and ``intercept_`` (fit_intercept=True), ``alpha`` a scalar or
    one per target; Y of one or two dimensions, as scikit-learn shapes them."""
    X = np.asarray(X, dtype=np.float64)
    one_d = np.ndim(Y) == 1
    Y2 = np.asarray(Y, dtype=np.float64).reshape(len(X), -1)
    n, p = X.shape
    t = Y2.shape[1]
    alphas = np.broadcast_to(np.asarray(alpha, dtype=np.float64), (t,))
    with _Precision(X, Y2, sample_weight, alphas) as f:
        coef, intercept, lam = _ridge(f, X, Y2, sample_weight, alphas, n, p, t)
    return _ridge_namespace(coef, intercept, lam, alphas, one_d, X, Y2, sample_weight)


def _ridge_namespace(coef, intercept, lam, alphas, one_d, X, Y, w, **more):
    return SimpleNamespace(
        coef_=coef[0] if one_d else coef,
        intercept_=float(intercept[0]) if one_d else intercept,
        _coef2=coef, _eigenvalues=lam, _alphas=alphas, _X=X, _Y=Y, _w=w, **more)


def exact_ridgecv(X, Y, alphas, sample_weight=None, alpha_per_target=False):
    """RidgeCV's leave-one-out fit (gcv, fit_intercept=True, no scorer): ``alpha_``,
    ``best_score_`` (minus the mean squared leave-one-out error, in scikit-learn's
    rescaled convention, :func:`exact_loo.exact_loo_errors`), ``coef_``,
    ``intercept_``."""
    X = np.asarray(X, dtype=np.float64)
    one_d = np.ndim(Y) == 1
    Y2 = np.asarray(Y, dtype=np.float64).reshape(len(X), -1)
    n, p = X.shape
    t = Y2.shape[1]
    errors = exact_loo_errors(X, Y2, alphas, sample_weight, True) ** 2  # (n, t, a)
    alphas = np.asarray(alphas, dtype=np.float64)
    if alpha_per_target and t > 1:
        mse = errors.mean(axis=0)  # (t, a)
        best = np.argmin(mse, axis=1)
        chosen = alphas[best]
        alpha_, score = chosen, -mse[np.arange(t), best]
    else:
        mse = errors.mean(axis=(0, 1))
        best = int(np.argmin(mse))
        chosen = np.full(t, alphas[best])
        alpha_, score = float(alphas[best]), float(-mse[best])
        if alpha_per_target:  # one target: scikit-learn's arrays of one
            alpha_, score = np.array([alpha_]), np.array([score])
    with _Precision(X, Y2, sample_weight, alphas) as f:
        coef, intercept, lam = _ridge(f, X, Y2, sample_weight, chosen, n, p, t)
    return _ridge_namespace(coef, intercept, lam, chosen, one_d, X, Y2, sample_weight,
                            alpha_=alpha_, best_score_=score, _mse=mse)


def floors(exact, X, eps):
    """Per attribute, the error a backward stable fit in arithmetic of unit roundoff
    ``eps`` may make on this data (arrays of the attributes' sizes)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return _floors(exact, X, eps)


def _floors(exact, X, eps):
    X = np.asarray(X, dtype=np.float64)
    n, p = X.shape
    big = float(np.max(np.abs(X), initial=0.0))
    lam = exact._eigenvalues
    sigma1 = float(np.sqrt(lam[0]))
    # the data's rounding at its own scale, as a matrix norm; a fit's Gram eigenvalues
    # move by ‖E‖(2σ₁ + ‖E‖)
    E = _C * eps * (np.sqrt(n * p) * big + sigma1)
    d_lam = E * (2 * sigma1 + E)
    out = {}
    if hasattr(exact, "components_"):
        k = exact.components_.shape[0]
        gaps = np.array([np.min(np.abs(np.delete(lam, j) - lam[j]), initial=np.inf)
                         for j in range(k)])
        d_v = np.minimum(d_lam / np.maximum(gaps, 1e-300), 2.0)
        out["components_"] = np.repeat(d_v[:, None], p, axis=1)
        out["singular_values_"] = np.full(k, E)
        # the centred spread's rounding for the variances
        lam_c = exact._centred_eigenvalues
        Ec = _C * eps * (np.sqrt(n * p) * big + float(np.sqrt(lam_c[0])))
        d_lam_c = Ec * (2 * float(np.sqrt(lam_c[0])) + Ec)
        ddof = n - 1 if hasattr(exact, "mean_") else n
        d_ev = (d_lam_c + 2 * lam_c[0] * d_v) / ddof
        out["explained_variance_"] = d_ev
        d_total = d_lam_c * p / ddof
        ev = exact.explained_variance_
        out["explained_variance_ratio_"] = (d_ev + ev * d_total / exact._total) / exact._total
        if hasattr(exact, "mean_"):
            out["mean_"] = np.full(p, _C * eps * big)
            out["noise_variance_"] = d_lam_c / ddof
        return out
    # ridge: the centred, weighted Gram's eigenvalues move by d_lam, the right-hand side
    # by its rounding; the solve divides by its smallest eigenvalue plus the penalty
    Y, w = exact._Y, exact._w
    sw = np.ones(n) if w is None else np.sqrt(np.asarray(w, dtype=np.float64))
    ybig = np.max(np.abs(Y), axis=0)
    E = _C * eps * (np.sqrt(n * p) * big * sw.max() + sigma1)
    d_lam = E * (2 * sigma1 + E)
    coef = exact._coef2
    norms = np.linalg.norm(coef, axis=1)
    d_rhs = E * _C * eps * np.sqrt(n) * ybig * sw.max() + E * np.sqrt(n) * ybig * sw.max()
    d_coef = (d_lam * norms + d_rhs) / (lam[-1] + exact._alphas)
    x_mean = np.abs(np.average(X, axis=0, weights=w))
    d_intercept = (_C * eps * (ybig + x_mean @ np.abs(coef).T)
                   + np.linalg.norm(x_mean) * d_coef)
    one_d = np.ndim(exact.coef_) == 1
    out["coef_"] = d_coef[0] * np.ones(p) if one_d else d_coef[:, None] * np.ones(p)
    out["intercept_"] = d_intercept[0] if one_d else d_intercept
    if hasattr(exact, "best_score_"):
        # a residual's rounding carried to the mean squared error
        d_res = _C * eps * (ybig.max() + big * np.abs(coef).sum(axis=1).max()) * sw.max()
        score = np.abs(np.asarray(exact.best_score_, dtype=np.float64))
        out["best_score_"] = 2 * np.sqrt(score) * d_res + d_res**2 + 1e-12 * score
    return out
