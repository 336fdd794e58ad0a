"""
RidgeCV: leave-one-out error over alphas
========================================

:class:`skgpu.linear_model.RidgeCV` computes the leave-one-out error of every alpha from
one QR factorisation of the (centred) data. Here on scikit-learn's diabetes data, with the
per-sample errors kept (``store_cv_results=True``), beside scikit-learn's.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn import linear_model as skl
from sklearn.datasets import load_diabetes

from skgpu.linear_model import RidgeCV

X, y = load_diabetes(return_X_y=True)
alphas = np.logspace(-5, 2, 40)
ridge = RidgeCV(alphas=alphas, store_cv_results=True).fit(X, y)
reference = skl.RidgeCV(alphas=alphas, store_cv_results=True).fit(X, y)
print(f"fitted on: {ridge.backend_}; alpha_ = {ridge.alpha_:.3g} "
      f"(scikit-learn: {reference.alpha_:.3g})")

loo_mse = ridge.cv_results_.mean(axis=0)
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.semilogx(alphas, loo_mse, label="skgpu")
ax.semilogx(alphas, reference.cv_results_.mean(axis=0), ls="none", marker="x", ms=4,
            label="scikit-learn")
ax.axvline(ridge.alpha_, color="grey", lw=0.8, ls="--")
ax.set_xlabel("alpha")
ax.set_ylabel("leave-one-out mean squared error")
ax.legend()
fig.tight_layout()
plt.show()
