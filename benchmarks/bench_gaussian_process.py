"""GaussianProcessRegressor (dense Cholesky): skgpu beside scikit-learn and GPyTorch.

Run on the GPU host:  python benchmarks/bench_gaussian_process.py --out results.json
On a CPU-only machine: python benchmarks/bench_gaussian_process.py --quick
Kernel: ConstantKernel × RBF(ARD, d=8) + WhiteKernel, float64, data from a smooth function
of 8 inputs plus noise. LML values and gradients are checked against scikit-learn before
times are reported.
"""

import time

import numpy as np


from _harness import (
    GPU,
    PeakGPUMemory,
    machine,
    rel_diff,
    run_cases,
    standard_parser,
    sync,
    timeit,
)
from sklearn.gaussian_process import GaussianProcessRegressor as SkGPR
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

import skgpu
from skgpu.gaussian_process import GaussianProcessRegressor

D = 8


def kernel():
    return C(1.0) * RBF(np.ones(D)) + WhiteKernel(0.1)


def make_data(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, D))
    w = np.linspace(1.0, 0.2, D)
    y = np.sin(3 * X @ w) + 0.5 * np.cos(2 * X[:, 0] * X[:, 1]) + 0.1 * rng.standard_normal(n)
    return X, y


def theta_probe():
    return kernel().theta + 0.3


def bench_lml(n, results, device, repeats, sklearn_too):
    """One LML + gradient evaluation at a fixed theta."""
    X, y = make_data(n)
    row = {"case": f"LML + gradient, n={n}, d={D}", "device": device}
    with skgpu.config_context(device=device):
        gpr = GaussianProcessRegressor(kernel(), optimizer=None).fit(X, y)
        (lml, grad), t = timeit(lambda: gpr.log_marginal_likelihood(
            theta_probe(), eval_gradient=True), repeats)
    row[f"skgpu_{device}"] = t
    if sklearn_too:
        ref = SkGPR(kernel(), optimizer=None).fit(X, y)
        (lml_ref, grad_ref), t = timeit(lambda: ref.log_marginal_likelihood(
            theta_probe(), eval_gradient=True), 3)
        row["sklearn_cpu"] = t
        row["check_lml_rel_diff"] = abs(lml - lml_ref) / abs(lml_ref)
        row["check_grad_rel_diff"] = rel_diff(grad, grad_ref)
    results.append(row)
    return row


def bench_fit(n, results, device, sklearn_per_eval=None):
    X, y = make_data(n)
    row = {"case": f"fit (L-BFGS-B, default settings), n={n}, d={D}", "device": device}
    with skgpu.config_context(device=device):
        sync()
        start = time.perf_counter()
        gpr = GaussianProcessRegressor(kernel(), random_state=0).fit(X, y)
        sync()
        row[f"skgpu_{device}_fit_s"] = time.perf_counter() - start
    row["lml_evaluations"] = gpr._n_lml_evaluations
    row["log_marginal_likelihood"] = gpr.log_marginal_likelihood_value_
    row["theta"] = gpr.kernel_.theta.tolist()
    if sklearn_per_eval is not None:
        # scikit-learn's fit makes the same evaluations (same starts, same objective
        # to ~1e-9), each costing what one measured evaluation costs.
        row["sklearn_cpu_lml_eval_s"] = sklearn_per_eval
        row["sklearn_cpu_fit_estimate_s"] = sklearn_per_eval * gpr._n_lml_evaluations
    results.append(row)
    return gpr


def bench_sklearn_fit(n, results):
    X, y = make_data(n)
    start = time.perf_counter()
    ref = SkGPR(kernel(), random_state=0).fit(X, y)
    elapsed = time.perf_counter() - start
    results.append({"case": f"fit (L-BFGS-B, default settings), n={n}, d={D}",
                    "device": "cpu", "sklearn_cpu_fit_s": elapsed,
                    "log_marginal_likelihood": ref.log_marginal_likelihood_value_,
                    "theta": ref.kernel_.theta.tolist()})
    return ref


def bench_predict(gpr, m, results, repeats):
    rng = np.random.default_rng(5)
    Xt = rng.uniform(-1, 1, (m, D))
    n = gpr.X_train_.shape[0]
    row = {"case": f"predict(return_std=True), {m} test points, n={n}"}
    if GPU:
        import cupy as cp

        Xd = cp.asarray(Xt)
        (mean, std), t = timeit(lambda: gpr.predict(Xd, return_std=True), repeats)
        row["skgpu_gpu_cupy_input"] = t
        sub = slice(0, 500)
        ref = SkGPR(gpr.kernel_, optimizer=None)
        ref.fit(gpr.X_train_, gpr.y_train_) if n <= 5000 else None
        if n <= 5000:
            m_ref, s_ref = ref.predict(Xt[sub], return_std=True)
            row["check_mean_rel_diff"] = rel_diff(cp.asnumpy(mean[sub]), m_ref)
            row["check_std_rel_diff"] = rel_diff(cp.asnumpy(std[sub]), s_ref)
    results.append(row)


def bench_gpytorch(n, results, repeats):
    """One exact-GP training step (Cholesky, float64) in GPyTorch, the GP peer."""
    try:
        import gpytorch
        import torch
    except Exception as exc:  # report, do not hide
        results.append({"case": f"GPyTorch training step, n={n}", "error": repr(exc)})
        return
    X, y = make_data(n)
    Xt = torch.as_tensor(X, device="cuda")
    yt = torch.as_tensor(y, device="cuda")

    class Model(gpytorch.models.ExactGP):
        def __init__(self, x, t, likelihood):
            super().__init__(x, t, likelihood)
            self.mean_module = gpytorch.means.ZeroMean()
            self.covar_module = gpytorch.kernels.ScaleKernel(
                gpytorch.kernels.RBFKernel(ard_num_dims=D))

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x),
                                                             self.covar_module(x))

    likelihood = gpytorch.likelihoods.GaussianLikelihood().cuda().double()
    model = Model(Xt, yt, likelihood).cuda().double()
    model.train()
    likelihood.train()
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, model)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    row = {"case": f"GPyTorch exact GP training step (Cholesky, float64), n={n}, d={D}"}
    for label, flag in (("cholesky", True), ("cg_default", False)):
        def step():
            with gpytorch.settings.fast_computations(covar_root_decomposition=not flag,
                                                     log_prob=not flag, solves=not flag), \
                    gpytorch.settings.max_cholesky_size(10**9 if flag else 800):
                opt.zero_grad()
                loss = -mll(model(Xt), yt)
                loss.backward()
                opt.step()
            torch.cuda.synchronize()

        try:
            _, t = timeit(step, repeats)
            row[f"gpytorch_{label}_step"] = t
        except Exception as exc:
            row[f"gpytorch_{label}_error"] = repr(exc)
    results.append(row)
    torch.cuda.empty_cache()


def large_n(n, results):
    import cupy as cp

    cp.get_default_memory_pool().free_all_blocks()
    X, y = make_data(n)
    row = {"case": f"n={n}: one LML + gradient evaluation and the final factorisation "
                   "(optimizer=None) on the GPU"}
    with PeakGPUMemory() as mem:
        start = time.perf_counter()
        gpr = GaussianProcessRegressor(kernel(), optimizer=None).fit(X, y)
        gpr.log_marginal_likelihood(theta_probe(), eval_gradient=True)
        sync()
        row["skgpu_gpu_s"] = time.perf_counter() - start
    row["peak_gpu_bytes"] = mem.bytes
    row["backend"] = gpr.backend_
    results.append(row)


def main():
    parser = standard_parser(__doc__.splitlines()[0])
    parser.add_argument("--sklearn-fit", action="store_true",
                        help="also time scikit-learn's whole fit at n=3000 (minutes)")
    args = parser.parse_args()
    results = []
    state = {}

    def fit_large():
        state["gpr"] = bench_fit(20000, results, "gpu")

    if args.quick:
        cases = [lambda: bench_lml(500, results, "cpu", 3, True),
                 lambda: bench_fit(300, results, "cpu")]
    else:
        cases = [
            lambda: state.update(small=bench_lml(3000, results, "gpu", 5, True)),
            lambda: bench_lml(2000, results, "cpu", 3, True),
            lambda: bench_fit(3000, results, "gpu",
                              sklearn_per_eval=state["small"]["sklearn_cpu"]["median_s"]),
            lambda: bench_sklearn_fit(3000, results) if args.sklearn_fit else None,
            lambda: bench_lml(20000, results, "gpu", 3, False),
            fit_large,
            lambda: bench_predict(state.pop("gpr"), 100_000, results, 3),
            lambda: bench_gpytorch(20000, results, 3),
            lambda: large_n(50000, results),
        ]
    doc = {"machine": machine(), "results": results}
    run_cases(cases, doc, args.out)


if __name__ == "__main__":
    main()
