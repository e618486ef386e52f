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
  gain, reference and update the same way): as many steps as come nearest the RL FLOPs, each step costed on the
  batches the trainer will read there, batched as it batches them (:func:`planned_steps`; with grouped batching the
  data order is known, so the count lands within half a step of the budget). The control counts its own FLOPs as it
  trains; ``summary.json`` gives both (their ratio is the match).

No validation loss is computed during the control (its compute is training compute only) and it never stops early.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import shutil
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ..core.checkpoints import FINISHED, TRAINER_STATE, finished_checkpoint, write_train_clock
from ..core.distributed import world_size
from ..core.paths import RESAMPLING_STAGE, SETUP_STAGE, SFT_STAGE
from ..core.perf import forward_flops_parts
from .batching import LengthGroupedSampler, batch_width, round_up
from .config import SFTConfig
from .data import examples_from_parquet
from .schedule import lr_factor as cosine
from .trainer import batch_split, prepare_engine, train_sft

#: what the control's own checkpoint folder holds beside the copied checkpoint: the stopped run's resume record, so
#: that the resume guard compares the control's settings with the run it continues
RESUME_RECORD = "resume_settings.json"
#: :func:`planned_steps` refuses a budget that buys more optimizer steps than this (a mistyped budget, not a run)
MAX_PLANNED_STEPS = 10_000_000


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


def _micro_batches(lengths: list[int], cfg: SFTConfig, micro: int, epoch: int) -> list[list[int]]:
    """The rows of each micro-batch of ``epoch``, in the order the trainer reads them: grouped batching's
    :class:`~.batching.LengthGroupedSampler` is deterministic in (seed, epoch), as the trainer seeds it; any other
    batching draws transformers' own random order, stood in for by a seeded shuffle (its mean is what counts)."""
    if cfg.batching == "grouped":
        sampler = LengthGroupedSampler(lengths, micro, seed=cfg.seed)
        sampler.set_epoch(epoch)
        order = list(sampler)
    else:
        order = list(range(len(lengths)))
        random.Random(cfg.seed).shuffle(order)
    return [order[start : start + micro] for start in range(0, len(order), micro)]


def _micro_flops(
    rows: Sequence[dict[str, Any]], batch: list[int], cfg: SFTConfig, layers: float, head: float
) -> float:
    """Model FLOPs of one micro-batch as collated and counted: every position through the decoder layers (padded to
    the longest row, rounded up to ``pad_to_multiple_of`` as :class:`~.batching.Collator` rounds it), the output layer
    on the trained positions only (rounded up the same way, as ``masked_lm_loss`` runs it), x3 for the backward pass:
    :class:`~venus_utils.core.perf.FlopCounter`'s rule."""
    lengths = [int(rows[i]["length"]) for i in batch]
    if cfg.batching == "padding_free":
        positions = batch_width(sum(lengths), cfg.pad_to_multiple_of, cfg.max_length)
    elif cfg.batching == "max_length":
        positions = cfg.max_length * len(lengths)
    else:
        positions = batch_width(max(lengths), cfg.pad_to_multiple_of, cfg.max_length) * len(lengths)
    trained = round_up(sum(int(rows[i]["n_loss"]) for i in batch), cfg.pad_to_multiple_of)
    return 3.0 * (layers * positions + head * trained)


def _epoch_steps(rows: Sequence[dict[str, Any]], cfg: SFTConfig, config: Any, epoch: int) -> list[float]:
    """FLOPs of each optimizer step of ``epoch``: ``accumulation`` micro-batches each, the epoch's last step the
    micro-batches left (as the trainer steps)."""
    layer, head = forward_flops_parts(config)
    layers = config.num_hidden_layers * layer
    micro, accumulation = batch_split(cfg, 1)
    flops = [
        _micro_flops(rows, b, cfg, layers, head)
        for b in _micro_batches([r["length"] for r in rows], cfg, micro, epoch)
    ]
    return [sum(flops[s : s + accumulation]) for s in range(0, len(flops), accumulation)]


def step_flops(rows: Sequence[dict[str, Any]], cfg: SFTConfig, config: Any) -> float:
    """Model FLOPs of one SFT optimizer step (``cfg.global_batch_size`` rows; fewer in an epoch's last step), on
    average over the optimizer steps of an epoch of ``rows`` (each with ``length`` and ``n_loss``) batched as the
    trainer batches them (:func:`_micro_flops`). A set smaller than a step (a few kept samples of rejection sampling)
    trains on all of it at every step."""
    if not rows:
        raise ValueError("no SFT rows")
    steps = _epoch_steps(rows, cfg, config, 0)
    return sum(steps) / len(steps)


def control_steps(budget_flops: float, per_step: float) -> int:
    """Optimizer steps of ``per_step`` FLOPs each that ``budget_flops`` buys (at least 1)."""
    if not budget_flops or budget_flops <= 0 or not math.isfinite(budget_flops):
        raise ValueError(f"the RL arm's FLOPs must be a positive number to match, got {budget_flops!r}")
    return max(1, round(budget_flops / per_step))


def step_costs(rows: Sequence[dict[str, Any]], cfg: SFTConfig, config: Any, start_step: int) -> Iterator[float]:
    """Model FLOPs of each optimizer step from ``start_step`` on (endless). With grouped batching, of the very batches
    the trainer reads there: its sampler's order is deterministic in (seed, epoch), an epoch has a fixed number of
    steps, and a resumed run skips the steps of its epoch it has seen (one process: the control and rejection
    sampling run in the main one). With other batching the order is transformers' own, and under a launcher each
    process reads a shard of it, so every step costs an epoch's mean there (:func:`step_flops`)."""
    if not rows:
        raise ValueError("no SFT rows")
    epoch, costs = 0, _epoch_steps(rows, cfg, config, 0)
    if cfg.batching != "grouped" or world_size() > 1:  # under a launcher each process reads its shard of the order
        yield from itertools.repeat(sum(costs) / len(costs))
    step = start_step
    while True:
        at, k = divmod(step, len(costs))
        if at != epoch:
            epoch, costs = at, _epoch_steps(rows, cfg, config, at)
        yield costs[k]
        step += 1


def planned_steps(
    rows: Sequence[dict[str, Any]], cfg: SFTConfig, config: Any, start_step: int, budget_flops: float
) -> tuple[int, float]:
    """``(steps, their FLOPs)``: how many optimizer steps after ``start_step`` spend ``budget_flops``, the count whose
    FLOPs (:func:`step_costs`) come nearest, at least one. With grouped batching the arm's counted FLOPs then land
    within half a step of the budget."""
    estimate = control_steps(budget_flops, step_flops(rows, cfg, config))  # refuses a budget that is not a number
    if estimate > MAX_PLANNED_STEPS:
        raise ValueError(f"{budget_flops:.3g} FLOPs buy ~{estimate:,} SFT steps: more than {MAX_PLANNED_STEPS:,}")
    spent, steps = 0.0, 0
    for cost in step_costs(rows, cfg, config, start_step):
        if steps and spent + cost / 2 > budget_flops:  # the next step would overshoot by more than it falls short
            break
        spent, steps = spent + cost, steps + 1
    return steps, spent


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
    model_config = AutoConfig.from_pretrained(str(model_path))
    per_step = step_flops(rows, cfg, model_config)
    left = budget_flops - spent
    if left <= 0:
        raise ValueError(
            f"[{name}] {spent:.3g} of the RL arm's {budget_flops:.3g} FLOPs already spent: nothing is left for SFT "
            f"(one step: {per_step:.3g})"
        )
    start_step, start_rate = seed_checkpoints(stage.upstream(SFT_STAGE), stage.dir, record=same_data)
    steps, planned = planned_steps(rows, cfg, model_config, start_step, left)  # at least one step
    floor = cfg.min_lr_ratio if cfg.schedule_by_time else 0.0
    start = start_rate / cfg.learning_rate
    # the limits of the continuation: a step budget, no early stop, every step logged (its FLOPs exactly)
    limits = dict(max_steps=start_step + steps, stop_at_eval_loss=None, max_time_minutes=None, logging_steps=1)
    cfg = SFTConfig.from_params(params, engine=engine, resume=True, **limits)
    print(
        f"[{name}] SFT on {len(rows)} rows from step {start_step} (learning rate {start_rate:.3g}, {start:.0%} of the "
        f"peak): {steps} steps, {planned:.3g} FLOPs (~{per_step:.3g} a step) for the RL arm's {budget_flops:.3g} "
        f"(spent {spent:.3g}), "
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
        planned_flops=spent + planned,
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
