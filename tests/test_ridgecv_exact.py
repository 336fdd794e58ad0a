"""RidgeCV's leave-one-out against exact references.

The references are computed in ball arithmetic from the float64 data as given
(``exact_loo.py``, python-flint): correct to the last bit whatever the conditioning. The
target: within 1e-6 (relative, worst sample; samples whose LOO error is at the rounding
level of y measured against that level, see ``exact_loo.relative_error``) on both
backends, for tall X up to cond 1e10 and for wide X, with and without intercept, sample
weights and several targets; and never worse than scikit-learn's ``gcv_mode='svd'`` on
the same case (or within 1e-9, where both are exact to the measure's own level). Both
float64 methods share a rounding floor of ~1e-8 at cond 1e10 (the exact errors move that
much when X changes by a rounding); skgpu refines ill-conditioned tall cases against X as
given (``_refined_residuals``), to ~1e-9 and below.
"""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import DEVICES
from sklearn.datasets import make_regression
from sklearn.linear_model import Ridge as SkRidge
from sklearn.linear_model import RidgeCV as SkRidgeCV

import skgpu
from skgpu.linear_model import Ridge, RidgeCV

pytest.importorskip("flint")
from exact_loo import exact_loo_errors, relative_error, spectrum_matrix  # noqa: E402


def _fit(cls, device, X, y, sw, **params):
    with skgpu.config_context(device=device), warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return cls(store_cv_results=True, **params).fit(X, y, sample_weight=sw)


def _exact_squared(X, y, alphas, sw, fit_intercept):
    E = exact_loo_errors(X, y, alphas, sw, fit_intercept) ** 2
    return E if np.ndim(y) == 2 else E[:, 0, :]


def _tall_case(rng, n, p, fit_intercept, weighted, targets, smin_exp=-10):
    X = spectrum_matrix(rng, n, p, smin_exp)  # cond 10**-smin_exp
    W = rng.standard_normal((p, targets))
    Y = X @ W + 1e-6 * rng.standard_normal((n, targets))
    if fit_intercept:
        X = X + rng.uniform(-3, 3, p)
        Y = Y + rng.uniform(-3, 3, targets)
    sw = rng.uniform(0.2, 3.0, n) if weighted else None
    return X, (Y[:, 0] if targets == 1 else Y), sw


def _assert_exact_and_beside_sklearn(device, X, y, sw, alphas, fit_intercept):
    """Within 1e-6 of the exact LOO errors, and no worse than scikit-learn's
    ``gcv_mode='svd'`` on the same case (or within 1e-9); returns our error."""
    exact = _exact_squared(X, y, alphas, sw, fit_intercept)
    ours = _fit(RidgeCV, device, X, y, sw, alphas=alphas, fit_intercept=fit_intercept)
    theirs = _fit(SkRidgeCV, "cpu", X, y, sw, alphas=alphas, fit_intercept=fit_intercept,
                  gcv_mode="svd")
    err = relative_error(ours.cv_results_, exact, y, sw, fit_intercept)
    assert err <= 1e-6
    reference = relative_error(theirs.cv_results_, exact, y, sw, fit_intercept)
    assert err <= max(reference, 1e-9)
    return err


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape,alpha,smin_exp", [((120, 8), 1e-14, -10),
                                                  ((400, 20), 1e-13, -10),
                                                  ((400, 20), 1e-9, -6)])
@pytest.mark.parametrize("fit_intercept,weighted,targets",
                         [(False, False, 1), (True, False, 1), (True, True, 2),
                          (False, True, 3)])
def test_tall_ill_conditioned_loo_is_exact(device, rng, shape, alpha, smin_exp,
                                           fit_intercept, weighted, targets):
    """cond 1e10 (Householder QR on the GPU) and cond 1e6 (CholeskyQR2 there): refined,
    within 1e-8 of exact (float64's floor at cond 1e10 is ~1e-8 to 1e-7)."""
    X, y, sw = _tall_case(rng, *shape, fit_intercept, weighted, targets, smin_exp)
    err = _assert_exact_and_beside_sklearn(device, X, y, sw, [alpha, 1e-8, 1e-3],
                                           fit_intercept)
    assert err <= 1e-8


@pytest.mark.parametrize("ill", [False, True])
def test_refinement_is_chosen_by_the_error_estimate(ill):
    """Refinement is for the columns whose float64 residual is estimated inaccurate: none
    for a well-conditioned, noisy problem (the speed benchmark's kind), the small alphas
    of an ill-conditioned well-fitted one; never where it cannot converge."""
    from skgpu.linear_model._loo import (
        _REFINE_KAPPA_LIMIT, _REFINE_TOLERANCE, _residual_error_estimate)

    rng = np.random.default_rng(3)
    n, p = 500, 12
    alphas = [1e-13, 1e-8, 1e-3, 10.0]
    if ill:
        X, y, _ = _tall_case(rng, n, p, False, False, 1)
    else:
        X = rng.standard_normal((n, p))
        y = X @ rng.standard_normal(p) + rng.standard_normal(n)
    U, s, _ = np.linalg.svd(X, full_matrices=False)
    MtY = U.T @ y[:, None]
    r0 = np.linalg.norm(y - U @ MtY[:, 0])
    est, growth = _residual_error_estimate(s, alphas, MtY, [r0], [np.linalg.norm(y)])
    refine = (est[:, 0] > _REFINE_TOLERANCE) & (growth < _REFINE_KAPPA_LIMIT)
    if ill:
        assert refine.tolist() == [True, True, False, False]
    else:
        assert not refine.any()
        assert np.all(est < 1e-13)


@pytest.mark.parametrize("device", DEVICES)
def test_issue_case_2000x40(device):
    """The issue's first case: 7e-2 on the CPU and 1.2 on the GPU before."""
    rng = np.random.default_rng(2000)
    X, y, sw = _tall_case(rng, 2000, 40, False, False, 1)
    _assert_exact_and_beside_sklearn(device, X, y, sw, [1e-13], False)


def _naive_loo(X, y, alphas, sw, fit_intercept):
    """Squared LOO errors by refitting Ridge n times (scikit-learn's rescaled
    convention: √w_i (y_i - ŷ_{-i}))."""
    n = X.shape[0]
    Y = y.reshape(n, -1)
    w = np.ones(n) if sw is None else sw
    out = np.empty((n, Y.shape[1], len(alphas)))
    for k, alpha in enumerate(alphas):
        for i in range(n):
            keep = np.arange(n) != i
            model = SkRidge(alpha=alpha, fit_intercept=fit_intercept, solver="svd").fit(
                X[keep], Y[keep], sample_weight=None if sw is None else sw[keep])
            out[i, :, k] = (np.sqrt(w[i]) * (Y[i] - model.predict(X[i:i + 1])[0])) ** 2
    return out if y.ndim == 2 else out[:, 0, :]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("gcv_mode", ["svd", "eigen"])
@pytest.mark.parametrize("targets", [1, 2])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("source", ["make_regression", "random"])
def test_wide_with_intercept_equals_naive_loop_and_exact(device, seed, gcv_mode, targets,
                                                          weighted, source):
    """make_regression(10, 50): 0.3 % from the naive loop before (the intercept's
    direction left a rounding-size singular value); now exact to ~1e-12 and the same
    from run to run."""
    rng = np.random.default_rng(seed)
    if source == "make_regression":
        X, y = make_regression(10, 50, n_targets=targets, random_state=seed)
    else:
        X = rng.standard_normal((25, 60)) + rng.uniform(-2, 2, 60)
        y = rng.standard_normal((25, targets)) if targets > 1 else rng.standard_normal(25)
    sw = rng.uniform(0.5, 2.0, X.shape[0]) if weighted else None
    alphas = list(np.logspace(-5, 7, 5))
    params = dict(alphas=alphas, fit_intercept=True, gcv_mode=gcv_mode)
    ours = _fit(RidgeCV, device, X, y, sw, **params)
    again = _fit(RidgeCV, device, X, y, sw, **params)
    np.testing.assert_array_equal(ours.cv_results_, again.cv_results_)
    naive = _naive_loo(X, y, alphas, sw, True)
    assert relative_error(ours.cv_results_, naive, y, sw) <= 1e-6
    exact = _exact_squared(X, y, alphas, sw, True)
    assert relative_error(ours.cv_results_, exact, y, sw) <= 1e-9


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_wide_without_deflation_cases_are_exact(device, rng, fit_intercept):
    """Wide X, no intercept (U spans everything) and sparse wide X (eigen route)."""
    X = rng.standard_normal((20, 45))
    y = rng.standard_normal(20)
    alphas = [1e-6, 1e-2, 10.0]
    exact = _exact_squared(X, y, alphas, None, fit_intercept)
    for Xi in (X, sp.csr_matrix(X)):
        ours = _fit(RidgeCV, device, Xi, y, None, alphas=alphas,
                    fit_intercept=fit_intercept)
        assert relative_error(ours.cv_results_, exact, y, None, fit_intercept) <= 1e-9


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("cls", [Ridge, RidgeCV])
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("y_shape", ["1d", "column", "2d"])
def test_intercept_type_and_shape_as_sklearn(device, rng, cls, sparse, dtype, y_shape):
    """Sparse X gave a 0-d ndarray intercept_ (scikit-learn: a NumPy scalar)."""
    X = sp.random(40, 6, density=0.5, format="csr", random_state=1).astype(dtype)
    X = X if sparse else X.toarray()
    y = rng.standard_normal(40)
    y = {"1d": y, "column": y[:, None], "2d": np.c_[y, -y]}[y_shape]
    sk_cls = {Ridge: SkRidge, RidgeCV: SkRidgeCV}[cls]
    with skgpu.config_context(device=device):
        ours = cls().fit(X, y).intercept_
    theirs = sk_cls().fit(X, y).intercept_
    assert type(ours) is type(theirs)
    assert np.shape(ours) == np.shape(theirs)
    assert np.asarray(ours).dtype == np.asarray(theirs).dtype


def test_reference_agrees_with_a_brute_force_loop(rng):
    """The exact reference against refits, where float64 refits are accurate."""
    X = rng.standard_normal((15, 4)) + 2.0
    y = rng.standard_normal((15, 2))
    sw = rng.uniform(0.5, 2.0, 15)
    for fit_intercept in (True, False):
        exact = _exact_squared(X, y, [0.3, 3.0], sw, fit_intercept)
        naive = _naive_loo(X, y, [0.3, 3.0], sw, fit_intercept)
        np.testing.assert_allclose(exact, naive, rtol=1e-10)


@pytest.mark.parametrize("device", DEVICES)
def test_refined_columns_reach_per_target_alphas_and_the_scorer(device, rng):
    """The refined residuals reach the per-target loop (one alpha at a time for several
    targets): within 1e-8 of the exact LOO errors (it fails without the refinement).
    With a scorer, each target's alpha is the one the exact errors pick (the stored
    predictions themselves are y's rounding away from exact either way)."""
    X, y, sw = _tall_case(rng, 400, 20, True, True, 2)
    alphas = [1e-13, 1e-8, 1e-3]
    exact = _exact_squared(X, y, alphas, sw, True)  # (n, 2, n_alphas)
    ours = _fit(RidgeCV, device, X, y, sw, alphas=alphas, alpha_per_target=True)
    assert relative_error(ours.cv_results_, exact, y, sw) <= 1e-8
    scored = _fit(RidgeCV, device, X, y, sw, alphas=alphas, alpha_per_target=True,
                  scoring="neg_mean_squared_error")
    # the weighted MSE of LOO predictions is Σ e² / Σ w: the exact errors' sums decide
    best = [alphas[int(np.argmin(exact[:, j, :].sum(axis=0)))] for j in range(2)]
    np.testing.assert_array_equal(scored.alpha_, best)
    np.testing.assert_array_equal(ours.alpha_, best)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("scale, alpha", [(1.0, 1e-40), (1e150, 0.1)])
@pytest.mark.parametrize("fit_intercept,weighted", [(False, False), (True, True)])
def test_exactly_rank_deficient_x_is_exact(device, rng, scale, alpha, fit_intercept,
                                           weighted):
    """Two equal columns: the QR route's third singular value is rounding (~ε·s₁), far
    above √α here; kept, it entered the hat matrix in full (best_score_ 900 times the
    exact one at scale 1e150; scikit-learn's is off too). Taken as zero, the LOO errors
    are the exact ones."""
    X = rng.standard_normal((30, 4)) * scale
    X = np.column_stack([X, X[:, 1]])
    y = rng.standard_normal(30)
    sw = rng.uniform(0.5, 2.0, 30) if weighted else None
    alphas = [alpha, alpha * 1e3]
    exact = _exact_squared(X, y, alphas, sw, fit_intercept)
    ours = _fit(RidgeCV, device, X, y, sw, alphas=alphas, fit_intercept=fit_intercept)
    assert relative_error(ours.cv_results_, exact, y, sw, fit_intercept) <= 1e-6
