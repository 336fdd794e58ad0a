"""Matrix decompositions: PCA and TruncatedSVD."""

from ._pca import PCA
from ._truncated_svd import TruncatedSVD

__all__ = ["PCA", "TruncatedSVD"]
