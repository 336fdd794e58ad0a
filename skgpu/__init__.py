"""skgpu: scikit-learn-compatible estimators whose linear algebra runs on NVIDIA GPUs.

Importing skgpu imports neither CuPy nor nvmath-python and initialises no GPU: the
backend is chosen when an estimator is fitted (see :mod:`skgpu.backends`).
"""

import logging

from ._config import config_context, get_config, set_config
from ._show_versions import show_versions
from .exceptions import GPUFallbackWarning, GPUOutOfMemoryError, GPUUnavailableError

__version__ = "0.1.0.dev0"

logging.getLogger("skgpu").addHandler(logging.NullHandler())

__all__ = [
    "GPUFallbackWarning",
    "GPUOutOfMemoryError",
    "GPUUnavailableError",
    "__version__",
    "config_context",
    "get_config",
    "set_config",
    "show_versions",
]
