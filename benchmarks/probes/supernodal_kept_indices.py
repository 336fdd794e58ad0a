"""Probe (answered; leaves the tree): the supernodal analysis on the device vs the host, and the
exact LML + gradient at n = 1M with the index cache on and off."""
import sys
import time
import json
import numpy as np
sys.path.insert(0, "benchmarks")
from _harness import sparse_gp_problem
try:
    import cupy as cp
except ImportError:
    cp = None
from skgpu.backends import get_backend, _supernodal
from skgpu.backends._supernodal import SupernodalSymbolic
from skgpu.gaussian_process._sparse import SparseLogMarginalLikelihood, support_radius

n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
X, y, kernel = sparse_gp_problem(n)
ops = get_backend("gpu" if cp else "cpu")
out = {"n": n}

def sync():
    if cp: cp.cuda.Device().synchronize()

def sync_time(f):
    sync(); t = time.perf_counter(); r = f()
    sync(); return r, time.perf_counter() - t

lml = SparseLogMarginalLikelihood(ops, X, y, 1e-10, factorization="supernodal")
lml._ensure_pattern(support_radius(kernel))
p = lml.pattern
for rep in range(2):
    _, t_dev = sync_time(lambda: SupernodalSymbolic.from_points(lml.X_host, p.indptr, p.indices, p.radius))
    _, t_host = sync_time(lambda: SupernodalSymbolic.from_points(lml.X_host, ops.to_host(p.indptr), ops.to_host(p.indices), p.radius))
    out[f"analysis_device_s_{rep}"], out[f"analysis_host_s_{rep}"] = t_dev, t_host
print(out, flush=True)

def evals(label):
    _, first = sync_time(lambda: lml(kernel, eval_gradient=True))
    ts = []
    for i in range(4):
        k = kernel.clone_with_theta(kernel.theta + 0.01 * (i + 1))
        _, t = sync_time(lambda: lml(k, eval_gradient=True)); ts.append(t)
    f = lml.factor
    ref, t_ref = zip(*[sync_time(lambda: f.refactor(lml.kernel_matrix(kernel))) for _ in range(3)])
    _, t_sol = zip(*[sync_time(lambda: f.solve(lml.y[:, 0])) for _ in range(3)])
    _, t_sel = zip(*[sync_time(f.selected_inverse) for _ in range(3)])
    cache = sum(a.nbytes for v in f._index_cache.values() for a in v if a is not None)
    out[label] = {"first_s": first, "repeated_s": ts, "median_s": float(np.median(ts)),
                  "refactor_s": float(np.median(t_ref)), "solve_s": float(np.median(t_sol)),
                  "selinv_s": float(np.median(t_sel)), "cache_bytes": cache,
                  "pool_bytes": int(cp.get_default_memory_pool().total_bytes()) if cp else None}
    print(label, out[label], flush=True)
    v = lml(kernel, eval_gradient=True)
    f.free(); lml.factor = None
    return v

a = evals("cache_on")
_supernodal.INDEX_CACHE_FRACTION = 0.0
b = evals("cache_off")
out["lml_rel"] = abs(a[0] - b[0]) / abs(b[0])
out["grad_rel"] = float(np.max(np.abs(a[1] - b[1]) / np.abs(b[1])))
print(json.dumps(out))
import os
json.dump(out, open(os.path.join(os.environ.get("OUT", "/tmp"), "cache_ab.json"), "w"), indent=1)
