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
RUNS = pytest.mark.skipif(not runner.recipes_supported(),
                          reason="this dask reads recipe chunks one task per chunk")
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


def _assert_same_fit(est, ref, attributes, rtol):
    """The fitted ``attributes`` of ``est`` equal ``ref``'s (components up to sign, the
    solver's choice)."""
    for attr in attributes:
        got, want = getattr(est, attr), getattr(ref, attr)
        if attr == "components_":
            got = got * np.sign(np.sum(got * want, axis=1))[:, None]
        assert_allclose_rel(got, want, rtol=rtol)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_chunks_made_once_per_pass(monkeypatch, name, dtype, seed):
    made, read = [], []
    backend_for = runner.backend_for

    def counting(block, *args):  # asked once for each chunk a task reads
        read.append(block.shape)
        return backend_for(block, *args)

    monkeypatch.setattr(runner, "backend_for", counting)
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
    _assert_same_fit(est, ref, attributes, tol)


def _y_source(made, values, block_id=None, block_info=None):
    made.append(block_id[0])
    lo, hi = block_info[None]["array-location"][0]
    return values[lo:hi]


@RUNS
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("name", ["ridge", "ridgecv"])
def test_pieces_shared_by_chunks_are_made_once(caplog, name, seed):
    """y chunked unlike X: a y chunk that two X chunks need is made once per pass, by a
    task of its own, and each pass over X's recipe is a few tasks, not one per chunk."""
    rng = np.random.default_rng(seed)
    n = 6 * ROWS
    Xm = rng.standard_normal((n, P)) * np.geomspace(3, 0.5, P)
    ym = Xm @ np.arange(1.0, P + 1) + rng.standard_normal(n)
    made_x, made_y = [], []

    def x_chunk(block_id=None):
        made_x.append(block_id[0])
        return Xm[block_id[0] * ROWS:(block_id[0] + 1) * ROWS]

    X = da.map_blocks(x_chunk, chunks=((ROWS,) * CHUNKS, (P,)), dtype=np.float64)
    y_chunks = (55,) * (n // 55) + ((n % 55,) if n % 55 else ())
    y = da.map_blocks(functools.partial(_y_source, made_y, ym), chunks=(y_chunks,),
                      dtype=np.float64)
    make, attributes = ESTIMATORS[name]
    with caplog.at_level("DEBUG", logger="skgpu"), dask.config.set(
            scheduler="synchronous", num_workers=1):
        est = make().fit(X, y)
        groups = runner._n_groups(CHUNKS)  # 2 on one thread (more if a cluster is up)
    passes = [r.getMessage() for r in caplog.records
              if "made from their recipe" in r.getMessage()]
    assert groups < CHUNKS
    assert passes and all(m.endswith(f"read by {groups} tasks") for m in passes)
    assert sorted(made_x) == sorted(list(range(CHUNKS)) * len(passes))
    assert sorted(made_y) == sorted(list(range(len(y_chunks))) * len(passes))
    ref = make().fit(Xm, ym)
    for attr in attributes:
        assert_allclose_rel(getattr(est, attr), getattr(ref, attr), rtol=1e-8)


@RUNS
@pytest.mark.parametrize("name", ["pca", "ridgecv"])
def test_recipes_on_a_cluster(client, caplog, name):
    """On a distributed cluster: a recipe is read by a few tasks per thread; a recipe
    that starts from persisted chunks (futures) is read chunk by chunk; both give the
    in-memory fit."""
    rng = np.random.default_rng(7)
    Xm = rng.standard_normal((CHUNKS * ROWS, P)) * np.geomspace(3, 0.5, P) + 2.0
    ym = Xm @ np.arange(1.0, P + 1) + rng.standard_normal(CHUNKS * ROWS)
    make, attributes = ESTIMATORS[name]
    ref = make().fit(Xm, ym)
    base = da.from_array(Xm, chunks=(ROWS, P))
    for X, expected in ((base * 1.0, "read by 4 tasks"),  # 2 workers x 1 thread x 2
                        (client.persist(base) * 1.0, None)):
        y = da.from_array(ym, chunks=ROWS)
        caplog.clear()
        with caplog.at_level("DEBUG", logger="skgpu"):
            est = make().fit(X, y) if name == "ridgecv" else make().fit(X)
        passes = [r.getMessage() for r in caplog.records
                  if "made from their recipe" in r.getMessage()]
        if expected is None:
            assert not passes
        else:
            assert passes and all(m.endswith(expected) for m in passes)
        _assert_same_fit(est, ref, attributes, 1e-8)


@RUNS
def test_recipe_split_once_per_fit(monkeypatch):
    """RidgeCV's passes (two or more) read one split of the recipe, made at its first."""
    splits = []
    recipe_split = runner.recipe_split

    def counting(*args):
        splits.append(1)
        return recipe_split(*args)

    monkeypatch.setattr(runner, "recipe_split", counting)
    made = []
    X = da.map_blocks(functools.partial(_x_chunk, made, 0, np.float64),
                      chunks=((ROWS,) * CHUNKS, (P,)), dtype=np.float64)
    y = X.map_blocks(_y_chunk, drop_axis=1, dtype=np.float64)
    with dask.config.set(scheduler="synchronous"):
        RidgeCV(alphas=[0.1, 1.0, 10.0]).fit(X, y)
    assert len(made) >= 2 * CHUNKS  # two passes at least
    assert len(splits) == 1


class _Store:
    """An array store (as an h5py dataset or a zarr array is to ``da.from_array``) that
    records every read."""

    def __init__(self, values):
        self.values, self.reads = values, []
        self.shape, self.dtype, self.ndim = values.shape, values.dtype, values.ndim

    def __getitem__(self, index):
        self.reads.append(index)
        return self.values[index]


def _read_size(index, shape):
    return int(np.prod([len(range(*i.indices(n))) for i, n in zip(index, shape)]))


@RUNS
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("name", ["pca", "truncated-svd", "ridgecv"])
def test_a_store_read_only_where_sliced(name, seed):
    """A slice of a store (columns, rows) reads only what it keeps, as dask's own compute
    does, and the fit equals the in-memory fit of the slice."""
    rng = np.random.default_rng(seed)
    n, p = 8 * ROWS, 4 * P
    store = _Store(rng.standard_normal((n, p)) * np.geomspace(3, 0.5, p) + 2.0)
    cols = slice(3, 3 + P + 1)
    X = da.from_array(store, chunks=(ROWS, p))[ROWS // 2:, cols]
    y = da.from_array(rng.standard_normal(n), chunks=ROWS)[ROWS // 2:]
    make, attributes = ESTIMATORS[name]
    store.reads.clear()  # (from_array's own look at the store)
    with dask.config.set(scheduler="synchronous"):
        est = make().fit(X, y) if name.startswith("ridge") else make().fit(X)
    kept = X.shape[0] * X.shape[1]
    passes = sum(_read_size(i, store.shape) for i in store.reads) / kept
    assert passes == round(passes) >= 1  # whole passes over what the slice keeps
    assert all(i[1] == cols for i in store.reads if _read_size(i, store.shape))
    Xm, ym = store.values[ROWS // 2:, cols], y.compute()
    ref = make().fit(Xm, ym) if name.startswith("ridge") else make().fit(Xm)
    _assert_same_fit(est, ref, attributes, 1e-8)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_gpu_recipe_chunks_fit_as_in_memory(name, dtype):
    """CuPy chunks made from a recipe (y from X's chunk), read in runs: the fit equals
    the in-memory fit of the same data."""
    cp = pytest.importorskip("cupy")
    rows = 5000

    def x_chunk(block_id=None):
        rng = cp.random.default_rng(block_id[0])
        X = rng.standard_normal((rows, P)) * cp.asarray(np.geomspace(3, 0.5, P)) + 1.5
        return X.astype(dtype)

    meta = cp.empty((0, 0), dtype)
    X = da.map_blocks(x_chunk, chunks=((rows,) * CHUNKS, (P,)), dtype=dtype, meta=meta)
    y = X.map_blocks(lambda b: b @ cp.arange(1.0, P + 1, dtype=dtype) + cp.sin(b[:, 0]),
                     drop_axis=1, dtype=dtype, meta=cp.empty(0, dtype))
    make, attributes = ESTIMATORS[name]
    supervised = name.startswith("ridge")
    with dask.config.set(scheduler="threads", num_workers=1):
        est = make().fit(X, y) if supervised else make().fit(X)
    Xm, ym = cp.asnumpy(X.compute()), cp.asnumpy(y.compute())
    # the chunks' normal equations are float64; a float32 Ridge in memory solves in float32
    if name == "ridge":
        Xm, ym = Xm.astype(np.float64), ym.astype(np.float64)
    ref = make().fit(Xm, ym) if supervised else make().fit(Xm)
    tol = 1e-4 if dtype == np.float32 else 1e-8
    _assert_same_fit(est, ref, attributes, tol)
