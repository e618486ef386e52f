"""SFT throughput: the recipe's batching + loss against naive padded training, side by side, same data.

    python benchmarks/bench_sft.py [--model DIR] [--data train.parquet] [--steps 2] [--rounds 1]   # a few minutes
    python benchmarks/bench_sft.py --full     # the profile's size: batch 16, 4 steps x 2 rounds (~25 min, ~7 GB)

Every variant trains the same tiny model (a fresh copy) on the same trajectories, optimizer steps of
``--global-batch`` trajectories in micro-batches of ``--micro-batch``; the variants take turns (round-robin) so
machine noise hits them alike.  Reported: tokens/s (real, non-pad tokens), the ratio to the naive baseline,
padding share, and peak memory (resident memory sampled during one optimizer step of each variant, above the
level before it; CPU torch has no allocator statistics).

- ``naive_max_length``: what DR-Venus's verl dataset does: pad every trajectory to ``max_length``, full logits,
  the model's own loss (the baseline);
- ``naive_padded``: pad to the longest of the batch, full logits (TRL's default collator);
- ``grouped`` (the recipe's CPU choice): length-grouped batches + logits only on the trained positions, widths and
  LM-head rows rounded up to ``--pad-multiple`` (``SFTConfig.pad_to_multiple_of``, default 64);
- ``padding_free``: one row per micro-batch with restarting ``position_ids`` + trained-position logits;
- ``grouped_bf16``: ``grouped`` under bf16 autocast (fp32 master weights and optimizer; ``SFTConfig.precision``),
  what the recipe runs on a CPU with native bf16 (avx512_bf16 / AMX);
- ``grouped_bf16_recompute``: ``grouped_bf16`` with gradient checkpointing (every layer's forward recomputed in
  the backward), what the trainer ran before ``gradient_checkpointing: false`` reached it (TRL's default is on).

Each variant's model FLOP utilisation is printed against the machine's fp32 matmul peak and its best (bf16 where it
is native, else fp32), measured in this run on the same threads (:func:`venus_utils.core.perf.machine_peak`), with the
model's FLOPs per trained token
(:func:`venus_utils.core.perf.flops_per_token`: forward + backward, attention at the data's mean length).

Without ``--data`` a small offline world is built in a temporary folder and its raw expert trajectories (with
the DR-Venus system prompt, as the cleaner writes them) are the data.  Target: grouped >= 1.5x naive_max_length.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

VARIANTS = ("naive_max_length", "naive_padded", "grouped", "padding_free", "grouped_bf16", "grouped_bf16_recompute")


def load_rows(args, tokenizer):
    from venus_utils.core import protocol
    from venus_utils.sft import build_examples, examples_from_parquet

    if args.data:
        rows = examples_from_parquet(args.data, tokenizer, max_length=args.max_length).rows
    else:
        import pyarrow.parquet as pq

        from venus_utils.world import build_world

        world = Path(tempfile.mkdtemp(prefix="bench_world_"))
        build_world(world, seed=1, size="small", progress=False, search_top_k=3, visit_policy="needed")
        raw = pq.read_table(next((world / "trajectories").glob("*.parquet"))).to_pylist()
        sysmsg = {"role": "system", "content": protocol.system_prompt(protocol.DEFAULT_DATE)}
        rows = build_examples([[sysmsg, *r["messages"]] for r in raw], tokenizer, max_length=args.max_length).rows
    random.Random(0).shuffle(rows)
    return rows[: args.global_batch * args.steps * 4]


def make_batches(variant, rows, args):
    """The micro-batches of ``args.steps`` optimizer steps, as index lists into rows."""
    from venus_utils.sft import LengthGroupedSampler

    n = args.global_batch * args.steps
    if variant.startswith("grouped"):
        order = list(LengthGroupedSampler([r["length"] for r in rows], args.micro_batch, seed=0))
    else:
        order = list(range(len(rows)))
        random.Random(0).shuffle(order)
    order = order[:n]
    return [order[i : i + args.micro_batch] for i in range(0, n, args.micro_batch)]


def step_fn(variant, model, tokenizer, args):
    import torch.nn.functional as F  # noqa: F401

    from venus_utils.sft import Collator, masked_lm_loss

    pad = tokenizer.pad_token_id
    if variant == "naive_max_length":
        collate = Collator(pad, "max_length", args.max_length)
    elif variant == "naive_padded":
        collate = Collator(pad, "padded")
    else:  # the recipe's variants round shapes as the trainer does (SFTConfig.pad_to_multiple_of)
        collate = Collator(pad, "padding_free" if variant == "padding_free" else "padded", None, args.pad_multiple)
    accum = args.global_batch // args.micro_batch
    import torch

    def run(examples):
        batch = collate(examples)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled="bf16" in variant):
            if variant.startswith("naive"):
                loss = model(**batch).loss / accum  # full logits on every position, the model's own loss
            else:
                loss = masked_lm_loss(model, batch, "sequence_mean", pad_rows_to=args.pad_multiple)[0] / accum
        loss.backward()
        return int(batch["attention_mask"].sum()) if "attention_mask" in batch else int(
            batch["input_ids"].numel()
        ), int(batch["input_ids"].numel())

    return run


def fresh(model_dir, recompute=False):
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    if recompute:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    return model, torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.01)


def time_variant(variant, model_dir, tokenizer, rows, args, state):
    if variant not in state:
        state[variant] = fresh(model_dir, recompute=variant.endswith("_recompute"))
    model, opt = state[variant]
    run = step_fn(variant, model, tokenizer, args)
    batches = make_batches(variant, rows, args)
    accum = args.global_batch // args.micro_batch
    real = total = 0
    t0 = time.perf_counter()
    for i, b in enumerate(batches):
        r, t = run([rows[j] for j in b])
        real, total = real + r, total + t
        if (i + 1) % accum == 0:
            opt.step()
            opt.zero_grad(set_to_none=True)
    return time.perf_counter() - t0, real, total


class PeakRSS:
    """Peak resident memory (MB) above the level at entry, sampled every 2 ms in a thread (CPU torch has no
    allocator statistics)."""

    def __enter__(self):
        import psutil

        self.proc, self.stop, self.peak = psutil.Process(), threading.Event(), 0
        self.base = self.proc.memory_info().rss
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()
        return self

    def _sample(self):
        while not self.stop.is_set():
            self.peak = max(self.peak, self.proc.memory_info().rss)
            time.sleep(0.002)

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()
        self.extra_mb = round(max(self.peak - self.base, 0) / 2**20, 1)
        self.peak_mb = round(self.peak / 2**20, 1)
        return False


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", help="model folder (default: build a tiny one in a temporary folder)")
    p.add_argument("--size", default="tiny")
    p.add_argument(
        "--data", help="SFT parquet (question, messages, gt); default: a freshly built world's trajectories"
    )
    p.add_argument(
        "--max-length", type=int, default=4096, help="the profile's max_length (the naive baseline pads to it)"
    )
    p.add_argument("--global-batch", type=int, default=None, help="trajectories per step (default 8; --full: 16)")
    p.add_argument("--micro-batch", type=int, default=8)
    p.add_argument(
        "--steps", type=int, default=None, help="optimizer steps per variant per round (default 2; --full: 4)"
    )
    p.add_argument("--rounds", type=int, default=None, help="rounds over the variants (default 1; --full: 2)")
    p.add_argument(
        "--pad-multiple",
        type=int,
        default=64,
        help="pad_to_multiple_of of the recipe's variants (the trainer's default; 1: exact shapes, as the naive ones)",
    )
    p.add_argument("--full", action="store_true", help="the full size (the numbers in docs/performance.md)")
    p.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", str(os.cpu_count() or 1))))
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args(argv)
    full = {"global_batch": 16, "steps": 4, "rounds": 2} if args.full else {"global_batch": 8, "steps": 2, "rounds": 1}
    for key, value in full.items():
        if getattr(args, key) is None:
            setattr(args, key, value)

    import torch
    from transformers import AutoTokenizer

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    if not args.model:
        from venus_utils.modeling import build_tiny_model

        args.model = str(build_tiny_model(Path(tempfile.mkdtemp(prefix="bench_model_")) / "m", None, size=args.size))
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    rows = load_rows(args, tokenizer)
    lengths = [r["length"] for r in rows]
    print(
        f"data: {len(rows)} trajectories, mean {sum(lengths) / len(lengths):.0f} tokens "
        f"(min {min(lengths)}, max {max(lengths)}), "
        f"trained-token share {sum(r['n_loss'] for r in rows) / sum(lengths):.3f}; "
        f"model {args.model}; {args.threads} thread(s)"
    )
    state: dict = {}
    acc = {v: [0.0, 0, 0] for v in VARIANTS}
    mem = {}
    for v in VARIANTS:  # warm-up (allocator, kernels) + peak memory of one optimizer step
        import gc

        gc.collect()
        args_w = argparse.Namespace(**{**vars(args), "steps": 1})
        print(f"[bench_sft] warm-up and peak memory: {v}", flush=True)
        with PeakRSS() as m:
            time_variant(v, args.model, tokenizer, rows, args_w, state)
        mem[v] = (m.peak_mb, m.extra_mb)
    for r in range(args.rounds):
        for v in VARIANTS:
            print(f"[bench_sft] round {r + 1}/{args.rounds}: {v}, {args.steps} steps", flush=True)
            dt, real, total = time_variant(v, args.model, tokenizer, rows, args, state)
            acc[v][0] += dt
            acc[v][1] += real
            acc[v][2] += total
    from transformers import AutoConfig

    from venus_utils.core.perf import flops_per_token, machine_peak

    peak = machine_peak()
    per_token = flops_per_token(
        AutoConfig.from_pretrained(args.model), context=sum(lengths) / len(lengths) / 2, training=True
    )
    print(f"\n{peak.describe()}; {per_token / 1e6:.1f} MFLOP per trained token (forward + backward)")
    base = acc["naive_max_length"][1] / acc["naive_max_length"][0]
    results = {}
    print(
        f"\n{'variant':<24}{'tokens/s':>10}{'vs naive':>10}{'padding':>9}{'peak MB':>9}{'+MB':>7}"
        f"{'MFU fp32':>10}{'best':>7}"
    )
    for v in VARIANTS:
        dt, real, total = acc[v]
        results[v] = {
            "tokens_per_s": round(real / dt, 1),
            "ratio_vs_naive_max_length": round(real / dt / base, 2),
            "padding_share": round(1 - real / total, 3),
            "peak_rss_mb": mem[v][0],
            "step_extra_rss_mb": mem[v][1],
            "gflops": round(real / dt * per_token / 1e9, 1),
        }
        r = results[v]
        print(
            f"{v:<24}{r['tokens_per_s']:>10.0f}{r['ratio_vs_naive_max_length']:>9.2f}x{r['padding_share']:>9.1%}"
            f"{mem[v][0]:>9.0f}{mem[v][1]:>7.0f}{r['gflops'] / peak.fp32_gflops:>10.1%}"
            f"{r['gflops'] / peak.best_gflops:>7.1%}"
        )
    chosen = results["grouped"]["ratio_vs_naive_max_length"]
    print(
        f"\nchosen path (grouped) = {chosen:.2f}x the naive padded baseline (target >= 1.5x): "
        f"{'OK' if chosen >= 1.5 else 'BELOW TARGET'}; "
        f"vs pad-to-longest: {results['grouped']['tokens_per_s'] / results['naive_padded']['tokens_per_s']:.2f}x"
    )
    print(
        f"grouped_bf16 / grouped (fp32): "
        f"{results['grouped_bf16']['tokens_per_s'] / results['grouped']['tokens_per_s']:.2f}x tokens/s; "
        f"without recomputation / with (the trainer before and after gradient_checkpointing=false reached it): "
        f"{results['grouped_bf16']['tokens_per_s'] / results['grouped_bf16_recompute']['tokens_per_s']:.2f}x"
    )
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "results": results}, indent=2), encoding="utf-8")
    return results


if __name__ == "__main__":
    main()
