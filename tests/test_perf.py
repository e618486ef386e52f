"""venus_utils.core.perf: what the benchmarks compare with, the machine's own peak."""

from __future__ import annotations

import pytest

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


@pytest.mark.parametrize("reentrant", [False, True])
def test_gradient_checkpointing_does_not_change_the_counted_flops(reentrant):
    """A checkpointed layer runs its forward again in the backward pass; the count stays the model FLOPs (3x a
    training forward), as without checkpointing, with either kind of checkpointing, so an arm trained with it is
    matched on the same figure as one trained without."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from venus_utils.core.perf import FlopCounter

    cfg = Qwen2Config(
        vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2,
    )  # fmt: skip
    x = torch.randint(0, 128, (2, 10), generator=torch.Generator().manual_seed(0))

    def counted(checkpointing: bool) -> tuple[float, float]:
        torch.manual_seed(0)
        model = Qwen2ForCausalLM(cfg).train()
        if checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": reentrant})
        counter = FlopCounter(model)
        for _ in range(2):  # two micro-batches, each forward then backward
            model(input_ids=x, labels=x).loss.backward()
        trained = counter.flops
        with torch.no_grad():
            model(input_ids=x)  # an inference forward: 1x
        counter.close()
        return trained, counter.flops - trained

    plain, checkpointed = counted(False), counted(True)
    assert checkpointed == plain
    assert plain[0] == 6 * plain[1]  # two training forwards at 3x each, one inference forward at 1x

    # one counter over a run that turns checkpointing on after training without it, settled after each step as the
    # trainers settle it: the same count (a reentrant recomputation later is charged in full)
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(cfg).train()
    counter = FlopCounter(model)
    model(input_ids=x, labels=x).loss.backward()
    counter.settle()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": reentrant})
    model(input_ids=x, labels=x).loss.backward()
    counter.settle()
    counter.close()
    assert counter.flops == plain[0]

    # torch's checkpoint_wrapper (FSDP's activation checkpointing) leaves transformers' flag off: the same count
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointImpl, checkpoint_wrapper

    torch.manual_seed(0)
    model = Qwen2ForCausalLM(cfg).train()
    counter = FlopCounter(model)
    impl = CheckpointImpl.REENTRANT if reentrant else CheckpointImpl.NO_REENTRANT
    model.model.layers = torch.nn.ModuleList(checkpoint_wrapper(m, checkpoint_impl=impl) for m in model.model.layers)
    for _ in range(2):
        model(input_ids=x, labels=x).loss.backward()
        counter.settle()
    counter.close()
    assert counter.flops == plain[0]
