"""Where the time of the supernodal likelihood + gradient, fit and variance goes (GPU).

Run on the GPU host: python benchmarks/probes/supernodal_lml_breakdown.py 1000000 out.json
"""
import sys, time, json, collections
sys.path.insert(0, "benchmarks")
import numpy as np
import cupy as cp
from _harness import sparse_gp_problem
import skgpu
from skgpu.backends import get_backend, _supernodal
from skgpu.backends._supernodal import SupernodalFactor, SupernodalSymbolic
from skgpu.gaussian_process import _sparse, GaussianProcessRegressor

n = int(sys.argv[1])
acc = collections.defaultdict(float)
cnt = collections.Counter()
depth = [0]

def wrap(owner, name, label):
    real = getattr(owner, name)
    def f(*a, **k):
        if depth[0]:
            return real(*a, **k)
        cp.cuda.Device().synchronize(); t = time.perf_counter()
        depth[0] += 1
        try:
            return real(*a, **k)
        finally:
            depth[0] -= 1
            cp.cuda.Device().synchronize(); acc[label] += time.perf_counter() - t; cnt[label] += 1
    if isinstance(owner, type):
        setattr(owner, name, f)
    else:
        setattr(owner, name, f)

wrap(_sparse, "pair_values", "pair_values")
wrap(_sparse, "_Pattern", "pattern")
wrap(SupernodalSymbolic, "from_points", "analysis")
wrap(SupernodalFactor, "refactor", "refactor")
wrap(SupernodalFactor, "solve", "solve")
wrap(SupernodalFactor, "selected_inverse", "selected_inverse")
wrap(SupernodalFactor, "_level_batches", "level_batches")
wrap(SupernodalFactor, "quadratic_forms", "quadratic_forms")
wrap(_sparse.SparseLogMarginalLikelihood, "_quadratic", "gradient quadratic")
wrap(_sparse.SparseLogMarginalLikelihood, "kernel_matrix", "kernel_matrix")

X, y, kernel = sparse_gp_problem(n)
ops = get_backend("gpu")
out = {}
def phase(name, fn, reps=1):
    for r in range(reps):
        acc.clear(); cnt.clear()
        cp.cuda.Device().synchronize(); t = time.perf_counter()
        fn()
        cp.cuda.Device().synchronize()
        out[f"{name} #{r}"] = {"total_s": time.perf_counter() - t, **{k: round(v, 4) for k, v in acc.items()}}
        print(name, r, json.dumps(out[f"{name} #{r}"]), flush=True)

like = _sparse.SparseLogMarginalLikelihood(ops, X, y, 1e-10, factorization="supernodal")
phase("supernodal LML+grad", lambda: like(kernel, True), 3)
like = None
cp.get_default_memory_pool().free_all_blocks()
_sparse.SPARSE_FACTORIZATION["gpu"] = "supernodal"
with skgpu.config_context(device="gpu"):
    gp = GaussianProcessRegressor(kernel, optimizer=None, alpha=1e-10, cholesky="sparse")
    phase("fit supernodal", lambda: gp.fit(X, y))
    Xt = np.random.default_rng(1).uniform(0, 1, (100_000, 2))
    phase("std 100k after supernodal fit", lambda: gp.predict(Xt, return_std=True), 2)
json.dump(out, open(sys.argv[2], "w"), indent=1)
