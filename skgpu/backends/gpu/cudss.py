"""cuDSS (``nvmath.sparse.advanced.DirectSolver``): the sparse SPD factor."""

from __future__ import annotations

import glob
import logging
import os

import cupy as cp
import cupyx.scipy.sparse as csp
import numpy as np

from .._arrays import to_cupy
from .._common import (
    not_positive_definite,
    quadratic_form_matrix_by_solves,
    quadratic_forms_by_solves,
)

_nvmath_logger = logging.getLogger("skgpu.nvmath")


def _cudss_threading_layer():
    """Path of cuDSS's OpenMP threading layer shipped in its wheel, or None."""
    try:
        import nvidia
    except ImportError:
        return None
    for root in list(getattr(nvidia, "__path__", [])):
        hits = sorted(glob.glob(os.path.join(root, "**", "libcudss_mtlayer_gomp.so*"),
                                recursive=True))
        if hits:
            return hits[0]
    return None


class GPUSparseSPDFactor:
    """Sparse SPD factor through cuDSS (nvmath ``DirectSolver``, SPD matrix type).

    The symbolic analysis (``plan``) is done once; :meth:`refactor` writes new values into
    the CSR matrix the solver holds and re-runs only the numeric factorisation. cuDSS ties
    a solver to its right-hand side's shape, so one solver is kept per column count.
    """

    #: cuDSS keeps L to itself: quadratic forms go through full solves.
    exposes_factor = False

    def __init__(self, A, what):
        A = csp.csr_matrix(to_cupy(A), dtype=cp.float64, copy=True)
        A.sum_duplicates()
        A.sort_indices()
        self._A = A
        self._what = what
        self._solvers = {}
        self._logdet = None
        self._solver_for(None)

    @property
    def shape(self):
        return self._A.shape

    def _options(self):
        from nvmath.sparse.advanced import DirectSolverMatrixType, DirectSolverOptions

        return DirectSolverOptions(
            sparse_system_type=DirectSolverMatrixType.SPD,
            multithreading_lib=_cudss_threading_layer(),
            logger=_nvmath_logger,
        )

    def _record(self, info):
        diag = np.asarray(info.diag)
        if getattr(info, "info", 0) or not np.all(diag > 0):
            raise not_positive_definite(self._what, "cuDSS found a non-positive pivot")
        self._logdet = 2.0 * float(np.sum(np.log(diag)))

    def _solver_for(self, nrhs):
        solver = self._solvers.get(nrhs)
        if solver is None:
            from nvmath.sparse.advanced import DirectSolver

            n = self._A.shape[0]
            b = cp.zeros(n if nrhs is None else (n, nrhs), dtype=cp.float64, order="F")
            solver = DirectSolver(self._A, b, options=self._options())
            solver.plan()
            self._record(solver.factorize())
            self._solvers[nrhs] = solver
        return solver

    def solve(self, B):
        B = cp.asarray(to_cupy(B), dtype=cp.float64)
        nrhs = None if B.ndim == 1 else B.shape[1]
        solver = self._solver_for(nrhs)
        solver.reset_operands(b=cp.asfortranarray(B))
        return cp.array(solver.solve(), copy=True)

    def logdet(self):
        return self._logdet

    def quadratic_forms(self, B, block_bytes=1 << 30):
        """``bᵢᵀ A⁻¹ bᵢ`` for each row of the sparse device matrix B (m, n): cuDSS does
        not give L, so by full solves on dense blocks of rows (host array out)."""
        return quadratic_forms_by_solves(self, B, cp, block_bytes)

    def quadratic_form_matrix(self, B):
        """``B A⁻¹ Bᵀ`` (dense, on the device) for the sparse device matrix B (m, n),
        by full solves on dense blocks of right-hand sides."""
        return quadratic_form_matrix_by_solves(self, B, cp)

    def refactor(self, A):
        """Factor ``A``, a matrix with the same sparsity pattern, reusing the plan."""
        B = csp.csr_matrix(to_cupy(A), dtype=cp.float64)
        B.sum_duplicates()
        B.sort_indices()
        if B.nnz != self._A.nnz or not bool(cp.array_equal(B.indices, self._A.indices)):
            raise ValueError("refactor needs a matrix with the same sparsity pattern.")
        self._A.data[...] = B.data
        for solver in self._solvers.values():
            self._record(solver.factorize())

    def free(self):
        for solver in self._solvers.values():
            solver.free()
        self._solvers.clear()

