"""The sparse GP's predictive variance: quadratic forms ``bᵀ A⁻¹ b`` with sparse b, by
forward solves through the supernodes b reaches (CPU factors) or by full solves (cuDSS),
against dense brute force."""

import numpy as np
import pytest
import scipy.linalg as sla
import scipy.sparse as sp
from conftest import DEVICES
from sklearn.gaussian_process.kernels import ConstantKernel as C
from sklearn.gaussian_process.kernels import Matern, WhiteKernel
from skgpu_testing import skip_unless_supported

import skgpu
from skgpu.backends import _common, _cpu, _sparse_rhs, get_backend
from skgpu.backends._sparse_rhs import SupernodalForward
from skgpu.gaussian_process import GaussianProcessRegressor, _sparse
from skgpu.gaussian_process.kernels import Tapered, Wendland


def _points(rng, n, d=2):
    return rng.uniform(0, 1, (n, d))


def _kernel_system(rng, n, m, radius=0.12, d=2):
    """A compact kernel's SPD matrix on n points and its cross-covariance rows for m
    test points (some far outside, with no neighbour: a zero row)."""
    X = _points(rng, n, d)
    Xt = np.vstack([_points(rng, m - 2, d), np.full((2, d), 5.0)])
    k = Wendland(radius, smoothness=1)
    A = sp.csc_matrix(k(X) + 1e-3 * np.eye(n))
    A.eliminate_zeros()
    B = sp.csr_matrix(k(Xt, X))
    B.eliminate_zeros()
    return A, B


def _exact_forms(A, B):
    """``bᵢᵀ A⁻¹ bᵢ`` by a dense Cholesky solve (brute force)."""
    Bd = B.toarray().T
    Z = sla.cho_solve(sla.cho_factor(A.toarray(), lower=True), Bd)
    return np.sum(Bd * Z, axis=0)


def _factors():
    out = ["superlu"]
    if _cpu.cholmod_available():
        out.append("cholmod")
    return out


def _factor(name, A):
    if name == "cholmod":
        return _cpu.CholmodSPDFactor(A, "matrix")
    return _cpu.SparseSPDFactor(A, "matrix")


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("name", _factors())
def test_quadratic_forms_equal_dense_solves(seed, name):
    rng = np.random.default_rng(seed)
    A, B = _kernel_system(rng, 700, 160)
    exact = _exact_forms(A, B)
    before = B.copy()
    got = _factor(name, A).quadratic_forms(B)
    assert (B != before).nnz == 0 and np.array_equal(B.indices, before.indices)
    assert exact[-2:].tolist() == [0.0, 0.0]  # the far points' rows are empty
    np.testing.assert_array_equal(got[-2:], 0.0)
    np.testing.assert_allclose(got, exact, rtol=1e-10, atol=0)


@pytest.mark.parametrize("sub_batch, chunk", [(1, 1), (3, 7), (16, 50), (128, 4096)])
def test_batching_does_not_change_the_forms(monkeypatch, sub_batch, chunk):
    rng = np.random.default_rng(7)
    A, B = _kernel_system(rng, 400, 90, radius=0.15)
    exact = _exact_forms(A, B)
    monkeypatch.setattr(_sparse_rhs, "SUB_BATCH", sub_batch)
    monkeypatch.setattr(_sparse_rhs, "CHUNK", chunk)
    L = np.linalg.cholesky(A.toarray())
    got = SupernodalForward(sp.csc_matrix(L)).quadratic_forms(B)
    np.testing.assert_allclose(got, exact, rtol=1e-10, atol=0)


def test_forward_on_a_dense_and_a_diagonal_factor():
    rng = np.random.default_rng(3)
    M = rng.standard_normal((30, 30))
    A = M @ M.T + 30 * np.eye(30)
    B = sp.random(12, 30, density=0.2, random_state=4, format="csr")
    L = sp.csc_matrix(np.linalg.cholesky(A))  # one supernode
    np.testing.assert_allclose(SupernodalForward(L).quadratic_forms(B),
                               _exact_forms(sp.csc_matrix(A), B), rtol=1e-12)
    D = sp.diags(np.arange(1.0, 31.0), format="csc")  # thirty supernodes, no rows below
    expected = np.asarray(B.multiply(B) @ (1.0 / np.arange(1.0, 31.0))).ravel()
    np.testing.assert_allclose(SupernodalForward(np.sqrt(D)).quadratic_forms(B), expected,
                               rtol=1e-14)


def test_a_pattern_that_is_not_supernodal_is_refused():
    # columns 0 and 1 would form a supernode by their counts and first rows, but
    # column 1 holds row 3, which column 0 does not
    L = sp.csc_matrix(np.array([[2.0, 0, 0, 0], [1, 2, 0, 0], [0, 0, 2, 0], [0, 1, 0, 2]]))
    L2 = L.toarray()
    L2[2, 0] = 1.0  # column 0: rows 0, 1, 2; column 1: rows 1, 3
    with pytest.raises(ValueError, match="supernodes"):
        SupernodalForward(sp.csc_matrix(L2))
    with pytest.raises(ValueError, match="columns"):
        SupernodalForward(L).quadratic_forms(sp.csr_matrix((2, 5)))


def test_superlu_falls_back_to_full_solves_where_the_orders_differ(monkeypatch):
    rng = np.random.default_rng(5)
    A, B = _kernel_system(rng, 300, 40)
    factor = _cpu.SparseSPDFactor(A, "matrix")
    lu = factor._lu

    class Reordered:  # what a pivoting LU would report: different row and column orders
        L, U, perm_c = lu.L, lu.U, lu.perm_c
        perm_r = lu.perm_r[::-1].copy()

        def solve(self, b):
            return lu.solve(b)

    factor._lu = Reordered()
    np.testing.assert_allclose(factor.quadratic_forms(B, block_bytes=8 * 300 * 7),
                               _exact_forms(A, B), rtol=1e-10)
    assert factor._forward[0] is None
    Bd = B.toarray()
    exact = Bd @ sla.cho_solve(sla.cho_factor(A.toarray(), lower=True), Bd.T)
    np.testing.assert_allclose(factor.quadratic_form_matrix(B), exact, rtol=0,
                               atol=1e-12 * np.abs(exact).max())
    # in padded blocks of 7 right-hand sides
    blocked = _common.quadratic_form_matrix_by_solves(factor, B, np, 8 * 300 * 7)
    np.testing.assert_allclose(blocked, exact, rtol=0, atol=1e-12 * np.abs(exact).max())


@pytest.mark.skipif(not _cpu.cholmod_available(), reason="needs CHOLMOD (cvxopt)")
def test_cholmod_blocks_follow_a_refactorisation():
    rng = np.random.default_rng(11)
    A, B = _kernel_system(rng, 500, 60)
    factor = _cpu.CholmodSPDFactor(A, "matrix")
    first = factor.quadratic_forms(B)
    A2 = A.copy()
    A2.data *= 2.0
    factor.refactor(A2)
    np.testing.assert_allclose(factor.quadratic_forms(B), first / 2.0, rtol=1e-10)
    # the factor still solves and knows its determinant after L was read out
    x = factor.solve(np.ones(500))
    np.testing.assert_allclose(A2 @ x, np.ones(500), rtol=1e-9)
    assert factor.logdet() == pytest.approx(np.linalg.slogdet(A2.toarray())[1], rel=1e-12)


KERNELS = {
    "tapered_matern": Tapered(C(1.0) * Matern(0.05, nu=1.5), taper_range=0.1)
    + WhiteKernel(0.05),
    "wendland": C(2.0) * Wendland(0.08, smoothness=2) + WhiteKernel(1e-3),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(KERNELS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("seed", [0, 1])
def test_sparse_std_equals_dense_std(device, name, dtype, seed):
    skip_unless_supported(get_backend(device), "sparse_spd")
    rng = np.random.default_rng(seed)
    X = _points(rng, 1500)
    y = np.sin(6 * X[:, 0]) * np.cos(4 * X[:, 1]) + 0.05 * rng.standard_normal(1500)
    X_test = np.vstack([_points(rng, 400), [[3.0, 3.0]]]).astype(dtype)
    params = dict(kernel=KERNELS[name], optimizer=None, alpha=1e-8, normalize_y=True)
    with skgpu.config_context(device=device):
        dense = GaussianProcessRegressor(cholesky="dense", **params).fit(X.astype(dtype), y)
        sparse = GaussianProcessRegressor(cholesky="sparse", **params).fit(
            X.astype(dtype), y)
        mean_s, std_s = sparse.predict(X_test, return_std=True)
        mean_d, std_d = dense.predict(X_test, return_std=True)
    np.testing.assert_allclose(std_s, std_d, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(mean_s, mean_d, rtol=1e-8, atol=1e-10)
    # a point with no training point in reach keeps the prior's deviation
    prior = np.sqrt(KERNELS[name].diag(X_test[-1:].astype(np.float64)))[0]
    assert std_s[-1] == pytest.approx(prior * sparse._y_train_std, rel=1e-12)


@pytest.mark.parametrize("name", _factors())
def test_cpu_sparse_std_uses_the_forward_solves(monkeypatch, name):
    """The CPU path takes the sparse-RHS route (no full solve is made for the std)."""
    rng = np.random.default_rng(2)
    X = _points(rng, 800)
    y = np.cos(5 * X[:, 0])
    if name == "superlu":  # named: without CHOLMOD "auto" would take skgpu's factor
        monkeypatch.setattr(_cpu, "_cholmod", lambda: None)
        monkeypatch.setitem(_sparse.SPARSE_FACTORIZATION, "cpu", "backend")
    with skgpu.config_context(device="cpu"):
        gp = GaussianProcessRegressor(KERNELS["tapered_matern"], optimizer=None,
                                      cholesky="sparse").fit(X, y)
        factor = gp._state_on(get_backend("cpu")).lml.factor
        calls = []
        real = type(factor).solve
        monkeypatch.setattr(type(factor), "solve",
                            lambda self, b: calls.append(np.shape(b)) or real(self, b))
        gp.predict(_points(rng, 300), return_std=True)
    assert calls == []


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("name", _factors())
def test_quadratic_form_matrix_equals_dense_solves(monkeypatch, seed, name):
    rng = np.random.default_rng(seed)
    A, B = _kernel_system(rng, 600, 130)
    Bd = B.toarray()
    exact = Bd @ sla.cho_solve(sla.cho_factor(A.toarray(), lower=True), Bd.T)
    factor = _factor(name, A)
    for sub_batch in (1, 9, 128):  # pieces shared by several sub-batches, or one
        monkeypatch.setattr(_sparse_rhs, "SUB_BATCH", sub_batch)
        G = factor.quadratic_form_matrix(B)
        np.testing.assert_allclose(G, exact, rtol=0, atol=1e-12 * np.abs(exact).max())
        np.testing.assert_array_equal(G, G.T)
        np.testing.assert_allclose(np.diag(G), factor.quadratic_forms(B), rtol=1e-12,
                                   atol=1e-15)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("seed", [0, 3])
def test_sparse_cov_and_samples_equal_dense(device, seed):
    skip_unless_supported(get_backend(device), "sparse_spd")
    rng = np.random.default_rng(seed)
    X = _points(rng, 1200)
    y = np.sin(6 * X[:, 0]) + 0.05 * rng.standard_normal(1200)
    X_test = np.vstack([_points(rng, 250), [[4.0, 4.0]]])
    params = dict(kernel=KERNELS["tapered_matern"], optimizer=None, alpha=1e-8)
    with skgpu.config_context(device=device):
        dense = GaussianProcessRegressor(cholesky="dense", **params).fit(X, y)
        sparse = GaussianProcessRegressor(cholesky="sparse", **params).fit(X, y)
        mean_s, cov_s = sparse.predict(X_test, return_cov=True)
        cov_d = dense.predict(X_test, return_cov=True)[1]
        std_s = sparse.predict(X_test, return_std=True)[1]
        samples_s = sparse.sample_y(X_test, 3, random_state=1)
    np.testing.assert_allclose(cov_s, cov_d, rtol=0, atol=1e-9 * np.abs(cov_d).max())
    np.testing.assert_allclose(np.sqrt(np.diag(cov_s)), std_s, rtol=1e-9)
    if device == "cpu":
        # the draws are scikit-learn's from this mean and covariance (comparing them
        # with the dense path's draws would compare two SVDs of a nearly singular matrix)
        expected = np.random.RandomState(1).multivariate_normal(mean_s, cov_s, 3).T
        np.testing.assert_allclose(samples_s, expected, rtol=1e-12, atol=1e-12)
    # on any device: many draws have the predicted mean and covariance (cuSPARSE's
    # products round differently from call to call, so the draws are not bitwise
    # repeatable on the GPU)
    with skgpu.config_context(device=device):
        draws = sparse.sample_y(X_test, 4000, random_state=2)
    sd = np.sqrt(np.diag(cov_s))
    assert np.all(np.abs(draws.mean(axis=1) - mean_s) <= 5 * sd / np.sqrt(4000) + 1e-12)
    np.testing.assert_allclose(np.cov(draws), cov_s, rtol=0,
                               atol=6 * np.sqrt(2 / 4000) * np.max(np.diag(cov_s)))
