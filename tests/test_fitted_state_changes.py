"""A fitted model changed between calls answers as a fresh one: assigned attributes,
in-place edits and changed parameters reach predict/transform/score (device copies are
never stale), on each backend."""

import numpy as np
import pytest
from conftest import DEVICES
from sklearn.base import clone
from skgpu_testing import assert_allclose_rel

import skgpu
from skgpu.decomposition import PCA, TruncatedSVD
from skgpu.gaussian_process import GaussianProcessRegressor
from skgpu.linear_model import Ridge, RidgeCV

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

#: estimator, the method whose output is compared, the fitted arrays to change
CASES = {
    "PCA": (lambda: PCA(3), ("transform", "score", "inverse_transform"),
            ("components_", "mean_", "explained_variance_")),
    "TruncatedSVD": (lambda: TruncatedSVD(3, random_state=0),
                     ("transform", "inverse_transform"), ("components_",)),
    "Ridge": (lambda: Ridge(alpha=0.3), ("predict",), ("coef_",)),
    "RidgeCV": (lambda: RidgeCV(), ("predict",), ("coef_",)),
    "GaussianProcessRegressor": (lambda: GaussianProcessRegressor(optimizer=None),
                                 ("predict",), ("alpha_",)),
}


def _fresh(est):
    """A new instance holding ``est``'s parameters and fitted attributes (no cache)."""
    new = clone(est)
    getattr(est, "L_", None)  # a GPU-fitted GP's factor, fetched to the host
    for k, v in vars(est).items():
        if k.endswith("_") and not k.startswith("_") or k in ("_y_train_mean",
                                                              "_y_train_std"):
            setattr(new, k, v.copy() if isinstance(v, np.ndarray) else v)
    return new


def _call(est, method, X, Z):
    if method == "inverse_transform":
        return np.asarray(est.inverse_transform(Z))
    return np.asarray(getattr(est, method)(X))


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(sorted(CASES)), change=st.sampled_from(
           ["assign", "in-place", "in-place-row", "whiten", "intercept"]),
       factor=st.sampled_from([-1.0, 0.5, 3.0]), seed=st.integers(0, 2**16))
@pytest.mark.parametrize("device", DEVICES)
def test_changes_reach_every_call(device, name, change, factor, seed):
    make, methods, arrays = CASES[name]
    rng = np.random.default_rng(seed)
    X, y = rng.standard_normal((40, 5)), rng.standard_normal(40)
    Xt, Z = rng.standard_normal((9, 5)), rng.standard_normal((9, 3))
    with skgpu.config_context(device=device):
        est = make().fit(X, y)
        for method in methods:  # the first calls fill the device cache
            _call(est, method, Xt, Z)
        attr = arrays[seed % len(arrays)]
        if change == "assign":
            setattr(est, attr, getattr(est, attr) * factor)
        elif change == "in-place":
            getattr(est, attr)[...] *= factor
        elif change == "in-place-row":
            np.atleast_1d(getattr(est, attr))[0] += factor
        elif change == "whiten" and name == "PCA":
            est.set_params(whiten=not est.whiten)
        elif change == "intercept" and hasattr(est, "intercept_"):
            est.intercept_ = est.intercept_ + factor
        for method in methods:
            assert_allclose_rel(_call(est, method, Xt, Z),
                                _call(_fresh(est), method, Xt, Z), 1e-12)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("path", ["dense", "sparse"])
def test_the_fitted_state_is_reused_until_something_changes(device, path):
    """The state a GP's fit leaves (its factor on the device, or the sparse factor) is
    the one predict uses: not rebuilt while nothing it copies has changed."""
    from sklearn.gaussian_process.kernels import RBF, WhiteKernel

    from skgpu.gaussian_process.kernels import Wendland

    rng = np.random.default_rng(0)
    X, y = rng.uniform(size=(60, 2)), rng.standard_normal(60)
    kernel = (RBF(0.3) if path == "dense" else Wendland(0.5)) + WhiteKernel(0.1)
    with skgpu.config_context(device=device):
        gp = GaussianProcessRegressor(kernel, optimizer=None, cholesky=path).fit(X, y)
        assert gp.cholesky_ == path
        if path == "dense" and device == "cpu":
            # host data on the CPU: scikit-learn's own predict, which reads L_ and
            # alpha_ at every call (no state to reuse)
            before = gp.predict(X[:5])
            gp.alpha_ = gp.alpha_ * 2.0
            np.testing.assert_allclose(gp.predict(X[:5]), 2.0 * before, rtol=1e-12)
            return
        state = gp._device_cache["state"][1]
        gp.predict(X[:5], return_std=True)
        assert gp._device_cache["state"][1] is state
        gp.alpha_ = gp.alpha_ * 2.0
        gp.predict(X[:5])
        assert gp._device_cache["state"][1] is not state
