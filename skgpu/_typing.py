"""Names for the types in skgpu's public signatures.

skgpu takes what scikit-learn takes (NumPy arrays, lists, pandas, SciPy sparse matrices)
and device and Dask arrays besides (CuPy, torch, ``dask.array``), without importing any of
the optional ones, and returns results in the input's container. Static types cannot
follow that, so the data names are aliases of ``Any`` that say what is meant; everything
else in the signatures is precise.
"""

from __future__ import annotations

from typing import Any, TypeAlias

#: A 2-D data container: NumPy, list of lists, pandas, SciPy sparse, CuPy (sparse), torch,
#: dask.array. Outputs of this name are in the container of the input.
MatrixLike: TypeAlias = Any

#: A 1-D (or, for multi-target regression, 2-D) container of targets or weights.
ArrayLike: TypeAlias = Any

#: What ``random_state`` takes, as in scikit-learn.
RandomStateLike: TypeAlias = Any

__all__ = ["ArrayLike", "MatrixLike", "RandomStateLike"]
