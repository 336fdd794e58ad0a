"""BLAS threads on the CPU backend: every core for one large fit, one thread each for
small work and for fits that run at once.

NumPy's and SciPy's BLAS (OpenBLAS or MKL) each keep one process-wide thread pool, sized
to the machine. Two things make it slow, measured on a 2-core machine
(``benchmarks/bench_cpu_threads.py``):

- waking the pool for small work: a GP likelihood with its gradient at n = 200 took
  6.3 ms, 3.0 ms on one thread (at n = 2,000 the pool wins, 326 against 380 ms); RidgeCV
  crosses over near n·p² ≈ 10⁹ (2,000 × 100: 27-90 ms against 10 ms on one thread);
- several fits at once from Python threads (joblib's threading backend, a web server):
  each BLAS call asks for every core, and OpenBLAS's pool serves them in turn. 32 RidgeCV
  fits of 2,000 × 100 from 8 threads took 0.45-0.57 s a fit against 10 ms one at a time.

So the CPU backend keeps one process-wide count of the work running in it (the outermost
:func:`managed_blas_threads` of each thread): while more than one runs, or while the only
one is smaller than :data:`SMALL_WORK_FLOPS`, BLAS runs on one thread; when the last one
ends, the limits found before it are restored. A single large fit keeps every core. The
limit is set by whichever thread changes the count, on every BLAS library threadpoolctl
(a scikit-learn dependency) finds loaded. For OpenBLAS it goes through
``openblas_set_num_threads_local`` (0.3.27 on): with the plain setter, which threadpoolctl
uses, a limit set from a worker thread after the main thread had set and lifted one was
ignored by that worker's own calls (OpenBLAS 0.3.30 and 0.3.31 in SciPy's and NumPy's
wheels: a 1500² GEMM kept both cores, every run), while the ``_local`` setter held in every
thread and, despite its name, for the whole process (both seen here). Other libraries (MKL,
BLIS, an older OpenBLAS) take threadpoolctl's setter. joblib's process workers (loky,
multiprocessing) get ``cpu_count // n_jobs`` BLAS threads each from joblib itself, and
each counts its own fits.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import threading

logger = logging.getLogger("skgpu")

#: Work below this many floating-point operations runs on one BLAS thread (the crossover
#: measured for Cholesky-based GP likelihoods and QR-based RidgeCV, see the module text).
SMALL_WORK_FLOPS = 1e9

_local = threading.local()
#: Off only to measure the unmanaged behaviour (benchmarks/bench_cpu_threads.py).
enabled = True

_lock = threading.Lock()
#: Outermost managed works running now, process-wide: id -> whether it is small.
_running: dict[int, bool] = {}
#: While BLAS is held at one thread: the calls that restore the limits found (else None).
_limiter = None


@functools.lru_cache(maxsize=None)
def _controller():
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def _local_setter(controller):
    """OpenBLAS's ``openblas_set_num_threads_local`` (returns the previous count), or
    None where the library has none."""
    if controller.internal_api != "openblas":
        return None
    setter = getattr(controller.dynlib, "openblas_set_num_threads_local", None)
    if setter is not None:
        setter.restype, setter.argtypes = ctypes.c_int, [ctypes.c_int]
    return setter


def _hold_one_thread():
    """Set every loaded BLAS to one thread; return the calls that restore each."""
    restore = []
    for controller in _controller().lib_controllers:
        if controller.user_api != "blas":
            continue
        setter = _local_setter(controller)
        if setter is not None:
            previous = setter(1)
            restore.append(functools.partial(setter, previous))
        else:
            previous = controller.get_num_threads()
            controller.set_num_threads(1)
            restore.append(functools.partial(controller.set_num_threads, previous))
    return restore


def _settle():
    """Hold BLAS at one thread while more than one work runs or the only one is small;
    otherwise give back the limits found (called with ``_lock`` held)."""
    global _limiter
    one = len(_running) > 1 or (len(_running) == 1 and next(iter(_running.values())))
    if one and _limiter is None:
        _limiter = _hold_one_thread()
        logger.debug("BLAS on one thread: %d work(s) running on the CPU backend",
                     len(_running))
    elif not one and _limiter is not None:
        for call in reversed(_limiter):
            call()
        _limiter = None


class managed_blas_threads:  # noqa: N801 - used as a function, ``with managed_...()``
    """Count the block as work running on the CPU backend (``flops``: its size, where
    the caller knows it) and set BLAS's threads accordingly (see the module text);
    nested blocks are part of the same work. A class, not a generator-based context
    manager: it wraps every small transform and predict on the CPU, where the generator's
    machinery cost ~2 µs of a ~100 µs call."""

    __slots__ = ("flops", "depth", "key")

    def __init__(self, flops: float | None = None) -> None:
        self.flops = flops
        self.depth = 0
        self.key: int | None = None

    def __enter__(self) -> None:
        depth = self.depth = getattr(_local, "depth", 0)
        _local.depth = depth + 1
        if enabled and depth == 0:
            key = self.key = threading.get_ident()
            try:
                with _lock:
                    _running[key] = self.flops is not None and self.flops < SMALL_WORK_FLOPS
                    _settle()
            except BaseException:
                self.__exit__(None, None, None)
                raise

    def __exit__(self, *exc: object) -> None:
        if self.key is not None:
            with _lock:
                _running.pop(self.key, None)
                _settle()
            self.key = None
        _local.depth = self.depth
