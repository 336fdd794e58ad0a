"""The sparse GaussianProcessRegressor on the CPU backend: CHOLMOD (the ``sparse`` extra,
through cvxopt) beside SuperLU (SciPy, the fallback), in one run (the CPU targets:
one LML + gradient at n = 50,000 ≤ 3 s on 2 cores, a default fit ≤ 3 minutes).

Run:  python benchmarks/bench_sparse_gp_cpu.py --out results.json   (about 4 minutes on 2 cores)
      python benchmarks/bench_sparse_gp_cpu.py --quick               (n = 5,000)
Points uniform in the unit square, ~30 neighbours each within the taper range r,
``C(1.0) * Tapered(Matern(r, nu=1.5), taper_range=r) + WhiteKernel(0.01)``,
y = sin(6 x0) cos(4 x1) + 0.05 noise. Every row: one warm-up evaluation, then 3 timed
(the warm-up builds the pattern and the symbolic analysis, as a fit's first evaluation
does); the two factors' LMLs are checked equal before times are reported.
"""

import time

import numpy as np


from _harness import machine, run_cases, standard_parser, timeit
from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

import skgpu
from skgpu.backends import _cpu, get_backend
from skgpu.gaussian_process import GaussianProcessRegressor
from skgpu.gaussian_process._sparse import SparseLogMarginalLikelihood
from skgpu.gaussian_process.kernels import Tapered


def problem(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (n, 2))
    y = np.sin(6 * X[:, 0]) * np.cos(4 * X[:, 1]) + 0.05 * rng.standard_normal(n)
    r = np.sqrt(30 / (np.pi * n))
    kernel = (ConstantKernel(1.0) * Tapered(Matern(r, nu=1.5), taper_range=r)
              + WhiteKernel(0.01))
    return X, y, kernel


def with_factor(name):
    """SuperLU: the CPU backend as it is without cvxopt."""
    real = _cpu._cholmod
    _cpu._cholmod = real if name == "cholmod" else (lambda: None)
    return real


def lml_rows(doc, sizes):
    for n in sizes:
        X, y, kernel = problem(n)
        values = {}
        for name in ("cholmod", "superlu"):
            real = with_factor(name)
            try:
                lml = SparseLogMarginalLikelihood(get_backend("cpu"), X, y, 1e-10)
                (value, grad), stats = timeit(lambda: lml(kernel, eval_gradient=True), 3)
            finally:
                _cpu._cholmod = real
            values[name] = value
            doc["results"].append({"case": f"LML + gradient, n = {n:,}, {name}",
                                   "lml_and_gradient": stats, "lml": value,
                                   "nnz": int(lml.pattern.pairs.size),
                                   "factorizations_per_evaluation":
                                       lml.n_factorizations // lml.n_evaluations})
        rel = abs(values["cholmod"] - values["superlu"]) / abs(values["superlu"])
        assert rel < 1e-10, rel
        doc["results"][-1]["lml_rel_diff_cholmod_superlu"] = rel


def fit_row(doc, n):
    X, y, kernel = problem(n)
    start = time.perf_counter()
    with skgpu.config_context(device="cpu"):
        gp = GaussianProcessRegressor(kernel, alpha=1e-10, cholesky="sparse").fit(X, y)
    elapsed = time.perf_counter() - start
    doc["results"].append({"case": f"default fit, n = {n:,}, cholmod", "fit_s": elapsed,
                           "evaluations": int(gp._n_lml_evaluations),
                           "cholesky": gp.cholesky_,
                           "kernel": str(gp.kernel_),
                           "log_marginal_likelihood": float(gp.log_marginal_likelihood_value_)})


def main():
    args = standard_parser(__doc__).parse_args()
    sizes = [5_000] if args.quick else [20_000, 50_000]
    doc = {"machine": machine(), "benchmark": "sparse_gp_cpu", "results": [],
           "timing": "one warm-up evaluation, then 3 timed"}
    run_cases([lambda: lml_rows(doc, sizes),
               lambda: fit_row(doc, 5_000 if args.quick else 50_000)], doc, args.out)


if __name__ == "__main__":
    main()
