# Doctests run over skgpu/ too; the GPU backend package imports CuPy at import time.
try:
    import cupy  # noqa: F401
    import nvmath  # noqa: F401
except Exception:
    collect_ignore = ["skgpu/backends/gpu"]
