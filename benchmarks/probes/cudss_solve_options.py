"""Probe: cuDSS's solve with many right-hand sides on the sparse GP's kernel matrix
at n = 1,000,000 (the issue's construction), per factorization and solve algorithm.

    python -m benchmarks.probes.cudss_solve_options [N] [WIDTH]

The predictive std of 100,000 test points is 100,000 right-hand sides; the shipped default
solves at ~1.1 ms per right-hand side whatever the width (results/gp_sparse_std_width_h200.json).
Fits with optimizer=None on the GPU, takes the kernel matrix the fit factored, then for
each ``nvmath.bindings.cudss.FactorizationAlg`` plans and factors it once (timed, one run)
and, for each ``SolveAlg``, solves WIDTH random right-hand sides (one warm-up, then the
median of 3) and checks the residual. One JSON line per variant, as it finishes.
"""

import json
import statistics
import sys

import cupy as cp

from benchmarks._harness import sparse_gp_problem, synchronized

import skgpu
from skgpu.backends import get_backend
from skgpu.gaussian_process import GaussianProcessRegressor


def main():
    from nvmath.bindings import cudss
    from nvmath.sparse.advanced import DirectSolver

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    width = int(sys.argv[2]) if len(sys.argv) > 2 else 256
    X, y, kernel = sparse_gp_problem(n)
    with skgpu.config_context(device="gpu"):
        gpr = GaussianProcessRegressor(kernel, optimizer=None).fit(X, y)
    factor = gpr._state_on(get_backend("gpu")).lml.factor
    A, options = factor._A, factor._options()
    B = cp.asfortranarray(cp.random.default_rng(1).standard_normal((n, width)))
    print(json.dumps({"n": n, "width": width, "nnz": int(A.nnz)}), flush=True)
    for falg in cudss.FactorizationAlg:
        solver = DirectSolver(A, B, options=options)
        row = {"factorization_algorithm": falg.name}
        try:
            solver.factorization_config.factorization_algorithm = falg
            _, row["plan_s"] = synchronized(solver.plan)
            _, row["factorize_s"] = synchronized(solver.factorize)
        except Exception as exc:  # a variant this cuDSS refuses: say so, go on
            row["error"] = f"{type(exc).__name__}: {exc}"[:200]
            print(json.dumps(row), flush=True)
            solver.free()
            continue
        print(json.dumps(row), flush=True)
        for salg in cudss.SolveAlg:
            out = dict(row, solution_algorithm=salg.name)
            try:
                solver.solution_config.solution_algorithm = salg
                solver.reset_operands(b=B)
                solver.solve()
                times = []
                for _ in range(3):
                    Z, dt = synchronized(solver.solve)
                    times.append(dt)
                out["solve_median_s"] = statistics.median(times)
                out["solve_min_s"], out["solve_max_s"] = min(times), max(times)
                out["repeats"] = 3
                out["ms_per_rhs"] = 1e3 * out["solve_median_s"] / width
                out["residual"] = float(cp.linalg.norm(A @ Z[:, :4] - B[:, :4])
                                        / cp.linalg.norm(B[:, :4]))
            except Exception as exc:
                out["error"] = f"{type(exc).__name__}: {exc}"[:200]
            print(json.dumps(out), flush=True)
        solver.free()


if __name__ == "__main__":
    main()
