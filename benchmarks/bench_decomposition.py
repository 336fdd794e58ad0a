"""PCA and TruncatedSVD: skgpu (GPU and CPU backends) beside scikit-learn and CuPy peers.

Run on the GPU host:  python benchmarks/bench_decomposition.py --out results.json
On a CPU-only machine: python benchmarks/bench_decomposition.py --quick
Times are medians over repeats after a warm-up, with the device synchronised; results are
checked against scikit-learn before any time is reported.
"""

import os

import numpy as np


import sklearn
from _harness import (
    GPU,
    PeakGPUMemory,
    interleaved,
    machine,
    rel_diff,
    run_cases,
    standard_parser,
    sync,
    timeit,
)
from sklearn import decomposition as skd

import skgpu
from skgpu.decomposition import PCA, TruncatedSVD

if GPU:
    import cupy as cp
    import cupyx.scipy.sparse as csp


def components_diff(a, b):
    signs = np.sign(np.sum(a * b, axis=1))[:, None]
    return rel_diff(a * signs, b)


def make_dense(n, p, seed=0):
    rng = np.random.default_rng(seed)
    k = 32
    X = rng.standard_normal((n, k), dtype=np.float32) @ (
        rng.standard_normal((k, p), dtype=np.float32)
        * np.geomspace(10, 1, k, dtype=np.float32)[:, None])
    X += rng.standard_normal((n, p), dtype=np.float32)
    X += rng.uniform(-3, 3, size=p).astype(np.float32)
    return X


def bench_pca(n, p, k, repeats, results):
    X = make_dense(n, p)
    row = {"case": f"PCA fit, X {n}x{p} float32, n_components={k}"}
    ref, t = timeit(lambda: skd.PCA(k, svd_solver="covariance_eigh").fit(X), max(3, repeats // 3))
    row["sklearn_cpu_covariance_eigh"] = t
    ref_r, t = timeit(lambda: skd.PCA(k, svd_solver="randomized", random_state=0).fit(X),
                      max(3, repeats // 3))
    row["sklearn_cpu_randomized"] = t
    with skgpu.config_context(device="cpu"):
        ours, t = timeit(lambda: PCA(k, svd_solver="covariance_eigh").fit(X), max(3, repeats // 3))
    row["skgpu_cpu_covariance_eigh"] = t
    row["check_cpu_components_rel_diff"] = components_diff(ours.components_, ref.components_)
    if GPU:
        Xd = cp.asarray(X)
        ours, t = timeit(lambda: PCA(k, svd_solver="covariance_eigh").fit(Xd), repeats)
        assert ours.backend_ == "gpu"
        row["skgpu_gpu_covariance_eigh_cupy_input"] = t
        row["check_gpu_components_rel_diff"] = components_diff(ours.components_, ref.components_)
        with PeakGPUMemory() as mem:
            PCA(k, svd_solver="covariance_eigh").fit(Xd)
            sync()
        row["skgpu_gpu_fit_peak_extra_bytes"] = mem.bytes
        row["bytes_X"] = X.nbytes
        ours_r, t = timeit(lambda: PCA(k, svd_solver="randomized", random_state=0).fit(Xd), repeats)
        row["skgpu_gpu_randomized_cupy_input"] = t
        row["check_gpu_randomized_rel_diff"] = components_diff(ours_r.components_,
                                                               ref_r.components_)
        _, t = timeit(lambda: cp.asarray(X), repeats)
        row["copy_numpy_X_to_gpu"] = t
        ours_n, t = timeit(lambda: PCA(k, svd_solver="covariance_eigh").fit(X), repeats)
        assert ours_n.backend_ == "gpu"
        row["skgpu_gpu_covariance_eigh_numpy_input"] = t
        # transform of the CuPy X: skgpu (one cuBLASLt matmul with a BIAS epilog, then the
        # NaN check through its output) vs CuPy centre-then-GEMM; beside them, timed in
        # the same seconds, two floors that have no bias and no check: CuPy's plain GEMM
        # and a device copy of X (both bound by memory bandwidth, as the transform is)
        W = cp.asarray(ours.components_.T)
        mu = cp.asarray(ours.mean_)
        copy = cp.empty_like(Xd)
        Z = ours.transform(Xd)
        t = interleaved({"ours": lambda: ours.transform(Xd),
                         "peer": lambda: (Xd - mu) @ W,
                         "gemm": lambda: Xd @ W,
                         "copy": lambda: cp.copyto(copy, Xd)},
                        rounds=5, calls=40 if repeats > 3 else 4)
        del copy
        row["skgpu_gpu_transform_cupy"] = t["ours"]
        row["cupy_center_then_gemm_transform"] = t["peer"]
        row["reference_cupy_gemm_no_bias_no_check"] = t["gemm"]
        row["reference_device_copy_of_X"] = t["copy"]
        row["check_transform_rel_diff"] = rel_diff(
            cp.asnumpy(Z[:2000]), (X[:2000] - ours.mean_) @ ours.components_.T)
        try:
            os.environ.setdefault("SCIPY_ARRAY_API", "1")
            with sklearn.config_context(array_api_dispatch=True):
                aa, t = timeit(lambda: skd.PCA(k, svd_solver="covariance_eigh").fit(Xd), repeats)
                row["sklearn_array_api_cupy_covariance_eigh"] = t
                aa, t = timeit(lambda: skd.PCA(k, svd_solver="randomized",
                                               power_iteration_normalizer="QR",
                                               random_state=0).fit(Xd), repeats)
                row["sklearn_array_api_cupy_randomized"] = t
        except Exception as exc:  # report, do not hide
            row["sklearn_array_api_cupy_error"] = f"{type(exc).__name__}: {exc}"
        del Xd
        cp.get_default_memory_pool().free_all_blocks()
    results.append(row)


def bench_tsvd(n, p, nnz, k, repeats, results):
    import scipy.sparse as sp

    rng = np.random.default_rng(1)
    rows = rng.integers(0, n, nnz)
    cols = rng.integers(0, p, nnz)
    vals = rng.uniform(0.1, 1.0, nnz).astype(np.float32)
    X = sp.csr_matrix((vals, (rows, cols)), shape=(n, p), dtype=np.float32)
    row = {"case": f"TruncatedSVD, CSR {n}x{p} nnz={X.nnz} float32, k={k}, n_iter=5"}
    ref, t = timeit(lambda: skd.TruncatedSVD(k, n_iter=5, random_state=0).fit(X), 3)
    row["sklearn_cpu_randomized"] = t
    if GPU:
        Xd = csp.csr_matrix(X)
        ours, t = timeit(lambda: TruncatedSVD(k, n_iter=5, random_state=0).fit(Xd), repeats)
        assert ours.backend_ == "gpu"
        row["skgpu_gpu_randomized_cupy_csr"] = t
        row["check_singular_values_rel_diff"] = rel_diff(ours.singular_values_,
                                                         ref.singular_values_)
    results.append(row)


def main():
    args = standard_parser(__doc__.splitlines()[0]).parse_args()
    results = []
    if args.quick:
        cases = [lambda: bench_pca(20_000, 64, 8, 3, results),
                 lambda: bench_tsvd(20_000, 5_000, 100_000, 16, 3, results)]
    else:
        cases = [lambda: bench_pca(1_000_000, 256, 16, 7, results),
                 lambda: bench_tsvd(500_000, 100_000, 10_000_000, 64, 5, results)]
    run_cases(cases, {"machine": machine(), "results": results}, args.out)


if __name__ == "__main__":
    main()
