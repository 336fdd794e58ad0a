"""Every backend operation against NumPy/SciPy, on each backend, float32 and float64."""

import numpy as np
import pytest
import scipy.linalg as sla
import scipy.sparse as sp
from skgpu_testing import assert_allclose_rel, skip_unless_supported, to_host, tol

from skgpu import config_context

DTYPES = [np.float32, np.float64]
# tall, wide, one column, rank-deficient (rank 3)
SHAPES = ["tall", "wide", "one_column", "rank_deficient"]


def make_matrix(rng, kind, dtype):
    if kind == "tall":
        X = rng.standard_normal((200, 12))
    elif kind == "wide":
        X = rng.standard_normal((12, 60))
    elif kind == "one_column":
        X = rng.standard_normal((50, 1))
    else:
        X = rng.standard_normal((80, 3)) @ rng.standard_normal((3, 10))
    return (X + rng.uniform(-2, 2, size=X.shape[1])).astype(dtype)


def make_spd(rng, n, dtype, cond=100.0):
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    w = np.geomspace(1.0, cond, n)
    return ((Q * w) @ Q.T).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", SHAPES)
def test_column_mean_and_gram(ops, rng, dtype, kind):
    X = make_matrix(rng, kind, dtype)
    t = tol(dtype, backend=ops.name)
    Xd = ops.asarray(X)
    mean = ops.column_mean(Xd)
    assert to_host(mean).dtype == dtype
    assert_allclose_rel(mean, X.astype(np.float64).mean(axis=0), t)
    Xc = X.astype(np.float64) - X.astype(np.float64).mean(axis=0)
    assert_allclose_rel(ops.gram(Xd, mean), Xc.T @ Xc, 10 * t)
    assert_allclose_rel(ops.gram(Xd), X.astype(np.float64).T @ X, t)
    w = rng.uniform(0.5, 2.0, X.shape[0])
    assert_allclose_rel(ops.column_mean(Xd, w),
                        np.average(X.astype(np.float64), axis=0, weights=w), t)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gram_sparse(ops, rng, dtype):
    X = sp.random(300, 15, density=0.2, random_state=int(rng.integers(1 << 30)),
                  format="csr", dtype=dtype)
    Xd = ops.asarray(X)
    assert ops.is_sparse(Xd)
    mean = ops.column_mean(Xd)
    dense = X.toarray().astype(np.float64)
    assert_allclose_rel(mean, dense.mean(axis=0), tol(dtype, backend=ops.name))
    Xc = dense - dense.mean(axis=0)
    assert_allclose_rel(ops.gram(Xd, mean), Xc.T @ Xc, 10 * tol(dtype, backend=ops.name))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("shape", [(500, 40, 7), (3, 5, 1), (64, 1, 16)])
def test_matmul(ops, rng, dtype, with_bias, shape):
    n, p, k = shape
    a = rng.standard_normal((n, p)).astype(dtype)
    b = rng.standard_normal((p, k)).astype(dtype)
    bias = rng.standard_normal(k).astype(dtype) if with_bias else None
    t = tol(dtype, backend=ops.name)
    # Twice: the second call reuses the cached plan with new operands.
    for scale in (1.0, -3.0):
        out = ops.matmul(ops.asarray(a * dtype(scale)), ops.asarray(b),
                         bias=None if bias is None else ops.asarray(bias))
        assert out.shape == (n, k)
        assert to_host(out).dtype == dtype
        ref = scale * (a.astype(np.float64) @ b) + (0 if bias is None else bias)
        assert_allclose_rel(out, ref, t * p)


def _views(xp, A, kind):
    """A view of the same values as A in a given memory layout."""
    if kind == "C":
        return xp.ascontiguousarray(A)
    if kind == "F":
        return xp.asfortranarray(A)
    if kind == "T":  # the transpose of a C-ordered array: column-major
        return xp.ascontiguousarray(A.T).T
    pad = xp.zeros((A.shape[0] + 3, A.shape[1] + 5), dtype=A.dtype)
    if kind == "offset":  # leading dimension > columns, start not 16-byte aligned
        pad[1:1 + A.shape[0], 3:3 + A.shape[1]] = A
        return pad[1:1 + A.shape[0], 3:3 + A.shape[1]]
    if kind == "strided":  # no unit stride at all: copied before the product
        big = xp.zeros((A.shape[0], 2 * A.shape[1]), dtype=A.dtype)
        big[:, ::2] = A
        return big[:, ::2]
    raise ValueError(kind)


LAYOUTS = ["C", "F", "T", "offset", "strided"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout_a", LAYOUTS)
@pytest.mark.parametrize("layout_b", LAYOUTS)
@pytest.mark.parametrize("shape", [(37, 9, 5), (1, 6, 4), (8, 5, 1), (6, 1, 3)])
def test_matmul_layouts(ops, rng, dtype, layout_a, layout_b, shape):
    """Products of operands in any memory layout (row- or column-major, transposed,
    offset into a padded array, no unit stride), with and without a bias (its own array
    or a view at an odd offset), equal NumPy's; each shape twice (a cached plan, new
    operands)."""
    m, k, n = shape
    t = tol(dtype, backend=ops.name)
    for _ in range(2):
        a = rng.standard_normal((m, k)).astype(dtype)
        b = rng.standard_normal((k, n)).astype(dtype)
        bias = rng.standard_normal(n).astype(dtype)
        A, B = _views(ops.xp, ops.asarray(a), layout_a), _views(ops.xp, ops.asarray(b), layout_b)
        np.testing.assert_array_equal(to_host(A), a)
        padded = ops.asarray(np.concatenate([np.zeros(1, dtype), bias]))
        for with_bias in (None, ops.asarray(bias), padded[1:]):  # a view: not aligned
            out = ops.matmul(A, B, bias=with_bias)
            ref = a.astype(np.float64) @ b + (0 if with_bias is None else bias)
            assert out.shape == (m, n)
            assert to_host(out).dtype == dtype
            assert_allclose_rel(out, ref, t * k)


@pytest.mark.parametrize("shape", [(0, 4, 3), (5, 0, 3), (5, 4, 0)])
def test_matmul_empty(ops, shape):
    m, k, n = shape
    bias = np.arange(n, dtype=np.float64)
    out = ops.matmul(ops.asarray(np.ones((m, k))), ops.asarray(np.ones((k, n))),
                     bias=ops.asarray(bias))
    np.testing.assert_array_equal(to_host(out), np.zeros((m, n)) + bias)


@pytest.mark.parametrize("precision", ["high", "medium"])
def test_matmul_lower_precision_float32(ops, rng, precision):
    a = rng.standard_normal((256, 128)).astype(np.float32)
    b = rng.standard_normal((128, 8)).astype(np.float32)
    with config_context(matmul_precision=precision):
        out = ops.matmul(ops.asarray(a), ops.asarray(b))
    # TF32 / BF16 inputs: ~1e-3 / ~1e-2 relative.
    assert_allclose_rel(out, a.astype(np.float64) @ b, 3e-2)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("fmt", ["csr", "csc", "coo"])
@pytest.mark.parametrize("rhs", ["matrix", "few", "vector", "fortran"])
def test_spmm_formats(ops, rng, dtype, fmt, rhs):
    """SpMM (row-major cuSPARSE on the GPU) against SciPy: CSR, CSC (the transposed
    product) and a format the GPU hands to CuPy; unsorted, duplicated entries; a matrix,
    a few columns or a vector (SpMV on the GPU) or a Fortran-ordered right-hand side."""
    m, k = 300, 70
    rows, cols = rng.integers(0, m, 2000), rng.integers(0, k, 2000)  # with duplicates
    A = sp.coo_matrix((rng.standard_normal(2000), (rows, cols)), shape=(m, k))
    A = A.astype(dtype).asformat(fmt)
    if fmt == "csr":  # unsorted column indices within each row
        A.indices = A.indices.copy()
        for r in range(m):
            lo, hi = A.indptr[r], A.indptr[r + 1]
            A.indices[lo:hi] = A.indices[lo:hi][::-1]
            A.data[lo:hi] = A.data[lo:hi][::-1]
        A.has_sorted_indices = False
    B = (rng.standard_normal(k) if rhs == "vector"
         else rng.standard_normal((k, 3 if rhs == "few" else 9)))
    B = np.asfortranarray(B.astype(dtype))
    expected = A.astype(np.float64) @ B.astype(np.float64)
    out = ops.spmm(ops.asarray(A), ops.asarray(B))
    assert to_host(out).shape == expected.shape
    assert to_host(out).dtype == dtype
    assert_allclose_rel(out, expected, tol(dtype, 1e-12))


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("columns", [1, 3])
def test_spmm_of_few_columns_repeats_bitwise(ops, rng, transposed, columns):
    """A sparse product with a few columns (Ridge's Xᵀy) gives the same bits on every
    call, for the transposed operand (CSC) and for rows of 1,000 entries: cuSPARSE's
    SpMM sums those in an order that changes from run to run."""
    X = sp.random(20000, 300, density=0.05, format="csr",
                  random_state=int(rng.integers(1 << 30)))
    A = X.T if transposed else X.T.tocsr()
    B = ops.asarray(rng.standard_normal((20000, columns)))
    A = ops.asarray(A)
    first = to_host(ops.spmm(A, B))
    assert_allclose_rel(first, X.T @ to_host(B), 1e-12)
    for _ in range(20):
        np.testing.assert_array_equal(to_host(ops.spmm(A, B)), first)


def test_spmm_empty(ops, rng):
    A = sp.csr_matrix((40, 10))
    out = ops.spmm(ops.asarray(A), ops.asarray(rng.standard_normal((10, 3))))
    np.testing.assert_array_equal(to_host(out), np.zeros((40, 3)))


def test_matmul_sparse_and_spmm(ops, rng):
    A = sp.random(100, 30, density=0.1, random_state=int(rng.integers(1 << 30)), format="csr")
    B = rng.standard_normal((30, 4))
    bias = rng.standard_normal(4)
    assert_allclose_rel(ops.spmm(ops.asarray(A), ops.asarray(B)), A @ B, 1e-12)
    assert_allclose_rel(ops.matmul(ops.asarray(A), ops.asarray(B), bias=ops.asarray(bias)),
                        A @ B + bias, 1e-12)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("top", [None, 3])
@pytest.mark.parametrize("n", [1, 9, 40, 160])  # the GPU solves n <= 100 on the host
def test_eigh(ops, rng, dtype, top, n):
    A = make_spd(rng, n, dtype, cond=50.0)
    w_ref, V_ref = np.linalg.eigh(A.astype(np.float64))
    w_ref, V_ref = w_ref[::-1], V_ref[:, ::-1]
    w, V = ops.eigh(ops.asarray(A), top=top)
    array_type = type(ops.asarray(np.zeros(1)))
    assert isinstance(w, array_type) and isinstance(V, array_type)
    k = n if top is None else min(top, n)
    w, V = to_host(w), to_host(V)
    assert w.shape == (k,) and V.shape == (n, k)
    t = tol(dtype, backend=ops.name)
    assert_allclose_rel(w, w_ref[:k], 10 * t)
    # eigenvectors up to sign
    signs = np.sign(np.sum(V * V_ref[:, :k], axis=0))
    assert_allclose_rel(V * signs, V_ref[:, :k], 1e3 * t)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", SHAPES)
def test_svd(ops, rng, dtype, kind):
    X = make_matrix(rng, kind, dtype)
    U, s, Vt = ops.svd(ops.asarray(X))
    U, s, Vt = to_host(U), to_host(s), to_host(Vt)
    s_ref = sla.svdvals(X.astype(np.float64))
    t = tol(dtype, backend=ops.name)
    assert_allclose_rel(s, s_ref, 10 * t)
    k = min(X.shape)
    assert U.shape == (X.shape[0], k) and Vt.shape == (k, X.shape[1])
    assert_allclose_rel((U * s) @ Vt, X, 10 * t)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("normalizer", ["auto", "none", "QR", "LU"])
def test_randomized_svd_matches_sklearn(ops, rng, dtype, normalizer, seed):
    from sklearn.utils.extmath import randomized_svd

    X = (rng.standard_normal((300, 8)) * np.geomspace(10, 1, 8)) @ rng.standard_normal((8, 50))
    X = (X + 0.01 * rng.standard_normal(X.shape)).astype(dtype)
    U, s, Vt = ops.randomized_svd(ops.asarray(X), 5, n_iter=4,
                                  power_iteration_normalizer=normalizer, random_state=seed)
    U_ref, s_ref, Vt_ref = randomized_svd(X, 5, n_iter=4, power_iteration_normalizer=normalizer,
                                          random_state=seed, flip_sign=False)
    t = tol(dtype, backend=ops.name)
    assert_allclose_rel(s, s_ref, 10 * t)
    # Same subspace and random draws: the same singular vectors up to sign.
    Vt = to_host(Vt)
    signs = np.sign(np.sum(Vt * Vt_ref, axis=1))
    assert_allclose_rel(Vt * signs[:, None], Vt_ref, 100 * t)


def test_randomized_svd_sparse_wide(ops, rng):
    X = sp.random(40, 400, density=0.1, random_state=int(rng.integers(1 << 30)), format="csr")
    from sklearn.utils.extmath import randomized_svd

    U, s, Vt = ops.randomized_svd(ops.asarray(X), 4, n_iter=7, random_state=0)
    assert to_host(U).shape == (40, 4) and to_host(Vt).shape == (4, 400)
    _, s_ref, _ = randomized_svd(X, 4, n_iter=7, random_state=0)
    assert_allclose_rel(s, s_ref, 1e-8)
    # and close to the exact top singular values
    assert_allclose_rel(s, sla.svdvals(X.toarray())[:4], 0.05)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["tall", "one_column", "rank_deficient"])
def test_qr_r(ops, rng, dtype, kind):
    X = make_matrix(rng, kind, dtype)
    R = to_host(ops.qr_r(ops.asarray(X)))
    n = X.shape[1]
    assert R.shape == (n, n)
    assert np.allclose(np.tril(R, -1), 0)
    assert np.all(np.diag(R) >= 0)
    t = tol(dtype, backend=ops.name)
    assert_allclose_rel(R.T.astype(np.float64) @ R, X.T.astype(np.float64) @ X, 10 * t)
    if kind != "rank_deficient":
        R_ref = sla.qr(X.astype(np.float64), mode="economic")[1]
        R_ref *= np.sign(np.diag(R_ref))[:, None]
        assert_allclose_rel(R, R_ref, 100 * t)


@pytest.mark.parametrize("cond", [1e2, 1e10])
def test_qr_r_ill_conditioned_float64(ops, rng, cond):
    """R stays accurate where the Gram route squares the condition number."""
    n, p = 2000, 20
    U, _ = np.linalg.qr(rng.standard_normal((n, p)))
    V, _ = np.linalg.qr(rng.standard_normal((p, p)))
    X = (U * np.geomspace(1, 1 / cond, p)) @ V.T
    R = to_host(ops.qr_r(ops.asarray(X)))
    R_ref = sla.qr(X, mode="economic")[1]
    R_ref *= np.sign(np.diag(R_ref))[:, None]
    # Backward error: ‖X - Q R‖ is what QR promises; R itself is accurate column-wise.
    assert np.linalg.norm(R.T @ R - X.T @ X) <= 1e-12 * np.linalg.norm(X.T @ X)
    assert np.linalg.norm(R - R_ref) <= 1e-10 * np.linalg.norm(R_ref) * max(1.0, cond * 1e-6)


def _conditioned(rng, m, n, cond, rank=None):
    U = np.linalg.qr(rng.standard_normal((m, n)))[0]
    W = np.linalg.qr(rng.standard_normal((n, n)))[0]
    s = np.geomspace(1, 1 / cond, n)
    if rank is not None:
        s[rank:] = 0.0
    return (U * s) @ W.T


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cond", [1.0, 1e3, 1e5, 1e9, "rank_deficient"])
def test_svd_tall(ops, rng, dtype, cond):
    """``U, s, Vt`` of a tall X: U and V orthonormal to working precision whatever the
    conditioning, ``U S Vᵀ = X`` to rounding, s the exact singular values to ε·s₁."""
    m, n = 3000, 40
    X = (_conditioned(rng, m, n, 1e2, rank=25) if cond == "rank_deficient"
         else _conditioned(rng, m, n, cond)).astype(dtype)
    X64 = X.astype(np.float64)
    U, s, Vt = (to_host(a).astype(np.float64) for a in ops.svd_tall(ops.asarray(X)))
    assert U.shape == (m, n) and s.shape == (n,) and Vt.shape == (n, n)
    eps = np.finfo(dtype).eps
    assert np.linalg.norm(U.T @ U - np.eye(n)) <= 10 * eps * np.sqrt(m) * n
    assert np.linalg.norm(Vt @ Vt.T - np.eye(n)) <= 10 * eps * n
    assert np.linalg.norm(X64 - (U * s) @ Vt) <= 100 * eps * np.linalg.norm(X64)
    s_ref = np.linalg.svd(X64, compute_uv=False)
    assert np.max(np.abs(s - s_ref)) <= 100 * eps * s_ref[0]


@pytest.mark.gpu
@pytest.mark.parametrize("cond, householder", [(1.0, False), (1e3, False), (1e5, False),
                                               (1e9, True)])
@pytest.mark.parametrize("p", [40, 160])
def test_svd_tall_gpu_route(rng, monkeypatch, cond, householder, p):
    """float64 on the GPU: the Gram matrix's eigendecomposition, then CholeskyQR's passes
    (none for cond 1, one from ~1e3) carry the singular rotation without Householder's
    QR, which takes over beyond their reach; the answer is the same either way
    (:func:`test_svd_tall`). p = 160 puts the eigensolve on the device (syevd), p = 40 on
    the host."""
    import cupy as cp

    from skgpu.backends import get_backend
    from skgpu.backends.gpu import backend as gpu_backend
    from skgpu.backends.gpu import cusolver, tsqr

    calls, eigh = [], []
    householder_qr, syevd = cusolver.householder_qr, cusolver.syevd
    monkeypatch.setattr(cusolver, "householder_qr",
                        lambda *a, **k: calls.append(1) or householder_qr(*a, **k))
    monkeypatch.setattr(cusolver, "syevd", lambda *a, **k: eigh.append(1) or syevd(*a, **k))
    X = _conditioned(rng, 3000, p, cond)
    U, s, Vt = tsqr.svd_tall(get_backend("gpu"), cp.asarray(X))
    assert bool(calls) == householder
    assert bool(eigh) == (p > gpu_backend.HOST_EIGH_MAX)
    Uh = to_host(U)
    assert np.linalg.norm(Uh.T @ Uh - np.eye(p)) <= 1e-12 * p / 40  # (a p × p error)
    assert np.linalg.norm(X - (Uh * to_host(s)) @ to_host(Vt)) <= 1e-13 * np.linalg.norm(X)
    s_ref = np.linalg.svd(X, compute_uv=False)
    assert np.max(np.abs(to_host(s) - s_ref)) <= 1e-13 * s_ref[0]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 5, 60])
def test_cholesky(ops, rng, dtype, n):
    A = make_spd(rng, n, dtype)
    B = rng.standard_normal((n, 3)).astype(dtype)
    t = tol(dtype, backend=ops.name)
    fac = ops.cholesky(ops.asarray(A), what="test matrix")
    L = to_host(fac.L)
    assert np.allclose(np.triu(L, 1), 0)
    assert_allclose_rel(L, np.linalg.cholesky(A.astype(np.float64)), 100 * t)
    A64 = A.astype(np.float64)
    assert_allclose_rel(fac.solve(ops.asarray(B)), np.linalg.solve(A64, B), 1e3 * t)
    assert_allclose_rel(fac.solve(ops.asarray(B[:, 0])), np.linalg.solve(A64, B[:, 0]), 1e3 * t)
    assert fac.logdet() == pytest.approx(np.linalg.slogdet(A64)[1], rel=100 * t, abs=100 * t)
    assert_allclose_rel(fac.inverse(), np.linalg.inv(A64), 1e3 * t)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("route", ["potri", "blocked", "blocked_gemm", "blocked_too_large"])
def test_cholesky_half_inverse_in_place(ops, rng, monkeypatch, route, dtype):
    if route != "potri":
        if not ops.is_gpu:
            pytest.skip("the blocked inverse is the GPU's replacement for potri")
        from skgpu.backends.gpu import cublas, cusolver

        monkeypatch.setattr(cusolver, "BLOCKED_INVERSE_MIN", 10)
        monkeypatch.setattr(cublas, "INVERSE_BLOCK", 7)  # several levels, uneven halves
        # the triangular products as cuBLAS's trmm and syrk, or as GEMMs by blocks of
        # 3 rows or columns (uneven last blocks) from order 8 on; too large a matrix for
        # the GEMM route keeps trmm and syrk
        monkeypatch.setattr(cublas, "GEMM_FROM", 1 << 40 if route == "blocked" else 8)
        monkeypatch.setattr(cublas, "GEMM_BLOCK", 3)
        if route == "blocked_too_large":
            monkeypatch.setattr(cublas, "GEMM_MAX_ELEMENTS", 60 * 60)
        gemms = []  # the GEMM route's calls, to tell the routes apart
        plain_gemm = cublas.ColumnMajor.gemm
        monkeypatch.setattr(cublas.ColumnMajor, "gemm",
                            lambda self, *args, **kw: gemms.append(1) or plain_gemm(
                                self, *args, **kw))
    n = 61
    A = make_spd(rng, n, dtype)
    B = rng.standard_normal((n, n))
    B = B + B.T
    fac = ops.cholesky(ops.asarray(A.copy()), what="test matrix", overwrite=True)
    P = fac.half_inverse()
    if route != "potri":
        assert bool(gemms) == (route == "blocked_gemm")
    assert P.flags.c_contiguous and P.dtype == dtype
    P = to_host(P).astype(np.float64)
    inv = np.linalg.inv(A.astype(np.float64))
    t = 1e-10 if dtype == np.float64 else 1e-4
    assert_allclose_rel(P + P.T, inv, t)
    assert 2 * float(np.vdot(P, B)) == pytest.approx(np.trace(inv @ B), rel=t)


def _exact_lower_solve(L, B):
    """``L⁻¹ B`` from the float values as given, at 256 bits (python-flint's arb)."""
    flint = pytest.importorskip("flint")
    old, flint.ctx.prec = flint.ctx.prec, 256
    try:
        V = flint.arb_mat(np.tril(L).tolist()).solve(flint.arb_mat(B.tolist()))
        return np.array([[float(V[i, j].mid()) for j in range(V.ncols())]
                         for i in range(V.nrows())])
    finally:
        flint.ctx.prec = old


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("order", ["C", "F", "view"])
def test_gemm_against_exact(ops, dtype, trans_a, trans_b, order):
    """``alpha · op(a) · op(b)`` for C- and Fortran-ordered blocks and strided views
    (as the supernodal factor passes its panels' slices), against the float64
    product of the same rounded inputs."""
    rng = np.random.default_rng(int(trans_a) + 2 * int(trans_b))
    m, k, n = 37, 23, 11
    a = rng.standard_normal((k, m) if trans_a else (m, k)).astype(dtype)
    b = rng.standard_normal((n, k) if trans_b else (k, n)).astype(dtype)
    exact = -2.5 * ((a.T if trans_a else a).astype(np.float64)
                    @ (b.T if trans_b else b).astype(np.float64))

    def place(x):
        if order == "view":  # every other row of a Fortran-ordered buffer
            big = ops.xp.asfortranarray(ops.asarray(np.repeat(x, 2, axis=0)))
            return big[::2]
        y = ops.asarray(x)
        return ops.xp.asfortranarray(y) if order == "F" else ops.xp.ascontiguousarray(y)

    out = to_host(ops.gemm(place(a), place(b), trans_a=trans_a, trans_b=trans_b,
                           alpha=-2.5))
    assert out.shape == exact.shape and out.dtype == dtype
    tol = 1e-13 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(out, exact, rtol=0, atol=tol * np.abs(exact).max())


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("order", ["forward_order", "C", "F"])
@pytest.mark.parametrize("below", [0, 17])
def test_panel_forward_against_exact(ops, seed, order, below):
    """The supernodal forward solve's step on a factored panel ``[L_JJ; L_RJ]`` (its
    block's strict upper triangle garbage): ``Y ← L_JJ⁻¹ Y`` in place on rows of a
    larger block, and ``out ← −L_RJ Y``, in the backend's ``forward_order`` and the
    other order where the backend takes it (the CPU's: in place on C-ordered
    blocks, through copies else), against the float64 exact solve."""
    if order != "forward_order" and order != ops.forward_order and ops.name != "cpu":
        pytest.skip("the GPU's blocks are Fortran-ordered")
    order = ops.forward_order if order == "forward_order" else order
    rng = np.random.default_rng(seed)
    w, k = 13, 7
    A = make_spd(rng, w, np.float64, cond=1e6)
    L_JJ = np.linalg.cholesky(A)
    P = np.vstack([L_JJ + np.triu(rng.standard_normal((w, w)), 1),  # garbage above
                   rng.standard_normal((below, w))])
    work = rng.standard_normal((w + 9, k))
    want_Y = _exact_lower_solve(L_JJ, work[4:4 + w])
    want_out = -P[w:] @ want_Y
    block = ops.xp.asarray(work, order=order)
    out = ops.xp.zeros((below, k), order=order)
    ops.panel_forward(ops.xp.asfortranarray(ops.asarray(P)), w, block[4:4 + w], out)
    block = to_host(block)
    scale = np.abs(want_Y).max()
    np.testing.assert_allclose(block[4:4 + w], want_Y, rtol=0, atol=1e-9 * scale)
    np.testing.assert_allclose(np.delete(block, np.s_[4:4 + w], axis=0),
                               np.delete(work, np.s_[4:4 + w], axis=0), rtol=0, atol=0)
    if below:
        np.testing.assert_allclose(to_host(out), want_out, rtol=0,
                                   atol=1e-9 * np.abs(want_out).max())


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("side", ["left", "right"])
def test_solve_triangular_against_exact(ops, dtype, seed, side):
    """The predictive variance's solve ``L⁻¹ B`` against a Cholesky factor's buffer (its
    strict upper triangle unspecified), against the exact solution of the rounded L
    and B, and as accurate as scipy's substitution on the same L and B; also from the
    right, in place: ``Bᵀ L⁻ᵀ`` (the rows of ``(L⁻¹ B)ᵀ``)."""
    rng = np.random.default_rng(seed)
    n, k = 61, 9
    cond = 1e8 if dtype == np.float64 else 1e3
    A = make_spd(rng, n, dtype, cond=cond)
    lower = ops.cholesky(ops.asarray(A), what="test matrix").lower
    L = np.tril(to_host(lower)).astype(np.float64)
    B = rng.standard_normal((n, k)).astype(dtype)
    exact = _exact_lower_solve(L, B.astype(np.float64))
    if side == "left":
        V = to_host(ops.solve_triangular(lower, ops.asarray(B))).astype(np.float64)
    else:
        C = ops.xp.asfortranarray(ops.asarray(B.T))
        out = ops.solve_triangular_right(lower, C)
        assert out is C  # in place
        V = to_host(out).T.astype(np.float64)
        with pytest.raises(ValueError, match="Fortran-ordered"):
            ops.solve_triangular_right(lower, ops.xp.ascontiguousarray(ops.asarray(B.T)))
    assert V.shape == (n, k)
    # Substitution's forward error is at most about n·u·κ(L) ‖V‖, κ(L) = √cond(A).
    u = np.finfo(dtype).eps
    err = np.linalg.norm(V - exact) / np.linalg.norm(exact)
    sub = sla.solve_triangular(L.astype(dtype), B, lower=True)
    err_sub = np.linalg.norm(sub.astype(np.float64) - exact) / np.linalg.norm(exact)
    assert err <= n * u * np.sqrt(cond)
    assert err <= 30 * err_sub + 10 * u


def test_sq_dist_matches_cdist(ops, rng):
    from scipy.spatial.distance import cdist

    X, Y = rng.standard_normal((37, 5)) * 3, rng.standard_normal((23, 5)) * 3
    assert_allclose_rel(ops.sq_dist(ops.asarray(X), ops.asarray(Y)),
                        cdist(X, Y, "sqeuclidean"), 1e-14)
    D = to_host(ops.sq_dist(ops.asarray(X), ops.asarray(X)))
    np.testing.assert_array_equal(np.diag(D), 0.0)


def test_cholesky_not_positive_definite(ops):
    A = np.diag([1.0, -1.0, 2.0])
    with pytest.raises(np.linalg.LinAlgError, match="kernel matrix is not positive definite"):
        ops.cholesky(ops.asarray(A), what="kernel matrix")


def tapered_spd(rng, n, radius=0.15):
    """A compactly supported (Wendland) covariance on random 2-D points, sparse SPD."""
    from scipy.spatial import cKDTree

    pts = rng.uniform(size=(n, 2))
    pairs = cKDTree(pts).query_pairs(radius, output_type="ndarray")
    r = np.linalg.norm(pts[pairs[:, 0]] - pts[pairs[:, 1]], axis=1) / radius
    v = (1 - r) ** 4 * (4 * r + 1)
    rows = np.concatenate([pairs[:, 0], pairs[:, 1], np.arange(n)])
    cols = np.concatenate([pairs[:, 1], pairs[:, 0], np.arange(n)])
    vals = np.concatenate([v, v, np.full(n, 1.0 + 1e-2)])
    return sp.csr_matrix((vals, (rows, cols)), shape=(n, n))


def test_sparse_spd(ops, rng):
    skip_unless_supported(ops, "sparse_spd")
    A = tapered_spd(rng, 400)
    dense = A.toarray()
    b = rng.standard_normal(400)
    B = rng.standard_normal((400, 3))
    fac = ops.sparse_spd(ops.asarray(A), what="tapered covariance")
    assert fac.logdet() == pytest.approx(np.linalg.slogdet(dense)[1], rel=1e-10)
    assert_allclose_rel(fac.solve(ops.asarray(b)), np.linalg.solve(dense, b), 1e-10)
    assert_allclose_rel(fac.solve(ops.asarray(B)), np.linalg.solve(dense, B), 1e-10)
    # Same pattern, new values: the factor is reused.
    A2 = A.copy()
    A2.data *= np.where(A2.indices == np.repeat(np.arange(400), np.diff(A2.indptr)), 1.5, 0.7)
    fac.refactor(ops.asarray(A2))
    dense2 = A2.toarray()
    assert fac.logdet() == pytest.approx(np.linalg.slogdet(dense2)[1], rel=1e-10)
    assert_allclose_rel(fac.solve(ops.asarray(B)), np.linalg.solve(dense2, B), 1e-10)
    with pytest.raises(ValueError, match="same sparsity pattern"):
        fac.refactor(ops.asarray(sp.identity(400, format="csr")))


def test_sparse_spd_not_positive_definite(ops, rng):
    skip_unless_supported(ops, "sparse_spd")
    A = tapered_spd(rng, 50)
    A = (A - 3.0 * sp.identity(50)).tocsr()
    with pytest.raises(np.linalg.LinAlgError, match="not positive definite"):
        ops.sparse_spd(ops.asarray(A), what="tapered covariance")


def test_asarray_round_trip(ops, rng):
    X = rng.standard_normal((5, 3))
    Xd = ops.asarray(X, dtype=np.float32)
    back = ops.to_host(Xd)
    assert isinstance(back, np.ndarray) and back.dtype == np.float32
    np.testing.assert_allclose(back, X.astype(np.float32))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("cond", [1.0, 1e3, 1e5])
def test_cholesky_qr_on_long_float32_needs_no_householder(rng, monkeypatch, dtype, cond):
    """CholeskyQR3 orthonormalises a long, tall Y (m·n ≫ 1/eps32) with its Gram matrix in
    float64, without falling back to Householder QR; the basis spans Y."""
    import cupy as cp

    from skgpu.backends import get_backend
    from skgpu.backends.gpu import cusolver, tsqr

    def no_householder(*args, **kwargs):
        raise AssertionError("fell back to Householder QR")

    monkeypatch.setattr(cusolver, "householder_qr", no_householder)
    m, n = 200_000, 20
    U = np.linalg.qr(rng.standard_normal((m, n)))[0]
    W = np.linalg.qr(rng.standard_normal((n, n)))[0]
    Y = ((U * np.geomspace(1, 1 / cond, n)) @ W.T).astype(dtype)
    ops = get_backend("gpu")
    Q = tsqr.orthonormalize(ops, cp.asarray(Y))
    assert Q.dtype == dtype
    Qh = to_host(Q).astype(np.float64)
    t = 1e-5 if dtype == np.float32 else 1e-12
    assert np.linalg.norm(Qh.T @ Qh - np.eye(n)) < 10 * t
    # the same span: projecting Y on Q leaves it unchanged
    Y64 = Y.astype(np.float64)
    assert np.linalg.norm(Y64 - Qh @ (Qh.T @ Y64)) <= 100 * t * np.linalg.norm(Y64)
    Q1 = tsqr.rescale_basis(ops, cp.asarray(Y))
    assert np.linalg.cond(to_host(Q1).astype(np.float64)) < 10


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["C", "F", "1-D", "3-D", "strided"])
@pytest.mark.parametrize("rows_per_chunk", [1, 7, 1000])
@pytest.mark.parametrize("pinned", [True, False])
def test_a_large_result_comes_to_the_host_whole(rng, monkeypatch, dtype, layout,
                                                rows_per_chunk, pinned):
    """``to_host`` of a large device array (through two pinned buffers in row chunks,
    an uneven last one; without pinned memory or for a strided view by CuPy's copy) gives
    every value of the array, made on another stream just before the copy, in its
    layout."""
    import cupy as cp
    import cupyx

    from skgpu.backends import get_backend
    from skgpu.backends.gpu import staging

    if not pinned:
        def no_pinned(*args, **kwargs):
            raise MemoryError("no pinned memory in this test")

        monkeypatch.setattr(cupyx, "empty_pinned", no_pinned)
    shape = {"C": (301, 13), "F": (301, 13), "1-D": (3001,), "3-D": (301, 5, 3),
             "strided": (602, 13)}[layout]
    expected = rng.standard_normal(shape).astype(dtype)
    row_bytes = expected[0].nbytes if expected.ndim > 1 else expected.itemsize
    monkeypatch.setattr(staging, "TO_HOST_MIN_BYTES", 0)
    monkeypatch.setattr(staging, "STREAM_CHUNK_BYTES", rows_per_chunk * row_bytes)
    with cp.cuda.Stream(non_blocking=True):
        a = cp.asarray(expected) * 3  # the copy must wait for this product
        if layout == "F":
            a = cp.asfortranarray(a)
        elif layout == "strided":
            a, expected = a[::2], expected[::2]
        got = get_backend("gpu").to_host(a)
    assert isinstance(got, np.ndarray) and got.dtype == dtype
    np.testing.assert_array_equal(got, expected * dtype(3))  # a copy: every bit
    assert got.flags.f_contiguous if layout == "F" else got.flags.c_contiguous


@pytest.mark.gpu
@pytest.mark.parametrize("bias", [False, True])
def test_cached_matmul_plans_keep_no_operand_alive(bias):
    """A cached cuBLASLt plan takes new operands each call and lets go of them after it:
    deleting the user's array frees its memory."""
    import gc

    import cupy as cp

    from skgpu.backends import get_backend

    ops = get_backend("gpu")
    pool = cp.get_default_memory_pool()
    B = cp.asarray(np.arange(8 * 1024, dtype=np.float32).reshape(1024, 8) / 1e4)
    b = cp.arange(8, dtype=cp.float32) if bias else None
    for value in (1.0, 2.0):  # a new plan, then the cached one with a new A
        A = cp.full((4096, 1024), value, dtype=cp.float32)  # 16 MB
        out = ops.matmul(A, B, bias=b)
        expected = value * B.sum(axis=0) + (0 if b is None else b)
        cp.testing.assert_allclose(out, cp.broadcast_to(expected, out.shape), rtol=1e-5)
        used = pool.used_bytes()
        del A
        gc.collect()
        assert pool.used_bytes() <= used - A_BYTES


A_BYTES = 4096 * 1024 * 4


@pytest.mark.parametrize("n", [1, 2, 400])
def test_cpu_sparse_factors_agree(rng, monkeypatch, n):
    """CHOLMOD (the ``sparse`` extra) and SuperLU, the fallback without it, give the same
    logdet and solves on the same tapered matrices, before and after a refactor; without
    cvxopt the backend hands out SuperLU; CHOLMOD leaves cvxopt's options as they were."""
    pytest.importorskip("cvxopt")
    from cvxopt import cholmod

    from skgpu.backends import _cpu

    A = tapered_spd(rng, n) if n > 2 else sp.csr_matrix(np.diag(rng.uniform(1, 2, n)))
    A2 = A.copy()
    A2.data *= rng.uniform(0.9, 1.1, A2.data.size)
    A2 = ((A2 + A2.T) / 2).tocsr()
    A2 = A2 + sp.identity(n, format="csr")  # same pattern (the diagonal is stored)
    B = rng.standard_normal((n, 3))
    cholmod.options["supernodal"] = 0
    chol = _cpu.CholmodSPDFactor(A, "matrix")
    assert cholmod.options == {"supernodal": 0}
    del cholmod.options["supernodal"]
    lu = _cpu.SparseSPDFactor(A, "matrix")
    for step in range(2):
        dense = (A if step == 0 else A2).toarray()
        exact = np.linalg.slogdet(dense)[1]
        assert chol.logdet() == pytest.approx(exact, rel=1e-12, abs=1e-12)
        assert lu.logdet() == pytest.approx(exact, rel=1e-12, abs=1e-12)
        assert_allclose_rel(chol.solve(B), np.linalg.solve(dense, B), 1e-10)
        assert_allclose_rel(chol.solve(B[:, 0]), np.linalg.solve(dense, B[:, 0]), 1e-10)
        chol.refactor(A2)
        lu.refactor(A2)
    monkeypatch.setattr(_cpu, "_cholmod", lambda: None)
    assert isinstance(_cpu.CPUBackend().sparse_spd(A), _cpu.SparseSPDFactor)


@pytest.mark.parametrize("n", [1, 2, 37, 400])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cholmod_selected_inverse_against_dense(n, seed):
    """``inverse_on``: A⁻¹ at every entry of A's pattern (both triangles), by selected
    inversion of CHOLMOD's factor, equals the dense inverse; twice in a row (the factor
    is re-analysed in between) and after a refactor."""
    pytest.importorskip("cvxopt")
    from skgpu.backends import _cpu

    rng = np.random.default_rng(seed)
    A = tapered_spd(rng, n) if n > 2 else sp.csr_matrix(np.diag(rng.uniform(1, 2, n)))
    A2 = A.copy()
    A2.data *= rng.uniform(0.9, 1.1, A2.data.size)
    A2 = ((A2 + A2.T) / 2 + sp.identity(n)).tocsr()
    coo = sp.coo_matrix(A)
    rows, cols = coo.row.astype(np.int64), coo.col.astype(np.int64)
    chol = _cpu.CholmodSPDFactor(A, "matrix")
    for M in (A, A, A2):
        if M is A2:
            chol.refactor(A2)
        inv = np.linalg.inv(M.toarray())
        got = chol.inverse_on(rows, cols)
        np.testing.assert_allclose(got, inv[rows, cols], rtol=1e-10,
                                   atol=1e-12 * np.abs(inv).max())
        assert chol.logdet() == pytest.approx(np.linalg.slogdet(M.toarray())[1], rel=1e-12,
                                              abs=1e-12)
        np.testing.assert_allclose(chol.solve(np.ones(n)), inv @ np.ones(n), rtol=1e-10)


def test_selected_inverse_supernodes_and_blocks(rng):
    """SelectedInverse on a hand-made factor: a dense one (one supernode), a diagonal one
    (n supernodes) and a random sparse one, against L⁻ᵀ L⁻¹ formed densely."""
    from skgpu.backends._selinv import SelectedInverse, supernodes

    n = 30
    dense = np.tril(rng.standard_normal((n, n))) + n * np.eye(n)
    diagonal = np.diag(rng.uniform(1, 2, n))
    A = tapered_spd(rng, 200).toarray()
    sparse_factor = np.linalg.cholesky(A)
    sparse_factor[np.abs(sparse_factor) < 1e-300] = 0.0  # its pattern, fill included
    for L, count in ((dense, 1), (diagonal, n), (sparse_factor, None)):
        Lc = sp.csc_matrix(L)
        Lc.sort_indices()
        bounds = supernodes(Lc)
        if count is not None:
            assert bounds.size - 1 == count
        Z = np.linalg.inv(L @ L.T)
        S = SelectedInverse(Lc)
        coo = Lc.tocoo()
        got = S(Lc.data)
        np.testing.assert_allclose(got, Z[coo.row, coo.col], rtol=1e-9,
                                   atol=1e-12 * np.abs(Z).max())
    with pytest.raises(ValueError, match="outside the factor's pattern"):
        SelectedInverse(sp.csc_matrix(diagonal)).positions([1], [0])
    broken = sp.csc_matrix(dense)
    broken[n - 1, 1] = 0.0  # (n-1, 0) and (1, 0) stored: (n-1, 1) must be too
    broken.eliminate_zeros()
    with pytest.raises(ValueError, match="not a Cholesky factor's pattern"):
        SelectedInverse(broken)


def test_sparse_gp_likelihood_same_with_cholmod_and_superlu(rng, monkeypatch):
    """The tapered GP's LML at a theta equal to 1e-10 relative on both CPU factors; its
    central-difference gradient to the differences' own accuracy."""
    pytest.importorskip("cvxopt")
    from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

    from skgpu.backends import _cpu, get_backend
    from skgpu.gaussian_process._sparse import SparseLogMarginalLikelihood
    from skgpu.gaussian_process.kernels import Tapered

    X = rng.uniform(0, 1, (3000, 2))
    y = np.sin(6 * X[:, 0]) * np.cos(4 * X[:, 1]) + 0.05 * rng.standard_normal(3000)
    r = np.sqrt(30 / (np.pi * 3000))
    kernel = (ConstantKernel(1.0) * Tapered(Matern(r, nu=1.5), taper_range=r)
              + WhiteKernel(0.01))
    chol = SparseLogMarginalLikelihood(get_backend("cpu"), X, y, 1e-10)(kernel, True)
    monkeypatch.setattr(_cpu, "_cholmod", lambda: None)
    lu = SparseLogMarginalLikelihood(get_backend("cpu"), X, y, 1e-10,
                                     factorization="backend")(kernel, True)
    assert chol[0] == pytest.approx(lu[0], rel=1e-10)
    assert_allclose_rel(chol[1], lu[1], 1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("order", ["C", "F"])
def test_centre_columns(ops, rng, dtype, weighted, order):
    """``centre_columns``: the (weighted) mean against exact sums (``math.fsum``) to the
    rounding of a sum of n terms in the data's dtype (√n·ε times the spread about the
    first row: no loss to offsets of 1e6 and 1e12) and the centred data to that and
    their own rounding, for column scales from 1e-8 to 1e8; a constant column exactly
    zero with its exact mean; one row and F-ordered X (the GPU's route without its
    kernel) too."""
    import math

    from skgpu.backends import centre_columns

    scales = np.array([1e-3, 1.0, 1e3, 1.0, 1.0, 1.0, 1.0, 1e-8, 1e8])
    offsets = np.array([1e6, -3.0, 0.0, 7.25, 1e6, 0.0, 1e12, 0.0, -5.0])
    p = scales.size
    for n in (1, 1537):
        X = rng.standard_normal((n, p)) * scales + offsets
        X[:, 3] = 7.25  # constant
        X = np.asarray(X.astype(dtype), order=order)
        w = rng.uniform(0.5, 2.0, n) if weighted else np.ones(n)
        w = w.astype(dtype).astype(np.float64)
        X64 = X.astype(np.float64)
        shifted = X64 - X64[0]  # (exact for float32 data; float64 within ε|x - x₀|)
        delta = np.array([math.fsum(w * shifted[:, j]) / math.fsum(w) for j in range(p)])
        exact = X64[0] + delta
        centred, mean = centre_columns(ops, ops.asarray(X),
                                       ops.asarray(w.astype(dtype)) if weighted else None)
        centred, mean = to_host(centred), to_host(mean)
        assert centred.dtype == np.dtype(dtype) and mean.dtype == np.dtype(dtype)
        eps = np.finfo(dtype).eps
        spread = np.abs(X64 - X64[0]).max(axis=0)
        summed = np.sqrt(n) * eps * spread  # a sum of n terms of the spread's size
        assert np.all(np.abs(mean - exact) <= 4 * eps * np.abs(exact) + summed)
        assert mean[3] == np.float64(7.25).astype(dtype) and np.all(centred[:, 3] == 0)
        assert np.all(np.abs(centred - (shifted - delta))
                      <= 4 * eps * (np.abs(shifted - delta) + spread) + 2 * summed)


@pytest.mark.gpu
def test_centre_columns_past_the_grid_rows():
    """The GPU's column sums take more rows a block where X has more than 65,535 blocks
    of rows (40 million rows): the last rows count (they move the mean by 2.5)."""
    import cupy as cp

    from skgpu.backends import centre_columns, get_backend

    n = 40_000_000
    X = cp.random.default_rng(0).standard_normal((n, 1), dtype=cp.float32) + 5
    X[-1_000_000:] += 100
    exact = float(cp.sum(X, dtype=cp.float64)) / n
    centred, mean = centre_columns(get_backend("gpu"), X)
    assert abs(float(mean[0]) - exact) <= 1e-6 * abs(exact)
    assert abs(float(cp.sum(centred, dtype=cp.float64))) <= 1e-6 * n
