"""PCA on data far from the origin: the covariance route's cost with and without the
second, shifted pass (taken where a column's mean exceeds four standard deviations), and
its accuracy against a float64 two-pass reference, beside scikit-learn.

Run:  python benchmarks/bench_pca_offset.py --out results.json      (GPU host: device gpu)
      python benchmarks/bench_pca_offset.py --quick                  (small, CPU)
Rows: n × p float64 Gaussian data with correlated columns plus an offset per column;
``PCA(10, svd_solver="covariance_eigh").fit``; one warm-up, then 5 timed. The reference
variances are those of ``X - X.mean(0)`` formed in float64 with a second centring pass.
"""

import numpy as np
from _harness import GPU, machine, run_cases, standard_parser, timeit
from sklearn.decomposition import PCA as SkPCA

import skgpu
from skgpu.decomposition import PCA


def reference(X, k):
    Xc = X - X.mean(axis=0)
    Xc -= Xc.mean(axis=0)
    w = np.linalg.eigvalsh(Xc.T @ Xc / (X.shape[0] - 1))[::-1]
    return w[:k]


def rows(doc, n, p, offsets, device):
    rng = np.random.default_rng(0)
    base = rng.standard_normal((n, p)) @ rng.standard_normal((p, p)) / np.sqrt(p)
    for offset in offsets:
        X = base + offset * rng.uniform(0.5, 2.0, p)
        ref = reference(X, 10)
        row = {"case": f"{n:,} x {p}, offset {offset:g}", "n": n, "p": p, "offset": offset}
        for name, make, dev in (("skgpu", PCA, device), ("scikit-learn", SkPCA, "cpu")):
            def fit():
                with skgpu.config_context(device=dev):
                    return make(10, svd_solver="covariance_eigh").fit(X)

            est, stats = timeit(fit, 5)
            err = np.max(np.abs(est.explained_variance_ - ref) / ref[0])
            row[name] = {"fit": stats, "variance_error": float(err), "device": dev}
        doc["results"].append(row)
        print(f"{row['case']}: skgpu {row['skgpu']['fit']['median_s'] * 1e3:.1f} ms "
              f"(error {row['skgpu']['variance_error']:.1e}), scikit-learn "
              f"{row['scikit-learn']['fit']['median_s'] * 1e3:.1f} ms "
              f"(error {row['scikit-learn']['variance_error']:.1e})", flush=True)


def main():
    args = standard_parser(__doc__).parse_args()
    device = "gpu" if GPU and not args.quick else "cpu"
    n, p = (20_000, 32) if args.quick else (2_000_000, 128)
    doc = {"machine": machine(), "benchmark": "pca_offset", "results": [],
           "timing": "one warm-up fit, then 5 timed (median, min, max, quartiles)"}
    run_cases([lambda: rows(doc, n, p, [0.0, 1e3, 1e6, 1e9], device)], doc, args.out)


if __name__ == "__main__":
    main()
