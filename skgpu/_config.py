"""Global configuration: where work runs and how precise GPU matrix products are."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

#: What ``device`` takes (type checkers refuse other strings, as set_config does).
Device = Literal["auto", "gpu", "cpu"]
#: What ``matmul_precision`` takes.
MatmulPrecision = Literal["highest", "high", "medium"]
_DEVICES = ("auto", "gpu", "cpu")
_PRECISIONS = ("highest", "high", "medium")

_DEFAULTS = {"device": "auto", "matmul_precision": "highest"}
_global_config = dict(_DEFAULTS)
_threadlocal = threading.local()
_patch_lock = threading.Lock()


def _get_threadlocal_config():
    if not hasattr(_threadlocal, "config"):
        _threadlocal.config = _global_config.copy()
    return _threadlocal.config


def get_config() -> dict[str, str]:
    """Return a copy of the current configuration.

    Returns
    -------
    config : dict
        Keys are the parameters of :func:`set_config`.

    See Also
    --------
    config_context : Context manager for a temporary configuration.
    set_config : Set the configuration.
    """
    return _get_threadlocal_config().copy()


def _validate(device, matmul_precision):
    if device is not None and device not in _DEVICES:
        raise ValueError(
            f"device must be one of {_DEVICES}, got {device!r}."
        )
    if matmul_precision is not None and matmul_precision not in _PRECISIONS:
        raise ValueError(
            f"matmul_precision must be one of {_PRECISIONS}, got {matmul_precision!r}."
        )


def set_config(device: Device | None = None,
               matmul_precision: MatmulPrecision | None = None) -> None:
    """Set the skgpu configuration for the current thread.

    Parameters
    ----------
    device : {"auto", "gpu", "cpu"}, default=None
        Where estimators run. ``"auto"`` uses the GPU when CuPy and nvmath-python import
        and a CUDA device is present, otherwise the CPU (the reason is logged on the
        ``"skgpu"`` logger). ``"gpu"`` raises if the GPU backend is not usable.
        ``"cpu"`` always runs NumPy/SciPy. ``None`` keeps the current value.
    matmul_precision : {"highest", "high", "medium"}, default=None
        Compute type of float32 matrix products on the GPU: ``"highest"`` is FP32,
        ``"high"`` TF32 and ``"medium"`` BF16 inputs with FP32 accumulation. float64
        products always compute in FP64. ``None`` keeps the current value.

    See Also
    --------
    config_context : Context manager for a temporary configuration.
    get_config : Retrieve the current configuration.
    """
    _validate(device, matmul_precision)
    config = _get_threadlocal_config()
    if device is not None:
        config["device"] = device
    if matmul_precision is not None:
        config["matmul_precision"] = matmul_precision
    if config != _DEFAULTS:  # now there is something for joblib's workers to carry
        _propagate_to_joblib_workers()


@contextmanager
def config_context(*, device: Device | None = None,
                   matmul_precision: MatmulPrecision | None = None) -> Iterator[None]:
    """Temporarily change the configuration within a ``with`` block.

    Parameters are those of :func:`set_config`; the previous configuration is
    restored on exit.

    Examples
    --------
    >>> import skgpu
    >>> with skgpu.config_context(device="cpu"):
    ...     skgpu.get_config()["device"]
    'cpu'
    """
    old = get_config()
    set_config(device=device, matmul_precision=matmul_precision)
    try:
        yield
    finally:
        set_config(**old)  # type: ignore[arg-type]  # (values set_config checked)


class _WithConfig:
    """A task of scikit-learn's ``Parallel`` run under the skgpu configuration of the
    thread that dispatched it; scikit-learn's own configuration is attached to the task
    it wraps, as without skgpu."""

    def __init__(self, function, config):
        self.function = function
        self.config = config

    def with_config_and_warning_filters(self, config, warning_filters):
        self.function = self.function.with_config_and_warning_filters(config,
                                                                      warning_filters)
        return self

    def __call__(self, *args, **kwargs):
        with config_context(**self.config):
            return self.function(*args, **kwargs)


def _propagate_to_joblib_workers():
    """Carry skgpu's configuration into the workers of ``sklearn.utils.parallel.Parallel``
    (what GridSearchCV, cross_validate and the rest use), under every joblib backend.

    scikit-learn attaches its own configuration to each task in ``Parallel.__call__`` and
    restores it in the worker; its configuration keys are fixed and it has no hook for
    another library's, so skgpu's travel beside them: ``Parallel.__call__`` is wrapped
    once, to capture ``get_config()`` in the calling thread and wrap each task in
    :class:`_WithConfig`. Without it a worker ran with the default ``device="auto"``
    whatever the caller's ``config_context`` said. The wrapper goes in only when a
    configuration other than the defaults is first set (a worker that starts from the
    defaults needs nothing carried): ``import skgpu`` leaves scikit-learn untouched.
    """
    from sklearn.utils import parallel

    with _patch_lock:
        _wrap_parallel_call(parallel)


def _wrap_parallel_call(parallel):
    original = parallel.Parallel.__call__
    if getattr(original, "_skgpu_config", False):
        return

    def __call__(self, iterable):
        config = get_config()
        wrapped = ((_WithConfig(task, config), args, kwargs)
                   for task, args, kwargs in iterable)
        return original(self, wrapped)

    __call__._skgpu_config = True
    __call__.__wrapped__ = original
    __call__.__doc__ = original.__doc__
    parallel.Parallel.__call__ = __call__
