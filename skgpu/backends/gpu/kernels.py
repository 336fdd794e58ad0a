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

# Flags written by elementwise kernels, compiled once per dtype: a CuPy reduction
# (``all``, ``any``, ``max``) on the GPU host's CuPy 14.2 was compiled anew for every
# array size (a cProfile of the first fit at n = 1,000,000: the batched Cholesky's 78
# batches, 97 NVRTC compiles, ~0.3 s each); the supernodal factor's batches have a new
# size per level and class, and those compiles took 28 s of a 42 s first fit on a fresh
# host (``benchmarks/results/cold_fit_compiles_h100.json``).
flag_not_positive = cp.ElementwiseKernel(
    "T d", "raw int32 flag",
    "if (!(d > 0) || isinf(d)) flag[0] = 1;",  # (NaN is not > 0)
    "skgpu_flag_not_positive",
)

flag_nonzero = cp.ElementwiseKernel(
    "int32 v", "raw int32 flag",
    "if (v != 0) flag[0] = 1;",
    "skgpu_flag_nonzero",
)

flag_outside_int32 = cp.ElementwiseKernel(
    "int64 v", "raw int32 flag",
    "if (v > 2147483647LL || v < -2147483648LL) flag[0] = 1;",
    "skgpu_flag_outside_int32",
)
