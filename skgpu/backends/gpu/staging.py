"""Host-to-device streaming through pinned buffers filled by copy threads and an
asynchronous copy stream: the centred Gram matrix of a NumPy X too large to copy whole,
the copy of a large NumPy X to the device, and of a large result back to the host."""

from __future__ import annotations

import logging
import os

import cupy as cp
import numpy as np

logger = logging.getLogger("skgpu")

#: From this size on a NumPy X is streamed to the GPU (by ``centred_gram``, and by
#: ``asarray`` through :func:`to_device`), in chunks of about ``STREAM_CHUNK_BYTES``.
STREAM_MIN_BYTES = 1 << 26
STREAM_CHUNK_BYTES = 1 << 26
#: From this size on a device array goes to the host through :func:`to_host`.
TO_HOST_MIN_BYTES = 1 << 26
_COPY_THREADS = 8


_copy_pool_state = {"pid": None, "pool": None, "threads": 1}


def _copy_pool():
    """Threads that copy a host chunk into pinned memory in parallel (one per process)."""
    if _copy_pool_state["pid"] != os.getpid():
        from concurrent.futures import ThreadPoolExecutor

        threads = _copy_pool_state["threads"] = max(1, min(_COPY_THREADS, os.cpu_count() or 1))
        _copy_pool_state["pool"] = ThreadPoolExecutor(max_workers=threads,
                                                      thread_name_prefix="skgpu-copy")
        _copy_pool_state["pid"] = os.getpid()
    return _copy_pool_state["pool"]


def _stage(pool, dst, src):
    """``dst[...] = src`` for a (pinned) host buffer, by the copy threads in row bands
    (NumPy releases the GIL while it copies)."""
    bands = min(_copy_pool_state["threads"], max(1, src.nbytes >> 22))  # ≥ 4 MB each
    edges = np.linspace(0, src.shape[0], bands + 1).astype(int)
    for f in [pool.submit(np.copyto, dst[a:b], src[a:b])
              for a, b in zip(edges[:-1], edges[1:]) if b > a]:
        f.result()


def streamed_centred_gram(ops, X, keep=False):
    """Mean and centred Gram matrix of a host X, streamed to the GPU in row chunks.

    A three-stage pipeline: threads copy chunk i + 1 into a pinned buffer while chunk i
    travels to the device (asynchronous DMA on a copy stream) and chunk i - 1 is reduced
    on the compute stream. The GPU holds a few chunks, never X, and the parallel staging
    outruns a plain copy of X from pageable memory. Each chunk is shifted by the first
    chunk's mean before its Gram matrix (the shifted-data formula: accurate when the mean
    is large against the spread); sums and Gram blocks accumulate in float64. Without
    pinned memory the chunks are copied from X directly (the call returns once a chunk
    is staged, and the GPU works on the previous one meanwhile).

    Returns the mean, the Gram matrix and the mean's offset from the shift (float64: the
    offset the Gram matrix was formed about, for :func:`.._common.accurate_centred_gram`'s
    check). With ``keep`` the chunks land in a device copy of X, returned fourth (the shift is
    then applied to a temporary): for a caller that needs X on the device next, as
    ``PCA.fit_transform`` does, X crosses the bus once.
    """
    import cupyx

    n, p = X.shape
    dt = X.dtype
    rows = int(max(1, min(n, STREAM_CHUNK_BYTES // (p * dt.itemsize))))
    starts = list(range(0, n, rows))
    slots = min(3, len(starts))
    compute = cp.cuda.get_current_stream()
    copier = cp.cuda.Stream(non_blocking=True)
    kept = cp.empty((n, p), dtype=dt) if keep else None
    device_bufs = None if keep else [cp.empty((rows, p), dtype=dt) for _ in range(slots)]
    try:
        host_bufs = [cupyx.empty_pinned((rows, p), dtype=dt) for _ in range(slots)]
        pool = _copy_pool()
    except Exception as exc:  # pinned memory is a limited resource
        logger.info("streaming X without pinned buffers (%s)", exc)
        host_bufs = pool = None
    copied = [None] * slots  # the copy out of host slot s is done
    released = [None] * slots  # compute has finished reading device slot s
    ones = cp.ones(rows, dtype=dt)
    G = cp.zeros((p, p), dtype=cp.float64)
    sums = cp.zeros(p, dtype=cp.float64)
    shift = None
    for i, start in enumerate(starts):
        stop = min(n, start + rows)
        r, slot = stop - start, i % slots
        if copied[slot] is not None:
            copied[slot].synchronize()
        if host_bufs is not None:
            src = host_bufs[slot][:r]
            _stage(pool, src, X[start:stop])
        else:
            src = np.ascontiguousarray(X[start:stop])
        buf = kept[start:stop] if keep else device_bufs[slot][:r]
        if released[slot] is not None and not keep:
            copier.wait_event(released[slot])
        buf.set(src, stream=copier)
        copied[slot] = copier.record()
        compute.wait_event(copied[slot])
        if shift is None:
            shift = (ones[:r] / r) @ buf
        if keep:  # the chunk stays as it is, part of the device copy of X
            buf = buf - shift
        else:
            buf -= shift
        G += ops.matmul(buf.T, buf)
        sums += ones[:r] @ buf
        released[slot] = compute.record()
    compute.synchronize()  # the pinned buffers go back to the pool only when unused
    offset = sums / n  # mean - shift
    G -= n * cp.outer(offset, offset)
    mean = shift.astype(cp.float64) + offset
    if keep:
        return mean.astype(dt), G.astype(dt), offset, kept
    return mean.astype(dt), G.astype(dt), offset


def to_device(X, dtype=None):
    """A C-contiguous NumPy ``X`` copied to a new device array (of ``dtype``, converted on
    the host while staged), in row chunks through two pinned buffers: copy threads fill
    one while the other travels on the copy stream. A plain ``cupy.asarray`` copies from
    pageable memory through the driver's own staging, one thread: on the H200 host
    51 ms for 400,000 × 256 float32 against ~27 ms for the streamed Gram pass over the
    same X. Falls back to ``cupy.asarray`` without pinned memory.
    """
    import cupyx

    dt = np.dtype(X.dtype if dtype is None else dtype)
    n = X.shape[0]
    row_bytes = max(1, (X.size // max(n, 1)) * dt.itemsize)
    rows = int(max(1, min(n, STREAM_CHUNK_BYTES // row_bytes)))
    try:
        host_bufs = [cupyx.empty_pinned((rows,) + X.shape[1:], dtype=dt) for _ in range(2)]
        pool = _copy_pool()
    except Exception as exc:  # pinned memory is a limited resource
        logger.info("copying X without pinned buffers (%s)", exc)
        return cp.asarray(X, dtype=dt)
    out = cp.empty(X.shape, dtype=dt)
    copier = cp.cuda.Stream(non_blocking=True)
    done = [None, None]  # the copy out of pinned buffer s has finished
    for i, start in enumerate(range(0, n, rows)):
        stop, slot = min(n, start + rows), i % 2
        if done[slot] is not None:
            done[slot].synchronize()
        src = host_bufs[slot][:stop - start]
        _stage(pool, src, X[start:stop])
        out[start:stop].set(src, stream=copier)
        done[slot] = copier.record()
    copier.synchronize()  # the pinned buffers go back to the pool only when unused
    return out


def to_host(a):
    """A C- or Fortran-contiguous device array copied to a new NumPy array, in row
    chunks through two pinned buffers: chunk i + 1 travels on the copy stream while the
    copy threads move chunk i out of its pinned buffer. CuPy's ``get`` copies into
    pageable memory through the driver's own staging, one thread: on an H100 host a
    10,000 × 10,000 float64 covariance (800 MB) came back in 202 ms by ``get``, 54-59 ms
    here; 1,000,000 × 256 float32 in 252 and 70 ms; 2,000 × 2,000 float64 (32 MB, below
    ``TO_HOST_MIN_BYTES``) in 2.0 and 2.5 ms. Falls back to ``get`` without pinned memory
    or for another layout."""
    import cupyx

    if a.ndim >= 1 and a.flags.f_contiguous and not a.flags.c_contiguous:
        return to_host(a.T).T
    if a.ndim == 0 or not a.flags.c_contiguous:
        return a.get()
    n = a.shape[0]
    row_bytes = max(1, (a.size // max(n, 1)) * a.itemsize)
    rows = int(max(1, min(n, STREAM_CHUNK_BYTES // row_bytes)))
    try:
        host_bufs = [cupyx.empty_pinned((rows,) + a.shape[1:], dtype=a.dtype)
                     for _ in range(2)]
        pool = _copy_pool()
    except Exception as exc:  # pinned memory is a limited resource
        logger.info("copying to the host without pinned buffers (%s)", exc)
        return a.get()
    out = np.empty(a.shape, dtype=a.dtype)
    copier = cp.cuda.Stream(non_blocking=True)
    copier.wait_event(cp.cuda.get_current_stream().record())  # a is complete
    pending = [None, None]  # slot s: (event, start, stop) of the chunk it receives

    def finish(slot):
        event, start, stop = pending[slot]
        event.synchronize()
        _stage(pool, out[start:stop], host_bufs[slot][:stop - start])
        pending[slot] = None

    for i, start in enumerate(range(0, n, rows)):
        stop, slot = min(n, start + rows), i % 2
        if pending[slot] is not None:
            finish(slot)
        a[start:stop].get(stream=copier, out=host_bufs[slot][:stop - start])
        pending[slot] = (copier.record(), start, stop)
    for slot in sorted((s for s in (0, 1) if pending[s] is not None),
                       key=lambda s: pending[s][1]):
        finish(slot)
    return out
