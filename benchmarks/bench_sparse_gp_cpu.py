"""The sparse GaussianProcessRegressor on the CPU backend: its three factors side by side in
one run: CHOLMOD (the ``sparse`` extra, through cvxopt; the default where installed),
skgpu's supernodal factor (the default without it) and SciPy's SuperLU (the backend's
factor without CHOLMOD, reachable by naming it). The CPU targets: one LML + gradient at
n = 50,000 ≤ 3 s on 2 cores, a default fit ≤ 3 minutes.

Run:  python benchmarks/bench_sparse_gp_cpu.py --out results.json   (about 6 minutes on 2 cores)
      python benchmarks/bench_sparse_gp_cpu.py --quick               (n = 2,000 and 5,000)
Points uniform in the unit square, ~30 neighbours each within the taper range r,
``C(1.0) * Tapered(Matern(r, nu=1.5), taper_range=r) + WhiteKernel(0.01)``,
y = sin(6 x0) cos(4 x1) + 0.05 noise. Every likelihood row: one warm-up evaluation, then
3 timed (the warm-up builds the pattern and the symbolic analysis, as a fit's first
evaluation does); the factors' LMLs are checked equal before times are reported. The
default fits (``fit`` with its optimizer, public) are timed once each, one factor after
the other, and their LMLs compared.
"""

import time

import numpy as np


from _harness import machine, run_cases, standard_parser, timeit
from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

import skgpu
from skgpu.backends import _cpu, get_backend
from skgpu.gaussian_process import GaussianProcessRegressor, _sparse
from skgpu.gaussian_process._sparse import SparseLogMarginalLikelihood
from skgpu.gaussian_process.kernels import Tapered

FACTORS = ("cholmod", "supernodal", "superlu")


def problem(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (n, 2))
    y = np.sin(6 * X[:, 0]) * np.cos(4 * X[:, 1]) + 0.05 * rng.standard_normal(n)
    r = np.sqrt(30 / (np.pi * n))
    kernel = (ConstantKernel(1.0) * Tapered(Matern(r, nu=1.5), taper_range=r)
              + WhiteKernel(0.01))
    return X, y, kernel


class factor:
    """Within the block, the CPU likelihood factors with ``name``: SuperLU is the
    backend's factor as it is without cvxopt, named (without CHOLMOD "auto" takes
    skgpu's)."""

    def __init__(self, name):
        self.name = name

    def __enter__(self):
        self.saved = (_cpu._cholmod, _sparse.SPARSE_FACTORIZATION["cpu"])
        if self.name == "superlu":
            _cpu._cholmod = lambda: None
        _sparse.SPARSE_FACTORIZATION["cpu"] = (
            "supernodal" if self.name == "supernodal" else "backend")
        return _sparse.SPARSE_FACTORIZATION["cpu"]

    def __exit__(self, *exc):
        _cpu._cholmod, _sparse.SPARSE_FACTORIZATION["cpu"] = self.saved


def lml_rows(doc, sizes):
    for n in sizes:
        X, y, kernel = problem(n)
        values = {}
        for name in FACTORS:
            with factor(name) as factorization:
                lml = SparseLogMarginalLikelihood(get_backend("cpu"), X, y, 1e-10,
                                                  factorization=factorization)
                (value, grad), stats = timeit(lambda: lml(kernel, eval_gradient=True), 3)
            values[name] = value
            doc["results"].append({"case": f"LML + gradient, n = {n:,}, {name}",
                                   "lml_and_gradient": stats, "lml": value,
                                   "nnz": int(lml.pattern.pairs.size),
                                   "factorizations_per_evaluation":
                                       lml.n_factorizations // lml.n_evaluations})
        for name in FACTORS[1:]:
            rel = abs(values["cholmod"] - values[name]) / abs(values["cholmod"])
            assert rel < 1e-10, (name, rel)
            doc["results"][-1][f"lml_rel_diff_cholmod_{name}"] = rel


def fit_rows(doc, n, names):
    values = {}
    for name in names:
        X, y, kernel = problem(n)
        with factor(name):
            start = time.perf_counter()
            with skgpu.config_context(device="cpu"):
                gp = GaussianProcessRegressor(kernel, alpha=1e-10,
                                              cholesky="sparse").fit(X, y)
            elapsed = time.perf_counter() - start
        values[name] = float(gp.log_marginal_likelihood_value_)
        doc["results"].append({"case": f"default fit, n = {n:,}, {name}", "fit_s": elapsed,
                               "evaluations": int(gp._n_lml_evaluations),
                               "cholesky": gp.cholesky_,
                               "kernel": str(gp.kernel_),
                               "log_marginal_likelihood": values[name]})
    # the optimizer may stop a little apart on differenced and exact gradients
    doc["results"][-1]["lml_rel_spread"] = float(
        np.ptp(list(values.values())) / abs(np.mean(list(values.values()))))


def main():
    args = standard_parser(__doc__).parse_args()
    sizes = [2_000, 5_000] if args.quick else [2_000, 20_000, 50_000]
    small, large = (2_000, 5_000) if args.quick else (2_000, 10_000)
    doc = {"machine": machine(), "benchmark": "sparse_gp_cpu", "results": [],
           "timing": "likelihood: one warm-up evaluation, then 3 timed; fits: once each"}
    cases = [lambda: lml_rows(doc, sizes), lambda: fit_rows(doc, small, FACTORS),
             lambda: fit_rows(doc, large, FACTORS)]
    if not args.quick:  # SuperLU's fit at 50,000 would take minutes more
        cases.append(lambda: fit_rows(doc, 50_000, ("cholmod", "supernodal")))
    run_cases(cases, doc, args.out)


if __name__ == "__main__":
    main()
