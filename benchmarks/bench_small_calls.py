"""Small calls on the CPU backend: transform/predict of 1, 10 and 100 rows beside
scikit-learn's (what per-request serving pays), in turns so both see the same seconds.

Run:  python benchmarks/bench_small_calls.py --out results.json   (about 1 minute)
      python benchmarks/bench_small_calls.py --quick
Every row: 20 warm-up calls of each, then 280 calls of each, alternating call by call
(this VM's clock changes speed by a third from one second to the next), every call timed
alone; median and quartiles. Fitted on 2,000 × 20 float64 (the GP on 300 × 5), outputs
checked equal to scikit-learn's before times are reported. Target: within 1.1 × of
scikit-learn (issue 50).
"""

import numpy as np
import sklearn.decomposition as skd
import sklearn.gaussian_process as skg
import sklearn.linear_model as skl
from _harness import interleaved, machine, run_cases, standard_parser

import skgpu
from skgpu.decomposition import PCA, TruncatedSVD
from skgpu.gaussian_process import GaussianProcessRegressor
from skgpu.linear_model import Ridge, RidgeCV


def cases(rng):
    X = rng.standard_normal((2000, 20))
    y = X @ rng.standard_normal(20)
    Xg = rng.standard_normal((300, 5))
    yg = np.sin(Xg[:, 0])
    return [
        ("Ridge.predict", Ridge(), skl.Ridge(), X, y, "predict"),
        ("RidgeCV.predict", RidgeCV(), skl.RidgeCV(), X, y, "predict"),
        ("PCA.transform", PCA(5), skd.PCA(5), X, None, "transform"),
        ("TruncatedSVD.transform", TruncatedSVD(5, random_state=0),
         skd.TruncatedSVD(5, random_state=0), X, None, "transform"),
        # the kernel's default hyperparameters, not optimised: the two predict with the
        # same theta (optimisers stop at slightly different points, 3.5e-6 apart with
        # scikit-learn 1.8), and the predict's cost does not depend on it
        ("GaussianProcessRegressor.predict", GaussianProcessRegressor(optimizer=None),
         skg.GaussianProcessRegressor(optimizer=None), Xg, yg, "predict"),
    ]


def fitted_calls(sizes):
    """``(case, rows, skgpu's call, scikit-learn's call)`` for every case and size, both
    estimators fitted on the CPU backend and their outputs checked equal; the caller
    times the calls under ``skgpu.config_context(device="cpu")``."""
    rng = np.random.default_rng(0)
    with skgpu.config_context(device="cpu"):
        for name, ours, theirs, X, y, method in cases(rng):
            args = (X,) if y is None else (X, y)
            ours.fit(*args)
            theirs.fit(*args)
            for m in sizes:
                Xt = X[:m]
                a, b = getattr(ours, method), getattr(theirs, method)
                np.testing.assert_allclose(a(Xt), b(Xt), rtol=1e-6, atol=1e-8)
                yield (f"{name}, {m} rows", m, lambda a=a, Xt=Xt: a(Xt),
                       lambda b=b, Xt=Xt: b(Xt))


def rows(doc, sizes, rounds):
    with skgpu.config_context(device="cpu"):
        for case, m, ours, theirs in fitted_calls(sizes):
            stats = interleaved({"skgpu": ours, "scikit-learn": theirs}, rounds=rounds,
                                calls=1)
            ratio = stats["skgpu"]["median_s"] / stats["scikit-learn"]["median_s"]
            doc["results"].append({"case": case, "rows": m, "skgpu": stats["skgpu"],
                                   "scikit-learn": stats["scikit-learn"], "ratio": ratio})
            print(f"{case:42s}: skgpu {stats['skgpu']['median_s'] * 1e6:7.1f} us, "
                  f"scikit-learn {stats['scikit-learn']['median_s'] * 1e6:7.1f} us, "
                  f"{ratio:.2f} x", flush=True)


def main():
    args = standard_parser(__doc__).parse_args()
    doc = {"machine": machine(), "benchmark": "small_calls", "results": [],
           "timing": "20 warm-up calls each, then calls alternating one by one, each timed"}
    sizes, rounds = ([1, 100], 80) if args.quick else ([1, 10, 100], 280)
    run_cases([lambda: rows(doc, sizes, rounds)], doc, args.out)


if __name__ == "__main__":
    main()
