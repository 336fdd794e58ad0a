"""Ridge and RidgeCV on columns of very different scales: every coefficient, the smallest
columns' too, against the exact solution in rational arithmetic of the data as given."""

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import DEVICES
from exact_loo import exact_ridge_coef

import skgpu
from skgpu.linear_model import Ridge, RidgeCV


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype,spread", [(np.float64, 8), (np.float64, 4),
                                          (np.float32, 2)])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_badly_scaled_columns_exact(device, dtype, spread, fit_intercept, seed):
    rng = np.random.RandomState(seed)
    X = (rng.randn(40, 6) * np.logspace(-spread, spread, 6)).astype(dtype)
    y = rng.randn(40).astype(dtype)
    with skgpu.config_context(device=device):
        coef = Ridge(alpha=1.0, fit_intercept=fit_intercept).fit(X, y).coef_
    exact = exact_ridge_coef(X, y, 1.0, fit_intercept)
    # every coefficient to a relative accuracy set by the precision and the
    # conditioning of the diagonally scaled problem (well conditioned here)
    tol = 1e-9 if dtype == np.float64 else 2e-3
    np.testing.assert_allclose(coef, exact, rtol=tol, atol=0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("spread", [8, 4])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("estimator", ["Ridge-svd", "RidgeCV", "RidgeCV-eigen",
                                       "RidgeCV-sparse"])
def test_badly_scaled_columns_exact_on_every_route(device, spread, fit_intercept, estimator,
                                                   seed):
    """The SVD route and RidgeCV's spectra are not scaling-invariant (scikit-learn's
    smallest coefficient at 1e±8 loses most of its digits by its SVD route, all of them
    in RidgeCV): the coefficients are solved scaling-invariantly there too."""
    rng = np.random.RandomState(seed)
    X = rng.randn(40, 6) * np.logspace(-spread, spread, 6)
    y = rng.randn(40)
    if estimator == "Ridge-svd":
        model = Ridge(alpha=1.0, fit_intercept=fit_intercept, solver="svd")
    else:
        model = RidgeCV(alphas=[1.0], fit_intercept=fit_intercept,
                        gcv_mode="eigen" if estimator == "RidgeCV-eigen" else None)
    data = sp.csr_matrix(X) if estimator.endswith("sparse") else X
    with skgpu.config_context(device=device):
        coef = model.fit(data, y).coef_
    np.testing.assert_allclose(coef, exact_ridge_coef(X, y, 1.0, fit_intercept),
                               rtol=1e-8, atol=0)
