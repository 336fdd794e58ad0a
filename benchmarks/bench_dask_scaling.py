"""Dask on the two-GPU host: weak scaling, and a dataset larger than one GPU.

    python benchmarks/bench_dask_scaling.py --out results.json [--large-rows 180000000]

Weak scaling: 32,000,000 × 256 float32 rows per GPU in 32 CuPy chunks per GPU, made and
persisted on the dask-cuda workers (block i on worker i mod workers); one worker fits
32M rows, two workers 64M. PCA (covariance route), RidgeCV, TruncatedSVD and Ridge, each
a warm-up fit and the median of 5; the ratio two-worker time / one-worker time (target
<= 1.1 for PCA and RidgeCV). The GPU (PCI bus id) of each worker's blocks is recorded.

Larger than one GPU: ``--large-rows`` × 256 float32 (180M rows: 184 GB) over two workers,
made on the workers; PCA and RidgeCV, a warm-up and the median of 3; GB/s per GPU beside
the one-GPU in-memory rate of the same fits (32M rows, this process); the memory each
worker's CuPy pool holds after the fits (its high-water mark: nothing is freed back);
the fitted models against a float64 reference summed chunk-wise on the workers.

``--quick``: the same code on a CPU LocalCluster with small sizes (no GPU needed).
"""

import collections
import functools
import sys

import numpy as np


from _harness import GPU, machine, rel_diff, run_cases, standard_parser, time_stats, timeit
from bench_dask import _gpu_of_block

from skgpu.decomposition import PCA, TruncatedSVD
from skgpu.linear_model import Ridge, RidgeCV

ALPHAS = np.logspace(-2, 4, 20)
P = 256

ESTIMATORS = {
    "pca": lambda: PCA(16, svd_solver="covariance_eigh"),
    "ridgecv": lambda: RidgeCV(alphas=ALPHAS),
    "truncated_svd": lambda: TruncatedSVD(16, algorithm="randomized", random_state=0),
    "ridge": lambda: Ridge(alpha=1.0),
}


def _block(block_id, rows, p, seed, gpu, source="normal"):
    """Row block ``block_id`` of X and its y, made where it runs (a worker's GPU)."""
    X = _x_of(block_id, rows, p, seed, gpu, source)
    return X, _y_of(X, block_id, seed, source)


def _x_of(block_id, rows, p, seed, gpu, source="normal"):
    """Row block ``block_id`` of X: normal draws (``source='normal'``), or (``'hash'``)
    uniform values from a hash of each entry's index, one kernel writing the block (a
    cheap source, as near its memory writes as a source gets), with the same column
    scales."""
    if source == "hash":
        return _hashed(_key(seed, block_id, 0), rows, p, gpu)
    if gpu:
        import cupy as xp

        rng = xp.random.default_rng(seed + block_id)
        X = rng.standard_normal((rows, p), dtype=xp.float32)
    else:
        xp = np
        rng = np.random.default_rng(seed + block_id)
        X = rng.standard_normal((rows, p), dtype=np.float32)
    # distinct column scales: well separated principal axes, so components compare
    X *= xp.asarray(np.geomspace(10, 1, p), dtype=xp.float32)
    return X


def _mix32(z):
    """A 32-bit integer hash (a bijection; NumPy uint32 arrays wrap as the kernel's do)."""
    z = z ^ (z >> np.uint32(16))
    z = z * np.uint32(0x7FEB352D)
    z = z ^ (z >> np.uint32(15))
    z = z * np.uint32(0x846CA68B)
    return z ^ (z >> np.uint32(16))


def _key(seed, block_id, stream):
    """The hash source's 32-bit key of a block's X (``stream`` 0) or y noise (1)."""
    z = np.array([seed * 1_000_003 + 2 * block_id + stream], dtype=np.uint64)
    return np.uint32(_mix32((z ^ (z >> np.uint64(32))).astype(np.uint32))[0])


def _hashed(key, rows, p, gpu):
    """A ``rows`` × ``p`` float32 block (``p`` 1: a vector) of uniforms in [-0.5, 0.5)
    from the hash of each entry's index and ``key``, times the column scales (none for a
    vector). Indices past 2³² repeat: blocks of up to 4G entries."""
    scale = (np.geomspace(10, 1, p) if p > 1 else np.ones(1)).astype(np.float32)
    shape = (rows, p) if p > 1 else (rows,)
    if gpu:
        import cupy as cp

        X = cp.empty(shape, dtype=cp.float32)
        fours = p % 4 == 0  # four entries of a row per thread, stored at once
        _hash_kernel(fours)(key, cp.asarray(scale), np.uint32(p), X,
                            size=X.size // 4 if fours else X.size)
        return X
    i = np.arange(rows * p, dtype=np.uint64).astype(np.uint32).reshape(shape)
    z = _mix32(_mix32(i) ^ key)
    return ((z >> np.uint32(8)).astype(np.float32) * np.float32(1 / 16777216)
            - np.float32(0.5)) * scale


_MIX32 = """
__device__ unsigned int mix32(unsigned int z) {
    z ^= z >> 16; z *= 0x7FEB352Du; z ^= z >> 15; z *= 0x846CA68Bu; return z ^ (z >> 16);
}
__device__ float hashed(unsigned int j, unsigned int key, float scale) {
    return ((float)(mix32(mix32(j) ^ key) >> 8) * (1.0f / 16777216.0f) - 0.5f) * scale;
}
"""


@functools.lru_cache(maxsize=None)
def _hash_kernel(fours):
    """:func:`_hashed` on the GPU (the same values as its NumPy branch): 32-bit integer
    arithmetic, raw pointers (no index arithmetic of the array's shape) and, where a
    row's length is a multiple of 4 (``fours``), four entries per thread (one remainder
    for their column, one 16-byte store), so that the block's memory writes bound it."""
    import cupy as cp

    if fours:
        body = """
        unsigned int j = 4u * (unsigned int)i, c = j % p;
        reinterpret_cast<float4*>(&x[0])[i] = make_float4(
            hashed(j, key, scale[c]), hashed(j + 1, key, scale[c + 1]),
            hashed(j + 2, key, scale[c + 2]), hashed(j + 3, key, scale[c + 3]));
        """
    else:
        body = "x[i] = hashed((unsigned int)i, key, scale[(unsigned int)i % p]);"
    return cp.ElementwiseKernel("uint32 key, raw float32 scale, uint32 p", "raw float32 x",
                                body, f"bench_hash_block{4 if fours else 1}",
                                preamble=_MIX32)


def _y_of(X, block_id, seed, source="normal"):
    """y of the X block ``block_id``: its first eight columns' sum and a noise of its
    own, drawn (``source='normal'``) or hashed (``'hash'``), so y can be made from X's
    chunk, X made once."""
    gpu = type(X).__module__.startswith("cupy")
    xp = sys.modules["cupy"] if gpu else np
    if source == "hash":
        noise = _hashed(_key(seed, block_id, 1), X.shape[0], 1, gpu)
    else:
        noise = xp.random.default_rng(seed + 10_000_000 + block_id).standard_normal(
            X.shape[0], dtype=xp.float32)
    return X[:, :8].sum(axis=1, dtype=xp.float32) + noise


def _reference_block(block):
    """float64 sums of a block: n, Σx, XᵀX, Σy, Xᵀy (on the worker, in float64)."""
    X, y = block
    xp = sys.modules["cupy"] if type(X).__module__.startswith("cupy") else np
    X64, y64 = X.astype(xp.float64), y.astype(xp.float64)
    out = (X.shape[0], X64.sum(axis=0), X64.T @ X64, float(y64.sum()), X64.T @ y64)
    return tuple(o if isinstance(o, (int, float)) else (o.get() if xp is not np else o)
                 for o in out)


def _pool_bytes():
    """What this process's CuPy pool holds (its high-water mark if never freed) and the
    device's used bytes."""
    import cupy as cp

    free, total = cp.cuda.runtime.memGetInfo()
    return {"pool_total_bytes": int(cp.get_default_memory_pool().total_bytes()),
            "device_used_bytes": int(total - free)}


def _cluster(workers, gpu, shared=False, threads=1):
    """dask-cuda's one worker per GPU; ``shared``: a plain LocalCluster of worker
    processes that all see the same GPU (dask-cuda refuses a repeated device)."""
    from distributed import Client, LocalCluster

    if gpu and not shared:
        from dask_cuda import LocalCUDACluster

        cluster = LocalCUDACluster(n_workers=workers, threads_per_worker=threads)
    else:
        # memory_limit=0: no spilling; dask would count CuPy chunks against host memory
        # and spill them to disk
        cluster = LocalCluster(n_workers=workers, threads_per_worker=threads, processes=True,
                               dashboard_address=None, memory_limit=0)
    return cluster, Client(cluster, direct_to_workers=True)


def _data(client, n_chunks, chunk, seed, gpu, source="normal"):
    """X, y as persisted dask arrays of blocks made on the workers; the futures too."""
    import dask.array as da
    import distributed

    workers = sorted(client.scheduler_info()["workers"])
    fb = [client.submit(_block, i, chunk, P, seed, gpu, source, pure=False,
                        workers=[workers[i % len(workers)]]) for i in range(n_chunks)]
    fx = [client.submit(lambda b: b[0], f, pure=False, workers=[workers[i % len(workers)]])
          for i, f in enumerate(fb)]
    fy = [client.submit(lambda b: b[1], f, pure=False, workers=[workers[i % len(workers)]])
          for i, f in enumerate(fb)]
    distributed.wait(fx + fy)
    if gpu:
        import cupy as cp

        meta_x, meta_y = cp.empty((0, 0), cp.float32), cp.empty(0, cp.float32)
    else:
        meta_x, meta_y = np.empty((0, 0), np.float32), np.empty(0, np.float32)
    Xd = da.concatenate([da.from_delayed(f, (chunk, P), dtype=np.float32, meta=meta_x)
                         for f in fx])
    yd = da.concatenate([da.from_delayed(f, (chunk,), dtype=np.float32, meta=meta_y)
                         for f in fy])
    Xd, yd = client.persist([Xd, yd])
    distributed.wait([Xd, yd])
    return Xd, yd, fb, workers


def _placement(client, Xd, fb, workers, gpu):
    import distributed

    out = {"blocks_per_worker": sorted(collections.Counter(
        w for ws in client.who_has(distributed.futures_of(Xd)).values() for w in ws
    ).values())}
    if gpu:
        out["gpu_of_first_block_per_worker"] = {
            w: client.submit(lambda b: _gpu_of_block(b[0]), fb[i], workers=[w],
                             pure=False).result()
            for i, w in enumerate(workers)}
    return out


def _fit_times(Xd, yd, names, repeats):
    times, models = {}, {}
    for name in names:
        est = ESTIMATORS[name]
        fit = (lambda: est().fit(Xd)) if name in ("pca", "truncated_svd") else (
            lambda: est().fit(Xd, yd))
        models[name], times[name] = timeit(fit, repeats, warmup=1)
    return times, models


def weak_scaling(results, rows_per_worker, chunks_per_worker, gpu, max_workers=2, repeats=5):
    """One worker on rows_per_worker rows, two on twice that."""
    medians = {}
    for workers in range(1, max_workers + 1):
        n_chunks = chunks_per_worker * workers
        chunk = rows_per_worker // chunks_per_worker
        cluster, client = _cluster(workers, gpu)
        with cluster, client:
            Xd, yd, fb, names = _data(client, n_chunks, chunk, 0, gpu)
            row = {"case": f"weak scaling: {workers} worker(s), X {n_chunks * chunk}x{P} "
                           f"float32, {n_chunks} chunks", "workers": workers}
            row.update(_placement(client, Xd, fb, names, gpu))
            times, _ = _fit_times(Xd, yd, list(ESTIMATORS), repeats)
            row.update({f"{k}_s": v for k, v in times.items()})
            medians[workers] = {k: v["median_s"] for k, v in times.items()}
        results.append(row)
    if max_workers < 2:
        return
    results.append({"case": "weak scaling: two-worker time (2x rows) over one-worker time",
                    "target": "<= 1.1 for pca and ridgecv",
                    **{k: medians[2][k] / medians[1][k] for k in medians[1]}})


def shared_gpu_overhead(results, rows, chunks, gpu, repeats=5):
    """The machinery's cost: the same X (``rows`` in ``chunks`` chunks) fitted by one
    worker, then by two worker processes sharing that one GPU (each holding half the
    chunks). The arithmetic is the same; what two add is the task graph, the transfers of
    partial results and the reductions (target: two <= 1.1 x one)."""
    medians = {}
    for workers in (1, 2):
        cluster, client = _cluster(workers, gpu, shared=True)
        with cluster, client:
            Xd, yd, fb, names = _data(client, chunks, rows // chunks, 0, gpu)
            row = {"case": f"one GPU shared: {workers} worker process(es), X "
                           f"{rows}x{P} float32, {chunks} chunks", "workers": workers}
            row.update(_placement(client, Xd, fb, names, gpu))
            times, _ = _fit_times(Xd, yd, ["pca", "ridgecv"], repeats)
            row.update({f"{k}_s": v for k, v in times.items()})
            medians[workers] = {k: v["median_s"] for k, v in times.items()}
            del Xd, yd, fb
        results.append(row)
    results.append({"case": "one GPU shared: two-worker time over one-worker time (same X)",
                    "target": "<= 1.1 for pca and ridgecv",
                    **{k: medians[2][k] / medians[1][k] for k in medians[1]}})


def _lazy_data(n_chunks, chunk, gpu, seed=0, source="normal"):
    """X and y whose chunks are made by the tasks that read them (never persisted):
    each pass makes them again, on the worker, from the seed; y from X's chunk (X is
    drawn once per chunk and pass, as X and y read from one source would be)."""
    import dask.array as da

    if gpu:
        import cupy as cp

        meta_x = cp.empty((0, 0), cp.float32)
    else:
        meta_x = np.empty((0, 0), np.float32)

    def x_block(block_id=None):
        return _x_of(block_id[0], chunk, P, seed, gpu, source)

    def y_column(X, block_id=None):
        return _y_of(X, block_id[0], seed, source)[:, None]

    Xd = da.map_blocks(x_block, chunks=((chunk,) * n_chunks, (P,)), dtype=np.float32,
                       meta=meta_x)
    # y as a column, then its view: map_blocks(..., drop_axis=1) would hand y's function
    # a copy of each X chunk (dask concatenates the dropped axis's blocks, one block
    # too), 2.3 ms per 1 GB chunk and pass on the H200 (the probe stream_overlap,
    # benchmarks/README.md)
    yd = Xd.map_blocks(y_column, chunks=(Xd.chunks[0], (1,)), dtype=np.float32,
                       meta=meta_x)[:, 0]
    return Xd, yd


def _making_time(n_chunks, chunk, gpu, seed=0, source="normal"):
    """Seconds to make every chunk of X and its y in a loop where this runs (one
    worker's task), nothing else done: what the data's source costs."""
    import time

    start = time.perf_counter()
    for i in range(n_chunks):
        X = _x_of(i, chunk, P, seed, gpu, source)
        y = _y_of(X, i, seed, source)
        del X, y
    if gpu:
        import cupy as cp

        cp.cuda.Device().synchronize()
    return time.perf_counter() - start


def _reference_lazy(client, n_chunks, chunk, gpu, seed=0, source="normal"):
    """float64 sums of every lazily made block (``_reference_block`` on each)."""
    futures = [client.submit(lambda i: _reference_block(_block(i, chunk, P, seed, gpu, source)), i,
                             pure=False) for i in range(n_chunks)]
    return client.gather(futures)


def persisted_rate(results, persisted_gb, chunk, gpu, repeats=3, source="normal"):
    """GB/s of PCA and RidgeCV on ``persisted_gb`` of chunks persisted on one worker
    (the rate :func:`streamed` is measured against)."""
    block_gb = chunk * P * 4 / 1e9
    cluster, client = _cluster(1, gpu, shared=True)
    with cluster, client:
        n_persist = max(1, int(persisted_gb / block_gb))
        Xd, yd, fb, names = _data(client, n_persist, chunk, 0, gpu, source)
        gb = n_persist * block_gb
        times, _ = _fit_times(Xd, yd, ["pca", "ridgecv"], repeats)
        row = {"case": f"persisted on one worker: X {n_persist * chunk}x{P} float32 "
                       f"({gb:.0f} GB), {n_persist} chunks, source {source}", "gb": gb,
               "source": source,
               **{f"{k}_s": v for k, v in times.items()},
               **{f"{k}_gb_per_s": gb / v["median_s"] for k, v in times.items()}}
        if gpu:
            row["memory_after_fits"] = client.run(_pool_bytes)
        results.append(row)
        del Xd, yd, fb
    return {k: gb / v["median_s"] for k, v in times.items()}


def streamed(results, stream_gb, rate, chunk, gpu, repeats=3, threads=1, source="normal"):
    """Data that never fits: ``stream_gb`` of float32 chunks made on one worker (with
    ``threads`` threads) by the tasks that read them, against the persisted ``rate`` of
    the same run: GB/s of PCA and RidgeCV, the worker's peak GPU memory (its CuPy
    pool's high-water mark), the models against chunk-wise float64 sums. Beside them,
    the time the worker takes to make the chunks in a loop, nothing else done (the
    source's own rate), and the rate that making and fitting one after the other would
    give with nothing else paid,
    ``1 / (1/source + passes/persisted)``, RidgeCV making X twice (two passes)."""
    block_gb = chunk * P * 4 / 1e9
    cluster, client = _cluster(1, gpu, shared=True, threads=threads)
    with cluster, client:
        n_stream = int(np.ceil(stream_gb / block_gb))  # at least stream_gb (300 GB: 293 chunks)
        Xd, yd = _lazy_data(n_stream, chunk, gpu, source=source)
        gb = n_stream * block_gb
        # timed on the worker, a warm-up and ``repeats`` as every row
        make = time_stats([client.submit(_making_time, n_stream, chunk, gpu, 0, source,
                                         pure=False).result()
                           for _ in range(repeats + 1)][1:])
        times, models = _fit_times(Xd, yd, ["pca", "ridgecv"], repeats)
        source_rate = gb / make["median_s"]
        passes = {"pca": 1, "ridgecv": 2}
        bound = {k: 1 / (passes[k] / source_rate + 1 / rate[k]) for k in times}
        row = {"case": f"streamed, never persisted, one worker ({threads} thread(s)): X "
                       f"{n_stream * chunk}x{P} float32 ({gb:.0f} GB), {n_stream} chunks, "
                       f"source {source}",
               "gb": gb, "threads_per_worker": threads, "source": source,
               **{f"{k}_s": v for k, v in times.items()},
               **{f"{k}_gb_per_s": gb / v["median_s"] for k, v in times.items()},
               **{f"{k}_fraction_of_persisted_gb_per_s": gb / v["median_s"] / rate[k]
                  for k, v in times.items()},
               "target": ">= 0.8 of the persisted GB/s, peak memory a few chunks",
               "make_only_s": make, "source_gb_per_s": source_rate,
               **{f"{k}_make_then_fit_gb_per_s": b for k, b in bound.items()},
               **{f"{k}_fraction_of_make_then_fit": gb / times[k]["median_s"] / b
                  for k, b in bound.items()}}
        if gpu:
            row["memory_after_fits"] = client.run(_pool_bytes)
            row["block_bytes"] = chunk * P * 4
        parts = _reference_lazy(client, n_stream, chunk, gpu, source=source)
        row.update(_against_float64_parts(parts, models))
        results.append(row)


def in_memory_rate(results, rows, gpu, repeats=5):
    """One GPU (this process), the same kind of data in memory: GB/s of PCA and RidgeCV."""
    import skgpu

    X, y = _block(0, rows, P, 0, gpu)
    with skgpu.config_context(device="gpu" if gpu else "cpu"):
        times, _ = _fit_times(X, y, ["pca", "ridgecv"], repeats)
    gb = X.nbytes / 1e9
    results.append({"case": f"in memory, one {'GPU' if gpu else 'CPU process'}: X {rows}x{P} "
                            "float32", "gb": gb,
                    **{f"{k}_s": v for k, v in times.items()},
                    **{f"{k}_gb_per_s": gb / v["median_s"] for k, v in times.items()}})
    del X, y
    if gpu:
        import cupy as cp

        cp.get_default_memory_pool().free_all_blocks()
    return {k: gb / v["median_s"] for k, v in times.items()}


def larger_than_one_gpu(results, rows, chunks_per_worker, rate, gpu, workers=2, repeats=3):
    n_chunks = chunks_per_worker * workers
    chunk = rows // n_chunks
    cluster, client = _cluster(workers, gpu)
    with cluster, client:
        Xd, yd, fb, names = _data(client, n_chunks, chunk, 0, gpu)
        gb = n_chunks * chunk * P * 4 / 1e9
        row = {"case": f"larger than one GPU: X {n_chunks * chunk}x{P} float32 ({gb:.0f} GB), "
                       f"{n_chunks} chunks, {workers} workers", "gb": gb}
        row.update(_placement(client, Xd, fb, names, gpu))
        if gpu:
            row["memory_after_data"] = client.run(_pool_bytes)
        times, models = _fit_times(Xd, yd, ["pca", "ridgecv"], repeats)
        for k, v in times.items():
            row[f"{k}_s"] = v
            per_gpu = gb / workers / v["median_s"]
            row[f"{k}_gb_per_s_per_gpu"] = per_gpu
            row[f"{k}_fraction_of_in_memory_rate"] = per_gpu / rate[k]
        if gpu:
            row["memory_after_fits"] = client.run(_pool_bytes)
        row.update(_against_float64(client, fb, models))
    results.append(row)


def _against_float64(client, fb, models):
    """The fitted PCA and RidgeCV against float64 sums made chunk-wise on the workers."""
    parts = client.gather([client.submit(_reference_block, f, pure=False) for f in fb])
    return _against_float64_parts(parts, models)


def _against_float64_parts(parts, models):
    n = sum(p[0] for p in parts)
    sx = sum(p[1] for p in parts)
    G = sum(p[2] for p in parts)
    sy = sum(p[3] for p in parts)
    gy = sum(p[4] for p in parts)
    mean = sx / n
    C = (G - n * np.outer(mean, mean)) / (n - 1)
    vals, vecs = np.linalg.eigh(C)
    top = vecs[:, ::-1][:, :16].T
    pca = models["pca"]
    signs = np.sign(np.sum(pca.components_ * top, axis=1))[:, None]
    ridge = models["ridgecv"]
    Cxy = gy - n * mean * (sy / n)
    coef = np.linalg.solve(G - n * np.outer(mean, mean) + ridge.alpha_ * np.eye(P), Cxy)
    return {"check_pca_components_rel_diff_vs_float64": rel_diff(pca.components_ * signs, top),
            "check_pca_explained_variance_rel_diff_vs_float64": rel_diff(
                pca.explained_variance_, vals[::-1][:16]),
            "check_ridgecv_coef_rel_diff_vs_float64": rel_diff(np.ravel(ridge.coef_), coef),
            "check_ridgecv_intercept_abs_diff_vs_float64": float(abs(
                ridge.intercept_ - (sy / n - mean @ coef)))}


def main():
    parser = standard_parser(__doc__.splitlines()[0])
    parser.add_argument("--rows-per-gpu", type=int, default=32_000_000)
    parser.add_argument("--large-rows", type=int, default=180_000_000)
    parser.add_argument("--skip", nargs="*", default=[],
                        choices=["weak", "large", "shared", "stream"])
    parser.add_argument("--only", nargs="*", default=None,
                        choices=["weak", "large", "shared", "stream"])
    parser.add_argument("--stream-gb", type=float, default=300.0)
    parser.add_argument("--persisted-gb", type=float, default=100.0)
    parser.add_argument("--stream-threads", type=int, nargs="+", default=[1],
                        help="threads per worker for the streamed case (one row each)")
    parser.add_argument("--stream-source", nargs="+", default=["normal"],
                        choices=["normal", "hash"],
                        help="how the streamed (and persisted) chunks are made (see _x_of)")
    parser.add_argument("--workers", type=int, default=2,
                        help="at most this many workers (1: a smoke run on one GPU)")
    args = parser.parse_args()
    gpu = GPU and not args.quick
    rows_per_gpu = args.rows_per_gpu if gpu else 200_000
    large_rows = args.large_rows if gpu else 1_000_000
    chunks = 32 if gpu else 8
    results = []
    doc = {"machine": machine(), "results": results}
    rate = {}
    cases = []
    skip = set(args.skip) | ({"weak", "large", "shared", "stream"} - set(args.only)
                             if args.only is not None else set())
    if "shared" not in skip:
        cases.append(lambda: shared_gpu_overhead(results, rows_per_gpu, chunks, gpu))
    if "stream" not in skip:
        chunk = 1_000_000 if gpu else 50_000
        for source in args.stream_source:
            cases.append(lambda source=source: rate.update({source: persisted_rate(
                results, args.persisted_gb if gpu else 0.2, chunk, gpu, source=source)}))
            for threads in args.stream_threads:
                cases.append(lambda threads=threads, source=source: streamed(
                    results, args.stream_gb if gpu else 0.4, rate[source], chunk, gpu,
                    threads=threads, source=source))
    if "weak" not in skip:
        cases.append(lambda: weak_scaling(results, rows_per_gpu, chunks, gpu,
                                                  args.workers))
    if "large" not in skip:
        cases.append(lambda: rate.update(in_memory_rate(results, rows_per_gpu, gpu)))
        cases.append(lambda: larger_than_one_gpu(results, large_rows, chunks, rate,
                                                         gpu, args.workers))
    run_cases(cases, doc, args.out)


if __name__ == "__main__":
    main()
