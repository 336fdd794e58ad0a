"""
An unchanged scikit-learn script, with and without the accelerator
==================================================================

The script below imports nothing from skgpu: it is plain scikit-learn, a grid search over
``Pipeline([StandardScaler, PCA, RidgeCV])``. It is run twice in a fresh Python each
time, as ``python script.py`` and as ``python -m skgpu.accel script.py``; under the
accelerator scikit-learn's names ``PCA`` and ``RidgeCV`` resolve to skgpu's estimators,
which run on the GPU where there is one and on the CPU otherwise. Both runs print the same
search result; the wall times include starting Python and importing the libraries.

This page is built on a machine without a GPU, so both runs below use the CPU: what it
shows is that nothing changes but the estimators' classes. On a GPU host the second run's
PCA and RidgeCV fits run on the GPU: on an H200 host (2026-11-30) the two runs took 5.00 s
and 5.23 s with the same search result, Python's start and imports included. At this size
the fits are too small to win back the GPU's start-up; the user guide's benchmark table
shows where the GPU pays.
"""

import pathlib
import subprocess
import sys
import tempfile
import textwrap
import time

SCRIPT = textwrap.dedent('''
    import numpy as np
    from sklearn.decomposition import PCA
    from sklearn.linear_model import RidgeCV
    from sklearn.model_selection import GridSearchCV, KFold
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(0)
    n, p, rank = 50_000, 128, 12
    factors = rng.standard_normal((n, rank))
    X = factors @ rng.standard_normal((rank, p)) + 2.0 * rng.standard_normal((n, p))
    y = factors @ rng.standard_normal(rank) + 0.5 * rng.standard_normal(n)

    pipe = Pipeline([("scale", StandardScaler()), ("pca", PCA()),
                     ("ridge", RidgeCV(alphas=np.logspace(-3, 3, 13)))])
    search = GridSearchCV(pipe, {"pca__n_components": [4, 8, 16, 32]},
                          cv=KFold(5, shuffle=True, random_state=0)).fit(X, y)
    print(type(search.best_estimator_["pca"]).__module__,
          search.best_params_, round(search.best_score_, 6))
''')

with tempfile.TemporaryDirectory() as tmp:
    script = pathlib.Path(tmp) / "script.py"
    script.write_text(SCRIPT)
    for label, command in (("scikit-learn", [sys.executable, "script.py"]),
                           ("skgpu.accel", [sys.executable, "-m", "skgpu.accel",
                                            "script.py"])):
        start = time.perf_counter()
        out = subprocess.run(command, cwd=tmp, capture_output=True, text=True, check=True)
        print(f"{label:13s} {time.perf_counter() - start:6.2f} s   {out.stdout.strip()}")
