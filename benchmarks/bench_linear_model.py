"""RidgeCV (leave-one-out through QR): skgpu beside scikit-learn and CuPy peers.

Run on the GPU host:  python benchmarks/bench_linear_model.py --out results.json
On a CPU-only machine: python benchmarks/bench_linear_model.py --quick
Times are medians over repeats after a warm-up, with the device synchronised; alpha_ and
coef_ are checked against scikit-learn before any time is reported.
"""

import os

import numpy as np


import sklearn
from _harness import (
    GPU,
    machine,
    rel_diff,
    run_cases,
    standard_parser,
    timeit,
)
from sklearn import linear_model as skl

import skgpu
from skgpu.linear_model import RidgeCV

if GPU:
    import cupy as cp


def make_data(n, p, n_targets, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) * rng.uniform(0.5, 2.0, p) + rng.uniform(-3, 3, p)
    W = rng.standard_normal((p, n_targets))
    Y = X @ W + rng.standard_normal((n, n_targets)) * np.sqrt(p)
    return X, (Y[:, 0] if n_targets == 1 else Y)


def cupy_qr_route(X, y, alphas):
    """A hand-written CuPy version of the same QR route (the peer the issue names)."""
    mean = X.mean(axis=0)
    Xc = X - mean
    yc = y - y.mean()
    R = cp.linalg.qr(Xc, mode="r")
    _, s, Vt = cp.linalg.svd(R)
    M = Xc @ Vt.T
    MtY = M.T @ yc
    inv = 1.0 / (s[:, None] ** 2 + cp.asarray(alphas)[None, :])
    D = 1.0 - (M * M) @ inv - 1.0 / X.shape[0]
    E = (yc[:, None] - M @ (MtY[:, None] * inv)) / D
    best = int(cp.argmin((E * E).mean(axis=0)))
    return alphas[best], Vt.T @ (MtY * inv[:, best])


def bench_ridgecv(n, p, n_targets, n_alphas, repeats, results, sklearn_repeats=3):
    X, y = make_data(n, p, n_targets)
    alphas = np.logspace(-2, 4, n_alphas)
    per_target = n_targets > 1
    row = {"case": f"RidgeCV fit, X {n}x{p} float64, {n_alphas} alphas, "
                   f"{n_targets} target(s)" + (", alpha_per_target" if per_target else "")}
    params = dict(alphas=alphas, alpha_per_target=per_target)
    ref, t = timeit(lambda: skl.RidgeCV(**params).fit(X, y), sklearn_repeats)
    row["sklearn_cpu"] = t
    with skgpu.config_context(device="cpu"):
        ours, t = timeit(lambda: RidgeCV(**params).fit(X, y), sklearn_repeats)
    row["skgpu_cpu"] = t
    row["check_cpu_alpha_equal"] = bool(np.all(np.asarray(ours.alpha_) == ref.alpha_))
    row["check_cpu_coef_rel_diff"] = rel_diff(ours.coef_, ref.coef_)
    if GPU:
        Xd, yd = cp.asarray(X), cp.asarray(y)
        ours, t = timeit(lambda: RidgeCV(**params).fit(Xd, yd), repeats)
        assert ours.backend_ == "gpu"
        row["skgpu_gpu_cupy_input"] = t
        row["check_gpu_alpha_equal"] = bool(np.all(np.asarray(ours.alpha_) == ref.alpha_))
        row["check_gpu_coef_rel_diff"] = rel_diff(ours.coef_, ref.coef_)
        ours_n, t = timeit(lambda: RidgeCV(**params).fit(X, y), max(1, repeats // 2))
        assert ours_n.backend_ == "gpu"
        row["skgpu_gpu_numpy_input"] = t
        if not per_target:
            (alpha, coef), t = timeit(lambda: cupy_qr_route(Xd, yd, alphas), repeats)
            row["cupy_hand_written_qr_route"] = t
            row["check_cupy_peer_alpha_equal"] = bool(alpha == ref.alpha_)
        try:
            os.environ.setdefault("SCIPY_ARRAY_API", "1")
            with sklearn.config_context(array_api_dispatch=True):
                aa, t = timeit(lambda: skl.RidgeCV(**params).fit(Xd, yd), repeats)
            row["sklearn_array_api_cupy"] = t
            row["check_array_api_alpha_equal"] = bool(np.all(cp.asnumpy(
                cp.asarray(aa.alpha_)) == ref.alpha_))
        except Exception as exc:  # report, do not hide
            row["sklearn_array_api_cupy_error"] = f"{type(exc).__name__}: {exc}"
        del Xd, yd
        cp.get_default_memory_pool().free_all_blocks()
    results.append(row)


def main():
    args = standard_parser(__doc__.splitlines()[0]).parse_args()
    results = []
    if args.quick:
        cases = [lambda: bench_ridgecv(20_000, 64, 1, 20, 3, results),
                 lambda: bench_ridgecv(20_000, 64, 10, 20, 3, results)]
    else:
        cases = [lambda: bench_ridgecv(500_000, 256, 1, 20, 9, results),
                 lambda: bench_ridgecv(500_000, 256, 100, 20, 7, results)]
    run_cases(cases, {"machine": machine(), "results": results}, args.out)


if __name__ == "__main__":
    main()
