"""Helpers shared by the tests."""

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
