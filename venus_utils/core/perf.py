"""How far a hot path is from what this machine can do: its measured peak, a model's FLOPs per token, phase timers.

The benchmarks in ``benchmarks/`` print each hot path's speed next to the machine's own peak, measured in the same
run on the same threads (:func:`machine_peak`: a large square matmul per dtype), and the model FLOP utilisation of
the work done (:func:`flops_per_token` x tokens / seconds / peak).  The RL trainer records its per-phase seconds
with :class:`PhaseTimer`.
"""

from __future__ import annotations

import multiprocessing as mp
import sys
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


def _cpuinfo_field(name: str) -> str | None:
    """The first ``name`` line of Linux ``/proc/cpuinfo`` (None elsewhere)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key.strip() == name:
                    return value.strip()
    except OSError:
        pass
    return None


def process_context():
    """The multiprocessing context of every process the package starts: forkserver (else spawn), never fork: the
    package's processes hold torch's and the notebook kernel's threads, which a forked child would inherit half-way."""
    return mp.get_context("forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn")


def process_pool(workers: int, initializer=None, initargs: tuple = ()) -> ProcessPoolExecutor:
    """``workers`` worker processes of :func:`process_context`."""
    return ProcessPoolExecutor(workers, mp_context=process_context(), initializer=initializer, initargs=initargs)


def cpu_flags() -> set[str]:
    """The processor's feature flags (Linux ``/proc/cpuinfo``; empty elsewhere)."""
    return set((_cpuinfo_field("flags") or "").split())


def cpu_model() -> str | None:
    """The processor's model name (Linux ``/proc/cpuinfo``; None elsewhere)."""
    return _cpuinfo_field("model name")


def cpu_bf16_native() -> bool:
    """The CPU computes bf16 dot products natively (avx512_bf16 or AMX): bf16 autocast then pays."""
    return bool({"avx512_bf16", "amx_bf16"} & cpu_flags())


#: Precision settings of the training stages (SFT and RL): bf16 autocast over fp32 master weights, or plain fp32.
PRECISIONS = ("auto", "bf16", "fp32")


def uses_bf16(precision: str, device: str) -> bool:
    """Whether training on ``device`` (cpu | cuda) runs under bf16 autocast: ``precision`` bf16 / fp32 say so; auto
    means bf16 on CUDA and on a CPU with native bf16 dot products (:func:`cpu_bf16_native`), else fp32."""
    if precision != "auto":
        return precision == "bf16"
    return device == "cuda" or cpu_bf16_native()


def matmul_gflops(dtype: Any = None, n: int = 1024, seconds: float = 1.0) -> float:
    """Sustained GFLOP/s of an ``n`` x ``n`` matmul in ``dtype`` (default float32) on this process's threads (best
    of the runs made in about ``seconds``)."""
    import torch

    dtype = dtype or torch.float32
    a = torch.randn(n, n).to(dtype)
    b = torch.randn(n, n).to(dtype)
    a @ b  # warm-up (first-call dispatch, thread pool)
    best, deadline = 0.0, time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        t0 = time.perf_counter()
        a @ b
        best = max(best, 2 * n**3 / (time.perf_counter() - t0) / 1e9)
    return best


@dataclass(frozen=True)
class MachinePeak:
    threads: int
    fp32_gflops: float
    bf16_gflops: float
    bf16_native: bool  # the CPU has bf16 dot products (avx512_bf16 / AMX)
    read_gbps: float = 0.0  # memory read bandwidth (:func:`read_gbps`; 0: not measured)

    @property
    def best_gflops(self) -> float:
        """The machine's own peak: the faster of fp32 and bf16 where bf16 is native, else fp32 (emulated bf16 is
        no peak: a share of it says nothing)."""
        return max(self.fp32_gflops, self.bf16_gflops) if self.bf16_native else self.fp32_gflops

    def describe(self) -> str:
        native = "native" if self.bf16_native else "emulated, so the peak is fp32's"
        return (
            f"machine peak on {self.threads} threads: fp32 {self.fp32_gflops:.0f} GFLOP/s, "
            f"bf16 {self.bf16_gflops:.0f} GFLOP/s ({native})"
            + (f", memory read {self.read_gbps:.1f} GB/s" if self.read_gbps else "")
        )


def read_gbps(mib: int = 512, reps: int = 5) -> float:
    """GB/s at which this process's threads read a float32 tensor of ``mib`` MiB, far larger than a CPU's caches (the
    best of ``reps`` sums over it): the peak of a step bound by memory, such as a decode step's attention reading its
    cache, is this, not the matmul peak."""
    import torch

    x = torch.ones(mib * 2**20 // 4)
    x.sum()
    best = 0.0
    for _ in range(reps):
        t0 = time.perf_counter()
        x.sum()
        best = max(best, x.numel() * 4 / (time.perf_counter() - t0) / 1e9)
    return best


def machine_peak(seconds: float = 1.0) -> MachinePeak:
    """fp32 and bf16 matmul peaks and the memory's read bandwidth, measured now (run it in the same process and
    threads as what it is compared to)."""
    import torch

    return MachinePeak(
        threads=torch.get_num_threads(),
        fp32_gflops=matmul_gflops(torch.float32, seconds=seconds),
        bf16_gflops=matmul_gflops(torch.bfloat16, seconds=seconds),
        bf16_native=cpu_bf16_native(),
        read_gbps=read_gbps(),
    )


def cuda_bf16_peak_gflops(n: int = 8192, reps: int = 10) -> float:
    """Sustained GFLOP/s of an ``n`` x ``n`` bf16 matmul on the current CUDA device (mean of ``reps`` products
    after three warm-ups, on random data): the GPU's own peak that :func:`utilisation` divides by."""
    import torch

    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        a @ b
    torch.cuda.synchronize()
    return 2 * n**3 * reps / (time.perf_counter() - t0) / 1e9


def gpu_peak_memory_gib() -> float | None:
    """The most CUDA memory this process's tensors held (GiB), or None where it never used CUDA (torch is not
    imported for the question)."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return None
    return round(max(torch.cuda.max_memory_allocated(i) for i in range(torch.cuda.device_count())) / 2**30, 3)


def forward_flops_parts(config: Any) -> tuple[float, float]:
    """``(one decoder layer, the output layer)``: forward FLOPs per token position of a decoder-only transformer
    (``config``: a transformers config), 2 per matmul weight (projections and MLP; the output layer's hidden x
    vocabulary), attention scores left out."""
    hidden = config.hidden_size
    heads = config.num_attention_heads
    kv = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or hidden // heads
    per_layer = hidden * head_dim * (2 * heads + 2 * kv) + 3 * hidden * config.intermediate_size
    return 2.0 * per_layer, 2.0 * hidden * config.vocab_size


def flops_per_token(config: Any, context: float = 0.0, training: bool = False) -> float:
    """Forward FLOPs to process one token of a decoder-only transformer (``config``: a transformers config) that
    attends to ``context`` earlier tokens: 2 x the matmul weights (projections, MLP, output layer) plus the attention
    scores and values; x3 with the backward pass (``training``)."""
    layer, head = forward_flops_parts(config)
    heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    attention = config.num_hidden_layers * 2 * 2 * heads * head_dim * context
    forward = config.num_hidden_layers * layer + head + attention
    return 3 * forward if training else forward


def utilisation(tokens: float, seconds: float, per_token: float, peak_gflops: float) -> tuple[float, float]:
    """(achieved GFLOP/s, share of ``peak_gflops``) of ``tokens`` processed at ``per_token`` FLOPs in ``seconds``."""
    achieved = tokens * per_token / max(seconds, 1e-9) / 1e9
    return achieved, achieved / peak_gflops if peak_gflops else float("nan")


class PhaseTimer:
    """Wall seconds per named phase: ``with timer("generation"): ...``; ``timer.seconds`` adds up repeats."""

    def __init__(self):
        self.seconds: dict[str, float] = defaultdict(float)

    @contextmanager
    def __call__(self, phase: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[phase] += time.perf_counter() - t0

    def add(self, phase: str, seconds: float) -> None:
        self.seconds[phase] += seconds


def _decoder_parts(model: Any) -> tuple[Any, list, Any]:
    """``(config, decoder layers, output layer)`` of a causal LM, through DDP / PEFT wrappers."""
    seen = set()
    while id(model) not in seen:
        seen.add(id(model))
        if hasattr(model, "module"):  # DistributedDataParallel
            model = model.module
        elif hasattr(model, "get_base_model"):  # PEFT
            model = model.get_base_model()
    inner = getattr(model, "model", None)
    layers = list(getattr(inner, "layers", None) or [])
    head = getattr(model, "lm_head", None)
    if not layers or head is None or not hasattr(model, "config"):
        raise ValueError(f"{type(model).__name__}: not a decoder-only causal LM (model.layers and lm_head)")
    return model.config, layers, head


class FlopCounter:
    """The matmul FLOPs a decoder-only model spends, counted as it runs, whatever calls it (``generate``, the cached
    decoder of :mod:`venus_utils.modeling.kv_decode`, a training forward).

    A forward hook on every decoder layer's MLP and on the output layer counts the token positions each call processes
    (padding included: it is computed) at 2 FLOPs per weight; a call made with autograd on (a training forward) counts
    3x, for its backward pass.  Attention scores (which grow with the context) and embeddings are not counted, so
    the figure compares runs of one model, not models.  ``flops`` is this process's total since the counter was
    made; :meth:`close` removes the hooks.

    Gradient checkpointing runs a layer's forward again inside the backward pass: that recomputation is not counted
    again (model FLOPs, 3x a forward per trained token, whatever the memory trade): after a forward already charged 3x
    (non-reentrant checkpointing, transformers' or torch's ``checkpoint_wrapper``) it counts nothing; after one run
    without autograd (reentrant checkpointing, whose first forward runs under ``no_grad``) it counts the 2x of the
    backward still owed. What is owed is forgotten at each training step's end (:meth:`settle`)."""

    def __init__(self, *models: Any):
        import torch

        self._grad = torch.is_grad_enabled
        self._in_backward = getattr(torch._C, "_current_autograd_node", lambda: None)
        self.flops = 0.0
        self._owed: dict[int, int] = {}  # per hooked module: forwards charged 3x whose recomputation may come
        self._handles = []
        for model in models:
            if model is None:
                continue
            config, layers, head = _decoder_parts(model)
            per_layer, out = forward_flops_parts(config)
            # each layer's MLP: every forward path calls it once per layer (transformers', the cached decoder's,
            # Unsloth's), where some reach the attention's projections by other routes
            hook = self._hook(per_layer)
            self._handles += [layer.mlp.register_forward_pre_hook(hook, with_kwargs=True) for layer in layers]
            self._handles.append(head.register_forward_pre_hook(self._hook(out), with_kwargs=True))

    def _hook(self, per_token: float):
        def count(module, args, kwargs):
            x = args[0] if args else kwargs.get("hidden_states", kwargs.get("input"))
            if x is None:
                return
            key = id(module)
            if self._in_backward() is not None:  # gradient checkpointing's recomputation
                if self._owed.get(key, 0) > 0:
                    self._owed[key] -= 1
                    return
                times = 2  # the first forward ran without autograd and was charged 1x
            elif self._grad():
                times = 3
                if module.training:  # a checkpointed layer may run it again in the backward pass (settle)
                    self._owed[key] = self._owed.get(key, 0) + 1
            else:
                times = 1
            self.flops += per_token * (x.numel() // x.shape[-1]) * times

        return count

    def settle(self) -> None:
        """Forget the recomputations still owed: after a training step's backward pass none is to come (a layer
        that is not checkpointed ran its forward once). The trainers call it after every step, so that a forward
        without checkpointing never pays for a later run's reentrant recomputation."""
        self._owed.clear()

    def close(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []
