"""Probe: the sparse path's predict std at n = 1,000,000 (the large construction)
against the width of each cuDSS solve (right-hand sides a block).

    python -m benchmarks.probes.sparse_std_width N M WIDTH [WIDTH ...]

Fits with optimizer=None on the GPU (one run, timed), then for each width one warm-up
predict of WIDTH points and one timed predict(X[:M], return_std=True); writes JSON to
stdout. Needs a GPU with cuDSS."""
import json
import sys

import cupy as cp

from benchmarks._harness import sparse_gp_problem
from benchmarks._harness import synchronized as timed

import skgpu
from skgpu.gaussian_process import GaussianProcessRegressor, _dense


def main():
    n, m = int(sys.argv[1]), int(sys.argv[2])
    X, y, kernel = sparse_gp_problem(n)
    out = {}
    with skgpu.config_context(device="gpu"):
        gpr, out["fit_optimizer_none_s"] = timed(
            lambda: GaussianProcessRegressor(kernel, optimizer=None).fit(X, y))
        for w in [int(a) for a in sys.argv[3:]]:
            _dense._PREDICT_BLOCK_BYTES = 8 * n * w
            timed(lambda: gpr.predict(X[:w], return_std=True))
            _, dt = timed(lambda: gpr.predict(X[:m], return_std=True))
            out[f"width_{w}"] = dict(s=dt, per_100k_s=dt * 1e5 / m,
                                     pool_gb=cp.get_default_memory_pool().total_bytes() / 1e9)
            print(w, out[f"width_{w}"], flush=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
