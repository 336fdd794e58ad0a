"""Library handles and per-thread state of the GPU backend.

Each thread keeps, per process and device, one handle of each NVIDIA library it calls
(cuSOLVER, cuBLAS, cuSPARSE, cuBLASLt, all through ``nvmath.bindings``) and the cuBLASLt
plan cache (:mod:`.cublaslt`).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict

import cupy as cp
from nvmath.bindings import cublas, cublasLt, cusolverDn

_local = threading.local()


def thread_state():
    """Per-thread, per-process state: library handles per device and the cuBLASLt plan
    cache.

    A forked worker sees the parent's thread-local object; the pid check gives it its own.
    """
    state = getattr(_local, "state", None)
    if state is None or state["pid"] != os.getpid():
        state = _local.state = {"pid": os.getpid(), "handles": {},
                                "plans": OrderedDict()}
    return state


def library_handle(library):
    """This thread's handle of ``library`` (an nvmath bindings module with ``create``:
    cuSOLVER, cuBLAS, cuSPARSE, cuBLASLt) for the current device, bound to the current
    stream where the library binds one (cuBLASLt takes the stream per call)."""
    handles = thread_state()["handles"]
    key = (library.__name__, cp.cuda.runtime.getDevice())
    handle = handles.get(key)
    if handle is None:
        handle = handles[key] = library.create()
    if library is not cublasLt:
        library.set_stream(handle, cp.cuda.get_current_stream().ptr)
    return handle


def solver_handle():
    return library_handle(cusolverDn)


def blas_handle():
    return library_handle(cublas)
