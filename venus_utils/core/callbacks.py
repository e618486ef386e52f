"""Trainer callbacks that the training stages (SFT and RL) share.

They are made by functions so that importing this module stays light: ``transformers`` loads when a callback is made.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from . import progress
from .distributed import any_process

if TYPE_CHECKING:
    from transformers import TrainerCallback


def time_limit(minutes: float | None) -> TrainerCallback:
    """A trainer callback that stops training (and saves) once ``minutes`` of wall time have passed since it was
    made (``None``: no limit); in a distributed run all processes stop at the same step
    (:func:`venus_utils.core.distributed.any_process`).  The CPU profiles use it to keep the SFT and RL stages within
    their time budgets."""
    from transformers import TrainerCallback

    class TimeLimit(TrainerCallback):
        def __init__(self):
            self.limit_s, self.t0 = (minutes * 60 if minutes else None), time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            if self.limit_s is not None and any_process(time.perf_counter() - self.t0 > self.limit_s):
                control.should_training_stop = True
                control.should_save = True
            return control

    return TimeLimit()


def step_progress(what: str) -> TrainerCallback:
    """A trainer callback that reports each optimizer step as ``what`` (:func:`venus_utils.core.progress.report`:
    beside the stage on the pipeline's bar; nothing outside the pipeline), from the main process only."""
    from transformers import TrainerCallback

    class StepProgress(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.is_world_process_zero:
                progress.report(what, state.global_step, state.max_steps or None)
            return control

    return StepProgress()


def eval_loss_stop(target: float | None) -> TrainerCallback:
    """A trainer callback that stops training (and saves that step's checkpoint) at the first validation loss at or
    below ``target`` (``None``: never), so that a step budget becomes a cap and the validation loss sets the length
    of the run.  Only evaluations during training count (not the one after it).  On cpu-hard every SFT run that
    learned to copy names ended at <= 0.002 and every one that did not at >= 0.044: a run stopped at 0.01 has
    learned the skill RL builds on, and one that never gets there runs to the cap and says so."""
    from transformers import TrainerCallback

    class EvalLossStop(TrainerCallback):
        def __init__(self):
            self.training = False

        def on_train_begin(self, args, state, control, **kwargs):
            self.training = True

        def on_train_end(self, args, state, control, **kwargs):
            self.training = False

        def on_evaluate(self, args, state, control, metrics=None, **kwargs):
            loss = (metrics or {}).get("eval_loss")
            reached = target is not None and self.training and loss is not None and loss <= target
            if any_process(reached):
                print(f"[train] validation loss {loss} <= {target} at step {state.global_step}: stopping")
                control.should_training_stop = True
                control.should_save = True
            return control

    return EvalLossStop()


def resumed_as_configured(lr_factor: Callable[[int], float] | None = None) -> TrainerCallback:
    """A trainer callback for a run resumed from a checkpoint, at the start of training (after the Trainer loaded the
    checkpoint's state): the logging, evaluation and save intervals are this run's (the Trainer keeps the
    checkpoint's, so a control continuing an SFT run that logged every 25 steps logged its own steps in 25s), and with
    ``lr_factor`` (a schedule of the run's own, :func:`venus_utils.sft.continuation.lr_factor`) the first step trains
    at the rate that schedule gives there, not at the rate the checkpoint's optimizer was left with (the stopped
    run's own schedule: its floor, when that run had finished)."""
    from transformers import TrainerCallback

    class ResumedAsConfigured(TrainerCallback):
        def on_train_begin(self, args, state, control, optimizer=None, lr_scheduler=None, **kwargs):
            for name in ("logging_steps", "eval_steps", "save_steps"):
                value = getattr(args, name, None)
                if isinstance(value, (int, float)) and value >= 1:
                    setattr(state, name, int(value))
            if lr_factor is not None and optimizer is not None and hasattr(lr_scheduler, "base_lrs"):
                rates = [base * lr_factor(lr_scheduler.last_epoch) for base in lr_scheduler.base_lrs]
                for group, rate in zip(optimizer.param_groups, rates):
                    group["lr"] = rate
                if hasattr(lr_scheduler, "_last_lr"):  # what get_last_lr() (the logged rate) returns
                    lr_scheduler._last_lr = rates
            return control

    return ResumedAsConfigured()
