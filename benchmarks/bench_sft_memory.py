"""SFT memory over a long run: batch shapes rounded up to a multiple, against the exact shapes, side by side.

    python benchmarks/bench_sft_memory.py [--data train.parquet] [--steps 40] [--multiples 1,64]   # a few minutes

Under bf16 autocast on a CPU every new tensor shape leaves kernel state behind, so a cpu-hard SFT run (2,100
grouped batches, almost every one a width and a count of labelled positions of its own) grew its notebook kernel to
12.5 GB.  ``pad_to_multiple_of`` rounds both up (the collator's width, the LM head's rows).  Each variant here trains
the same tiny model on the same length-grouped micro-batches with the recipe's collator and loss
(:class:`venus_utils.sft.Collator`, :func:`venus_utils.sft.masked_lm_loss`), ``--steps`` optimizer steps of one
micro-batch, in a fresh process of its own (the kernel state is per process), one after the other.  Reported per
variant: distinct widths and LM-head row counts, padding share, real (non-pad) tokens/s and its ratio to exact shapes
(``--multiples``' first), resident memory after the first step and at the end, its growth per 100 steps, and the
model FLOP utilisation against the machine's peak measured in this run on the same threads
(:func:`venus_utils.core.perf.machine_peak`).

Without ``--data`` a small offline world's expert trajectories are the data (as in ``bench_sft.py``); the cpu-hard
profile's own data (``02_turn_aware_resampling/train.parquet`` of a run) shows the effect at its size.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def child(args) -> dict:
    """One variant in this process: train, sample memory, return the measurements."""
    import psutil
    import torch
    from bench_sft import load_rows
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from venus_utils.sft import Collator, LengthGroupedSampler, masked_lm_loss
    from venus_utils.sft.batching import round_up

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    rows = load_rows(argparse.Namespace(**{**vars(args), "global_batch": args.micro_batch}), tokenizer)
    order = list(LengthGroupedSampler([r["length"] for r in rows], args.micro_batch, seed=0))
    batches = [order[i : i + args.micro_batch] for i in range(0, len(order), args.micro_batch)]
    batches = [b for b in batches if len(b) == args.micro_batch]
    batches = (batches * (args.steps // max(len(batches), 1) + 1))[: args.steps]
    collate = Collator(tokenizer.pad_token_id, "grouped", args.max_length, args.multiple)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.01)
    proc = psutil.Process()
    real = total = 0
    widths, head_rows, rss = set(), set(), []
    t0 = time.perf_counter()
    for step, b in enumerate(batches):
        batch = collate([rows[j] for j in b])
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
            loss, stats = masked_lm_loss(model, batch, "sequence_mean", pad_rows_to=args.multiple)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        real += int(batch["attention_mask"].sum())
        total += int(batch["input_ids"].numel())
        widths.add(int(batch["input_ids"].shape[1]))
        head_rows.add(round_up(stats["loss_tokens"], args.multiple))
        rss.append(proc.memory_info().rss / 2**20)
        if step == 0:
            t0, real, total = time.perf_counter(), 0, 0  # the first step (allocator, kernels) is not timed
    dt = time.perf_counter() - t0
    return {
        "multiple": args.multiple,
        "steps": len(batches),
        "distinct_widths": len(widths),
        "distinct_head_rows": len(head_rows),
        "padding_share": round(1 - real / max(total, 1), 4),
        "tokens_per_s": round(real / dt, 1),
        "rss_first_mb": round(rss[0]),
        "rss_end_mb": round(rss[-1]),
        "rss_peak_mb": round(max(rss)),
        "growth_mb_per_100_steps": round((rss[-1] - rss[0]) / max(len(rss) - 1, 1) * 100, 1),
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", help="model folder (default: build a tiny one in a temporary folder)")
    p.add_argument("--data", help="SFT parquet (question, messages, gt); default: a small world's trajectories")
    p.add_argument("--max-length", type=int, default=4096)
    p.add_argument("--micro-batch", type=int, default=8, help="trajectories per optimizer step")
    p.add_argument("--steps", type=int, default=40, help="optimizer steps per variant")
    p.add_argument("--multiples", default="1,64", help="pad_to_multiple_of values; the first is the baseline")
    p.add_argument(
        "--precision",
        choices=("auto", "bf16", "fp32"),
        default="auto",
        help="auto: bf16 autocast where the CPU has native bf16 (what the recipe trains), else fp32",
    )
    p.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", str(os.cpu_count() or 1))))
    p.add_argument("--json", help="also write the results here")
    p.add_argument("--child", type=int, help=argparse.SUPPRESS)  # run one variant (this multiple) and print JSON
    args = p.parse_args(argv)
    from venus_utils.core.perf import cpu_bf16_native

    args.bf16 = args.precision == "bf16" or (args.precision == "auto" and cpu_bf16_native())
    if args.child is not None:
        args.multiple = args.child
        print("RESULT " + json.dumps(child(args)), flush=True)
        return None
    import tempfile

    if not args.model:
        from venus_utils.modeling import build_tiny_model

        args.model = str(build_tiny_model(Path(tempfile.mkdtemp(prefix="bench_model_")) / "m", None, size="tiny"))
    multiples = [int(m) for m in args.multiples.split(",")]
    results = []
    for m in multiples:
        print(f"[bench_sft_memory] pad_to_multiple_of={m}: {args.steps} steps in a fresh process", flush=True)
        cmd = [
            sys.executable,
            __file__,
            "--child",
            str(m),
            "--model",
            args.model,
            "--steps",
            str(args.steps),
            "--micro-batch",
            str(args.micro_batch),
            "--max-length",
            str(args.max_length),
            "--precision",
            args.precision,
            "--threads",
            str(args.threads),
        ]
        if args.data:
            cmd += ["--data", args.data]
        out = subprocess.run(cmd, capture_output=True, text=True, check=False)
        line = next((x for x in out.stdout.splitlines() if x.startswith("RESULT ")), None)
        if out.returncode or line is None:
            raise SystemExit(f"variant pad_to_multiple_of={m} failed (exit {out.returncode}):\n{out.stderr[-3000:]}")
        results.append(json.loads(line[len("RESULT ") :]))

    import torch
    from transformers import AutoConfig

    from venus_utils.core.perf import flops_per_token, machine_peak

    torch.set_num_threads(args.threads)
    peak = machine_peak()
    per_token = flops_per_token(AutoConfig.from_pretrained(args.model), context=args.max_length / 4, training=True)
    print(
        f"\n{peak.describe()}; {per_token / 1e6:.1f} MFLOP per trained token; "
        f"{'bf16 autocast' if args.bf16 else 'fp32'}; {args.threads} thread(s)"
    )
    base = results[0]
    print(
        f"\n{'multiple':>8}{'widths':>8}{'rows':>6}{'padding':>9}{'tokens/s':>10}{'vs ' + str(base['multiple']):>8}"
        f"{'RSS 1st':>9}{'RSS end':>9}{'MB/100 st':>11}{'MFU best':>10}"
    )
    for r in results:
        r["ratio_tokens_per_s"] = round(r["tokens_per_s"] / base["tokens_per_s"], 3)
        r["mfu_best"] = round(r["tokens_per_s"] * per_token / 1e9 / peak.best_gflops, 4)
        print(
            f"{r['multiple']:>8}{r['distinct_widths']:>8}{r['distinct_head_rows']:>6}{r['padding_share']:>9.1%}{r['tokens_per_s']:>10.0f}"
            f"{r['ratio_tokens_per_s']:>7.2f}x{r['rss_first_mb']:>9}{r['rss_end_mb']:>9}"
            f"{r['growth_mb_per_100_steps']:>11}{r['mfu_best']:>10.1%}"
        )
    if args.json:
        Path(args.json).write_text(
            json.dumps({"args": vars(args), "peak": vars(peak), "results": results}, indent=2),
            encoding="utf-8",
        )
    return results


if __name__ == "__main__":
    main()
