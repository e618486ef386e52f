"""venus_utils.core.perf: what the benchmarks compare with, the machine's own peak."""

from __future__ import annotations

from venus_utils.core.perf import MachinePeak


def test_the_peak_is_bf16_only_where_bf16_is_native():
    """A CPU without avx512_bf16 / AMX emulates bf16 at ~1 GFLOP/s (measured on this project's 2-core AMD EPYC
    machine): a share of that is no utilisation figure, so the machine's best is its fp32 peak there."""
    emulated = MachinePeak(threads=2, fp32_gflops=166.0, bf16_gflops=1.0, bf16_native=False)
    native = MachinePeak(threads=2, fp32_gflops=170.0, bf16_gflops=700.0, bf16_native=True)
    assert emulated.best_gflops == 166.0 and native.best_gflops == 700.0
    assert "emulated, so the peak is fp32's" in emulated.describe() and "(native)" in native.describe()


def test_the_memory_read_bandwidth_is_measured_and_described():
    """A decode step is bound by memory: the peak it is a share of is the memory's read bandwidth, measured and named
    beside the matmul peaks (0 where it was not measured)."""
    from venus_utils.core.perf import read_gbps

    assert read_gbps(mib=16, reps=2) > 0
    measured = MachinePeak(threads=2, fp32_gflops=170.0, bf16_gflops=700.0, bf16_native=True, read_gbps=49.0)
    assert "memory read 49.0 GB/s" in measured.describe()
    assert "memory read" not in MachinePeak(threads=2, fp32_gflops=1.0, bf16_gflops=1.0, bf16_native=False).describe()
