"""The dense path of GaussianProcessRegressor, the twin of :mod:`._sparse`: the
likelihood and its gradient with a dense Cholesky factor, evaluated in panels of rows
beside one n × n buffer, and predict in blocks of test points.
"""

from __future__ import annotations

import logging
import time

import numpy as np

from ._kernel_eval import _diag_add, column_spans, evaluate, panels_supported

logger = logging.getLogger("skgpu")


def _cholesky_flops(n):
    """Floating-point operations of one dense Cholesky factorisation of an n × n matrix
    (the unit of work of a GP fit or likelihood; BLAS threads are managed by it)."""
    return n**3 / 3.0


def _lml_from(ops, y, a, logdet):
    """``-½ Σ_t y_tᵀ K⁻¹ y_t - ½ T log|K| - T n/2 log 2π`` from ``a = K⁻¹ y`` (n, T)."""
    n, n_targets = y.shape
    return (-0.5 * float(ops.xp.vdot(y, a)) - 0.5 * n_targets * logdet
            - n_targets * n / 2 * np.log(2 * np.pi))


#: Bytes of one block of test-point rows in predict (K(X*, X_train) and L⁻¹K(X*, X)ᵀ), at
#: least; at large n a block takes PREDICT_BLOCK_FRACTION of the factor's bytes (larger
#: triangular solves run faster), so that a block's kernel terms (up to six blocks for a
#: Matern) and its solve stay within 0.3 n² beside the factor.
_PREDICT_BLOCK_BYTES = 1 << 30
PREDICT_BLOCK_FRACTION = 0.04

#: K(X, X) and its gradients are evaluated in panels of rows once n exceeds this, so that
#: the likelihood holds one n × n matrix (the kernel matrix, its factor, then the half
#: inverse, all in one buffer) and panels of PANEL_FRACTION · n rows beside it (each
#: panel's kernel terms, gradient terms and weights: about eight panels' worth). Below
#: it, one panel of all rows: the whole matrices at once (panels would only add calls).
SINGLE_PANEL_MAX_N = 4096
PANEL_FRACTION = 1.0 / 32.0
#: ... and on the GPU, panels of at least this many rows: there a panel costs ~1.5 ms of
#: host work (its kernel and gradient terms, some sixty launches) where its kernels take
#: ~0.5 ms, so at n = 20,000 the likelihood with its gradient took 281 ms in panels of
#: n/32 = 625 rows and 265 ms in panels of 2,500 (n/4: 265; an H100, alternating,
#: gradients equal to 5e-13). From n = 80,000 on, n/32 is larger and the peak stays
#: ~1.3 n²; below, the panels add at most ~8 · 2,500 · n floats beside the n × n matrix.
#: Not on the CPU: there panels of 2,500 rows took 5.5 s where n/32 took 4.2 s (n = 6,000,
#: two cores; the smaller panels stay in cache).
PANEL_MIN_ROWS = 2500


def panel_rows(n, ops=None):
    """Rows per panel of the dense likelihood at n points on ``ops``' device (see
    SINGLE_PANEL_MAX_N, PANEL_FRACTION and, on the GPU, PANEL_MIN_ROWS)."""
    if n <= SINGLE_PANEL_MAX_N:
        return max(n, 1)
    rows = max(64, int(np.ceil(n * PANEL_FRACTION)))
    if getattr(ops, "memory", None) == "device":
        rows = max(rows, PANEL_MIN_ROWS)
    return min(n, rows)


class _LogMarginalLikelihood:
    """LML of fixed data under a kernel, and its gradient, on one backend.

    The gradient is ``½ Σ_t α_tᵀ (∂K/∂θ_j) α_t - ½ T tr(K⁻¹ ∂K/∂θ_j)`` with
    ``α = K⁻¹ y``; each ``∂K/∂θ_j`` is produced, contracted and dropped in turn, and
    ``tr(K⁻¹ B) = 2·vdot(P, B)`` with P the half inverse (one triangle, potri in place).

    Where every part of the kernel is evaluated on the backend, K is built and the
    gradient contracted in panels of rows (:func:`panel_rows`): the gradient is
    ``Σ_ik W_ik (∂K/∂θ_j)_ik`` with ``W = ½ααᵀ - T·P``, and each panel of W and of every
    ``∂K/∂θ_j`` is made, contracted and dropped in turn. Peak memory is then one n × n
    matrix and a few panels (1.3 n² float64 at most; on the GPU below n = 80,000, a few
    panels of ``PANEL_MIN_ROWS`` rows beside n²); otherwise (a part scikit-learn
    evaluates) a few n × n matrices. Never n × n × n_params.

    ``panel_rows``: rows per panel, None for :func:`panel_rows` of n.
    """

    def __init__(self, ops, X, y, alpha):
        self.ops = ops
        numeric = getattr(X, "dtype", np.dtype(object)).kind in "fiub"
        self.X = ops.asarray(X, dtype=np.float64) if numeric else X
        y = ops.asarray(y, dtype=np.float64)
        self.y = y.reshape(-1, 1) if y.ndim == 1 else y
        self.alpha = alpha if np.ndim(alpha) == 0 else ops.asarray(
            np.asarray(alpha, dtype=np.float64))
        self.n_evaluations = 0
        self.panel_rows = None
        self._spans = None

    def _column_spans(self):
        """X's columns' ``max - min`` (what the ARD gradients' route is chosen by), read
        from the device once and kept for every evaluation of this likelihood (its X does
        not change); None for X that is not numeric."""
        if self._spans is None and getattr(self.X, "dtype", np.dtype(object)).kind == "f":
            self._spans = column_spans(self.ops, self.X)
        return self._spans

    def _rows(self, kernel):
        """Rows per panel, or None where the kernel has no panels (a part evaluated by
        scikit-learn, or X not numeric)."""
        n = self.X.shape[0]
        if not (hasattr(self.X, "dtype") and self.X.dtype.kind == "f"
                and panels_supported(kernel)):
            return None
        return self.panel_rows or panel_rows(n, self.ops)

    def kernel_matrix(self, kernel, eval_gradient=False):
        """K + alpha·I (a fresh matrix) and, with ``eval_gradient``, the gradient thunks
        of the whole K (kernels without panels only; the panel path makes its own)."""
        xp, n = self.ops.xp, self.X.shape[0]
        rows = None if eval_gradient else self._rows(kernel)
        if rows is None or rows >= n:
            K, grads = evaluate(self.ops, kernel, self.X, None, eval_gradient,
                                spans=self._column_spans() if eval_gradient else None)
            Km = K.full(xp, (n, n))
            _diag_add(xp, Km, self.alpha)
            return Km, grads
        Km = xp.empty((n, n), dtype=np.float64)
        for start in range(0, n, rows):
            stop = min(n, start + rows)
            K, _ = evaluate(self.ops, kernel, self.X, None, False, rows=(start, stop))
            panel = Km[start:stop]
            if K.kind == "full":
                panel[...] = K.value
            else:
                panel[...] = K.full(xp, panel.shape)
            del K
            _diag_add(xp, panel, self.alpha if np.ndim(self.alpha) == 0
                      else self.alpha[start:stop], start)
        return Km, []

    def __call__(self, kernel, eval_gradient=False):
        start = time.perf_counter()
        out = self._evaluate(kernel, eval_gradient)
        logger.debug("LML evaluation %d on %s (n=%d%s): %.10g in %.3f s",
                     self.n_evaluations, self.ops.name, self.y.shape[0],
                     ", with gradient" if eval_gradient else "",
                     out[0] if eval_gradient else out, time.perf_counter() - start)
        return out

    def _evaluate(self, kernel, eval_gradient):
        from numpy.linalg import LinAlgError

        ops, xp, y = self.ops, self.ops.xp, self.y
        self.n_evaluations += 1
        rows = self._rows(kernel) if eval_gradient else None
        Km, grads = self.kernel_matrix(kernel, eval_gradient and rows is None)
        n = y.shape[0]
        try:
            factor = ops.cholesky(Km, what="kernel matrix", overwrite=True)
        except LinAlgError:
            # scikit-learn's convention: an impossible theta has likelihood -inf.
            return (-np.inf, np.zeros(kernel.n_dims)) if eval_gradient else -np.inf
        del Km
        a = factor.solve(y)
        lml = _lml_from(ops, y, a, factor.logdet())
        if not eval_gradient:
            return lml
        P = factor.half_inverse()
        del factor
        if rows is not None:
            return lml, self._panel_gradient(kernel, a, P, rows)
        # no panels (a part scikit-learn evaluates): the whole matrices, one panel of all
        grad = xp.zeros(kernel.n_dims)
        self._contract(grads, self._weights(a, xp.ascontiguousarray(a.T), P, 0, n), 0, grad)
        return lml, np.asarray(ops.to_host(grad), dtype=np.float64)

    def _weights(self, a, aT, P, start, stop):
        """Rows ``start:stop`` of ``W = ½ααᵀ - T·P``: the gradient is ``Σ_ik W_ik (∂K/∂θ_j)_ik``
        (½ Σ_t α_tᵀ ∂K α_t - ½ T tr(K⁻¹ ∂K), as tr(K⁻¹ B) = 2·vdot(P, B) for symmetric B)."""
        n_targets = self.y.shape[1]
        W = self.ops.matmul(a[start:stop], aT)
        W *= 0.5
        W -= P[start:stop] if n_targets == 1 else n_targets * P[start:stop]
        return W

    def _panel_gradient(self, kernel, a, P, rows):
        """The gradient panel by panel of rows: each panel's W and gradient terms made,
        contracted and dropped in turn."""
        n, xp = self.y.shape[0], self.ops.xp
        aT = xp.ascontiguousarray(a.T)
        grad = xp.zeros(kernel.n_dims)
        spans = self._column_spans()
        for start in range(0, n, rows):
            stop = min(n, start + rows)
            _, thunks = evaluate(self.ops, kernel, self.X, None, True, rows=(start, stop),
                                 spans=spans)
            assert len(thunks) == grad.size, "one gradient term per hyper-parameter"
            self._contract(thunks, self._weights(a, aT, P, start, stop), start, grad)
            del thunks  # this panel's kernel terms, before the next panel's are made
        return np.asarray(self.ops.to_host(grad), dtype=np.float64)

    def _contract(self, thunks, W, start, grad):
        """``grad[j] += Σ_ik W_ik (∂K/∂θ_j)_ik`` over the rows ``start:start + len(W)``,
        each ``∂K/∂θ_j`` (``thunks[j]()``) made and dropped in turn. ``grad`` is on the
        backend (the device's, on the GPU): the sums stay there, and the caller reads
        them once, after the last panel, where a read of each panel's sums waited for
        its kernels before the next panel's could be queued."""
        ops, xp = self.ops, self.ops.xp
        groups = {}  # 'sqdiff' terms by the matrix C they share: (C, [(j, x, scale)])
        for j, thunk in enumerate(thunks):
            term = thunk()
            if term.kind == "sqdiff":
                C, x, scale = term.value
                groups.setdefault(id(C), (C, []))[1].append((j, x, scale))
            elif term.kind == "full":
                grad[j] += xp.vdot(W, term.value)
            elif term.kind == "const":
                grad[j] += W.sum() * term.value
            elif term.kind == "diag":
                grad[j] += term.value @ xp.diagonal(W, offset=term.offset)
            else:
                raise AssertionError(f"unknown kernel term kind {term.kind!r}")
            del term
        # Σ_{i in rows, k} G_ik (x_i - x_k)² with G = C ∘ W is
        # Σ_i x_i² (G1)_i + Σ_k x_k² (1ᵀG)_k - 2 Σ_i x_i (Gx)_i: one weighted matrix per C,
        # then a GEMM with all of its input dimensions at once.
        for C, members in groups.values():
            G = C * W
            r, c = G.sum(axis=1), G.sum(axis=0)
            Xm = xp.stack([x for _, x, _ in members], axis=1)
            S = ops.matmul(G, Xm)
            del G
            Xp = Xm[start:start + W.shape[0]]
            quad = (Xp * Xp).T @ r + (Xm * Xm).T @ c - 2.0 * (Xp * S).sum(axis=0)
            for k, (j, _, scale) in enumerate(members):
                grad[j] += quad[k] * scale


def _predict(ops, kernel, X, X_train, lower, alpha, *, kdiag, return_std, return_cov):
    """Mean (and variance or covariance) in blocks of test rows; host arrays out."""
    xp = ops.xp
    X = ops.asarray(X, dtype=np.float64)
    m, n = X.shape[0], X_train.shape[0]
    if return_cov:
        Ks = evaluate(ops, kernel, X, X_train)[0].full(xp, (m, n))
        mean = ops.matmul(Ks, alpha)
        V = ops.solve_triangular(lower, xp.ascontiguousarray(Ks.T))
        del Ks
        cov = evaluate(ops, kernel, X)[0].full(xp, (m, m))
        cov -= ops.matmul(xp.ascontiguousarray(V.T), V)
        return ops.to_host(mean), ops.to_host(cov)
    # on the GPU, from a factor in its Fortran-ordered buffer: K(X_train, X*) evaluated
    # (the same numbers, transposed: C-ordered n × b is Fortran-ordered b × n) and solved
    # in place from the right, ~5 % faster than L⁻¹ K(X*, X_train)ᵀ from the left
    right = (return_std and getattr(lower, "flags", None) is not None
             and lower.flags.f_contiguous)
    block_bytes = max(_PREDICT_BLOCK_BYTES, int(PREDICT_BLOCK_FRACTION * 8 * n * n))
    block = max(1, min(m, block_bytes // (8 * n)))
    mean = np.empty((m, alpha.shape[1]))
    var = np.empty(m) if return_std else None
    for start in range(0, m, block):
        stop = min(m, start + block)
        if right:
            Ks = xp.asfortranarray(evaluate(ops, kernel, X_train, X[start:stop])[0].full(
                xp, (n, stop - start)).T)  # no copy for the C-ordered matrix
            mean[start:stop] = ops.to_host(ops.matmul(Ks, alpha))
            Y = ops.solve_triangular_right(lower, Ks)
            del Ks
            Y *= Y
            var[start:stop] = kdiag[start:stop] - ops.to_host(Y @ xp.ones(n))
            del Y
            continue
        Ks = evaluate(ops, kernel, X[start:stop], X_train)[0].full(xp, (stop - start, n))
        mean[start:stop] = ops.to_host(ops.matmul(Ks, alpha))
        if return_std:
            V = ops.solve_triangular(lower, Ks.T)  # Ks.T is Fortran-ordered: one copy
            del Ks
            V *= V
            var[start:stop] = kdiag[start:stop] - ops.to_host(xp.ones(n) @ V)
            del V
    return mean, var
