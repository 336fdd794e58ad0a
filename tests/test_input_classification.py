"""X is asked what it is once per public call (``container_of``), and what that answer
says is carried on (a ``ContainerSpec``, an ``Input``): every later step reads it instead
of asking the array again. y is asked once, where it is validated."""

import collections
import sys

import numpy as np
import pytest
import scipy.sparse as sp

import skgpu
from skgpu.backends import _arrays
from skgpu.decomposition import PCA, TruncatedSVD
from skgpu.gaussian_process import GaussianProcessRegressor
from skgpu.linear_model import Ridge, RidgeCV

from conftest import BACKENDS

_CLASSIFIERS = ("is_sparse", "is_cupy_array", "is_cupy_sparse", "is_torch_tensor",
                "is_device_array", "is_dask_collection", "is_dask_array", "container_of")


@pytest.fixture
def questions(monkeypatch):
    """``(log, watch)``: ``watch(X, y)`` names the arrays; every classifier call from
    the estimators' side of the backend seam (not from inside the classifiers or a
    backend operation, which dispatches on the array it is handed) is logged as
    ``(which array, classifier)``."""
    watched = {}
    log = collections.Counter()
    inside = (_arrays.__file__, ) + tuple(
        m.__file__ for n, m in sys.modules.items()
        if n.startswith("skgpu.backends.") and getattr(m, "__file__", None))

    def counting(name, func):
        def wrapper(*args, **kwargs):
            if sys._getframe(1).f_code.co_filename not in inside:
                a = args[0] if args else None
                log[(next((k for k, v in watched.items() if v is a), "other"), name)] += 1
            return func(*args, **kwargs)
        return wrapper

    originals = {name: getattr(_arrays, name) for name in _CLASSIFIERS}
    for mod_name, module in list(sys.modules.items()):
        if not mod_name.startswith("skgpu"):
            continue
        for name, func in originals.items():
            if getattr(module, name, None) is func:
                monkeypatch.setattr(module, name, counting(name, func))

    def watch(**arrays):
        watched.clear()
        watched.update(arrays)
        log.clear()

    return log, watch


def _inputs(kind, rng, dtype):
    X = rng.standard_normal((120, 6)).astype(dtype)
    y = rng.standard_normal(120)
    if kind == "sparse":
        X[np.abs(X) < 0.8] = 0
        return sp.csr_matrix(X), y
    if kind == "pandas":
        pd = pytest.importorskip("pandas")
        return pd.DataFrame(X, columns=[f"f{i}" for i in range(6)]), y
    if kind == "cupy":
        cp = pytest.importorskip("cupy")
        return cp.asarray(X), cp.asarray(y)
    return X, y


def _fitted(make):
    return lambda X, y: make().fit(X, y)


def _first_columns(X):
    return X[:, :3]


#: call -> (fit the model it needs or None, the call on (model, X, y), the X it is
#: given, made from the data)
_CALLS = {
    "PCA.fit": (None, lambda m, X, y: PCA(3, svd_solver="covariance_eigh").fit(X), None),
    "PCA.fit_transform": (None, lambda m, X, y: PCA(3).fit_transform(X), None),
    "PCA.transform": (_fitted(lambda: PCA(3)), lambda m, X, y: m.transform(X), None),
    "PCA.inverse_transform": (_fitted(lambda: PCA(3)),
                              lambda m, X, y: m.inverse_transform(X), _first_columns),
    "TruncatedSVD.fit": (None, lambda m, X, y: TruncatedSVD(3).fit(X), None),
    "TruncatedSVD.transform": (_fitted(lambda: TruncatedSVD(3)),
                               lambda m, X, y: m.transform(X), None),
    "Ridge.fit": (None, lambda m, X, y: Ridge().fit(X, y), None),
    "Ridge.predict": (_fitted(Ridge), lambda m, X, y: m.predict(X), None),
    "RidgeCV.fit": (None, lambda m, X, y: RidgeCV().fit(X, y), None),
    "GaussianProcessRegressor.fit": (
        None, lambda m, X, y: GaussianProcessRegressor(optimizer=None).fit(X, y), None),
    "GaussianProcessRegressor.predict": (
        _fitted(lambda: GaussianProcessRegressor(optimizer=None)),
        lambda m, X, y: m.predict(X, return_std=True), None),
}
_DENSE_ONLY = ("PCA.inverse_transform", "GaussianProcessRegressor.fit",
               "GaussianProcessRegressor.predict")


@pytest.mark.parametrize("device", BACKENDS)
@pytest.mark.parametrize("kind", ["numpy", "sparse", "pandas", "cupy"])
@pytest.mark.parametrize("call", list(_CALLS))
def test_x_is_classified_once_per_public_call(questions, call, kind, device):
    if kind == "sparse" and call in _DENSE_ONLY:
        pytest.skip("dense input only")
    if kind == "cupy" and device == "cpu":
        pytest.skip("device input is asked the same questions; run with the GPU")
    log, watch = questions
    X, y = _inputs(kind, np.random.default_rng(0), np.float64)
    setup, run, argument = _CALLS[call]
    if argument is not None:
        X_arg = argument(X.to_numpy() if kind == "pandas" else X)
    else:
        X_arg = X
    with skgpu.config_context(device=device):
        model = setup(X, y) if setup else None
        watch(X=X_arg, y=y)
        run(model, X_arg, y)
    about_x = {k: v for k, v in log.items() if k[0] == "X"}
    about_y = {k: v for k, v in log.items() if k[0] == "y"}
    assert about_x == {("X", "container_of"): 1}, dict(log)
    assert sum(about_y.values()) <= 1, dict(log)
