"""The backend's own elementwise CUDA kernels (compiled by CuPy at first use)."""

import cupy as cp

sq_dist_kernel = cp.ElementwiseKernel(
    "raw T X, raw T Y, int64 m, int64 d", "T out",
    """
    long long r = i / m, c = i % m;
    T s = 0;
    for (long long k = 0; k < d; ++k) { T t = X[r * d + k] - Y[c * d + k]; s += t * t; }
    out = s;
    """,
    "skgpu_sq_dist",
)

keep_upper_halve_diagonal = cp.ElementwiseKernel(
    "int64 n", "T p",
    """
    long long r = i / n, c = i % n;
    if (c < r) { p = 0; } else if (c == r) { p = p * 0.5; }
    """,
    "skgpu_keep_upper_halve_diagonal",
)
