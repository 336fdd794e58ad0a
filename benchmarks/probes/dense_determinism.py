"""Run-to-run reproducibility of the dense GPU operations RidgeCV's spectrum uses: each
is repeated and compared bitwise with its first result, with cuSOLVER's deterministic
mode as it is and then set.

Run on the GPU host: ``python -m benchmarks.probes.dense_determinism``.
"""

import cupy as cp
import numpy as np
import scipy.sparse as sp
from nvmath.bindings import cusolverDn

from skgpu.backends import get_backend
from skgpu.backends.gpu.handles import solver_handle

REPEATS = 20


def same(f):
    out = f()
    out = out if isinstance(out, tuple) else (out,)
    first = [cp.asnumpy(a) for a in out]
    equal = 0
    for _ in range(REPEATS):
        again = f()
        again = again if isinstance(again, tuple) else (again,)
        equal += all(np.array_equal(a, cp.asnumpy(b)) for a, b in zip(first, again))
    return equal


def main():
    ops = get_backend("gpu")
    rng = np.random.default_rng(0)
    X = sp.random(20000, 300, density=0.05, format="csr", random_state=1)
    Xd = ops.asarray(X)
    G = ops.gram(Xd)
    y = cp.asarray(rng.standard_normal((20000, 1)))
    dense = cp.asarray(X.toarray())
    V = ops.eigh(G)[1]
    print("deterministic mode as created:",
          cusolverDn.get_deterministic_mode(solver_handle()))
    print("gram (SpGEMM)        ", same(lambda: ops.gram(Xd)))
    print("eigh 300 (syevd)     ", same(lambda: ops.eigh(G)))
    print("spmm X @ V (300 cols)", same(lambda: ops.spmm(Xd, V)))
    print("matmul Xᵀy (cuBLASLt)", same(lambda: ops.matmul(dense.T, y)))
    print("matmul X V (cuBLASLt)", same(lambda: ops.matmul(dense, V)))
    print("qr_r (tsqr)          ", same(lambda: ops.qr_r(dense)))
    print("svd 300 (gesvdj)     ", same(lambda: ops.svd(G)))
    cusolverDn.set_deterministic_mode(solver_handle(), 1)
    print("deterministic mode set:", cusolverDn.get_deterministic_mode(solver_handle()))
    print("eigh 300 (syevd)     ", same(lambda: ops.eigh(G)))
    print("qr_r (tsqr)          ", same(lambda: ops.qr_r(dense)))
    print("svd 300 (gesvdj)     ", same(lambda: ops.svd(G)))


if __name__ == "__main__":
    main()
