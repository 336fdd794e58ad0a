"""The whole benchmark suite in one command: every estimator, every implementation, n swept.

    python benchmarks/run_all.py                 # GPU host: full sizes (~2-3 minutes)
    python benchmarks/run_all.py --quick         # any machine, CPU only, ~9 s on 2 cores
    python benchmarks/run_all.py --check         # the guard (benchmarks/_guard.py): rows
                                                 # against the committed baseline
    python benchmarks/run_all.py --check --scale 2 --report-only  # its GPU rows at 2x sizes
    python benchmarks/run_all.py --check --against main  # the rows in turns with main's tree
    python benchmarks/run_all.py --profile F.json  # GPU host: where each guard row's time
                                                   # goes (benchmarks/profile_rows.py)
    python benchmarks/run_all.py --plot-from benchmarks/results/suite_h200.json

Writes ``suite_<tag>.json`` (machine, library versions, one row per measurement: median,
min, max, repeats, peak GPU memory where measured, and the agreement with scikit-learn),
``suite_<tag>.md`` (a table) and PNG plots (speed-up over scikit-learn per estimator at
the largest size both ran; time against n on log axes per estimator) into ``--out-dir``.
Implementations: skgpu on the GPU and on the CPU, scikit-learn on all cores,
scikit-learn's Array API mode on CuPy where it supports the estimator, GPyTorch for GP
regression. Each implementation has a largest size beyond which it is not run (the
scikit-learn GP at n = 20,000 would take hours); the JSON says which sizes ran.
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np


from _harness import GPU, PeakGPUMemory, machine, rel_diff, timeit

import skgpu

if GPU:
    import cupy as cp


def _sklearn_array_api():
    """A context for scikit-learn's Array API dispatch (SCIPY_ARRAY_API must be set)."""
    import sklearn

    os.environ.setdefault("SCIPY_ARRAY_API", "1")
    return sklearn.config_context(array_api_dispatch=True)


class Suite:
    def __init__(self, quick):
        self.quick = quick
        self.rows = []
        self.min_repeats = 2 if quick else 3

    def measure(self, estimator, operation, n, p, impl, func, repeats, reference=None,
                compare=None, memory=False):
        """Time ``func``; compare its result with ``reference`` through ``compare``."""
        row = {"estimator": estimator, "operation": operation, "n": n, "p": p, "impl": impl}
        try:
            if memory and GPU:
                with PeakGPUMemory() as mem:
                    func()
                row["peak_gpu_bytes"] = mem.bytes
            # every row alike: one warm-up, then at least MIN_REPEATS timed runs (the GPU
            # rows ask for more: they are short and vary more from run to run)
            out, t = timeit(func, max(repeats, self.min_repeats), warmup=1)
            row.update(t)
            if reference is not None and compare is not None:
                row["rel_diff_vs_sklearn"] = float(compare(out, reference))
        except Exception as exc:  # recorded, not hidden; the suite goes on
            row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            out = None
        self.rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "repeats"}), flush=True)
        return out


def bench_pca(s, sizes, p):
    from sklearn import decomposition as skd

    from skgpu.decomposition import PCA

    for n in sizes:
        rng = np.random.default_rng(0)
        X = (rng.standard_normal((n, 32)) @ rng.standard_normal((32, p))
             + rng.standard_normal((n, p)) + rng.uniform(-3, 3, p)).astype(np.float32)
        params = dict(n_components=16, svd_solver="covariance_eigh")

        def compare(a, b):
            signs = np.sign(np.sum(a.components_ * b.components_, axis=1))[:, None]
            return rel_diff(a.components_ * signs, b.components_)

        ref = s.measure("PCA", "fit", n, p, "sklearn-cpu",
                        lambda: skd.PCA(**params).fit(X), 3)
        with skgpu.config_context(device="cpu"):
            s.measure("PCA", "fit", n, p, "skgpu-cpu", lambda: PCA(**params).fit(X), 3, ref,
                      compare)
        if GPU:
            Xd = cp.asarray(X)
            s.measure("PCA", "fit", n, p, "skgpu-gpu", lambda: PCA(**params).fit(Xd), 7, ref,
                      compare, memory=True)
            with _sklearn_array_api():
                s.measure("PCA", "fit", n, p, "sklearn-array-api-cupy",
                          lambda: skd.PCA(**params).fit(Xd), 7)
            del Xd


def bench_tsvd(s, sizes, p, density):
    import scipy.sparse as sp
    from sklearn import decomposition as skd

    from skgpu.decomposition import TruncatedSVD

    for n in sizes:
        # Entries drawn directly: sp.random with a legacy RandomState permutes all n·p
        # positions (400 GB at 500,000 × 100,000).
        rng = np.random.default_rng(1)
        nnz = int(density * n * p)
        X = sp.csr_matrix((rng.uniform(0.1, 1.0, nnz).astype(np.float32),
                           (rng.integers(0, n, nnz), rng.integers(0, p, nnz))),
                          shape=(n, p))
        params = dict(n_components=32, n_iter=5, random_state=0)

        def compare(a, b):
            return rel_diff(a.singular_values_, b.singular_values_)

        ref = s.measure("TruncatedSVD", "fit", n, p, "sklearn-cpu",
                        lambda: skd.TruncatedSVD(**params).fit(X), 1)
        with skgpu.config_context(device="cpu"):
            s.measure("TruncatedSVD", "fit", n, p, "skgpu-cpu",
                      lambda: TruncatedSVD(**params).fit(X), 2, ref, compare)
        if GPU:
            import cupyx.scipy.sparse as csp

            Xd = csp.csr_matrix(X)
            s.measure("TruncatedSVD", "fit", n, p, "skgpu-gpu",
                      lambda: TruncatedSVD(**params).fit(Xd), 5, ref, compare)


def bench_ridgecv(s, sizes, p):
    from sklearn import linear_model as skl

    from skgpu.linear_model import RidgeCV

    alphas = np.logspace(-2, 4, 20)
    for n in sizes:
        rng = np.random.default_rng(0)
        X = rng.standard_normal((n, p)) * rng.uniform(0.5, 2, p) + rng.uniform(-3, 3, p)
        y = X @ rng.standard_normal(p) + np.sqrt(p) * rng.standard_normal(n)

        def compare(a, b):
            return rel_diff(a.coef_, b.coef_) + (0.0 if a.alpha_ == b.alpha_ else 1.0)

        ref = s.measure("RidgeCV", "fit (LOO, 20 alphas)", n, p, "sklearn-cpu",
                        lambda: skl.RidgeCV(alphas=alphas).fit(X, y), 1)
        with skgpu.config_context(device="cpu"):
            s.measure("RidgeCV", "fit (LOO, 20 alphas)", n, p, "skgpu-cpu",
                      lambda: RidgeCV(alphas=alphas).fit(X, y), 2, ref, compare)
        if GPU:
            Xd, yd = cp.asarray(X), cp.asarray(y)
            s.measure("RidgeCV", "fit (LOO, 20 alphas)", n, p, "skgpu-gpu",
                      lambda: RidgeCV(alphas=alphas).fit(Xd, yd), 7, ref, compare)
            with _sklearn_array_api():
                s.measure("RidgeCV", "fit (LOO, 20 alphas)", n, p, "sklearn-array-api-cupy",
                          lambda: skl.RidgeCV(alphas=alphas).fit(Xd, yd), 5)
            del Xd, yd


def bench_ridge(s, sizes, p):
    from sklearn import linear_model as skl

    from skgpu.linear_model import Ridge

    for n in sizes:
        rng = np.random.default_rng(1)
        X = rng.standard_normal((n, p)) * rng.uniform(0.5, 2, p) + rng.uniform(-3, 3, p)
        Y = X @ rng.standard_normal((p, 4)) + np.sqrt(p) * rng.standard_normal((n, 4))

        def compare(a, b):
            return rel_diff(a.coef_, b.coef_)

        op = "fit (alpha=1, 4 targets)"
        ref = s.measure("Ridge", op, n, p, "sklearn-cpu", lambda: skl.Ridge(1.0).fit(X, Y), 3)
        with skgpu.config_context(device="cpu"):
            s.measure("Ridge", op, n, p, "skgpu-cpu", lambda: Ridge(1.0).fit(X, Y), 3, ref,
                      compare)
        if GPU:
            Xd, Yd = cp.asarray(X), cp.asarray(Y)
            s.measure("Ridge", op, n, p, "skgpu-gpu", lambda: Ridge(1.0).fit(Xd, Yd), 7, ref,
                      compare)
            with _sklearn_array_api():
                s.measure("Ridge", op, n, p, "sklearn-array-api-cupy",
                          lambda: skl.Ridge(1.0, solver="svd").fit(Xd, Yd), 5)
            del Xd, Yd


def bench_gp(s, sizes, sklearn_max, cpu_max):
    from sklearn.gaussian_process import GaussianProcessRegressor as SkGPR
    from sklearn.gaussian_process.kernels import RBF, WhiteKernel
    from sklearn.gaussian_process.kernels import ConstantKernel as C

    from skgpu.gaussian_process import GaussianProcessRegressor

    d = 8
    for n in sizes:
        rng = np.random.default_rng(0)
        X = rng.uniform(-1, 1, (n, d))
        y = np.sin(3 * X @ np.linspace(1, 0.2, d)) + 0.1 * rng.standard_normal(n)
        kernel = C(1.0) * RBF(np.ones(d)) + WhiteKernel(0.1)
        theta = kernel.theta + 0.3
        op = "LML + gradient (one optimizer step)"

        def compare(a, b):
            return abs(a[0] - b[0]) / abs(b[0]) + rel_diff(a[1], b[1])

        ref = None
        if n <= sklearn_max:
            sk = SkGPR(kernel, optimizer=None).fit(X, y)
            ref = s.measure("GaussianProcessRegressor", op, n, d, "sklearn-cpu",
                            lambda: sk.log_marginal_likelihood(theta, eval_gradient=True), 1)
        if n <= cpu_max:
            with skgpu.config_context(device="cpu"):
                ours = GaussianProcessRegressor(kernel, optimizer=None).fit(X, y)
                s.measure("GaussianProcessRegressor", op, n, d, "skgpu-cpu",
                          lambda: ours.log_marginal_likelihood(theta, eval_gradient=True),
                          2, ref, compare)
        if GPU:
            ours = GaussianProcessRegressor(kernel, optimizer=None).fit(X, y)
            s.measure("GaussianProcessRegressor", op, n, d, "skgpu-gpu",
                      lambda: ours.log_marginal_likelihood(theta, eval_gradient=True),
                      3, ref, compare, memory=True)
            del ours
            step = _gpytorch_step(X, y)
            if step is not None:
                s.measure("GaussianProcessRegressor", op, n, d, "gpytorch-cholesky", step, 3)


def _gpytorch_step(X, y):
    """One exact-GP training step (Cholesky, float64) in GPyTorch, or None."""
    try:
        import gpytorch
        import torch
    except Exception:
        return None
    Xt = torch.as_tensor(X, device="cuda")
    yt = torch.as_tensor(y, device="cuda")

    class Model(gpytorch.models.ExactGP):
        def __init__(self):
            super().__init__(Xt, yt, gpytorch.likelihoods.GaussianLikelihood())
            self.mean_module = gpytorch.means.ZeroMean()
            self.covar_module = gpytorch.kernels.ScaleKernel(
                gpytorch.kernels.RBFKernel(ard_num_dims=X.shape[1]))

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x),
                                                             self.covar_module(x))

    model = Model().cuda().double()
    model.train()
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)

    def step():
        with gpytorch.settings.fast_computations(False, False, False), \
                gpytorch.settings.max_cholesky_size(10**9):
            opt.zero_grad()
            loss = -mll(model(Xt), yt)
            loss.backward()
            opt.step()
        torch.cuda.synchronize()

    return step


def bench_sparse_gp(s, sizes, cpu_max):
    from sklearn.gaussian_process.kernels import ConstantKernel as C
    from sklearn.gaussian_process.kernels import Matern, WhiteKernel

    from skgpu.backends import get_backend
    from skgpu.gaussian_process import _sparse
    from skgpu.gaussian_process.kernels import Tapered

    for n in sizes:
        rng = np.random.default_rng(0)
        X = rng.uniform(0, 1, (n, 2))
        y = np.sin(25 * np.sqrt(n / 2000) * X[:, 0]) + 0.1 * rng.standard_normal(n)
        taper = np.sqrt(30 / (np.pi * n))
        kernel = Tapered(C(1.0) * Matern(taper / 2, nu=1.5), taper) + WhiteKernel(0.05)
        op = "LML (refactor + solve + logdet)"
        impls = [("skgpu-cpu", "cpu")] if n <= cpu_max else []
        if GPU:
            impls.append(("skgpu-gpu", "gpu"))
        for impl, device in impls:
            with skgpu.config_context(device=device):
                lml = _sparse.SparseLogMarginalLikelihood(get_backend(device), X, y, 1e-10)
                lml(kernel)  # pattern and symbolic analysis, outside the timing
                s.measure("GaussianProcessRegressor (sparse)", op, n, 2, impl,
                          lambda: lml(kernel), 3)


def write_outputs(doc, out_dir, tag):
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"suite_{tag}.json").write_text(json.dumps(doc, indent=1))
    (out_dir / f"suite_{tag}.md").write_text(markdown(doc))
    try:
        plots(doc, out_dir, tag)
    except ImportError as exc:
        print(f"plots skipped ({exc}); run again with --plot-from where matplotlib is",
              file=sys.stderr)


def markdown(doc):
    lines = [f"Machine: {doc['machine'].get('gpu', 'no GPU')}, "
             f"{doc['machine'].get('cpu_count')} CPU cores, scikit-learn "
             f"{doc['machine'].get('scikit-learn')}.", "",
             "| estimator | operation | n | p | implementation | median | agreement |",
             "|---|---|---|---|---|---|---|"]
    for r in doc["rows"]:
        time_text = r.get("error") or (f"{r['median_s'] * 1e3:.1f} ms" if r["median_s"] < 1
                                       else f"{r['median_s']:.2f} s")
        agree = f"{r['rel_diff_vs_sklearn']:.1e}" if "rel_diff_vs_sklearn" in r else ""
        lines.append(f"| {r['estimator']} | {r['operation']} | {r['n']:,} | {r['p']} | "
                     f"{r['impl']} | {time_text} | {agree} |")
    return "\n".join(lines) + "\n"


def plots(doc, out_dir, tag):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in doc["rows"] if "median_s" in r]
    estimators = sorted({r["estimator"] for r in rows})
    # speed-up over scikit-learn at the largest n where both ran
    labels, speedups = [], []
    for est in estimators:
        for impl in ("skgpu-gpu", "skgpu-cpu"):
            pairs = [(r["n"], r["median_s"], ref["median_s"]) for r in rows
                     if r["estimator"] == est and r["impl"] == impl
                     for ref in rows if ref["estimator"] == est
                     and ref["impl"] == "sklearn-cpu" and ref["n"] == r["n"]]
            if pairs:
                n, t, t_ref = max(pairs)
                labels.append(f"{est}\n{impl}, n={n:,}")
                speedups.append(t_ref / t)
    if speedups:
        fig, ax = plt.subplots(figsize=(8, 0.5 + 0.45 * len(labels)))
        ax.barh(range(len(labels)), speedups)
        ax.set_yticks(range(len(labels)), labels, fontsize=7)
        ax.set_xscale("log")
        ax.axvline(1, color="grey", lw=0.8)
        ax.set_xlabel("speed-up over scikit-learn (CPU, all cores)")
        fig.tight_layout()
        fig.savefig(out_dir / f"suite_{tag}_speedup.png", dpi=120)
        plt.close(fig)
    for est in estimators:
        fig, ax = plt.subplots(figsize=(6, 4))
        for impl in sorted({r["impl"] for r in rows if r["estimator"] == est}):
            pts = sorted((r["n"], r["median_s"]) for r in rows
                         if r["estimator"] == est and r["impl"] == impl)
            ax.loglog(*zip(*pts), marker="o", label=impl)
        ax.set_xlabel("n (samples)")
        ax.set_ylabel("seconds")
        ax.set_title(est, fontsize=10)
        ax.legend(fontsize=8)
        fig.tight_layout()
        name = est.replace(" ", "_").replace("(", "").replace(")", "")
        fig.savefig(out_dir / f"suite_{tag}_{name}_time_vs_n.png", dpi=120)
        plt.close(fig)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="CPU-sized, ~9 s on 2 cores")
    parser.add_argument("--out-dir", default=str(Path(__file__).parent / "results"))
    parser.add_argument("--tag", default=None, help="file name tag (default: quick / gpu)")
    parser.add_argument("--plot-from", default=None, help="only redraw from a suite JSON")
    parser.add_argument("--check", action="store_true",
                        help="the guard: rows against the committed baseline, exit 1 on a "
                             "slowdown beyond the measured noise (benchmarks/_guard.py)")
    parser.add_argument("--update-baseline", action="store_true",
                        help="with --check: rewrite the baseline from this run (on purpose)")
    parser.add_argument("--report-only", action="store_true",
                        help="with --check: report, never fail")
    parser.add_argument("--out", default=None, help="with --check: write its JSON here")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="with --check on a GPU host: the GPU rows at this multiple of "
                             "their sizes (0.5, 2: rows without a baseline, reported only)")
    parser.add_argument("--against", default=None, metavar="REV_OR_DIR",
                        help="with --check: time the rows in turns with another tree's (a "
                             "git revision, or a directory holding a checkout) on this "
                             "host, instead of against the committed baseline's times")
    parser.add_argument("--profile", default=None, metavar="F.json",
                        help="GPU host, PyTorch installed: the guard's GPU rows under "
                             "torch.profiler, summarised into F.json (profile_rows.py)")
    args = parser.parse_args()
    if args.profile:
        if args.check or args.quick or args.plot_from:
            parser.error("--profile runs alone (with --scale at most)")
        if not GPU:
            parser.error("--profile needs a GPU (and PyTorch with CUDA)")
        import profile_rows

        profile_rows.main(["--scale", str(args.scale), "--out", args.profile])
        return
    if args.update_baseline and args.scale != 1.0:
        parser.error("--update-baseline keeps the rows at --scale 1 only")
    if args.against and not args.check:
        parser.error("--against goes with --check")
    if args.against and args.update_baseline:
        parser.error("--against compares two trees; the baseline is not rewritten by it")
    if args.check:
        import _guard

        status = 0
        # the GPU rows' JSON beside --out's
        out_gpu = (Path(args.out).with_name(Path(args.out).stem + "_gpu.json") if args.out
                   else None)
        if args.against:
            if GPU:
                status |= _guard.check_against(
                    args.against, "gpu", _guard.GPU_ROUNDS, _guard.GPU_CALLS,
                    scale=args.scale, report_only=args.report_only, out=out_gpu)
            status |= _guard.check_against(
                args.against, "cpu", 20 if args.quick else _guard.CPU_AB_ROUNDS,
                _guard.CPU_AB_CALLS, warmup=20, report_only=args.report_only, out=args.out)
            sys.exit(status)
        if GPU:  # the GPU host: its hot-loop rows first, then the CPU's small calls
            status |= _guard.check_gpu(update_baseline=args.update_baseline,
                                       report_only=args.report_only, out=out_gpu,
                                       scale=args.scale)
        # (the CPU baseline is the 2-core machine's: a GPU host rewrites only its own)
        status |= _guard.check_cpu(update_baseline=args.update_baseline and not GPU,
                                   report_only=args.report_only,
                                   rounds=60 if args.quick else _guard.CPU_ROUNDS,
                                   out=args.out)
        sys.exit(status)
    out_dir = Path(args.out_dir)
    if args.plot_from:
        doc = json.loads(Path(args.plot_from).read_text())
        tag = Path(args.plot_from).stem.removeprefix("suite_")
        (out_dir / f"suite_{tag}.md").write_text(markdown(doc))
        plots(doc, out_dir, tag)
        return
    tag = args.tag or ("quick" if args.quick else "gpu")
    s = Suite(args.quick)
    start = time.perf_counter()
    if args.quick:
        with skgpu.config_context(device="cpu"):
            bench_pca(s, [2_000, 20_000], 64)
            bench_tsvd(s, [5_000, 20_000], 2_000, 0.01)
            bench_ridge(s, [2_000, 20_000], 64)
            bench_ridgecv(s, [2_000, 20_000], 64)
            bench_gp(s, [300, 1_000], sklearn_max=1_000, cpu_max=1_000)
            bench_sparse_gp(s, [2_000, 20_000], cpu_max=20_000)
    else:
        bench_pca(s, [10_000, 100_000, 1_000_000], 256)
        bench_tsvd(s, [50_000, 500_000], 100_000, 2e-4)
        bench_ridge(s, [10_000, 100_000, 500_000], 256)
        bench_ridgecv(s, [10_000, 100_000, 500_000], 256)
        bench_gp(s, [1_000, 3_000, 10_000, 20_000], sklearn_max=3_000, cpu_max=3_000)
        bench_sparse_gp(s, [10_000, 100_000, 400_000], cpu_max=10_000)
    doc = {"machine": machine(), "quick": args.quick,
           "total_s": time.perf_counter() - start, "rows": s.rows}
    write_outputs(doc, out_dir, tag)
    print(f"wrote {out_dir}/suite_{tag}.* in {doc['total_s']:.0f} s")


if __name__ == "__main__":
    main()
