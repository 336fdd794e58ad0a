"""Every fitted attribute has scikit-learn's type and dtype (NumPy scalar or Python
number, array dtype and dimensions), for the five estimators, several configurations,
float32 and float64 X: scripts format, compare and serialise them."""

import numpy as np
import pytest
from conftest import DEVICES
from sklearn import decomposition as skd
from sklearn import gaussian_process as skgp
from sklearn import linear_model as skl

import skgpu
from skgpu.decomposition import PCA, TruncatedSVD
from skgpu.gaussian_process import GaussianProcessRegressor
from skgpu.linear_model import Ridge, RidgeCV

CONFIGS = [
    (PCA, skd.PCA, dict(n_components=3), "X"),
    (PCA, skd.PCA, dict(n_components=None), "X"),
    (PCA, skd.PCA, dict(n_components="mle"), "X"),
    (PCA, skd.PCA, dict(n_components=0.8), "X"),
    (PCA, skd.PCA, dict(n_components=3, svd_solver="full"), "X"),
    (PCA, skd.PCA, dict(n_components=3, svd_solver="randomized", random_state=0), "X"),
    (PCA, skd.PCA, dict(n_components=3, svd_solver="arpack", random_state=0), "X"),
    (PCA, skd.PCA, dict(n_components=3, whiten=True), "X"),
    (TruncatedSVD, skd.TruncatedSVD, dict(n_components=3, random_state=0), "X"),
    (TruncatedSVD, skd.TruncatedSVD, dict(n_components=3, algorithm="arpack",
                                          random_state=0), "X"),
    (Ridge, skl.Ridge, dict(), "y1"),
    (Ridge, skl.Ridge, dict(), "y2"),
    (Ridge, skl.Ridge, dict(fit_intercept=False), "y1"),
    (Ridge, skl.Ridge, dict(solver="svd"), "y2"),
    (RidgeCV, skl.RidgeCV, dict(), "y1"),
    (RidgeCV, skl.RidgeCV, dict(), "y2"),
    (RidgeCV, skl.RidgeCV, dict(alpha_per_target=True), "y2"),
    (RidgeCV, skl.RidgeCV, dict(fit_intercept=False, store_cv_results=True), "y1"),
    (RidgeCV, skl.RidgeCV, dict(cv=3), "y1"),
    (GaussianProcessRegressor, skgp.GaussianProcessRegressor, dict(), "y1"),
    (GaussianProcessRegressor, skgp.GaussianProcessRegressor, dict(normalize_y=True), "y2"),
]


def _describe(value):
    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype, value.ndim)
    if isinstance(value, np.generic):
        return ("numpy scalar", value.dtype)
    return (type(value).__name__,)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("ours,theirs,params,target", CONFIGS,
                         ids=[f"{c[0].__name__}-{i}" for i, c in enumerate(CONFIGS)])
def test_fitted_attribute_types_are_scikit_learns(device, dtype, ours, theirs, params,
                                                  target):
    rng = np.random.default_rng(0)
    X = (rng.standard_normal((60, 6)) * np.geomspace(3, 0.1, 6)).astype(dtype)
    Y = X @ rng.standard_normal((6, 2)) + rng.standard_normal((60, 2))
    y = {"X": None, "y1": Y[:, 0], "y2": Y}[target]
    with skgpu.config_context(device=device):
        a = ours(**params).fit(X, y)
    b = theirs(**params).fit(X, y)
    public = {k for k in vars(b) if k.endswith("_") and not k.startswith("_")}
    for name in sorted(public):
        if name in ("kernel_",):
            continue
        assert _describe(getattr(a, name)) == _describe(getattr(b, name)), name
