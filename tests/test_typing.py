"""The public signatures are typed and a type checker accepts skgpu/ (mypy, configured in
pyproject.toml); py.typed ships with the package."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_py_typed_ships():
    import skgpu

    assert (Path(skgpu.__file__).parent / "py.typed").exists()


def test_public_methods_are_annotated():
    import inspect

    from skgpu.decomposition import PCA, TruncatedSVD
    from skgpu.gaussian_process import GaussianProcessRegressor
    from skgpu.linear_model import Ridge, RidgeCV

    for cls in (PCA, TruncatedSVD, Ridge, RidgeCV, GaussianProcessRegressor):
        for name in ("fit", "fit_transform", "transform", "inverse_transform", "predict",
                     "score", "score_samples", "sample_y", "log_marginal_likelihood"):
            method = getattr(cls, name, None)
            if method is None:
                continue
            sig = inspect.signature(method)
            assert sig.return_annotation is not inspect.Signature.empty, (cls, name)
            for param in list(sig.parameters.values())[1:]:
                assert param.annotation is not inspect.Parameter.empty, (cls, name, param)


def test_mypy_is_clean():
    pytest.importorskip("mypy")
    out = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental"], cwd=ROOT,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


USER_SCRIPT = '''
import numpy as np
import skgpu
from skgpu.decomposition import PCA
from skgpu.linear_model import RidgeCV

X = np.random.default_rng(0).standard_normal((50, 4))
pca: PCA = PCA(n_components=2).fit(X)
model: RidgeCV = RidgeCV().fit(X, X[:, 0])
skgpu.set_config(device="cpu")
with skgpu.config_context(device="gpu", matmul_precision="high"):
    pass

from skgpu.decomposition import TruncatedSVD
from skgpu.gaussian_process import GaussianProcessRegressor
from skgpu.gaussian_process.kernels import Tapered, Wendland
from skgpu.linear_model import Ridge

pca = PCA(n_components=0.9, svd_solver="covariance_eigh", iterated_power="auto")
svd: TruncatedSVD = TruncatedSVD(n_components=2, algorithm="randomized").fit(X)
ridge: Ridge = Ridge(alpha=2.0).fit(X, X[:, 0])
taper = Tapered(Wendland(2.0), taper_range=1.5, taper_smoothness=2)
gp: GaussianProcessRegressor = GaussianProcessRegressor(
    taper, cholesky="sparse", optimizer=None).fit(X, X[:, 0])
where: str = pca.backend_
print(gp.predict(X).shape)
mean, std = gp.predict(X, return_std=True)
mean, cov = gp.predict(X, return_cov=True)
print(mean.shape, std.shape, cov.shape)
'''


def _mypy_on(tmp_path, source):
    """mypy --strict on a user's script in a directory of its own, skgpu found where the
    README's install (``pip install -e .``) put it: no MYPYPATH, no source tree beside
    the script (its own code not re-checked, as for any installed package)."""
    import importlib.metadata
    import os

    try:
        importlib.metadata.distribution("skgpu")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("skgpu is imported from a path, not installed: the README's install "
                    "is what this checks")
    script = tmp_path / "user_script.py"
    script.write_text(source)
    env = {k: v for k, v in os.environ.items() if k not in ("MYPYPATH", "PYTHONPATH")}
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
         "--no-incremental", "--cache-dir", str(tmp_path / "cache"), str(script)],
        cwd=tmp_path, capture_output=True, text=True, env=env)


def test_a_user_script_type_checks(tmp_path):
    """``fit`` returns the estimator's own type (not Any), and the configuration's
    values are checked."""
    pytest.importorskip("mypy")
    out = _mypy_on(tmp_path, USER_SCRIPT)
    assert out.returncode == 0, out.stdout[-3000:]
    out = _mypy_on(tmp_path, USER_SCRIPT + "\nreveal_type(PCA(2).fit(X))\n"
                                           "skgpu.set_config(device='cuda')\n")
    assert out.returncode == 1
    assert 'Revealed type is "skgpu.decomposition._pca.PCA"' in out.stdout
    assert "Literal['cuda']" in out.stdout and "set_config" in out.stdout
    # a wrong option to a constructor fails; predict's overloads give the tuple's parts
    out = _mypy_on(tmp_path, USER_SCRIPT + "\nGaussianProcessRegressor(cholesky='dense_please')\n"
                                           "reveal_type(gp.predict(X, return_std=True))\n")
    assert out.returncode == 1
    assert "dense_please" in out.stdout and "cholesky" in out.stdout
    assert 'Revealed type is "tuple[Any, Any]"' in out.stdout
    # where a fit ran is one of three; a subclass's fit returns the subclass
    out = _mypy_on(tmp_path, USER_SCRIPT + "\nreveal_type(pca.backend_)\n"
                   "class MyGP(GaussianProcessRegressor):\n    pass\n"
                   "reveal_type(MyGP().fit(X, X[:, 0]))\n"
                   "Wendland(1.0, smoothness=5)\n"
                   "PCA(svd_solver='fastest'); TruncatedSVD(algorithm='lanczos')\n"
                   "Ridge(solver='qr'); RidgeCV(gcv_mode='loo')\n")
    assert out.returncode == 1
    for option in ("svd_solver", "algorithm", "solver", "gcv_mode"):
        assert f'Argument "{option}" to' in out.stdout, out.stdout
    assert "Literal['gpu'] | Literal['cpu'] | Literal['dask']" in out.stdout, out.stdout
    assert 'Revealed type is "user_script.MyGP"' in out.stdout, out.stdout
    assert "smoothness" in out.stdout and "Literal[5]" in out.stdout, out.stdout
