"""GPU-only RidgeCV timing of the skgpu source tree at sys.argv[1], for before/after
comparisons of a change (the targets: 500,000 x 256 float64, 20 alphas, CuPy
input, <= 20 ms; 100 targets <= 60 ms). Same method as benchmarks/_harness.timeit: one
warm-up fit, median of 9, device synchronised. Run it for each tree in one GPU session:

    git archive <base> skgpu | tar -x -C /tmp/before
    python benchmarks/probes/time_ridgecv_gpu.py /tmp/before; python benchmarks/probes/time_ridgecv_gpu.py .

(bench_linear_model.py times the same fits beside scikit-learn and CuPy peers.)"""
import json
import sys
import time
import statistics
sys.path.insert(0, sys.argv[1])
import numpy as np
import cupy as cp
import skgpu
from skgpu.linear_model import RidgeCV
print("skgpu from", skgpu.__file__)
out = {}


def timed(key, Xd, yd, params):
    RidgeCV(**params).fit(Xd, yd); cp.cuda.Device().synchronize()
    times = []
    for _ in range(9):
        cp.cuda.Device().synchronize(); s = time.perf_counter()
        m = RidgeCV(**params).fit(Xd, yd); cp.cuda.Device().synchronize()
        times.append(time.perf_counter() - s)
    out[key] = dict(median_ms=1e3 * statistics.median(times), min_ms=1e3 * min(times),
                    max_ms=1e3 * max(times), alpha=np.atleast_1d(m.alpha_).tolist()[:3])


for t in (1, 100):
    rng = np.random.default_rng(0)
    n, p = 500_000, 256
    X = rng.standard_normal((n, p)) * rng.uniform(0.5, 2.0, p) + rng.uniform(-3, 3, p)
    Y = X @ rng.standard_normal((p, t)) + rng.standard_normal((n, t)) * np.sqrt(p)
    Xd, yd = cp.asarray(X), cp.asarray(Y[:, 0] if t == 1 else Y)
    timed(t, Xd, yd, dict(alphas=np.logspace(-2, 4, 20), alpha_per_target=t > 1))
    del Xd, yd; cp.get_default_memory_pool().free_all_blocks()
# The kind of problem at the speed target's size: singular values 1 to 1e-10,
# y = X w + 1e-6 noise, alphas from 1e-13 (the refined leave-one-out, where the tree
# has it; its cost is this row against the same tree's t=1 row).
rng = cp.random.default_rng(0)
n, p = 500_000, 256
U = cp.linalg.qr(rng.standard_normal((n, p)))[0]
V = cp.linalg.qr(rng.standard_normal((p, p)))[0]
Xd = (U * cp.logspace(0, -10, p)) @ V.T
del U
yd = Xd @ rng.standard_normal(p) + 1e-6 * rng.standard_normal(n)
timed("t=1 cond 1e10", Xd, yd, dict(alphas=np.logspace(-13, 4, 20)))
print(json.dumps(out))
