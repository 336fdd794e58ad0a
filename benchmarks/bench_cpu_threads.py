"""CPU backend BLAS threads: fits one at a time and many at once, with skgpu's management of
BLAS threads for small work (skgpu/backends/_threads.py) on and off.

Run anywhere:  python benchmarks/bench_cpu_threads.py --out results.json
(--quick: fewer repeats.) Every row is timed the same way: one warm-up batch, then repeats;
median and spread of the wall time of a batch divided by its number of fits. Rows:

- "one at a time": the fits run one after another in this thread;
- "one at a time, 1 BLAS thread": the same under threadpoolctl's limit of one thread (the
  floor a concurrent batch should reach per fit on a machine whose cores it fills);
- "8 threads at once": 32 fits from a pool of 8 Python threads (joblib's threading
  backend, a web server); skgpu does not manage these (only the main thread sets limits:
  see skgpu/backends/_threads.py), so "on" and "off" should agree there.
"""

import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np


from _harness import machine, run_cases, standard_parser, timeit
from threadpoolctl import threadpool_info, threadpool_limits

from skgpu import config_context
from skgpu.backends import _threads
from skgpu.decomposition import PCA
from skgpu.gaussian_process import GaussianProcessRegressor
from skgpu.linear_model import RidgeCV

BATCH = 32
THREADS = 8


def workloads():
    rng = np.random.default_rng(0)
    Xr = rng.standard_normal((2000, 100))
    yr = Xr @ rng.standard_normal(100) + rng.standard_normal(2000)
    Xg = rng.uniform(-3, 3, (300, 3))
    yg = np.sin(Xg).sum(axis=1) + 0.1 * rng.standard_normal(300)
    Xp = rng.standard_normal((20_000, 200))
    return {
        "RidgeCV 2,000 × 100, 13 alphas (small work)":
            lambda: RidgeCV(alphas=np.logspace(-3, 3, 13)).fit(Xr, yr),
        "GaussianProcessRegressor n = 300, RBF, optimizer (small work)":
            lambda: GaussianProcessRegressor(alpha=1e-2).fit(Xg, yg),
        "PCA(10) 20,000 × 200 (not sized: every core)":
            lambda: PCA(10, svd_solver="covariance_eigh").fit(Xp),
    }


def main():
    parser = standard_parser(__doc__)
    args = parser.parse_args()
    repeats = 2 if args.quick else 5
    doc = {"machine": machine(), "benchmark": "cpu_threads",
           "blas_pools": [{k: i[k] for k in ("internal_api", "num_threads", "filepath")}
                          for i in threadpool_info()],
           "timing": (f"one warm-up batch, then {repeats} timed; seconds per fit = batch wall "
                      "time / fits in the batch; skgpu's device='cpu'"),
           "results": []}

    def one_at_a_time(fit, n):
        def run():
            for _ in range(n):
                fit()
        return run

    def at_once(fit):
        def run():
            with ThreadPoolExecutor(THREADS) as pool:
                list(pool.map(lambda _: fit(), range(BATCH)))
        return run

    def case(name, fit):
        def run_case():
            for managed in (False, True):
                _threads.enabled = managed
                rows = {
                    "one at a time": (one_at_a_time(fit, 4), 4, None),
                    "one at a time, 1 BLAS thread": (one_at_a_time(fit, 4), 4, 1),
                    f"{THREADS} threads at once ({BATCH} fits)": (at_once(fit), BATCH, None),
                }
                for mode, (run, n, limit) in rows.items():
                    with warnings.catch_warnings(), config_context(device="cpu"):
                        warnings.simplefilter("ignore")  # lbfgs convergence on random data
                        if limit:
                            with threadpool_limits(limit, user_api="blas"):
                                _, stats = timeit(run, repeats)
                        else:
                            _, stats = timeit(run, repeats)
                    doc["results"].append({
                        "case": name, "mode": mode,
                        "blas_management": "on" if managed else "off (before)",
                        "per_fit_median_s": stats["median_s"] / n,
                        "per_fit_min_s": stats["min_s"] / n,
                        "per_fit_max_s": stats["max_s"] / n, "repeats": stats["repeats"]})
            _threads.enabled = True
        return run_case

    run_cases([case(name, fit) for name, fit in workloads().items()], doc, args.out)


if __name__ == "__main__":
    main()
