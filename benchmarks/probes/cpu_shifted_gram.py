"""Probe: the CPU's per-chunk cost of PCA's Dask pass on data far from the origin, with
every worker thread busy at once, part by part.

    python benchmarks/probes/cpu_shifted_gram.py [--threads T] [--chunks-per-thread C]
        [--rows N] [--repeats R] [--blocks KIB ...]

T threads (the dask workers' threads: 4 workers × 2 threads is 8), each with its own C
chunks of N × 256 float64 made as ``bench_dask_peers.py`` makes them (scales 10 → 0.1,
offset 1: PCA's exact shifted route), and NumPy's BLAS on one thread each (dask's
nanny starts workers with ``OMP_NUM_THREADS=1``). Every variant runs on all threads at
once, a round starting at a barrier; per chunk, each thread's seconds. Variants: the
plain product ``XᵀX`` (BLAS syrk, the floor); the column mean alone (one read of the
chunk); the whole chunk function of the Dask pass (``linalg._chunk_stats``, what a task
runs); the shifted Gram alone at row blocks of each ``--blocks`` size
(``_common._shifted_gram``; the library's block is ``_SHIFT_BLOCK_BYTES``); and the
chunk function on the same chunks without the offset (the one-pass route). One JSON
document on stdout (a warm-up round, then the median of the repeats over every
thread's chunks).

Found on the H200 host's 16 cores (8 threads, 2 chunks each; two trial trees, results
in ``results/history/cpu_shifted_gram_*_h200_cpu.json``): the column mean alone takes
140 ms a chunk beside the product's 222 ms (the threads share the memory), and the
shifted Gram 428 ms in 64 MiB row blocks, 337–351 ms in 2–8 MiB blocks. The chunk
function with 2 MiB blocks took 517 ms with its mean taken first, 324 ms with its mean
taken with the shifted Gram (one read; the two on different lent machines). Neither change made the 8M × 256 fit of ``bench_dask_peers.py`` faster
(3.67 s before, 3.86–4.37 s after on one machine; ``results/history/
dask_peers_8m_cpu_pass_trials_h200_cpu.json``): that fit is not bound by its chunks'
arithmetic, and both were backed out. The probe's threads share one process, where
the page faults of freshly allocated blocks contend (the cluster's workers are four
processes), so its per-chunk times need not be a fit's. On the 2-core machine (one
worker × 2 threads, 1,000,000 × 256 in 8 chunks) the fit took 1.63 s and the chunk
function over the same chunks on that worker 1.54–1.92 s: there the fit is its chunks'
arithmetic.
"""

import argparse
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

from _harness import machine, time_stats  # noqa: E402
from bench_dask_peers import _make_block  # noqa: E402

P = 256


def _rounds(func, chunks, repeats):
    """Per-chunk seconds of ``func`` over every thread's chunks, all threads at once:
    a warm-up round, then ``repeats`` rounds."""
    threads = len(chunks)
    barrier = threading.Barrier(threads)
    times = [[] for _ in range(threads)]

    def work(t):
        for r in range(repeats + 1):
            barrier.wait()
            for X in chunks[t]:
                start = time.perf_counter()
                func(X)
                if r:
                    times[t].append(time.perf_counter() - start)

    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return time_stats([s for per_thread in times for s in per_thread])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--chunks-per-thread", type=int, default=2)
    parser.add_argument("--rows", type=int, default=125_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--blocks", type=int, nargs="+", default=[2048, 8192, 65536],
                        help="row-block sizes of the shifted Gram, KiB")
    args = parser.parse_args()

    from skgpu.backends import _common
    from skgpu.backends._cpu import CPUBackend
    from skgpu.dask import linalg

    ops = CPUBackend()
    T, C = args.threads, args.chunks_per_thread
    chunks = [[None] * C for _ in range(T)]

    def make(t):
        for c in range(C):
            chunks[t][c] = _make_block(t * C + c, args.rows, P, 0)

    makers = [threading.Thread(target=make, args=(t,)) for t in range(T)]
    for m in makers:
        m.start()
    for m in makers:
        m.join()
    means = {id(X): ops.column_mean(X) for per in chunks for X in per}
    library_block = _common._SHIFT_BLOCK_BYTES
    rows = []
    doc = {"machine": machine(),
           "setup": {"threads": T, "chunks_per_thread": C, "rows": args.rows, "features": P,
                     "dtype": "float64", "library_block_kib": library_block >> 10},
           "results": rows}

    def case(name, func):
        rows.append({"case": name, "per_chunk_s": _rounds(func, chunks, args.repeats)})

    try:
        with threadpool_limits(1):
            case("syrk XᵀX (the floor)", lambda X: X.T @ X)
            case("column mean alone (one read of the chunk)", ops.column_mean)
            case("chunk function (linalg._chunk_stats, PCA)",
                 lambda X: linalg._chunk_stats(ops, X, None, None, "gram", np.float64))
            for kib in args.blocks:
                _common._SHIFT_BLOCK_BYTES = kib << 10
                try:
                    case(f"shifted Gram alone, {kib} KiB row blocks",
                         lambda X: _common._shifted_gram(ops, X, means[id(X)], X.shape[0],
                                                         False, "probe"))
                finally:
                    _common._SHIFT_BLOCK_BYTES = library_block
            for per in chunks:
                for X in per:
                    X -= 1.0
            case("chunk function, the same chunks without the offset (one-pass route)",
                 lambda X: linalg._chunk_stats(ops, X, None, None, "gram", np.float64))
    finally:
        print(json.dumps(doc, indent=1, default=str))


if __name__ == "__main__":
    main()
