"""Global configuration: where work runs and how precise GPU matrix products are."""

from __future__ import annotations

import threading
from contextlib import contextmanager

_DEVICES = ("auto", "gpu", "cpu")
_PRECISIONS = ("highest", "high", "medium")

_global_config = {"device": "auto", "matmul_precision": "highest"}
_threadlocal = threading.local()


def _get_threadlocal_config():
    if not hasattr(_threadlocal, "config"):
        _threadlocal.config = _global_config.copy()
    return _threadlocal.config


def get_config():
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


def set_config(device=None, matmul_precision=None):
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


@contextmanager
def config_context(*, device=None, matmul_precision=None):
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
        set_config(**old)
