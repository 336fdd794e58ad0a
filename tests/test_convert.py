"""as_sklearn() and from_sklearn(): skgpu's fitted estimators to scikit-learn's own classes
and back, with equal fitted attributes and equal predictions."""

import pickle

import numpy as np
import pytest
from sklearn import decomposition as skd
from sklearn import gaussian_process as skg
from sklearn import linear_model as skl

import skgpu
import skgpu.accel
from skgpu.decomposition import PCA, TruncatedSVD
from skgpu.gaussian_process import GaussianProcessRegressor
from skgpu.gaussian_process.kernels import Wendland
from skgpu.linear_model import Ridge, RidgeCV

CASES = [
    (PCA, skd.PCA, dict(n_components=3, whiten=True), "transform"),
    (TruncatedSVD, skd.TruncatedSVD, dict(n_components=3, random_state=0), "transform"),
    (Ridge, skl.Ridge, dict(alpha=2.0), "predict"),
    (RidgeCV, skl.RidgeCV, dict(alphas=[0.1, 1.0, 10.0]), "predict"),
    (GaussianProcessRegressor, skg.GaussianProcessRegressor, dict(alpha=1e-2), "predict"),
]
IDS = [c[0].__name__ for c in CASES]


def _data(rng):
    X = rng.standard_normal((60, 5)) + 1.0
    return X, X @ rng.standard_normal(5) + 0.1 * rng.standard_normal(60)


def _fit(est, X, y):
    return est.fit(X) if hasattr(est, "transform") else est.fit(X, y)


def _assert_same_attributes(a, b, names):
    for name in names:
        va, vb = getattr(a, name), getattr(b, name)
        if isinstance(vb, np.ndarray):
            np.testing.assert_array_equal(va, vb, err_msg=name)
        elif name != "kernel_":
            assert va == vb, name


@pytest.mark.parametrize("ours_cls,theirs_cls,params,method", CASES, ids=IDS)
def test_as_sklearn(rng, ours_cls, theirs_cls, params, method):
    X, y = _data(rng)
    with skgpu.config_context(device="cpu"):
        ours = _fit(ours_cls(**params), X, y)
    theirs = ours.as_sklearn()
    assert type(theirs) is theirs_cls
    assert theirs.get_params() == {k: v for k, v in ours.get_params().items()
                                   if k in theirs.get_params()}
    assert not hasattr(theirs, "backend_") and not hasattr(theirs, "_device_cache")
    _assert_same_attributes(theirs, ours, [k for k in vars(theirs) if k.endswith("_")])
    got, want = getattr(theirs, method)(X), getattr(ours, method)(X)
    if method == "predict" and hasattr(theirs, "alpha_") and hasattr(theirs, "L_"):
        # a GP's mean is K(X, X_train) @ alpha_: its terms cancel (alpha_ is large where
        # K is ill-conditioned), and ours may run on the GPU. The bound of a dot product's
        # rounding, with room for the kernel values' own: 100 eps |K*| |alpha_|
        terms = np.abs(theirs.kernel_(X, theirs.X_train_)) @ np.abs(theirs.alpha_)
        bound = 100 * np.finfo(np.float64).eps * terms * theirs._y_train_std
        assert np.all(bound <= 1e-6 * np.maximum(np.abs(want), 1.0))  # not vacuous
        np.testing.assert_array_less(np.abs(got - want), bound + 1e-12)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    # scikit-learn's object pickles without skgpu's classes in it
    assert b"skgpu" not in pickle.dumps(theirs)


@pytest.mark.parametrize("ours_cls,theirs_cls,params,method", CASES, ids=IDS)
def test_from_sklearn(rng, ours_cls, theirs_cls, params, method):
    X, y = _data(rng)
    theirs = _fit(theirs_cls(**params), X, y)
    ours = ours_cls.from_sklearn(theirs)
    assert type(ours) is ours_cls and ours.backend_ == "cpu"
    _assert_same_attributes(ours, theirs, [k for k in vars(theirs) if k.endswith("_")])
    with skgpu.config_context(device="cpu"):
        np.testing.assert_allclose(getattr(ours, method)(X), getattr(theirs, method)(X),
                                   rtol=1e-10, atol=1e-12)
    # and under the accelerator, where scikit-learn's names are skgpu's classes
    with skgpu.accel.installed():
        assert type(ours_cls.from_sklearn(theirs)) is ours_cls


def test_pca_solver_is_carried_over(rng):
    X, _ = _data(rng)
    theirs = skd.PCA(2, svd_solver="full").fit(X)
    assert PCA.from_sklearn(theirs).solver_ == "full"


def test_bad_conversions(rng):
    X, y = _data(rng)
    with pytest.raises(TypeError, match="from_sklearn takes a fitted sklearn.decomposition.PCA"):
        PCA.from_sklearn(skd.TruncatedSVD(2).fit(X))
    with pytest.raises(TypeError, match="from_sklearn takes a fitted"):
        PCA.from_sklearn(PCA(2).fit(X))
    with pytest.raises(Exception, match="not fitted"):
        PCA.from_sklearn(skd.PCA(2))
    with pytest.raises(Exception, match="not fitted"):
        Ridge().as_sklearn()
    Xs = rng.uniform(0, 1, (80, 2))
    with skgpu.config_context(device="cpu"):
        sparse_fit = GaussianProcessRegressor(Wendland(0.3), optimizer=None, alpha=1e-2).fit(
            Xs, np.sin(4 * Xs[:, 0]))
    assert sparse_fit.cholesky_ == "sparse"
    with pytest.raises(ValueError, match="sparse path"):
        sparse_fit.as_sklearn()


ESTIMATORS = ["skgpu.decomposition.PCA", "skgpu.decomposition.TruncatedSVD",
              "skgpu.linear_model.Ridge", "skgpu.linear_model.RidgeCV",
              "skgpu.gaussian_process.GaussianProcessRegressor"]


def _estimator(path):
    import importlib

    module, name = path.rsplit(".", 1)
    return getattr(importlib.import_module(module), name)()


@pytest.mark.parametrize("path", ESTIMATORS)
def test_html_repr_links_to_skgpus_own_page(path, monkeypatch):
    """The HTML repr's documentation link is skgpu's API page for the class (the page
    docs/api.rst generates), under the documentation URL of the package metadata; with
    none named there is no link, and never one to scikit-learn's page."""
    import os

    from sklearn.utils import estimator_html_repr

    from skgpu.utils import _doc_link

    est = _estimator(path)
    monkeypatch.setattr(_doc_link, "documentation_url", lambda: None)
    assert est._get_doc_link() == ""
    assert "modules/generated" not in estimator_html_repr(est)  # scikit-learn's pages
    monkeypatch.setattr(_doc_link, "documentation_url", lambda: "https://docs.example/skgpu")
    link = f"https://docs.example/skgpu/generated/{path}.html"
    assert est._get_doc_link() == link
    assert link in estimator_html_repr(est)
    api = open(os.path.join(os.path.dirname(__file__), "..", "docs", "api.rst")).read()
    assert f"   {path}\n" in api  # the page the link names is one the docs build
    est._doc_link_template = "https://elsewhere/{estimator_name}"  # scikit-learn's setter
    assert est._get_doc_link() == f"https://elsewhere/{path.rsplit('.', 1)[1]}"


def test_documentation_url_from_the_package_metadata(monkeypatch):
    from importlib import metadata

    from skgpu.utils import _doc_link

    class Meta:
        def __init__(self, urls):
            self.urls = urls

        def get_all(self, key):
            return self.urls if key == "Project-URL" else None

    for urls, want in ((["Source, https://src", "Documentation, https://d.example/x/"],
                        "https://d.example/x"), (["Source, https://src"], None), ([], None)):
        monkeypatch.setattr(metadata, "metadata", lambda name, u=urls: Meta(u))
        _doc_link._metadata_url.cache_clear()
        monkeypatch.delenv(_doc_link.URL_VARIABLE, raising=False)
        assert _doc_link.documentation_url() == want
        monkeypatch.setenv(_doc_link.URL_VARIABLE, "../")  # the docs build's, relative
        assert _doc_link.documentation_url() == ".."
        assert PCA()._get_doc_link() == "../generated/skgpu.decomposition.PCA.html"
    _doc_link._metadata_url.cache_clear()


# --------------------------------------------------------------------------------------
# skgpu.as_sklearn: whole object graphs, for shipping a model
# --------------------------------------------------------------------------------------
def _graph(rng):
    from sklearn.compose import ColumnTransformer
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import Pipeline, make_pipeline
    from sklearn.preprocessing import StandardScaler

    X = rng.standard_normal((150, 8)) + np.linspace(0, 3, 8)
    y = X @ rng.standard_normal(8) + 0.1 * rng.standard_normal(150)
    columns = ColumnTransformer([("svd", TruncatedSVD(2, random_state=0), [0, 1, 2, 3]),
                                 ("pca", PCA(2), [4, 5, 6, 7])])
    pipe = Pipeline([("columns", columns), ("scale", StandardScaler()),
                     ("ridge", RidgeCV(alphas=[0.1, 1.0, 10.0]))])
    search = GridSearchCV(make_pipeline(StandardScaler(), PCA(), Ridge()),
                          {"pca__n_components": [2, 4], "ridge": [Ridge(), Ridge(alpha=3.0)]},
                          cv=3)
    with skgpu.config_context(device="cpu"):
        return X, y, pipe.fit(X, y), search.fit(X, y)


def test_as_sklearn_converts_whole_graphs(rng):
    X, y, pipe, search = _graph(rng)
    for fitted in (pipe, search):
        converted = skgpu.as_sklearn(fitted)
        assert b"skgpu" not in pickle.dumps(converted)
        assert b"skgpu" in pickle.dumps(fitted)  # the original is left as it was
        np.testing.assert_allclose(converted.predict(X), fitted.predict(X), rtol=1e-10,
                                   atol=1e-12)
    converted = skgpu.as_sklearn(search)
    assert type(converted.best_estimator_.steps[1][1]) is skd.PCA
    # the candidates in cv_results_ too
    assert all(type(r) is skl.Ridge for r in converted.cv_results_["param_ridge"])
    assert converted.best_params_["ridge"].get_params() == \
        search.best_params_["ridge"].get_params()
    single = skgpu.as_sklearn(search.best_estimator_[1])
    assert type(single) is skd.PCA


def _run(args, cwd):
    import subprocess
    import sys

    out = subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]


#: Loads model.pkl where ``import skgpu`` fails and predicts X.npy into theirs.npy.
_LOAD_WITHOUT_SKGPU = ("import sys, pickle, numpy as np\n"
                       "sys.modules['skgpu'] = None\n"
                       "model = pickle.load(open('model.pkl', 'rb'))\n"
                       "np.save('theirs.npy', model.predict(np.load('X.npy')))\n")


def test_a_converted_model_loads_and_predicts_where_skgpu_is_not_installed(rng, tmp_path):
    X, _, pipe, _ = _graph(rng)
    (tmp_path / "model.pkl").write_bytes(pickle.dumps(skgpu.as_sklearn(pipe)))
    np.save(tmp_path / "X.npy", X)
    _run(["-c", _LOAD_WITHOUT_SKGPU], tmp_path)
    np.testing.assert_allclose(np.load(tmp_path / "theirs.npy"), pipe.predict(X),
                               rtol=1e-10, atol=1e-12)


def test_a_model_fitted_under_the_accelerator_ships_as_scikit_learn(tmp_path):
    fit = ("import pickle, numpy as np, skgpu\n"
           "from sklearn.decomposition import PCA\n"
           "from sklearn.linear_model import RidgeCV\n"
           "from sklearn.pipeline import make_pipeline\n"
           "rng = np.random.default_rng(0)\n"
           "X = rng.standard_normal((120, 6)); y = X @ rng.standard_normal(6)\n"
           "model = make_pipeline(PCA(4), RidgeCV()).fit(X, y)\n"
           "assert type(model[0]).__module__.startswith('skgpu')\n"
           "pickle.dump(skgpu.as_sklearn(model), open('model.pkl', 'wb'))\n"
           "np.save('X.npy', X); np.save('ours.npy', model.predict(X))\n")
    (tmp_path / "fit.py").write_text(fit)
    _run(["-m", "skgpu.accel", "fit.py"], tmp_path)
    _run(["-c", _LOAD_WITHOUT_SKGPU], tmp_path)
    np.testing.assert_allclose(np.load(tmp_path / "theirs.npy"),
                               np.load(tmp_path / "ours.npy"), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("seed", [0, 1])
def test_onnx_export_of_a_converted_pipeline_predicts_as_skgpu(seed):
    skl2onnx = pytest.importorskip("skl2onnx")
    ort = pytest.importorskip("onnxruntime")
    from skl2onnx.common.data_types import FloatTensorType
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(seed)
    X = (rng.standard_normal((300, 10)) * np.geomspace(3, 0.3, 10)).astype(np.float32)
    y = X @ rng.standard_normal(10) + 0.05 * rng.standard_normal(300)
    model = make_pipeline(StandardScaler(), PCA(5), RidgeCV(alphas=[0.1, 1.0, 10.0]))
    model.fit(X, y)
    onx = skl2onnx.convert_sklearn(skgpu.as_sklearn(model),
                                   initial_types=[("X", FloatTensorType([None, 10]))])
    session = ort.InferenceSession(onx.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    got = session.run(None, {"X": X})[0].ravel()
    want = model.predict(X)
    # ONNX computes in float32: agreement to float32's rounding of the pipeline's sums
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * np.max(np.abs(want)))


def _every_kind_of_model(rng):
    """Fitted skgpu models of every estimator, GP kernel and container, with the input each
    predicts or transforms."""
    from sklearn.compose import ColumnTransformer
    from sklearn.gaussian_process.kernels import RBF, DotProduct, Matern
    from sklearn.gaussian_process.kernels import ConstantKernel as C
    from sklearn.gaussian_process.kernels import RationalQuadratic, WhiteKernel
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import make_pipeline

    X = rng.standard_normal((80, 4)) + 1.0
    y = X @ rng.standard_normal(4) + 0.1 * rng.standard_normal(80)
    models = {
        "PCA": PCA(2).fit(X),
        "TruncatedSVD": TruncatedSVD(2, random_state=0).fit(X),
        "Ridge": Ridge(alpha=2.0).fit(X, y),
        "RidgeCV": RidgeCV(alphas=[0.1, 1.0]).fit(X, y),
        "pipeline": make_pipeline(PCA(3), RidgeCV()).fit(X, y),
        "columns": make_pipeline(ColumnTransformer([("a", PCA(1), [0, 1]),
                                                    ("b", TruncatedSVD(1), [2, 3])]),
                                 Ridge()).fit(X, y),
        "search": GridSearchCV(make_pipeline(PCA(), Ridge()),
                               {"pca__n_components": [1, 2]}, cv=3).fit(X, y),
    }
    kernels = {"RBF": RBF(), "Matern": C() * Matern(nu=1.5) + WhiteKernel(),
               "RationalQuadratic": RationalQuadratic(),
               "DotProduct": DotProduct() + WhiteKernel(),
               "RBF, ARD": C() * RBF([1.0, 2.0, 0.5, 1.0])}
    for name, kernel in kernels.items():
        models[f"GP {name}"] = GaussianProcessRegressor(kernel, alpha=1e-2,
                                                        optimizer=None).fit(X, y)
    models["list and dict"] = [models["PCA"], {"ridge": models["Ridge"]}]
    return X, models


def _outputs(model, X):
    if isinstance(model, list):
        return [_outputs(model[0], X), _outputs(model[1]["ridge"], X)]
    if hasattr(model, "transform") and not hasattr(model, "predict"):
        return model.transform(X)
    if isinstance(model, (GaussianProcessRegressor, skg.GaussianProcessRegressor)):
        return np.concatenate(model.predict(X, return_std=True))
    return model.predict(X)


def test_every_converted_model_loads_and_answers_where_skgpu_cannot_be_imported(
        rng, tmp_path):
    """Each estimator, GP kernel and container, converted, pickled, and loaded in a
    process where ``import skgpu`` fails, answers as skgpu's fit does."""
    X, models = _every_kind_of_model(rng)
    converted = {name: skgpu.as_sklearn(m) for name, m in models.items()}
    with skgpu.config_context(device="cpu"):
        want = {name: _outputs(m, X) for name, m in models.items()}
    (tmp_path / "models.pkl").write_bytes(pickle.dumps(converted))
    np.save(tmp_path / "X.npy", X)
    script = ("import sys, pickle, numpy as np\n"
              "sys.modules['skgpu'] = None\n"
              "from sklearn.gaussian_process import GaussianProcessRegressor as G\n"
              "def out(m, X):\n"
              "    if isinstance(m, list):\n"
              "        return [out(m[0], X), out(m[1]['ridge'], X)]\n"
              "    if hasattr(m, 'transform') and not hasattr(m, 'predict'):\n"
              "        return m.transform(X)\n"
              "    if isinstance(m, G):\n"
              "        return np.concatenate(m.predict(X, return_std=True))\n"
              "    return m.predict(X)\n"
              "models = pickle.load(open('models.pkl', 'rb'))\n"
              "X = np.load('X.npy')\n"
              "pickle.dump({k: out(m, X) for k, m in models.items()}, open('got.pkl', 'wb'))\n")
    _run(["-c", script], tmp_path)
    got = pickle.loads((tmp_path / "got.pkl").read_bytes())
    assert set(got) == set(want)
    for name in want:
        pairs = (zip(got[name], want[name]) if isinstance(want[name], list)
                 else [(got[name], want[name])])
        for a, b in pairs:
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-10, err_msg=name)


@pytest.mark.parametrize("container", ["alone", "pipeline", "search", "list"])
@pytest.mark.parametrize("kernel_name", ["Tapered", "Wendland"])
def test_a_kernel_without_a_scikit_learn_counterpart_is_named_not_shipped(
        rng, container, kernel_name):
    """A GP whose kernel is skgpu's own (Tapered, Wendland; dense path) cannot become pure
    scikit-learn: as_sklearn raises naming the kernel and where it sits, never a graph
    that would need skgpu to load."""
    from sklearn.gaussian_process.kernels import Matern, WhiteKernel
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import make_pipeline

    from skgpu.gaussian_process.kernels import Tapered

    X = rng.uniform(0, 1, (40, 2))
    y = np.sin(3 * X[:, 0]) + 0.05 * rng.standard_normal(40)
    inner = (Tapered(Matern(0.3), taper_range=2.0) if kernel_name == "Tapered"
             else Wendland(2.0))
    gp = GaussianProcessRegressor(inner + WhiteKernel(0.01), cholesky="dense",
                                  optimizer=None)
    model = {"alone": gp, "pipeline": make_pipeline(gp),
             "search": GridSearchCV(gp, {"alpha": [1e-10, 1e-3]}, cv=2),
             "list": gp}[container]
    model.fit(X, y)
    graph = [model] if container == "list" else model
    with pytest.raises(ValueError, match=rf"no scikit-learn counterpart for .*"
                                         rf"kernel\.k1: {kernel_name} from skgpu"):
        skgpu.as_sklearn(graph)
    if container == "alone":
        with pytest.raises(ValueError, match=kernel_name):
            gp.as_sklearn()


def test_the_documented_onnx_limit_holds():
    """The user guide's ONNX limits: skl2onnx converts a GP's std with normalize_y=False
    (agreeing to ~1e-7) and refuses it with normalize_y=True."""
    skl2onnx = pytest.importorskip("skl2onnx")
    ort = pytest.importorskip("onnxruntime")
    from skl2onnx.common.data_types import DoubleTensorType
    from sklearn.gaussian_process.kernels import RBF, WhiteKernel

    rng = np.random.default_rng(3)
    X = rng.uniform(0, 1, (50, 2))
    y = 3 * X.sum(axis=1) + 5
    for normalize_y in (False, True):
        gp = GaussianProcessRegressor(RBF() + WhiteKernel(), normalize_y=normalize_y).fit(X, y)
        sk = gp.as_sklearn()

        def convert(model=sk):
            return skl2onnx.convert_sklearn(
                model, initial_types=[("X", DoubleTensorType([None, 2]))],
                options={id(model): {"return_std": True}})
        if normalize_y:
            with pytest.raises(TypeError):
                convert()
            continue
        session = ort.InferenceSession(convert().SerializeToString(),
                                       providers=["CPUExecutionProvider"])
        mean, std = session.run(None, {"X": X[:10]})
        want_mean, want_std = gp.predict(X[:10], return_std=True)
        np.testing.assert_allclose(mean.ravel(), want_mean, rtol=1e-10, atol=1e-9)
        np.testing.assert_allclose(std.ravel(), want_std, rtol=0, atol=1e-6)
