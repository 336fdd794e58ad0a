"""Dense GaussianProcessRegressor at scale on one GPU: time and peak GPU memory
of one LML + gradient, of a fit with ``optimizer=None`` and of predict(return_std) at
n = 50,000 and 100,000 (d = 8, ``C * RBF(ARD) + WhiteKernel``, float64), and the
agreement of the GPU with the CPU path on a smaller problem.

    python benchmarks/bench_gp_large.py                        # GPU host
    python benchmarks/bench_gp_large.py --sizes 2000 --test 2000 --agree 500   # any machine

Peak memory is the CuPy pool's high-water mark during the call, over the pool's use
before it (``_harness.PeakGPUMemory``), also given over n² · 8 bytes. The likelihood is
the object the optimizer calls (``_LogMarginalLikelihood``): the public
``log_marginal_likelihood`` of a fitted model would hold the fit's factor beside it.
The first size is timed with a warm-up and 3 runs; larger ones, whose single run takes
tens of seconds, once after the first size's warm-up (``repeats`` says so).
"""

import argparse
import gc
import statistics
import sys
import time

import numpy as np


from _harness import GPU, PeakGPUMemory, emitter, machine
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

import skgpu
from skgpu.backends import get_backend
from skgpu.gaussian_process import GaussianProcessRegressor
from skgpu.gaussian_process import _dense
from skgpu.gaussian_process._dense import _LogMarginalLikelihood

D = 8


def data(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (n, D))
    y = np.sin(6 * X[:, 0]) * np.cos(4 * X[:, 1]) + X[:, 2] + 0.1 * rng.standard_normal(n)
    return X, y


def kernel():
    return C(1.0) * RBF(np.linspace(0.3, 1.0, D)) + WhiteKernel(0.01)


def _sync():
    if GPU:
        import cupy as cp

        cp.cuda.Device().synchronize()
        cp.get_default_memory_pool().free_all_blocks()


def measure(func, n, repeats, warmup):
    """Median, min, max over ``repeats`` runs (after one warm-up if asked) and the peak
    pool bytes of the last run."""
    if warmup:
        func()
        _sync()
    times, peak = [], None
    for _ in range(repeats):
        gc.collect()
        _sync()
        if GPU:
            with PeakGPUMemory() as mem:
                start = time.perf_counter()
                out = func()
                _sync()
                seconds = time.perf_counter() - start
            peak = mem.bytes
        else:
            start = time.perf_counter()
            out = func()
            seconds = time.perf_counter() - start
        times.append(seconds)
        del out
    row = {"median_s": statistics.median(times), "min_s": min(times), "max_s": max(times),
           "repeats": len(times), "warm_up": warmup}
    if peak is not None:
        row["peak_gpu_bytes"] = int(peak)
        row["peak_over_n2_float64"] = round(peak / (8.0 * n * n), 3)
    return row


def agreement(n, device):
    """GPU (or this machine's backend) against the CPU path: LML, gradient, predictions."""
    X, y = data(n, seed=1)
    k = kernel()
    out = {}
    results = {}
    for name in ("cpu", device):
        lml, grad = _LogMarginalLikelihood(get_backend(name), X, y, 1e-10)(k, True)
        with skgpu.config_context(device=name):
            gp = GaussianProcessRegressor(k, optimizer=None).fit(X, y)
            mean, std = gp.predict(X[: n // 4] + 0.01, return_std=True)
        results[name] = (lml, grad, mean, std)
    (l0, g0, m0, s0), (l1, g1, m1, s1) = results["cpu"], results[device]
    out["lml_rel_diff"] = abs(l1 - l0) / abs(l0)
    out["grad_rel_diff"] = float(np.max(np.abs(g1 - g0)) / np.max(np.abs(g0)))
    out["mean_rel_diff"] = float(np.max(np.abs(m1 - m0)) / np.max(np.abs(m0)))
    out["std_rel_diff"] = float(np.max(np.abs(s1 - s0)) / np.max(np.abs(s0)))
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[50_000, 100_000])
    parser.add_argument("--test", type=int, default=100_000, help="predict points")
    parser.add_argument("--agree", type=int, default=3_000, help="n of the CPU check")
    parser.add_argument("--no-lml", action="store_true",
                        help="skip the likelihood rows (fit and predict only)")
    parser.add_argument("--predict-fractions", type=float, nargs="+", default=None,
                        help="predict once per PREDICT_BLOCK_FRACTION given (block size "
                        "as a share of the factor's bytes)")
    parser.add_argument("--default-fit", type=int, default=0, metavar="N",
                        help="also fit with the default optimizer at n=N (one run; "
                        "evaluations and time)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    device = "gpu" if GPU else "cpu"
    ops = get_backend(device)
    doc = {"machine": machine(), "benchmark": "dense GP at scale",
           "kernel": str(kernel()), "d": D, "results": []}

    emit = emitter(doc, args.out)

    emit({"case": f"agreement with the CPU path, n={args.agree} (float64)",
          **agreement(args.agree, device)})
    for i, n in enumerate(args.sizes):
        first = i == 0
        repeats = 3 if first else 1
        X, y = data(n)
        k = kernel()
        row = None
        if not args.no_lml:
            row = {"case": f"one LML + gradient, n={n}", "device": device}
            lml = _LogMarginalLikelihood(ops, X, y, 1e-10)
            row["skgpu"] = measure(lambda: lml(k, True), n, repeats, first)
            row["lml_evaluations"] = lml.n_evaluations
            emit(row)
            del lml
        fit_row = {"case": f"fit, optimizer=None, n={n}", "device": device}
        holder = {}

        def fit():
            holder.pop("gp", None)
            gc.collect()
            _sync()
            with skgpu.config_context(device=device):
                holder["gp"] = GaussianProcessRegressor(k, optimizer=None).fit(X, y)

        fit_row["skgpu"] = measure(fit, n, repeats, first)
        if row is not None:
            fit_row["fit_over_lml_and_gradient"] = round(
                fit_row["skgpu"]["median_s"] / row["skgpu"]["median_s"], 3)
        emit(fit_row)
        if i == len(args.sizes) - 1:
            Xt, _ = data(args.test, seed=2)
            gp = holder["gp"]

            def predict():
                with skgpu.config_context(device=device):
                    return gp.predict(Xt, return_std=True)

            for fraction in args.predict_fractions or [_dense.PREDICT_BLOCK_FRACTION]:
                default, _dense.PREDICT_BLOCK_FRACTION = _dense.PREDICT_BLOCK_FRACTION, fraction
                try:
                    emit({"case": f"predict(return_std=True), {args.test} test points, "
                                  f"n={n}, block fraction {fraction:g}",
                          "device": device, "skgpu": measure(predict, n, 1, False)})
                finally:
                    _dense.PREDICT_BLOCK_FRACTION = default
        holder.clear()
        gc.collect()
        _sync()
    if args.default_fit:
        n = args.default_fit
        X, y = data(n)
        gc.collect()
        _sync()
        start = time.perf_counter()
        with skgpu.config_context(device=device):
            gp = GaussianProcessRegressor(kernel(), random_state=0).fit(X, y)
        _sync()
        emit({"case": f"fit, default optimizer (L-BFGS-B, no restarts), n={n}",
              "device": device, "seconds": time.perf_counter() - start, "repeats": 1,
              "lml_evaluations": gp._n_lml_evaluations, "kernel_": str(gp.kernel_),
              "log_marginal_likelihood_value_": float(gp.log_marginal_likelihood_value_)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
