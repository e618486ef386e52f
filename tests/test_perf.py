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
