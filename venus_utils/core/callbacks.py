"""Trainer callbacks that the training stages (SFT and RL) share.

They are made by functions so that importing this module stays light: ``transformers`` loads when a callback is made.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

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
