"""Memory a dense Gaussian-process fit needs, known before it starts.

The dense path holds one n × n float64 matrix (kernel matrix, factor, half inverse in
one buffer) and panels of rows beside it where the kernel is evaluated in panels (on the
CPU, one LML with its gradient at n = 1,600 in n/32-row panels peaked below 1.3 n² · 8
bytes), a few n × n matrices where it is not (a part scikit-learn evaluates: 3-8 n²),
and how many panels' worth depends on the kernel. So the multiplier is measured, not
tabulated: the same evaluation on a subsample of ``PROBE_SAMPLES`` points under
:mod:`tracemalloc`, in panels of the same proportion as at n, scaled by (n / n₀)² (the
probe's fixed O(n) parts make it a little high: 1.4 for ``C * RBF(ARD) + WhiteKernel``
and ``C * Matern(nu=2.5) + WhiteKernel``). Before a dense fit
or likelihood on the CPU backend (chosen, or fallen back to after a GPU out-of-memory
error), the bytes are compared with the memory the host has available; work it cannot
hold raises a ``MemoryError`` that states the bytes needed, the memory available and the
largest n that fits, instead of paging or being killed by the operating system, and work
it can hold is logged with its estimated time. The probe runs only where
``UNPROBED_MULTIPLIER`` matrices would not fit: small fits cost nothing more.

Before a dense fit or likelihood on the GPU the same estimate is compared with the GPU's
free memory (the device's free bytes and what CuPy's pool holds unused): work that does
not fit raises :class:`~skgpu.exceptions.GPUOutOfMemoryError` with the numbers before
any of it runs. Under ``device="auto"`` that is the GPU out-of-memory error on which the
fit falls back to the CPU, where the host check above decides; under ``device="gpu"``
it reaches the user. The GPU runs the same panelled evaluation as the CPU (its panels
larger below n = 80,000: the probe takes the GPU's proportion), so the CPU probe's
multiplier is used (on the H200 host the GPU's measured peaks were 1.19 n² for
a likelihood with its gradient and 1.09 n² for a fit, where the probe says 1.4: the
check errs on the side of refusing).
"""

from __future__ import annotations

import logging
import math
import time
import tracemalloc

import numpy as np

from ..backends import tril_in_place
from ..exceptions import GPUOutOfMemoryError

logger = logging.getLogger("skgpu")

#: Points of the subsample whose evaluation measures the kernel's memory multiplier.
PROBE_SAMPLES = 256
#: Multiplier used where the probe cannot run (a kernel not positive definite there).
DEFAULT_MULTIPLIER = 8.0
#: No probe while this many n × n matrices fit (every kernel measured held at most 7): a
#: small fit, as a search makes by the hundred, costs nothing more.
UNPROBED_MULTIPLIER = 24.0
#: Fraction of the available host memory the estimate may take (the rest: the
#: interpreter, the data, rounding of the estimate).
HOST_FRACTION = 0.9
#: From this n on, a CPU fit or likelihood logs its estimated time at INFO.
LOG_TIME_MIN_SAMPLES = 5_000


def host_available_bytes() -> int | None:
    """Memory the host can give without swapping, or None (the CPU backend's
    ``free_bytes``; patched by the tests here)."""
    from ..backends import get_backend

    return get_backend("cpu").free_bytes()


def gpu_free_bytes() -> int | None:
    """Free memory of the current GPU plus what CuPy's pool holds unused, or None (the
    backend seam's :func:`skgpu.backends.gpu_free_bytes`; patched by the tests here)."""
    from ..backends import gpu_free_bytes as free_bytes

    return free_bytes()


def measure_multiplier(make_lml, kernel, n, gradient, probe=PROBE_SAMPLES):
    """Peak bytes of one dense evaluation (with the final factorisation a fit ends with)
    on ``probe`` of the n points, over ``probe² · 8``: the number of n × n float64
    matrices the evaluation holds at its peak. ``make_lml(index)`` builds the CPU
    likelihood object for the rows ``index``."""
    m = min(n, probe)
    if m < 16:
        return DEFAULT_MULTIPLIER
    index = np.linspace(0, n - 1, m).astype(int)
    own = not tracemalloc.is_tracing()
    if own:
        tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        lml = make_lml(index)
        value = lml(kernel, gradient)
        first = value[0] if gradient else value
        Km, _ = lml.kernel_matrix(kernel)
        factor = lml.ops.cholesky(Km, what="kernel matrix", overwrite=True)
        lml.ops.to_host(tril_in_place(factor.lower, lml.ops.xp))
        del Km, factor
        peak = tracemalloc.get_traced_memory()[1] - base
    except np.linalg.LinAlgError:
        return DEFAULT_MULTIPLIER
    finally:
        if own:
            tracemalloc.stop()
    if not np.isfinite(first):
        return DEFAULT_MULTIPLIER
    return max(peak / (8.0 * m * m), 1.0)


def dense_bytes(n, multiplier, n_features=1, n_targets=1):
    """Bytes of a dense evaluation at n points: ``multiplier`` n × n float64 matrices,
    plus the O(n·d) data."""
    return int(8 * (multiplier * n * n + 4 * n * (n_features + n_targets)))


def largest_n(available, multiplier, n_features=1, n_targets=1):
    """The largest n whose dense evaluation takes at most ``available`` bytes."""
    if available <= 0:
        return 0
    a, b = 8.0 * multiplier, 32.0 * (n_features + n_targets)
    n = int((-b + math.sqrt(b * b + 4 * a * available)) / (2 * a))
    while n > 0 and dense_bytes(n + 1, multiplier, n_features, n_targets) <= available:
        n += 1
    while n > 0 and dense_bytes(n, multiplier, n_features, n_targets) > available:
        n -= 1
    return n


def _gb(value):
    return f"{value / 1e9:.1f} GB"


_RATE: dict[str, float] = {}


def _cpu_flop_rate():
    """Floating-point operations per second of this machine's BLAS (one 1024² GEMM)."""
    if "rate" not in _RATE:
        a = np.ones((1024, 1024))
        a @ a
        start = time.perf_counter()
        a @ a
        _RATE["rate"] = 2 * 1024**3 / max(time.perf_counter() - start, 1e-9)
    return _RATE["rate"]


def _estimate(make_lml, kernel, n, gradient, usable, n_features, n_targets):
    """``(bytes needed, multiplier)``; the bytes are None where even
    ``UNPROBED_MULTIPLIER`` matrices fit in ``usable`` (no probe is run)."""
    if dense_bytes(n, UNPROBED_MULTIPLIER, n_features, n_targets) <= usable:
        return None, None
    multiplier = measure_multiplier(make_lml, kernel, n, gradient)
    return dense_bytes(n, multiplier, n_features, n_targets), multiplier


def _refusal(what, needed, n, multiplier, where, fits, host, gpu):
    return (f"{what}: the dense path needs about {_gb(needed)} at n = {n:,} "
            f"({multiplier:.1f} n x n float64 matrices at its peak, measured for this "
            f"kernel), but "
            + ", ".join(text for text in (
                None if gpu is None else f"the GPU has {_gb(gpu)} free",
                None if host is None else f"the CPU has {_gb(host)} available") if text)
            + f". The largest n that fits in the {where}'s memory is {fits:,}. Use fewer "
            "samples, the sparse path (a compactly supported kernel: Tapered, "
            "Wendland), or a machine with more memory.")


def check_host_memory(what, make_lml, kernel, n, gradient, n_features=1, n_targets=1):
    """Raise ``MemoryError`` (bytes needed, memory available on each backend, the
    largest n that fits) unless the host can hold a dense evaluation at n points; log
    the estimated time of one evaluation when it can and n is large."""
    available = host_available_bytes()
    if available is None:
        return
    usable = int(HOST_FRACTION * available)
    needed, multiplier = _estimate(make_lml, kernel, n, gradient, usable, n_features,
                                   n_targets)
    if needed is not None and needed > usable:
        fits = largest_n(usable, multiplier, n_features, n_targets)
        raise MemoryError(_refusal(what, needed, n, multiplier, "CPU", fits, available,
                                   gpu_free_bytes()))
    if n >= LOG_TIME_MIN_SAMPLES:
        seconds = (1.0 if gradient else 1.0 / 3.0) * n**3 / _cpu_flop_rate()
        logger.info("%s on the CPU (n = %d): %s at this machine's BLAS rate, ~%.0f s per "
                    "likelihood evaluation", what, n,
                    "memory enough" if needed is None else f"about {_gb(needed)} of memory",
                    seconds)


def check_gpu_memory(what, make_lml, kernel, n, gradient, n_features=1, n_targets=1):
    """Raise :class:`~skgpu.exceptions.GPUOutOfMemoryError` (bytes needed, memory of
    each backend, the largest n that fits on the GPU) unless the GPU's free memory
    (:func:`gpu_free_bytes`) holds a dense evaluation at n points. ``make_lml`` builds
    the CPU likelihood of the probe."""
    free = gpu_free_bytes()
    if free is None:
        return
    needed, multiplier = _estimate(make_lml, kernel, n, gradient, free, n_features,
                                   n_targets)
    if needed is not None and needed > free:
        fits = largest_n(free, multiplier, n_features, n_targets)
        raise GPUOutOfMemoryError(_refusal(what, needed, n, multiplier, "GPU", fits,
                                           host_available_bytes(), free))
    if needed is not None:
        logger.info("%s on the GPU (n = %d): about %s of the %s free", what, n,
                    _gb(needed), _gb(free))
