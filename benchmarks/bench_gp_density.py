"""Where the sparse GaussianProcessRegressor stops paying: fits at growing covariance
density, dense against sparse against ``cholesky='auto'`` (which must pick the faster).

Run:  python benchmarks/bench_gp_density.py --out results.json   (about 5 minutes on 2 cores)
      python benchmarks/bench_gp_density.py --quick               (n = 1,500)
      python benchmarks/bench_gp_density.py --device gpu --out r.json   (on the GPU host)
Points uniform in the unit cube of d dimensions, ``Wendland(support_radius=r)``,
``alpha=1e-2``, ``optimizer=None`` (one factorisation and the weights: the unit of an
optimizer's work). Every row: one warm-up fit, then 3 timed; K's density is counted
exactly over all pairs.
"""

import numpy as np
from _harness import machine, run_cases, standard_parser, timeit

import skgpu
from skgpu.gaussian_process import GaussianProcessRegressor
from skgpu.gaussian_process.kernels import Wendland


def exact_density(X, r):
    from scipy.spatial import cKDTree

    return 2 * len(cKDTree(X).query_pairs(r)) / X.shape[0] ** 2 + 1 / X.shape[0]


def rows(doc, n, d, radii, device):
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, (n, d))
    y = np.sin(6 * X[:, 0]) + 0.1 * rng.standard_normal(n)
    for r in radii:
        row = {"case": f"n = {n:,}, d = {d}, r = {r}", "n": n, "d": d, "radius": r,
               "density": exact_density(X, r), "device": device}
        for mode in ("dense", "sparse", "auto"):
            def fit():
                with skgpu.config_context(device=device):
                    return GaussianProcessRegressor(Wendland(support_radius=r), alpha=1e-2,
                                                    optimizer=None, cholesky=mode).fit(X, y)

            gp, stats = timeit(fit, 3)
            row[f"fit_{mode}"] = stats
            if mode == "auto":
                row["auto_chose"] = gp.cholesky_
        best = min(("dense", "sparse"), key=lambda m: row[f"fit_{m}"]["median_s"])
        row["faster"] = best
        row["auto_over_best"] = row["fit_auto"]["median_s"] / row[f"fit_{best}"]["median_s"]
        doc["results"].append(row)
        print(f"{row['case']}: density {row['density']:.3f}, dense "
              f"{row['fit_dense']['median_s']:.3f} s, sparse {row['fit_sparse']['median_s']:.3f}"
              f" s, auto chose {row['auto_chose']} ({row['auto_over_best']:.2f}x the faster)",
              flush=True)


def main():
    parser = standard_parser(__doc__)
    parser.add_argument("--device", default="cpu", choices=["cpu", "gpu"])
    args = parser.parse_args()
    if args.quick:
        grid = [(1_500, 2, [0.05, 0.15, 0.4])]
    elif args.device == "gpu":
        grid = [(8_000, 2, [0.03, 0.06, 0.1, 0.15]), (20_000, 2, [0.02, 0.04, 0.06]),
                (8_000, 3, [0.15, 0.25])]
    else:
        grid = [(3_000, 2, [0.1, 0.2, 0.35, 0.8]), (3_000, 3, [0.2, 0.3, 0.4]),
                (8_000, 2, [0.1, 0.15, 0.2])]
    doc = {"machine": machine(), "benchmark": "gp_density", "results": [],
           "timing": "one warm-up fit, then 3 timed (median, min, max)"}
    run_cases([lambda n=n, d=d, radii=radii: rows(doc, n, d, radii, args.device)
               for n, d, radii in grid], doc, args.out)


if __name__ == "__main__":
    main()
