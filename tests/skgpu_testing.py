"""Helpers shared by the tests."""

from fractions import Fraction

import numpy as np


def to_host(a):
    from skgpu.backends._arrays import to_numpy

    return to_numpy(a)


def assert_allclose_rel(actual, desired, rtol, atol_scale=None):
    """``|a - d| <= rtol * max|d|``: a relative error measured against the array's scale."""
    actual, desired = to_host(actual), to_host(desired)
    scale = np.max(np.abs(desired)) if atol_scale is None else atol_scale
    np.testing.assert_allclose(actual, desired, rtol=rtol, atol=rtol * max(scale, 1e-300))


def tol(dtype, cpu64=1e-10, gpu64=1e-8, f32=1e-4, backend="cpu"):
    if np.dtype(dtype) == np.float32:
        return f32
    return cpu64 if backend == "cpu" else gpu64


def skip_unless_supported(ops, *operations):
    """Skip a GPU-backend test when the GPU lacks what these operations need (e.g. cuDSS).

    The requirements come from ``skgpu.backends.GPU_REQUIREMENTS``, the one declaration.
    """
    import pytest

    from skgpu.backends import gpu_unsupported_reason

    if ops.is_gpu:
        reason = gpu_unsupported_reason(operations)
        if reason is not None:
            pytest.skip(reason)


def exact_covariance(X):
    """The sample covariance of the float values in X, exact, rounded once at the end."""
    rows = [[Fraction(float(v)) for v in row] for row in X]
    n, p = len(rows), len(rows[0])
    mean = [sum(r[j] for r in rows) / n for j in range(p)]
    C = np.empty((p, p))
    for a in range(p):
        for b in range(a, p):
            s = sum((r[a] - mean[a]) * (r[b] - mean[b]) for r in rows)
            C[a, b] = C[b, a] = float(s / (n - 1))
    return C, np.array([float(m) for m in mean])
