"""GridSearchCV over Pipeline(PCA, RidgeCV): scikit-learn beside skgpu on NumPy, CuPy and
torch data, in one run (a search on device data).

Run on the GPU host:  python benchmarks/bench_device_search.py --out results.json
On a CPU-only machine: python benchmarks/bench_device_search.py --quick
Every row is the same search, timed the same way (one warm-up search, then repeats; median
and spread); best_params_ and best_score_ of every row are checked against scikit-learn's
before any time is reported. The NumPy row is profiled once more to say where its time goes.
"""

import cProfile
import pstats

import numpy as np


from _harness import GPU, PeakGPUMemory, machine, run_cases, standard_parser, sync, timeit
from sklearn import decomposition as skd
from sklearn import linear_model as skl
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.pipeline import Pipeline

from skgpu.decomposition import PCA
from skgpu.linear_model import RidgeCV

if GPU:
    import cupy as cp

ALPHAS = np.logspace(-3, 3, 13)
GRID = {"pca__n_components": [8, 16, 32, 64]}


def make_data(n, p, rank=32, seed=0):
    """Rank-``rank`` signal plus noise, float32 (the issue's data)."""
    rng = np.random.default_rng(seed)
    X = (rng.standard_normal((n, rank), dtype=np.float32)
         @ rng.standard_normal((rank, p), dtype=np.float32))
    X += 0.5 * rng.standard_normal((n, p), dtype=np.float32)
    y = X @ rng.standard_normal(p, dtype=np.float32) / np.sqrt(p, dtype=np.float32)
    y += rng.standard_normal(n, dtype=np.float32)
    return X, y


def search(pca, ridge):
    return GridSearchCV(Pipeline([("pca", pca), ("ridge", ridge)]), GRID,
                        cv=KFold(5, shuffle=True, random_state=0))


def sklearn_search():
    return search(skd.PCA(), skl.RidgeCV(alphas=ALPHAS))


def skgpu_search():
    return search(PCA(), RidgeCV(alphas=ALPHAS))


def _profile_numpy(X, y):
    """Seconds of one NumPy-data search spent in its main parts (cProfile, cumulative)."""
    prof = cProfile.Profile()
    prof.enable()
    skgpu_search().fit(X, y)
    sync()
    prof.disable()
    stats = pstats.Stats(prof).stats
    total = sum(tt for (_, _, _), (_, _, tt, _, _) in stats.items())

    def cumulative(fragment, name):
        return sum(ct for (file, _, func), (_, _, _, ct, _) in stats.items()
                   if fragment in file and func == name)

    parts = {
        "scikit-learn fold indexing (_safe_indexing)": cumulative("sklearn/utils",
                                                                  "_safe_indexing"),
        "skgpu input validation (validate_data)": cumulative("skgpu/utils/validation",
                                                            "validate_data"),
        "host-to-device copies (cupy.asarray, from pageable memory)": cumulative(
            "cupy", "asarray"),
        "covariance pass streamed from the host (staging.streamed_centred_gram)": cumulative(
            "skgpu/backends/gpu/staging", "streamed_centred_gram"),
        "host-to-device copies through pinned buffers (staging.to_device)": cumulative(
            "skgpu/backends/gpu/staging", "to_device"),
        "device-to-host copies (ndarray.get)": cumulative("cupy", "get"),
        "PCA.fit_transform": cumulative("skgpu/decomposition/_pca", "fit_transform"),
        "PCA.transform": cumulative("skgpu/decomposition/_pca", "transform"),
        "RidgeCV.fit": cumulative("skgpu/linear_model/_ridge", "fit"),
        "RidgeCV.predict": cumulative("skgpu/linear_model/_ridge", "predict"),
        "score (R²)": cumulative("skgpu/utils/_scoring", "r2_score_where_the_data_is"),
    }
    return {"profiled_total_s": total, "cumulative_s": parts}


def main():
    parser = standard_parser(__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    n, p = (20_000, 64) if args.quick else (500_000, 256)
    X, y = make_data(n, p)
    doc = {"machine": machine(), "benchmark": "device_search",
           "workflow": ("GridSearchCV(Pipeline([('pca', PCA()), ('ridge', RidgeCV(alphas="
                        "np.logspace(-3, 3, 13)))]), {'pca__n_components': [8, 16, 32, 64]}, "
                        "cv=KFold(5, shuffle=True, random_state=0))"),
           "data": {"n_samples": n, "n_features": p, "dtype": "float32", "signal_rank": 32},
           "timing": f"one warm-up search, then {args.repeats} timed; device synchronised",
           "results": []}
    ref = {}

    def row(name, make_search, X_in, y_in, memory=False):
        def run():
            return make_search().fit(X_in, y_in)

        if memory and GPU:
            run()
            with PeakGPUMemory() as peak:
                run()
                sync()
        fitted, stats = timeit(run, args.repeats)
        out = {"case": name, "best_params": fitted.best_params_,
               "best_score": float(fitted.best_score_),
               "mean_test_scores": [float(v) for v in fitted.cv_results_["mean_test_score"]],
               **stats}
        if memory and GPU:
            out["peak_gpu_memory_bytes"] = peak.bytes
        if ref:
            assert np.all(np.isfinite(out["mean_test_scores"])), out
            assert out["best_params"] == ref["best_params"], (out, ref)
            assert abs(out["best_score"] - ref["best_score"]) < 1e-4, (out, ref)
            out["speedup_vs_sklearn"] = ref["median_s"] / out["median_s"]
        else:
            ref.update(out)
        doc["results"].append(out)

    cases = [lambda: row("scikit-learn (CPU), NumPy data", sklearn_search, X, y),
             lambda: row("skgpu, NumPy data", skgpu_search, X, y)]
    if GPU:
        import torch

        Xc, yc = cp.asarray(X), cp.asarray(y)
        Xt, yt = torch.as_tensor(X, device="cuda"), torch.as_tensor(y, device="cuda")
        cases += [lambda: row("skgpu, CuPy data", skgpu_search, Xc, yc, memory=True),
                  lambda: row("skgpu, torch CUDA data", skgpu_search, Xt, yt)]
    cases.append(lambda: doc.__setitem__("numpy_profile", _profile_numpy(X, y)))
    run_cases(cases, doc, args.out)


if __name__ == "__main__":
    main()
