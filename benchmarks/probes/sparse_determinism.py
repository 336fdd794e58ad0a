"""Run-to-run reproducibility of the sparse products Ridge and TruncatedSVD use on the
GPU: each product is repeated and compared bitwise with its first result.

Run on the GPU host: ``python -m benchmarks.probes.sparse_determinism``.
"""

import cupy as cp
import cupyx.scipy.sparse as csp
import numpy as np
import scipy.sparse as sp
from nvmath.bindings import cusparse as cs

from skgpu.backends.gpu import cusparse

REPEATS = 40


def same(f):
    first = cp.asnumpy(f())
    return sum(np.array_equal(first, cp.asnumpy(f())) for _ in range(REPEATS))


def main():
    from sklearn.datasets import load_diabetes

    Xd, y = load_diabetes(return_X_y=True)
    rng = np.random.RandomState(0)
    wide = sp.random(300, 20000, density=0.05, random_state=rng, format="csr")
    cases = {"diabetes 442x10": (Xd, y[:, None]),
             "random 20000x300": (wide.T.tocsr().toarray(), rng.randn(20000, 3))}
    for name, (X, Z) in cases.items():
        Xs = csp.csr_matrix(sp.csr_matrix(X))
        Z = cp.asarray(Z)
        XT = Xs.T.tocsr()
        print(name, "of", REPEATS, "repeats bitwise equal:")
        print("  skgpu Xᵀ Z (SpMV by column)  ", same(lambda: cusparse.sparse_product(Xs.T, Z)))
        default, cusparse.SPMV_MAX_COLUMNS = cusparse._SPMM_ALG, 0
        print("  SpMM transposed (CSC)        ", same(lambda: cusparse.sparse_product(Xs.T, Z)))
        for alg in ("CSR_ALG1", "CSR_ALG2", "CSR_ALG3"):
            cusparse._SPMM_ALG = getattr(cs.SpMMAlg, alg)
            print(f"  SpMM explicit Xt CSR {alg}",
                  same(lambda: cusparse.sparse_product(XT, Z)))
        cusparse._SPMM_ALG, cusparse.SPMV_MAX_COLUMNS = default, 8
        print("  cupyx Xt @ z (SpMV)          ", same(lambda: XT @ Z[:, 0]))
        for alg in ("CSR_ALG1", "CSR_ALG2"):
            a = getattr(cs.SpMVAlg, alg)
            print(f"  SpMV explicit Xt CSR {alg}",
                  same(lambda: cusparse.csr_matvec(XT, Z[:, 0], a)))
        print("  cupyx X.T @ X (SpGEMM)       ", same(lambda: (Xs.T @ Xs).toarray()))
        print("  cupyx Xt @ Xt.T (SpGEMM)     ", same(lambda: (XT @ XT.T).toarray()))
        print("  dense Xt @ Z                 ",
              same(lambda: Xs.T.toarray() @ Z))

    import skgpu
    from skgpu.linear_model import Ridge

    Xs = sp.csr_array(Xd)
    with skgpu.config_context(device="gpu"):
        scores = {(Ridge(tol=t, fit_intercept=False).fit(Xs, y).score(Xs, y))
                  for t in (1e-5, 1e-3) for _ in range(REPEATS // 2)}
    print("skgpu Ridge on sparse diabetes, distinct scores over", REPEATS, "fits:",
          len(scores), sorted(scores))


if __name__ == "__main__":
    main()
