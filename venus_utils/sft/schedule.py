"""A learning-rate schedule that follows the time budget, for runs that stop on ``max_time_minutes``.

Transformers' schedules count optimizer steps.  A CPU run that stops on a wall-time limit never reaches the end of a
step-based cosine, so it stops at a high learning rate.  Here the schedule's progress is the larger of the share of
the time budget spent and the share of ``max_steps`` done: linear warm-up over the first ``warmup`` of it, then
cosine down to ``min_ratio`` x the peak at the end.  (The tiny-agent feasibility study scheduled on wall-clock
fraction the same way.)  After a resume the time share restarts, the step share carries on.

In a distributed run every process must use the same learning rate (DDP keeps the replicas identical only if
their updates are), so the elapsed time is rank 0's, broadcast at every step.
"""

from __future__ import annotations

import math
import time

from ..core.distributed import rank0_value


def lr_factor(progress: float, warmup: float = 0.0, min_ratio: float = 0.0) -> float:
    """Multiplier of the peak learning rate at ``progress`` in [0, 1]: linear warm-up, then cosine to ``min_ratio``."""
    progress = min(max(progress, 0.0), 1.0)
    if warmup > 0 and progress < warmup:
        return progress / warmup
    rest = (progress - warmup) / max(1.0 - warmup, 1e-9)
    return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * rest))


class BudgetProgress:
    """Progress of a run in [0, 1]: max(elapsed / time budget, step / max_steps); the clock starts on creation.

    The elapsed time is rank 0's in a distributed run (:func:`venus_utils.core.distributed.rank0_value`), so all
    processes agree.
    """

    def __init__(self, minutes: float | None, max_steps: int = -1, clock=time.perf_counter, share=rank0_value):
        if not minutes and max_steps <= 0:
            raise ValueError("a budget needs max_time_minutes or max_steps")
        self.limit_s = minutes * 60 if minutes else None
        self.max_steps, self.clock, self.share, self.t0 = max_steps, clock, share, clock()

    def __call__(self, step: int) -> float:
        shares = [step / self.max_steps] if self.max_steps > 0 else []
        if self.limit_s:
            shares.append(self.share(self.clock() - self.t0) / self.limit_s)
        return min(1.0, max(shares))


def budget_scheduler(optimizer, minutes: float | None, max_steps: int, warmup: float, min_ratio: float = 0.0):
    """A ``LambdaLR`` over :class:`BudgetProgress` (``warmup``: share of the budget, as ``warmup_ratio``)."""
    from torch.optim.lr_scheduler import LambdaLR

    progress = BudgetProgress(minutes, max_steps)
    return LambdaLR(optimizer, lambda step: lr_factor(progress(step), warmup, min_ratio))
