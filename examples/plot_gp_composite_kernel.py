"""
Gaussian process regression with a composite kernel
===================================================

The kernel of scikit-learn's CO₂ example — a long-term trend, a decaying seasonal
component, medium-term irregularities and noise — fitted by
:class:`skgpu.gaussian_process.GaussianProcessRegressor` on a synthetic monthly series,
with the predictive mean and a two-standard-deviation band.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.gaussian_process.kernels import RBF, ExpSineSquared, RationalQuadratic
from sklearn.gaussian_process.kernels import WhiteKernel

from skgpu.gaussian_process import GaussianProcessRegressor

rng = np.random.default_rng(0)
t = np.arange(0, 12, 1 / 12)[:, None]
y = (0.4 * t[:, 0] + 0.02 * t[:, 0] ** 2 + 2.0 * np.sin(2 * np.pi * t[:, 0])
     * np.exp(-t[:, 0] / 30) + 0.3 * rng.standard_normal(t.shape[0]))

kernel = (
    50.0**2 * RBF(length_scale=50.0)
    + 2.0**2 * RBF(length_scale=100.0) * ExpSineSquared(length_scale=1.0, periodicity=1.0,
                                                        periodicity_bounds="fixed")
    + 0.5**2 * RationalQuadratic(length_scale=1.0, alpha=1.0)
    + 0.1**2 * RBF(length_scale=0.1) + WhiteKernel(noise_level=0.1**2)
)
gpr = GaussianProcessRegressor(kernel, normalize_y=True, random_state=0).fit(t, y)
print(f"fitted on: {gpr.backend_}\n{gpr.kernel_}")

t_new = np.linspace(0, 15, 400)[:, None]
mean, std = gpr.predict(t_new, return_std=True)
fig, ax = plt.subplots(figsize=(7, 3.5))
ax.plot(t[:, 0], y, ".", ms=3, color="black", label="observations")
ax.plot(t_new[:, 0], mean, label="predictive mean")
ax.fill_between(t_new[:, 0], mean - 2 * std, mean + 2 * std, alpha=0.3, label="± 2 std")
ax.set_xlabel("years")
ax.legend(loc="upper left")
fig.tight_layout()
plt.show()
