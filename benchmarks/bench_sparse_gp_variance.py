"""The sparse GaussianProcessRegressor's predictive variance and covariance, and its public
likelihood, timed as users call them (``predict(..., return_std=True)``,
``predict(..., return_cov=True)``, ``sample_y``, ``log_marginal_likelihood``).

Run:  python benchmarks/bench_sparse_gp_variance.py --out results.json
          (CPU backend, n = 5,000 and 50,000, 10,000 test points; about 8 minutes on
          2 cores)
      python benchmarks/bench_sparse_gp_variance.py --device gpu --n 20000 1000000 \
          --points 100000 --reference-points 2000 --cov-points 10000 --dense-max 20000 \
          --out results.json
      python benchmarks/bench_sparse_gp_variance.py --quick   (n = 5,000)

The construction is the large sparse GP's (``_harness.sparse_gp_problem``: ~30 neighbours
a row). The variance goes through a factor that exposes L, by forward solves through the
supernodes each test point reaches: on the CPU the likelihood's own factor (CHOLMOD with
the ``sparse`` extra, SuperLU without), on the GPU skgpu's supernodal factor
(``skgpu.backends._supernodal``; cuDSS, which factors the likelihood, keeps L to itself).
Every row is the public method, timed cold (the first call after the fit: it makes the
factor or reads it out) and warm (median of 3 after that), except the side-by-side row:
the two factorisations of the same matrix (skgpu's supernodal one and the backend's) and
the likelihood with its gradient on each, timed through the likelihood object. The
reference route, full solves with every test point's covariance column as a dense
right-hand side (the likelihood's factor: what cuDSS gives), is timed on
``--reference-points`` points and scaled linearly (its cost is linear in the points);
the std and covariance of the two routes are compared on those points, and with the
dense path's up to ``--dense-max``.
The memory pool's bytes after each step are recorded on the GPU.
"""

import math
import time

import numpy as np

from _harness import (
    machine,
    run_cases,
    sparse_gp_problem,
    standard_parser,
    synchronized,
    timeit,
)

import skgpu
from skgpu.backends import _common, _cpu, get_backend
from skgpu.gaussian_process import GaussianProcessRegressor


def _rel(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b) / np.abs(b)))


class LikelihoodFactor:
    """Within the block, the variance goes through the likelihood's own factor (its
    quadratic forms made full solves by :class:`FullSolves`): today's route where that
    factor keeps L to itself."""

    def __init__(self, factor):
        self.cls = type(factor)

    def __enter__(self):
        self.saved = self.cls.exposes_factor
        self.cls.exposes_factor = True

    def __exit__(self, *exc):
        self.cls.exposes_factor = self.saved


def _pool_bytes():
    try:
        import cupy as cp
    except ImportError:
        return None
    return int(cp.get_default_memory_pool().total_bytes())


class FullSolves:
    """Within the block, every sparse factor computes its quadratic forms by full solves
    on dense right-hand sides (the reference route)."""

    def __init__(self, factor, xp):
        self.cls, self.xp = type(factor), xp

    def __enter__(self):
        cls, xp = self.cls, self.xp
        self.saved = (cls.quadratic_forms, cls.quadratic_form_matrix)
        cls.quadratic_forms = lambda f, B, block_bytes=1 << 30: (
            _common.quadratic_forms_by_solves(f, B, xp, block_bytes))
        cls.quadratic_form_matrix = lambda f, B: _common.quadratic_form_matrix_by_solves(
            f, B, xp)

    def __exit__(self, *exc):
        self.cls.quadratic_forms, self.cls.quadratic_form_matrix = self.saved


def both_likelihoods(ops, X, y, kernel, row):
    """The likelihood with its gradient at ``kernel`` on skgpu's supernodal factor and on
    the backend's, first and repeated, into ``row``, with the gradients' agreement."""
    from skgpu.gaussian_process._sparse import SparseLogMarginalLikelihood

    grads = {}
    for name in ("supernodal", "backend"):
        like = SparseLogMarginalLikelihood(ops, X, y, 1e-10, factorization=name)
        (_, grads[name]), first = synchronized(lambda f=like: f(kernel, True))
        _, repeated = timeit(lambda f=like: f(kernel, True), 3)
        row[f"{name}_lml_gradient_first_s"] = first
        row[f"{name}_lml_gradient"] = repeated
        row[f"{name}_factorizations_per_evaluation"] = like.n_factorizations / (
            like.n_evaluations or 1)
        row["pattern_entries"] = int(like.pattern.pairs.size)
        like = None
    row["gradient_max_rel_diff"] = _rel(grads["supernodal"], grads["backend"])


def side_by_side(gp, lml, factor, variance, ops, X, y, tag):
    """The two factorisations of the same matrix: skgpu's supernodal one (its analysis,
    a refactorisation, its selected inverse) beside the backend's (cuDSS, CHOLMOD or
    SuperLU); and the likelihood with its gradient on each (skgpu's: one factorisation
    and the selected inverse, exact; the backend's: CHOLMOD's exact gradient, else the
    split / differenced one), the gradients' agreement."""
    from skgpu.backends._supernodal import SupernodalFactor, SupernodalSymbolic

    pattern = lml.pattern
    symbolic, analysis_s = synchronized(lambda: SupernodalSymbolic.from_points(
        lml.X_host, pattern.indptr, pattern.indices, pattern.radius))
    K = lml.kernel_matrix(gp.kernel_)
    ours = variance if isinstance(variance, SupernodalFactor) else SupernodalFactor(
        ops, symbolic, K)
    if isinstance(factor, SupernodalFactor):  # the likelihood's is skgpu's at this n:
        factor = ops.sparse_spd(K, what="kernel matrix")  # the backend's, made for this
    _, ours_refactor = timeit(lambda f=ours: f.refactor(K), 3)
    _, theirs_refactor = timeit(lambda: factor.refactor(K), 3)
    _, selected = timeit(ours.selected_inverse, 3)
    row = {"case": f"factorisations side by side, {tag}",
           "supernodal_analysis_s": analysis_s,
           "supernodal_supernodes": symbolic.n_supernodes,
           "supernodal_stored_entries": symbolic.nnz,
           "supernodal_refactor": ours_refactor,
           "backend_factor": type(factor).__name__, "backend_refactor": theirs_refactor,
           "supernodal_selected_inverse": selected, "pool_bytes_after": _pool_bytes()}
    ours = None  # (its memory back before the likelihoods' factors)
    theta = gp.kernel_.theta + 0.05
    kernel = gp.kernel_.clone_with_theta(theta)
    both_likelihoods(ops, X, y, kernel, row)
    row["pool_bytes_after_likelihoods"] = _pool_bytes()
    return row


def ard_row(device, n, dims=4, neighbours=30):
    """The likelihood with its gradient for an ARD kernel (one length scale a dimension,
    ``dims`` + 2 hyperparameters) on both factorisations: skgpu's (one factorisation and
    the selected inverse, whatever the number of hyperparameters) and the backend's
    (CHOLMOD's exact gradient, else two more factorisations a length scale)."""
    from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

    from skgpu.gaussian_process.kernels import Tapered

    rng = np.random.default_rng(2)
    X = rng.uniform(0, 1, (n, dims))
    y = np.sin(6 * X[:, 0]) * np.cos(4 * X[:, 1]) + 0.05 * rng.standard_normal(n)
    # the radius of a ball holding ~neighbours points: vol = neighbours / n
    unit_ball = np.pi ** (dims / 2) / math.gamma(dims / 2 + 1)
    r = (neighbours / (n * unit_ball)) ** (1 / dims)
    kernel = (ConstantKernel(1.0) * Tapered(Matern(np.linspace(r / 2, r, dims), nu=1.5),
                                            taper_range=r) + WhiteKernel(0.01))
    ops = get_backend(device)
    row = {"case": f"log_marginal_likelihood with gradient, ARD ({dims} length scales, "
                   f"{kernel.theta.size} hyperparameters), n = {n:,}, {device}",
           "neighbours": neighbours}
    both_likelihoods(ops, X, y, kernel, row)
    return row


def rows_for(doc, device, factor_name, n, points, reference_points, cov_points,
             dense_max, skip_likelihood=False, sample_points=2_000):
    X, y, kernel = sparse_gp_problem(n)
    if device == "gpu":
        import cupy as cp

        cp.get_default_memory_pool().free_all_blocks()
    rng = np.random.default_rng(1)
    X_test = rng.uniform(0, 1, (points, 2))
    tag = f"n = {n:,}, {device} ({factor_name})"
    real = _cpu._cholmod
    if factor_name == "superlu":
        _cpu._cholmod = lambda: None
    try:
        with skgpu.config_context(device=device):
            gp, fit_s = synchronized(lambda: GaussianProcessRegressor(
                kernel, optimizer=None, alpha=1e-10, cholesky="sparse").fit(X, y))
            row = {"case": f"fit(optimizer=None), {tag}", "fit_s": fit_s,
                   "pool_bytes_after": _pool_bytes()}
            doc["results"].append(row)
            print(row, flush=True)
            _, mean = timeit(lambda: gp.predict(X_test), 3)
            doc["results"].append({"case": f"predict mean, {points:,} points, {tag}",
                                   "predict": mean})
            (_, std), cold = synchronized(lambda: gp.predict(X_test, return_std=True))
            pool_cold = _pool_bytes()
            _, warm = timeit(lambda: gp.predict(X_test, return_std=True), 3, warmup=0)
            ops = get_backend(device)
            lml = gp._state_on(ops).lml
            factor, xp = lml.factor, ops.xp
            variance = lml.variance_factor(gp.kernel_)
            row = {"case": f"predict std, {points:,} points, {tag}", "cold_s": cold,
                   "warm": warm, "variance_factor": type(variance).__name__,
                   "pool_bytes_after_cold": pool_cold}
            sub = X_test[:reference_points]
            with FullSolves(factor, xp), LikelihoodFactor(factor):
                (_, std_ref), ref_s = synchronized(
                    lambda: gp.predict(sub, return_std=True))
            row |= {"reference_full_solves_s": ref_s,
                    "reference_points": reference_points,
                    "reference_scaled_to_points_s": ref_s * points / reference_points,
                    "std_max_rel_diff_vs_reference": _rel(std[:reference_points], std_ref)}
            if n <= dense_max:
                dense = GaussianProcessRegressor(kernel, optimizer=None, alpha=1e-10,
                                                 cholesky="dense").fit(X, y)
                sub_d = X_test[:min(points, 20_000)]
                std_d = dense.predict(sub_d, return_std=True)[1]
                row["dense_points"] = sub_d.shape[0]
                row["std_max_rel_diff_vs_dense"] = _rel(std[:sub_d.shape[0]], std_d)
                del dense
            doc["results"].append(row)
            print(row, flush=True)
            doc["results"].append(side_by_side(gp, lml, factor, variance, ops, X, y, tag))
            print(doc["results"][-1], flush=True)

            cov_x = X_test[:cov_points]
            (_, cov), cov_s = synchronized(lambda: gp.predict(cov_x, return_cov=True))
            _, cov_warm = timeit(lambda: gp.predict(cov_x, return_cov=True), 2, warmup=0)
            sub_cov = min(cov_points, reference_points)
            with FullSolves(factor, xp), LikelihoodFactor(factor):
                (_, cov_ref), cov_ref_s = synchronized(
                    lambda: gp.predict(cov_x[:sub_cov], return_cov=True))
            scale = np.max(np.abs(cov_ref))
            row = {"case": f"predict cov, {cov_points:,} points, {tag}", "first_s": cov_s,
                   "warm": cov_warm, "reference_full_solves_s": cov_ref_s,
                   "reference_points": sub_cov,
                   "cov_max_abs_diff_vs_reference_over_max": float(
                       np.max(np.abs(cov[:sub_cov, :sub_cov] - cov_ref)) / scale),
                   "std_from_cov_max_rel_diff": _rel(np.sqrt(np.diag(cov)),
                                                     std[:cov_points]),
                   "pool_bytes_after": _pool_bytes()}
            doc["results"].append(row)
            print(row, flush=True)
            samples_x = X_test[:sample_points]
            _, sample_s = synchronized(lambda: gp.sample_y(samples_x, 5))
            doc["results"].append({"case": f"sample_y, {samples_x.shape[0]:,} points, 5 "
                                   f"samples, {tag}", "s": sample_s})

            if skip_likelihood:
                return
            theta = gp.kernel_.theta
            _, first = synchronized(
                lambda: gp.log_marginal_likelihood(theta, eval_gradient=True))
            shift = [0.0]

            def again():
                shift[0] += 0.01  # a new theta each call, the same taper range
                return gp.log_marginal_likelihood(theta + shift[0], eval_gradient=True)

            _, repeated = timeit(again, 3, warmup=0)
            doc["results"].append({
                "case": f"public log_marginal_likelihood(theta, eval_gradient=True), {tag}",
                "first_s": first, "repeated": repeated,
                "repeated_over_fit": repeated["median_s"] / fit_s})
    finally:
        _cpu._cholmod = real


def main():
    parser = standard_parser(__doc__)
    parser.add_argument("--device", default="cpu", choices=["cpu", "gpu"])
    parser.add_argument("--n", type=int, nargs="+", default=[5_000, 50_000])
    parser.add_argument("--points", type=int, default=10_000)
    parser.add_argument("--reference-points", type=int, default=1_000)
    parser.add_argument("--cov-points", type=int, default=10_000)
    parser.add_argument("--dense-max", type=int, default=0,
                        help="compare the std with the dense path's up to this n")
    parser.add_argument("--sample-points", type=int, default=2_000,
                        help="sample_y's points (its draws are scikit-learn's: an SVD of "
                             "their covariance on the host, cubic in them)")
    parser.add_argument("--ard-n", type=int, default=0,
                        help="also the likelihood of an ARD kernel (4-D, 4 length scales) "
                             "at this n on both factorisations (0: not run)")
    parser.add_argument("--skip-likelihood", action="store_true",
                        help="leave out the public likelihood rows")
    args = parser.parse_args()
    if args.quick:
        args.n, args.points, args.reference_points, args.cov_points = [5_000], 2_000, 300, 1_000
        args.sample_points = 500
    doc = {"machine": machine(), "benchmark": "sparse_gp_variance", "results": [],
           "timing": "public methods; cold = the first call after the fit, one run; warm "
                     "= median of 3 after it; the reference route on a subset, scaled"}
    factors = ["cudss"] if args.device == "gpu" else (
        ["cholmod", "superlu"] if _cpu.cholmod_available() else ["superlu"])
    start = time.perf_counter()
    cases = [lambda: doc["results"].append(ard_row(args.device, args.ard_n))
             ] if args.ard_n else []
    cases += [lambda f=f, n=n: rows_for(doc, args.device, f, n, args.points,
                                        args.reference_points, args.cov_points,
                                        args.dense_max, args.skip_likelihood,
                                        args.sample_points)
              for n in args.n for f in factors]
    run_cases(cases, doc, args.out)
    print(f"total {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
