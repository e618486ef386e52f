"""Held-out evaluation speed: the cached decoder against transformers ``generate``, side by side, same questions.

    # a fresh world and untrained tiny model (a few minutes)
    .venv/bin/python benchmarks/bench_eval.py
    # a run's trained model at the cpu profile's size (600 questions, greedy, 8 turns x 128 tokens)
    .venv/bin/python benchmarks/bench_eval.py --run runs/cpu --questions 600 --reference-questions 120

Both variants run :func:`venus_utils.eval.heldout.evaluate_model` (greedy, the offline judge, ``--workers`` questions
at once) in this process, one after the other:

- ``before``: the evaluation as it was: transformers ``generate`` on the whole context at every turn, in the model's
  saved dtype (the SFT export is bfloat16) (``EvalSettings(fast=False, dtype="saved")``);
- ``reference``: transformers ``generate`` in float32 (``EvalSettings(fast=False)``);
- ``fast_before``: the cached decoder as it was before decode steps ran on one thread outside the main thread and
  128 questions went at once: every decode step on all threads
  (:data:`venus_utils.modeling.kv_decode.ONE_THREAD_DECODE_ROWS` = 0) and 32 questions at once; it answers all the
  questions ``fast`` answers;
- ``fast_one_group``: the cached decoder as it was before a decode step's attention and a turn's prefill read each
  group of rows over the group's own width: every row over the batch's longest
  (:data:`venus_utils.modeling.kv_decode.MAX_LENGTH_GROUPS` =
  :data:`~venus_utils.modeling.kv_decode.MAX_PREFILL_GROUPS` = 1);
- ``fast_one_prefill``: the cached decoder as it was before a turn's prefill ran in groups of rows of similar length
  (:data:`~venus_utils.modeling.kv_decode.MAX_PREFILL_GROUPS` = 1): every row padded to the batch's longest new part
  and attending over the batch's longest context;
- ``fast_one_process``: the cached decoder as it was before the questions were shared among processes that answer
  side by side: every question in this process, on all its threads (``EvalSettings(processes=1)``);
- ``fast``: the cached decoder (:mod:`venus_utils.modeling.kv_decode`) in float32, each rollout's KV cache kept
  across its turns, ``--workers`` questions at once (default: :class:`EvalSettings`'s, 128 on the CPU), the decode
  steps' rows read in up to four groups of lengths and the prefill's in up to eight, the questions shared among
  processes of one thread each (:mod:`venus_utils.eval.answering`; one per core on the CPU from 128 questions on):
  the default.

Every variant but ``fast`` answers in this process (``processes=1``).

``--only fast_one_process,fast`` runs only those variants (in that order).

Printed: questions/s and the ratio, the generated tokens/s, the share of the machine's fp32 matmul peak (measured
in this run on the same threads) reached by the model work the evaluation needs (every context token encoded once),
for the cached decoder the decode steps' time and the cached keys and values their attention read (each group of
rows over its own width) as a share of the machine's memory read bandwidth (measured in this run: a decode step is
bound by memory, not arithmetic; counted in this process, so not for ``fast``'s processes), and whether the two
variants' answers are identical on the questions both answered (they must be).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", default=None, help="a run folder with 00_setup/world and a model (default: build them)")
    p.add_argument("--model", default=None, help="model folder (default: the run's best model)")
    p.add_argument("--questions", type=int, default=48, help="questions the fast variant answers")
    p.add_argument("--reference-questions", type=int, default=16, help="of those, questions the reference answers")
    p.add_argument("--workers", type=int, default=None, help="questions at once (default: EvalSettings's)")
    p.add_argument("--max-turns", type=int, default=4, help="an untrained model uses them all: keep it small")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--style", default="compact", help="system prompt style the model was trained with")
    p.add_argument("--only", default=None, help="comma-separated variants to run (default: all; fast always runs)")
    args = p.parse_args(argv)

    from transformers import AutoConfig

    from venus_utils.core.perf import machine_peak
    from venus_utils.core.stage import best_model
    from venus_utils.eval.heldout import EvalSettings, draw_heldout, evaluate_model
    from venus_utils.judging.judge import Judge
    from venus_utils.modeling import kv_decode

    tmp = Path(tempfile.mkdtemp(prefix="bench_eval_"))
    if args.run:
        world = Path(args.run) / "00_setup" / "world"
        model = Path(args.model) if args.model else best_model(args.run)[1]
    else:
        from venus_utils.modeling import build_tiny_model
        from venus_utils.world import build_world

        world, model = tmp / "world", tmp / "model"
        build_world(world, seed=0, size="small", progress=False, n_worlds=2, heldout_worlds=1)
        build_tiny_model(model, world, size="tiny", vocab_size=2048)
    qa = draw_heldout(world, args.questions, seed=0)
    judge = Judge.from_env("offline")
    config = AutoConfig.from_pretrained(model)
    peak = machine_peak()
    print(f"model {model}; {len(qa)} questions; max {args.max_turns} turns x {args.max_new_tokens} tokens")
    print(peak.describe())
    results = {}
    variants = (  # label, fast, dtype, questions, at once, processes
        ("before", False, "saved", args.reference_questions, 32, 1),
        ("reference", False, "auto", args.reference_questions, 32, 1),
        ("fast_before", True, "auto", len(qa), 32, 1),
        ("fast_one_group", True, "auto", len(qa), args.workers, 1),
        ("fast_one_prefill", True, "auto", len(qa), args.workers, 1),
        ("fast_one_process", True, "auto", len(qa), args.workers, 1),
        ("fast", True, "auto", len(qa), args.workers, None),
    )
    if args.only:
        wanted = set(args.only.split(",")) | {"fast"}
        variants = tuple(v for v in variants if v[0] in wanted)
    one_thread_rows, groups = kv_decode.ONE_THREAD_DECODE_ROWS, kv_decode.MAX_LENGTH_GROUPS
    prefill_groups = kv_decode.MAX_PREFILL_GROUPS
    decode = _count_decode_reads(kv_decode)
    for label, fast, dtype, n, workers, processes in variants:
        decode.update(steps=0, seconds=0.0, bytes=0)
        settings = EvalSettings(
            max_turns=args.max_turns,
            max_new_tokens=args.max_new_tokens,
            system_prompt_style=args.style,
            workers=workers,
            processes=processes,
            fast=fast,
            dtype=dtype,
        )
        out = tmp / f"{label}.parquet"
        kv_decode.ONE_THREAD_DECODE_ROWS = 0 if label == "fast_before" else one_thread_rows
        kv_decode.MAX_LENGTH_GROUPS = 1 if label in ("fast_before", "fast_one_group") else groups
        kv_decode.MAX_PREFILL_GROUPS = (
            1 if label in ("fast_before", "fast_one_group", "fast_one_prefill") else prefill_groups
        )
        t0 = time.perf_counter()
        scored = evaluate_model(model, qa.head(n), out, settings, world_dir=world, judge=judge, progress=False)
        seconds = time.perf_counter() - t0
        kv_decode.ONE_THREAD_DECODE_ROWS, kv_decode.MAX_LENGTH_GROUPS = one_thread_rows, groups
        kv_decode.MAX_PREFILL_GROUPS = prefill_groups
        results[label] = dict(n=n, seconds=seconds, scored=scored)
        _print_variant(label, settings, scored, out, seconds, config, peak)
        _print_decode(decode, peak)
    return _report(results)


def _print_variant(label, settings, scored, out, seconds, config, peak) -> None:
    """One variant's questions/s, generated tokens/s and share of the fp32 peak."""
    from venus_utils.core.perf import flops_per_token, utilisation
    from venus_utils.eval.answering import processes_for

    n = len(scored)
    rollouts = [json.loads(line) for line in out.with_suffix(".jsonl").read_text().splitlines()]
    generated = sum(sum(t.get("new_tokens") or 0 for t in r["turn_log"]) for r in rollouts)
    context = sum(r["final_token_count"] for r in rollouts)  # each token encoded once: the work needed
    per_token = flops_per_token(config, context=context / max(len(rollouts), 1) / 2)
    gflops, share = utilisation(context, seconds, per_token, peak.fp32_gflops)
    print(
        f"{label:>11}: {n} questions ({settings.workers} at once, {processes_for(settings, n, own_tools=False)} "
        f"process(es)) in {seconds:.1f} s = {n / seconds:.2f} questions/s, "
        f"{generated / seconds:.0f} generated tokens/s, model work {gflops:.2f} GFLOP/s = "
        f"{100 * share:.2f}% of the fp32 peak (accuracy {scored['correct'].mean():.3f}, "
        f"{scored['turns'].mean():.1f} turns)"
    )


def _count_decode_reads(kv_decode) -> dict:
    """Wrap ``KVDecoder.forward`` (in this process) to add up each decode step's time and the bytes of cached keys
    and values its attention reads: per group of rows (``kv_decode.length_groups``, as the step uses them) rows x
    width, times key and value, the key/value heads, the head size and the layers."""
    totals = {"steps": 0, "seconds": 0.0, "bytes": 0}
    forward = kv_decode.KVDecoder.forward

    def counted(self, ids, positions, caches, lengths_after, logits_at=None):
        if ids.shape[1] != 1:
            return forward(self, ids, positions, caches, lengths_after, logits_at)
        t0 = time.perf_counter()
        out = forward(self, ids, positions, caches, lengths_after, logits_at)
        totals["seconds"] += time.perf_counter() - t0
        totals["steps"] += 1
        cpu = ids.device.type == "cpu"
        groups = kv_decode.length_groups(lengths_after) if cpu else [(0, ids.shape[0], int(lengths_after.max()))]
        columns = sum((e - s) * w for s, e, w in groups)
        k = caches[0][0]
        totals["bytes"] += columns * 2 * self.n_kv * self.head_dim * k.element_size() * self.n_layers
        return out

    kv_decode.KVDecoder.forward = counted
    return totals


def _print_decode(decode: dict, peak) -> None:
    """The decode steps' time and cache reads of the variant just run (:func:`_count_decode_reads`), if it used the
    cached decoder."""
    if not decode["steps"]:
        return
    rate = decode["bytes"] / decode["seconds"] / 1e9
    print(
        f"{'':>11}  decode: {decode['steps']} steps in {decode['seconds']:.1f} s, their attention read "
        f"{decode['bytes'] / 1e9:.1f} GB of cache at {rate:.1f} GB/s = {100 * rate / peak.read_gbps:.0f}% of the "
        "machine's memory read bandwidth"
    )


def _report(results: dict) -> int:
    """The speed-ups against each baseline and whether the greedy answers are identical (exit 1 if not)."""
    import pandas as pd

    fast = results["fast"]
    rate = {k: r["n"] / r["seconds"] for k, r in results.items()}
    names = {
        "reference": "reference (float32 generate)",
        "before": "before (the saved dtype's generate)",
        "fast_before": "fast_before (all-thread decode, 32 at once)",
        "fast_one_group": "fast_one_group (every row over the batch's longest)",
        "fast_one_prefill": "fast_one_prefill (the prefill in one group)",
        "fast_one_process": "fast_one_process (every question in one process)",
    }
    for other, name in names.items():
        if other in rate:
            print(f"speed-up fast / {name}: {rate['fast'] / rate[other]:.2f}x questions/s")
    key = ["id", "prediction", "turns", "termination"]
    failures = 0
    for other in ("reference", "fast_before", "fast_one_group", "fast_one_prefill", "fast_one_process"):
        if other not in results:
            continue
        both = pd.merge(results[other]["scored"][key], fast["scored"][key], on="id", suffixes=("_o", "_f"))
        same = int(
            (
                (both["prediction_o"].fillna("") == both["prediction_f"].fillna(""))
                & (both["turns_o"] == both["turns_f"])
                & (both["termination_o"] == both["termination_f"])
            ).sum()
        )
        failures += len(both) - same
        print(f"identical greedy answers, fast and {other} (prediction, turns, termination): {same} of {len(both)}")
    print(f"600 questions would take {600 / rate['fast']:.0f} s with the fast path")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
