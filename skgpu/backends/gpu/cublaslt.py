"""cuBLASLt (``nvmath.bindings.cublasLt``): dense ``a @ b (+ bias)`` with the BIAS
epilog, one plan per operand layout kept in a per-thread cache."""

from __future__ import annotations

import cupy as cp
import numpy as np
from nvmath.bindings import cublas, cublasLt
from nvmath.linalg.advanced import MatmulComputeType

from ..._config import get_config
from .handles import library_handle, thread_state

_MATMUL_CACHE_SIZE = 16

_LT_TYPES = {np.dtype(np.float32): 0, np.dtype(np.float64): 1}  # CUDA_R_32F, CUDA_R_64F
#: Workspace a cuBLASLt algorithm may ask for (NVIDIA's recommendation for Hopper).
_LT_WORKSPACE = 32 << 20


def _lt_operand(x):
    """How cuBLASLt (column-major) sees ``xᵀ`` for a 2-D CuPy array ``x``: (transpose,
    rows, cols, ld) of a column-major matrix over x's memory, or None when neither of x's
    dimensions is contiguous. A row-major x (r × c) is xᵀ itself (c × r, op N); a
    column-major x is a column-major r × c matrix, transposed (op T)."""
    s = x.itemsize
    r, c = x.shape
    s0, s1 = x.strides
    if s0 % s or s1 % s or s0 < 0 or s1 < 0:
        return None
    if c == 1 or s1 == s:  # rows contiguous (a one-column x is too)
        ld = s0 // s if r > 1 else c
        return (cublas.Operation.N, c, r, ld) if ld >= max(c, 1) else None
    if r == 1 or s0 == s:  # columns contiguous
        ld = s1 // s if c > 1 else r
        return (cublas.Operation.T, r, c, ld) if ld >= max(r, 1) else None
    return None


def _alignment(ptr):
    """The largest power of two, up to 256, dividing a device address."""
    return min(256, ptr & -ptr) if ptr else 256


class _LtPlan:
    """One cuBLASLt matmul ``a @ b (+ bias)`` of fixed shapes, strides, dtype and operand
    alignment, made once with nvmath's cuBLASLt bindings and executed for new operands
    with one library call. (nvmath's ``Matmul`` object took ~0.1 ms of host time per
    call for its operand reset and stream and event bookkeeping: a fifth of the product
    itself at the PCA-transform size, 1,000,000 × 256 by 256 × 16.) The algorithm is
    cuBLASLt's first heuristic choice; at that size every configuration cuBLASLt
    accepted (35 of algorithm, tile, stages, swizzle) was timed, and none beat it
    (0.49 ms).

    Row-major ``out (m × n) = a (m × k) @ b (k × n)`` is column-major
    ``outᵀ = bᵀ aᵀ``: cuBLASLt's A is b, its B is a, and its BIAS epilog (a vector added
    to every column of the column-major result) adds ``bias`` to every row of ``out``.
    """

    def __init__(self, a, b, has_bias, compute_type):
        self.m, self.n = a.shape[0], b.shape[1]
        self.dtype = a.dtype
        dtype = _LT_TYPES[a.dtype]
        scale = np.empty(2, dtype=a.dtype)  # alpha, beta
        scale[:] = (1, 0)
        self._scale = scale
        self._objects = []
        handle = library_handle(cublasLt)
        desc = cublasLt.matmul_desc_create(int(compute_type), dtype)
        self._objects.append((cublasLt.matmul_desc_destroy, desc))
        layouts = []
        for x, which in ((b, "TRANSA"), (a, "TRANSB")):
            op, rows, cols, ld = _lt_operand(x)
            self._set(desc, which, np.int32(op))
            layouts.append(self._layout(dtype, rows, cols, ld))
        out = self._layout(dtype, self.n, self.m, max(self.n, 1))
        if has_bias:
            self._set(desc, "EPILOGUE", np.uint32(cublasLt.Epilogue.BIAS))
        pref = cublasLt.matmul_preference_create()
        self._objects.append((cublasLt.matmul_preference_destroy, pref))
        for attr, value in (("MAX_WORKSPACE_BYTES", np.uint64(_LT_WORKSPACE)),
                            ("MIN_ALIGNMENT_A_BYTES", np.uint32(_alignment(b.data.ptr))),
                            ("MIN_ALIGNMENT_B_BYTES", np.uint32(_alignment(a.data.ptr))),
                            ("MIN_ALIGNMENT_C_BYTES", np.uint32(256)),
                            ("MIN_ALIGNMENT_D_BYTES", np.uint32(256))):
            buf = np.array(value)
            cublasLt.matmul_preference_set_attribute(
                pref, getattr(cublasLt.MatmulPreferenceAttribute, attr), buf.ctypes.data,
                buf.nbytes)
        self._algo = cublasLt.MatmulHeuristicResult(1)
        found = np.zeros(1, dtype=np.int32)
        try:
            cublasLt.matmul_algo_get_heuristic(handle, desc, layouts[0], layouts[1], out,
                                               out, pref, 1, self._algo.ptr,
                                               found.ctypes.data)
            if found[0] < 1:
                raise RuntimeError("cuBLASLt found no algorithm for this matmul.")
        except Exception:
            self.free()
            raise
        self.workspace = int(self._algo.workspace_size)
        self._bias_ptr = np.zeros((), dtype=np.int64)
        self._call = (handle, desc, int(scale.ctypes.data), layouts[0], layouts[1],
                      int(scale[1:].ctypes.data), out, self._algo.ptr)

    def _set(self, desc, attr, value):
        buf = np.array(value)
        cublasLt.matmul_desc_set_attribute(desc, getattr(cublasLt.MatmulDescAttribute, attr),
                                           buf.ctypes.data, buf.nbytes)

    def _layout(self, dtype, rows, cols, ld):
        layout = cublasLt.matrix_layout_create(dtype, rows, cols, ld)
        self._objects.append((cublasLt.matrix_layout_destroy, layout))
        return layout

    def __call__(self, a, b, bias):
        handle, desc, alpha, a_layout, b_layout, beta, out_layout, algo = self._call
        out = cp.empty((self.m, self.n), dtype=self.dtype)
        if bias is not None:
            self._bias_ptr[()] = bias.data.ptr
            cublasLt.matmul_desc_set_attribute(desc, cublasLt.MatmulDescAttribute.BIAS_POINTER,
                                               self._bias_ptr.ctypes.data, 8)
        # the workspace comes from CuPy's pool per call (stream-ordered, so it is reused
        # safely); a cached one would pin pool memory that free_memory() cannot return
        workspace = cp.cuda.alloc(self.workspace) if self.workspace else None
        cublasLt.matmul(handle, desc, alpha, b.data.ptr, a_layout, a.data.ptr, b_layout, beta,
                        out.data.ptr, out_layout, out.data.ptr, out_layout, algo,
                        0 if workspace is None else workspace.ptr, self.workspace,
                        cp.cuda.get_current_stream().ptr)
        return out

    def free(self):
        while self._objects:
            destroy, obj = self._objects.pop()
            destroy(obj)


def matmul(a, b, bias, compute_type):
    """``a @ b (+ bias added to every row)`` for 2-D float32/float64 CuPy arrays through a
    cached :class:`_LtPlan` (the key holds shapes, strides, dtype, operand alignment,
    compute type and device). Operands with no contiguous dimension are copied first.
    Plans hold no operand: a user's array is freed when the user lets it go."""
    if a.dtype not in _LT_TYPES:
        raise TypeError(f"cuBLASLt matmul here takes float32 or float64, got {a.dtype}.")
    m, k = a.shape
    n = b.shape[1]
    if m == 0 or n == 0 or k == 0:  # nothing for cuBLASLt to do
        out = cp.zeros((m, n), dtype=a.dtype)
        return out if bias is None else out + bias
    if _lt_operand(a) is None:
        a = cp.ascontiguousarray(a)
    if _lt_operand(b) is None:
        b = cp.ascontiguousarray(b)
    key = (a.shape, a.strides, b.shape, b.strides, a.dtype.str, bias is not None,
           int(compute_type), _alignment(a.data.ptr), _alignment(b.data.ptr),
           cp.cuda.runtime.getDevice())
    plans = thread_state()["plans"]
    plan = plans.get(key)
    if plan is None:
        plan = plans[key] = _LtPlan(a, b, bias is not None, compute_type)
        if len(plans) > _MATMUL_CACHE_SIZE:
            plans.popitem(last=False)[1].free()
    else:
        plans.move_to_end(key)
    return plan(a, b, bias)


_COMPUTE_TYPES = {
    ("float32", "highest"): MatmulComputeType.COMPUTE_32F,
    ("float32", "high"): MatmulComputeType.COMPUTE_32F_FAST_TF32,
    ("float32", "medium"): MatmulComputeType.COMPUTE_32F_FAST_16BF,
}



def compute_type_for(dtype):
    """cuBLASLt's compute type for ``dtype`` under the ``matmul_precision`` setting."""
    if np.dtype(dtype) == np.float64:
        return MatmulComputeType.COMPUTE_64F
    return _COMPUTE_TYPES[(np.dtype(dtype).name, get_config()["matmul_precision"])]


def free_plans():
    """Destroy this thread's cached plans."""
    plans = thread_state()["plans"]
    for plan in plans.values():
        plan.free()
    plans.clear()
