"""The private scikit-learn names skgpu uses (skgpu/utils/_sklearn_private.py) still do
what skgpu relies on: a scikit-learn release that changes one fails here, by name."""

import numpy as np
import pytest
import scipy.sparse as sp

from skgpu.utils import _sklearn_private as priv


def test_every_name_is_listed_and_importable():
    assert sorted(priv.__all__) == sorted(
        name for name in vars(priv) if not name.startswith("__") and name != "annotations")


def test_fit_context_validates_parameters():
    from skgpu.decomposition import PCA

    with pytest.raises(ValueError, match="svd_solver"):
        PCA(svd_solver="bogus").fit(np.ones((3, 2)))


def test_behaviours():
    assert priv._IdentityRegressor().predict(np.arange(3.0)).tolist() == [0.0, 1.0, 2.0]
    assert priv._handle_zeros_in_scale(np.array([0.0, 2.0])).tolist() == [1.0, 2.0]
    assert priv._init_arpack_v0(5, 0).shape == (5,)
    assert isinstance(priv._infer_dimension(np.array([5.0, 1.0, 0.1, 0.01]), 50),
                      (int, np.integer))
    X = sp.random(6, 3, density=0.5, format="csr", random_state=0)
    op = priv._implicit_column_offset(X, np.ones(3))
    np.testing.assert_allclose(op @ np.eye(3), X.toarray() - 1.0)
    assert priv.StrOptions({"a"}).is_satisfied_by("a")
    assert priv._routing_enabled() in (True, False)
    with pytest.raises(ValueError):
        priv._raise_for_params({"bogus": 1}, object(), "fit")
    with pytest.raises(ValueError, match="Negative"):
        priv._check_sample_weight(-np.ones(3), np.ones((3, 1)), ensure_non_negative=True)
    with pytest.raises(ValueError, match="NaN"):
        priv._assert_all_finite(np.array([np.nan]), input_name="X")
    assert priv._check_y(np.array([1.0, 2.0]), y_numeric=True).shape == (2,)
    assert priv._check_y(np.array([[1.0], [2.0]]), multi_output=True).shape == (2, 1)


def test_feature_checks_set_and_compare():
    class Est:
        pass

    est = Est()
    priv._check_n_features(est, np.ones((2, 3)), reset=True)
    priv._check_feature_names(est, np.ones((2, 3)), reset=True)
    assert est.n_features_in_ == 3
    with pytest.raises(ValueError, match="features"):
        priv._check_n_features(est, np.ones((2, 4)), reset=False)
