"""
PCA: explained variance on the digits
=====================================

:class:`skgpu.decomposition.PCA` on scikit-learn's bundled digits (1797 images of 8 × 8
pixels): the cumulative explained variance, and the same numbers as scikit-learn's PCA.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn import decomposition as skd
from sklearn.datasets import load_digits

from skgpu.decomposition import PCA

X = load_digits().data
pca = PCA(svd_solver="covariance_eigh").fit(X)
reference = skd.PCA(svd_solver="covariance_eigh").fit(X)
print(f"fitted on: {pca.backend_}; largest difference from scikit-learn: "
      f"{np.max(np.abs(pca.explained_variance_ratio_ - reference.explained_variance_ratio_)):.1e}")

cumulative = np.cumsum(pca.explained_variance_ratio_)
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.plot(np.arange(1, cumulative.size + 1), cumulative, marker=".")
ax.axhline(0.9, color="grey", lw=0.8, ls="--")
ax.set_xlabel("number of components")
ax.set_ylabel("cumulative explained variance")
ax.set_title(f"{np.searchsorted(cumulative, 0.9) + 1} components keep 90% of the variance")
fig.tight_layout()
plt.show()
