"""The RL stage step by step: what notebook 04 and ``python -m venus_utils.rl train`` both run, in this order.

The notebook runs the steps with its teaching in between (the worked IG example, the custom reward cells, the
plots); the command line (:mod:`venus_utils.rl.__main__`) runs them back to back, under any launcher.

1. :func:`stage_inputs`: the SFT model, the offline world (None: the web tools) and the RL question file, checked
   before any model loads; then :func:`~.policy.load_policy` and :func:`~.training_rows.qa_rows`;
2. :func:`resume`: checkpoints made with other :func:`resume_settings` are refused, the newest complete one resumed;
3. :func:`heldout_eval`: the run's held-out questions and the SFT model's protocol (notebook 03's);
4. :func:`filter_questions`: with ``filter_samples``, only the questions the SFT policy does not always solve;
5. :func:`train_policy`: :class:`~.igpo_trainer.IGPOTrainer` trained to the end, then :func:`save_model`;
6. :func:`heldout_scores` (the SFT and the RL model) and :func:`venus_utils.eval.heldout.compare`: both models on the
   held-out questions, greedy, compared question by question;
7. :func:`summary_figures`: the key figures of the stage's ``summary.json``.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd

from ..core.callbacks import step_progress, time_limit
from ..core.checkpoints import ResumePoint, local_model_digest, prepare_resume, train_to_end
from ..core.distributed import is_main_process, world_size
from ..core.paths import RL_STAGE, SETUP_STAGE, SFT_STAGE, user_path
from ..core.perf import FlopCounter
from ..core.stage import Stage
from ..eval import heldout as ho
from . import run_report
from .config import IGPOConfig
from .policy import save_policy
from .rewards import Episode, reward_fingerprint
from .rollout import make_agent_rollout, unsolved_questions
from .step_batch import TurnAdvantages
from .training_rows import rl_question_file

STAGE = RL_STAGE

#: IGPOConfig fields that may change when a run is resumed (its step limits and rollout engine)
#: the reward and advantage functions a run can be given (notebook 04's cells); their fingerprints define the run
REWARD_FUNCTIONS = ("turn_reward", "outcome_reward", "turn_advantages")
RESUMABLE_FIELDS = {
    "max_steps",
    "gradient_checkpointing",
    "save_steps",
    "save_total_limit",
    "use_vllm",
    "vllm_mode",
    "vllm_server_base_url",
    "vllm_server_sync_weights",
    "vllm_tensor_parallel_size",
    "vllm_gpu_memory_utilization",
}


class StageInputs(NamedTuple):
    sft_dir: Path  # 03_sft_unsloth/model, or the stage's sft_model: the policy RL starts from
    world_dir: Path | None  # 00_setup/world (the offline tools and questions); None: the web tools
    train_file: Path  # the RL questions (:func:`~.questions.rl_question_file`)


def sft_model_dir(run_dir: str | Path, sft_model: str | Path | None = None) -> Path:
    """The SFT model RL starts from: ``sft_model`` (a folder outside the run, resolved as the user wrote it), else the
    run's own ``03_sft_unsloth/model``."""
    return user_path(sft_model).resolve() if sft_model else Path(run_dir) / SFT_STAGE / "model"


def stage_inputs(
    stage: Stage, offline: bool, train_qa: str | Path | None, sft_model: str | Path | None = None
) -> StageInputs:
    """Where the stage's inputs are: ``(sft_dir, world_dir, train_file)``; ``sft_model``: an SFT model folder to start
    from instead of the run's own (a shipped one, ``models/``: the run then needs no stages 01-03).  A missing question
    file (the web tools and no ``train_qa``), model folder or upstream stage fails here, before any model loads."""
    world_dir = stage.upstream(SETUP_STAGE) / "world" if offline else None
    train_file = rl_question_file(train_qa, world_dir)
    if sft_model is None:
        return StageInputs(stage.upstream(SFT_STAGE) / "model", world_dir, train_file)
    sft_dir = sft_model_dir(stage.run_dir, sft_model)
    if not (sft_dir / "config.json").is_file():
        raise FileNotFoundError(f"sft_model names {sft_model}, which is not a model folder (no {sft_dir}/config.json)")
    return StageInputs(sft_dir, world_dir, train_file)


def resume_settings(
    cfg: IGPOConfig,
    sft_model: str | Path,
    question_pool: Sequence[dict],
    filter_samples: int = 0,
    rewards: dict[str, Callable] | None = None,
) -> dict[str, Any]:
    """What defines an RL run, for :func:`venus_utils.core.checkpoints.guard_resume`: the IGPO config without
    :data:`RESUMABLE_FIELDS` (``search_cost`` included), the SFT model (its path and its weights' digest: an SFT
    model retrained at the same path is another run), the question pool (before any filter: the
    filter samples), the filter setting and the fingerprints (:func:`~.rewards.reward_fingerprint`) of
    ``turn_reward`` / ``outcome_reward`` / ``turn_advantages`` (notebook 04's cells), so an edited cell is never
    trained as a resume of the old rules nor restored as the old model."""
    unknown = sorted(set(rewards or {}) - set(REWARD_FUNCTIONS))
    if unknown:
        raise ValueError(f"unknown reward functions {unknown}: a run takes {', '.join(REWARD_FUNCTIONS)}")
    pool = hashlib.sha256("\n".join(str(r["id"]) for r in question_pool).encode()).hexdigest()[:16]
    return {
        **{k: v for k, v in cfg.to_dict().items() if k not in RESUMABLE_FIELDS},
        "sft_model": str(sft_model),
        "sft_model_digest": local_model_digest(sft_model),
        "questions": f"{len(question_pool)} questions, sha256 {pool}",
        "filter_samples": filter_samples,
        **{name: reward_fingerprint((rewards or {}).get(name)) for name in REWARD_FUNCTIONS},
    }


def finish_limits(cfg: IGPOConfig, max_time_minutes: float | None) -> dict[str, Any]:
    """The limits under which an RL run ends (a rerun under the same limits after it ended trains nothing)."""
    return {"max_steps": cfg.max_steps, "max_time_minutes": max_time_minutes}


def resume(
    stage: Stage,
    cfg: IGPOConfig,
    sft_dir: str | Path,
    question_pool: Sequence[dict],
    *,
    filter_samples: int = 0,
    max_time_minutes: float | None = None,
    rewards: dict[str, Callable] | None = None,
) -> ResumePoint:
    """Where training starts in the stage folder: checkpoints of an earlier run with other :func:`resume_settings`
    are refused, not silently continued; a half-written one is skipped, a damaged one set aside
    (:func:`venus_utils.core.checkpoints.prepare_resume`).  The stage folder is held first (:meth:`Stage.hold`): a
    second run of the stage is refused before anything in it is deleted."""
    stage.hold()
    settings = resume_settings(cfg, sft_dir, question_pool, filter_samples, rewards)
    return prepare_resume(
        stage.dir,
        settings,
        root=stage.run_dir,
        max_steps=cfg.max_steps,
        limits=finish_limits(cfg, max_time_minutes),
        main_process=is_main_process(),
        defaults={
            **{f.name: f.default for f in fields(IGPOConfig) if f.name not in RESUMABLE_FIELDS},
            **dict.fromkeys(REWARD_FUNCTIONS),  # a run made before fingerprints: none recorded
            "sft_model_digest": settings["sft_model_digest"],  # one made before digests: its path decided
        },
    )  # a run made before a setting existed was made with its default


def filter_questions(
    stage: Stage, model, tokenizer, rows: Sequence[dict], tools, judge: Callable, cfg: IGPOConfig, samples: int = 0
) -> tuple[list[dict], dict[str, float]]:
    """``(rows, counts)``: with ``samples`` > 0 (``filter_samples``) the questions the SFT policy does not solve in
    every one of ``samples`` seeded rollouts (:func:`~.rollout.unsolved_questions`: a group it always solves carries
    no outcome signal), else all of them.  ``counts``: candidates and kept (and, filtered, how often solved and the
    filter's model FLOPs, ``flops``)."""
    if not samples:
        return list(rows), {"candidates": len(rows), "kept": len(rows)}
    from transformers import set_seed

    set_seed(cfg.seed)  # the filter samples: seeded, so every arm of a comparison keeps the same questions
    # the filter's rollouts are RL's compute too: the cheaper arms are matched to them (budget_flops)
    counter = FlopCounter(model)
    try:
        with stage.timed("filter"):
            kept, counts = unsolved_questions(
                model, tokenizer, rows, tools, judge, cfg, samples=samples, processes=world_size()
            )
    finally:
        counter.close()
    counts["flops"] = counter.flops
    print(f"[rl] questions the SFT policy does not always solve: {counts}")
    return kept, counts


def train_policy(
    stage: Stage,
    model,
    tokenizer,
    rows: Sequence[dict],
    cfg: IGPOConfig,
    tools,
    judge: Callable,
    point: ResumePoint,
    *,
    device: str = "cpu",
    max_time_minutes: float | None = None,
    turn_reward: Callable[[Episode], list] | None = None,
    outcome_reward: Callable[[Episode], float] | None = None,
    turn_advantages: TurnAdvantages | None = None,
):
    """:class:`~.igpo_trainer.IGPOTrainer` on ``rows``, rolling out with the agent loop and ``tools`` and scoring
    with ``judge``, trained from ``point`` to the end (:func:`venus_utils.core.checkpoints.train_to_end`: a finished
    run rerun trains nothing, a stopped one resumes) within ``max_time_minutes``; returns the trainer. ``turn_reward``
    / ``outcome_reward``: the reward functions (None: ``cfg.reward_mode``'s, :func:`~.rewards.reward_functions`);
    ``turn_advantages``: an advantage rule over the step's batch (None: the library's, ``cfg.norm_mode``)."""
    from datasets import Dataset

    from .igpo_trainer import IGPOTrainer, grpo_args

    trainer = IGPOTrainer(
        model,
        tokenizer,
        Dataset.from_list(list(rows)),
        cfg,
        grpo_args(cfg, stage.dir, device=device, world_size=world_size()),
        rollout_fn=make_agent_rollout(tools),
        judge=judge,
        turn_reward=turn_reward,
        outcome_reward=outcome_reward,
        turn_advantages=turn_advantages,
        resume_step=point.step,
        callbacks=[time_limit(max_time_minutes), step_progress(f"RL steps ({cfg.reward_mode})")],
    )
    with stage.timed("train"):
        train_to_end(trainer, point, stage.dir, cfg.max_steps, finish_limits(cfg, max_time_minutes))
    return trainer


def save_model(stage: Stage, trainer, tokenizer, sft_dir: str | Path) -> Path:
    """The trained policy in ``<stage>/model`` (:func:`~.policy.save_policy`, by the main process), which the
    later notebooks and the agent read; returns that folder."""
    model_dir = stage.path("model")
    if trainer.accelerator.is_main_process:
        save_policy(trainer, tokenizer, model_dir, base_model=sft_dir, profile=stage.profile)
    trainer.accelerator.wait_for_everyone()
    return model_dir


def heldout_eval(
    stage: Stage,
    sft_dir: str | Path,
    heldout_qa: str | Path | None,
    world_dir: str | Path | None,
    n: int | None,
    seed: int = 0,
    device: str = "cpu",
    split: str = "test",
):
    """``(questions, settings)`` of RL's held-out evaluation: the run's held-out set (drawn once from ``heldout_qa``,
    else the world's ``split``: ``test``, the set notebook 03 scored, or ``val``, for choosing settings) and the SFT
    model's own protocol (its ``venus_agent.json``), so SFT and RL are compared on the same questions, greedy, and
    notebook 03's SFT results are reused where they match.  ``(None, None)`` when ``n`` is 0 or there is no question
    source (no world, no ``heldout_qa``)."""
    source = heldout_qa or world_dir
    if not n or source is None:
        return None, None
    questions = ho.heldout_questions(stage.run_dir, source, n, seed, split)
    return questions, ho.EvalSettings.for_model(sft_dir, device=device)


def heldout_scores(
    stage: Stage,
    model: str,
    questions: pd.DataFrame,
    settings: ho.EvalSettings,
    *,
    sft_dir: str | Path,
    world_dir: str | Path | None = None,
    tools=None,
    judge=None,
) -> pd.DataFrame:
    """Greedy held-out results of the SFT model (``model="sft"``: ``heldout_sft.parquet``, notebook 03's reused when
    they match) or of this stage's RL model (``"rl"``: ``<stage>/model``, ``heldout_rl.parquet``), both with the SFT
    model's protocol."""
    if model not in ("sft", "rl"):
        raise ValueError(f"model must be 'sft' or 'rl', got {model!r}")
    with stage.timed(f"heldout_{model}"):
        return ho.evaluate_model(
            sft_dir if model == "sft" else stage.path("model"),
            questions,
            stage.path(f"heldout_{model}.parquet"),
            settings,
            world_dir=world_dir,
            tools=tools,
            judge=judge,
            reuse_from=stage.run_dir / ho.SCORED["SFT"] if model == "sft" else None,
        )


def logged_values(log: Sequence[dict], key: str) -> list[float]:
    """The finite values of ``key`` in a trainer's log history, in order."""
    return [float(r[key]) for r in log if r.get(key) is not None and not math.isnan(float(r[key]))]


def train_flops(history: list[dict[str, Any]]) -> float | None:
    """The model FLOPs an RL run counted (the ``flops`` of every logged step: a trainer's ``state.log_history`` or
    ``metrics.jsonl``'s rows); None when it counted none (runs made before the count existed)."""
    total = sum(float(r["flops"]) for r in history if r.get("flops") is not None and math.isfinite(float(r["flops"])))
    return total or None


def budget_flops(history: list[dict[str, Any]], questions: dict[str, Any] | None = None) -> float | None:
    """The model FLOPs the cheaper arms (the control, rejection sampling) are matched to: the RL run's training
    (:func:`train_flops` of its log) and the rollouts of its question filter (``questions``: the counts of
    :func:`filter_questions`, the summary's ``rl_questions``); None when the run counted no training FLOPs."""
    trained = train_flops(history)
    return None if trained is None else trained + float((questions or {}).get("flops") or 0.0)


def summary_figures(
    trainer,
    cfg: IGPOConfig,
    point: ResumePoint,
    *,
    sft_dir: str | Path,
    train_file: str | Path,
    questions: dict[str, int],
    judge: str,
    comparison: dict[str, Any],
) -> dict[str, Any]:
    """The stage's key figures for ``summary.json``: the training from the trainer's log (steps, last loss and
    reward, mean IG, last malformed-turn rate, mean share of trained and of rolled-out groups with an outcome signal,
    groups rolled out in all), what it ran on (SFT
    model, question file, ``questions`` counts of :func:`filter_questions`, ``judge``'s description, resume point,
    processes, config) and the held-out ``comparison`` of :func:`venus_utils.eval.heldout.compare` ({} without
    held-out questions: its figures are None)."""
    log = trainer.state.log_history
    losses, rewards, penalties = (
        logged_values(log, "loss"),
        logged_values(log, "reward"),
        logged_values(log, "penalty_rate"),
    )
    ig, signal = logged_values(log, "ig_mean"), logged_values(log, "groups_with_signal")
    identical, entropy = logged_values(log, "groups_identical"), logged_values(log, "entropy")
    sampled, sampled_signal = logged_values(log, "groups_sampled"), logged_values(log, "sampled_groups_with_signal")
    phases = run_report.phase_table(pd.DataFrame(log))
    return dict(
        steps=int(trainer.state.global_step),
        loss_last=losses[-1] if losses else None,
        final_reward=rewards[-1] if rewards else None,
        mean_ig=sum(ig) / len(ig) if ig else None,
        penalty_rate=penalties[-1] if penalties else None,
        groups_with_signal=sum(signal) / len(signal) if signal else None,
        groups_identical=sum(identical) / len(identical) if identical else None,
        entropy_mean=sum(entropy) / len(entropy) if entropy else None,
        sampled_groups_with_signal=sum(sampled_signal) / len(sampled_signal) if sampled_signal else None,
        groups_sampled=int(sum(sampled)) if sampled else None,
        seconds_per_step={r.phase: round(r.seconds_per_step, 3) for r in phases.itertuples()},
        train_flops=train_flops(log),  # model FLOPs of training (perf.FlopCounter), all steps
        reward_mode=cfg.reward_mode,
        sft_model=str(sft_dir),
        sft_model_digest=local_model_digest(sft_dir),  # which SFT model it started from (rl arms checks it on reuse)
        rl_question_file=str(train_file),
        rl_questions=questions,
        judge=judge,
        resumed_from=point.checkpoint,
        processes=world_size(),
        config=cfg.to_dict(),
        heldout_accuracy_sft=comparison.get("accuracy_before"),
        heldout_accuracy_rl=comparison.get("accuracy_after"),
        heldout_n=comparison.get("n"),
        mcnemar_p=comparison.get("mcnemar_p"),
        heldout_comparison=comparison,
    )
