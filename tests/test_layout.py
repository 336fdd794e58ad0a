"""The layout: one module per NVIDIA library in the GPU backend, the Dask
machinery apart from the chunked algorithms, and each public call validating its X once."""

import ast
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import DEVICES

import skgpu
import skgpu.utils.validation as validation
from skgpu.decomposition import PCA, TruncatedSVD
from skgpu.linear_model import Ridge, RidgeCV

ROOT = pathlib.Path(__file__).resolve().parents[1] / "skgpu"

#: The NVIDIA library (nvmath binding) each GPU module may call; no other module names one.
LIBRARY_OF = {"cublaslt.py": {"cublasLt", "cublas"},  # (cuBLAS's operation enum)
              "cusolver.py": {"cusolverDn"},
              "cublas.py": {"cublas"}, "cusparse.py": {"cusparse"},
              "handles.py": {"cublas", "cublasLt", "cusolverDn"}}


def _bindings_named(path):
    """The ``nvmath.bindings`` modules a source file imports."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module == "nvmath.bindings":
            names |= {a.name for a in node.names}
    return names


def test_each_nvidia_library_has_its_module():
    """cuBLASLt, cuSOLVER, cuBLAS, cuSPARSE are each imported by their own module (and
    the handle cache); cuDSS's DirectSolver only in ``cudss``; the backend class calls
    none of them directly."""
    gpu = ROOT / "backends" / "gpu"
    for path in sorted(gpu.glob("*.py")):
        assert _bindings_named(path) <= LIBRARY_OF.get(path.name, set()), path.name
    for path in sorted(gpu.glob("*.py")):
        uses_cudss = any(isinstance(n, ast.ImportFrom) and (n.module or "").startswith(
            "nvmath.sparse") for n in ast.walk(ast.parse(path.read_text())))
        assert uses_cudss == (path.name == "cudss.py"), path.name


def test_dask_machinery_and_algorithms_apart():
    """``skgpu.dask.runner`` holds no algorithm (it never touches a backend operation),
    ``skgpu.dask.linalg`` schedules nothing itself (no dask or distributed import)."""
    runner = (ROOT / "dask" / "runner.py").read_text()
    for op in ("gram(", "qr_r(", "matmul(", "eigh(", "svd("):
        assert op not in runner, op
    linalg = ast.parse((ROOT / "dask" / "linalg.py").read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(linalg)
                if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(linalg)
                 if isinstance(n, ast.ImportFrom) and n.module and n.level == 0}
    assert not imported & {"dask", "distributed"}, imported


def _imports(path):
    """(module, names) of every import statement in a source file, relative ones with
    their dots."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(alias.name, ()) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            out.append(("." * node.level + (node.module or ""),
                        tuple(alias.name for alias in node.names)))
    return out


def test_the_backend_seam_is_the_only_door():
    """Outside ``skgpu/backends/``: no import of the backends' private modules and no
    CuPy import (what estimators need of arrays and devices comes through
    ``skgpu.backends``); no ``hasattr(ops, ...)``: every operation is on both backends;
    no ``is_gpu``: what differs between the backends is a named policy of theirs
    (``finite_check``, ``memory``, ``defers_host_copies``, ``neighbour_search``,
    ``sparse_factor``)."""
    offenders = []
    for path in ROOT.rglob("*.py"):
        if "backends" in path.relative_to(ROOT).parts[:1]:
            continue
        for module, names in _imports(path):
            bare = module.lstrip(".")
            if bare.startswith("backends._") or ".backends._" in module or (
                    bare == "backends" and any(n.startswith("_") for n in names)):
                offenders.append(f"{path.relative_to(ROOT)}: {module} {names}")
            if bare.split(".")[0] in ("cupy", "cupyx"):
                offenders.append(f"{path.relative_to(ROOT)}: imports {module}")
    for package in ("decomposition", "linear_model", "gaussian_process", "dask", "utils"):
        for path in (ROOT / package).rglob("*.py"):
            text = path.read_text()
            if "hasattr(ops" in text:
                offenders.append(f"{path.relative_to(ROOT)}: hasattr(ops, ...)")
            if ".is_gpu" in text:
                offenders.append(f"{path.relative_to(ROOT)}: asks is_gpu")
    assert not offenders, "\n".join(offenders)


def test_import_skgpu_imports_neither_dask_nor_the_gpu_backend():
    code = ("import sys, skgpu, skgpu.decomposition, skgpu.linear_model, "
            "skgpu.gaussian_process; print(sorted(m for m in sys.modules if m == 'dask' "
            "or m.startswith(('skgpu.dask', 'skgpu.backends.gpu'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]", out.stdout


CALLS = {
    "PCA.fit": lambda X, y: PCA(3).fit(X),
    "PCA.fit_transform": lambda X, y: PCA(3).fit_transform(X),
    "PCA(full).fit_transform": lambda X, y: PCA(3, svd_solver="full").fit_transform(X),
    "TruncatedSVD.fit_transform": lambda X, y: TruncatedSVD(3).fit_transform(X),
    "Ridge.fit": lambda X, y: Ridge().fit(X, y),
    "RidgeCV.fit": lambda X, y: RidgeCV(alphas=[0.1, 1.0]).fit(X, y),
}
FITTED = {
    "PCA.transform": (lambda X, y: PCA(3).fit(X), lambda est, X: est.transform(X)),
    "TruncatedSVD.transform": (lambda X, y: TruncatedSVD(3).fit(X),
                               lambda est, X: est.transform(X)),
    "Ridge.predict": (lambda X, y: Ridge().fit(X, y), lambda est, X: est.predict(X)),
}


@pytest.fixture
def counted(monkeypatch):
    """Counts the validations of X (8 columns): scikit-learn's ``check_array`` of host
    data (which skgpu's validation and scikit-learn's own methods, run for host data on
    the CPU, go through) and skgpu's ``validate_data`` of device data."""
    import sklearn.utils.validation as skvalidation

    from skgpu.backends import is_device_array

    calls = []
    real, real_check = validation.validate_data, skvalidation.check_array

    def counting(estimator, X, *args, **kwargs):
        if is_device_array(X):
            calls.append(type(estimator).__name__)
        return real(estimator, X, *args, **kwargs)

    def counting_check(array, *args, **kwargs):
        if getattr(array, "shape", None) is not None and array.shape[1:] == (8,):
            calls.append("check_array")
        return real_check(array, *args, **kwargs)

    monkeypatch.setattr(validation, "validate_data", counting)
    monkeypatch.setattr(skvalidation, "check_array", counting_check)
    return calls


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", ["dense", "sparse"])
@pytest.mark.parametrize("call", sorted(CALLS))
def test_a_fit_validates_x_once(counted, call, kind, device, rng):
    if kind == "sparse" and call.startswith("PCA(full)"):
        pytest.skip("scikit-learn refuses sparse input with svd_solver='full'")
    X = rng.standard_normal((60, 8))
    X = sp.csr_matrix(np.where(np.abs(X) > 0.5, X, 0.0)) if kind == "sparse" else X
    y = rng.standard_normal(60)
    with skgpu.config_context(device=device):
        CALLS[call](X, y)
    assert len(counted) == 1, counted


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("call", sorted(FITTED))
def test_a_transform_or_predict_validates_x_once(counted, call, device, rng):
    X, y = rng.standard_normal((60, 8)), rng.standard_normal(60)
    fit, use = FITTED[call]
    with skgpu.config_context(device=device):
        est = fit(X, y)
        counted.clear()
        use(est, X)
    assert len(counted) == 1, counted
