"""GridSearchCV with scikit-learn's string scorers on device data, under scikit-learn's
array-API dispatch: the user guide's setup, run by ``tests/test_device_workflows.py`` in a
fresh interpreter with ``SCIPY_ARRAY_API=1`` in its environment. Prints one JSON line:
per scorer, the device input's and the NumPy input's mean test scores and best parameters;
the copies to the host, during the device searches and a predict, of device arrays of a
tenth of X's size or more (calls to ``get``/``tolist``/``cpu``/``numpy`` seen by a
profile hook, which a control copy shows sees them); the predict's container.

Usage: ``SCIPY_ARRAY_API=1 python tests/device_search_script.py cupy`` (or ``torch``).
"""

import json
import sys
import traceback

#: Methods that copy a device array to the host (CuPy's, torch's).
HOST_COPIES = ("get", "tolist", "cpu", "numpy")
SCORERS = ("r2", "neg_mean_squared_error", "neg_mean_absolute_error", "explained_variance")


def main(kind):
    import numpy as np
    import sklearn
    from sklearn.model_selection import GridSearchCV, KFold
    from sklearn.pipeline import Pipeline

    from skgpu.decomposition import PCA
    from skgpu.linear_model import RidgeCV

    rng = np.random.default_rng(0)
    X = rng.standard_normal((600, 4)) @ rng.standard_normal((4, 24))
    X += 0.3 * rng.standard_normal((600, 24))
    y = X @ rng.standard_normal(24) + rng.standard_normal(600)
    X, y = X.astype(np.float32), y.astype(np.float32)
    if kind == "cupy":
        import cupy

        Xd, yd = cupy.asarray(X), cupy.asarray(y)
    else:
        import torch

        Xd, yd = torch.as_tensor(X, device="cuda"), torch.as_tensor(y, device="cuda")

    large = X.size // 10
    copies = []

    def size(a):
        return a.numel() if kind == "torch" else a.size

    def hook(frame, event, arg):
        if event == "c_call" and getattr(arg, "__name__", "") in HOST_COPIES:
            owner = getattr(arg, "__self__", None)
            if isinstance(owner, type(Xd)) and size(owner) >= large:
                copies.append("".join(traceback.format_stack(frame, 3)))

    sys.setprofile(hook)
    Xd.cpu() if kind == "torch" else Xd.get()
    sys.setprofile(None)
    control = len(copies) == 1
    copies.clear()

    def search(X, y, scoring):
        pipe = Pipeline([("pca", PCA()), ("ridge", RidgeCV(alphas=np.logspace(-3, 3, 7)))])
        s = GridSearchCV(pipe, {"pca__n_components": [1, 2, 4, 8, 16]}, scoring=scoring,
                         cv=KFold(4, shuffle=True, random_state=0), error_score="raise")
        with sklearn.config_context(array_api_dispatch=True):
            s.fit(X, y)
        return [float(v) for v in s.cv_results_["mean_test_score"]], s.best_params_

    result = {}
    for scoring in SCORERS:
        sys.setprofile(hook)
        try:
            dev_scores, dev_best = search(Xd, yd, scoring)
        finally:
            sys.setprofile(None)
        np_scores, np_best = search(X, y, scoring)
        result[scoring] = [dev_scores, np_scores, dev_best, np_best]
    pipe = Pipeline([("pca", PCA(4)), ("ridge", RidgeCV())])
    sys.setprofile(hook)
    try:
        with sklearn.config_context(array_api_dispatch=True):
            out = pipe.fit(Xd, yd).predict(Xd)
    finally:
        sys.setprofile(None)
    print(json.dumps({"scores": result, "control": control, "host_copies": copies,
                      "predict_type": type(out).__module__.split(".")[0]}))


if __name__ == "__main__":
    main(sys.argv[1])
