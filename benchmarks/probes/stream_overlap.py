"""Probe: a streamed chunk's cost on one H200, part by part, in one process (no dask),
and what making the next chunk on a second CUDA stream while the current one is read
saves.

    python benchmarks/probes/stream_overlap.py [--chunks N] [--source normal|hash]

N chunks of 1,000,000 × 256 float32 (the benchmark's ``_x_of``) with their y
(``_y_of``). Each of PCA's pass and RidgeCV's two passes (the runner's chunk functions,
through ``runner._over_chunks`` as a dask task runs them) is timed over: the chunks
made beforehand and kept (persisted); made one after the other as they are read
(streamed); made on a second stream one chunk ahead (:func:`made_ahead`). Beside
them: making alone, and the GPU time of each part of one chunk (CUDA events). Then
the whole fits on the lazily made dask arrays under dask's synchronous scheduler (one
worker thread: two runs of chunks), with and without making ahead; RidgeCV's whole fit with each pass timed
(``--trace-only``: that alone). One JSON document on stdout (a warm-up, then the median
of 5).

Found on the H200 (24 chunks; ``results/dask_stream_overlap_{normal,hash}_h200.json``,
and the first run, with the prototype inside the runner, in ``results/history/``):

- Making ahead saves little in whole fits, and not the same from one lent machine to the
  next: -3 % to +3 % in the first run; in the second +1 % (hash source), -2 % (RidgeCV,
  normal draws) and -12 % (PCA, normal draws: 151 -> 132 ms; its pass alone still 0.63 x
  the persisted pass). The normal draws and the Gram products each fill most of the
  GPU. The runner makes chunks in turn.
- RidgeCV's passes inside its fit took 2.3 ms per chunk more than the same passes
  here: the benchmark's y was ``X.map_blocks(f, drop_axis=1)``, and dask hands ``f`` a
  copy of each X chunk (it concatenates the dropped axis's blocks, one block too). The
  benchmark now makes y as a column and takes its view.
"""

import argparse
import functools
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402

import bench_dask_scaling as bds  # noqa: E402
from _harness import machine, timeit  # noqa: E402

CHUNK = 1_000_000
P = bds.P


def made_ahead(chunks):
    """``chunks`` (an iterator of (block, vector blocks), each made when reached) with
    the next chunk made on a second CUDA stream while the caller reads the current one
    on its own stream, where the first chunk is a CuPy array (a prototype: it gained
    nothing measurable, see the module's description).

    The order is kept by CUDA events: the second stream starts after what the current
    stream has queued, each chunk is read only once made, and a chunk's memory (returned
    to the second stream's pool when it is let go) is written again only once read.
    """
    it = iter(chunks)
    item = next(it, None)
    if item is None or not type(item[0]).__module__.startswith("cupy"):
        if item is not None:
            yield item
            yield from it
        return
    import cupy as cp

    main = cp.cuda.get_current_stream()
    side = _side_stream()
    side.wait_event(main.record())
    ready = None
    try:
        while item is not None:
            if ready is not None:
                main.wait_event(ready)
            with side:
                following = next(it, None)
                following_ready = side.record()
            yield item
            side.wait_event(main.record())  # before the chunk read is let go
            item, ready = following, following_ready
            del following
    finally:
        main.wait_event(side.record())


@functools.lru_cache(maxsize=None)
def _side_stream():
    import cupy as cp

    return cp.cuda.Stream(non_blocking=True)


def _made_ahead_task(recipe, external, func, reduce, args, device, operations):
    """The runner's task over a run of recipe chunks, each made ahead."""
    from skgpu.dask import runner

    return runner._over_chunks(func, reduce, made_ahead(recipe.chunks(external)), args,
                               device, operations)


def _made(n, source):
    for i in range(n):
        X, y = bds._block(i, CHUNK, P, 0, True, source)
        yield X, [y, None]


def _passes(chunks):
    """(name, func, reduce, args, operations, reads no y) of PCA's pass and RidgeCV's
    two, the LOO pass's arguments from the Gram pass over ``chunks`` (a list)."""
    from skgpu.dask import linalg, runner

    gram = ("gram", "matmul", "qr_r")
    part = runner._over_chunks(linalg._chunk_stats, linalg._fold_chunks("gram"), iter(chunks),
                               ("gram", np.float64), "auto", gram)
    loo = linalg._gram_to_loo_args([part], bds.ALPHAS, True, "auto")
    return [("pca", linalg._chunk_stats, linalg._fold_chunks("gram"), ("gram", np.float32),
             gram, True),
            ("ridgecv_gram", linalg._chunk_stats, linalg._fold_chunks("gram"),
             ("gram", np.float64), gram, False),
            ("ridgecv_loo", linalg._loo_block, runner.sum_pairs, loo, ("matmul",), False)]


def _parts_of_one_chunk(passes, source, repeats=5):
    """GPU milliseconds of each part of one chunk (CUDA events, the median of
    ``repeats``)."""
    import cupy as cp

    from skgpu.dask import runner

    ev = [cp.cuda.Event() for _ in range(6)]
    out = {}
    for r in range(repeats + 1):
        ev[0].record()
        X = bds._x_of(r, CHUNK, P, 0, True, source)
        ev[1].record()
        y = bds._y_of(X, r, 0, source)
        ev[2].record()
        for j, (_name, func, reduce, args, operations, no_y) in enumerate(passes):
            vecs = [None, None] if no_y else [y, None]
            runner._over_chunks(func, reduce, iter([(X, vecs)]), args, "auto", operations)
            ev[3 + j].record()
        ev[5].synchronize()
        if r:
            for k, name in enumerate(["make_x", "make_y"] + [p[0] for p in passes]):
                out.setdefault(name, []).append(cp.cuda.get_elapsed_time(ev[k], ev[k + 1]))
    return {f"{k}_ms": float(np.median(v)) for k, v in out.items()}


def _traced_fit(Xd, yd, repeats=3):
    """RidgeCV's whole fit on the lazy arrays with each of its passes (``runner.run``)
    timed (the device synchronised around it), and what is left between them."""
    import time

    import cupy as cp
    import dask

    from skgpu.dask import runner

    run = runner.run
    passes = []

    def timed(func, *args, **kwargs):
        cp.cuda.Device().synchronize()
        start = time.perf_counter()
        out = run(func, *args, **kwargs)
        cp.cuda.Device().synchronize()
        passes.append((func.__name__, time.perf_counter() - start))
        return out

    rows = []
    runner.run = timed
    try:
        with dask.config.set(scheduler="synchronous", num_workers=1):
            for r in range(repeats + 1):
                passes.clear()
                cp.cuda.Device().synchronize()
                start = time.perf_counter()
                bds.ESTIMATORS["ridgecv"]().fit(Xd, yd)
                cp.cuda.Device().synchronize()
                total = time.perf_counter() - start
                if r:
                    rows.append({"total_s": total, "passes": list(passes),
                                 "outside_passes_s": total - sum(t for _, t in passes)})
    finally:
        runner.run = run
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=24)
    parser.add_argument("--source", default="normal", choices=["normal", "hash"])
    parser.add_argument("--trace-only", action="store_true",
                        help="only RidgeCV's whole fit, each pass timed")
    args = parser.parse_args()
    import cupy as cp
    import dask

    from skgpu.dask import runner

    n, source = args.chunks, args.source
    results = []
    doc = {"machine": machine(), "setup": {"chunks": n, "rows_per_chunk": CHUNK,
                                           "features": P, "source": source},
           "results": results}
    try:
        if args.trace_only:
            Xd, yd = bds._lazy_data(n, CHUNK, True, source=source)
            results.append({"case": "RidgeCV's whole fit, each pass timed",
                            "fits": _traced_fit(Xd, yd)})
            return
        kept = list(_made(n, source))
        cp.cuda.Device().synchronize()
        passes = _passes(kept)
        results.append({"case": "GPU time of each part of one chunk",
                        **_parts_of_one_chunk(passes, source)})

        def make_only(ahead):
            chunks = _made(n, source)
            for X, vecs in (made_ahead(chunks) if ahead else chunks):
                del X, vecs

        row = {"case": f"{n} chunks, each pass's seconds",
               "make_only_s": timeit(lambda: make_only(False), 5)[1],
               "make_only_ahead_s": timeit(lambda: make_only(True), 5)[1]}
        for name, func, reduce, a, operations, no_y in passes:
            def over(chunks):
                if no_y:
                    chunks = ((X, [None, None]) for X, _ in chunks)
                return runner._over_chunks(func, reduce, chunks, a, "auto", operations)
            row[f"{name}_persisted_s"] = timeit(lambda: over(iter(kept)), 5)[1]
            row[f"{name}_streamed_s"] = timeit(lambda: over(_made(n, source)), 5)[1]
            row[f"{name}_made_ahead_s"] = timeit(
                lambda: over(made_ahead(_made(n, source))), 5)[1]
        results.append(row)
        kept[:] = []
        Xd, yd = bds._lazy_data(n, CHUNK, True, source=source)
        row = {"case": "whole fits, lazy dask arrays, synchronous scheduler"}
        for ahead in (False, True):
            saved = runner._recipe_task
            if ahead:
                runner._recipe_task = _made_ahead_task
            try:
                with dask.config.set(scheduler="synchronous", num_workers=1):
                    times, _ = bds._fit_times(Xd, yd, ["pca", "ridgecv"], 5)
            finally:
                runner._recipe_task = saved
            row.update({f"{k}{'_made_ahead' if ahead else ''}": v for k, v in times.items()})
        results.append(row)
        results.append({"case": "RidgeCV's whole fit, each pass timed",
                        "fits": _traced_fit(Xd, yd)})
    finally:
        print(json.dumps(doc, indent=1, default=str))


if __name__ == "__main__":
    main()
