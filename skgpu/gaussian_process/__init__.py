"""Gaussian process regression on the GPU (dense Cholesky)."""

from ._gpr import GaussianProcessRegressor

__all__ = ["GaussianProcessRegressor"]
