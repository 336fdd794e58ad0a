"""Compactly supported kernels: Wendland functions and covariance tapering.

Both follow scikit-learn's kernel conventions (hyperparameters, bounds, ``theta`` in log
space, ``clone``, ``__call__(X, Y, eval_gradient)``, ``diag``) and compose with
scikit-learn's ConstantKernel and WhiteKernel. Their Gram matrix is zero beyond the support
radius, so :class:`~skgpu.gaussian_process.GaussianProcessRegressor` can keep it sparse and
factor it with a sparse Cholesky (cuDSS on the GPU).
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from scipy.spatial.distance import cdist, pdist, squareform
from sklearn.gaussian_process.kernels import (
    Hyperparameter,
    Kernel,
    NormalizedKernelMixin,
    StationaryKernelMixin,
)


def _wendland_exponent_and_poly(smoothness, dimension):
    """``φ(r) = (1 - r)₊^e · p(r)`` with ``p(0) = 1`` (Wendland 1995; Rasmussen & Williams
    2006, eq. 4.21): positive definite in ``dimension`` dimensions and 2k times
    differentiable at the origin."""
    _check_smoothness(smoothness)  # every path (dense, sparse, GPU) comes through here
    j = dimension // 2 + smoothness + 1
    polys = {
        0: [1.0],
        1: [1.0, j + 1.0],
        2: [1.0, (3 * j + 6) / 3.0, (j**2 + 4 * j + 3) / 3.0],
        3: [1.0, (15 * j + 45) / 15.0, (6 * j**2 + 36 * j + 45) / 15.0,
            (j**3 + 9 * j**2 + 23 * j + 15) / 15.0],
    }
    return j + smoothness, np.asarray(polys[smoothness])  # coefficients, low order first


def wendland(r, smoothness, dimension, xp=np):
    """φ(r) for scaled distances ``r`` (zero for r >= 1)."""
    e, c = _wendland_exponent_and_poly(smoothness, dimension)
    one_minus = xp.maximum(1.0 - r, 0.0)
    p = c[-1]
    for coef in c[-2::-1]:
        p = p * r + coef
    return one_minus**e * p


def wendland_log_radius_gradient(r, smoothness, dimension, xp=np):
    """∂φ(d/ρ)/∂log ρ = -r φ'(r) for scaled distances ``r``."""
    e, c = _wendland_exponent_and_poly(smoothness, dimension)
    one_minus = xp.maximum(1.0 - r, 0.0)
    p = c[-1]
    dp = 0.0 * r
    for coef in c[-2::-1]:
        dp = dp * r + p
        p = p * r + coef
    dphi = -e * one_minus ** (e - 1) * p + one_minus**e * dp
    return -r * dphi


def _check_smoothness(smoothness):
    if smoothness not in (0, 1, 2, 3):
        raise ValueError(f"smoothness must be 0, 1, 2 or 3, got {smoothness!r}")


def _check_compact(kernel, n_features):
    """Wendland's and Tapered's parameters against the data, with an error that names
    them (a radius of zero or below, or a dimension below X's, would otherwise surface
    as a failed Cholesky factorisation; a kernel that is not one, as an AttributeError).
    A Wendland function positive definite in d dimensions is so in fewer, not more."""
    if isinstance(kernel, Tapered):
        if not isinstance(kernel.kernel, Kernel):
            raise ValueError("Tapered's kernel must be a scikit-learn kernel (an instance "
                             "of sklearn.gaussian_process.kernels.Kernel), got "
                             f"{kernel.kernel!r}.")
        what, radius, name = "Tapered", kernel.taper_range, "taper_range"
    else:
        what, radius, name = "Wendland", kernel.support_radius, "support_radius"
    value = np.asarray(radius, dtype=np.float64) if np.ndim(radius) == 0 else None
    if value is None or not np.isfinite(value) or not value > 0:
        raise ValueError(f"{what}'s {name} must be a positive, finite number, got "
                         f"{radius!r}.")
    dimension = kernel.dimension
    if dimension is not None and (isinstance(dimension, bool) or not isinstance(
            dimension, (int, np.integer)) or dimension < n_features):
        raise ValueError(f"{what}(dimension={dimension!r}) is positive definite in at most "
                         f"{dimension!r} dimension(s), but X has {n_features} features: "
                         f"set dimension to an integer >= {n_features}, or None (X's).")


def check_compact_kernels(kernel, n_features):
    """:func:`_check_compact` for every Wendland and Tapered in a kernel expression."""
    if isinstance(kernel, (Wendland, Tapered)):
        _check_compact(kernel, n_features)
        if isinstance(kernel, Tapered):
            check_compact_kernels(kernel.kernel, n_features)
    for child in ("k1", "k2", "kernel"):
        sub = getattr(kernel, child, None)
        if isinstance(sub, Kernel) and not isinstance(kernel, Tapered):
            check_compact_kernels(sub, n_features)


class Wendland(StationaryKernelMixin, NormalizedKernelMixin, Kernel):
    """Wendland's compactly supported kernel ``k(x, y) = φ_{d,k}(‖x - y‖ / ρ)``.

    ``φ_{d,k}(r) = (1 - r)₊^{j+k} p_k(r)`` with ``j = ⌊d/2⌋ + k + 1`` is positive
    definite in d dimensions, 2k times differentiable, and exactly zero beyond the
    support radius ρ: only pairs closer than ρ enter the Gram matrix.

    Parameters
    ----------
    support_radius : float, default=1.0
        ρ, beyond which the kernel is zero (a hyperparameter, optimised in log space).
    smoothness : {0, 1, 2, 3}, default=1
        k: the kernel is 2k times differentiable at the origin (k=1 is like Matern 3/2).
    dimension : int or None, default=None
        The d it must be positive definite in; None means the number of features of the
        data it is evaluated on.
    support_radius_bounds : pair of floats >= 0 or "fixed", default=(1e-5, 1e5)
        Bounds of ``support_radius``.

    Examples
    --------
    >>> import numpy as np
    >>> from skgpu.gaussian_process.kernels import Wendland
    >>> K = Wendland(support_radius=1.5)(np.array([[0.0], [1.0], [2.0]]))
    >>> print(K.round(4))
    [[1.     0.1111 0.    ]
     [0.1111 1.     0.1111]
     [0.     0.1111 1.    ]]
    """

    def __init__(self, support_radius: float = 1.0, smoothness: Literal[0, 1, 2, 3] = 1,
                 dimension: int | None = None,
                 support_radius_bounds: tuple[float, float] | Literal["fixed"] = (1e-5, 1e5)
                 ) -> None:
        self.support_radius = support_radius
        self.smoothness = smoothness
        self.dimension = dimension
        self.support_radius_bounds = support_radius_bounds

    @property
    def hyperparameter_support_radius(self):
        return Hyperparameter("support_radius", "numeric", self.support_radius_bounds)

    def _dimension(self, X):
        return int(self.dimension) if self.dimension is not None else np.shape(X)[1]

    def support(self) -> float:
        """Distance beyond which the kernel is zero."""
        return float(self.support_radius)

    def __call__(self, X, Y=None, eval_gradient=False):
        """Return the kernel k(X, Y) and optionally its gradient (log space).

        Parameters
        ----------
        X : ndarray of shape (n_samples_X, n_features)
        Y : ndarray of shape (n_samples_Y, n_features), default=None
            None means k(X, X).
        eval_gradient : bool, default=False
            Also return the gradient with respect to log(support_radius); only when
            Y is None.

        Returns
        -------
        K : ndarray of shape (n_samples_X, n_samples_Y)
        K_gradient : ndarray of shape (n_samples_X, n_samples_X, n_dims), optional
        """
        _check_smoothness(self.smoothness)
        X = np.atleast_2d(X)
        _check_compact(self, X.shape[1])
        d = self._dimension(X)
        # distances of the scaled points: those of X itself overflow for |X| ~ 1e155+
        rho = float(self.support_radius)
        if Y is None:
            r = squareform(pdist(X / rho, metric="euclidean"))
        else:
            if eval_gradient:
                raise ValueError("Gradient can only be evaluated when Y is None.")
            r = cdist(X / rho, np.atleast_2d(Y) / rho, metric="euclidean")
        K = wendland(r, self.smoothness, d)
        if not eval_gradient:
            return K
        if self.hyperparameter_support_radius.fixed:
            return K, np.empty((X.shape[0], X.shape[0], 0))
        grad = wendland_log_radius_gradient(r, self.smoothness, d)
        return K, grad[:, :, np.newaxis]

    def __repr__(self):
        return (f"{type(self).__name__}(support_radius={self.support_radius:.3g}, "
                f"smoothness={self.smoothness})")


class Tapered(Kernel):
    """A kernel multiplied by a Wendland taper: ``k(x, y) · φ(‖x - y‖ / range)``.

    Covariance tapering (Furrer, Genton & Nychka 2006): the product of a positive
    definite kernel and a positive definite compactly supported taper is positive
    definite, and zero beyond ``taper_range``, so the Gram matrix is sparse. The taper is
    fixed; the hyperparameters are the wrapped kernel's (named ``kernel__<name>``).

    Parameters
    ----------
    kernel : kernel instance
        Usually a stationary scikit-learn kernel (Matern, RBF, ...), optionally scaled
        by a ConstantKernel.
    taper_range : float, default=1.0
        Support radius of the taper.
    taper_smoothness : {0, 1, 2, 3}, default=1
        Smoothness k of the Wendland taper (k=1 suits Matern up to nu=1.5).
    dimension : int or None, default=None
        Dimension the taper must be positive definite in (None: the data's).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.gaussian_process.kernels import Matern
    >>> from skgpu.gaussian_process.kernels import Tapered
    >>> kernel = Tapered(Matern(length_scale=0.5, nu=1.5), taper_range=1.5)
    >>> print(kernel(np.array([[0.0], [1.0], [2.0]])).round(4))
    [[1.     0.0155 0.    ]
     [0.0155 1.     0.0155]
     [0.     0.0155 1.    ]]
    """

    def __init__(self, kernel: Any, taper_range: float = 1.0,
                 taper_smoothness: Literal[0, 1, 2, 3] = 1,
                 dimension: int | None = None) -> None:
        self.kernel = kernel
        self.taper_range = taper_range
        self.taper_smoothness = taper_smoothness
        self.dimension = dimension

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        params = dict(kernel=self.kernel, taper_range=self.taper_range,
                      taper_smoothness=self.taper_smoothness, dimension=self.dimension)
        if deep:
            params.update(("kernel__" + k, v) for k, v in self.kernel.get_params().items())
        return params

    @property
    def hyperparameters(self):
        return [Hyperparameter("kernel__" + hp.name, hp.value_type, hp.bounds,
                               hp.n_elements) for hp in self.kernel.hyperparameters]

    @property
    def theta(self):
        return self.kernel.theta

    @theta.setter
    def theta(self, theta):
        self.kernel.theta = theta

    @property
    def bounds(self):
        return self.kernel.bounds

    def __eq__(self, b):
        return (type(self) is type(b) and self.kernel == b.kernel
                and self.taper_range == b.taper_range
                and self.taper_smoothness == b.taper_smoothness
                and self.dimension == b.dimension)

    def support(self) -> float:
        """Distance beyond which the kernel is zero."""
        return float(self.taper_range)

    def taper(self, X: np.ndarray, Y: np.ndarray | None = None) -> np.ndarray:
        """The taper's Gram matrix."""
        _check_smoothness(self.taper_smoothness)
        X = np.atleast_2d(X)
        _check_compact(self, X.shape[1])
        d = int(self.dimension) if self.dimension is not None else X.shape[1]
        rho = float(self.taper_range)  # scaled first, as in Wendland.__call__
        r = squareform(pdist(X / rho)) if Y is None else cdist(X / rho, np.atleast_2d(Y) / rho)
        return wendland(r, self.taper_smoothness, d)

    def __call__(self, X, Y=None, eval_gradient=False):
        """Return the tapered kernel k(X, Y) and optionally its gradient (log space).

        Parameters
        ----------
        X : ndarray of shape (n_samples_X, n_features)
        Y : ndarray of shape (n_samples_Y, n_features), default=None
        eval_gradient : bool, default=False

        Returns
        -------
        K : ndarray of shape (n_samples_X, n_samples_Y)
        K_gradient : ndarray of shape (n_samples_X, n_samples_X, n_dims), optional
        """
        T = self.taper(X, Y)
        if eval_gradient:
            K, G = self.kernel(X, Y, eval_gradient=True)
            return K * T, G * T[:, :, np.newaxis]
        return self.kernel(X, Y) * T

    def diag(self, X):
        """Diagonal of k(X, X): the wrapped kernel's (the taper is one there)."""
        return self.kernel.diag(X)

    def is_stationary(self) -> bool:
        return self.kernel.is_stationary()

    @property
    def requires_vector_input(self):
        return True

    def __repr__(self):
        return f"Tapered({self.kernel!r}, taper_range={self.taper_range:.3g})"


__all__ = ["Tapered", "Wendland"]
