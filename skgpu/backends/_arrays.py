"""Recognise array containers without importing them, and convert between them.

CuPy and torch are never imported here unless the array in hand already comes from them,
so that ``import skgpu`` costs no GPU initialisation.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp


#: What each type seen so far is (these checks run several times on every call's path;
#: the type's own attributes are asked, not an instance's: CuPy's
#: ``__cuda_array_interface__`` builds a new dict on each access).
_KINDS: dict[type, str] = {}


def _kind(X):
    t = type(X)
    kind = _KINDS.get(t)
    if kind is None:
        module = t.__module__ or ""
        root = module.split(".", 1)[0]
        if module.startswith("cupyx.scipy.sparse"):
            kind = "cupy-sparse"
        elif root == "cupy" and hasattr(t, "__cuda_array_interface__"):
            kind = "cupy"
        elif root == "torch" and hasattr(t, "__dlpack__"):
            kind = "torch"
        else:
            kind = "other"
        _KINDS[t] = kind
    return kind


def is_cupy_array(X):
    return _kind(X) == "cupy"


def is_cupy_sparse(X):
    return _kind(X) == "cupy-sparse"


def is_dask_array(X):
    """True for a dask array (checked by its type's module: dask is never imported here)."""
    return type(X).__module__.split(".")[0] == "dask" and hasattr(X, "chunks")


def is_dask_collection(X):
    """A dask array, DataFrame or Series (by its type's module: dask is not imported)."""
    return is_dask_array(X) or (type(X).__module__.split(".")[0] == "dask"
                                and hasattr(X, "to_dask_array"))


def is_torch_tensor(X):
    return _kind(X) == "torch"


def is_device_array(X):
    """True for arrays that live in GPU memory (CuPy, CuPy sparse, CUDA torch tensors)."""
    if is_cupy_array(X) or is_cupy_sparse(X):
        return True
    return is_torch_tensor(X) and X.device.type == "cuda"


def is_sparse(X):
    return sp.issparse(X) or is_cupy_sparse(X)


@dataclass(frozen=True)
class ContainerSpec:
    """Where an input came from, so that outputs can be returned in the same kind.

    kind : "numpy", "cupy", "torch" (the tensor's device is kept), "scipy-sparse",
    "cupy-sparse" or "dask" (a dask array, DataFrame or Series). pandas DataFrames and
    lists count as "numpy": scikit-learn's ``set_output`` handles DataFrame output.

    Made once per public call by :func:`container_of`; the later steps read it instead of
    asking the array again.
    """

    kind: str
    torch_device: Any = None

    @property
    def sparse(self) -> bool:
        return self.kind in ("scipy-sparse", "cupy-sparse")

    @property
    def on_device(self) -> bool:
        return self.kind in ("cupy", "cupy-sparse") or (
            self.kind == "torch" and self.torch_device.type == "cuda")

    @property
    def dask(self) -> bool:
        return self.kind == "dask"

    @property
    def host(self) -> bool:
        """NumPy, pandas, lists or SciPy sparse: what scikit-learn's own code takes."""
        return self.kind in ("numpy", "scipy-sparse")

    @property
    def host_torch(self) -> bool:
        """A torch tensor in host memory (validated as its NumPy view)."""
        return self.kind == "torch" and self.torch_device.type != "cuda"


def container_of(X) -> ContainerSpec:
    """What X is, asked once: the :class:`ContainerSpec` a public call carries on."""
    if type(X) is np.ndarray:  # the common case first (a serving call's ~1 µs)
        return _NUMPY
    kind = _kind(X)
    if kind == "cupy-sparse":
        return _CUPY_SPARSE
    if kind == "cupy":
        return _CUPY
    if kind == "torch":
        return ContainerSpec("torch", X.device)
    if sp.issparse(X):
        return _SCIPY_SPARSE
    if is_dask_collection(X):
        return _DASK
    return _NUMPY


_CUPY, _CUPY_SPARSE = ContainerSpec("cupy"), ContainerSpec("cupy-sparse")
_NUMPY, _SCIPY_SPARSE, _DASK = (ContainerSpec("numpy"), ContainerSpec("scipy-sparse"),
                                ContainerSpec("dask"))


def to_numpy(a):
    """Any supported dense array or sparse matrix, moved to host memory (NumPy/SciPy)."""
    if a is None or isinstance(a, np.ndarray) or sp.issparse(a):
        return a
    if is_cupy_array(a) or is_cupy_sparse(a):
        return a.get()
    if is_torch_tensor(a):
        return a.detach().cpu().numpy()
    return np.asarray(a)


def cupy_module():
    """CuPy, the array module of device arrays (imported where it is asked for: callers
    hold CuPy data already)."""
    import cupy

    return cupy


def cupy_sparse_module():
    """``cupyx.scipy.sparse``."""
    import cupyx.scipy.sparse

    return cupyx.scipy.sparse


def to_cupy(a):
    """Any supported array moved to (or viewed on) the current GPU as CuPy."""
    if is_cupy_array(a) or is_cupy_sparse(a):  # first: this is on every call's path
        return a
    import cupy as cp
    import cupyx.scipy.sparse as csp

    if sp.issparse(a):
        fmt = a.format if a.format in ("csr", "csc", "coo") else "csr"
        return getattr(csp, f"{fmt}_matrix")(a.asformat(fmt))
    if is_torch_tensor(a):
        if a.device.type == "cuda":
            return cp.from_dlpack(a.detach())
        a = a.detach().numpy()
    return cp.asarray(a)


def convert_output(a, spec: ContainerSpec):
    """Return backend output ``a`` in the container described by ``spec``."""
    if a is None:
        return None
    kind = spec.kind
    if kind in ("numpy", "scipy-sparse"):
        return to_numpy(a)
    if kind in ("cupy", "cupy-sparse"):
        return to_cupy(a)
    if kind != "torch":  # a dask input is answered by the dask path, never here
        raise TypeError(f"no output conversion to a {kind!r} container")
    # same device as the input, through DLPack (no host round trip on CUDA).
    torch = sys.modules["torch"]
    if spec.torch_device.type == "cuda":
        return torch.from_dlpack(to_cupy(a)).to(spec.torch_device)
    return torch.from_numpy(np.ascontiguousarray(to_numpy(a)))
