"""skgpu: scikit-learn-compatible estimators whose linear algebra runs on NVIDIA GPUs.

Importing skgpu imports neither CuPy nor nvmath-python and initialises no GPU: the
backend is chosen when an estimator is fitted (see :mod:`skgpu.backends`).
"""

import logging
from typing import Any

from ._config import config_context, get_config, set_config
from ._show_versions import show_versions
from .exceptions import GPUFallbackWarning, GPUOutOfMemoryError, GPUUnavailableError

__version__ = "0.1.0.dev0"


def as_sklearn(obj: Any) -> Any:
    """Return ``obj`` with every skgpu estimator in it replaced by scikit-learn's own.

    For shipping a model: a fitted Pipeline, ColumnTransformer, search (its
    ``best_estimator_`` and ``cv_results_``) or a single estimator, nested to any depth,
    fitted by skgpu or under :mod:`skgpu.accel`, becomes an object of scikit-learn's
    classes only (fitted attributes shared, not copied), which pickles, loads and
    predicts without skgpu, and which converters such as skl2onnx take.

    Parameters
    ----------
    obj : object
        A fitted (or unfitted) estimator or object graph.

    Returns
    -------
    converted : object
        The same graph with scikit-learn's classes; ``obj`` is left as it is.

    Raises
    ------
    ValueError
        If a GaussianProcessRegressor in it was fitted on the sparse path (scikit-learn's
        class needs the dense factor), or anything in the converted graph would still be
        skgpu's (a ``Tapered`` or ``Wendland`` kernel): the message names each one and
        where it sits. Never a partial result.
    """
    from .utils._convert import as_sklearn_graph

    return as_sklearn_graph(obj)


logging.getLogger("skgpu").addHandler(logging.NullHandler())

__all__ = [
    "GPUFallbackWarning",
    "GPUOutOfMemoryError",
    "GPUUnavailableError",
    "__version__",
    "as_sklearn",
    "config_context",
    "get_config",
    "set_config",
    "show_versions",
]
