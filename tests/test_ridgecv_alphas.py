"""RidgeCV's alphas at the edges: an infinite alpha is the intercept-only model (its
leave-one-out score exact, so it is chosen only where it is best), a NaN alpha is
refused with its index."""

import numpy as np
import pytest
from conftest import DEVICES
from sklearn.linear_model import RidgeCV as SkRidgeCV

import skgpu
from skgpu.linear_model import RidgeCV


def _intercept_only_loo_score(y, fit_intercept):
    """-mean of the squared leave-one-out errors of the model without features (brute
    force: the mean of the other samples, or zero without an intercept)."""
    n = len(y)
    pred = (y.sum() - y) / (n - 1) if fit_intercept else np.zeros(n)
    return -np.mean((y - pred) ** 2)


# (scikit-learn 1.8's reference fits divide by zero at alpha=inf)
@pytest.mark.filterwarnings("ignore:invalid value encountered in divide:RuntimeWarning")
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("alphas", [[np.inf], [np.inf, 1.0], [1.0, np.inf],
                                    [0.1, np.inf, 10.0]])
def test_infinite_alpha_is_the_intercept_only_model(device, fit_intercept, alphas, seed):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((30, 4))
    # the first targets: unrelated to X (intercept-only wins); the second: related
    y = rng.standard_normal(30) + (0 if seed % 2 else 3 * X[:, 0])
    with skgpu.config_context(device=device):
        ours = RidgeCV(alphas=alphas, fit_intercept=fit_intercept).fit(X, y)
    ref = SkRidgeCV(alphas=alphas, fit_intercept=fit_intercept).fit(X, y)
    exact_inf = _intercept_only_loo_score(y, fit_intercept)
    scores = {}
    for a in alphas:
        with skgpu.config_context(device=device):
            scores[a] = RidgeCV(alphas=[a], fit_intercept=fit_intercept).fit(X, y).best_score_
    np.testing.assert_allclose(scores[np.inf], exact_inf, rtol=1e-12)
    assert ours.alpha_ == max(alphas, key=lambda a: scores[a])
    sk_inf = SkRidgeCV(alphas=[np.inf], fit_intercept=fit_intercept).fit(X, y)
    if np.isfinite(sk_inf.best_score_):  # (scikit-learn 1.8 scores alpha=inf as NaN)
        assert ours.alpha_ == ref.alpha_
    np.testing.assert_allclose(ours.best_score_, max(scores.values()), rtol=1e-12)
    if ours.alpha_ == np.inf:
        assert np.all(ours.coef_ == 0)
        assert ours.intercept_ == pytest.approx(y.mean() if fit_intercept else 0.0)


@pytest.mark.parametrize("alphas", [[np.nan], [1.0, np.nan]])
def test_nan_alpha_is_refused_by_index(alphas):
    X, y = np.random.default_rng(0).standard_normal((20, 3)), np.arange(20.0)
    with pytest.raises(ValueError, match=rf"alphas\[{len(alphas) - 1}\] is NaN"):
        RidgeCV(alphas=alphas).fit(X, y)
