"""Warnings and errors raised by skgpu."""


class GPUFallbackWarning(UserWarning):
    """Work that was meant for the GPU ran on the CPU instead; the message says why."""


class GPUUnavailableError(RuntimeError):
    """``device="gpu"`` was requested but the GPU backend cannot be used here."""


class GPUOutOfMemoryError(MemoryError):
    """The GPU ran out of memory while running an operation."""
