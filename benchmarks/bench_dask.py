"""Dask input: PCA and RidgeCV on row-chunked X, beside the in-memory fit and scikit-learn.

GPU host (dask-cuda installed):   python benchmarks/bench_dask.py --out results.json
                                  (one worker per visible GPU; --gpus 1 to restrict)
Any machine, CPU LocalCluster:    python benchmarks/bench_dask.py --quick

GPU cases: X 8,000,000 × 256 float32 in 64 chunks of CuPy arrays, on one dask-cuda worker
per GPU, against skgpu's in-memory fit on one GPU; with two GPUs, also 4x the rows (Dask
only) for how two workers scale as the work per pass grows. CPU case: a LocalCluster on smaller data
beside scikit-learn. Fitted attributes are compared with the in-memory fit before times are
reported.
"""

import collections
import os

import numpy as np


from _harness import GPU, machine, rel_diff, run_cases, standard_parser, timeit

import skgpu
from skgpu.decomposition import PCA
from skgpu.linear_model import RidgeCV

ALPHAS = np.logspace(-2, 4, 20)


def _time(func, repeats):
    """Median of ``repeats`` fits after one (a first fit makes the workers' plans and
    handles, as a first in-memory fit does)."""
    return timeit(func, repeats, warmup=1)


def _task_breakdown(func):
    """One more run of ``func`` under dask's task stream: its wall time and, per task
    function, the seconds the workers spent computing it and the count of tasks."""
    import time

    from distributed import get_task_stream

    with get_task_stream() as stream:
        start = time.perf_counter()
        func()
        wall = time.perf_counter() - start
    per = collections.defaultdict(lambda: [0.0, 0])
    for task in stream.data:
        key = task["key"][0] if isinstance(task["key"], tuple) else task["key"]
        name = str(key).split("-")[0]
        for piece in task["startstops"]:
            if piece["action"] == "compute":
                per[name][0] += piece["stop"] - piece["start"]
        per[name][1] += 1
    return {"wall_s": wall, "compute_s_and_tasks_by_function": dict(per)}


def _compare(row, ours, ref):
    signs = np.sign(np.sum(ours[0].components_ * ref[0].components_, axis=1))[:, None]
    row["check_pca_components_rel_diff"] = rel_diff(ours[0].components_ * signs,
                                                    ref[0].components_)
    row["check_ridgecv_alpha_equal"] = bool(ours[1].alpha_ == ref[1].alpha_)
    row["check_ridgecv_coef_rel_diff"] = rel_diff(ours[1].coef_, ref[1].coef_)


def fit_both(X, y):
    return (PCA(16, svd_solver="covariance_eigh").fit(X),
            RidgeCV(alphas=ALPHAS).fit(X, y))


def _gpu_block_X(block_id, rows, p, seed):
    """Row block ``block_id`` of X, drawn on the GPU that runs it (a worker's or ours)."""
    import cupy as cp

    X = cp.random.default_rng(seed + block_id).standard_normal((rows, p), dtype=cp.float32)
    # distinct column scales: well separated principal axes, so components compare
    X *= cp.asarray(np.geomspace(10, 1, p), dtype=cp.float32)
    return X


def _gpu_of_block(block):
    """PCI bus id of the GPU holding a CuPy block, and the worker's CUDA_VISIBLE_DEVICES:
    two workers on one GPU would take twice the compute of one (the weak scaling
    measured 1.6x: to be ruled out first)."""

    return {"pci_bus_id": block.device.pci_bus_id,
            "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES")}


def _gpu_block_y(Xb, block_id, seed):
    import cupy as cp

    noise = cp.random.default_rng(seed + 10_000 + block_id).standard_normal(
        Xb.shape[0], dtype=cp.float32)
    return Xb[:, :8].sum(axis=1, dtype=cp.float32) + noise


def _in_memory_gpu(chunk, n_chunks, p, seed):
    """The reference: the same blocks, made by the same generator, in memory on this GPU.
    The workers make their own blocks (as a user's data would already be there), so no
    8 GB travels between processes."""
    import cupy as cp

    X = cp.concatenate([_gpu_block_X(i, chunk, p, seed) for i in range(n_chunks)])
    y = cp.concatenate([_gpu_block_y(X[i * chunk:(i + 1) * chunk], i, seed)
                        for i in range(n_chunks)])
    ref, t = _time(lambda: fit_both(X, y), 7)
    parts = {"pca": _time(lambda: PCA(16, svd_solver="covariance_eigh").fit(X), 7)[1],
             "ridgecv": _time(lambda: RidgeCV(alphas=ALPHAS).fit(X, y), 7)[1]}
    return ref, t, parts


def gpu_case(n, p, n_chunks, n_gpus, results, seed=0, in_memory=True):
    """``in_memory=False``: the Dask fits only (a size for the scaling question)."""
    import cupy as cp
    import dask.array as da
    from dask_cuda import LocalCUDACluster
    import distributed
    from distributed import Client

    chunk = n // n_chunks
    row = {"case": f"PCA + RidgeCV, X {n}x{p} float32, {n_chunks} chunks, "
                   f"{n_gpus} dask-cuda worker(s)"}
    ref = None
    if in_memory:
        ref, t_mem, mem_parts = _in_memory_gpu(chunk, n_chunks, p, seed)
        cp.get_default_memory_pool().free_all_blocks()
        row.update({"in_memory_one_gpu": t_mem, "in_memory_one_gpu_pca": mem_parts["pca"],
                    "in_memory_one_gpu_ridgecv": mem_parts["ridgecv"]})
    # direct_to_workers: the client fetches results from the workers themselves, not
    # through the scheduler (a standard dask option for clients that can reach them)
    row["client_options"] = {"direct_to_workers": True}
    with LocalCUDACluster(n_workers=n_gpus, threads_per_worker=1) as cluster, \
            Client(cluster, direct_to_workers=True) as client:
        # Block i made on worker i mod n_gpus (and y_i beside it): an even spread, as
        # data loaded by the workers themselves would be.
        workers = sorted(client.scheduler_info()["workers"])
        fx = [client.submit(_gpu_block_X, i, chunk, p, seed, pure=False,
                            workers=[workers[i % len(workers)]]) for i in range(n_chunks)]
        fy = [client.submit(_gpu_block_y, f, i, seed, pure=False,
                            workers=[workers[i % len(workers)]]) for i, f in enumerate(fx)]
        distributed.wait(fx + fy)
        Xd = da.concatenate([da.from_delayed(f, (chunk, p), dtype=np.float32,
                                             meta=cp.empty((0, 0), cp.float32)) for f in fx])
        yd = da.concatenate([da.from_delayed(f, (chunk,), dtype=np.float32,
                                             meta=cp.empty(0, cp.float32)) for f in fy])
        # In the cluster's memory, as loaded data is (persisting aliases the blocks where
        # they are; nothing moves).
        Xd, yd = client.persist([Xd, yd])
        distributed.wait([Xd, yd])
        row["blocks_per_worker"] = sorted(collections.Counter(
            w for ws in client.who_has(distributed.futures_of(Xd)).values()
            for w in ws).values())
        row["gpu_of_first_block_per_worker"] = {
            w: client.submit(_gpu_of_block, fx[i], workers=[w], pure=False).result()
            for i, w in enumerate(workers[:n_chunks])}
        ours, t = _time(lambda: fit_both(Xd, yd), 7)
        row["dask"] = t
        row["dask_pca"] = _time(lambda: PCA(16, svd_solver="covariance_eigh").fit(Xd), 7)[1]
        row["dask_ridgecv"] = _time(lambda: RidgeCV(alphas=ALPHAS).fit(Xd, yd), 7)[1]
        row["dask_task_breakdown"] = _task_breakdown(lambda: fit_both(Xd, yd))
        if ref is not None:
            _compare(row, ours, ref)
    if ref is not None:
        row["ratio_in_memory_over_dask"] = t_mem["median_s"] / t["median_s"]
    results.append(row)
    return t["median_s"]


def cpu_case(n, p, n_chunks, workers, results):
    import dask.array as da
    from distributed import Client, LocalCluster
    from sklearn import decomposition as skd
    from sklearn import linear_model as skl

    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, p)).astype(np.float64) + rng.uniform(-3, 3, p)
    y = X[:, :8].sum(axis=1) + rng.standard_normal(n)
    # device='cpu' for skgpu in memory and on the workers: with 'auto' a GPU host would
    # send these NumPy chunks to its GPU backend.
    with skgpu.config_context(device="cpu"):
        ref, t_mem = _time(lambda: fit_both(X, y), 2)
    # (one long fit, no warm-up: scikit-learn has no plans or handles to make)
    _, t_sk = timeit(lambda: (skd.PCA(16, svd_solver="covariance_eigh").fit(X),
                              skl.RidgeCV(alphas=ALPHAS).fit(X, y)), 3)
    row = {"case": f"PCA + RidgeCV, X {n}x{p} float64, {n_chunks} chunks, LocalCluster of "
                   f"{workers} CPU workers", "in_memory_skgpu_cpu": t_mem,
           "sklearn_cpu": t_sk}
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client, \
            skgpu.config_context(device="cpu"):
        Xd = da.from_array(X, chunks=(n // n_chunks, p))
        yd = da.from_array(y, chunks=(n // n_chunks,))
        Xd, yd = client.persist([Xd, yd])
        ours, t = _time(lambda: fit_both(Xd, yd), 2)
        row["dask"] = t
        row["dask_task_breakdown"] = _task_breakdown(lambda: fit_both(Xd, yd))
        _compare(row, ours, ref)
    results.append(row)


def main():
    parser = standard_parser(__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=None)
    args = parser.parse_args()
    results = []
    doc = {"machine": machine(), "results": results}
    cases = []
    if args.quick or not GPU:
        cases.append(lambda: cpu_case(200_000, 64, 8, 2, results))
    else:
        import cupy as cp

        n_gpus = args.gpus or cp.cuda.runtime.getDeviceCount()
        times = {}
        cases.append(lambda: times.update(one=gpu_case(8_000_000, 256, 64, 1, results)))
        if n_gpus >= 2:
            cases.append(lambda: times.update(two=gpu_case(8_000_000, 256, 64, 2, results)))
            cases.append(lambda: results.append(
                {"case": "scaling: one-GPU dask time over two-GPU dask time",
                 "ratio": times["one"] / times["two"]}))
            # the same at 4x the rows (Dask only): how the ratio grows with the work per
            # pass, against the fixed latency of each fit's round trips
            cases.append(lambda: times.update(one4=gpu_case(32_000_000, 256, 256, 1, results,
                                                            in_memory=False)))
            cases.append(lambda: times.update(two4=gpu_case(32_000_000, 256, 256, 2, results,
                                                            in_memory=False)))
            cases.append(lambda: results.append(
                {"case": "scaling at 32,000,000 rows: one-GPU dask time over two-GPU",
                 "ratio": times["one4"] / times["two4"]}))
        else:
            results.append({"case": "two GPUs", "not_run": "only one GPU visible"})
        cases.append(lambda: cpu_case(2_000_000, 64, 16, 8, results))
    run_cases(cases, doc, args.out)


if __name__ == "__main__":
    main()
