"""The backend seam: decide where work runs, say why, and fall back when the GPU fails.

Estimators call :func:`run_with_fallback` (or :func:`select_backend`) and write their
solvers once against the operation set that both backends implement:

===========================  ==================================================================
operation                    meaning
===========================  ==================================================================
``asarray``                  input on the backend (dense, or sparse kept sparse)
``to_host``                  backend array to NumPy
``free_bytes``               memory the device (or the host) can still give
``csr_matrix``               a CSR matrix on the backend from its arrays (or from coordinates:
                             ``csr_from_coo``)
``column_mean``              (weighted) column mean by one GEMV
``centre_about_first_row``   ``(X - x̄, x̄)`` in two passes over X (the GPU's own kernels),
                             or None: ``_common.centre_columns`` then centres in its own passes
``gram``                     ``XᵀX`` with the centering ``- n·μμᵀ`` folded in
``centred_gram``             ``(μ, (X-μ)ᵀ(X-μ))`` (and X on the backend, if asked); a large
                             NumPy X is streamed to the GPU in chunks
``matmul``                   ``a @ b (+ bias)``: cuBLASLt with the BIAS epilog on the GPU
``spmm``                     sparse @ dense
``scale_rows``               ``diag(s) @ X``, sparse kept sparse
``sq_dist``                  squared Euclidean distances by exact differences
``eigh``                     all or the ``top`` largest eigenpairs, descending
``svd``                      economy SVD (gesvdj on the GPU)
``randomized_svd``           Halko et al., scikit-learn's steps and random draws
``qr``                       ``(Q, R)`` of a tall-skinny QR, R with a positive diagonal
``qr_r``                     R factor of a tall-skinny QR, positive diagonal
``svd_tall``                 ``U, s, Vt`` of a tall X, U orthonormal to working precision
``cholesky``                 factor with ``solve``, ``logdet``, ``inverse``, ``half_inverse``
``solve_triangular``         ``L⁻¹ B`` for a lower-triangular L (``solve_triangular_right``:
                             ``C L⁻ᵀ`` in place)
``sparse_spd``               sparse SPD factor (:class:`~.interface.SparseFactor`): ``solve``,
                             ``logdet``, ``refactor``, ``quadratic_forms`` (``bᵢᵀ A⁻¹ bᵢ``)
                             and ``quadratic_form_matrix`` (``B A⁻¹ Bᵀ``)
===========================  ==================================================================

The signatures are the :class:`~skgpu.backends.interface.Backend` protocol, which mypy
checks both backends against. What the GPU backend supports is declared once, in
:data:`GPU_REQUIREMENTS`; the decision, the reason and the test skips are derived from
it.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from .._config import get_config
from ..exceptions import GPUFallbackWarning, GPUOutOfMemoryError, GPUUnavailableError
# what estimators and utilities use of the arrays' kinds and the shared pieces: imported
# from here, never from the private modules
from ._arrays import (
    ContainerSpec,
    container_of,
    convert_output,
    cupy_module,
    cupy_sparse_module,
    is_cupy_array,
    is_cupy_sparse,
    is_dask_array,
    is_dask_collection,
    is_device_array,
    is_sparse,
    is_torch_tensor,
    to_cupy,
    to_numpy,
)
from ._common import centre_columns, tril_in_place
from ._cpu import CPUBackend, cholmod_available
from ._supernodal import SupernodalFactor, SupernodalSymbolic
from ._extended import SlicedMatrix, two_sum
from ._threads import managed_blas_threads

logger = logging.getLogger("skgpu")


def _why(exc):
    """First line of an exception, for reasons (library loaders print whole directories)."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


OPERATIONS = (
    "asarray", "to_host", "free_bytes", "csr_matrix", "csr_from_coo", "column_mean",
    "centre_about_first_row", "gram", "centred_gram", "matmul", "spmm", "scale_rows",
    "sq_dist", "eigh", "svd", "randomized_svd", "qr", "qr_r", "svd_tall", "cholesky",
    "solve_triangular", "solve_triangular_right", "sparse_spd",
)

#: Extra library each GPU operation needs beyond CuPy, nvmath-python and cuSOLVER.
GPU_REQUIREMENTS: dict[str, str | None] = {op: None for op in OPERATIONS}
GPU_REQUIREMENTS["sparse_spd"] = "cudss"

_CPU = CPUBackend()

T = TypeVar("T")


@functools.lru_cache(maxsize=None)
def gpu_status() -> tuple[bool, str]:
    """``(usable, reason)`` for the GPU backend, checked once per process.

    Importing CuPy and nvmath, counting CUDA devices and creating a cuSOLVER handle is
    all that is done; nothing runs before an estimator asks for the GPU.
    """
    try:
        import cupy
    except Exception as exc:  # ImportError, or a CUDA library that fails to load
        return False, f"CuPy is not importable ({_why(exc)}); install skgpu[gpu]"
    try:
        import nvmath
    except Exception as exc:
        return False, f"nvmath-python is not importable ({_why(exc)}); install skgpu[gpu]"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        return False, _driver_explanation(exc) or f"no CUDA device is usable ({_why(exc)})"
    if count < 1:
        return False, "no CUDA device is present"
    try:
        from . import gpu

        gpu.solver_handle()
        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.runtime.getDevice())
        name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    except Exception as exc:
        return False, f"the CUDA libraries did not load ({_why(exc)})"
    return True, f"{name} with CuPy {cupy.__version__} and nvmath-python {nvmath.__version__}"


#: The oldest NVIDIA driver branch that runs CUDA 13, the GPU extra's toolkit.
MIN_DRIVER = "580"


def _driver_explanation(exc, load_driver=None):
    """Plain words for CUDA's "insufficient driver" error, which it gives both where no
    NVIDIA driver is installed (a machine without a GPU: nothing to upgrade) and where the
    driver is older than the CUDA runtime; None for other errors."""
    if "InsufficientDriver" not in str(exc) and "insufficient" not in str(exc).lower():
        return None
    import ctypes

    load_driver = ctypes.CDLL if load_driver is None else load_driver
    try:
        libcuda = load_driver("libcuda.so.1")
    except OSError:
        return ("no NVIDIA driver is installed (libcuda.so.1 is not found): this machine "
                "has no usable NVIDIA GPU, and skgpu runs on the CPU")
    version = ctypes.c_int(0)
    try:
        libcuda.cuDriverGetVersion(ctypes.byref(version))
    except Exception:
        pass
    supported = (f"supports CUDA up to {version.value // 1000}.{version.value % 1000 // 10}"
                 if version.value else "is too old")
    return (f"the NVIDIA driver {supported}; skgpu's GPU extra needs CUDA 13 (driver "
            f"{MIN_DRIVER} or newer): update the driver, or run on the CPU")


@functools.lru_cache(maxsize=None)
def _requirement_status(requirement):
    if requirement == "cudss":
        try:
            from nvmath.bindings import cudss

            cudss.get_property(0)
        except Exception as exc:
            return False, f"cuDSS is not loadable ({_why(exc)})"
    return True, ""


def gpu_unsupported_reason(operations: Iterable[str] = ()) -> str | None:
    """None if the GPU backend can run every operation named, else the reason it cannot."""
    usable, reason = gpu_status()
    if not usable:
        return reason
    for op in operations:
        if op not in GPU_REQUIREMENTS:
            raise ValueError(f"unknown backend operation {op!r}")
        requirement = GPU_REQUIREMENTS[op]
        if requirement is not None:
            ok, why = _requirement_status(requirement)
            if not ok:
                return f"operation {op!r} needs {requirement}: {why}"
    return None


def sparse_spd_unavailable(ops: Any) -> str | None:
    """Why ``ops.sparse_spd`` (the backend's own sparse Cholesky: CHOLMOD or SuperLU on
    the CPU, cuDSS on the GPU) cannot run, or None. The CPU always has one; the GPU has
    it where cuDSS loads (the sparse GP then factors with skgpu's supernodal factor,
    on the GPU still)."""
    if not ops.is_gpu:
        return None
    loadable, why = _requirement_status("cudss")
    return None if loadable else why


def get_backend(name: str) -> Any:
    """The backend object called ``name`` ("cpu" or "gpu")."""
    if name == "cpu":
        return _CPU
    if name == "gpu":
        from .gpu import GPUBackend

        return _gpu_backend(GPUBackend)
    raise ValueError(f"backend must be 'cpu' or 'gpu', got {name!r}")


@functools.lru_cache(maxsize=None)
def _gpu_backend(cls):
    return cls()


def select_backend(device: str | None = None, *, operations: Iterable[str] = (),
                   X: Any = None, cpu_because: str | None = None) -> tuple[Any, str]:
    """Pick the backend for work made of ``operations``; return ``(backend, reason)``.

    Parameters
    ----------
    device : {"auto", "gpu", "cpu"} or None, default=None
        None takes the value of :func:`skgpu.get_config`.
    operations : iterable of str, default=()
        Backend operations the work needs (see ``OPERATIONS``).
    X : array-like, :class:`~skgpu.utils.validation.Input` or ContainerSpec, default=None
        The input or what it is; only used to explain decisions (a GPU array on the CPU
        is copied).
    cpu_because : str, default=None
        The caller's own rule that puts this work on the CPU whatever the device (a
        solver that only runs there), given as the reason.

    The reason says who chose the CPU: the user (``device='cpu'`` in the
    configuration), the caller's rule (``cpu_because``), or the GPU stack (none usable,
    or an operation it lacks).

    Raises
    ------
    GPUUnavailableError
        If ``device="gpu"`` and the GPU backend cannot run the work.
    """
    device = get_config()["device"] if device is None else device
    if device not in ("auto", "gpu", "cpu"):
        raise ValueError(f"device must be 'auto', 'gpu' or 'cpu', got {device!r}")
    if device == "cpu" or cpu_because is not None:
        reason = (cpu_because if cpu_because is not None
                  else "device='cpu' was requested")
        # an Input or a ContainerSpec knows; an array is asked
        on_device = getattr(X, "on_device", None)
        if X is not None and (is_device_array(X) if on_device is None else on_device):
            reason += "; the GPU input is copied to the host"
        return _CPU, reason
    why_not = gpu_unsupported_reason(operations)
    if why_not is None:
        return get_backend("gpu"), f"GPU backend usable: {gpu_status()[1]}"
    if device == "gpu":
        raise GPUUnavailableError(f"device='gpu' was requested but {why_not}.")
    return _CPU, f"running on the CPU: {why_not}"


def is_out_of_memory(exc):
    if isinstance(exc, MemoryError):
        return True
    try:
        from .gpu import is_out_of_memory as gpu_oom
    except Exception:
        return False
    return gpu_oom(exc)


def gpu_free_bytes() -> int | None:
    """Free memory of the current GPU plus what CuPy's pool holds unused, or None where
    the GPU backend is not usable."""
    if not gpu_status()[0]:
        return None
    try:
        return get_backend("gpu").free_bytes()
    except Exception:
        return None


_observers = threading.local()


@contextlib.contextmanager
def observe_backends() -> Iterator[list[tuple[str, str, str]]]:
    """Within the block, every :func:`run_with_fallback` of this thread appends
    ``(what, backend name, reason)`` to the list yielded (the accelerator's report)."""
    seen: list[tuple[str, str, str]] = []
    stack = getattr(_observers, "stack", None)
    if stack is None:
        stack = _observers.stack = []
    stack.append(seen)
    try:
        yield seen
    finally:
        stack.remove(seen)


def _notify(what, backend, reason):
    stack = getattr(_observers, "stack", None)
    if stack:
        for seen in stack:
            seen.append((what, backend, reason))


def run_with_fallback(func: Callable[[Any], T], *, device: str | None = None,
                      operations: Iterable[str] = (), X: Any = None, what: str = "fit",
                      flops: float | None = None,
                      cpu_because: str | None = None) -> tuple[T, Any]:
    """Run ``func(backend)`` on the selected backend; return ``(result, backend)``.
    ``cpu_because``: the caller's rule that puts the work on the CPU (see
    :func:`select_backend`).

    On the CPU backend, work whose size ``flops`` (where the caller knows it) is small runs
    with BLAS on one thread (:mod:`skgpu.backends._threads`); other work on every core.

    With ``device="auto"`` a GPU out-of-memory error frees the GPU memory pool, warns
    :class:`~skgpu.GPUFallbackWarning` and re-runs ``func`` on the CPU. With
    ``device="gpu"`` it raises :class:`~skgpu.exceptions.GPUOutOfMemoryError`. ``func``
    must not modify the estimator: callers set fitted attributes from the returned
    result, so a failure never leaves an estimator half-fitted.
    """
    device = get_config()["device"] if device is None else device
    backend, reason = select_backend(device, operations=operations, X=X,
                                     cpu_because=cpu_because)
    logger.info("%s: %s", what, reason)
    _notify(what, backend.name, reason)
    if not backend.is_gpu:
        with managed_blas_threads(flops):
            return func(backend), backend
    try:
        return func(backend), backend
    except Exception as exc:
        if not is_out_of_memory(exc):
            raise
        backend.free_memory()
        message = f"{what} ran out of GPU memory ({_why(exc)})"
        if device == "gpu":
            raise GPUOutOfMemoryError(
                message + "; use device='auto' to fall back to the CPU") from exc
        warnings.warn(f"{message}; running on the CPU instead.", GPUFallbackWarning,
                      stacklevel=3)
        logger.info("%s: falling back to the CPU after a GPU out-of-memory error", what)
        _notify(what, _CPU.name, f"{message}; ran on the CPU instead")
        with managed_blas_threads(flops):
            return func(_CPU), _CPU


#: What :func:`run_reference_on_host` returns where it did not run its function.
NOT_RUN = object()


#: A host call on fewer elements than this is not counted as work for the BLAS-thread
#: policy: its product is over before another thread's work could notice it (and BLAS
#: runs such products on one thread anyway), while the accounting cost ~2 µs of a
#: ~75 µs one-row predict.
SMALL_HOST_CALL_ELEMENTS = 1 << 16


def run_reference_on_host(func: Callable[[], T], *, spec: ContainerSpec,
                          operations: Iterable[str] = (),
                          what: str = "predict", elements: int | None = None
                          ) -> T | object:
    """Run ``func()``, scikit-learn's own method, where the CPU backend is selected for
    host data X, classified as ``spec`` (NumPy, pandas, SciPy sparse, lists); return its
    result, or ``NOT_RUN`` (device arrays, torch tensors, Dask collections, or the GPU
    selected).

    On the CPU a transform or predict is one product, the same arithmetic as
    scikit-learn's; its own code validates X once, where the backend route pays for an
    input record, a backend dispatch and device-copy caches around the same product
    (``benchmarks/results/small_calls_cpu_2core.json`` times both). The choice is logged
    and reported as :func:`run_with_fallback` reports it. It counts as work on the CPU
    backend for the BLAS thread policy, of no stated size: scikit-learn's call keeps
    BLAS's threads unless other work runs (holding one thread costs two library calls
    per call, more than such a call's product); a call whose ``elements`` (the size of
    its work, where the caller knows it: X's entries, or test times training points) is
    below :data:`SMALL_HOST_CALL_ELEMENTS` is not counted.
    """
    if not spec.host:
        return NOT_RUN
    backend, reason = select_backend(None, operations=operations, X=spec)
    if backend.is_gpu:
        return NOT_RUN
    logger.info("%s: %s", what, reason)
    _notify(what, backend.name, reason)
    if elements is not None and elements < SMALL_HOST_CALL_ELEMENTS:
        return func()
    with managed_blas_threads():
        return func()


__all__ = [
    "ContainerSpec", "GPU_REQUIREMENTS", "NOT_RUN", "OPERATIONS", "SMALL_HOST_CALL_ELEMENTS",
    "SlicedMatrix",
    "SupernodalFactor", "SupernodalSymbolic", "centre_columns",
    "cholmod_available", "container_of", "convert_output", "cupy_module",
    "cupy_sparse_module", "get_backend", "gpu_free_bytes", "gpu_status",
    "gpu_unsupported_reason", "is_cupy_array", "is_cupy_sparse", "is_dask_array",
    "is_dask_collection", "is_device_array", "is_sparse", "is_torch_tensor",
    "observe_backends", "run_reference_on_host", "run_with_fallback", "select_backend",
    "sparse_spd_unavailable",
    "to_cupy", "to_numpy",
    "tril_in_place", "two_sum",
]
