"""Probe: what two processes sharing one GPU cost without dask, for RidgeCV's two passes
(the chunk functions a dask fit runs, called directly).

    python benchmarks/probes/shared_gpu_slicing.py [--rows N] [--chunks K] [--repeats R]

One process holding all K chunks (N rows × 256 float32, the scaling benchmark's
``_block``, made on the GPU), then two processes holding half each, run RidgeCV's Gram
pass and its LOO pass (``skgpu.dask.linalg``'s ``_chunk_stats`` and ``_loo_task``, as
the dask tasks call them). With two, each process's Gram part travels to both through
this parent (as dask sends each worker every group's part) before the LOO pass. Rounds
start together at a barrier; a round's time runs from the barrier to the last process's
end (CLOCK_MONOTONIC, one clock for all processes), with each pass's end beside it.

``bench_dask_scaling.py --only shared`` times the same work through dask; the two-process
time here over the one-process time is what the GPU's sharing between processes costs by
itself, and the dask ratio beyond it is the machinery's. One JSON document on stdout (a
warm-up, then the median of the repeats). Run it with the CUDA MPS daemon up to see the
sharing without the GPU's time slicing (``CUDA_MPS_PIPE_DIRECTORY`` and
``CUDA_MPS_LOG_DIRECTORY`` set for the daemon and this probe alike).
"""

import argparse
import json
import multiprocessing
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402

import bench_dask_scaling as bds  # noqa: E402
from _harness import machine  # noqa: E402


def _now():
    return time.clock_gettime(time.CLOCK_MONOTONIC)


def _synchronize(gpu):
    if gpu:
        import cupy as cp

        cp.cuda.Device().synchronize()


def _process(rank, n_proc, rows, n_chunks, rounds, gpu, barrier, to_parent, from_parent):
    """One process: its chunks (block i where i % n_proc == rank), then ``rounds`` rounds
    of both passes, each round's (start, Gram end, LOO end) sent to the parent."""
    from skgpu.dask import linalg, runner

    chunk = rows // n_chunks
    made = [bds._block(i, chunk, bds.P, 0, gpu) for i in range(rank, n_chunks, n_proc)]
    blocks = [X for X, _ in made]
    vectors = [[y for _, y in made], [None] * len(made)]  # y, and no sample_weight
    device = runner.configured_device()
    _synchronize(gpu)
    for _ in range(rounds):
        barrier.wait()
        start = _now()
        part = runner.group_task(linalg._chunk_stats, linalg._fold_chunks("gram"), blocks,
                                 vectors, linalg._GRAM_ARGS, device, linalg._GRAM_OPERATIONS)
        gram_end = _now()
        if n_proc == 1:
            parts = [part]
        else:
            to_parent.put((rank, part))
            parts = from_parent.get()
        sums, _ = linalg._loo_task(blocks, vectors, rank == 0, parts, bds.ALPHAS, True, device)
        _synchronize(gpu)
        to_parent.put((rank, (start, gram_end, _now())))


def run(n_proc, rows, n_chunks, repeats, gpu):
    """Rounds of ``n_proc`` processes: the warm-up's and each repeat's times."""
    ctx = multiprocessing.get_context("spawn")
    rounds = repeats + 1
    barrier = ctx.Barrier(n_proc)
    to_parent = ctx.Queue()
    from_parent = [ctx.Queue() for _ in range(n_proc)]
    procs = [ctx.Process(target=_process, args=(r, n_proc, rows, n_chunks, rounds, gpu,
                                                barrier, to_parent, from_parent[r]))
             for r in range(n_proc)]
    for p in procs:
        p.start()
    times = []
    for _ in range(rounds):
        if n_proc > 1:  # relay the Gram parts, in rank order
            parts = dict(to_parent.get() for _ in range(n_proc))
            for q in from_parent:
                q.put([parts[r] for r in range(n_proc)])
        ends = dict(to_parent.get() for _ in range(n_proc))
        start = min(e[0] for e in ends.values())
        times.append({"total_s": max(e[2] for e in ends.values()) - start,
                      "gram_s": max(e[1] for e in ends.values()) - start,
                      "per_process_s": [ends[r][2] - ends[r][0] for r in range(n_proc)]})
    for p in procs:
        p.join()
        if p.exitcode:
            raise RuntimeError(f"a probe process exited with {p.exitcode}")
    return times[1:]


def _summary(times, key):
    values = np.array([t[key] for t in times])
    return {"median_s": float(np.median(values)), "min_s": float(values.min()),
            "max_s": float(values.max()), "repeats": len(values)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=32_000_000)
    parser.add_argument("--chunks", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cpu", action="store_true",
                        help="NumPy chunks (a check of the probe itself, small --rows)")
    parser.add_argument("--label", default="", help="recorded with the results (e.g. 'MPS')")
    args = parser.parse_args()
    label = f" ({args.label})" if args.label else ""
    results, medians = [], {}
    for n_proc in (1, 2):
        times = run(n_proc, args.rows, args.chunks, args.repeats, not args.cpu)
        row = {"case": f"RidgeCV's two passes, {n_proc} process(es), no dask{label}",
               "processes": n_proc, "total_s": _summary(times, "total_s"),
               "gram_pass_end_s": _summary(times, "gram_s"), "rounds": times}
        medians[n_proc] = {k: row[k]["median_s"] for k in ("total_s", "gram_pass_end_s")}
        results.append(row)
    results.append({"case": f"two processes' time over one process's{label}",
                    **{k[:-2]: medians[2][k] / medians[1][k] for k in medians[1]}})
    doc = {"machine": machine(), "command": " ".join(sys.argv),
           "setup": {"rows": args.rows, "chunks": args.chunks, "label": args.label},
           "results": results}
    print(json.dumps(doc, indent=1, default=str))


if __name__ == "__main__":
    main()
