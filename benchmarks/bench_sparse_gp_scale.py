"""The sparse GaussianProcessRegressor at its largest: the memory estimator's largest n,
then ``fit(optimizer=None)`` and ``predict(X_test, return_std=True)`` at each n, as users
call them, with the std checked against full solves on a subset.

Run:  python benchmarks/bench_sparse_gp_scale.py --device gpu --n 10000000 \
          --points 100000 --factorization supernodal --out results.json
      python benchmarks/bench_sparse_gp_scale.py --device gpu --n 20000 200000 1000000 \
          --factorization supernodal backend --optimizer --out results.json
          (the two factorisations side by side at each n, the fit with the default
          optimizer too)
      python benchmarks/bench_sparse_gp_scale.py --quick   (CPU, n = 20,000)

The construction is the large sparse GP's (``_harness.sparse_gp_problem``: ~30 neighbours
a row, two dimensions). Before anything is fitted, the supernodal analysis of
``--estimate-n`` points (the same construction) gives the memory estimator's bytes and its
largest n for the device's free memory (``SupernodalSymbolic.largest_n``: the factor's
bytes and the pattern's beside it): the figure a user is told before an n is tried.
``--factorization`` picks the likelihood's factor (``auto``: the library's choice;
``supernodal``: skgpu's own, which also serves the variance; ``backend``: cuDSS on the
GPU, CHOLMOD or SuperLU on the CPU); given several, each n runs with each in turn.
``--ordering LEAF:COVER_FROM`` (several side by side) sets the supernodal analysis's
leaf size and the set size from which separators are minimum covers (``none``: never,
the lower half's strip as before covers; the library's defaults when left out).
``--optimizer`` adds ``fit`` with the default optimizer (L-BFGS-B from the kernel's
hyperparameters), with its number of likelihood evaluations. Times are one cold call
each (the first after the fit) and ``--repeats`` warm ones; the peak of the memory pool
is recorded on the GPU (sample ``nvidia-smi`` beside it for the device's own peak).
"""

import time

import numpy as np

from _harness import machine, run_cases, sparse_gp_problem, standard_parser, synchronized

import skgpu
from skgpu.backends import _supernodal, get_backend
from skgpu.gaussian_process import GaussianProcessRegressor
from skgpu.gaussian_process import _sparse


def _pool_bytes():
    try:
        import cupy as cp
    except ImportError:
        return None
    return int(cp.get_default_memory_pool().total_bytes())


class ordering:
    """Within the block, the supernodal analysis orders with ``spec`` ("LEAF:COVER_FROM",
    COVER_FROM "none" for no covers; None: the library's defaults), and the rows the
    block appends to ``doc`` say which (with a spec)."""

    def __init__(self, spec, doc):
        self.spec, self.doc = spec, doc

    def __enter__(self):
        self.saved = (_supernodal.LEAF_SIZE, _supernodal.COVER_FROM)
        self.first = len(self.doc["results"])
        if self.spec is not None:
            leaf, cover = self.spec.split(":")
            _supernodal.LEAF_SIZE = int(leaf)
            _supernodal.COVER_FROM = 1 << 62 if cover == "none" else int(cover)

    def __exit__(self, *exc):
        if self.spec is not None:
            described = f"leaf {_supernodal.LEAF_SIZE}, covers from " + (
                "never" if _supernodal.COVER_FROM >= 1 << 62 else f"{_supernodal.COVER_FROM}")
            for row in self.doc["results"][self.first:]:
                row["ordering"] = described
        _supernodal.LEAF_SIZE, _supernodal.COVER_FROM = self.saved


def estimate_row(device, n):
    """The analysis of n points and what the estimator makes of it."""
    ops = get_backend(device)
    X, y, kernel = sparse_gp_problem(n)
    like = _sparse.SparseLogMarginalLikelihood(ops, X, y, 1e-10, factorization="supernodal")
    like._ensure_pattern(_sparse.support_radius(kernel), kernel)
    (symbolic), analysis_s = synchronized(like._symbolic)
    free = ops.free_bytes()  # (the pattern is held now: it counts as available)
    total, panels = symbolic.device_bytes()
    row = {"case": f"memory estimate from n = {n:,}, {device}", "analysis_s": analysis_s,
           "supernodes": symbolic.n_supernodes, "stored_entries": symbolic.nnz,
           "pattern_entries": symbolic.pattern_entries,
           "factor_bytes": total, "L_bytes": panels,
           "pattern_bytes": symbolic.pattern_bytes(), "free_bytes": free}
    if free is not None:
        available = free + symbolic.pattern_bytes()
        row["largest_n_factor"] = symbolic.largest_n(available)
        row["largest_n_with_selected_inverse"] = symbolic.largest_n(available, True)
    del like, symbolic
    if device == "gpu":
        import cupy as cp

        cp.get_default_memory_pool().free_all_blocks()
    return row


def rows_for(doc, device, n, points, reference_points, repeats, factorization,
             optimizer=False):
    X, y, kernel = sparse_gp_problem(n)
    if device == "gpu":
        import cupy as cp

        cp.get_default_memory_pool().free_all_blocks()
    rng = np.random.default_rng(1)
    X_test = rng.uniform(0, 1, (points, 2))
    saved = dict(_sparse.SPARSE_FACTORIZATION)
    if factorization != "auto":
        _sparse.SPARSE_FACTORIZATION[device] = factorization
    tag = f"n = {n:,}, {device}, {factorization}"
    try:
        with skgpu.config_context(device=device):
            gp, fit_s = synchronized(lambda: GaussianProcessRegressor(
                kernel, optimizer=None, alpha=1e-10, cholesky="sparse").fit(X, y))
            ops = get_backend(device)
            lml = gp._state_on(ops).lml
            row = {"case": f"fit(optimizer=None), {tag}", "fit_s": fit_s,
                   "likelihood_factor": type(lml.factor).__name__,
                   "pool_bytes_after": _pool_bytes()}
            doc["results"].append(row)
            print(row, flush=True)
            if optimizer:
                fitted, opt_s = synchronized(lambda: GaussianProcessRegressor(
                    kernel, alpha=1e-10, cholesky="sparse").fit(X, y))
                opt = fitted._state_on(ops).lml
                row = {"case": f"fit (default optimizer), {tag}", "fit_s": opt_s,
                       "likelihood_factor": type(opt.factor).__name__,
                       "lml_evaluations": fitted._n_lml_evaluations,
                       "log_marginal_likelihood": float(fitted.log_marginal_likelihood_value_),
                       "pool_bytes_after": _pool_bytes()}
                doc["results"].append(row)
                print(row, flush=True)
                del fitted, opt
            (_, std), cold = synchronized(lambda: gp.predict(X_test, return_std=True))
            warm = []
            for _ in range(repeats):
                warm.append(synchronized(lambda: gp.predict(X_test, return_std=True))[1])
            row = {"case": f"predict std, {points:,} points, {tag}", "cold_s": cold,
                   "warm_s": warm, "pool_bytes_after": _pool_bytes()}
            variance = lml.variance_factor(gp.kernel_)
            row["variance_factor"] = type(variance).__name__
            row["level_batches"] = bool(getattr(variance, "_batches", None))
            doc["results"].append(row)  # (kept should the check below fail)
            sub = X_test[:reference_points]
            if reference_points:
                # the same variance by full solves with dense right-hand sides
                kx = gp.kernel_(sub, X)
                start = time.perf_counter()
                solved = ops.to_host(variance.solve(ops.asarray(kx.T)))
                ref_s = time.perf_counter() - start
                var = gp.kernel_.diag(sub) - np.einsum("ij,ji->i", kx, solved)
                std_ref = np.sqrt(np.maximum(var, 0.0)) * gp._y_train_std
                row["reference_full_solves_s"] = ref_s
                row["reference_points"] = reference_points
                row["std_max_rel_diff_vs_full_solves"] = float(
                    np.max(np.abs(std[:reference_points] - std_ref) / std_ref))
            print(row, flush=True)
    finally:
        _sparse.SPARSE_FACTORIZATION.clear()
        _sparse.SPARSE_FACTORIZATION.update(saved)


def main():
    parser = standard_parser(__doc__)
    parser.add_argument("--device", default="cpu", choices=["cpu", "gpu"])
    parser.add_argument("--n", type=int, nargs="+", default=[200_000])
    parser.add_argument("--estimate-n", type=int, default=1_000_000)
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--reference-points", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--factorization", nargs="+", default=["auto"],
                        choices=["auto", "supernodal", "backend"])
    parser.add_argument("--optimizer", action="store_true")
    parser.add_argument("--ordering", nargs="+", default=[None])
    args = parser.parse_args()
    if args.quick:
        args.n, args.estimate_n, args.points = [20_000], 20_000, 2_000
    doc = {"machine": machine(), "benchmark": "sparse_gp_scale", "results": [],
           "timing": "public methods, one run each: cold = the first call after the fit, "
                     "warm = the ones after it"}
    start = time.perf_counter()
    def ordered(spec, run):
        with ordering(spec, doc):
            run()

    cases = [lambda o=o: ordered(o, lambda: doc["results"].append(
        estimate_row(args.device, args.estimate_n))) for o in args.ordering]
    cases += [lambda n=n, f=f, o=o: ordered(o, lambda: rows_for(
        doc, args.device, n, args.points, args.reference_points, args.repeats, f,
        args.optimizer)) for n in args.n for f in args.factorization for o in args.ordering]
    run_cases(cases, doc, args.out)
    print(f"total {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
