"""The key figures of the SFT stage's ``summary.json``, the same whether notebook 03 or ``python -m venus_utils.sft
train`` trained the model (each adds what only it measures: the notebook its agent runs before and after, the
command line the command it was launched from)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core.distributed import world_size
from .data import ExampleSet
from .plateau import Plateau, plateau_summary
from .trainer import SFTResult


def summary_figures(
    result: SFTResult,
    train_set: ExampleSet,
    stage_dir: str | Path,
    plateau: Plateau | None,
    processes: int | None = None,
) -> dict[str, Any]:
    """The training's figures from ``result`` (:meth:`SFTResult.summary`), the rows it trained on
    (``train_set.stats()``), the ``processes`` it ran on (default: this launch's; notebook 03 names the processes its
    launcher ran, which have ended by then) and, where the run trained to its plateau (``plateau``), the checkpoints'
    validation accuracies it stopped on (:func:`~.plateau.plateau_summary`)."""
    s = result.summary()
    return dict(
        engine=result.engine,
        steps=s["steps"],
        loss_first=s["loss_first"],
        loss_last=s["loss_last"],
        eval_loss_last=s["eval_loss_last"],
        tokens_per_s=s["tokens_per_s"],
        train_wall_s=s["wall_s"],  # seconds spent training, across resumed calls (timings_s: this call's)
        train_flops=s["train_flops"],  # model FLOPs of the logged steps (perf.FlopCounter)
        train_rows=train_set.stats(),
        model_dir=s["model_dir"],
        adapter_dir=s["adapter_dir"],
        resumed_from=s["resumed_from"],
        processes=processes or world_size(),
        plateau=plateau_summary(stage_dir) if plateau is not None else None,
    )
