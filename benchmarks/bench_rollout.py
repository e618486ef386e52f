"""An RL step, phase by phase: rollouts on the cached decoder against transformers ``generate``, side by side.

    # a fresh world and untrained tiny model (a few minutes)
    .venv/bin/python benchmarks/bench_rollout.py
    # a run's SFT model at the cpu lesson's size (4 questions x 4 rollouts, 10 turns x 128 tokens, T = 1)
    .venv/bin/python benchmarks/bench_rollout.py --run runs/cpu --steps 4 --max-turns 10

The IGPO trainers (:class:`venus_utils.rl.igpo_trainer.IGPOTrainer`, each on its own copy of the same model, the
same questions and seed) run one after the other in this process:

- ``reference``: rollouts through transformers ``generate`` (the whole context re-encoded every turn) and an update
  with gradient checkpointing (TRL's default, what the cpu profile ran before ``gradient_checkpointing: false``);
- ``fp32``: ``fast`` with the update and the reference log-probs in float32 (``IGPOConfig.precision='fp32'``), what
  the RL stage ran before bf16 autocast reached it;
- ``fast_reencode``: ``fast`` with the information gain encoding every episode again (the trainer before it read
  the keys and values the rollouts' decoder kept);
- ``fast``: rollouts through the cached decoder (:mod:`venus_utils.modeling.kv_decode`), no recomputation in the
  update, the update and the reference log-probs under bf16 autocast where the CPU has native bf16
  (``precision='auto'``; the lesson's settings), the information gain on the rollouts' kept caches.

``--only fast_reencode,fast`` runs only those variants (in that order; ``fast`` always runs).

Printed per variant: seconds per step in each phase the trainer logs (generation, the rest of the rollout: tools
and the agent loop, judge, information gain, advantages, the policy update), generated tokens/s, and the share
of the machine's peak (fp32 and bf16 matmul, measured in this run on the same threads) that generation and the
update reach.  The first step of each variant is a warm-up and is not counted.
"""

from __future__ import annotations

import argparse
import copy
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PHASES = ("generation", "rollout", "judge", "info_gain", "advantages", "update")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", default=None, help="a run folder with 00_setup/world and 03_sft_unsloth/model")
    p.add_argument("--steps", type=int, default=3, help="measured steps per variant (after one warm-up step)")
    p.add_argument("--prompts", type=int, default=4, help="questions per step")
    p.add_argument("--generations", type=int, default=4, help="rollouts per question")
    p.add_argument("--max-turns", type=int, default=8)
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--only", default=None, help="comma-separated variants to run (default: all; fast always runs)")
    args = p.parse_args(argv)

    import torch

    from venus_utils.core.perf import machine_peak
    from venus_utils.rl.policy import load_policy
    from venus_utils.rl.training_rows import qa_rows, rl_question_file

    tmp = Path(tempfile.mkdtemp(prefix="bench_rollout_"))
    world, model_dir = _inputs(args.run, tmp)
    steps = args.steps + 1
    rows = qa_rows(rl_question_file(None, world), limit=args.prompts * steps, seed=0)
    # as the RL stage loads it: float32 on the CPU (the SFT export is bfloat16; the benchmark ran it in bfloat16
    # before, whose small decode matmuls are ~2x slower than the stage's)
    base, tokenizer = load_policy(model_dir, device="cpu")
    peak = machine_peak()
    print(
        f"model {model_dir}; {args.prompts} questions x {args.generations} rollouts per step, "
        f"{args.max_turns} turns x {args.max_new_tokens} tokens, T = 1; {args.steps} measured steps"
    )
    print(peak.describe())
    variants = {
        "reference": (False, "fp32", True),
        "fp32": (True, "fp32", True),
        "fast_reencode": (True, "auto", False),
        "fast": (True, "auto", True),
    }
    if args.only:
        wanted = args.only.split(",")
        unknown = sorted(set(wanted) - set(variants))
        if unknown:
            raise SystemExit(f"--only: unknown variant(s) {unknown}; choose from {sorted(variants)}")
        variants = {k: variants[k] for k in [w for w in wanted if w != "fast"] + ["fast"]}
    trainers = {
        label: _trainer(args, steps, fast, precision, base, tokenizer, rows, world, tmp / label, reuse)
        for label, (fast, precision, reuse) in variants.items()
    }
    for label, trainer in trainers.items():
        print(f"[bench_rollout] {label}: {steps} steps", flush=True)
        torch.manual_seed(0)
        trainer.train()
    _report({label: _measured(tmp / label) for label in trainers}, base.config, peak)
    return 0


def _inputs(run: str | None, tmp: Path) -> tuple[Path, Path]:
    """The world and the SFT model of ``run``, or a small world and an untrained tiny model built in ``tmp``."""
    if run:
        return Path(run) / "00_setup" / "world", Path(run) / "03_sft_unsloth" / "model"
    from venus_utils.modeling import build_tiny_model
    from venus_utils.world import build_world

    world, model_dir = tmp / "world", tmp / "model"
    build_world(world, seed=0, size="small", progress=False, n_worlds=2, heldout_worlds=1, rl_frac=0.1)
    build_tiny_model(model_dir, world, size="tiny", vocab_size=2048)
    return world, model_dir


def _trainer(args, steps: int, fast: bool, precision: str, base, tokenizer, rows, world: Path, out: Path, reuse=True):
    """An IGPOTrainer on a copy of ``base``: the fast path (cached decoding, no recomputation in the update) or the
    reference (transformers ``generate``, gradient checkpointing on, as the code before them), its update in
    ``precision``; without ``reuse`` the information gain encodes the episodes again instead of reading the
    rollouts' kept caches."""
    from datasets import Dataset

    from venus_utils.judging.judge import judge_function
    from venus_utils.rl.config import IGPOConfig
    from venus_utils.rl.igpo_trainer import IGPOTrainer, grpo_args
    from venus_utils.rl.rollout import make_agent_rollout
    from venus_utils.tools import make_toolbox

    cfg = IGPOConfig(
        prompts_per_step=args.prompts,
        num_generations=args.generations,
        micro_batch_size=8,
        max_steps=steps,
        save_steps=10_000,
        max_turns=args.max_turns,
        max_tokens_per_turn=args.max_new_tokens,
        learning_rate=5e-5,
        ig_tool_filter="all",
        system_prompt_style="compact",
        seed=0,
        gradient_checkpointing=not fast,
        precision=precision,
    )
    rollout_fn = make_agent_rollout(make_toolbox("local", world), fast=fast)
    if not reuse:
        rollout_fn = _hide_decoder(rollout_fn)
    return IGPOTrainer(
        copy.deepcopy(base),
        tokenizer,
        Dataset.from_list(rows),
        cfg,
        grpo_args(cfg, out, save_strategy="no"),
        rollout_fn=rollout_fn,
        judge=judge_function("offline")[0],
    )


def _hide_decoder(rollout_fn):
    """``rollout_fn`` without its ``decoder``: the trainer's information gain then encodes the episodes again."""

    def rollout(*args, **kwargs):
        episodes = rollout_fn(*args, **kwargs)
        rollout.timing = rollout_fn.timing
        return episodes

    rollout.timing = {}
    return rollout


def _measured(out: Path) -> dict:
    """A variant's mean seconds per phase per step (the warm-up step left out) and its tokens per step."""
    from venus_utils.core.io import read_jsonl

    logged = [r for r in read_jsonl(out / "metrics.jsonl") if "time_update_s" in r][1:]  # skip the warm-up
    episodes = [e for e in read_jsonl(out / "episodes.jsonl") if e["step"] >= 1]
    return dict(
        secs={ph: sum(r.get(f"time_{ph}_s", 0.0) for r in logged) / len(logged) for ph in PHASES},
        generated=sum(e["assistant_tokens"] for e in episodes) / len(logged),
        context=sum(e["completion_tokens"] for e in episodes) / max(len(episodes), 1),
        trained=sum(e["completion_tokens"] + 150 for e in episodes) / len(logged),  # + the ~150-token prompt
    )


def _report(results: dict, config, peak) -> None:
    """The per-phase table (each variant, and each baseline's ratio to fast), and each variant's tokens/s and share of
    the machine's peak."""
    from venus_utils.core.perf import flops_per_token, utilisation

    others = [k for k in results if k != "fast"]
    print(
        f"\n{'s per step':<16}"
        + "".join(f"{k:>12}" for k in results)
        + "".join(f"{'/'.join((k, 'fast')):>20}" for k in others)
    )

    def row(name: str, secs: dict) -> None:
        b = secs["fast"]
        ratios = "".join(f"{(secs[k] / b if b else float('nan')):>19.1f}x" for k in others)
        print(f"{name:<16}" + "".join(f"{secs[k]:>12.2f}" for k in results) + ratios)

    for ph in PHASES:
        row(ph, {k: v["secs"][ph] for k, v in results.items()})
    row("whole step", {k: sum(v["secs"].values()) for k, v in results.items()})
    for label, r in results.items():
        gen_s, upd_s = r["secs"]["generation"], r["secs"]["update"]
        tok_s = r["generated"] / gen_s if gen_s else float("nan")
        g_gflops, g_share = utilisation(
            r["generated"], gen_s, flops_per_token(config, context=r["context"] / 2), peak.fp32_gflops
        )
        u_gflops, u_share = utilisation(
            r["trained"], upd_s, flops_per_token(config, context=r["context"] / 2, training=True), peak.fp32_gflops
        )
        print(
            f"{label:>10}: {r['generated']:.0f} generated tokens per step, {tok_s:.0f} tokens/s in generation "
            f"({g_gflops:.2f} GFLOP/s, {100 * g_share:.1f}% of fp32 peak); update {u_gflops:.1f} GFLOP/s "
            f"({100 * u_share:.1f}% of fp32 peak, {100 * u_gflops / peak.best_gflops:.1f}% of the machine's best)"
        )
    speed = {k: r["generated"] / r["secs"]["generation"] for k, r in results.items() if r["secs"]["generation"]}
    for k in others:
        print(f"rollout tokens/s fast / {k}: {speed['fast'] / speed[k]:.1f}x")


if __name__ == "__main__":
    raise SystemExit(main())
