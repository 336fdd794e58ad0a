"""BLAS threads for small CPU-backend work: one thread where waking the pool costs more
than the arithmetic.

NumPy's and SciPy's BLAS (OpenBLAS or MKL) each keep one process-wide thread pool, sized
to the machine. A small factorization spends more on waking threads than on arithmetic,
measured on a 2-core machine (``benchmarks/bench_cpu_threads.py``): a GP likelihood with
its gradient at n = 200 took 6.3 ms, 3.0 ms on one thread (at n = 2,000 the pool wins,
326 against 380 ms); RidgeCV crosses over near n·p² ≈ 10⁹ (2,000 × 100: 27-90 ms against
10 ms on one thread; 100,000 × 200: 1.09 against 1.36 s). So work the caller declares
smaller than :data:`SMALL_WORK_FLOPS` runs with BLAS limited to one thread, through
threadpoolctl (a scikit-learn dependency), and the limit is lifted when it ends.

Only the main thread sets limits. OpenBLAS 0.3.30 (SciPy's and NumPy's wheels) takes
``openblas_set_num_threads`` only from the thread that first called it: a limit set from a
worker thread and lifted from another stayed in force, and one set from a worker thread
first made later limits from the main thread (the user's own ``threadpool_limits``,
scikit-learn's in KMeans) be ignored (both seen here, every run). Fits running at once in
several threads (joblib's threading backend) are therefore not managed here; joblib's
process workers (loky) get ``cpu_count // n_jobs`` BLAS threads each from joblib itself.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
from collections.abc import Iterator

logger = logging.getLogger("skgpu")

#: Work below this many floating-point operations runs on one BLAS thread (the crossover
#: measured for Cholesky-based GP likelihoods and QR-based RidgeCV, see the module text).
SMALL_WORK_FLOPS = 1e9

_local = threading.local()
#: Off only to measure the unmanaged behaviour (benchmarks/bench_cpu_threads.py).
enabled = True


@functools.lru_cache(maxsize=None)
def _controller():
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


@contextlib.contextmanager
def managed_blas_threads(flops: float | None = None) -> Iterator[None]:
    """Run the block with BLAS on one thread if ``flops`` (the work's size, where the
    caller knows it) is small and this is the main thread; otherwise change nothing."""
    depth = getattr(_local, "depth", 0)
    limit = (enabled and depth == 0 and flops is not None and flops < SMALL_WORK_FLOPS
             and threading.current_thread() is threading.main_thread())
    _local.depth = depth + 1
    limiter = None
    try:
        if limit:
            limiter = _controller().limit(limits=1, user_api="blas")
            logger.debug("BLAS on one thread for small work (%.2g flops)", flops)
        yield
    finally:
        if limiter is not None:
            limiter.restore_original_limits()
        _local.depth = depth
