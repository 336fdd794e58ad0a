"""Linear models on the GPU: Ridge and RidgeCV (leave-one-out through QR)."""

from ._ridge import Ridge, RidgeCV

__all__ = ["Ridge", "RidgeCV"]
