"""Continuing a stopped SFT run for a given compute: what the control arm (more SFT) and rejection sampling train.

"RL beats the SFT model it started from" leaves a reviewer's question open: SFT stops at the validation-loss line
with its learning rate still at about two thirds of the peak, and the RL arm then trains further. Would the same
compute spent on more SFT do as well? :func:`continue_sft` trains that control:

- from the stopped run's last checkpoint: its weights, AdamW moments and place in the data (the trainer skips the
  batches it has seen, so the control reads the batches the run would have read next);
- on the same SFT data (the resampled trajectories of ``02_turn_aware_resampling``, tokenized the same way);
- on a schedule of its own (:func:`lr_factor`): from the learning rate the run stopped at, cosine down to the run's
  floor (``min_lr_ratio`` x the peak) over the control's steps, so it ends annealed as a finished SFT run would;
- for the compute of the RL arm, in model FLOPs (:class:`venus_utils.core.perf.FlopCounter`: 2 per weight per token
  position, x3 with the backward pass, attention scores not counted; the RL arm counts its rollouts, information
  gain, reference and update the same way): ``steps = RL FLOPs / FLOPs of one SFT step``, one step's FLOPs from the
  data batched as the trainer batches it (:func:`step_flops`). The control counts its own FLOPs as it trains;
  ``summary.json`` gives both (their ratio is the match).

No validation loss is computed during the control (its compute is training compute only) and it never stops early.
"""

from __future__ import annotations

import json
import math
import random
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..core.checkpoints import FINISHED, TRAINER_STATE, finished_checkpoint, write_train_clock
from ..core.paths import RESAMPLING_STAGE, SETUP_STAGE, SFT_STAGE
from ..core.perf import forward_flops_parts
from .batching import LengthGroupedSampler, round_up
from .config import SFTConfig
from .data import examples_from_parquet
from .schedule import lr_factor as cosine
from .trainer import prepare_engine, train_sft

#: what the control's own checkpoint folder holds beside the copied checkpoint: the stopped run's resume record, so
#: that the resume guard compares the control's settings with the run it continues
RESUME_RECORD = "resume_settings.json"


def stopped_checkpoint(sft_dir: str | Path) -> tuple[Path, int, float]:
    """``(checkpoint folder, step, learning rate at that step)`` of a finished SFT stage's last checkpoint (the one
    its model was exported from)."""
    folder = Path(sft_dir) / "checkpoints"
    try:
        step, checkpoint = finished_checkpoint(folder)
    except FileNotFoundError as exc:
        raise FileNotFoundError(f"{folder}: no finished SFT run to continue ({FINISHED} missing)") from exc
    if not (checkpoint / TRAINER_STATE).is_file():
        raise FileNotFoundError(f"{checkpoint}: the stopped run's last checkpoint is missing (save_total_limit?)")
    state = json.loads((checkpoint / TRAINER_STATE).read_text(encoding="utf-8"))
    rates = [r["learning_rate"] for r in state.get("log_history", []) if "learning_rate" in r]
    if not rates:
        raise ValueError(f"{checkpoint}: its trainer state logged no learning rate")
    return checkpoint, step, float(rates[-1])


def lr_factor(start_step: int, steps: int, start: float, floor: float) -> Callable[[int], float]:
    """Multiple of the peak learning rate for the optimizer step ``s``: ``start`` at ``start_step``, cosine down to
    ``floor`` at ``start_step + steps`` (and ``floor`` after)."""

    def factor(step: int) -> float:  # schedule.lr_factor: the cosine from 1 down to 0 over the progress
        return floor + (start - floor) * cosine((step - start_step) / max(steps, 1))

    return factor


def step_flops(rows: Sequence[dict[str, Any]], cfg: SFTConfig, config: Any) -> float:
    """Model FLOPs of one SFT optimizer step (``cfg.global_batch_size`` rows; fewer in an epoch's last step), on
    average over the optimizer steps of an epoch of ``rows``
    (each with ``length`` and ``n_loss``) batched as the trainer batches them (``cfg.batching``: the length-grouped
    sampler's micro-batches, padded to the longest row and rounded up to ``pad_to_multiple_of``): every position
    through the decoder layers, the output layer on the trained positions only (the loss computes logits there,
    rounded up the same way), x3 for the backward pass: :class:`~venus_utils.core.perf.FlopCounter`'s rule."""
    if not rows:
        raise ValueError("no SFT rows")
    layer, head = forward_flops_parts(config)
    layers = config.num_hidden_layers * layer
    lengths = [int(r["length"]) for r in rows]
    micro = max(1, cfg.micro_batch_size)
    if cfg.batching == "grouped":
        order = list(LengthGroupedSampler(lengths, micro, seed=cfg.seed))
    else:
        order = list(range(len(rows)))
        random.Random(cfg.seed).shuffle(order)
    positions = trained = 0
    for start in range(0, len(order), micro):
        batch = [lengths[i] for i in order[start : start + micro]]
        if cfg.batching == "padding_free":
            positions += round_up(sum(batch), cfg.pad_to_multiple_of)
        elif cfg.batching == "max_length":
            positions += cfg.max_length * len(batch)
        else:
            positions += round_up(max(batch), cfg.pad_to_multiple_of) * len(batch)
        # the output layer's rows: the batch's trained positions, rounded up as masked_lm_loss rounds them
        trained += round_up(sum(int(rows[i]["n_loss"]) for i in order[start : start + micro]), cfg.pad_to_multiple_of)
    # one epoch's FLOPs over the optimizer steps it makes: the last step of an epoch takes the micro-batches left,
    # so a set smaller than a step (a few kept samples of rejection sampling) trains on all of it at every step
    per_step = -(-len(order) // micro)  # micro-batches in an epoch
    accumulation = max(1, cfg.global_batch_size // micro)
    steps = -(-per_step // accumulation)
    return 3.0 * (layers * positions + head * trained) / steps


def control_steps(budget_flops: float, per_step: float) -> int:
    """Optimizer steps of the control: the RL arm's FLOPs over one SFT step's (at least 1)."""
    if not budget_flops or budget_flops <= 0 or not math.isfinite(budget_flops):
        raise ValueError(f"the RL arm's FLOPs must be a positive number to match, got {budget_flops!r}")
    return max(1, round(budget_flops / per_step))


def seed_checkpoints(sft_dir: str | Path, out_dir: str | Path, record: bool = True) -> tuple[int, float]:
    """Copy the stopped SFT run's last checkpoint and (``record``) its resume record into ``out_dir/checkpoints``
    (once: an arm that has checkpoints of its own resumes from them), its training clock set to zero (the arm's
    ``train_wall_s`` is its own training, not SFT's).  Without the record (an arm on other data: rejection sampling)
    the arm's first call writes its own.  Returns ``(step, learning rate)`` it stopped at."""
    checkpoint, step, rate = stopped_checkpoint(sft_dir)
    target = Path(out_dir) / "checkpoints"
    if not any(target.glob("checkpoint-*")):
        target.mkdir(parents=True, exist_ok=True)
        partial = target / f".{checkpoint.name}.partial"
        shutil.copytree(checkpoint, partial, dirs_exist_ok=True)
        write_train_clock(partial, 0.0)
        partial.rename(target / checkpoint.name)
        if record:
            shutil.copy2(checkpoint.parent / RESUME_RECORD, target / RESUME_RECORD)
    return step, rate


def continue_sft(
    stage: Any,
    params: dict[str, Any],
    rows: list[dict[str, Any]],
    budget_flops: float,
    *,
    spent: float = 0.0,
    same_data: bool = True,
    name: str = "control",
) -> dict[str, Any]:
    """Continue the run's stopped SFT model into ``stage.dir`` on ``rows`` for ``budget_flops - spent`` model FLOPs
    (``spent``: what the arm already spent, e.g. rejection sampling's sampling), with the SFT stage's ``params``: from
    the stopped checkpoint (its weights and AdamW moments; ``same_data``: its resume record too, the control's data
    being the SFT data), from the learning rate it stopped at, cosine down to the floor over the steps the FLOPs buy,
    every step logged. Returns the summary's figures: the steps, the FLOPs (``spent`` included) against the budget, the
    schedule, the training loss, the model folder."""
    from transformers import AutoConfig

    engine = prepare_engine(params["engine"])  # Unsloth before transformers' models
    model_path = params["base_model"] or (stage.upstream(SETUP_STAGE) / "tiny_model")
    cfg = SFTConfig.from_params(params, engine=engine)
    per_step = step_flops(rows, cfg, AutoConfig.from_pretrained(str(model_path)))
    left = budget_flops - spent
    if left <= 0:
        raise ValueError(
            f"[{name}] {spent:.3g} of the RL arm's {budget_flops:.3g} FLOPs already spent: nothing is left for SFT "
            f"(one step: {per_step:.3g})"
        )
    steps = control_steps(left, per_step)  # at least one step
    start_step, start_rate = seed_checkpoints(stage.upstream(SFT_STAGE), stage.dir, record=same_data)
    floor = cfg.min_lr_ratio if cfg.schedule_by_time else 0.0
    start = start_rate / cfg.learning_rate
    # the limits of the continuation: a step budget, no early stop, every step logged (its FLOPs exactly)
    limits = dict(max_steps=start_step + steps, stop_at_eval_loss=None, max_time_minutes=None, logging_steps=1)
    cfg = SFTConfig.from_params(params, engine=engine, resume=True, **limits)
    print(
        f"[{name}] SFT on {len(rows)} rows from step {start_step} (learning rate {start_rate:.3g}, {start:.0%} of the "
        f"peak): {steps} steps of ~{per_step:.3g} FLOPs for the RL arm's {budget_flops:.3g} (spent {spent:.3g}), "
        f"cosine to {floor:.0%}",
        flush=True,
    )
    with stage.timed("train"):
        result = train_sft(
            cfg,
            model_path,
            rows,
            stage.dir,
            agent_settings=dict(
                system_prompt_style=params["system_prompt_style"],
                max_turns=params["eval_max_turns"],
                max_new_tokens=params["eval_max_tokens_per_turn"],
            ),
            lr_factor=lr_factor(start_step, steps, start, floor),
        )
    mine = [h for h in result.history if h.get("step", 0) > start_step]
    tuned = sum(h.get("flops", 0.0) for h in mine)
    counted = spent + tuned
    losses = [h["loss"] for h in mine if "loss" in h]
    return dict(
        continued_from=f"{SFT_STAGE}/checkpoints/checkpoint-{start_step}",
        start_step=start_step,
        steps=result.steps - start_step,
        budget_flops=budget_flops,
        finetune_flops=tuned or None,
        train_flops=counted or None,
        flops_vs_budget=round(counted / budget_flops, 3) if counted else None,
        step_flops_estimate=per_step,
        learning_rate_start=start_rate,
        learning_rate_floor=floor * cfg.learning_rate,
        loss_first=losses[0] if losses else None,
        loss_last=losses[-1] if losses else None,
        train_wall_s=None if result.wall_s is None else round(result.wall_s, 1),
        model_dir=str(result.model_dir) if result.model_dir else None,
    )


def train_control(stage: Any, params: dict[str, Any], budget_flops: float) -> dict[str, Any]:
    """Continue the run's stopped SFT model into ``stage.dir`` (a :class:`venus_utils.core.stage.Stage` named after the
    SFT stage, its folder the control's) on the same SFT data for ``budget_flops`` model FLOPs, with the SFT stage's
    ``params`` (the profile's ``03_sft_unsloth`` values): :func:`continue_sft`."""
    from transformers import AutoTokenizer

    model_path = params["base_model"] or (stage.upstream(SETUP_STAGE) / "tiny_model")
    tokenizer = AutoTokenizer.from_pretrained(str(model_path))
    data = stage.upstream(RESAMPLING_STAGE) / "train.parquet"
    with stage.timed("tokenize"):
        rows = examples_from_parquet(data, tokenizer, max_length=params["max_length"]).rows
    return {"arm": "more SFT (control)", **continue_sft(stage, params, rows, budget_flops)}
