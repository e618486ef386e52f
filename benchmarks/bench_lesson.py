"""The cpu lesson's SFT step against cpu-hard's, side by side, and the attention kernel choices at its length.

    .venv/bin/python benchmarks/bench_lesson.py                 # ~2 minutes
    .venv/bin/python benchmarks/bench_lesson.py --steps 8       # steadier numbers

Issue 39 made the hard research tier the cpu lesson and asked for it three times faster.  Where an SFT step's time
goes depends on the trajectories' length (attention grows with it), so this benchmark builds both designs' worlds
(``params/cpu.yaml`` and ``params/cpu-hard.yaml``: their seed and ``world_knobs``), tokenizes their raw expert
trajectories as the cleaner writes them, and trains the same fresh tiny model on each, the recipe's way (length-grouped
batches, logits only on trained positions, bf16 autocast where the CPU has native bf16), taking turns so machine noise
hits both alike.  Printed: tokens per trajectory, seconds per optimizer step of ``--global-batch`` trajectories, real
tokens/s, the ratio between the designs, and the model FLOP utilisation against the fp32 and bf16 matmul peaks
measured in this run on the same threads.  (The lesson resamples long trajectories 5x like DR-Venus, so its SFT steps
see longer rows than the raw mean: notebook 03 reports the trained mean.)

Then the attention kernel alone (forward + backward under bf16 autocast, causal, the tiny model's 4 heads of 32 at
the lesson's mean length): PyTorch's fused CPU kernel (what the model runs) against attention written as matmuls, and
the fused kernel at other head shapes of the same width (2 x 64, 1 x 128), which a model of another shape would run.
"""

from __future__ import annotations

import argparse
import copy
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

DESIGNS = {"cpu lesson": "params/cpu.yaml", "cpu-hard": "params/cpu-hard.yaml"}


def design_rows(profile: str, tokenizer, max_length: int, limit: int) -> list[dict]:
    """The raw expert trajectories of ``profile``'s world (its seed and knobs), tokenized as SFT rows."""
    import pyarrow.parquet as pq

    from venus_utils.core import protocol
    from venus_utils.core.profiles import load_profile
    from venus_utils.sft import build_examples
    from venus_utils.world import build_world

    prof = load_profile(profile)
    setup = prof.sections.get("00_setup", {})
    world = Path(tempfile.mkdtemp(prefix="bench_lesson_")) / "world"
    build_world(world, seed=prof.shared.get("seed", 0), size="small", progress=False, **setup.get("world_knobs", {}))
    raw = pq.read_table(next((world / "trajectories").glob("*.parquet"))).to_pylist()
    sysmsg = {"role": "system", "content": protocol.system_prompt(protocol.DEFAULT_DATE, style="compact")}
    rows = build_examples([[sysmsg, *r["messages"]] for r in raw], tokenizer, max_length=max_length).rows
    import random

    random.Random(0).shuffle(rows)
    return rows[:limit]


def sft_step(model, opt, rows, batches, pad_id: int, bf16: bool) -> tuple[float, int]:
    """Train on ``batches`` (lists of row indices, one optimizer step each); (seconds, real tokens)."""
    import torch

    from venus_utils.sft import Collator, masked_lm_loss

    collate = Collator(pad_id, "padded", None, 64)
    t0, tokens = time.perf_counter(), 0
    for batch_rows in batches:
        batch = collate([rows[i] for i in batch_rows])
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = masked_lm_loss(model, batch, "sequence_mean", pad_rows_to=64)[0]
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        tokens += int(batch["attention_mask"].sum())
    return time.perf_counter() - t0, tokens


def attention_table(length: int, peak) -> None:
    import torch
    import torch.nn.functional as F

    def run(fn, heads: int, dim: int, n: int = 3) -> float:
        q, k, v = (torch.randn(8, heads, length, dim, requires_grad=True) for _ in range(3))

        def once():
            with torch.autocast("cpu", dtype=torch.bfloat16):
                out = fn(q, k, v)
            out.float().sum().backward()

        once()
        t0 = time.perf_counter()
        for _ in range(n):
            once()
        return (time.perf_counter() - t0) / n

    mask = torch.full((length, length), float("-inf")).triu(1).to(torch.bfloat16)

    def fused(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    def matmuls(q, k, v):
        q, k, v = (x.to(torch.bfloat16) for x in (q, k, v))
        scores = (q @ k.transpose(-1, -2)) * q.size(-1) ** -0.5 + mask
        return scores.softmax(-1) @ v

    print(f"\nattention, forward + backward, 8 rows x {length} tokens, causal, bf16 autocast")
    base = None
    for label, fn, heads, dim in (
        ("fused kernel, 4 heads x 32 (the model)", fused, 4, 32),
        ("matmuls + mask + softmax, 4 x 32", matmuls, 4, 32),
        ("fused kernel, 2 heads x 64", fused, 2, 64),
        ("fused kernel, 1 head x 128", fused, 1, 128),
    ):
        secs = run(fn, heads, dim)
        base = base or secs
        gflops = 4 * 8 * heads * length * length * dim / 2 * 3 / secs / 1e9  # the causal half, backward ~2x forward
        print(
            f"  {label:<42}{secs * 1e3:>8.1f} ms  {base / secs:>5.2f}x the model's  {gflops:>6.1f} GFLOP/s "
            f"({100 * gflops / peak.best_gflops:.0f}% of the machine's best)"
        )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=4, help="measured optimizer steps per design per round")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--global-batch", type=int, default=8, help="trajectories per step (the profiles': 8)")
    p.add_argument("--max-length", type=int, default=4096)
    args = p.parse_args(argv)

    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from venus_utils.core.perf import cpu_bf16_native, flops_per_token, machine_peak, utilisation
    from venus_utils.modeling import build_tiny_model

    torch.manual_seed(0)
    tmp = Path(tempfile.mkdtemp(prefix="bench_lesson_model_"))
    model_dir = build_tiny_model(tmp / "m", None, size="tiny")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    n = args.global_batch * (args.steps * args.rounds + 1)
    rows = {name: design_rows(path, tokenizer, args.max_length, n * 3) for name, path in DESIGNS.items()}
    bf16 = cpu_bf16_native()
    peak = machine_peak()
    print(peak.describe())
    base = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    config = AutoConfig.from_pretrained(model_dir)
    models = {}
    for name in DESIGNS:
        model = copy.deepcopy(base).train()
        models[name] = (model, torch.optim.AdamW(model.parameters(), lr=1e-3))
    from venus_utils.sft import LengthGroupedSampler

    plans = {}
    for name, rs in rows.items():
        order = list(LengthGroupedSampler([r["length"] for r in rs], args.global_batch, seed=0))[:n]
        plans[name] = [order[i : i + args.global_batch] for i in range(0, n, args.global_batch)]
    acc = {name: [0.0, 0] for name in DESIGNS}
    for name in DESIGNS:  # warm-up: one step each
        sft_step(*models[name], rows[name], plans[name][:1], tokenizer.pad_token_id, bf16)
    for r in range(args.rounds):
        for name in DESIGNS:
            batches = plans[name][1 + r * args.steps : 1 + (r + 1) * args.steps]
            secs, tokens = sft_step(*models[name], rows[name], batches, tokenizer.pad_token_id, bf16)
            acc[name][0] += secs
            acc[name][1] += tokens
    print(
        f"\nSFT step: {args.global_batch} trajectories, {args.steps * args.rounds} measured steps per design, "
        f"{'bf16 autocast' if bf16 else 'fp32'}, {torch.get_num_threads()} thread(s)"
    )
    print(f"{'design':<14}{'tokens/traj':>12}{'s/step':>9}{'tokens/s':>10}{'MFU fp32':>10}{'best':>7}")
    steps = args.steps * args.rounds
    results = {}
    for name, rs in rows.items():
        secs, tokens = acc[name]
        mean = sum(x["length"] for x in rs) / len(rs)
        per_token = flops_per_token(config, context=mean / 2, training=True)
        gflops, share = utilisation(tokens, secs, per_token, peak.fp32_gflops)
        results[name] = secs / steps
        print(
            f"{name:<14}{mean:>12.0f}{secs / steps:>9.2f}{tokens / secs:>10.0f}{share:>10.1%}"
            f"{gflops / peak.best_gflops:>7.1%}"
        )
    print(f"cpu lesson / cpu-hard: {results['cpu-hard'] / results['cpu lesson']:.2f}x faster per step")
    lesson_mean = sum(x["length"] for x in rows["cpu lesson"]) / len(rows["cpu lesson"])
    attention_table(int(lesson_mean) // 64 * 64, peak)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
