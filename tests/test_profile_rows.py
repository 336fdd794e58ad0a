"""The profile summary of the benchmark rows (benchmarks/profile_rows.py) on a synthetic
Chrome trace whose figures are known: overlapping GPU work counted once, idle time as the
rest of the wall, copies by direction, launches and synchronisations per call."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import profile_rows  # noqa: E402


def _event(cat, name, ts, dur, **args):
    return {"cat": cat, "name": name, "ts": ts, "dur": dur, "args": args}


def test_union_counts_overlaps_once():
    assert profile_rows._union_us([]) == 0.0
    assert profile_rows._union_us([(0, 10), (5, 15), (20, 30)]) == 25.0
    assert profile_rows._union_us([(20, 30), (0, 40), (1, 2)]) == 40.0
    assert profile_rows._union_us([(0, 10), (10, 20)]) == 20.0


@pytest.mark.parametrize("calls", [1, 2, 5])
def test_summary_of_a_known_trace(calls):
    # per call: two kernels overlapping by 100 us (gemm 300 us, scale 200 us), a
    # host-to-device copy of 4 MB (50 us, overlapping nothing) and a device-to-host copy
    # of 8 bytes (10 us), a memset (5 us); three launches, one stream sync, the copy call
    events = []
    for c in range(calls):
        t = 10_000.0 * c
        events += [
            _event("kernel", "gemm_f64_nt", t + 0, 300),
            _event("kernel", "scale_f64", t + 200, 200),
            _event("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", t + 1000, 50,
                   bytes=4_000_000),
            _event("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", t + 2000, 10, bytes=8),
            _event("gpu_memset", "Memset (Device)", t + 3000, 5),
            _event("cuda_runtime", "cudaLaunchKernel", t, 4),
            _event("cuda_runtime", "cudaLaunchKernel", t + 5, 4),
            _event("cuda_driver", "cuLaunchKernel", t + 10, 6),
            _event("cuda_runtime", "cudaStreamSynchronize", t + 3100, 20),
            _event("cuda_runtime", "cudaMemcpyAsync", t + 1990, 700),
            _event("cpu_op", "aten::empty", t, 3),  # a host op: not GPU work
        ]
    s = profile_rows.summarise(events, calls, wall_s=2e-3, top=2)
    assert s["wall_ms"] == pytest.approx(2.0)
    # 400 us of kernels (union of [0, 300) and [200, 400)) + 50 + 10 + 5
    assert s["gpu_busy_ms"] == pytest.approx(0.465)
    assert s["gpu_idle_ms"] == pytest.approx(2.0 - 0.465)
    assert s["kernels"] == 2 and s["kernel_ms"] == pytest.approx(0.5)
    assert s["memset_ms"] == pytest.approx(0.005)
    assert s["copies"]["HtoD"] == pytest.approx({"count": 1, "mb": 4.0, "ms": 0.05})
    assert s["copies"]["DtoH"] == pytest.approx({"count": 1, "mb": 8e-6, "ms": 0.01})
    assert s["launch_calls"] == 3
    assert s["sync_calls"] == {"cudaStreamSynchronize": pytest.approx({"count": 1,
                                                                       "ms": 0.02})}
    # the two slowest host API calls, slowest first
    assert list(s["host_api_ms"]) == ["cudaMemcpyAsync", "cudaStreamSynchronize"]
    assert s["host_api_ms"]["cudaMemcpyAsync"] == pytest.approx(0.7)
    assert [k["name"] for k in s["top_kernels"]] == ["gemm_f64_nt", "scale_f64"]
    assert s["top_kernels"][0]["ms"] == pytest.approx(0.3)
    assert s["top_kernels"][1]["count"] == 1


def test_copy_kinds():
    assert profile_rows._copy_kind("Memcpy DtoD (Device -> Device)") == "DtoD"
    assert profile_rows._copy_kind("Memcpy PtoP (Device -> Device)") == "PtoP"
    assert profile_rows._copy_kind("Memcpy something else") == "other"
