"""The GPU backend: the operation set of DESIGN.md on nvmath-python with CuPy arrays.

One module per NVIDIA library, each called through nvmath-python; CuPy is the array
container and runs the elementwise work:

==================  =====================================================================
module              what it holds
==================  =====================================================================
``backend``         :class:`GPUBackend`, the operation set, each a call into the modules
``cublaslt``        dense ``a @ b (+ bias)``: cuBLASLt plans with the BIAS epilog, cached
``cusolver``        potrf/potrs/potri and the dense Cholesky factor, syevd/syevdx,
                    gesvdj, geqrf/orgqr
``cublas``          trmm/syrk for the blocked inverse of a large factor, trsm
``tsqr``            tall-skinny QR: CholeskyQR passes, shifted CholeskyQR3, Householder
``cusparse``        sparse @ dense by SpMM on row-major operands
``cudss``           the sparse SPD factor (``nvmath.sparse.advanced.DirectSolver``)
``staging``         host-to-device streaming of a large NumPy X (pinned buffers, threads)
``handles``         per-thread library handles and the plan cache
``kernels``         the backend's own elementwise CUDA kernels
==================  =====================================================================

Importing this package imports CuPy and nvmath; the seam (:mod:`skgpu.backends`) imports
it only when the GPU is asked for.
"""

from .backend import GPUBackend, is_out_of_memory
from .handles import solver_handle

__all__ = ["GPUBackend", "is_out_of_memory", "solver_handle"]
