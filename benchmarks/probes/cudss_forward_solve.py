"""Probe: what cuDSS's forward-only solve costs per right-hand side, beside its full
solve, on the sparse GP's kernel matrix at n = 1,000,000 (the issue's construction).

    python -m benchmarks.probes.cudss_forward_solve [N] [WIDTH ...]

A test point's predictive variance needs ``‖L⁻¹ P k‖²`` only: the forward half of a solve
(phases ``SOLVE_FWD_PERM | SOLVE_FWD``), which ``DirectSolver`` does not offer. This runs
those phases through ``nvmath.bindings.cudss`` on the factor skgpu's fit already made
(the solver's own handle, configuration and data; dense right-hand sides and solutions of
our own), one warm-up then the median of 3, and checks the arithmetic exactly: for
``b = K eᵢ``, ``‖L⁻¹ P b‖² = bᵀ K⁻¹ b = Kᵢᵢ``. One JSON line per width.
"""

import json
import statistics
import sys

import cupy as cp
import numpy as np

from benchmarks._harness import sparse_gp_problem, synchronized

import skgpu
from skgpu.backends import get_backend
from skgpu.gaussian_process import GaussianProcessRegressor


def _timed(func, repeats=3):
    func()
    times = [synchronized(func)[1] for _ in range(repeats)]
    return {"median_s": statistics.median(times), "min_s": min(times),
            "max_s": max(times), "repeats": repeats}


def main():
    from nvmath.bindings import cudss
    from nvmath.internal.typemaps import NAME_TO_DATA_TYPE

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    widths = [int(w) for w in sys.argv[2:]] or [256, 2048]
    X, y, kernel = sparse_gp_problem(n)
    with skgpu.config_context(device="gpu"):
        gpr, fit_s = synchronized(lambda: GaussianProcessRegressor(
            kernel, optimizer=None, alpha=1e-10, cholesky="sparse").fit(X, y))
    factor = gpr._state_on(get_backend("gpu")).lml.factor
    A = factor._A
    print(json.dumps({"n": n, "nnz": int(A.nnz), "fit_s": fit_s}), flush=True)
    f64 = NAME_TO_DATA_TYPE["float64"]
    rng = np.random.default_rng(1)
    forward = cudss.Phase.SOLVE_FWD_PERM | cudss.Phase.SOLVE_FWD
    for width in widths:
        solver, plan_s = synchronized(lambda: factor._solver_for(width))
        idx = np.sort(rng.choice(n, width, replace=False))
        B = cp.asfortranarray(A[:, cp.asarray(idx)].toarray())
        Z = cp.zeros_like(B, order="F")
        b_ptr = cudss.matrix_create_dn(n, width, n, B.data.ptr, f64, cudss.Layout.COL_MAJOR)
        z_ptr = cudss.matrix_create_dn(n, width, n, Z.data.ptr, f64, cudss.Layout.COL_MAJOR)
        cudss.set_stream(solver.handle, cp.cuda.get_current_stream().ptr)

        def run(phase):
            return lambda: cudss.execute(solver.handle, phase, solver.config_ptr,
                                         solver.data_ptr, solver.a_ptr, z_ptr, b_ptr)

        exact = A.diagonal()[cp.asarray(idx)]  # Kᵢᵢ
        row = {"n": n, "width": width, "plan_and_factorize_s": plan_s}
        try:
            row["forward"] = _timed(run(forward))
            row["forward_max_rel_error"] = float(cp.max(
                cp.abs(cp.sum(Z * Z, axis=0) - exact) / exact))
            row["full"] = _timed(run(cudss.Phase.SOLVE))
            row["full_max_rel_error"] = float(cp.max(
                cp.abs(cp.sum(B * Z, axis=0) - exact) / exact))
            for key in ("forward", "full"):
                row[f"{key}_ms_per_rhs"] = 1e3 * row[key]["median_s"] / width
        except Exception as exc:  # a phase this cuDSS refuses: say so
            row["error"] = f"{type(exc).__name__}: {exc}"[:300]
        finally:
            cudss.matrix_destroy(b_ptr)
            cudss.matrix_destroy(z_ptr)
        print(json.dumps(row), flush=True)
        del B, Z


if __name__ == "__main__":
    main()
