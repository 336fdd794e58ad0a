"""Running per-chunk work on the active dask scheduler: the machinery, no algorithm.

With a ``dask.distributed`` Client and persisted data, one task per worker thread runs a
run of the chunks that worker holds (:func:`run`, with the locality plan of
:func:`locality_plan`);
chunks made from a recipe are made and read in runs, a few tasks per thread
(:func:`recipe_tasks`); otherwise one task per chunk (:func:`chunk_tasks`). Each chunk's
work selects a backend like an in-memory fit does (CuPy chunks run on the GPU). No
scheduler or communication of our own.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, NamedTuple

import numpy as np

from ..backends import is_dask_array

logger = logging.getLogger("skgpu")


def blocks(X):
    return [b for b in X.to_delayed().ravel()]


def compute(tasks):
    import dask

    return dask.compute(*tasks)


def vector_blocks(v, X):
    """A per-row vector (dask, NumPy or None) split like X's row chunks."""
    a = aligned_vector(v, X)
    return [None] * len(X.chunks[0]) if a is None else list(a.to_delayed().ravel())


def aligned_vector(v, X):
    """A per-row vector (dask, NumPy, a scalar weight or None) as a dask array on X's
    row chunks, all its columns in each chunk (None stays None)."""
    import dask.array as da

    if v is None:
        return None
    if np.ndim(v) == 0:  # a scalar sample weight, as scikit-learn allows
        v = da.full(X.shape[0], float(v), chunks=(X.chunks[0],))
    whole = tuple((s,) for s in np.shape(v)[1:])  # every column in each chunk
    if not is_dask_array(v):
        v = da.from_array(np.asarray(v), chunks=(X.chunks[0],) + whole)
    elif v.chunks != (X.chunks[0],) + whole:
        v = v.rechunk((X.chunks[0],) + whole)
    return v


def backend_for(block, device, operations):
    from ..backends import select_backend

    return select_backend(device, operations=operations, X=block)[0]


def finite(ops, a):
    return bool(np.isfinite(float(ops.xp.sum(a, dtype=np.float64))))


def host(tree):
    """Device arrays in a (nested) result to NumPy, 0-d ones to Python floats."""
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):  # a named tuple
        return type(tree)(*(host(t) for t in tree))
    if isinstance(tree, (tuple, list)):
        return type(tree)(host(t) for t in tree)
    if tree is None or isinstance(tree, (int, float, np.ndarray, np.generic)):
        return tree
    from ..backends import to_numpy

    a = to_numpy(tree)
    return float(a) if a.ndim == 0 else a


# --- running per-chunk work: one task per worker thread, per run of chunks, or per chunk
def group_task(func, reduce, blocks, vectors, args, device, operations):
    """``func(ops, block, *vector_blocks, *args)`` for each chunk of a group, in order,
    ``ops`` being the chunk's backend. The NumPy arrays among ``args`` (small factors
    shared by every chunk) are moved to that backend once per group, not once per chunk.
    ``reduce`` (if given) folds the results where they are (on the worker's device), and
    only the folded result travels, as NumPy."""
    return _over_chunks(func, reduce, ((b, [v[i] for v in vectors])
                                       for i, b in enumerate(blocks)), args, device,
                        operations)


def _over_chunks(func, reduce, chunks, args, device, operations):
    """:func:`group_task` over ``chunks``, an iterable of (block, vector blocks) pairs
    (each made only when it is reached, where the chunks come from their recipe)."""
    moved = {}
    results = []
    for block, vecs in chunks:
        ops = backend_for(block, device, operations)
        if ops.name not in moved:
            moved[ops.name] = tuple(ops.asarray(a) if isinstance(a, np.ndarray) else a
                                    for a in args)
        results.append(func(ops, block, *vecs, *moved[ops.name]))
        del block, vecs  # (a made chunk is let go before the next is made)
    return host(reduce(results) if reduce is not None else results)


def persisted(client, arr, n_blocks):
    """The futures of a dask array's blocks in block order, when it is persisted on
    ``client``'s cluster (its graph is those futures); else None."""
    from distributed import futures_of

    from dask.core import flatten

    futures = {f.key: f for f in futures_of(arr) if f.client is client}
    keys = list(flatten(arr.__dask_keys__()))
    if len(keys) != n_blocks or not all(k in futures for k in keys):
        return None
    return [futures[k] for k in keys]


class Plan(NamedTuple):
    """Where a persisted X's chunks are: the ``client``, each block's future
    (``blocks``), the vectors' blocks (``vectors``: futures or NumPy slices, one list per
    vector) and the groups: ``(worker, block indices)`` pairs, each worker's blocks in
    as many consecutive runs as it has threads (one task each reads them)."""

    client: Any
    blocks: list
    vectors: list
    groups: list


def locality_plan(X, vectors):
    """With a ``dask.distributed`` client and X (and every dask vector) persisted, its
    :class:`Plan`; None otherwise.

    A fit of several passes asks for it once (:func:`runner`): where the chunks are is
    one scheduler round trip.
    """
    try:
        from distributed import get_client, wait

        client = get_client()
    except (ImportError, ValueError):
        return None
    n_blocks = len(X.chunks[0])
    fx = persisted(client, X, n_blocks)
    if fx is None:
        return None
    bounds = np.concatenate([[0], np.cumsum(X.chunks[0])])
    vecs = []
    for v in vectors:
        if v is None:
            vecs.append([None] * n_blocks)
        elif is_dask_array(v):
            if v.chunks != (X.chunks[0],) + tuple((s,) for s in v.shape[1:]):
                return None
            fv = persisted(client, v, n_blocks)
            if fv is None:
                return None
            vecs.append(fv)
        else:
            a = np.full(X.shape[0], float(v)) if np.ndim(v) == 0 else np.asarray(v)
            vecs.append([a[lo:hi] for lo, hi in zip(bounds[:-1], bounds[1:])])
    if not all(f.done() for f in fx):  # (a wait is a round trip through the event loop)
        wait(fx)
    who, threads = _holders_and_threads(client, fx)
    held = {}
    for i, f in enumerate(fx):
        holders = who.get(f.key) or who.get(str(f.key)) or [None]
        held.setdefault(sorted(holders)[0], []).append(i)
    # a worker's threads each read a run of its chunks: one task per worker would leave
    # all but one idle (dask's workers run NumPy's BLAS on one thread each)
    groups = [(worker, [int(i) for i in run])
              for worker, idx in held.items()
              for run in np.array_split(idx, max(1, min(len(idx), threads.get(worker, 1))))]
    return Plan(client, fx, vecs, groups)


def _holders_and_threads(client, futures):
    """Which workers hold each future (by key) and each worker's thread count, asked of
    the scheduler together (one round trip, as the client's own ``who_has`` and
    ``nthreads`` ask each)."""
    import asyncio

    keys = list({f.key for f in futures})

    async def ask():
        return await asyncio.gather(client.scheduler.who_has(keys=keys),
                                    client.scheduler.ncores())

    return client.sync(ask)


def run(func, X, vectors=(), args=(), reduce=None, *, operations=("matmul",), plan=None,
        split=None):
    """Apply ``func(ops, block, *vector_blocks, *args)`` to every row chunk of X; return
    the per-chunk results in order, or, with ``reduce``, the reduced result of each group
    of chunks (fold them with ``reduce`` once more on the client). ``operations``: what
    ``func`` needs of a backend (it picks the GPU for CuPy chunks, as in memory).

    X persisted on a ``dask.distributed`` cluster: one task per worker thread, pinned to
    the worker, runs a run of the chunks that worker holds (no data moves, and the
    scheduler sees a handful of tasks instead of one per chunk). Otherwise, on whatever
    scheduler is active, a few tasks per thread each making and reading a run of chunks
    (:func:`recipe_tasks`), or one task per chunk (:func:`chunk_tasks`, where the
    recipe holds futures). ``plan``: a :func:`locality_plan` made for
    this X and these vectors (False: there is none), so that the passes of one fit ask
    the scheduler where the chunks are only once; ``split``, likewise, a
    :func:`recipe_split` (False: there is none).
    """
    device = configured_device()
    if plan is None:
        plan = locality_plan(X, vectors)
    if not plan:
        if split is None:
            split = recipe_split(X, vectors)
        out = compute(recipe_tasks(split, func, reduce, args, device, operations) if split
                      else chunk_tasks(func, reduce, X, vectors, args, device, operations))
        return list(out) if reduce is not None else [r for res in out for r in res]
    out = gather(plan.client, submit(plan, func, args, reduce, operations, device))
    if reduce is not None:
        return out
    groups = plan.groups
    order = [i for _, idx in groups for i in idx]
    results = [None] * len(plan.blocks)
    for i, r in zip(order, [r for res in out for r in res]):
        results[i] = r
    return results


def chunk_tasks(func, reduce, X, vectors, args, device, operations):
    """One delayed task per row chunk of X (not persisted): :func:`group_task` on that
    chunk and its vectors' blocks, as a blockwise layer over X, so that dask fuses it
    with the blockwise operations that make the chunk (a chunk computed from a recipe
    is made by the task that reads it: one task per chunk and pass, and no made chunk
    kept under a key of its own)."""
    import dask.array as da

    pairs = [X, "ij"]
    for v in vectors:
        a = aligned_vector(v, X)
        pairs += [None, None] if a is None else [a, "i" if a.ndim == 1 else "ik"]
    out = da.blockwise(_chunk_task, "ij", *pairs, shared(args), None, func, None,
                       reduce, None, device, None, operations, None, concatenate=False,
                       dtype=object, meta=np.empty((0, 0), dtype=object))
    return list(out.to_delayed().ravel())


def _chunk_task(block, *rest):
    """:func:`chunk_tasks`' task: ``rest`` is the vectors' blocks, then the arguments
    of :func:`group_task` (a 2-D vector's block comes as a list of its one column
    block)."""
    *vecs, args, func, reduce, device, operations = rest
    vecs = [v[0] if isinstance(v, list) else v for v in vecs]
    return group_task(func, reduce, [block], [[v] for v in vecs], args, device, operations)


#: Tasks per thread of the cluster for a pass over chunks made from their recipe: a few,
#: so that each task reads a long run of chunks and the threads still share the work.
GROUPS_PER_THREAD = 2


class Recipe:
    """How to make a run of consecutive chunks inside the task that reads them: per
    chunk, the graph nodes only that chunk needs and the keys of its X block and vector
    blocks (None for an absent vector). Nodes needed by several chunks (a source array,
    a rechunk's shared piece), and nodes that are not computations (data, futures),
    are not in it: the task gets their values as dependencies, computed once by dask."""

    def __init__(self, graphs, keys):
        self.graphs, self.keys = graphs, keys

    def chunks(self, external):
        """(block, vector blocks) of each chunk in turn, made when reached."""
        from dask._task_spec import execute_graph

        for graph, (x_key, v_keys) in zip(self.graphs, self.keys):
            wanted = {x_key, *(k for k in v_keys if k is not None)}
            made = execute_graph(graph, cache=dict(external), keys=wanted) if graph else (
                external)
            yield made[x_key], [None if k is None else made[k] for k in v_keys]
            del made


class RecipeSplit(NamedTuple):
    """X's and the vectors' recipe split by chunk (:func:`recipe_split`): the graph, each
    chunk's (X key, vector keys), each chunk's closure (the keys it depends on, itself
    included) and the keys only one chunk needs (made inline by its task)."""

    graph: dict
    keys: list
    closures: list
    inline: set


def recipe_split(X, vectors):
    """The :class:`RecipeSplit` of chunks that are not persisted, made once per fit (every
    pass reads the same recipe); None where the recipe cannot be split (futures in it,
    dask without its task specification): then :func:`chunk_tasks`."""
    if not recipes_supported():
        return None
    from dask._task_spec import Alias, Task, convert_legacy_graph
    from dask.base import collections_to_expr

    arrays = [X] + [aligned_vector(v, X) for v in vectors]
    present = [a for a in arrays if a is not None]
    if _has_futures(present):
        return None
    graph = convert_legacy_graph(
        dict(collections_to_expr(present, optimize_graph=False).__dask_graph__()))
    rows = [None if a is None else _row_keys(a) for a in arrays]
    keys = [(rows[0][i], [None if r is None else r[i] for r in rows[1:]])
            for i in range(len(X.chunks[0]))]
    closures = []
    for x_key, v_keys in keys:
        closure = _closure(graph, [x_key, *(k for k in v_keys if k is not None)])
        if closure is None:
            return None
        closures.append(closure)
    uses = {}
    for closure in closures:
        for k in closure:
            uses[k] = uses.get(k, 0) + 1
    inline = {k for k, c in uses.items() if c == 1 and isinstance(graph[k], (Task, Alias))}
    return RecipeSplit(graph, keys, closures, inline)


def recipe_tasks(split, func, reduce, args, device, operations):
    """Tasks of a pass over chunks that are not persisted (``split``, their
    :class:`RecipeSplit`), each making and reading a run of consecutive chunks
    (:class:`Recipe`), one chunk at a time, and folding them on its device before one
    result travels, as a persisted worker's task does: no scheduler round trip between
    chunks. A few tasks per thread of the cluster (:data:`GROUPS_PER_THREAD`)."""
    from dask.delayed import Delayed

    graph, keys, closures, inline = split
    n = len(keys)
    bounds = np.linspace(0, n, _n_groups(n) + 1).round().astype(int)
    common = shared(args)
    task = delayed(_recipe_task, pure=False)
    tasks = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        graphs, external = [], set()
        for i in range(lo, hi):
            own = {k: graph[k] for k in closures[i] if k in inline}
            external |= {d for k in own for d in graph[k].dependencies if d not in inline}
            external |= {k for k in (keys[i][0], *keys[i][1])
                         if k is not None and k not in inline}
            graphs.append(_optimized(own, keys[i]))
        tasks.append(task(Recipe(graphs, keys[lo:hi]),
                          {k: Delayed(k, graph) for k in external}, func, reduce, common,
                          device, operations))
    logger.debug("dask: %d chunks made from their recipe, read by %d tasks", n,
                 len(tasks))
    return tasks


def _optimized(own, keys):
    """A chunk's own nodes (``own``) with dask's array optimisations that stay within
    them: linear chains fused, and a slice of a source read merged into the read, so that
    a column selection of an h5py or zarr store reads only the columns kept (as dask's
    own compute does). The chunk's ``keys`` (X's, the vectors') stay; nothing is shared
    between chunks here, so nothing is made twice (optimising the whole graph would fuse
    X's chunk into each array computed from it, y from X, and make it twice)."""
    x_key, v_keys = keys
    wanted = [x_key, *(k for k in v_keys if k is not None)]
    try:
        from dask._task_spec import fuse_linear_task_spec
        from dask.array.optimization import _optimize_slices
    except ImportError:  # (another dask: the nodes as they are)
        return own
    return _optimize_slices(fuse_linear_task_spec(own, keys=wanted))


def recipes_supported():
    """Whether this dask can split a recipe into runs of chunks (its task specification,
    from dask 2025)."""
    try:
        from dask._task_spec import Alias, Task, convert_legacy_graph, execute_graph  # noqa: F401
        from dask.base import collections_to_expr  # noqa: F401
    except ImportError:
        return False
    return True


def _recipe_task(recipe, external, func, reduce, args, device, operations):
    return _over_chunks(func, reduce, recipe.chunks(external), args, device, operations)


def _row_keys(a):
    """The key of each row chunk of a dask array with one column chunk (or 1-D)."""
    return [k[0] if isinstance(k, list) else k for k in a.__dask_keys__()]


def _closure(graph, keys):
    """The keys ``keys`` depend on (themselves included), through the graph; None if
    one is missing from it."""
    seen, todo = set(), list(keys)
    while todo:
        k = todo.pop()
        if k in seen:
            continue
        if k not in graph:
            return None
        seen.add(k)
        todo.extend(graph[k].dependencies)
    return seen


def _has_futures(arrays):
    try:
        from distributed import futures_of
    except ImportError:
        return False
    return any(futures_of(a) for a in arrays)


def _n_groups(n_chunks):
    """How many tasks a pass of ``n_chunks`` recipe chunks takes (see
    :func:`recipe_tasks`)."""
    import os

    try:
        from distributed import get_client

        threads = sum(get_client().nthreads().values())
    except (ImportError, ValueError):
        import dask

        threads = dask.config.get("num_workers", None) or os.cpu_count() or 1
    return max(1, min(n_chunks, GROUPS_PER_THREAD * threads))


def per_group(plan, task, *args):
    """``task(blocks, vector_blocks, first, *args)`` delayed, once per group of the plan,
    each restricted (loosely: should that worker be gone, the task runs elsewhere) to the
    worker holding the group's chunks; ``first`` is True for one group. Nothing is sent
    until :func:`gather`."""
    import dask

    fx, vecs, groups = plan.blocks, plan.vectors, plan.groups
    task = dask.delayed(task, pure=False)
    tasks = []
    for worker, idx in groups:
        where = {} if worker is None else {"workers": [worker], "allow_other_workers": True}
        with dask.annotate(**where):
            tasks.append(task([fx[i] for i in idx], [[v[i] for i in idx] for v in vecs],
                              not tasks, *args))
    return tasks


def pass_task(blocks, vectors, first, func, reduce, args, device, operations):
    return group_task(func, reduce, blocks, vectors, args, device, operations)


def submit(plan, func, args=(), reduce=None, operations=("matmul",), device=None):
    """The tasks of one pass on a distributed plan (see :func:`per_group`)."""
    device = configured_device() if device is None else device
    return per_group(plan, pass_task, func, reduce, args, device, operations)


#: The futures of the last pass computed, let go only once the next pass is submitted.
_last_pass: list = []
_last_pass_lock = threading.Lock()


def gather(client, tasks):
    """Compute ``tasks`` (delayed) on ``client`` and return their results.

    The client sends its messages to the scheduler in batches, at most one every 10 ms,
    and the scheduler its messages to a worker at most one every 5 ms. So the tasks go
    as one graph (submitted one by one, they may be split across two batches, the
    second 10 ms late), and the futures of a pass are released only after the next pass
    (of this fit or the next) has been submitted: released as soon as their results
    arrive, their release messages (to the scheduler, then to the worker) would hold
    back that next submission. Measured on one dask-cuda worker: PCA 38 against 43 ms,
    RidgeCV 147 against 156 ms (medians).
    """
    global _last_pass
    futures = client.compute(tasks, optimize_graph=False)
    with _last_pass_lock:
        previous, _last_pass = _last_pass, futures
    del previous  # released here, after the submission above
    try:
        return client.gather(futures)
    except Exception as exc:
        if not _lost_work(exc):
            raise
        # dask reruns work lost with a worker (a killed worker's chunks are recomputed
        # from their recipe); it gives up when the data itself is gone (chunks scattered
        # from the client) or a task keeps killing its workers. Nothing is fitted then.
        raise RuntimeError(
            "The dask fit could not complete: a worker was lost and dask could not redo "
            "its part (chunks without a recipe, e.g. scattered from the client, are gone "
            "with their worker; or a task killed every worker it ran on). Nothing was "
            f"fitted. Persist X from a recipe (dask.array operations) to survive worker "
            f"loss. dask said: {type(exc).__name__}: {exc}") from exc


def _lost_work(exc):
    """Whether ``exc`` is dask's report of work or data lost with a worker."""
    import concurrent.futures

    return (isinstance(exc, concurrent.futures.CancelledError)
            or type(exc).__name__ == "KilledWorker")


class FitRun:
    """:func:`run` for the passes of one fit over X and ``vectors``, with the locality
    plan made once (``plan``: a :class:`Plan`, or False without one) and, without a
    plan, the recipe's split too (at the first pass)."""

    def __init__(self, X, vectors=()):
        self.X, self.vectors = X, vectors
        self.plan = locality_plan(X, vectors) or False
        self.split = None

    def __call__(self, func, args=(), reduce=None, *, operations=("matmul",)):
        if not self.plan and self.split is None:
            self.split = recipe_split(self.X, self.vectors) or False
        return run(func, self.X, self.vectors, args, reduce, operations=operations,
                   plan=self.plan, split=self.split)


def for_fit(X, vectors=()):
    return FitRun(X, vectors)



def sum_pairs(results):
    return tuple(sum(r[j] for r in results) for j in range(len(results[0])))



def delayed(func, pure=True):
    import dask

    return dask.delayed(func, pure=pure)


def shared(value):
    """One graph key for a value every chunk's task reads (not one copy per task)."""
    import dask

    return dask.delayed(value, pure=True)


def configured_device():
    from .._config import get_config

    return get_config()["device"]
