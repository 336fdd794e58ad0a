"""cuSPARSE SpMM's CSR algorithms against SpMV column by column: bitwise repeats out of
20 and the median time, for a tall matrix with short rows times many columns and a wide
one with long rows times a few tens of columns (the randomized SVD's products).

Run on the GPU host: ``python -m benchmarks.probes.spmm_algorithms``.
"""

import time

import cupy as cp
import cupyx.scipy.sparse as csp
import numpy as np
import scipy.sparse as sp
from nvmath.bindings import cusparse as cs

from skgpu.backends.gpu import cusparse

REPEATS = 20


def measure(f):
    first = cp.asnumpy(f())
    times, equal = [], 0
    for _ in range(REPEATS):
        cp.cuda.Device().synchronize()
        start = time.perf_counter()
        out = f()
        cp.cuda.Device().synchronize()
        times.append(time.perf_counter() - start)
        equal += np.array_equal(first, cp.asnumpy(out))
    return equal, 1e3 * float(np.median(times))


def main():
    rng = np.random.default_rng(0)
    X = sp.random(200000, 1000, density=0.01, format="csr", random_state=1)
    cases = {"tall 200000x1000, 10/row, @ 300 cols": (X, 300),
             "wide 1000x200000, 2000/row, @ 30 cols": (X.T.tocsr(), 30)}
    cusparse.SPMV_MAX_COLUMNS = 0
    for name, (A, k) in cases.items():
        Ad = csp.csr_matrix(A)
        B = cp.asarray(rng.standard_normal((A.shape[1], k)))
        print(name)
        for alg in ("CSR_ALG1", "CSR_ALG2", "CSR_ALG3"):
            cusparse._SPMM_ALG = getattr(cs.SpMMAlg, alg)
            print(f"  SpMM {alg}: repeats equal, median ms", measure(
                lambda: cusparse.sparse_product(Ad, B)))

        def by_columns():
            C = cp.empty((A.shape[0], k))
            for j in range(k):
                C[:, j] = cusparse.csr_matvec(Ad, B[:, j])
            return C

        print("  SpMV CSR_ALG2 by column:", measure(by_columns))


if __name__ == "__main__":
    main()
