"""scikit-learn kernels evaluated on a backend, with their gradients one at a time.

``evaluate(ops, kernel, X, Y, eval_gradient)`` returns a :class:`_Term` for K and, with
``eval_gradient``, a list of thunks, one per entry of ``kernel.theta``, each returning
``dK/dθ_j`` as a :class:`_Term`. Nothing ever holds the n × n × n_params tensor
scikit-learn builds: the log-marginal-likelihood gradient contracts each ``dK/dθ_j`` as it
is produced.

Terms keep structure: a constant (``c·11ᵀ``), a diagonal (``diag(v)``, only for K(X, X))
or a full matrix, so that ConstantKernel and WhiteKernel cost nothing n × n.

``rows=(start, stop)`` evaluates only those rows of the symmetric K(X, X) (and of its
gradients): a panel of ``stop - start`` rows by n columns, whose diagonal entries are
``(i, start + i)``. The dense likelihood builds K and contracts its gradients panel by
panel, so that it never holds more than one n × n matrix; a kernel with a part
scikit-learn evaluates has no panels (see :func:`panels_supported`).

Supported exactly as scikit-learn computes them: RBF (isotropic and ARD), Matern
(nu 0.5, 1.5, 2.5, inf; isotropic and ARD), RationalQuadratic, ExpSineSquared,
DotProduct, WhiteKernel, ConstantKernel, and Sum / Product / Exponentiation of those.
Any other kernel is evaluated by scikit-learn on the host and moved (see
:func:`unsupported_reason`).
"""

from __future__ import annotations

import numpy as np
from sklearn.gaussian_process import kernels as skk


class _Term:
    """``kind`` is 'const' (value: float), 'diag' (value: vector), 'full' (matrix) or
    'sqdiff' (value: ``(C, x, s)``, the matrix ``s·C ∘ (x_i - x_k)²``: the gradient of
    an ARD kernel along one input dimension, kept factored so that the likelihood
    gradient can contract all dimensions with one weighted matrix and a GEMV each).

    ``owned`` marks a full matrix that no gradient thunk refers to, so it may be
    updated in place (the results of sums and products are; a base kernel's are not).

    ``offset``: in a panel of rows ``start:stop`` (see :func:`evaluate`), the column of
    the first diagonal entry, ``start``; a 'diag' term's value then has the panel's
    length, and a 'sqdiff' term's x is the whole column, its rows ``x[start:stop]``.
    """

    __slots__ = ("kind", "value", "owned", "offset")

    def __init__(self, kind, value, owned=False, offset=0):
        self.kind, self.value, self.owned, self.offset = kind, value, owned, offset

    def full(self, xp, shape):
        """A dense matrix that may be modified in place (a copy unless owned)."""
        if self.kind == "full":
            return self.value if self.owned else self.value.copy()
        if self.kind == "sqdiff":
            C, x, scale = self.value
            diff = x[self.offset:self.offset + C.shape[0], None] - x[None, :]
            diff *= diff
            diff *= C
            return diff * scale if scale != 1.0 else diff
        out = xp.full(shape, self.value if self.kind == "const" else 0.0, dtype=np.float64)
        if self.kind == "diag":
            _diag_add(xp, out, self.value, self.offset)
        return out


def _diag_add(xp, M, v, offset=0):
    """``M[i, offset + i] += v[i]`` (or the scalar v) along M's diagonal from column
    ``offset``: the diagonal of K(X, X) in a panel of its rows."""
    n = min(M.shape[0], M.shape[1] - offset)
    idx = xp.arange(n)
    M[idx, idx + offset] += v


def _add(a, b, xp, shape):
    """The sum of two terms of K (or of two gradient terms) of the given shape."""
    if a.kind == b.kind and a.kind in ("const", "diag"):
        return _Term(a.kind, a.value + b.value, offset=a.offset)
    if a.kind == "full" and b.kind == "full":
        return _Term("full", a.value + b.value, owned=True)
    if "full" in (a.kind, b.kind):
        f, o = (a, b) if a.kind == "full" else (b, a)
        if o.kind == "const":
            return _Term("full", f.value + o.value, owned=True)
        out = f.full(xp, f.value.shape)
        _diag_add(xp, out, o.value, o.offset)
        return _Term("full", out, owned=True)
    c, d = (a, b) if a.kind == "const" else (b, a)
    out = xp.full(shape, c.value, dtype=np.float64)
    _diag_add(xp, out, d.value, d.offset)
    return _Term("full", out, owned=True)


def _mul(a, b, xp):
    if "sqdiff" in (a.kind, b.kind):  # a gradient term times a kernel term
        g, o = (a, b) if a.kind == "sqdiff" else (b, a)
        C, x, scale = g.value
        if o.kind == "const":
            return _Term("sqdiff", (C, x, scale * o.value), offset=g.offset)
        if o.kind == "diag":  # (x_i - x_i)² = 0 on the diagonal
            return _Term("diag", xp.zeros(C.shape[0], dtype=np.float64), offset=g.offset)
        return _Term("full", g.full(xp, None) * o.value, owned=True)
    if a.kind == "const" and b.kind == "const":
        return _Term("const", a.value * b.value)
    if a.kind == "const" or b.kind == "const":
        c, o = (a, b) if a.kind == "const" else (b, a)
        return _Term(o.kind, o.value * c.value, owned=True, offset=o.offset)
    if a.kind == "diag" or b.kind == "diag":
        d, o = (a, b) if a.kind == "diag" else (b, a)
        other = o.value if o.kind == "diag" else xp.diagonal(o.value, offset=d.offset)
        return _Term("diag", d.value * other, offset=d.offset)
    return _Term("full", a.value * b.value, owned=True)


SUPPORTED = (skk.Sum, skk.Product, skk.Exponentiation, skk.ConstantKernel, skk.WhiteKernel,
             skk.RBF, skk.Matern, skk.RationalQuadratic, skk.ExpSineSquared, skk.DotProduct)


def unsupported_reason(kernel):
    """None if ``kernel`` is evaluated on the backend, else why it goes to scikit-learn."""
    t = type(kernel)
    if t in (skk.Sum, skk.Product):
        return unsupported_reason(kernel.k1) or unsupported_reason(kernel.k2)
    if t is skk.Exponentiation:
        return unsupported_reason(kernel.kernel)
    if t not in SUPPORTED:
        return f"{t.__name__} is evaluated by scikit-learn on the host"
    if t is skk.Matern and kernel.nu not in (0.5, 1.5, 2.5, np.inf):
        return f"Matern(nu={kernel.nu}) is evaluated by scikit-learn on the host"
    if t is skk.ConstantKernel and np.ndim(kernel.constant_value) != 0:
        return "a ConstantKernel with an array value is evaluated by scikit-learn"
    if t is skk.WhiteKernel and np.ndim(kernel.noise_level) != 0:
        return "a WhiteKernel with an array noise level is evaluated by scikit-learn"
    if t is skk.DotProduct and np.ndim(kernel.sigma_0) != 0:
        return "a DotProduct with an array sigma_0 is evaluated by scikit-learn"
    if t is skk.ExpSineSquared and (np.ndim(kernel.length_scale) != 0
                                    or np.ndim(kernel.periodicity) != 0):
        return "an ExpSineSquared with array parameters is evaluated by scikit-learn"
    return None


def _length_scales(kernel, X):
    ls = np.atleast_1d(np.asarray(kernel.length_scale, dtype=np.float64))
    if ls.size > 1 and ls.size != X.shape[1]:
        raise ValueError(
            "Anisotropic kernel must have the same number of dimensions as data "
            f"({ls.size}!={X.shape[1]})"
        )
    return ls


# The formulas of the stationary kernels as functions of squared distances, shared by
# the dense evaluation here and the pairwise one of the sparse path (``_sparse``).
def matern_nu(kernel):
    return np.inf if type(kernel) is skk.RBF else float(kernel.nu)


def matern_values(xp, r2, nu):
    """K of RBF (nu = inf) / Matern at scaled squared distances ``r2``, and a function
    giving C with ∂K/∂log l = C · r² (per ARD dimension: C · ((x_d - y_d)/l_d)²)."""
    if nu == np.inf:
        K = xp.exp(-0.5 * r2)
        return K, lambda: K
    r = xp.sqrt(r2)
    if nu == 0.5:
        K = xp.exp(-r)

        def common():
            with np.errstate(divide="ignore", invalid="ignore"):
                return xp.where(r > 0, K / xp.where(r > 0, r, 1.0), 0.0)
    elif nu == 1.5:
        s = r * np.sqrt(3.0)
        K = (1.0 + s) * xp.exp(-s)

        def common():
            return 3.0 * xp.exp(-np.sqrt(3.0) * r)
    elif nu == 2.5:
        s = r * np.sqrt(5.0)
        K = (1.0 + s + s * s / 3.0) * xp.exp(-s)

        def common():
            sr = np.sqrt(5.0) * r
            return 5.0 / 3.0 * (sr + 1.0) * xp.exp(-sr)
    else:
        # other nu need the modified Bessel function: callers hand them to scikit-learn
        # (see unsupported_reason)
        raise ValueError(f"no closed form for Matern nu={nu}; it is evaluated by "
                         "scikit-learn")
    return K, common


def rq_values(xp, d2, kernel, eval_gradient):
    """RationalQuadratic at squared distances: K and its gradient functions (theta order:
    alpha, then length_scale)."""
    if np.iterable(kernel.length_scale) and np.size(kernel.length_scale) > 1:
        raise AttributeError(
            "RationalQuadratic kernel only supports isotropic version, please use a "
            "single scalar for length_scale"
        )
    ls, a = float(np.ravel(kernel.length_scale)[0]), float(kernel.alpha)
    base = 1.0 + d2 / (2.0 * a * ls**2)
    K = base**-a
    fns = []
    if eval_gradient:
        if not kernel.hyperparameter_alpha.fixed:
            fns.append(lambda: K * (-a * xp.log(base) + d2 / (2.0 * ls**2 * base)))
        if not kernel.hyperparameter_length_scale.fixed:
            fns.append(lambda: d2 * K / (ls**2 * base))
    return K, fns


def exp_sine_squared_values(xp, d2, kernel, eval_gradient):
    """ExpSineSquared at squared distances: K and its gradient functions (theta order:
    length_scale, then periodicity)."""
    ls, p = float(kernel.length_scale), float(kernel.periodicity)
    arg = (np.pi / p) * xp.sqrt(d2)
    sin_arg = xp.sin(arg)
    K = xp.exp(-2.0 * (sin_arg / ls) ** 2)
    fns = []
    if eval_gradient:
        if not kernel.hyperparameter_length_scale.fixed:
            fns.append(lambda: 4.0 / ls**2 * sin_arg**2 * K)
        if not kernel.hyperparameter_periodicity.fixed:
            fns.append(lambda: 4.0 / ls**2 * arg * xp.cos(arg) * sin_arg * K)
    return K, fns


def panels_supported(kernel):
    """Whether K(X, X) of ``kernel`` can be evaluated by panels of rows (``rows=``):
    every part evaluated here, none handed to scikit-learn."""
    return unsupported_reason(kernel) is None


def evaluate(ops, kernel, X, Y=None, eval_gradient=False, rows=None, spans=None):
    """K(X, Y) (Y None: K(X, X)) as a term, and gradient thunks if asked.

    ``rows=(start, stop)`` (Y None only): the rows ``start:stop`` of K(X, X) and of its
    gradients, each term of shape ``(stop - start, n)`` with its diagonal entries at
    ``(i, start + i)``; every part of the kernel must be evaluated here
    (:func:`panels_supported`).

    ``spans``: X's columns' ``max - min`` on the host (:func:`column_spans`), which the
    gradients of ARD kernels need; a caller evaluating panel after panel passes it once
    made, else each evaluation works it out (a read from the device)."""
    xp = ops.xp
    t = type(kernel)
    symmetric = Y is None
    Yv = X if symmetric else Y
    if rows is not None and not symmetric:
        raise ValueError("rows= panels are of K(X, X) only")
    start, stop = rows if rows is not None else (0, X.shape[0])
    Xr = X if rows is None else X[start:stop]  # the panel's rows
    shape = (stop - start, Yv.shape[0])
    grads = []
    # Each part of a composite is decided on its own: a Matern(nu=1.2) inside a sum goes
    # to scikit-learn, the rest stays on the backend.
    if t not in (skk.Sum, skk.Product, skk.Exponentiation) and unsupported_reason(kernel):
        if rows is not None:
            raise ValueError(f"{t.__name__} is evaluated by scikit-learn, which has no "
                             "panels of rows (see panels_supported)")
        return _evaluate_by_sklearn(ops, kernel, X, Y, eval_gradient)

    if t in (skk.Sum, skk.Product, skk.Exponentiation):
        return _evaluate_composite(ops, kernel, X, Y, eval_gradient, rows, shape, spans)
    if t is skk.ConstantKernel:
        c = float(kernel.constant_value)
        if eval_gradient and not kernel.hyperparameter_constant_value.fixed:
            grads = [lambda: _Term("const", c)]
        return _Term("const", c), grads
    if t is skk.WhiteKernel:
        noise = float(kernel.noise_level)
        if not symmetric:
            return _Term("const", 0.0), []
        n = stop - start
        if eval_gradient and not kernel.hyperparameter_noise_level.fixed:
            grads = [lambda: _Term("diag", xp.full(n, noise, dtype=np.float64),
                                   offset=start)]
        return _Term("diag", xp.full(n, noise, dtype=np.float64), offset=start), grads
    if t is skk.DotProduct:
        s2 = float(kernel.sigma_0) ** 2
        K = ops.matmul(Xr, xp.ascontiguousarray(Yv.T)) + s2
        if eval_gradient and not kernel.hyperparameter_sigma_0.fixed:
            grads = [lambda: _Term("const", 2.0 * s2)]
        return _Term("full", K, owned=True), grads

    if t in (skk.RBF, skk.Matern):
        return _evaluate_rbf_matern(ops, kernel, X, Yv, start, stop, symmetric,
                                    eval_gradient, spans)

    if t in (skk.RationalQuadratic, skk.ExpSineSquared):
        d2 = ops.sq_dist(Xr, Yv)
        if symmetric:
            _zero_diagonal(xp, d2, start)
        values = rq_values if t is skk.RationalQuadratic else exp_sine_squared_values
        K, fns = values(xp, d2, kernel, eval_gradient)
        del d2  # what the gradients need, they hold
        grads = [(lambda f=f: _Term("full", f())) for f in fns]
        return _Term("full", K, owned=not grads), grads

    # unsupported_reason lists every type handled above; reaching here is a bug
    raise AssertionError(f"{t.__name__} passed unsupported_reason but has no evaluation")


def _evaluate_composite(ops, kernel, X, Y, eval_gradient, rows, shape, spans=None):
    """A Sum, Product or Exponentiation: its parts evaluated (each on its own route),
    then combined, with the gradients by the sum and product rules."""
    xp = ops.xp
    if type(kernel) is skk.Exponentiation:
        K1, g1 = evaluate(ops, kernel.kernel, X, Y, eval_gradient, rows, spans)
        e = float(kernel.exponent)
        K = _Term(K1.kind, K1.value**e, owned=True, offset=K1.offset)
        grads = []
        if g1:
            factor = _Term(K1.kind, e * K1.value ** (e - 1), offset=K1.offset)
            grads = [(lambda g=g: _mul(g(), factor, xp)) for g in g1]
        return K, grads
    K1, g1 = evaluate(ops, kernel.k1, X, Y, eval_gradient, rows, spans)
    K2, g2 = evaluate(ops, kernel.k2, X, Y, eval_gradient, rows, spans)
    if type(kernel) is skk.Sum:
        return _add(K1, K2, xp, shape), g1 + g2
    grads = [(lambda g=g: _mul(g(), K2, xp)) for g in g1]
    grads += [(lambda g=g: _mul(K1, g(), xp)) for g in g2]
    return _mul(K1, K2, xp), grads


def _evaluate_rbf_matern(ops, kernel, X, Yv, start, stop, symmetric, eval_gradient,
                         spans=None):
    """RBF or Matern (isotropic or ARD) on squared distances of X scaled by the length
    scales; the ARD gradient per feature as a deferred squared-difference term where that
    is exact enough (:func:`_ard_gradient`), else as the matrix itself."""
    xp = ops.xp
    ls = _length_scales(kernel, X)
    ard = ls.size > 1
    scale = ops.asarray(ls if ard else np.full(X.shape[1], ls[0]))
    Xs = X / scale
    r2 = ops.sq_dist(Xs[start:stop], Xs if symmetric else Yv / scale)
    if symmetric:
        _zero_diagonal(xp, r2, start)
    K, common_of = matern_values(xp, r2, matern_nu(kernel))
    grads = []
    if eval_gradient and not kernel.hyperparameter_length_scale.fixed:
        common = common_of()
        if ard:
            spans = column_spans(ops, X) if spans is None else spans
            grads = [(lambda d=d: _ard_gradient(common, X[:, d], float(ls[d]),
                                                float(spans[d]), start))
                     for d in range(X.shape[1])]
        else:
            grads = [lambda: _Term("full", common * r2)]
    return _Term("full", K, owned=not grads), grads


#: The widest column, in its length scales, whose ARD gradient is contracted through the
#: expansion ``(x_i - x_k)² = x_i² + x_k² - 2 x_i x_k`` (a 'sqdiff' term: one GEMM for all
#: dimensions). The expansion's rounding is ~u·x² per pair where the pair's own terms are
#: (x_i - x_k)², and the pairs that matter lie within a few length scales: against exact
#: rational arithmetic, its error over the sum's condition (Σ of absolute terms) was
#: 3e-14 at a span of 64 length scales, 1e-12 at 256 and 2e-6 at 1,024 (kernel-like
#: weights on 40 sorted points, six seeds). A wider column (data spread over more length
#: scales, e.g. unscaled features under the default length scale) takes the differences
#: per pair, scikit-learn's formula: at a span of 10⁸ the expansion's gradient was O(1)
#: where the exact one is 0.
EXPANSION_MAX_SPAN = 64.0


def column_spans(ops, X):
    """Each column's ``max - min`` on the host: the bound on the centred column that
    chooses the ARD gradient's route (:data:`EXPANSION_MAX_SPAN`)."""
    spans = X.max(axis=0) - X.min(axis=0)
    return np.asarray(ops.to_host(spans), dtype=np.float64)


def _ard_gradient(C, x, length_scale, span, offset):
    """``∂K/∂log l_d = C ∘ ((x_i - x_k) / l_d)²`` for the rows ``offset:offset + len(C)``
    of an ARD kernel, x its input column unscaled.

    Within :data:`EXPANSION_MAX_SPAN` length scales, a 'sqdiff' term on the column
    centred before it is scaled (far from the origin, ``x - mean`` is exact where
    ``x / l - mean`` rounded the differences away: 1.8e-4 relative at an offset of 10¹²);
    wider, the matrix from the differences themselves."""
    if span <= EXPANSION_MAX_SPAN * length_scale:
        return _Term("sqdiff", (C, (x - x.mean()) / length_scale, 1.0), offset=offset)
    D = x[offset:offset + C.shape[0], None] - x[None, :]
    D *= D
    D *= C
    D /= length_scale ** 2
    return _Term("full", D, owned=True)


def _zero_diagonal(xp, D, offset):
    """Exact zeros on the diagonal of K(X, X)'s squared distances (rows from ``offset``)."""
    idx = xp.arange(min(D.shape[0], D.shape[1] - offset))
    D[idx, idx + offset] = 0.0


def _evaluate_by_sklearn(ops, kernel, X, Y, eval_gradient):
    """K (and the gradient's slices) from scikit-learn's own evaluation on the host,
    moved to the backend."""
    symmetric = Y is None
    Xh, Yh = ops.to_host(X), None if symmetric else ops.to_host(Y)
    grads = []
    if eval_gradient:
        K, G = kernel(Xh, Yh, eval_gradient=True)
        grads = [(lambda j=j: _Term("full", ops.asarray(np.ascontiguousarray(G[:, :, j]))))
                 for j in range(G.shape[2])]
    else:
        K = kernel(Xh, Yh)
    return _Term("full", ops.asarray(np.asarray(K, dtype=np.float64)), owned=True), grads
