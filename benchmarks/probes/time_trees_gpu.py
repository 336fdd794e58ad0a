"""GPU timings of the skgpu source tree at sys.argv[1], for before/after comparisons of a
change that should not move any figure (a module layout change). Every row: one warm-up
call, then 7 timed, device synchronised; median, min and max in ms. Run it for each tree
in one GPU session, alternating, and compare the medians:

    git archive <base> skgpu | tar -x -C /tmp/before
    python benchmarks/probes/time_trees_gpu.py /tmp/before; python benchmarks/probes/time_trees_gpu.py .

The rows cover every GPU module: cuBLASLt (transform, predict), cuSOLVER (covariance
eigh, Cholesky), the tall-skinny QR (RidgeCV), host-to-device staging (PCA on NumPy X),
cuSPARSE (sparse TruncatedSVD) and cuDSS (the tapered GP's likelihood)."""
import json
import statistics
import sys
import time

sys.path.insert(0, sys.argv[1])
import cupy as cp  # noqa: E402
import cupyx.scipy.sparse as csp  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.gaussian_process.kernels import RBF, Matern, WhiteKernel  # noqa: E402
from sklearn.gaussian_process.kernels import ConstantKernel as C  # noqa: E402

import skgpu  # noqa: E402
from skgpu.decomposition import PCA, TruncatedSVD  # noqa: E402
from skgpu.gaussian_process import GaussianProcessRegressor  # noqa: E402
from skgpu.gaussian_process.kernels import Tapered  # noqa: E402
from skgpu.linear_model import Ridge, RidgeCV  # noqa: E402

REPEATS = 7


def timed(func):
    func()
    cp.cuda.Device().synchronize()
    times = []
    for _ in range(REPEATS):
        cp.cuda.Device().synchronize()
        start = time.perf_counter()
        func()
        cp.cuda.Device().synchronize()
        times.append(1e3 * (time.perf_counter() - start))
    return dict(median_ms=statistics.median(times), min_ms=min(times), max_ms=max(times))


def main():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((1_000_000, 256), dtype=np.float32)
    y = X[:, :8].sum(axis=1) + rng.standard_normal(1_000_000, dtype=np.float32)
    Xd, yd = cp.asarray(X), cp.asarray(y)
    X64d, y64d = Xd[:500_000].astype(cp.float64), yd[:500_000].astype(cp.float64)
    S = csp.random(200_000, 20_000, density=0.001, format="csr", dtype=cp.float32,
                   random_state=0)
    Xg = rng.uniform(0, 1, (4_000, 4))
    yg = np.sin(6 * Xg[:, 0]) + 0.1 * rng.standard_normal(4_000)
    Xs = rng.uniform(0, 1, (100_000, 2))
    ys = np.sin(6 * Xs[:, 0]) * np.cos(4 * Xs[:, 1]) + 0.05 * rng.standard_normal(100_000)
    X8 = rng.uniform(-1, 1, (10_000, 8))
    y8 = np.sin(3 * X8 @ np.linspace(1, 0.2, 8)) + 0.1 * rng.standard_normal(10_000)
    k8 = C(1.0) * RBF(np.ones(8)) + WhiteKernel(0.1)
    gp8 = GaussianProcessRegressor(k8, optimizer=None).fit(X8, y8)
    tapered = GaussianProcessRegressor(Tapered(Matern(0.01, nu=1.5), taper_range=0.01),
                                       alpha=1e-2, optimizer=None,
                                       cholesky="sparse").fit(Xs, ys)
    pca = PCA(16).fit(Xd)
    ridge = Ridge().fit(Xd, yd)
    rows = {
        "PCA(16).fit, CuPy 1M x 256 f32": lambda: PCA(16).fit(Xd),
        "PCA(16).fit, NumPy 1M x 256 f32 (streamed)": lambda: PCA(16).fit(X),
        "PCA.transform, CuPy 1M x 256 f32": lambda: pca.transform(Xd),
        "TruncatedSVD(16).fit, CuPy CSR 200k x 20k": lambda: TruncatedSVD(
            16, random_state=0).fit(S),
        "Ridge.fit, CuPy 1M x 256 f32": lambda: Ridge().fit(Xd, yd),
        "Ridge.predict, CuPy 1M x 256 f32": lambda: ridge.predict(Xd),
        "RidgeCV.fit, CuPy 500k x 256 f64, 13 alphas": lambda: RidgeCV(
            alphas=np.logspace(-3, 3, 13)).fit(X64d, y64d),
        "GP dense fit n=4000 (optimizer=None)": lambda: GaussianProcessRegressor(
            RBF(0.3), alpha=1e-2, optimizer=None).fit(Xg, yg),
        "GP dense LML + gradient n=10000 d=8 (run_all's case)":
            lambda: gp8.log_marginal_likelihood(k8.theta + 0.3, eval_gradient=True),
        "GP tapered LML + gradient n=100k (cuDSS)": lambda: tapered.log_marginal_likelihood(
            tapered.kernel_.theta, eval_gradient=True),
    }
    out = {"skgpu": skgpu.__file__, "repeats": REPEATS, "rows": {}}
    for name, func in rows.items():
        out["rows"][name] = timed(func)
        print(f"{name:48s} {out['rows'][name]['median_ms']:9.2f} ms", file=sys.stderr)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
