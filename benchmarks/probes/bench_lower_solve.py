"""The predictive variance's triangular solve on the GPU: ``L⁻¹ B`` for an
n × n lower-triangular L and n × k right-hand sides, cuBLAS trsm (through CuPy, what
skgpu's predict uses) against a solve by halves with GEMM and inverted diagonal blocks
(``LowerSolver`` below) at several leaf sizes, float64.

The blocked solve was in skgpu for one GPU run (commits 398382c, 8b1d5e6) and was backed
out: it equals trsm to 1e-16 and is no faster (results/history/gp_large_predict_blocked_h200.json),
so it lives here, as the measured alternative.

    python -m benchmarks.probes.bench_lower_solve --out lower_solve.json

Rates count n²k flops (the solve's); the blocked solve does 2·leaf/n more than that. The
time of forming the leaves' inverses (once per factor) is reported apart. Each row: one
warm-up, then ``--repeats`` solves with B restored before each (not timed), median and
spread. ``rel_diff_vs_trsm`` is ``‖V - V_trsm‖ / ‖V_trsm‖``. L is well conditioned (unit
diagonal, off-diagonal entries uniform in [0, 1/n)), so the figures are rates, not
accuracy: tests/test_backends.py checks accuracy against exact solutions.
"""

import argparse
import statistics
import sys
import time


from benchmarks._harness import GPU, emitter, machine


def _classes():
    """LowerSolver, defined once CuPy and nvmath are known to be importable."""
    import cupy as cp
    from nvmath.bindings import cublas as bindings

    from skgpu.backends.gpu import cublas

    class LowerSolver:
        """``L⁻¹ B`` for many B against one lower-triangular L held in the lower triangle of a
        Fortran-ordered n × n device buffer (a Cholesky factor's), in place in B.

        cuBLAS trsm reaches ~47 TFLOP/s on an H200 in float64 against ~57 for GEMM, and a
        predictive variance at n = m = 100,000 is n²m = 1e15 flops of triangular solve. Here
        the solve goes by halves, ``[[L11, 0], [L21, L22]]``: ``B1 ← L11⁻¹ B1``, then
        ``B2 ← B2 - L21 B1`` (GEMM, large in all three dimensions near the top), then
        ``B2 ← L22⁻¹ B2``, down to diagonal blocks of at most ``leaf`` rows, whose inverses
        are formed once (trsm against the identity, ``n·leaf²`` flops) and applied by GEMM.
        The extra work is ``2·leaf/n`` of the solve's.

        Rounding: a block solve through inverted diagonal blocks is not backward stable row
        by row as substitution is; its error carries the diagonal blocks' condition numbers
        (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., §13.2), which for
        a Cholesky factor of A are at most √κ(A). It was tested against exact solutions
        (python-flint) while it was in skgpu; here ``rel_diff_vs_trsm`` compares it.

        Measured on the H200: as fast as trsm, not faster (the hoped-for GEMM rate is not
        reached once the GEMMs' shapes are those of the recursion).
        """

        def __init__(self, F, leaf):
            if not F.flags.f_contiguous:
                raise ValueError("LowerSolver needs the factor's Fortran-ordered buffer")
            self.cm = cublas.ColumnMajor(F)
            self.leaf = int(leaf)
            self.inverses = {}
            self._leaves(0, F.shape[0])

        def _leaves(self, r0, r1):
            from cupyx.scipy.linalg import solve_triangular

            if r1 - r0 <= self.leaf:
                block = cp.tril(self.cm.F[r0:r1, r0:r1])
                eye = cp.eye(r1 - r0, dtype=block.dtype, order="F")
                self.inverses[r0, r1] = cp.asfortranarray(
                    solve_triangular(block, eye, lower=True, check_finite=False))
                return
            mid = r0 + (r1 - r0) // 2
            self._leaves(r0, mid)
            self._leaves(mid, r1)

        def __call__(self, B):
            """``B ← L⁻¹ B`` for a Fortran-ordered n × k device array B; returns B."""
            n = self.cm.n
            if (B.ndim != 2 or B.shape[0] != n or B.shape[1] == 0 or not B.flags.f_contiguous
                    or B.dtype != self.cm.F.dtype):
                raise ValueError("LowerSolver takes a Fortran-ordered n x k array of L's dtype")
            self._work = cp.empty((max(w.shape[0] for w in self.inverses.values()), B.shape[1]),
                                  dtype=B.dtype, order="F")
            try:
                self._solve(B, 0, n)
            finally:
                del self._work
            return B

        def _gemm(self, m, k, inner, alpha, a, lda, b, ldb, beta, c, ldc):
            cm = self.cm
            alpha, beta = cm.scalar(alpha), cm.scalar(beta)  # alive through the call
            getattr(bindings, cm.prefix + "gemm")(
                cm.handle, bindings.Operation.N, bindings.Operation.N, m, k, inner,
                alpha.ctypes.data, a, lda, b, ldb, beta.ctypes.data, c, ldc)

        def _solve(self, B, r0, r1):
            n, k, item = self.cm.n, B.shape[1], B.dtype.itemsize
            rows = B.data.ptr + r0 * item
            W = self.inverses.get((r0, r1))
            if W is not None:
                m = r1 - r0
                T = self._work.ravel(order="F")[: m * k].reshape((m, k), order="F")  # ld m
                self._gemm(m, k, m, 1.0, W.data.ptr, m, rows, n, 0.0, T.data.ptr, m)
                B[r0:r1] = T
                return
            mid = r0 + (r1 - r0) // 2
            self._solve(B, r0, mid)
            self._gemm(r1 - mid, k, mid - r0, -1.0, self.cm.at(mid, r0), n, rows, n, 1.0,
                       B.data.ptr + mid * item, n)
            self._solve(B, mid, r1)

    return LowerSolver


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[40_000, 100_000])
    parser.add_argument("--k", type=int, nargs="+", default=[4_000, 10_000])
    parser.add_argument("--leaves", type=int, nargs="*", default=[1024, 2048, 4096])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sides", action="store_true",
                        help="also cuBLAS trsm in place from the left, and from the right "
                        "on the transposed right-hand sides (X Lᵀ = Bᵀ)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if not GPU:
        print("needs a usable GPU backend", file=sys.stderr)
        return 1
    import cupy as cp
    from cupyx.scipy.linalg import solve_triangular

    LowerSolver = _classes()

    def cuBLAS_trsm(F, B, side):
        """In place: ``B ← L⁻¹ B`` (left; B n × k) or ``B ← B L⁻ᵀ`` (right; B k × n),
        both Fortran-ordered, L the lower triangle of F."""
        import numpy as np
        from nvmath.bindings import cublas as bindings

        from skgpu.backends.gpu.handles import blas_handle

        n = F.shape[0]
        one = np.ones(1)
        if side.startswith("left"):
            m, k, s, t = n, B.shape[1], bindings.SideMode.LEFT, bindings.Operation.N
        else:
            m, k, s, t = B.shape[0], n, bindings.SideMode.RIGHT, bindings.Operation.T
        bindings.dtrsm(blas_handle(), s, bindings.FillMode.LOWER, t,
                       bindings.DiagType.NON_UNIT, m, k, one.ctypes.data, F.data.ptr, n,
                       B.data.ptr, B.shape[0])
        return B

    doc = {"machine": machine(), "benchmark": "lower-triangular solve L^-1 B, float64",
           "method": " ".join(sys.argv[1:]) or "defaults", "results": []}

    emit = emitter(doc, args.out)

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
            if args.sides:
                for side, B1 in (("left, in place", B0), ("right", cp.asfortranarray(B0.T))):
                    W1 = cp.empty_like(B1, order="F")

                    def in_place(B, side=side, F=F):
                        return cuBLAS_trsm(F, B, side)

                    V, stats = timed(in_place, B1, W1)
                    V = V if side.startswith("left") else V.T
                    emit({"case": f"cuBLAS trsm {side}, n={n}, k={k}", "n": n, "k": k,
                          "skgpu": stats,
                          "TFLOPs": round(flops / stats["median_s"] / 1e12, 1),
                          "rel_diff_vs_trsm": float(cp.linalg.norm(V - ref)
                                                    / cp.linalg.norm(ref))})
                    del V, W1, B1
            for leaf in args.leaves:
                cp.cuda.Device().synchronize()
                start = time.perf_counter()
                solver = LowerSolver(F, leaf=leaf)
                cp.cuda.Device().synchronize()
                setup = time.perf_counter() - start
                V, stats = timed(solver, B0, Bw)
                diff = float(cp.linalg.norm(V - ref) / cp.linalg.norm(ref))
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
