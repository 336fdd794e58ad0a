"""Figures quoted in the README and the user guide, computed from the committed results
(one source): each has a name, the results file and row it comes from, and its format.

- the user guide (and any page) writes ``|fig-NAME|``: ``conf.py`` defines each as an
  RST substitution (:func:`rst_prolog`);
- the README and ``benchmarks/README.md`` write ``<!--fig:NAME-->VALUE<!--/fig-->``:
  ``python docs/figures.py`` rewrites every VALUE from the results, and
  ``tests/test_docs_figures.py`` fails while either page disagrees with them.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"

#: The suite's rows (``results/suite_h200.json``): name -> (estimator, operation
#: prefix, n, implementation).
SUITE = {
    "pca-gpu": ("PCA", "fit", 1_000_000, "skgpu-gpu"),
    "pca-cpu": ("PCA", "fit", 1_000_000, "skgpu-cpu"),
    "pca-sklearn": ("PCA", "fit", 1_000_000, "sklearn-cpu"),
    "tsvd-gpu": ("TruncatedSVD", "fit", 500_000, "skgpu-gpu"),
    "tsvd-cpu": ("TruncatedSVD", "fit", 500_000, "skgpu-cpu"),
    "tsvd-sklearn": ("TruncatedSVD", "fit", 500_000, "sklearn-cpu"),
    "ridgecv-gpu": ("RidgeCV", "fit (LOO", 500_000, "skgpu-gpu"),
    "ridgecv-cpu": ("RidgeCV", "fit (LOO", 500_000, "skgpu-cpu"),
    "ridgecv-sklearn": ("RidgeCV", "fit (LOO", 500_000, "sklearn-cpu"),
    "gp3k-gpu": ("GaussianProcessRegressor", "LML + gradient", 3_000, "skgpu-gpu"),
    "gp3k-cpu": ("GaussianProcessRegressor", "LML + gradient", 3_000, "skgpu-cpu"),
    "gp3k-sklearn": ("GaussianProcessRegressor", "LML + gradient", 3_000, "sklearn-cpu"),
    "gp3k-gpytorch": ("GaussianProcessRegressor", "LML + gradient", 3_000,
                      "gpytorch-cholesky"),
    "gp20k-gpu": ("GaussianProcessRegressor", "LML + gradient", 20_000, "skgpu-gpu"),
    "gp20k-gpytorch": ("GaussianProcessRegressor", "LML + gradient", 20_000,
                       "gpytorch-cholesky"),
    "sparse400k-gpu": ("GaussianProcessRegressor (sparse)", "LML", 400_000, "skgpu-gpu"),
}
SUITE_FILE = "suite_h200.json"

#: Figures from other results files' records: name -> (file under results/, the record
#: (text its "case" contains, or a dict of that and other fields' exact values), key path
#: within it ("*" for a dict's only value), format). Formats: "s" a duration, "x" a
#: ratio, "GB" bytes, "int" a count, "%" a fraction, "n2" a multiple of n².
_THREADS = "cpu_threads_cpu_2core.json"
_GP300 = "GaussianProcessRegressor n = 300"
_RIDGE_THREADS = {"case": "RidgeCV 2,000", "mode": "8 threads at once (32 fits)"}
_REFINED = "ridgecv_speed_refined_h200.json"
_STREAMED1 = {"case": "streamed, never persisted", "source": "normal"}
_STREAMED_HASH = {"case": "streamed, never persisted", "source": "hash"}
_PEERS_TSVD = "dask_peers_tsvd_2m_h200_cpu.json"
_PEERS8M = "dask_peers_8m_h200_cpu.json"
_SVDC = "dask PCA svd_compressed, n_power_iter={} (dask-ml's randomized route, without its " \
    "gather of X)"
_RATIO = "ratio: peer median"
_SHARED_MPS = "dask_shared_gpu_mps_h200.json"
RECORDS = {
    "threads-gp-pool": (_THREADS, {"case": _GP300, "mode": "one at a time",
                                   "blas_management": "off (before)"},
                        "per_fit_median_s", "s"),
    "threads-gp-one": (_THREADS, {"case": _GP300, "mode": "one at a time, 1 BLAS thread",
                                  "blas_management": "off (before)"},
                       "per_fit_median_s", "s"),
    "threads-ridgecv-off": (_THREADS, {**_RIDGE_THREADS, "blas_management": "off (before)"},
                            "per_fit_median_s", "s"),
    "threads-ridgecv-on": (_THREADS, {**_RIDGE_THREADS, "blas_management": "on"},
                           "per_fit_median_s", "s"),
    "dask-in-memory": ("dask_h200x2.json", "64 chunks, 1 dask-cuda",
                       "in_memory_one_gpu.median_s", "s"),
    "dask-one-worker": ("dask_h200x2.json", "64 chunks, 1 dask-cuda", "dask.median_s", "s"),
    "dask-two-workers": ("dask_h200x2.json", "64 chunks, 2 dask-cuda", "dask.median_s", "s"),
    "dask-32m-one": ("dask_h200x2.json", "256 chunks, 1 dask-cuda", "dask.median_s", "s"),
    "dask-32m-two": ("dask_h200x2.json", "256 chunks, 2 dask-cuda", "dask.median_s", "s"),
    "dask-32m-ratio": ("dask_h200x2.json", "scaling at 32,000,000 rows", "ratio", "x"),
    "peers-pca": ("dask_peers_2m_h200_cpu.json", "skgpu PCA", "fit_s.median_s", "s"),
    "peers-pca-full": ("dask_peers_2m_h200_cpu.json", "dask-ml PCA full", "fit_s.median_s",
                       "s"),
    "peers-pca-ratio": ("dask_peers_2m_h200_cpu.json", "ratio: peer median",
                        "dask-ml PCA full (TSQR, exact)", "x"),
    "peers-tsvd": (_PEERS_TSVD, "skgpu TruncatedSVD (randomized, n_iter=5)",
                   "fit_s.median_s", "s"),
    "peers-tsvd-err": (_PEERS_TSVD, "skgpu TruncatedSVD (randomized, n_iter=5)",
                       "values_max_rel_err", "e"),
    "peers-tsvd10": (_PEERS_TSVD, "skgpu TruncatedSVD (randomized, n_iter=10)",
                     "fit_s.median_s", "s"),
    "peers-tsvd10-err": (_PEERS_TSVD, "skgpu TruncatedSVD (randomized, n_iter=10)",
                         "values_max_rel_err", "e"),
    "peers-tsvd-randomized": (_PEERS_TSVD, "dask-ml TruncatedSVD randomized",
                              "fit_s.median_s", "s"),
    "peers-tsvd-randomized-err": (_PEERS_TSVD, "dask-ml TruncatedSVD randomized",
                                  "values_max_rel_err", "e"),
    "peers-tsvd-ratio": (_PEERS_TSVD, "ratio: peer median",
                         "dask-ml TruncatedSVD randomized, n_iter=5", "x"),
    "peers-tsvd-tsqr": (_PEERS_TSVD, "dask-ml TruncatedSVD tsqr", "fit_s.median_s", "s"),
    "shared-pca": ("dask_shared_gpu_h200.json", "two-worker time over one-worker", "pca",
                   "x"),
    "shared-ridgecv": ("dask_shared_gpu_h200.json", "two-worker time over one-worker",
                       "ridgecv", "x"),
    "peers8m-pca": (_PEERS8M, "skgpu PCA", "fit_s.median_s", "s"),
    "peers8m-svdc0": (_PEERS8M, _SVDC.format(0), "fit_s.median_s", "s"),
    "peers8m-svdc0-err": (_PEERS8M, _SVDC.format(0), "values_max_rel_err", "e"),
    "peers8m-svdc0-ratio": (_PEERS8M, _RATIO, _SVDC.format(0) + ".ratio", "x"),
    "peers8m-svdc3": (_PEERS8M, _SVDC.format(3), "fit_s.median_s", "s"),
    "peers8m-svdc3-err": (_PEERS8M, _SVDC.format(3), "values_max_rel_err", "e"),
    "peers8m-svdc3-ratio": (_PEERS8M, _RATIO, _SVDC.format(3) + ".ratio", "x"),
    "peers8m-tsvd10": (_PEERS8M, "skgpu TruncatedSVD (randomized, n_iter=10)",
                       "fit_s.median_s", "s"),
    "peers8m-tsvd10-err": (_PEERS8M, "skgpu TruncatedSVD (randomized, n_iter=10)",
                           "values_max_rel_err", "e"),
    "peers8m-tsvd-dml": (_PEERS8M, "dask-ml TruncatedSVD randomized", "fit_s.median_s", "s"),
    "peers8m-tsvd-dml-err": (_PEERS8M, "dask-ml TruncatedSVD randomized",
                             "values_max_rel_err", "e"),
    "peers8m-tsvd-ratio": (_PEERS8M, _RATIO, "dask-ml TruncatedSVD randomized, n_iter=5.ratio",
                           "x"),
    "shared-mps-pca": (_SHARED_MPS, "two-worker time over one-worker", "pca", "x"),
    "shared-mps-ridgecv": (_SHARED_MPS, "two-worker time over one-worker", "ridgecv", "x"),
    "streamed-ridgecv": ("dask_streamed_h200.json", _STREAMED1,
                         "ridgecv_s.median_s", "s"),
    "refined-before": (_REFINED, "call 2", "before_1 target cond 1e10.median_s", "s"),
    "refined-after": (_REFINED, "call 2", "refined_1 target cond 1e10.median_s", "s"),
    "sparse1m-fit-tapered-before": ("sparse_gp_issue_case_h200.json", "n=1000000",
                                    "full_fit_s", "s"),
    "density-dense-case": ("gp_density_cpu_2core.json", "n = 3,000, d = 2, r = 0.8",
                           "density", "%"),
    "density-sparse-fit": ("gp_density_cpu_2core.json", "n = 3,000, d = 2, r = 0.8",
                           "fit_sparse.median_s", "s"),
    "density-dense-fit": ("gp_density_cpu_2core.json", "n = 3,000, d = 2, r = 0.8",
                          "fit_dense.median_s", "s"),
    "gp100k-peak-n2": ("gp_large_h200.json", "one LML + gradient, n=100000",
                       "skgpu.peak_over_n2_float64", "n2"),
    "gp100k-lml": ("gp_large_h200.json", "one LML + gradient, n=100000",
                   "skgpu.median_s", "s"),
    "gp100k-fit": ("gp_large_h200.json", "fit, optimizer=None, n=100000 [run 2]",
                   "skgpu.median_s", "s"),
    "gp100k-std": ("history/gp_large_predict_right_h200.json",
                   "n=100000, block fraction 0.04", "skgpu.median_s", "s"),
    "gp50k-lml": ("gp_large_h200.json", "one LML + gradient, n=50000",
                  "skgpu.median_s", "s"),
    "sparse400k-fit": ("sparse_gp_h200.json", "n=400000", "full_fit_s", "s"),
    "sparse400k-std": ("sparse_gp_h200.json", "n=400000", "predict_std_100k.median_s", "s"),
    "sparse1m-fit": ("sparse_gp_h200.json", "full fit, n=1000000", "full_fit_s", "s"),
    "sparse1m-fit-tapered": ("sparse_gp_split_gradient_h200.json", "n=1000000",
                             "full_fit_s", "s"),
    "sparse1m-evaluations": ("sparse_gp_split_gradient_h200.json", "n=1000000",
                             "lml_evaluations", "int"),
    "variance50k-std": ("sparse_gp_variance_cpu_2core.json",
                        "predict std, 10,000 points, n = 50,000, cpu (cholmod)",
                        "warm.median_s", "s"),
    "variance50k-full": ("sparse_gp_variance_cpu_2core.json",
                         "predict std, 10,000 points, n = 50,000, cpu (cholmod)",
                         "reference_scaled_to_points_s", "s"),
    "streamed-pca": ("dask_streamed_h200.json", _STREAMED1,
                     "pca_s.median_s", "s"),
    "streamed-pool": ("dask_streamed_h200.json", _STREAMED1,
                      "memory_after_fits.*.pool_total_bytes", "GB"),
    "streamed-pca-fraction": ("dask_streamed_h200.json", _STREAMED1,
                              "pca_fraction_of_persisted_gb_per_s", "x"),
    "streamed-ridgecv-fraction": ("dask_streamed_h200.json", _STREAMED1,
                                  "ridgecv_fraction_of_persisted_gb_per_s", "x"),
    "streamed-make": ("dask_streamed_h200.json", _STREAMED1, "make_only_s.median_s", "s"),
    "streamed-pca-of-make-then-fit": ("dask_streamed_h200.json", _STREAMED1,
                                      "pca_fraction_of_make_then_fit", "x"),
    "streamed-ridgecv-of-make-then-fit": ("dask_streamed_h200.json", _STREAMED1,
                                          "ridgecv_fraction_of_make_then_fit", "x"),
    "streamed-hash-make": ("dask_streamed_h200.json", _STREAMED_HASH,
                           "make_only_s.median_s", "s"),
    "streamed-hash-pca-fraction": ("dask_streamed_h200.json", _STREAMED_HASH,
                                   "pca_fraction_of_persisted_gb_per_s", "x"),
    "streamed-hash-ridgecv-fraction": ("dask_streamed_h200.json", _STREAMED_HASH,
                                       "ridgecv_fraction_of_persisted_gb_per_s", "x"),
    "search-cupy": ("device_search_h200.json", "skgpu, CuPy data", "median_s", "s"),
    "search-cupy-speedup": ("device_search_h200.json", "skgpu, CuPy data",
                            "speedup_vs_sklearn", "x"),
    "search-numpy-speedup": ("device_search_h200.json", "skgpu, NumPy data",
                             "speedup_vs_sklearn", "x"),
    "gp100k-peak": ("gp_large_h200.json", "one LML + gradient, n=100000",
                    "skgpu.peak_gpu_bytes", "GB"),
    "gp60k-default-fit": ("history/gp_large_predict_fit60k_h200.json",
                          "default optimizer", "seconds", "s"),
    "gp60k-evaluations": ("history/gp_large_predict_fit60k_h200.json",
                          "default optimizer", "lml_evaluations", "int"),
    "sparse50k-cpu-lml": ("sparse_gp_cpu_exact_gradient_2core.json",
                          "LML + gradient, n = 50,000, cholmod", "lml_and_gradient.median_s",
                          "s"),
    "sparse50k-cpu-fit": ("sparse_gp_cpu_exact_gradient_2core.json",
                          "default fit, n = 50,000, cholmod", "fit_s", "s"),
    "sparse1m-std20k": ("sparse_gp_variance_h200.json",
                        "predict std, 20,000 points, n = 1,000,000", "warm.median_s", "s"),
    "sparse1m-std100k-h100": ("sparse_gp_variance_h100.json",
                              "predict std, 100,000 points, n = 1,000,000", "warm.median_s",
                              "s"),
    "sparse1m-std100k-full-h100": ("sparse_gp_variance_h100.json",
                                   "predict std, 100,000 points, n = 1,000,000",
                                   "reference_scaled_to_points_s", "s"),
    "sparse1m-lml-ours-h100": ("sparse_gp_variance_h100.json",
                               "factorisations side by side, n = 1,000,000",
                               "supernodal_lml_gradient.median_s", "s"),
    "sparse1m-lml-cudss-h100": ("sparse_gp_variance_h100.json",
                                "factorisations side by side, n = 1,000,000",
                                "backend_lml_gradient.median_s", "s"),
    "sparse1m-refactor-ours-h100": ("sparse_gp_variance_h100.json",
                                    "factorisations side by side, n = 1,000,000",
                                    "supernodal_refactor.median_s", "s"),
    # (the likelihood at 1M is skgpu's factor since the 100,000 threshold: cuDSS's
    # refactorisation from the run before, which had it)
    "sparse1m-refactor-cudss-h100": ("history/sparse_gp_variance_strip_separators_h100.json",
                                     "factorisations side by side, n = 1,000,000",
                                     "backend_refactor.median_s", "s"),
    "sparse1m-selinv-h100": ("sparse_gp_variance_h100.json",
                             "factorisations side by side, n = 1,000,000",
                             "supernodal_selected_inverse.median_s", "s"),
    "ard50k-lml-ours-h100": ("sparse_gp_variance_h100.json",
                             "log_marginal_likelihood with gradient, ARD",
                             "supernodal_lml_gradient.median_s", "s"),
    "ard50k-lml-cudss-h100": ("sparse_gp_variance_h100.json",
                              "log_marginal_likelihood with gradient, ARD",
                              "backend_lml_gradient.median_s", "s"),
    "sparse1m-fit-ours-h100": ("sparse_gp_scale_h100.json",
                               {"case": "fit(optimizer=None), n = 1,000,000",
                                "first_in_process": False}, "fit_s", "s"),
    "sparse10m-fit-h100": ("sparse_gp_scale_h100.json",
                           "fit(optimizer=None), n = 10,000,000", "fit_s", "s"),
    "sparse10m-std100k-h100": ("sparse_gp_scale_h100.json",
                               "predict std, 100,000 points, n = 10,000,000", "cold_s", "s"),
    "sparse10m-fit-h200": ("sparse_gp_scale_h200.json",
                           "fit(optimizer=None), n = 10,000,000", "fit_s", "s"),
    "sparse10m-std100k-h200": ("sparse_gp_scale_h200.json",
                               "predict std, 100,000 points, n = 10,000,000", "cold_s", "s"),
    "sparse10m-peak-h200": ("sparse_gp_scale_h200.json",
                            "fit(optimizer=None), n = 10,000,000",
                            "nvidia_smi_peak_mib_of_run", "int"),
    "sparse1m-fit-ours-h200": ("sparse_gp_factorizations_h200.json",
                               "fit (default optimizer), n = 1,000,000, gpu, supernodal",
                               "fit_s", "s"),
    "sparse1m-fit-cudss-h200": ("sparse_gp_factorizations_h200.json",
                                "fit (default optimizer), n = 1,000,000, gpu, backend",
                                "fit_s", "s"),
    "sparse1m-std100k-h200": ("sparse_gp_factorizations_h200.json",
                              "predict std, 100,000 points, n = 1,000,000, gpu, supernodal",
                              "cold_s", "s"),
    "sparse1m-std100k-batched-h100": ("history/supernodal_stage2_probe_h100.json",
                                      "level batches", "predict_std_100k_warm_median_s",
                                      "s"),
    "pca-numpy-streamed": ("decomposition_h200.json", "PCA fit, X 1000000x256",
                           "skgpu_gpu_covariance_eigh_numpy_input.median_s", "s"),
    "pca-numpy-copy": ("decomposition_h200.json", "PCA fit, X 1000000x256",
                       "copy_numpy_X_to_gpu.median_s", "s"),
}


def seconds(value):
    """A duration as the README and the guide print it (three significant digits)."""
    for scale, unit in ((1e-3, "µs"), (1.0, "ms"), (float("inf"), "s")):
        if value < scale:
            shown = value * 1e3 / scale if scale != float("inf") else value
            return f"{shown:#.3g}".rstrip(".") + f" {unit}"
    raise ValueError(value)


#: Figures over several records (RidgeCV's accuracy table): name -> (file, the records'
#: case prefix, function of those records, format).
_ACCURACY = "ridgecv_accuracy_refined_h200.json"


def _worst(key):
    return lambda records: max(r[key] for r in records)


def _ours(r):
    return max(r["skgpu_cpu_svd"], r["skgpu_gpu_svd"])


AGGREGATES = {
    f"accuracy-{shape}-{column}": (_ACCURACY, shape, _worst(key), "e")
    for shape in ("tall", "wide")
    for column, key in (("cpu", "skgpu_cpu_svd"), ("gpu", "skgpu_gpu_svd"),
                        ("sklearn", "sklearn_svd"), ("floor", "floor"))
}
AGGREGATES.update({
    "accuracy-tall-cpu-before": ("history/ridgecv_accuracy_before_cpu_2core.json", "tall",
                                 _worst("skgpu_cpu_svd"), "e"),
    "accuracy-wide-cpu-before": ("history/ridgecv_accuracy_before_cpu_2core.json", "wide",
                                 _worst("skgpu_cpu_svd"), "e"),
    "accuracy-tall-cases": (_ACCURACY, "tall", len, "int"),
    "accuracy-wide-cases": (_ACCURACY, "wide", len, "int"),
    "accuracy-tall-gain-min": (_ACCURACY, "tall",
                               lambda rs: min(r["sklearn_svd"] / _ours(r) for r in rs), "x"),
    "accuracy-tall-gain-max": (_ACCURACY, "tall",
                               lambda rs: max(r["sklearn_svd"] / _ours(r) for r in rs), "x"),
})


def _format(value, kind):
    if kind == "s":
        return seconds(value)
    if kind == "x":
        return (f"{value:,.0f}" if value >= 1000 else f"{value:#.3g}".rstrip(".")) + "×"
    if kind == "GB":
        return f"{value / 1e9:.1f} GB"
    if kind == "int":
        return f"{int(value):,}"
    if kind == "e":
        mantissa, exponent = f"{value:.1e}".split("e")
        return f"{mantissa}e{int(exponent)}"
    if kind == "%":
        return f"{100 * value:.0f} %"
    if kind == "n2":
        return f"{value:.3g} n²"
    raise ValueError(kind)


def _record_value(results, file, case, path):
    doc = json.loads((Path(results) / file).read_text())
    fields = case if isinstance(case, dict) else {"case": case}
    found = [r for r in doc["results"] if fields["case"] in r.get("case", "")
             and all(r.get(k) == v for k, v in fields.items() if k != "case")]
    if len(found) != 1:
        raise LookupError(f"{file}: {len(found)} records name {case!r}")
    value = found[0]
    for key in path.split("."):
        value = next(iter(value.values())) if key == "*" else value[key]
    return value


def values(results=RESULTS):
    """Every figure's text, by name."""
    rows = json.loads((Path(results) / SUITE_FILE).read_text())["rows"]
    out = {}
    for name, (estimator, operation, n, impl) in SUITE.items():
        found = [r for r in rows if r["estimator"] == estimator and r["n"] == n
                 and r["impl"] == impl and r["operation"].startswith(operation)]
        if len(found) != 1:
            raise LookupError(f"figure {name}: {len(found)} rows of {SUITE_FILE} match")
        out[name] = seconds(found[0]["median_s"])
    for name, (file, case, path, kind) in RECORDS.items():
        out[name] = _format(_record_value(results, file, case, path), kind)
    for name, (file, prefix, reduce, kind) in AGGREGATES.items():
        records = [r for r in json.loads((Path(results) / file).read_text())["results"]
                   if r.get("case", "").startswith(prefix)]
        if not records:
            raise LookupError(f"figure {name}: no records of {file} start with {prefix!r}")
        out[name] = _format(reduce(records), kind)
    return out


def rst_prolog(results=RESULTS):
    """The RST substitutions ``|fig-NAME|`` for every figure."""
    return "\n".join(f".. |fig-{name}| replace:: {text}"
                     for name, text in values(results).items()) + "\n"


_README_FIGURE = re.compile(r"<!--fig:([a-z0-9-]+)-->(.*?)<!--/fig-->")


def render_readme(text, results=RESULTS):
    """``text`` with every README figure's value recomputed (an unknown name raises)."""
    known = values(results)

    def replace(match):
        name = match.group(1)
        if name not in known:
            raise KeyError(f"README names an unknown figure {name!r}")
        return f"<!--fig:{name}-->{known[name]}<!--/fig-->"

    return _README_FIGURE.sub(replace, text)


#: The Markdown pages whose ``<!--fig:NAME-->VALUE<!--/fig-->`` figures are rewritten.
PAGES = ("README.md", "benchmarks/README.md")


if __name__ == "__main__":
    for page in PAGES:
        path = ROOT / page
        new = render_readme(path.read_text())
        if new != path.read_text():
            path.write_text(new)
            print(f"{page}: figures rewritten from benchmarks/results/")
        else:
            print(f"{page}: figures agree with benchmarks/results/")
    sys.exit(0)
