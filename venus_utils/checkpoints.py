"""Training checkpoints that a kill cannot corrupt, and resumes that never train past the end.

The SFT and RL stages save ``checkpoint-<step>/`` folders with the Hugging Face Trainer and continue from the newest
one when run again.  Two things can go wrong with the Trainer's own behaviour, and this module handles both:

- **A kill in the middle of a save** (a 4B save takes minutes) leaves a ``checkpoint-N`` folder with only some of its
  files, and the Trainer then refuses to resume from it.  :class:`AtomicCheckpoints` (a mixin for both trainers)
  writes each checkpoint under ``.saving/`` and renames it into place once every file is written, so a
  ``checkpoint-N`` folder is always complete.  :func:`discard_incomplete` removes what an interrupted save (or an
  older version of this code) left behind, saying what it removed, before a resume picks the newest complete one.
- **Rerunning a finished run** made the Trainer train one step past ``max_steps`` (it enters the epoch loop before
  checking the step count).  :func:`resume_point` says when the newest checkpoint already finished the run (its step
  reached ``max_steps``, or :func:`mark_finished` recorded a run that ended by its time or epoch limit with the same
  limits), so the stage skips training and says so.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .io import read_json, write_json

PREFIX = "checkpoint-"
STAGING = ".saving"
FINISHED = "finished.json"
TRAINER_STATE = "trainer_state.json"  # the Trainer writes it after the weights, optimizer and RNG states
RESUME_SETTINGS = "resume_settings.json"


def is_complete(path: str | Path) -> bool:
    """Whether ``path`` is a whole checkpoint: its trainer state (written last) is there and reads as JSON."""
    try:
        state = json.loads((Path(path) / TRAINER_STATE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(state, dict) and "global_step" in state


def checkpoints(folder: str | Path, complete_only: bool = True) -> list[tuple[int, Path]]:
    """``(step, path)`` of the ``checkpoint-<step>`` folders in ``folder``, oldest first (complete ones only unless
    ``complete_only`` is false)."""
    found = [(p.name[len(PREFIX) :], p) for p in Path(folder).glob(f"{PREFIX}*") if p.is_dir()]
    out = sorted((int(step), p) for step, p in found if step.isdigit())
    return [(s, p) for s, p in out if is_complete(p)] if complete_only else out


def discard_incomplete(folder: str | Path, log: Callable[[str], Any] = print) -> list[Path]:
    """Remove the leftovers of interrupted saves in ``folder`` (the ``.saving`` staging area and any
    ``checkpoint-N`` without a readable trainer state), reporting each; returns what was removed."""
    folder = Path(folder)
    removed = []
    staging = folder / STAGING
    if staging.exists():
        shutil.rmtree(staging, ignore_errors=True)
        removed.append(staging)
        log(f"[resume] removed {staging}: a save that was interrupted before it completed")
    for _step, path in checkpoints(folder, complete_only=False):
        if not is_complete(path):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
            log(
                f"[resume] skipped and removed {path}: an incomplete checkpoint (no readable {TRAINER_STATE}; "
                "the save was interrupted)"
            )
    return removed


def guard_resume(
    folder: str | Path,
    settings: dict[str, Any],
    root: str | Path | None = None,
    defaults: dict[str, Any] | None = None,
) -> None:
    """Refuse to resume checkpoints in ``folder`` that were made with other ``settings``.

    Training stages continue from their last ``checkpoint-N`` when run again (a killed run loses nothing).  A
    rerun with changed settings (another learning rate, question pool, model...) would silently continue the old
    run instead, so the settings that define a run are stored beside the checkpoints and compared; settings that
    may change on a resume (step or time limits) must be left out of ``settings``.  Paths inside ``root`` (the run
    folder) are stored relative to it, so a run folder copied or moved elsewhere still resumes.  ``defaults``: the
    values of settings added to the code after a run was made; a stored file without such a key was made with it.
    """
    folder = Path(folder)
    wanted = _portable(_json_roundtrip(settings), root)
    path = folder / RESUME_SETTINGS
    if checkpoints(folder) and path.exists():
        before = _portable({**_json_roundtrip(defaults or {}), **read_json(path)}, root)
        changed = sorted(k for k in set(before) | set(wanted) if before.get(k) != wanted.get(k))
        if changed:
            diff = ", ".join(f"{k}: {before.get(k)!r} -> {wanted.get(k)!r}" for k in changed[:6])
            raise ValueError(
                f"{folder}: its checkpoints were made with other settings ({diff}); delete that folder "
                "to train from the start with the new settings, or restore the old ones to resume"
            )
    folder.mkdir(parents=True, exist_ok=True)
    write_json(path, wanted)


def _portable(settings: dict[str, Any], root: str | Path | None) -> dict[str, Any]:
    """``settings`` with every string that is a path inside ``root`` written relative to it (``<run>/...``)."""
    if root is None:
        return settings
    prefix = str(Path(root).resolve()) + "/"
    return {
        k: "<run>/" + v[len(prefix) :] if isinstance(v, str) and v.startswith(prefix) else v
        for k, v in settings.items()
    }


def _json_roundtrip(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as it reads back from JSON (tuples become lists, paths strings), for comparisons with a stored copy."""
    return json.loads(json.dumps(obj, default=str))


@dataclass
class ResumePoint:
    """Where a training stage starts: ``checkpoint`` (None: from the start), its ``step``, and whether that
    checkpoint already ``finished`` the run (then there is nothing to train)."""

    checkpoint: str | None = None
    step: int | None = None
    finished: bool = False

    def describe(self, max_steps: int) -> str:
        if self.checkpoint is None:
            return "[resume] no checkpoint: training from the start"
        if self.finished:
            return (
                f"[resume] {self.checkpoint} already finished this run (step {self.step}, max_steps {max_steps}): "
                "nothing to train; delete the stage folder to train again"
            )
        return f"[resume] continuing from {self.checkpoint} (step {self.step})"


def resume_point(
    folder: str | Path,
    max_steps: int | None,
    limits: dict[str, Any] | None = None,
    log: Callable[[str], Any] = print,
    main_process: bool = True,
) -> ResumePoint:
    """The newest complete checkpoint in ``folder`` after removing incomplete ones (main process only), and
    whether it finished the run: its step reached ``max_steps`` (> 0), or :func:`mark_finished` recorded that a
    run with the same ``limits`` (time / epoch limits) ended at that step."""
    folder = Path(folder)
    if main_process and folder.is_dir():
        discard_incomplete(folder, log)
    found = checkpoints(folder) if folder.is_dir() else []
    if not found:
        return ResumePoint()
    step, path = found[-1]
    finished = bool(max_steps and max_steps > 0 and step >= max_steps)
    record = folder / FINISHED
    if not finished and record.exists():
        try:
            done = json.loads(record.read_text(encoding="utf-8"))
            finished = done.get("step") == step and done.get("limits") == _json_roundtrip(limits or {})
        except (OSError, ValueError):
            finished = False
    return ResumePoint(str(path), step, finished)


def mark_finished(folder: str | Path, step: int, limits: dict[str, Any] | None = None) -> None:
    """Record that the run in ``folder`` ended normally at ``step`` under ``limits``: a rerun with the same limits
    is a no-op (:func:`resume_point`)."""
    write_json(Path(folder) / FINISHED, {"step": int(step), "limits": _json_roundtrip(limits or {})})


class AtomicCheckpoints:
    """Mixin for a ``transformers.Trainer`` subclass: ``checkpoint-N`` appears only once complete.

    The Trainer writes the checkpoint under ``<output_dir>/.saving/`` (every process that writes a part of it, for
    sharded engines), then the main process renames it into ``<output_dir>`` and applies ``save_total_limit``.
    Whatever the Trainer drops beside the checkpoint in the staging folder (TRL's generated model card) goes with it.
    """

    def _save_checkpoint(self, model, trial):
        from transformers.trainer_utils import rotate_checkpoints

        root = Path(self._get_output_dir(trial=trial))
        staging = root / STAGING
        name = f"{PREFIX}{self.state.global_step}"
        if self.args.should_save:
            shutil.rmtree(staging, ignore_errors=True)
            staging.mkdir(parents=True, exist_ok=True)
        self.accelerator.wait_for_everyone()
        original = self.args.output_dir
        self.args.output_dir = str(staging)
        try:
            super()._save_checkpoint(model, trial)
        finally:
            self.args.output_dir = original
        self.accelerator.wait_for_everyone()
        if self.args.should_save:
            target = root / name
            if target.exists():  # a run that trains past this step again (after a discarded checkpoint)
                shutil.rmtree(target)
            os.replace(staging / name, target)
            shutil.rmtree(staging, ignore_errors=True)
            rotate_checkpoints(
                output_dir=str(root),
                save_total_limit=self.args.save_total_limit,
                best_model_checkpoint=self.state.best_model_checkpoint,
                use_mtime=False,
            )
        self.accelerator.wait_for_everyone()


def prepare_resume(
    folder: str | Path,
    settings: dict[str, Any],
    *,
    root: str | Path | None,
    max_steps: int | None,
    limits: dict[str, Any],
    main_process: bool = True,
    defaults: dict[str, Any] | None = None,
) -> ResumePoint:
    """Where a training stage writing its checkpoints to ``folder`` starts: :func:`guard_resume` (refuse checkpoints
    made with other ``settings``; ``defaults``: see there), then :func:`resume_point`."""
    guard_resume(folder, settings, root, defaults)
    return resume_point(folder, max_steps, limits, main_process=main_process)


def train_to_end(
    trainer, point: ResumePoint, folder: str | Path, max_steps: int | None, limits: dict[str, Any]
) -> None:
    """:func:`train_or_restore`, then record a run that ended normally (:func:`mark_finished`) so that a rerun under
    the same ``limits`` trains nothing."""
    train_or_restore(trainer, point, max_steps)
    if not point.finished and trainer.accelerator.is_main_process:
        mark_finished(folder, trainer.state.global_step, limits)


def train_or_restore(trainer, point: ResumePoint, max_steps: int | None, log: Callable[[str], Any] = print):
    """``trainer.train()`` from ``point``, or, when ``point`` already finished the run, the checkpoint's weights and
    trainer state loaded into ``trainer`` without a training step (the Trainer itself would train one more)."""
    log(point.describe(max_steps or -1))
    if not point.finished:
        return trainer.train(resume_from_checkpoint=point.checkpoint)
    from transformers import TrainerState

    trainer._load_from_checkpoint(point.checkpoint)
    trainer.state = TrainerState.load_from_json(str(Path(point.checkpoint) / TRAINER_STATE))
    return None
