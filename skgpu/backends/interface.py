"""The backend interface: every operation the estimators, the Dask algorithms and the
utilities ask of a backend, with the same signature on both (``CPUBackend`` on NumPy and
SciPy, ``GPUBackend`` on CuPy and nvmath-python). mypy checks both against it
(:func:`_both_conform`), so an operation added to one backend only is a type error.

Arrays are typed ``Any``: a backend's arrays are NumPy or CuPy, dense or sparse.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol


class SparseFactor(Protocol):
    """What ``sparse_spd`` returns on either backend: a sparse SPD factor ``A = L Lᵀ``
    (CHOLMOD or SuperLU on the CPU, cuDSS on the GPU)."""

    #: Whether its quadratic forms solve with L itself (sparse right-hand sides), not
    #: by full solves (cuDSS, which keeps L to itself).
    exposes_factor: bool

    @property
    def shape(self) -> Any: ...
    def solve(self, B: Any) -> Any: ...
    def logdet(self) -> float: ...
    def refactor(self, A: Any) -> None: ...
    def quadratic_forms(self, B: Any, block_bytes: int = 1 << 30) -> Any:
        """``bᵢᵀ A⁻¹ bᵢ`` (host array) for each row of the sparse (m, n) matrix B."""
    def quadratic_form_matrix(self, B: Any) -> Any:
        """``B A⁻¹ Bᵀ``, dense, for the sparse (m, n) matrix B."""


class Backend(Protocol):
    """What a backend provides (see the table in :mod:`skgpu.backends`)."""

    @property
    def name(self) -> str:
        """"cpu" or "gpu"."""

    @property
    def is_gpu(self) -> bool:
        """Whether arrays live on the GPU (for the backends' own code; estimators ask the
        policies below)."""

    # policies: what estimators decide by the backend, each named
    @property
    def finite_check(self) -> str:
        """Where NaN/infinity in a transform's or predict's X is found: "input" (X looked
        at first: NumPy would warn on the arithmetic, and the pass is cheap on the host)
        or "output" (the much smaller product looked at, X only when that is not
        finite)."""

    @property
    def memory(self) -> str:
        """Which memory a fit's working set must fit: "host" or "device"."""

    @property
    def defers_host_copies(self) -> bool:
        """Whether large fitted arrays (a GP's n × n factor) stay in the backend's memory,
        copied to the host when first read."""

    @property
    def neighbour_search(self) -> str:
        """How a sparse GP's pattern (pairs within a radius) is found: "kd-tree" (on the
        host) or "cell-list" (on the device, tiled all-pairs above three dimensions)."""

    @property
    def sparse_factor(self) -> str:
        """What ``sparse_spd`` factors with: "cudss" on the GPU; "cholmod" on the CPU
        where the ``sparse`` extra is installed, else "superlu". The sparse GP picks its
        likelihood's factor by it (``_sparse.SUPERNODAL_FROM_N``)."""
        ...

    @property
    def forward_order(self) -> str:
        """The memory order (``"C"`` or ``"F"``) of the dense blocks the supernodal
        forward solves with sparse right-hand sides work on (a row per unknown, a
        column per test point): ``ops.panel_forward`` and the scatters into rows take
        them so. Fortran on the GPU (cuBLAS on the blocks where they lie); C on the
        CPU, where each scatter into rows then moves whole contiguous rows (at n =
        50,000 on 2 cores, 10,000 variances 19.8 s Fortran-ordered, scatters 8.9 s
        of it)."""
        ...

    @property
    def batched_blocks(self) -> bool:
        """Whether many small dense blocks go faster as one padded stack (one launch of
        a batched kernel) than one by one: the supernodal factor's level batches. On
        the GPU the launches, not the arithmetic, take the small blocks' time; on the
        CPU the stacks' padding and the per-block loop of a stacked triangular solve
        cost more (at n = 50,000 on 2 cores: a solve 1.50 s against 0.05 s, a
        refactorisation 2.9 s against 1.6 s)."""

    @property
    def xp(self) -> Any:
        """The array module of the backend's dense arrays (numpy or cupy)."""

    # arrays and memory
    def asarray(self, X: Any, dtype: Any = None) -> Any: ...
    def to_host(self, a: Any) -> Any: ...
    def is_sparse(self, X: Any) -> bool: ...
    def free_memory(self) -> None: ...
    def free_bytes(self) -> int | None: ...
    def csr_matrix(self, values: Any, indices: Any, indptr: Any,
                   shape: tuple[int, int]) -> Any: ...
    def csr_from_coo(self, values: Any, rows: Any, cols: Any,
                     shape: tuple[int, int]) -> Any: ...

    # dense
    def column_mean(self, X: Any, sample_weight: Any = None) -> Any: ...
    def gram(self, X: Any, mean: Any = None) -> Any: ...
    def centre_about_first_row(self, X: Any, sample_weight: Any = None) -> Any: ...
    def centred_gram(self, X: Any, return_X: bool = False, mean: Any = None,
                     anchored: bool = False) -> Any: ...
    def matmul(self, a: Any, b: Any, bias: Any = None) -> Any: ...
    def spmm(self, A: Any, B: Any) -> Any: ...
    def sq_dist(self, X: Any, Y: Any) -> Any: ...
    def scale_rows(self, X: Any, s: Any) -> Any: ...
    def eigh(self, A: Any, top: int | None = None) -> Any: ...
    def svd(self, A: Any) -> Any: ...
    def randomized_svd(self, A: Any, k: int, *, n_oversamples: int = 10,
                       n_iter: Any = "auto", power_iteration_normalizer: str = "auto",
                       random_state: Any = None, transpose: Any = "auto") -> Any: ...
    def qr(self, X: Any) -> Any: ...
    def qr_r(self, X: Any) -> Any: ...
    def svd_tall(self, X: Any) -> Any: ...
    def gemm(self, a: Any, b: Any, trans_a: bool = False, trans_b: bool = False,
             alpha: float = 1.0) -> Any: ...
    def solve_triangular(self, L: Any, B: Any, transpose: bool = False) -> Any: ...
    def solve_triangular_right(self, L: Any, C: Any) -> Any: ...
    def cholesky(self, A: Any, *, what: str = "matrix", overwrite: bool = False) -> Any: ...
    def cholesky_batched(self, A: Any) -> Any: ...
    def panel_cholesky(self, P: Any, w: int, status: Any, index: int) -> None: ...
    def panel_update(self, P: Any, w: int, out: Any) -> None: ...
    def panel_forward(self, P: Any, w: int, Y: Any, out: Any) -> None: ...
    def scatter_add(self, target: Any, index: Any, values: Any, unique: bool = False
                    ) -> None: ...

    # sparse
    def sparse_spd(self, A: Any, *, what: str = "matrix") -> SparseFactor: ...


if TYPE_CHECKING:
    from ._cpu import CPUBackend
    from .gpu.backend import GPUBackend

    def _both_conform(cpu: CPUBackend, gpu: GPUBackend) -> tuple[Backend, Backend]:
        on_cpu: Backend = cpu
        on_gpu: Backend = gpu
        return on_cpu, on_gpu
