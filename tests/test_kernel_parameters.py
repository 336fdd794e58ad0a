"""Wendland's and Tapered's parameters are checked against the data with errors that name
them, before anything is factorised, on every path (the kernel called directly, the GP's
dense and sparse fits)."""

import numpy as np
import pytest
from sklearn.gaussian_process.kernels import ConstantKernel as C
from sklearn.gaussian_process.kernels import Matern, WhiteKernel

from skgpu.gaussian_process import GaussianProcessRegressor
from skgpu.gaussian_process.kernels import Tapered, Wendland

BAD = [
    (lambda: Tapered(Matern(), taper_range=0.0), r"Tapered's taper_range must be a positive"),
    (lambda: Tapered(Matern(), taper_range=-2.0), r"Tapered's taper_range must be a positive"),
    (lambda: Tapered(Matern(), taper_range=np.inf), r"taper_range must be a positive, finite"),
    (lambda: Tapered("rbf"), r"Tapered's kernel must be a scikit-learn kernel.*'rbf'"),
    (lambda: Wendland(support_radius=0.0), r"Wendland's support_radius must be a positive"),
    (lambda: Wendland(dimension=1), r"Wendland\(dimension=1\).*X has 3 features"),
    (lambda: Tapered(Matern(), dimension=2), r"Tapered\(dimension=2\).*X has 3 features"),
    (lambda: C(1.0) * Wendland(dimension=2.5) + WhiteKernel(),
     r"Wendland\(dimension=2.5\)"),
    (lambda: C(1.0) * Tapered(Matern(), taper_range=-1.0) + WhiteKernel(0.1),
     r"taper_range must be a positive"),
]


@pytest.mark.parametrize("cholesky", ["auto", "dense", "sparse"])
@pytest.mark.parametrize("make,message", BAD)
def test_bad_compact_kernel_parameters_are_named(make, message, cholesky):
    X = np.random.default_rng(0).uniform(size=(40, 3))
    y = X.sum(axis=1)
    gp = GaussianProcessRegressor(C(1.0) * Wendland(0.8) + WhiteKernel(0.1),
                                  optimizer=None).fit(X, y)
    before = {k: v for k, v in vars(gp).items() if k.endswith("_")}
    with pytest.raises(ValueError, match=message):
        gp.set_params(kernel=make(), cholesky=cholesky).fit(X, y)
    assert {k: v for k, v in vars(gp).items() if k.endswith("_")}.keys() == before.keys()
    assert gp.kernel_ is before["kernel_"]


@pytest.mark.parametrize("make,message", [b for b in BAD if "3 features" in b[1]])
def test_the_kernel_called_directly_checks_too(make, message):
    X = np.random.default_rng(1).uniform(size=(10, 3))
    with pytest.raises(ValueError, match=message):
        make()(X)


@pytest.mark.parametrize("dimension", [None, 3, 5])
def test_dimension_at_least_the_features_fits(dimension):
    X = np.random.default_rng(2).uniform(size=(50, 3))
    y = np.sin(X.sum(axis=1))
    kernel = C(1.0) * Tapered(Matern(0.5), taper_range=1.0, dimension=dimension)
    gp = GaussianProcessRegressor(kernel + WhiteKernel(0.01), optimizer=None).fit(X, y)
    assert np.isfinite(gp.log_marginal_likelihood_value_)
