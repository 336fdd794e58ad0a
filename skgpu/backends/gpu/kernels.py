"""The backend's own CUDA kernels, elementwise and raw (compiled by CuPy at first use)."""

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

# Column sums of a tall C-ordered X about its first row, ``Σᵢ wᵢ (xᵢⱼ - x₀ⱼ)`` in float64,
# one partial sum per block of rows (summed afterwards in a fixed order: the result does
# not change from run to run, as atomics would make it). A thread reads one column of its
# block, the threads of a block the neighbouring columns of the same rows (coalesced).
_SHIFTED_SUMS_SOURCE = r"""
template<typename T>
__global__ void shifted_column_sums(const T* __restrict__ X, const T* __restrict__ w,
                                    double* __restrict__ partial, long long n, long long p,
                                    long long rows) {
    long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= p) return;
    long long start = (long long)blockIdx.y * rows;
    long long stop = start + rows < n ? start + rows : n;
    double x0 = (double)X[j];
    double acc = 0.0;
    if (w == nullptr) {
        #pragma unroll 8
        for (long long i = start; i < stop; ++i) acc += (double)X[i * p + j] - x0;
    } else {
        #pragma unroll 8
        for (long long i = start; i < stop; ++i) acc += (double)w[i] * ((double)X[i * p + j] - x0);
    }
    partial[(long long)blockIdx.y * p + j] = acc;
}
"""
_shifted_sums_module = cp.RawModule(
    code=_SHIFTED_SUMS_SOURCE, options=("-std=c++17",),
    name_expressions=("shifted_column_sums<float>", "shifted_column_sums<double>"))
#: Rows of X summed by one block of threads of :func:`shifted_column_sums` (more where X
#: has over 65,535 times as many).
SHIFTED_SUM_ROWS = 512


def shifted_column_sums(X, w=None):
    """``Σᵢ wᵢ (xᵢ - x₀)`` (float64, p) for a C-ordered float32/float64 n × p X with
    n ≥ 1, ``w`` (X's dtype, n) or unit weights: one read of X."""
    n, p = X.shape
    name = "shifted_column_sums<%s>" % ("float" if X.dtype == cp.float32 else "double")
    kernel = _shifted_sums_module.get_function(name)
    threads = min(256, 32 * -(-p // 32))
    rows = max(SHIFTED_SUM_ROWS, -(-n // 65535))  # (a grid has at most 65,535 rows)
    blocks = (-(-p // threads), -(-n // rows))
    partial = cp.empty((blocks[1], p), dtype=cp.float64)
    weights = 0 if w is None else w
    kernel(blocks, (threads,), (X, weights, partial, cp.int64(n), cp.int64(p),
                                cp.int64(rows)))
    # a GEMV over the blocks' partial sums (a CuPy reduction would compile for each size)
    return cp.ones(blocks[1], dtype=cp.float64) @ partial


#: ``(x - x₀) - δ`` column by column: X centred about its first row, then by the shifted
#: data's mean, two roundings as in two passes, in one.
shifted_centre = cp.ElementwiseKernel(
    "T x, raw T x0, raw T delta, int64 p", "T out",
    "long long j = i % p; out = (x - x0[j]) - delta[j];",
    "skgpu_shifted_centre",
)
