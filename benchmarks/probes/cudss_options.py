"""Probe: cuDSS's options on the sparse GP's kernel matrix at n = 1,000,000 (the
issue's construction: 2-D points, ~30 neighbours a row, tapered Matern 3/2 + white noise).

    python -m benchmarks.probes.cudss_options [N] > out.json

For each reordering algorithm (and host threads): the time of ``plan`` (cuDSS's analysis,
on the CPU), of one ``factorize`` and of one solve with one right-hand side (what each
likelihood evaluation does); then, on the default plan, the solve of a block of 134
right-hand sides (the sparse predict's std: 1 GiB blocks) for each solve algorithm.
Every time is the median of 3 after a warm-up, except ``plan`` (once). Needs a GPU with
cuDSS and nvmath-python.
"""
import json
import sys
import time

import cupy as cp
from nvmath.bindings import cudss
from nvmath.sparse.advanced import DirectSolver

from benchmarks._harness import sparse_gp_problem, timeit

from skgpu.backends import get_backend
from skgpu.backends.gpu.cudss import GPUSparseSPDFactor
from skgpu.gaussian_process import _sparse


def timed(func, repeats=3):
    """Median of ``repeats`` after a warm-up, device synchronised (the harness's)."""
    return timeit(func, repeats, warmup=1)[1]


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    X, y, kernel = sparse_gp_problem(n)
    lml = _sparse.SparseLogMarginalLikelihood(get_backend("gpu"), X, y, 1e-10)
    lml._ensure_pattern(_sparse.support_radius(kernel))
    A = lml.kernel_matrix(kernel)
    options = GPUSparseSPDFactor(A, "probe")._options()
    out = {"n": n, "nnz": int(A.nnz), "plans": [], "solves_134": []}
    b1 = cp.asarray(y)
    reorder = getattr(cudss, "ReorderingAlg", None) or cudss.AlgType  # nvmath 1.0 / 0.x
    solve_alg = getattr(cudss, "SolveAlg", None) or cudss.AlgType
    # BTF_COLAMD (for unsymmetric matrices) had not finished its plan after 480 s at
    # n = 1,000,000 on the H200 host; COLAMD is the same kind. The symmetric orderings:
    variants = [("DEFAULT", None), ("DEFAULT", 16)] + [
        (m.name, None) for m in reorder if m.name in ("AMD", "NESTED_DISSECTION")]
    for name, threads in variants:
        row = {"reordering": name, "host_nthreads": threads}
        try:
            solver = DirectSolver(A, b1, options=options)
            if threads is not None:
                solver.plan_config.host_nthreads = threads
            solver.plan_config.reordering_algorithm = reorder[name]
            start = time.perf_counter()
            solver.plan()
            cp.cuda.Device().synchronize()
            row["plan_s"] = time.perf_counter() - start
            row["factorize"] = timed(solver.factorize)
            row["solve_1"] = timed(solver.solve)
            x = solver.solve()
            row["residual_rel"] = float(cp.linalg.norm(A @ x - b1) / cp.linalg.norm(b1))
            solver.free()
        except Exception as exc:  # a variant this cuDSS refuses: recorded, the rest run
            row["error"] = repr(exc)[:300]
        out["plans"].append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    B = cp.asfortranarray(cp.random.default_rng(1).standard_normal((n, 134)))
    solver = DirectSolver(A, B, options=options)
    solver.plan()
    solver.factorize()
    for name in [m.name for m in solve_alg]:
        row = {"solve_algorithm": name}
        try:
            solver.solution_config.solution_algorithm = solve_alg[name]
            row["solve_134"] = timed(solver.solve)
            row["per_100k_rhs_s"] = row["solve_134"]["median_s"] * 1e5 / 134
        except Exception as exc:
            row["error"] = repr(exc)[:300]
        out["solves_134"].append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    solver.free()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
