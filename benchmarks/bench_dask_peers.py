"""Dask input beside dask-ml: PCA and TruncatedSVD on the same CPU LocalCluster and data.

    python benchmarks/bench_dask_peers.py --out results.json     (GPU host: 4 workers x 2
                                                                  threads, 8M x 256 float64)
    python benchmarks/bench_dask_peers.py --quick                 (any machine, small)

X (float64, rows made and persisted on the workers from a seed: a spectrum decaying from
10 to 0.1 plus an offset, so principal axes are well separated) is fitted by skgpu and by
dask-ml (``dask_ml.decomposition``) with 16 components: PCA by skgpu's default route
(covariance, one pass) against dask-ml's exact 'full' (TSQR) and its 'randomized'
(svd_compressed, iterated_power 0 and 3); TruncatedSVD by skgpu's randomized (n_iter 5)
(and n_iter 10: its power iterations are products with the p x p Gram matrix on the client)
against dask-ml's 'tsqr' (exact) and 'randomized' (n_iter 5). Each row: a warm-up fit,
then the median of ``--repeats`` (spread too), and the accuracy against a float64
reference computed chunk-wise on the workers (explained variances or singular values:
largest relative error of the 16; components: the largest 1 - |cos| to the reference's).
Beside dask-ml's PCA rows, dask's own ``da.linalg.svd_compressed`` on the centred X (the
route dask-ml's randomized PCA takes, :class:`SvdCompressedPCA`): dask-ml's PCA gathers
the whole X on one worker (it computes ``delayed(lambda x: x.shape)(X)``), and at 8M x
256 float64 on 4 workers of 32 GB that kills every worker (``--peers`` picks the rows).
Without dask-ml installed, only skgpu's and dask's rows run. The last row: each peer
row's median over that of the fastest skgpu row at equal or better accuracy.
"""

import time

import numpy as np


from _harness import machine, run_cases, standard_parser, timeit

K = 16


def _make_block(block_id, rows, p, seed):
    rng = np.random.default_rng(seed + block_id)
    X = rng.standard_normal((rows, p)) * np.geomspace(10, 0.1, p)
    return X + 1.0


def _data(client, n, p, chunks, seed=0):
    import dask.array as da
    import distributed

    rows = n // chunks
    blocks = [da.from_delayed(client.submit(_make_block, i, rows, p, seed, pure=False),
                              (rows, p), dtype=np.float64) for i in range(chunks)]
    X = client.persist(da.concatenate(blocks))
    distributed.wait(X)
    return X


def _reference(X):
    """float64 spectra from Gram matrices summed chunk-wise (centred for PCA)."""
    import dask

    mean = X.mean(axis=0).compute()
    Xc = X - mean
    G, Gc = dask.compute(X.T @ X, Xc.T @ Xc)
    n = X.shape[0]
    vals, vecs = np.linalg.eigh(Gc / (n - 1))
    svals, svecs = np.linalg.eigh(G)
    return {"pca": (vals[::-1][:K], vecs[:, ::-1][:, :K].T),
            "svd": (np.sqrt(np.maximum(svals[::-1][:K], 0)), svecs[:, ::-1][:, :K].T)}


def _accuracy(values, components, ref):
    rv, rc = ref
    values = np.asarray(values, dtype=np.float64)[:K]
    cos = np.abs(np.sum(np.asarray(components)[:K] * rc, axis=1))
    return {"values_max_rel_err": float(np.max(np.abs(values - rv) / np.abs(rv))),
            "components_max_1_minus_cos": float(np.max(1.0 - np.minimum(cos, 1.0)))}


class SvdCompressedPCA:
    """dask-ml's randomized PCA with dask.array alone: the centred X's
    ``da.linalg.svd_compressed`` (components and singular values, computed together with
    the total variance, as dask-ml does), without dask-ml's gather of X."""

    def __init__(self, n_components, n_power_iter, seed=0):
        self.n_components, self.n_power_iter, self.seed = n_components, n_power_iter, seed

    def fit(self, X):
        import dask
        import dask.array as da

        Xc = X - X.mean(axis=0)
        _, S, V = da.linalg.svd_compressed(Xc, self.n_components,
                                           n_power_iter=self.n_power_iter, seed=self.seed)
        S, self.components_, total = dask.compute(S, V, Xc.var(ddof=1, axis=0).sum())
        self.explained_variance_ = S ** 2 / (X.shape[0] - 1)
        self.explained_variance_ratio_ = self.explained_variance_ / total
        return self


def _row(results, name, fit, ref_key, ref, repeats, values_attr):
    start = time.perf_counter()
    model, stats = timeit(fit, repeats, warmup=1)
    row = {"case": name, "fit_s": stats, "wall_all_runs_s": time.perf_counter() - start}
    row.update(_accuracy(getattr(model, values_attr), model.components_, ref[ref_key]))
    results.append(row)


def main():
    parser = standard_parser(__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=8_000_000)
    parser.add_argument("--features", type=int, default=256)
    parser.add_argument("--chunks", type=int, default=64)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--estimators", nargs="+", default=["PCA", "TruncatedSVD"],
                        choices=["PCA", "TruncatedSVD"], help="whose rows to run")
    parser.add_argument("--skip-exact-peers", action="store_true",
                        help="leave out dask-ml's TSQR rows (at 8M x 256 float64 on 4 "
                             "workers of 32 GB, its exact PCA gathers U on one worker "
                             "and kills it)")
    parser.add_argument("--peers", nargs="+", default=["dask-ml", "dask"],
                        choices=["dask-ml", "dask", "dask-ml-tsvd-only"],
                        help="peer rows: dask-ml's, dask's svd_compressed PCA, or dask-ml's "
                             "TruncatedSVD rows only (not its PCA: see above)")
    parser.add_argument("--svd-compressed-powers", type=int, nargs="+", default=[0, 3],
                        help="n_power_iter of dask's svd_compressed PCA rows")
    args = parser.parse_args()
    if args.quick:
        args.rows, args.features, args.chunks, args.workers, args.threads = (
            200_000, 64, 8, 2, 1)
        args.repeats = 2
    from distributed import Client, LocalCluster

    from skgpu import config_context
    from skgpu.decomposition import PCA, TruncatedSVD

    try:
        import dask_ml.decomposition as dml
    except ImportError:
        dml = None
    results = []
    doc = {"machine": machine(), "results": results,
           "setup": {"rows": args.rows, "features": args.features, "chunks": args.chunks,
                     "workers": args.workers, "threads_per_worker": args.threads,
                     "dtype": "float64", "components": K, "estimators": args.estimators,
                     "peers": args.peers,
                     "dask-ml": "installed" if dml else "missing"}}
    with LocalCluster(n_workers=args.workers, threads_per_worker=args.threads,
                      processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client, config_context(device="cpu"):
        X = _data(client, args.rows, args.features, args.chunks)
        ref = _reference(X)

        def row(name, make, ref_key, values_attr):
            if not any(f" {est} " in name for est in args.estimators):
                return None

            def case():
                _row(results, name, lambda: make().fit(X), ref_key, ref, args.repeats,
                     values_attr)
            return case

        cases = [row("skgpu PCA (covariance, default)", lambda: PCA(K), "pca",
                     "explained_variance_"),
                 row("skgpu TruncatedSVD (randomized, n_iter=5)",
                     lambda: TruncatedSVD(K, random_state=0), "svd", "singular_values_"),
                 # on the Gram route a power iteration is a p x p product on the client
                 row("skgpu TruncatedSVD (randomized, n_iter=10)",
                     lambda: TruncatedSVD(K, n_iter=10, random_state=0), "svd",
                     "singular_values_")]
        if dml is not None and "dask-ml" in args.peers:
            exact = [] if args.skip_exact_peers else [("full (TSQR, exact)",
                                                       dict(svd_solver="full"))]
            for label, params in exact + [("randomized, iterated_power=0",
                                   dict(svd_solver="randomized", random_state=0)),
                                  ("randomized, iterated_power=3",
                                   dict(svd_solver="randomized", iterated_power=3,
                                        random_state=0))]:
                cases.append(row(f"dask-ml PCA {label}",
                                 lambda params=params: dml.PCA(K, **params), "pca",
                                 "explained_variance_"))
        if "dask" in args.peers:
            for power in args.svd_compressed_powers:
                cases.append(row(f"dask PCA svd_compressed, n_power_iter={power} (dask-ml's "
                                 "randomized route, without its gather of X)",
                                 lambda power=power: SvdCompressedPCA(K, power), "pca",
                                 "explained_variance_"))
        if dml is not None and {"dask-ml", "dask-ml-tsvd-only"} & set(args.peers):
            exact = [] if args.skip_exact_peers else [("tsqr (exact)",
                                                       dict(algorithm="tsqr"))]
            for label, params in exact + [("randomized, n_iter=5",
                                   dict(algorithm="randomized", n_iter=5,
                                        random_state=0))]:
                cases.append(row(f"dask-ml TruncatedSVD {label}",
                                 lambda params=params: dml.TruncatedSVD(K, **params),
                                 "svd", "singular_values_"))

        def ratios():
            """Each peer row's median over the fastest skgpu row of the same estimator
            that is at least as accurate (both errors no larger, up to rounding)."""
            out = {"case": "ratio: peer median / the fastest skgpu median at equal or "
                           "better accuracy (>= 3 is the target)"}
            rows = [r for r in results if "fit_s" in r]
            for peer in (r for r in rows if not r["case"].startswith("skgpu ")):
                what = "PCA" if " PCA " in peer["case"] else "TruncatedSVD"
                ours = [r for r in rows if r["case"].startswith(f"skgpu {what} ")
                        and all(r[e] <= max(peer[e], 1e-12) for e in (
                            "values_max_rel_err", "components_max_1_minus_cos"))]
                if ours:
                    best = min(ours, key=lambda r: r["fit_s"]["median_s"])
                    out[peer["case"]] = {"ratio": peer["fit_s"]["median_s"]
                                         / best["fit_s"]["median_s"],
                                         "against": best["case"]}
            results.append(out)

        run_cases([c for c in cases if c is not None] + [ratios], doc, args.out)


if __name__ == "__main__":
    main()
