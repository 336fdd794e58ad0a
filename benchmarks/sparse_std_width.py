"""Issue 24 probe: the sparse path's predict std at n = 1,000,000 (the issue's construction)
against the width of each cuDSS solve (right-hand sides a block).

    python benchmarks/sparse_std_width.py N M WIDTH [WIDTH ...]

Fits with optimizer=None on the GPU (one run, timed), then for each width one warm-up
predict of WIDTH points and one timed predict(X[:M], return_std=True); writes JSON to
stdout. Needs a GPU with cuDSS."""
import json
import sys
import time

import cupy as cp
import numpy as np
from sklearn.gaussian_process.kernels import ConstantKernel as C
from sklearn.gaussian_process.kernels import Matern, WhiteKernel

import skgpu
from skgpu.gaussian_process import GaussianProcessRegressor, _gpr
from skgpu.gaussian_process.kernels import Tapered


def timed(func):
    cp.cuda.Device().synchronize()
    start = time.perf_counter()
    out = func()
    cp.cuda.Device().synchronize()
    return out, time.perf_counter() - start


def main():
    n, m = int(sys.argv[1]), int(sys.argv[2])
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, (n, 2))
    y = np.sin(6 * X[:, 0]) * np.cos(4 * X[:, 1]) + 0.05 * rng.standard_normal(n)
    r = np.sqrt(30 / (np.pi * n))
    kernel = C(1.0) * Tapered(Matern(r, nu=1.5), taper_range=r) + WhiteKernel(0.01)
    out = {}
    with skgpu.config_context(device="gpu"):
        gpr, out["fit_optimizer_none_s"] = timed(
            lambda: GaussianProcessRegressor(kernel, optimizer=None).fit(X, y))
        for w in [int(a) for a in sys.argv[3:]]:
            _gpr._PREDICT_BLOCK_BYTES = 8 * n * w
            timed(lambda: gpr.predict(X[:w], return_std=True))
            _, dt = timed(lambda: gpr.predict(X[:m], return_std=True))
            out[f"width_{w}"] = dict(s=dt, per_100k_s=dt * 1e5 / m,
                                     pool_gb=cp.get_default_memory_pool().total_bytes() / 1e9)
            print(w, out[f"width_{w}"], flush=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
