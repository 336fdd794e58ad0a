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
                         capture_output=True, text=True, timeout=280)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
