"""Dask input: partial results per row chunk on each worker's backend, combined on the client.

:mod:`.runner` runs per-chunk work on the active dask scheduler (with a
``dask.distributed`` Client, dask-cuda's LocalCUDACluster with one GPU per worker or a
CPU LocalCluster; no scheduler or communication of our own); :mod:`.linalg` holds the
chunked algorithms: PCA's covariance, Ridge's normal equations, RidgeCV's leave-one-out
passes, TSQR and the randomized SVD.

``import skgpu`` never imports this package (nor dask); the estimators import it only
when they are given a dask array.
"""

from .input import DaskInput, InvalidChunks, map_rows, prepare_dask_fit
from .linalg import (
    column_and_projection_variances,
    pca_covariance,
    pca_r_factor,
    pca_randomized,
    randomized_svd,
    ridge_normal_equations,
    ridgecv_loo,
    truncated_svd,
)

__all__ = [
    "DaskInput", "InvalidChunks", "map_rows", "prepare_dask_fit",
    "column_and_projection_variances", "pca_covariance", "pca_r_factor", "pca_randomized",
    "randomized_svd", "ridge_normal_equations", "ridgecv_loo", "truncated_svd",
]
