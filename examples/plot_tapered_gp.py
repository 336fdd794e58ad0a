"""
A tapered Gaussian process on a large 2-D spatial field
=======================================================

With a compactly supported covariance — here a Matérn kernel multiplied by a Wendland
taper — only nearby pairs of points are correlated, the covariance matrix is sparse, and
:class:`skgpu.gaussian_process.GaussianProcessRegressor` fits and predicts through a sparse
Cholesky (cuDSS on the GPU, CHOLMOD or SuperLU on the CPU) without ever forming a dense
n × n matrix.
"""

import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

from skgpu.gaussian_process import GaussianProcessRegressor
from skgpu.gaussian_process.kernels import Tapered

rng = np.random.default_rng(0)
n = 4000
X = rng.uniform(0, 1, (n, 2))


def field(X):
    return np.sin(12 * X[:, 0]) * np.cos(9 * X[:, 1]) + 0.5 * np.sin(20 * X[:, 0] * X[:, 1])


y = field(X) + 0.1 * rng.standard_normal(n)

taper = np.sqrt(30 / (np.pi * n))  # about 30 neighbours per point
# The taper's range is shorter than the field's correlation length, so the data cannot tell
# a Matérn length scale beyond it from a longer one: left free, the optimiser runs it to
# whatever upper bound it is given. It is fixed here; the amplitude and noise are fitted.
matern = Matern(0.1, nu=1.5, length_scale_bounds="fixed")
kernel = Tapered(ConstantKernel(1.0) * matern, taper_range=taper) + WhiteKernel(0.05)
start = time.perf_counter()
gpr = GaussianProcessRegressor(kernel, normalize_y=True, random_state=0).fit(X, y)
print(f"fitted on: {gpr.backend_}, path: {gpr.cholesky_}, "
      f"{time.perf_counter() - start:.1f} s\n{gpr.kernel_}")

grid = np.linspace(0, 1, 80)
G = np.column_stack([a.ravel() for a in np.meshgrid(grid, grid)])
mean, std = gpr.predict(G, return_std=True)
rms = np.sqrt(np.mean((mean - field(G)) ** 2))
print(f"RMS error of the predictive mean on the grid: {rms:.3f}"
      f" (noise std 0.1)")
fig, axes = plt.subplots(1, 3, figsize=(10, 3.2), sharey=True)
for ax, values, title in zip(axes, (field(G), mean, std),
                             ("true field", "predictive mean", "predictive std")):
    image = ax.imshow(values.reshape(80, 80), origin="lower", extent=(0, 1, 0, 1))
    ax.set_title(title)
    fig.colorbar(image, ax=ax, shrink=0.8)
fig.tight_layout()
plt.show()
