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
    (:func:`venus_utils.distributed.any_process`).  The CPU profiles use it to keep the SFT and RL stages within
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
