"""
A grid search over data already on the GPU
==========================================

``GridSearchCV`` over ``Pipeline([PCA, RidgeCV])`` with X and y as CuPy arrays: the folds
are indexed on the device, each fold's PCA and RidgeCV run there, and each estimator's
``score`` is computed there too, so nothing goes through the host but one number per fold.
The same code takes NumPy arrays or torch tensors on ``"cuda"``.

This page is built on a machine without a GPU, where the example uses NumPy arrays; on a
machine with one, ``xp`` below is CuPy. A string ``scoring=`` needs scikit-learn's
array-API dispatch on device data (see the user guide, "Searches and cross-validation on
device data").
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.pipeline import Pipeline

from skgpu.backends import gpu_status
from skgpu.decomposition import PCA
from skgpu.linear_model import RidgeCV

if gpu_status()[0]:
    import cupy as xp
else:
    xp = np

rng = np.random.default_rng(0)
n, p, rank = 20_000, 64, 8
factors = rng.standard_normal((n, rank))  # y depends on X through 8 hidden factors
X = factors @ rng.standard_normal((rank, p)) + 2.0 * rng.standard_normal((n, p))
y = factors @ rng.standard_normal(rank) + 0.5 * rng.standard_normal(n)
X, y = xp.asarray(X, dtype=np.float32), xp.asarray(y, dtype=np.float32)  # on the GPU if any

pipe = Pipeline([("pca", PCA()), ("ridge", RidgeCV(alphas=np.logspace(-3, 3, 13)))])
search = GridSearchCV(pipe, {"pca__n_components": [2, 4, 8, 16, 32]},
                      cv=KFold(5, shuffle=True, random_state=0))
search.fit(X, y)
print(f"data: {type(X).__module__.split('.')[0]} arrays; fitted on: "
      f"{search.best_estimator_['pca'].backend_}")
print(f"best_params_: {search.best_params_}, best_score_ (R²): {search.best_score_:.4f}")

# %%
# The best pipeline as a notebook shows it: each skgpu step links ("?") to its page in this
# documentation.
search.best_estimator_  # noqa: B018 - the gallery shows the last expression's value

# %%
# Test R² against the number of components, with its spread over the folds.
scores = search.cv_results_["mean_test_score"]
spread = search.cv_results_["std_test_score"]
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.errorbar([2, 4, 8, 16, 32], scores, yerr=spread, marker="o", capsize=3)
ax.set_xscale("log", base=2)
ax.set_xlabel("PCA n_components")
ax.set_ylabel("mean test R² over 5 folds")
ax.set_title("Test R² levels off at the 8 hidden factors")
fig.tight_layout()
plt.show()
