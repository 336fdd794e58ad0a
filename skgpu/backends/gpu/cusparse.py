"""cuSPARSE (``nvmath.bindings.cusparse``): sparse @ dense by SpMM on row-major operands."""

from __future__ import annotations

import cupy as cp
import numpy as np
import nvmath
from nvmath.bindings import cusparse

from .handles import library_handle

#: cuSPARSE SpMM algorithm for CSR times a row-major dense matrix (CSR_ALG2, for
#: row-major operands; at the TruncatedSVD benchmark's shapes 0.81 / 1.13 ms for A·Q / Aᵀ·Q
#: against 2.2 ms with CSR_ALG1 and 0.94 ms with CSR_ALG3; the DEFAULT measured as ALG2).
_SPMM_ALG = cusparse.SpMMAlg.CSR_ALG2


def sparse_product(A, B):
    """``A @ B`` for a CuPy CSR or CSC ``A`` and a dense ``B`` by cuSPARSE's SpMM with
    row-major (C-ordered) B and result, or None where CuPy's own product is used instead
    (another format or index type, mixed or non-float dtypes).

    CuPy's product asks for a Fortran-ordered B (a copy of the iterate at every power
    iteration) and runs the column-major algorithm, which gathers B one column at a
    time; with row-major operands each stored entry of A reads one contiguous row of B.
    A CSC A is the CSR of Aᵀ, multiplied with the transpose operation.
    """
    if A.format not in ("csr", "csc") or B.ndim not in (1, 2) or B.dtype != A.dtype or (
            A.dtype not in (np.float32, np.float64)) or A.indptr.dtype != np.int32 or (
            A.indices.dtype != np.int32):
        return None
    vector = B.ndim == 1
    B = cp.ascontiguousarray(B.reshape(-1, 1) if vector else B)
    m, k = A.shape
    n = B.shape[1]
    C = cp.empty((m, n), dtype=A.dtype)
    if A.nnz == 0 or n == 0:
        C.fill(0)
        return C.ravel() if vector else C
    if not A.has_canonical_format:
        A.sum_duplicates()
    value_type = (nvmath.CudaDataType.CUDA_R_32F if A.dtype == np.float32
                  else nvmath.CudaDataType.CUDA_R_64F)
    index = cusparse.IndexType.INDEX_32I
    rows, cols = (m, k) if A.format == "csr" else (k, m)
    op = (cusparse.Operation.NON_TRANSPOSE if A.format == "csr"
          else cusparse.Operation.TRANSPOSE)
    alg = _SPMM_ALG if A.format == "csr" else cusparse.SpMMAlg.DEFAULT
    handle = library_handle(cusparse)
    alpha, beta = np.ones(1, dtype=A.dtype), np.zeros(1, dtype=A.dtype)
    descriptors = []
    try:
        mat_a = cusparse.create_csr(rows, cols, A.nnz, A.indptr.data.ptr,
                                    A.indices.data.ptr, A.data.data.ptr, index, index,
                                    cusparse.IndexBase.ZERO, value_type)
        descriptors.append((cusparse.destroy_sp_mat, mat_a))
        mat_b = cusparse.create_dn_mat(k, n, n, B.data.ptr, value_type, cusparse.Order.ROW)
        descriptors.append((cusparse.destroy_dn_mat, mat_b))
        mat_c = cusparse.create_dn_mat(m, n, n, C.data.ptr, value_type, cusparse.Order.ROW)
        descriptors.append((cusparse.destroy_dn_mat, mat_c))
        args = (handle, op, cusparse.Operation.NON_TRANSPOSE, alpha.ctypes.data, mat_a,
                mat_b, beta.ctypes.data, mat_c, value_type, alg)
        workspace = cp.empty(max(1, cusparse.sp_mm_buffer_size(*args)), dtype=cp.uint8)
        cusparse.sp_mm(*args, workspace.data.ptr)
    finally:
        for destroy, descriptor in descriptors:
            destroy(descriptor)
    return C.ravel() if vector else C
