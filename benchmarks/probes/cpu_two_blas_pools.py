"""Probe (answered; leaves the tree): the sparse GP's LML + exact gradient on the CPU at
n (argv[1]) with a factorisation (argv[2]: supernodal or backend), as is and with
SciPy's OpenBLAS, or every BLAS, limited to one thread (threadpoolctl)."""
import sys
import time

import numpy as np
from threadpoolctl import ThreadpoolController

sys.path.insert(0, "benchmarks")
from _harness import sparse_gp_problem  # noqa: E402

from skgpu.backends import get_backend  # noqa: E402
from skgpu.gaussian_process._sparse import SparseLogMarginalLikelihood  # noqa: E402

n, factorization = int(sys.argv[1]), sys.argv[2]
X, y, kernel = sparse_gp_problem(n)
lml = SparseLogMarginalLikelihood(get_backend("cpu"), X, y, 1e-10,
                                  factorization=factorization)
lml(kernel, eval_gradient=True)
controller = ThreadpoolController()


def run(label):
    times = []
    for i in range(3):
        k = kernel.clone_with_theta(kernel.theta + 0.01 * (i + 1))
        start = time.perf_counter()
        lml(k, eval_gradient=True)
        times.append(time.perf_counter() - start)
    print(factorization, n, label, np.round(times, 3), flush=True)


run("as is")
with controller.select(prefix="libscipy_openblas").limit(limits=1):
    run("scipy's BLAS 1 thread")
with controller.limit(limits=1):
    run("all 1 thread")
