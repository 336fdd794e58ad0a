"""Tall-skinny QR on the GPU: CholeskyQR passes (GEMMs through cuBLASLt, a float64
Cholesky through cuSOLVER), shifted CholeskyQR3, and Householder QR (cuSOLVER geqrf/orgqr)
where CholeskyQR cannot reach working precision. ``ops`` is the GPU backend (its
``matmul`` and ``asarray``)."""

from __future__ import annotations

import cupy as cp
import numpy as np

from . import cublas, cusolver


def cholesky_qr_pass(ops, Q, shifted):
    """One CholeskyQR pass: ``Q L⁻ᵀ`` (dtype of Q) and ``Lᵀ`` (float64) from
    ``chol(QᵀQ [+ shift·I])``; None if the Cholesky factorisation fails (a zero or
    rank-deficient Q, for example).

    The Gram matrix and its Cholesky factor are float64 whatever Q's dtype (mixed
    precision, Yamazaki et al. 2015): for a float32 Q the products of its entries are
    exact in float64, so the pass handles cond(Q) up to ~1e8 instead of ~1e3, and the
    shift, Fukaya et al.'s 11 (mn + n(n+1)) u ‖Q‖²_F with u the float64 unit roundoff,
    stays small (with float32's u it exceeds ‖Q‖² itself once m·n ≳ 10⁷, and the pass
    stops orthogonalising). ‖Q‖²_F = trace(QᵀQ) comes from the Gram matrix on the
    device: no extra pass over Q, no host sync.
    """
    m, n = Q.shape
    Q64 = Q if Q.dtype == np.float64 else Q.astype(np.float64)
    G = ops.matmul(Q64.T, Q64)
    del Q64
    if shifted:
        factor = 11.0 * (m * n + n * (n + 1)) * (np.finfo(np.float64).eps / 2)
        G = G + (factor * cp.trace(G)) * cp.eye(n, dtype=G.dtype)
    out = _cholesky_factor(G, Q.dtype)
    if out is None:
        return None
    L, Linv_t = out
    return ops.matmul(Q, Linv_t), L.T


def _cholesky_factor(G, dtype):
    """``(L, (Lᵀ)⁻¹)`` for ``G = L Lᵀ``, L lower triangular in G's dtype and its inverse
    transposed C-ordered in ``dtype`` (the right factor of a CholeskyQR product); None
    where potrf fails (G not numerically positive definite)."""
    L, info = cusolver.potrf(G)
    if info != 0:
        return None
    L = cp.tril(L)
    return L, cp.ascontiguousarray(cublas.triangular_inverse(L).T, dtype=dtype)


def cholesky_qr3(ops, Y):
    """Shifted CholeskyQR3 (Fukaya et al., SIAM J. Sci. Comput. 2020): Q, R or None.

    Three Gram + Cholesky + triangular-inverse passes, all GEMMs on the tall matrix;
    the first Gram is shifted so that Cholesky succeeds for cond(Y) up to ~1/eps.
    Returns None when a Cholesky fails or Q is not orthonormal (rank deficiency),
    so the caller can use Householder QR instead.
    """
    n = Y.shape[1]
    Q, R = Y, cp.eye(n, dtype=np.float64)
    for step in range(3):
        out = cholesky_qr_pass(ops, Q, shifted=step == 0)
        if out is None:
            return None
        Q, R_step = out
        R = R_step @ R
    err = float(cp.linalg.norm(ops.matmul(Q.T, Q) - cp.eye(n, dtype=Y.dtype)))
    if not np.isfinite(err) or err > 100 * n * np.finfo(Y.dtype).eps ** 0.5:
        return None
    return Q, R.astype(Y.dtype, copy=False)


def rescale_basis(ops, Y):
    """A well-conditioned basis of span(Y) for the power iterations.

    scikit-learn normalises with LU, which is not orthonormal either: only the span
    matters until the last step. One shifted CholeskyQR pass suffices here; it falls
    back to Householder QR when its Cholesky fails.
    """
    out = cholesky_qr_pass(ops, Y, shifted=True)
    if out is None:
        return cusolver.householder_qr(Y, want_q=True)[0]
    return out[0]


def orthonormalize(ops, Y):
    out = cholesky_qr3(ops, Y)
    if out is None:
        out = cusolver.positive_diagonal(*cusolver.householder_qr(Y, want_q=True))
    return out[0]


def cholesky_qr_adaptive(ops, X, first_pass_limit=0.5):
    """R of ``X = QR`` by unshifted CholeskyQR passes, stopping as soon as Q is
    orthonormal to working precision: one pass for a well-conditioned X, two
    (CholeskyQR2) up to cond(X) ~ 1e7 in float64. The Gram matrix of the next pass is
    the orthogonality check, so a pass costs two GEMMs on the tall matrix. Returns
    None when the first Cholesky fails or Q is far from orthonormal (cond(X) beyond
    CholeskyQR2's reach): the caller then runs shifted CholeskyQR3.
    ``first_pass_limit`` bounds ‖QᵀQ - I‖ after the first pass (≈ cond(X)²·ε) for a
    second pass to be tried.
    """
    m, n = X.shape
    eps = np.finfo(X.dtype).eps
    # The floor of ‖QᵀQ - I‖_F for an orthonormal Q is rounding in the Gram matrix.
    tau = min(10.0 * eps * np.sqrt(m) * n, 1e-6)
    eye = cp.eye(n, dtype=X.dtype)
    G = ops.matmul(X.T, X)
    Q, R = X, eye
    for step in range(3):
        factor = _cholesky_factor(G, G.dtype)
        if factor is None:
            return None
        L, Linv_t = factor
        Q = ops.matmul(Q, Linv_t)
        R = L.T @ R
        G = ops.matmul(Q.T, Q)
        err = float(cp.linalg.norm(G - eye))
        if err <= tau:
            return Q, R
        if not np.isfinite(err) or (step == 0 and err > first_pass_limit):
            return None
    return (Q, R) if err <= 100 * n * eps**0.5 else None


def qr(ops, X, want_q=True):
    """Economy ``X = QR`` of a tall X (Q None without ``want_q``), R with a positive
    diagonal.

    Q is what the CholeskyQR passes produce anyway while they reach orthogonality
    to working precision, and a second pass is tried only when the first left
    ‖QᵀQ - I‖ ≤ 1e-4 (cond(X) up to ~7e5 in float64): near CholeskyQR2's limit of
    ~1e7 its R loses accuracy (RidgeCV's predictions on 2 × 2 float32 data at
    cond ~1e7 were wrong in the third digit). Beyond that
    Householder (geqrf + orgqr), not shifted CholeskyQR3: its Q is as orthonormal,
    but its larger backward error made RidgeCV's leave-one-out at cond 1e10 ~10-40x
    less accurate than LAPACK's (up to 8.5e-6 relative against exact references,
    where Householder gives ~2e-7).
    """
    X = ops.asarray(X)
    m, n = X.shape
    if m >= n:
        out = cholesky_qr_adaptive(ops, X, 1e-4 if want_q else 0.5)
        if out is None and not want_q:  # R alone: shifted CholeskyQR3 is enough
            out = cholesky_qr3(ops, X)
        if out is not None:
            return out
    return cusolver.positive_diagonal(*cusolver.householder_qr(X, want_q=want_q))


def svd_tall(ops, X):
    """``U, s, Vt`` of a tall X, U orthonormal to working precision (from X's Gram matrix
    and a check on UᵀU, not as an unchecked ``X V / s``): :func:`_svd_passes` from a
    first pass by :func:`_whiten` (float64, RidgeCV's dtype) or :func:`_cholesky_first`
    (float32) where the passes reach that precision, else Householder's ``Q``
    (:func:`qr`'s route where CholeskyQR stops) times the left singular vectors of its R.

    float32 keeps the Cholesky first pass: with the eigendecomposition's instead, V came
    out orthogonal only to 6.3e-5 (13·ε·p) at cond 1, p = 40, on an H100 (the test's
    bound is 10·ε·p), and no GPU has run a remedy yet."""
    X = ops.asarray(X)
    m, n = X.shape
    if m >= n:
        out = _svd_passes(ops, X, _whiten if X.dtype == np.float64 else _cholesky_first)
        if out is not None:
            return out
    Q, R = cusolver.positive_diagonal(*cusolver.householder_qr(X, want_q=True))
    Ut, s, Vt = ops.svd(R)
    return ops.matmul(Q, Ut), s, Vt


def _svd_passes(ops, X, first_pass, first_pass_limit=1e-4):
    """``U, s, Vt`` of a tall X by passes over it that each keep ``X = U S Vᵀ`` and make U
    more orthonormal, stopping as :func:`cholesky_qr_adaptive` does (the same floor τ,
    :func:`qr`'s second-pass limit); None where they cannot reach working precision (the
    caller then uses Householder's QR). ``first_pass(ops, X)`` gives the first
    ``(U, s, Vt)`` or None; each later pass is :func:`_cholesky_svd_pass`. The check is
    on U itself, through the Gram matrix the next pass needs. Every pass leaves
    ``‖UᵀU - I‖ ≈ ε·cond²`` of what it started from, while ``X = U S Vᵀ`` holds to the
    products' rounding whatever that error: an orthonormal U makes it an SVD to working
    precision (a wrong singular value shows as ‖Uᵢ‖ ≠ 1 and fails the check)."""
    m, n = X.shape
    eps = np.finfo(X.dtype).eps
    tau = min(10.0 * eps * np.sqrt(m) * n, 1e-6)  # (cholesky_qr_adaptive's floor)
    eye = cp.eye(n, dtype=X.dtype)
    out = first_pass(ops, X)
    for step in range(3):
        if out is None:
            return None
        U, s, Vt = out
        G = ops.matmul(U.T, U)
        err = float(cp.linalg.norm(G - eye))
        if err <= tau:
            return U, s, Vt
        if not np.isfinite(err) or (step == 0 and err > first_pass_limit):
            return None
        if step == 2:
            break
        out = _cholesky_svd_pass(ops, U, G, s[:, None] * Vt)
    return (U, s, Vt) if err <= 100 * n * eps**0.5 else None


def _cholesky_svd_pass(ops, U, G, B=None):
    """One CholeskyQR pass carrying the rotation into the singular basis, for ``X = U B``
    (B the identity where None) and ``G = UᵀU = L Lᵀ``: ``X = Q (Lᵀ B)`` with
    ``Q = U L⁻ᵀ``, and the SVD ``Lᵀ B = Ũ S Vᵀ`` (p × p) gives ``(U (L⁻ᵀ Ũ), s, Vt)``: one
    product on the tall matrix where forming Q and then ``Q Ũ`` takes two. None where
    potrf fails."""
    factor = _cholesky_factor(G, G.dtype)
    if factor is None:
        return None
    L, Linv_t = factor
    Ut, s, Vt = ops.svd(L.T if B is None else L.T @ B)
    return ops.matmul(U, Linv_t @ Ut), s, Vt


def _cholesky_first(ops, X):
    """The first pass from X's Cholesky factor (:func:`_cholesky_svd_pass` of ``X = X I``):
    the passes then are :func:`cholesky_qr_adaptive`'s, with its factors."""
    return _cholesky_svd_pass(ops, X, ops.matmul(X.T, X))


def _whiten(ops, X):
    """The first pass from the eigendecomposition of X's Gram matrix: ``XᵀX = V Λ Vᵀ``
    gives ``U = X (V Λ^-½)``, ``s = √λ`` (one symmetric eigensolve of p × p, where a
    Cholesky pass needs potrf, a triangular inverse and an SVD of Lᵀ); None where the
    eigensolver does not converge (NaN in X, for one) or X is rank deficient to working
    precision."""
    n = X.shape[1]
    G = ops.matmul(X.T, X)
    try:
        lam, V = ops.eigh(G)  # descending
    except np.linalg.LinAlgError:
        return None
    if n == 0 or not float(lam[-1]) > 0.0:  # (NaN too)
        return None
    s = cp.sqrt(lam)
    return (ops.matmul(X, cp.ascontiguousarray(V / s[None, :])), s,
            cp.ascontiguousarray(V.T))
