"""The same fit twice gives the same bits (the user guide's "float32 and float64"
section): every estimator and solver, dense and sparse, on each backend. The one
documented exception is the randomized SVD of sparse X on the GPU (its Xᵀ·Q products
sum long rows in a run-dependent order), held to rounding instead."""

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import DEVICES

import skgpu
from skgpu.decomposition import PCA, TruncatedSVD
from skgpu.linear_model import Ridge, RidgeCV

FITTED = ("components_", "explained_variance_", "singular_values_", "mean_", "coef_",
          "intercept_", "alpha_", "best_score_")


def _cases():
    yield "PCA-full", lambda: PCA(5, svd_solver="full"), False
    yield "PCA-covariance", lambda: PCA(5, svd_solver="covariance_eigh"), False
    yield "PCA-randomized", lambda: PCA(5, svd_solver="randomized", random_state=0), False
    yield "PCA-arpack-sparse", lambda: PCA(5, svd_solver="arpack", random_state=0), True
    yield "PCA-covariance-sparse", lambda: PCA(5, svd_solver="covariance_eigh"), True
    yield "TruncatedSVD", lambda: TruncatedSVD(5, random_state=0), False
    yield "TruncatedSVD-sparse", lambda: TruncatedSVD(5, random_state=0), True
    yield "Ridge", lambda: Ridge(1.0), False
    yield "Ridge-sparse", lambda: Ridge(1.0), True
    yield "RidgeCV", lambda: RidgeCV(alphas=[0.1, 1.0, 10.0]), False
    yield "RidgeCV-sparse", lambda: RidgeCV(alphas=[0.1, 1.0, 10.0]), True


CASES = list(_cases())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,make,sparse", CASES, ids=[c[0] for c in CASES])
def test_the_same_fit_twice_gives_the_same_bits(rng, device, dtype, name, make, sparse):
    # columns of ~600 entries: long enough for cuSPARSE's run-dependent row splitting
    X = sp.random(6000, 120, density=0.1, format="csr",
                  random_state=int(rng.integers(1 << 30)), dtype=dtype)
    X.data += 1.0
    X = X if sparse else X.toarray()
    y = rng.standard_normal(6000).astype(dtype)
    with skgpu.config_context(device=device):
        first, second = (make().fit(X, y) for _ in range(2))
        out = [est.transform(X) if hasattr(est, "transform") else est.predict(X)
               for est in (first, second)]
    exact = not (name == "TruncatedSVD-sparse" and device == "gpu")
    for attr in FITTED:
        if hasattr(first, attr):
            a, b = np.asarray(getattr(first, attr)), np.asarray(getattr(second, attr))
            if exact:
                np.testing.assert_array_equal(a, b, err_msg=attr)
            else:
                np.testing.assert_allclose(a, b, rtol=1e-12 if dtype == np.float64
                                           else 1e-5, atol=0, err_msg=attr)
    if exact:
        np.testing.assert_array_equal(out[0], out[1])
