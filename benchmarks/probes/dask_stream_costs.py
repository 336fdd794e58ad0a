"""Probe: where the time of a dask fit on one H200 goes, for chunks made by the tasks
that read them (never persisted) and for two worker processes sharing the GPU.

    python benchmarks/probes/dask_stream_costs.py [--chunks N] [--only stream|in_process|shared]

stream: N chunks of 1,000,000 × 256 float32 on one worker. Per chunk, in this process:
what making a chunk costs with each random source (CuPy's default_rng, cuRAND's normal
and uniform generators). Then on the worker: PCA and RidgeCV on the chunks persisted,
and on lazily made chunks (y computed from the X chunk) with each source, beside a pass
that only makes the chunks (a dask task per chunk); with cuRAND's normal draws, by each
of the runner's routes for such chunks (:func:`_routes`).

in_process: the same chunks made, and made and read by PCA's chunk statistics, in a
loop in this process; PCA on them under dask's synchronous and threaded schedulers.

shared: 32 chunks (32M × 256 float32) fitted by one worker; by two worker processes on
the same GPU holding 16 chunks each; and by two of which one holds every chunk (what
a second process costs when it has no work).

One JSON document on stdout (a warm-up, then the median of 3 or 5).
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402

import bench_dask_scaling as bds  # noqa: E402
from _harness import machine, timeit  # noqa: E402

CHUNK = 1_000_000
P = bds.P
SOURCES = ("default_rng", "curand_normal", "curand_uniform")


def make_x(source, block_id, rows=CHUNK, seed=0):
    """A float32 chunk from ``source``, with the benchmark's column scales."""
    import cupy as cp

    if source == "default_rng":
        X = cp.random.default_rng(seed + block_id).standard_normal((rows, P), dtype=cp.float32)
    elif source == "curand_normal":
        X = cp.random.RandomState(seed + block_id).standard_normal((rows, P),
                                                                   dtype=cp.float32)
    elif source == "curand_uniform":
        X = cp.random.RandomState(seed + block_id).random_sample((rows, P), dtype=cp.float32)
        X -= 0.5
    else:
        raise ValueError(source)
    X *= cp.asarray(np.geomspace(10, 1, P), dtype=cp.float32)
    return X


def y_of(X):
    """y from its X chunk: eight columns' sum and a bounded pseudo-noise."""
    import cupy as cp

    return X[:, :8].sum(axis=1, dtype=cp.float32) + cp.sin(1e3 * X[:, -1])


def lazy(source, n_chunks):
    import cupy as cp
    import dask.array as da

    def x_block(block_id=None):
        return make_x(source, block_id[0])

    Xd = da.map_blocks(x_block, chunks=((CHUNK,) * n_chunks, (P,)), dtype=np.float32,
                       meta=cp.empty((0, 0), cp.float32))
    yd = Xd.map_blocks(y_of, drop_axis=1, dtype=np.float32, meta=cp.empty(0, cp.float32))
    return Xd, yd


def make_only(Xd, yd):
    """A pass that makes every chunk (and its y) and returns a number per chunk."""
    import dask.array as da

    def touch(x, y):
        return np.full((1, 1), float(x[0, 0] + y[0]))

    return da.blockwise(touch, "ij", Xd, "ij", yd, "i", dtype=float,
                        adjust_chunks={"i": 1, "j": 1}, meta=np.empty((0, 0))).compute()


def in_process_costs(repeats=5):
    import cupy as cp

    out = {}
    for source in SOURCES:
        def one():
            X = make_x(source, 1)
            y = y_of(X)
            cp.cuda.Device().synchronize()
            return X, y
        out[f"make_chunk_{source}_s"] = timeit(one, repeats)[1]
        del one
    return out


def old_chunk_tasks(func, reduce, X, vectors, args, device, operations):
    """The runner's per-chunk tasks before their fusion: X's and each vector's blocks
    from separately optimised graphs."""
    from skgpu.dask import runner

    chunks = runner.blocks(X)
    vblocks = [runner.vector_blocks(v, X) for v in vectors]
    common = runner.shared(args)
    return [runner.delayed(runner.group_task)(func, reduce, [b], [[vb[i]] for vb in vblocks],
                                              common, device, operations)
            for i, b in enumerate(chunks)]


def _routes():
    """The runner's routes for chunks that are not persisted, oldest first: per-chunk
    tasks from X's and y's graphs apart; per-chunk tasks from one graph, fused with the
    making; runs of chunks made inline (today's). Each is (chunk_tasks, recipe_split)."""
    from skgpu.dask import runner

    chunk_tasks, recipe_split = runner.chunk_tasks, runner.recipe_split
    return {"per chunk, graphs apart": (old_chunk_tasks, lambda *a: None),
            "per chunk, one graph": (chunk_tasks, lambda *a: None),
            "runs of chunks": (chunk_tasks, recipe_split)}


def stream(results, n_chunks):
    from skgpu.dask import runner

    routes = _routes()
    results.append({"case": "in this process, per 1 GB chunk (X and y)", **in_process_costs()})
    cluster, client = bds._cluster(1, True, shared=True)
    with cluster, client:
        Xd, yd, fb, _ = bds._data(client, n_chunks, CHUNK, 0, True)
        times, _ = bds._fit_times(Xd, yd, ["pca", "ridgecv"], 3)
        results.append({"case": f"persisted, {n_chunks} chunks", **times})
        del Xd, yd, fb
        for source in SOURCES:
            Xd, yd = lazy(source, n_chunks)
            row = {"case": f"lazy, y from X, {source}",
                   "make_only_s": timeit(lambda: make_only(Xd, yd), 3)[1]}
            for name, (chunk_tasks, recipe_split) in routes.items():
                if name != "runs of chunks" and source != "curand_normal":
                    continue
                runner.chunk_tasks, runner.recipe_split = chunk_tasks, recipe_split
                times, _ = bds._fit_times(Xd, yd, ["pca", "ridgecv"], 3)
                row.update({f"{k}, {name}": v for k, v in times.items()})
            results.append(row)
        runner.chunk_tasks, runner.recipe_split = routes["runs of chunks"]


def in_process(results, n_chunks):
    """The streamed PCA pass without a cluster: the chunks made and read in a loop in
    this process (one :func:`runner.group_task` per chunk, as the per-chunk tasks run
    it), and the fit on the lazy data under dask's synchronous and threaded schedulers."""
    import cupy as cp
    import dask

    from skgpu.dask import linalg, runner

    def loop(stats):
        for i in range(n_chunks):
            X = bds._x_of(i, CHUNK, P, 0, True)
            if stats:
                runner.group_task(linalg._chunk_stats, linalg._fold_chunks("gram"), [X],
                                  [[None], [None]], ("gram", np.float32), "auto",
                                  ("gram", "matmul", "qr_r"))
            else:
                float(X[0, 0])
        cp.cuda.Device().synchronize()

    row = {"case": f"in this process, {n_chunks} chunks made in a loop",
           "make_s": timeit(lambda: loop(False), 3)[1],
           "make_and_pca_stats_s": timeit(lambda: loop(True), 3)[1]}
    Xd, _ = bds._lazy_data(n_chunks, CHUNK, True)
    for scheduler in ("synchronous", "threads"):
        with dask.config.set(scheduler=scheduler):
            row[f"pca_fit_{scheduler}_s"] = timeit(
                lambda: bds.ESTIMATORS["pca"]().fit(Xd), 3)[1]
    results.append(row)


def shared(results, chunks=32, rows=32_000_000):
    import dask.array as da
    import distributed

    for workers, layout in ((1, "one"), (2, "split"), (2, "all on the first")):
        cluster, client = bds._cluster(workers, True, shared=True)
        with cluster, client:
            if layout == "all on the first":
                names = sorted(client.scheduler_info()["workers"])
                import cupy as cp

                fb = [client.submit(bds._block, i, rows // chunks, P, 0, True, pure=False,
                                    workers=[names[0]]) for i in range(chunks)]
                fx = [client.submit(lambda b: b[0], f, pure=False, workers=[names[0]])
                      for f in fb]
                fy = [client.submit(lambda b: b[1], f, pure=False, workers=[names[0]])
                      for f in fb]
                distributed.wait(fx + fy)
                c = rows // chunks
                Xd = da.concatenate([da.from_delayed(f, (c, P), dtype=np.float32,
                                                     meta=cp.empty((0, 0), cp.float32))
                                     for f in fx])
                yd = da.concatenate([da.from_delayed(f, (c,), dtype=np.float32,
                                                     meta=cp.empty(0, cp.float32))
                                     for f in fy])
                Xd, yd = client.persist([Xd, yd])
                distributed.wait([Xd, yd])
            else:
                Xd, yd, fb, _ = bds._data(client, chunks, rows // chunks, 0, True)
            times, _ = bds._fit_times(Xd, yd, ["pca", "ridgecv"], 5)
            results.append({"case": f"shared GPU: {workers} worker(s), {layout}", **times})
            del Xd, yd, fb


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=40)
    parser.add_argument("--only", choices=["stream", "shared", "in_process"])
    args = parser.parse_args()
    results = []
    doc = {"machine": machine(), "results": results}
    try:
        if args.only in (None, "stream"):
            stream(results, args.chunks)
        if args.only in (None, "in_process"):
            in_process(results, args.chunks)
        if args.only in (None, "shared"):
            shared(results)
    finally:
        print(json.dumps(doc, indent=1, default=str))


if __name__ == "__main__":
    main()
