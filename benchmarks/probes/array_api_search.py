"""What scikit-learn's Array API mode does with skgpu estimators in a search on CuPy
data: the fitted search, and every device-to-host copy of an array as large as a tenth
of X (``ndarray.get``/``tolist`` seen by a profile hook).

Run on the GPU host: ``SCIPY_ARRAY_API=1 python -m benchmarks.probes.array_api_search``.
"""

import sys
import traceback

import cupy as cp
import numpy as np
import sklearn
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline

from skgpu.decomposition import PCA, TruncatedSVD
from skgpu.linear_model import Ridge, RidgeCV


def main():
    rng = np.random.RandomState(0)
    X = rng.randn(2000, 40)
    y = X @ rng.randn(40) + 0.1 * rng.randn(2000)
    Xd, yd = cp.asarray(X), cp.asarray(y)
    big = []

    def hook(frame, event, arg):
        if event == "c_call" and getattr(arg, "__name__", "") in ("get", "tolist"):
            owner = getattr(arg, "__self__", None)
            if isinstance(owner, cp.ndarray) and owner.size >= X.size // 10:
                big.append((owner.shape, "".join(traceback.format_stack(frame, 4))))

    sys.setprofile(hook)
    Xd.get()
    sys.setprofile(None)
    print("control: a host copy of X is seen:", len(big) == 1)
    for first in (PCA(10), TruncatedSVD(10, random_state=0)):
        for last in (Ridge(), RidgeCV(alphas=[0.1, 1.0, 10.0])):
            pipe = Pipeline([("reduce", first), ("fit", last)])
            grid = {"reduce__n_components": [5, 20]}
            big.clear()
            try:
                with sklearn.config_context(array_api_dispatch=True):
                    sys.setprofile(hook)
                    try:
                        search = GridSearchCV(pipe, grid, cv=3).fit(Xd, yd)
                        pred = search.predict(Xd)
                    finally:
                        sys.setprofile(None)
                ref = GridSearchCV(pipe, grid, cv=3).fit(X, y)
                print(type(first).__name__, type(last).__name__, "best",
                      search.best_params_, ref.best_params_, "score diff",
                      abs(float(search.best_score_) - ref.best_score_),
                      "pred", type(pred).__module__, "big host copies", len(big))
                for shape, where in big[:3]:
                    print("   ", shape, where)
            except Exception as exc:  # noqa: BLE001 - a probe reports everything
                sys.setprofile(None)
                print(type(first).__name__, type(last).__name__, "FAILED",
                      type(exc).__name__, exc)
                traceback.print_exc(limit=-4)
    # scikit-learn's own check of the array_api_support tag, with the tag forced on
    from sklearn.utils.estimator_checks import check_array_api_input

    for Estimator in (PCA, TruncatedSVD, Ridge, RidgeCV):
        class Tagged(Estimator):
            def __sklearn_tags__(self):
                tags = super().__sklearn_tags__()
                tags.array_api_support = True
                return tags

        Tagged.__name__ = Estimator.__name__
        try:
            with sklearn.config_context(array_api_dispatch=True):
                check_array_api_input(Estimator.__name__, Tagged(), "cupy",
                                      dtype_name="float64")
            print("check_array_api_input", Estimator.__name__, "passed")
        except Exception as exc:  # noqa: BLE001 - a probe reports everything
            print("check_array_api_input", Estimator.__name__, "FAILED",
                  type(exc).__name__, str(exc)[:300])


if __name__ == "__main__":
    main()
