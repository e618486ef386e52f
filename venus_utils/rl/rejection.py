"""Rejection-sampling fine-tuning (RFT): the other cheaper way to spend an RL arm's compute.

The field's baseline for outcome-reward RL (STaR, RFT, ReST-EM, RAFT: ``../shared/spec/rl-place.md``) samples the
model on the RL questions, keeps the trajectories the judge accepts and fine-tunes on them. A gain of RL that this arm
matches came from training on the model's own right answers, not from the policy gradient. :func:`train_rft_arm`
builds it from the same stopped (plateau) SFT checkpoint the RL arms and the control start from:

1. **Sampling** (:func:`sample_right`): the SFT model rolls out the RL arm's questions with the RL arm's rollout
   settings (temperature, top-p, turns, tokens per turn) and tools, ``num_generations`` rollouts of each of the first
   questions of the RL pool drawn by the run's seed: as many as the IGPO arm trained on (``rft_rollouts: trained``, its
   steps x ``prompts_per_step`` questions; with dynamic sampling IGPO rolls out up to ``max_sampling_rounds`` times
   as many, all in the FLOPs this arm is matched to, so this arm then samples less and trains longer on what it
   keeps) or as many as it rolled out (``rolled_out``, :func:`rft_groups`). The run's judge (RL's reward) scores
   each answer.
2. **Filtering**: a right trajectory is kept, trained on exactly the tokens it sampled (the tool output and the
   prompts masked, as SFT and RL mask them); wrong, unjudged (the judge failed), duplicate (the same tokens as a kept
   sample of the same question) and too long (over SFT's ``max_length``) ones are counted under their reason.
3. **Fine-tuning**: as the control does (:mod:`venus_utils.sft.continuation`): the stopped SFT run's last checkpoint
   (weights, AdamW moments) trained on the kept trajectories, from the learning rate it stopped at cosine down to its
   floor, for the RL arm's model FLOPs **less what the sampling spent** (a :class:`~venus_utils.core.perf.FlopCounter`
   on the sampling model counts the rollouts as the RL arm counts its own).

The samples are kept in the arm's folder (``rft_samples.jsonl``, with ``sampling.json``): a rerun after a stop trains
on from its checkpoints without sampling again. ``python -m venus_utils.rl arms --arms igpo,...,rft`` and notebook 04
(``rft_arm = True``) call it; its held-out results sit beside the RL arms' (:data:`venus_utils.eval.heldout.SCORED`:
``rejection sampling``).
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from ..core.checkpoints import model_digest
from ..core.io import atomic_path, read_json, read_jsonl, write_json, write_jsonl
from ..core.paths import RFT_DIR, SFT_STAGE
from ..core.perf import FlopCounter
from ..core.progress import report as report_progress
from ..core.stage import Stage
from ..eval import heldout as ho
from ..judging.judge import Judge, judge_function, judged_score
from ..sft.continuation import continue_sft
from ..sft.data import IGNORE
from ..tools import make_toolbox
from .config import RFT_ROLLOUTS, IGPOConfig
from .control import sft_settings
from .policy import load_policy
from .rewards import Episode
from .rollout import make_agent_rollout
from .stage import heldout_eval, heldout_scores, logged_values, stage_inputs
from .training_rows import qa_rows

SAMPLES_FILE = "rft_samples.jsonl"  # one line per kept trajectory: question id, input_ids, labels
SAMPLING_FILE = "sampling.json"  # the sampling's counts, FLOPs and settings
DROP_REASONS = ("wrong", "unjudged", "duplicate", "too_long")


def rft_groups(history: Sequence[dict], cfg: IGPOConfig, rollouts: str = "trained") -> int:
    """Groups of ``num_generations`` rollouts the arm samples, read from the IGPO arm's log (a trainer's
    ``state.log_history`` or ``metrics.jsonl``'s rows): its steps x ``prompts_per_step`` (``trained``), or that many
    times the steps' ratio of groups rolled out to groups trained (``rolled_out``: ``groups_sampled`` over
    ``groups_sampled - groups_dropped``, a ratio of the logged means, whatever the logging window or processes).
    Without a log, ``max_steps`` x ``prompts_per_step``."""
    if rollouts not in RFT_ROLLOUTS:
        raise ValueError(f"rft_rollouts={rollouts!r}: expected one of {RFT_ROLLOUTS}")
    steps = max((int(r["step"]) for r in history if r.get("step") is not None and "loss" in r), default=0)
    trained = (steps or cfg.max_steps) * cfg.prompts_per_step
    sampled, dropped = logged_values(history, "groups_sampled"), logged_values(history, "groups_dropped")
    if rollouts == "trained" or not sampled or len(sampled) != len(dropped):
        return trained
    kept = sum(sampled) - sum(dropped)
    return round(trained * sum(sampled) / kept) if kept > 0 else trained


def rft_questions(rows: Sequence[dict], cfg: IGPOConfig, seed: int, groups: int | None = None) -> list[dict]:
    """The questions the RFT arm samples, ``num_generations`` times each: ``groups`` of them (:func:`rft_groups`;
    default ``max_steps`` x ``prompts_per_step``, as many as the IGPO arm's steps take), drawn from the RL pool by
    ``seed`` (the pool again, reshuffled, when it is smaller)."""
    need = groups if groups is not None else cfg.max_steps * cfg.prompts_per_step
    rng, out = random.Random(f"{seed}-rft"), []
    while len(out) < need:
        pool = list(rows)
        rng.shuffle(pool)
        out += pool[: need - len(out)]
    return out


def episode_row(ep: Episode) -> dict[str, Any]:
    """An episode as an SFT row: every token it saw, trained on the ones it sampled (``assistant_mask``)."""
    ids = list(ep.prompt_ids) + list(ep.completion_ids)
    labels = [IGNORE] * len(ep.prompt_ids) + [t if m else IGNORE for t, m in zip(ep.completion_ids, ep.assistant_mask)]
    n_loss = sum(1 for x in labels if x != IGNORE)
    return {"input_ids": ids, "labels": labels, "length": len(ids), "n_loss": n_loss}


def keep_right(
    episodes: Sequence[Episode], scores: Sequence[float], max_length: int, seen: set | None = None
) -> tuple[list[dict], Counter]:
    """The SFT rows of the episodes the judge accepted (``scores``: 1.0 right, 0.0 wrong, NaN the judge failed), and
    every other episode counted under its reason (:data:`DROP_REASONS`). ``seen``: (question, tokens) already kept
    (updated)."""
    seen = set() if seen is None else seen
    rows, dropped = [], Counter()
    for ep, score in zip(episodes, scores):
        value = judged_score(score)
        if math.isnan(value):
            dropped["unjudged"] += 1
            continue
        if value < 1.0:
            dropped["wrong"] += 1
            continue
        row = episode_row(ep)
        key = (ep.group if ep.group is not None else ep.question, tuple(row["input_ids"]))
        if key in seen:
            dropped["duplicate"] += 1
            continue
        if row["length"] > max_length:
            dropped["too_long"] += 1
            continue
        seen.add(key)
        rows.append({**row, "question_id": str(ep.group if ep.group is not None else ep.question)})
    return rows, dropped


def sample_right(
    model,
    tokenizer,
    questions: Sequence[dict],
    tools,
    judge: Callable,
    cfg: IGPOConfig,
    *,
    max_length: int,
    seed: int = 0,
    progress: bool = True,
) -> tuple[list[dict], dict[str, Any]]:
    """Roll out each of ``questions`` ``cfg.num_generations`` times with ``model`` (the RL arm's rollout settings),
    judge them and keep the right ones (:func:`keep_right`), ``cfg.prompts_per_step`` questions at a time (an RL
    step's batch). Returns the kept rows and the record: rollouts, kept, each drop reason, the share right, and the
    model FLOPs the sampling spent."""
    import torch
    from transformers import set_seed

    set_seed(seed)
    rollout = make_agent_rollout(tools)
    counter = FlopCounter(model)
    was_training = model.training
    model.eval()
    rows, dropped, seen, right = [], Counter(), set(), 0
    batch = max(1, cfg.prompts_per_step)
    try:
        with torch.no_grad():
            for start in tqdm(range(0, len(questions), batch), desc="rft sampling", disable=not progress):
                chunk = [q for q in questions[start : start + batch] for _ in range(cfg.num_generations)]
                episodes = rollout(model, tokenizer, chunk, cfg)
                scores = judge(
                    [e.question for e in episodes],
                    [e.prediction or "" for e in episodes],
                    [e.ground_truth for e in episodes],
                )
                right += sum(judged_score(s) == 1.0 for s in scores)
                kept, why = keep_right(episodes, scores, max_length, seen)
                rows += kept
                dropped.update(why)
                report_progress("questions sampled", min(start + batch, len(questions)), len(questions))
    finally:
        model.train(was_training)
        counter.close()
    rollouts = len(questions) * cfg.num_generations
    record = {
        "questions": len(questions),
        "samples_per_question": cfg.num_generations,
        "rollouts": rollouts,
        "right": int(right),
        "right_share": round(right / max(rollouts, 1), 4),
        "kept": len(rows),
        "dropped": {reason: int(dropped.get(reason, 0)) for reason in DROP_REASONS},
        "questions_with_a_kept_sample": len({r["question_id"] for r in rows}),
        "sampling_flops": float(counter.flops),
    }
    return rows, record


def _sampled(stage: Stage, settings: dict[str, Any]) -> tuple[list[dict], dict[str, Any]] | None:
    """The samples an earlier call kept in the arm's folder with the same ``settings``, else None."""
    record_path, samples = stage.path(SAMPLING_FILE), stage.path(SAMPLES_FILE)
    if not (record_path.is_file() and samples.is_file()):
        return None
    record = read_json(record_path)
    if record.get("settings") != settings:
        raise ValueError(
            f"{record_path}: sampled with other settings ({record.get('settings')}); move {stage.dir} away to "
            "sample again"
        )
    return list(read_jsonl(samples)), record


def _samples(
    stage: Stage, settings: dict[str, Any], sft_dir: Path, device: str, questions: list[dict], tools, judge_fn, cfg,
    max_length: int, progress: bool,
) -> tuple[list[dict], dict[str, Any]]:  # fmt: skip
    """The kept samples and their record: an earlier call's with the same ``settings``, else sampled now and kept."""
    found = _sampled(stage, settings)
    if found is not None:
        print(f"[rft] {len(found[0])} kept samples of an earlier call reused ({stage.path(SAMPLES_FILE)})", flush=True)
        return found
    model, tokenizer = load_policy(sft_dir, device)
    with stage.timed("sampling"):
        rows, record = sample_right(
            model, tokenizer, questions, tools, judge_fn, cfg, max_length=max_length, seed=cfg.seed, progress=progress
        )
    del model
    write_jsonl(stage.path(SAMPLES_FILE), rows)
    write_json(stage.path(SAMPLING_FILE), {**record, "settings": settings})
    return rows, record


def train_rft_arm(
    run_dir: str | Path,
    budget_flops: float,
    cfg: IGPOConfig,
    *,
    offline: bool = True,
    train_qa: str | Path | None = None,
    train_questions: int | None = None,
    heldout_qa: str | Path | None = None,
    heldout_n: int | None = None,
    heldout_split: str = "test",
    rl_log: Sequence[dict] = (),
    rollouts: str = "trained",
    device: str = "cpu",
    judge: Any = None,
    tools: Any = None,
    profile: str | None = None,
    launched_from: str = "notebook 04",
    progress: bool = True,
) -> dict[str, Any]:
    """The RFT arm of a run (see the module): sample, filter, fine-tune for ``budget_flops`` (the IGPO arm's model
    FLOPs, the sampling included), score on the run's held-out questions (``heldout_n`` of ``heldout_qa`` or the
    world's ``heldout_split``) as the RL arms are, and return its ``summary.json``. ``cfg``: the RL arms' config (their
    rollout settings, step budget and seed), ``train_qa`` / ``train_questions`` their question pool; the fine-tuning
    uses the settings the SFT stage ran with (its ``summary.json``); ``rl_log`` (the IGPO arm's trainer log or
    ``metrics.jsonl`` rows) and ``rollouts`` (``rft_rollouts``): how many groups of rollouts to sample
    (:func:`rft_groups`; without a log ``cfg.max_steps`` x ``prompts_per_step``); ``judge`` and
    ``tools`` default to the configured judge and the run's offline tools. When no sample is right the arm is the SFT
    model: it says so, and its held-out answers are the SFT model's.

    The IGPO arm's budget counts the rollouts it generated on its training weights; generated by vLLM
    (``use_vllm``) they are not counted (:class:`~venus_utils.rl.igpo_trainer.IGPOTrainer`), and neither is this
    arm's sampling then, so both sides count the same work."""
    if not budget_flops or budget_flops <= 0 or not math.isfinite(budget_flops):
        raise ValueError(f"the RL arm's FLOPs must be a positive number to match, got {budget_flops!r}")
    params = sft_settings(run_dir)
    stage = Stage(SFT_STAGE, run_dir, Path(run_dir) / RFT_DIR, profile)
    stage.hold()
    stage.record_settings(params)
    sft_dir, world_dir, train_file = stage_inputs(stage, offline, train_qa)
    if tools is None:
        tools = make_toolbox("local", world_dir) if offline else make_toolbox("web")
    grader = judge if judge is not None else Judge.from_env()
    judge_fn, described = judge_function(grader)
    groups = rft_groups(rl_log, cfg, rollouts)
    questions = rft_questions(qa_rows(train_file, train_questions, cfg.seed), cfg, cfg.seed, groups)
    settings = {
        "sft_model": str(Path(sft_dir).resolve().relative_to(Path(run_dir).resolve())),
        "sft_model_digest": model_digest(sft_dir),  # a retrained SFT model at the same path samples again
        "questions": [q["id"] for q in questions],
        "samples_per_question": cfg.num_generations,
        "rollout": {k: getattr(cfg, k) for k in ("temperature", "top_p", "top_k", "max_turns", "max_tokens_per_turn")},
        "judge": getattr(grader, "name", described),
        "max_length": params["max_length"],
        "seed": cfg.seed,
    }
    rows, record = _samples(
        stage, settings, sft_dir, device, questions, tools, judge_fn, cfg, params["max_length"], progress
    )
    print(f"[rft] kept {record['kept']} of {record['rollouts']} rollouts ({record['right_share']:.0%} right)")
    charged = 0.0 if cfg.use_vllm else record["sampling_flops"]  # counted as the IGPO arm counts its rollouts
    figures = dict(
        arm="rejection sampling (RFT)",
        rft_rollouts=rollouts,  # as many rollouts as RL trained on, or as it rolled out
        sampling={k: v for k, v in record.items() if k != "settings"},
        sampling_flops=record["sampling_flops"],
        judge=described,
        launched_from=launched_from,
    )
    heldout_questions, eval_settings = heldout_eval(
        stage, sft_dir, heldout_qa, world_dir, heldout_n, cfg.seed, device, heldout_split
    )
    kw = dict(sft_dir=sft_dir, world_dir=world_dir, tools=tools, judge=grader)
    if not rows:  # nothing to fine-tune on: the arm is the SFT model, and says so
        why = (
            f"none of the {record['rollouts']} sampled trajectories was judged right ({record['dropped']}): "
            "nothing to fine-tune on, the arm is the SFT model"
        )
        print(f"[rft] {why}", flush=True)
        if heldout_questions is not None:  # its answers are the SFT model's: pairs and studies keep the arm
            scored = heldout_scores(stage, "sft", heldout_questions, eval_settings, **kw)
            with atomic_path(stage.path("heldout_rl.parquet")) as tmp:
                scored.to_parquet(tmp)
        return stage.finish(
            **figures, budget_flops=budget_flops, steps=0, train_flops=charged, note=why, model_dir=str(sft_dir)
        )
    tuned = continue_sft(stage, params, rows, budget_flops, spent=charged, same_data=False, name="rft")
    comparison: dict = {}
    if heldout_questions is not None:  # the same greedy held-out evaluation as the RL arms'
        comparison = ho.compare(
            heldout_scores(stage, "sft", heldout_questions, eval_settings, **kw),
            heldout_scores(stage, "rl", heldout_questions, eval_settings, **kw),
        )
    print(
        f"[rft] {tuned['steps']} fine-tuning steps, {tuned['flops_vs_budget']}x the RL arm's FLOPs; model: "
        f"{tuned['model_dir']}",
        flush=True,
    )
    return stage.finish(**figures, **tuned, heldout_comparison=comparison)
