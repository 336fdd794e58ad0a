"""Where RidgeCV's leave-one-out error at cond 1e10 comes from: the residual
r = y - ŷ or the leverage h.

For the tall cases of ``accuracy_ridgecv.py`` without intercept or weights, the exact r
and h (ball arithmetic, ``tests/exact_loo.py``'s precision) are substituted one at a time
into the float64 QR-route formulas (U = QŨ, the residual projected twice); the worst
relative error of e² = (r / (1 - h))² against the exact one is printed for: both parts
in float64, exact r, exact h. Needs python-flint (the test extra).

    python -m benchmarks.probes.ridgecv_error_parts
"""


import numpy as np

from benchmarks.accuracy_ridgecv import cases
from benchmarks._harness import tests_module

_exact = tests_module("exact_loo")
PREC, _flint, _mat = _exact.PREC, _exact._flint, _exact._mat


def exact_parts(X, y, alpha):
    """Exact residual and leverage of ridge without intercept or weights."""
    f = _flint()
    old, f.ctx.prec = f.ctx.prec, PREC + 100
    try:
        n, p = X.shape
        Xa, Ya = _mat(X), _mat(y.reshape(n, 1))
        Zt = Xa.transpose()
        G = Zt * Xa + f.arb_mat(p, p, [f.arb(alpha) if i == j else 0
                                       for i in range(p) for j in range(p)])
        B = G.solve(Zt)
        fitted = Xa * (B * Ya)
        r = np.array([float((Ya[i, 0] - fitted[i, 0]).mid()) for i in range(n)])
        h = np.array([float(sum((Xa[i, j] * B[j, i] for j in range(p)), f.arb(0)).mid())
                      for i in range(n)])
        return r, h
    finally:
        f.ctx.prec = old


def float64_parts(X, y, alpha):
    """r and h by the QR route's formulas in float64 (as skgpu computes them)."""
    Q, R = np.linalg.qr(X)
    Ut, s, _ = np.linalg.svd(R)
    U = Q @ Ut
    MtY = U.T @ y
    g = alpha / (s * s + alpha)
    r0 = y - U @ MtY
    r0 -= U @ (U.T @ r0)
    UU = U * U
    return r0 + U @ (MtY * g), 1.0 - ((1.0 - UU.sum(axis=1)) + UU @ g)


def main():
    for seed in (0, 1):
        for case in cases(seed):
            if case["fit_intercept"] or case["sw"] is not None or case["wide"]:
                continue
            X, y, alpha = case["X"], case["y"], case["alphas"][0]
            r, h = exact_parts(X, y, alpha)
            r64, h64 = float64_parts(X, y, alpha)
            exact = (r / (1 - h)) ** 2
            level = (1e7 * np.finfo(float).eps * np.max(np.abs(y))) ** 2

            def err(e):
                return float(np.max(np.abs(e ** 2 - exact) / np.maximum(exact, level)))

            print(f"{case['name']}, seed {seed}: float64 {err(r64 / (1 - h64)):.2g}, "
                  f"exact r {err(r / (1 - h64)):.2g}, exact h {err(r64 / (1 - h)):.2g}")


if __name__ == "__main__":
    main()
