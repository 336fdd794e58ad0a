"""The predictive variance's triangular solve on the GPU (issue 24): ``L⁻¹ B`` for an
n × n lower-triangular L and n × k right-hand sides, cuBLAS trsm (through CuPy) against
skgpu's solve by halves with GEMM and inverted diagonal blocks
(``skgpu.backends.gpu.cublas.LowerSolver``) at several leaf sizes, float64.

    python benchmarks/bench_lower_solve.py --out benchmarks/results/lower_solve_h200.json

Rates count n²k flops (the solve's); the blocked solve does 2·leaf/n more than that. The
time of forming the leaves' inverses (once per factor) is reported apart. Each row: one
warm-up, then ``--repeats`` solves with B restored before each (not timed), median and
spread. ``rel_diff_vs_trsm`` is ``‖V - V_trsm‖ / ‖V_trsm‖``. L is well conditioned (unit
diagonal, off-diagonal entries uniform in [0, 1/n)), so the figures are rates, not
accuracy: tests/test_backends.py checks accuracy against exact solutions.
"""

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))

from _harness import GPU, machine  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[40_000, 100_000])
    parser.add_argument("--k", type=int, nargs="+", default=[4_000, 10_000])
    parser.add_argument("--leaves", type=int, nargs="+", default=[1024, 2048, 4096])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if not GPU:
        print("needs a usable GPU backend", file=sys.stderr)
        return 1
    import cupy as cp
    from cupyx.scipy.linalg import solve_triangular

    from skgpu.backends.gpu import cublas

    doc = {"machine": machine(), "benchmark": "lower-triangular solve L^-1 B, float64",
           "method": " ".join(sys.argv[1:]) or "defaults", "results": []}

    def emit(row):
        doc["results"].append(row)
        print(json.dumps(row), flush=True)
        if args.out:
            with open(args.out, "w") as f:
                json.dump(doc, f, indent=1)

    def timed(solve, B0, Bw):
        times, out = [], None
        for i in range(args.repeats + 1):
            Bw[...] = B0
            cp.cuda.Device().synchronize()
            start = time.perf_counter()
            out = solve(Bw)
            cp.cuda.Device().synchronize()
            if i:  # the first is the warm-up
                times.append(time.perf_counter() - start)
        return out, {"median_s": statistics.median(times), "min_s": min(times),
                     "max_s": max(times), "repeats": len(times), "warm_up": True}

    for n in args.n:
        rng = cp.random.default_rng(0)
        F = rng.random((n, n)).T  # Fortran-ordered; only the lower triangle is read
        F *= 1.0 / n
        F[cp.arange(n), cp.arange(n)] = 1.0
        for k in args.k:
            B0 = cp.asfortranarray(rng.standard_normal((n, k)))
            Bw = cp.empty_like(B0, order="F")
            flops = float(n) * n * k
            def trsm(B, F=F):
                return solve_triangular(F, B, lower=True, check_finite=False)

            ref, stats = timed(trsm, B0, Bw)
            emit({"case": f"cuBLAS trsm, n={n}, k={k}", "n": n, "k": k,
                  "skgpu": stats, "TFLOPs": round(flops / stats["median_s"] / 1e12, 1)})
            for leaf in args.leaves:
                cp.cuda.Device().synchronize()
                start = time.perf_counter()
                solver = cublas.LowerSolver(F, leaf=leaf)
                cp.cuda.Device().synchronize()
                setup = time.perf_counter() - start
                V, stats = timed(solver, B0, Bw)
                diff = float(cp.linalg.norm(V - ref) / cp.linalg.norm(ref))
                lead = min(n, 4096)  # residual of the leading rows: L[:lead, :lead] V[:lead]
                for name, X in (("blocked", V), ("trsm", ref)):
                    R = cp.tril(F[:lead, :lead]) @ X[:lead] - B0[:lead]
                    print(name, "leading residual", float(cp.linalg.norm(R)
                                                          / cp.linalg.norm(B0[:lead])))
                emit({"case": f"blocked by halves, leaf {leaf}, n={n}, k={k}", "n": n,
                      "k": k, "leaf": leaf, "skgpu": stats,
                      "TFLOPs": round(flops / stats["median_s"] / 1e12, 1),
                      "inverses_s": round(setup, 4), "rel_diff_vs_trsm": diff})
                del solver, V
            del ref, B0, Bw
            cp.get_default_memory_pool().free_all_blocks()
        F = None
        cp.get_default_memory_pool().free_all_blocks()
    return 0


if __name__ == "__main__":
    sys.exit(main())
