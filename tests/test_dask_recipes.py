"""Dask chunks made from a recipe (never persisted) are made once per chunk and pass,
also when y is computed from X's chunks (as X and y read from one source are), and the
fit equals the in-memory fit of the same data."""

import functools

import numpy as np
import pytest
from skgpu_testing import assert_allclose_rel

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")

from skgpu.dask import runner  # noqa: E402
from skgpu.decomposition import PCA, TruncatedSVD  # noqa: E402
from skgpu.linear_model import Ridge, RidgeCV  # noqa: E402

ROWS, P, CHUNKS = 40, 5, 6
ESTIMATORS = {
    "pca": (lambda: PCA(n_components=3), ("components_", "explained_variance_")),
    "pca-randomized": (lambda: PCA(n_components=3, svd_solver="randomized", random_state=0),
                       ("explained_variance_", "singular_values_")),
    "truncated-svd": (lambda: TruncatedSVD(n_components=3, random_state=0),
                      ("explained_variance_", "singular_values_")),
    "ridge": (lambda: Ridge(alpha=0.7), ("coef_", "intercept_")),
    "ridgecv": (lambda: RidgeCV(alphas=[0.1, 1.0, 10.0]), ("coef_", "intercept_",
                                                           "best_score_")),
}


def _x_chunk(made, seed, dtype, block_id=None):
    made.append(block_id[0])
    rng = np.random.default_rng(1000 * seed + block_id[0])
    X = rng.standard_normal((ROWS, P)) * np.geomspace(3, 0.5, P) + rng.uniform(-2, 2, P)
    return X.astype(dtype)


def _y_chunk(X):
    return X @ np.arange(1.0, P + 1) + np.sin(7.0 * X[:, 0])


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_chunks_made_once_per_pass(monkeypatch, name, dtype, seed):
    made, read = [], []
    group_task = runner.group_task

    def counting(func, reduce, blocks, *args):
        read.extend(range(len(blocks)))
        return group_task(func, reduce, blocks, *args)

    monkeypatch.setattr(runner, "group_task", counting)
    X = da.map_blocks(functools.partial(_x_chunk, made, seed, dtype),
                      chunks=((ROWS,) * CHUNKS, (P,)), dtype=dtype)
    y = X.map_blocks(_y_chunk, drop_axis=1, dtype=dtype)
    make, attributes = ESTIMATORS[name]
    supervised = name.startswith("ridge")
    with dask.config.set(scheduler="synchronous"):  # the recipe runs in this process
        est = make().fit(X, y) if supervised else make().fit(X)
    # every chunk a fit's tasks read was made for that read, and only for it
    assert len(read) >= CHUNKS and len(read) % CHUNKS == 0
    assert sorted(made) == sorted(i for i in range(CHUNKS) for _ in range(len(read) // CHUNKS))
    Xm, ym = X.compute(scheduler="synchronous"), y.compute(scheduler="synchronous")
    ref = make().fit(Xm, ym) if supervised else make().fit(Xm)
    tol = 1e-4 if dtype == np.float32 else 1e-8
    for attr in attributes:
        got, want = getattr(est, attr), getattr(ref, attr)
        if attr == "components_":  # signs are the solver's choice
            got = got * np.sign(np.sum(got * want, axis=1))[:, None]
        assert_allclose_rel(got, want, rtol=tol)
