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
- **A damaged file** in a checkpoint (a truncated ``model.safetensors`` or ``optimizer.pt``: a disk that filled up
  under another program, a copy that stopped) made the resume fail deep inside the Trainer.  Each checkpoint
  records its files (:data:`MANIFEST`: sizes and hashes, :func:`write_manifest`) as the last step of its save, and
  :func:`checkpoint_problem` checks them (checkpoints of older code, without a manifest: the safetensors headers,
  the torch zip archives and the JSON files are read); :func:`discard_incomplete` moves a damaged checkpoint aside
  into ``damaged/`` with a message naming it and the file, and the resume continues from the newest intact one.
- **A full disk** during a save is reported as such (:func:`venus_utils.core.io.explain_disk_full`), the partial save
  removed and the earlier checkpoints left intact.
- **The training time of a resumed run** was the last call's (a rerun of a finished run: ~0 s).  Each checkpoint
  records the seconds spent training up to it across calls (:data:`TRAIN_CLOCK`, :class:`TrainClock`), and
  :func:`train_to_end` returns the run's: the resumed checkpoint's plus this call's (the time after the last
  checkpoint of an interrupted call, trained again, is not counted twice).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import struct
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .io import _umask, explain_disk_full, folder_bytes, read_json, write_json

PREFIX = "checkpoint-"
STAGING = ".saving"
DAMAGED = "damaged"  # damaged checkpoints are moved into <folder>/damaged/ (kept for the user, out of the resume)
FINISHED = "finished.json"
TRAINER_STATE = "trainer_state.json"  # the Trainer writes it after the weights, optimizer and RNG states
RESUME_SETTINGS = "resume_settings.json"
MANIFEST = "checkpoint_manifest.json"  # written last into each checkpoint: its files' sizes and hashes
MODEL_MANIFEST = "model_manifest.json"  # the same record, written last into each exported model folder (seal_model)
TRAIN_CLOCK = "train_clock.json"  # in each checkpoint: seconds spent training up to it, across calls (TrainClock)
FULL_HASH_BYTES = 64 * 2**20  # files up to this size are hashed whole; larger ones by their size, first and last MiB
EDGE_BYTES = 2**20


def _digest(path: Path, size: int) -> str:
    """sha256 of the file (files up to :data:`FULL_HASH_BYTES`), or of its first and last :data:`EDGE_BYTES`
    (larger ones: a multi-GB weight or optimizer file is checked by its size and ends, not read whole on every
    resume, so a change inside it that keeps the size goes unnoticed)."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        if size <= FULL_HASH_BYTES:
            for block in iter(lambda: fh.read(EDGE_BYTES), b""):
                h.update(block)
        else:
            h.update(fh.read(EDGE_BYTES))
            fh.seek(size - EDGE_BYTES)
            h.update(fh.read(EDGE_BYTES))
    return ("sha256:" if size <= FULL_HASH_BYTES else "sha256-ends:") + h.hexdigest()


def _files(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*") if p.is_file() and p.name not in (MANIFEST, MODEL_MANIFEST))


def write_manifest(path: str | Path, name: str = MANIFEST) -> Path:
    """Record the files of the checkpoint ``path`` (relative name -> size and hash, :func:`_digest`) in
    :data:`MANIFEST` (``name``), which :func:`checkpoint_problem` checks before a resume.  The files get the mode an
    ordinary ``open()`` gives (safetensors writes its weights 0600)."""
    path = Path(path)
    files, mode = {}, 0o666 & ~_umask()
    for f in _files(path):
        os.chmod(f, mode)
        size = f.stat().st_size
        files[f.relative_to(path).as_posix()] = {"bytes": size, "hash": _digest(f, size)}
    return write_json(path / name, {"version": 1, "files": files})


def _manifest_problem(path: Path, manifest: Path) -> str | None:
    """What differs between the folder ``path`` and its manifest: a listed file missing, of another size or hash."""
    try:
        files = json.loads(manifest.read_text(encoding="utf-8"))["files"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"{manifest.name}: unreadable ({exc})"
    for name, want in files.items():
        f = path / name
        try:
            size = f.stat().st_size
        except OSError:
            return f"{name}: missing (saved with {want['bytes']} bytes)"
        if size != want["bytes"]:
            cut = "truncated" if size < want["bytes"] else "damaged"
            return f"{name}: {size} bytes, {want['bytes']} when saved ({cut})"
        if _digest(f, size) != want["hash"]:
            return f"{name}: its content changed since it was saved (hash differs): damaged"
    return None


def _formats_problem(path: Path) -> str | None:
    """A folder without a manifest (older code, a downloaded model): each file checked by its format."""
    for f in _files(path):
        problem = _file_problem(f)
        if problem:
            return f"{f.relative_to(path).as_posix()}: {problem}"
    return None


def _safetensors_problem(path: Path, size: int) -> str | None:
    """What is wrong with a safetensors file: its header must be whole and its tensors must end where the file does."""
    try:
        with path.open("rb") as fh:
            (n,) = struct.unpack("<Q", fh.read(8))
            if 8 + n > size:
                return f"{size} bytes, shorter than its header ({n} bytes): truncated"
            header = json.loads(fh.read(n))
    except (OSError, ValueError, struct.error) as exc:
        return f"unreadable safetensors header ({exc})"
    ends = [v["data_offsets"][1] for k, v in header.items() if k != "__metadata__" and isinstance(v, dict)]
    expected = 8 + n + max(ends, default=0)
    if size != expected:
        return f"{size} bytes, its header says {expected}: {'truncated' if size < expected else 'damaged'}"
    return None


def _file_problem(path: Path) -> str | None:
    """What is wrong with one file of a checkpoint that has no manifest (older code), by its format."""
    size = path.stat().st_size
    if path.suffix == ".safetensors":
        return _safetensors_problem(path, size)
    if path.suffix in (".pt", ".pth", ".bin"):
        with path.open("rb") as fh:
            if fh.read(4) != b"PK\x03\x04":
                return None  # torch's legacy (pre-1.6) format, or not torch's: nothing to check
        try:
            with zipfile.ZipFile(path) as zf:
                last = max((i.header_offset + i.compress_size for i in zf.infolist()), default=0)
        except (OSError, zipfile.BadZipFile, ValueError) as exc:
            return f"{size} bytes, not a whole torch archive ({exc}): truncated or damaged"
        return None if last <= size else f"{size} bytes, its archive says at least {last}: truncated"
    if path.suffix == ".json":
        try:
            json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            return f"not valid JSON ({exc})"
    return None


def checkpoint_problem(path: str | Path) -> str | None:
    """What keeps ``path`` from being a whole, loadable checkpoint, or None when it is one.

    Its trainer state (written last by the Trainer) must read as JSON; then, where the save recorded its files
    (:data:`MANIFEST`), every file must be there with the recorded size and hash (:func:`_digest`); without a
    manifest (checkpoints of older code) the safetensors files must be as long as their headers say, the torch
    files whole zip archives and the JSON files valid.  The answer starts with ``incomplete`` (an interrupted save)
    or names the damaged file.
    """
    path = Path(path)
    try:
        state = json.loads((path / TRAINER_STATE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        state = None
    if not (isinstance(state, dict) and "global_step" in state):
        return f"incomplete checkpoint (no readable {TRAINER_STATE}; the save was interrupted)"
    manifest = path / MANIFEST
    return _manifest_problem(path, manifest) if manifest.exists() else _formats_problem(path)


class DamagedModel(ValueError):
    """A model folder whose files differ from what its export wrote (:func:`check_model`); the message is one line
    naming the folder and the file."""


def seal_model(folder: str | Path) -> Path:
    """The last step of a model export, inside the folder being written (before it is swapped into place):
    :data:`MODEL_MANIFEST` records every file's size and hash, as a checkpoint's :data:`MANIFEST` does, for
    :func:`check_model`, and the files get the mode an ordinary ``open()`` gives (:func:`write_manifest`)."""
    return write_manifest(folder, MODEL_MANIFEST)


def model_problem(folder: str | Path) -> str | None:
    """What is wrong with a model folder, or None: with its :data:`MODEL_MANIFEST`, every listed file there with the
    recorded size and hash; without one (older exports, a downloaded model), the files checked by their format
    (safetensors as long as their headers say, torch archives whole, JSON valid)."""
    folder = Path(folder)
    manifest = folder / MODEL_MANIFEST
    return _manifest_problem(folder, manifest) if manifest.exists() else _formats_problem(folder)


def check_model(folder: str | Path) -> Path:
    """``folder`` when it is an intact model folder (:func:`model_problem`), else :class:`DamagedModel` naming the
    folder and the file.  Every place that loads a local model folder calls it first."""
    problem = model_problem(folder)
    if problem:
        raise DamagedModel(f"{folder}: damaged model folder: {problem}; rerun the stage that made it")
    return Path(folder)


def is_complete(path: str | Path) -> bool:
    """Whether ``path`` is a whole checkpoint that loads (:func:`checkpoint_problem` finds nothing)."""
    return checkpoint_problem(path) is None


def checkpoints(folder: str | Path, complete_only: bool = True) -> list[tuple[int, Path]]:
    """``(step, path)`` of the ``checkpoint-<step>`` folders in ``folder``, oldest first (complete ones only unless
    ``complete_only`` is false)."""
    found = [(p.name[len(PREFIX) :], p) for p in Path(folder).glob(f"{PREFIX}*") if p.is_dir()]
    out = sorted((int(step), p) for step, p in found if step.isdigit())
    return [(s, p) for s, p in out if is_complete(p)] if complete_only else out


def discard_incomplete(folder: str | Path, log: Callable[[str], Any] = print) -> list[Path]:
    """Take out of the resume what in ``folder`` cannot be resumed from, reporting each; returns what went.

    The leftovers of interrupted saves (the ``.saving`` staging area, a ``checkpoint-N`` without a readable trainer
    state) are removed.  A ``checkpoint-N`` with a damaged file (:func:`checkpoint_problem`) is moved into
    ``<folder>/damaged/`` (kept: it may be all that is left of a long run), and the message names it and the file.
    """
    folder = Path(folder)
    removed = []
    staging = folder / STAGING
    if staging.exists():
        shutil.rmtree(staging, ignore_errors=True)
        removed.append(staging)
        log(f"[resume] removed {staging}: a save that was interrupted before it completed")
    for _step, path in checkpoints(folder, complete_only=False):
        problem = checkpoint_problem(path)
        if problem is None:
            continue
        removed.append(path)
        if problem.startswith("incomplete"):
            shutil.rmtree(path, ignore_errors=True)
            log(f"[resume] skipped and removed {path}: an {problem}")
            continue
        aside = _aside(folder / DAMAGED / path.name)
        aside.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, aside)
        log(
            f"[resume] skipped {path}: a damaged checkpoint ({problem}); moved it to {aside} (delete it when you no "
            "longer need it); resuming from the newest intact checkpoint"
        )
    return removed


def _aside(path: Path) -> Path:
    """``path``, or ``path.2``, ``path.3``... : the first that does not exist."""
    n, candidate = 1, path
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.name}.{n}")
    return candidate


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


def finished_checkpoint(folder: str | Path) -> tuple[int, Path]:
    """``(step, checkpoint folder)`` of the run in ``folder`` that ended normally (:func:`mark_finished`): the
    checkpoint its model was exported from.  FileNotFoundError when no run there finished (no record)."""
    folder = Path(folder)
    record = folder / FINISHED
    if not record.is_file():
        raise FileNotFoundError(f"{folder}: no finished run ({FINISHED} missing)")
    try:
        step = int(read_json(record)["step"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{record}: not a finished-run record ({exc})") from exc
    return step, folder / f"checkpoint-{step}"


class AtomicCheckpoints:
    """Mixin for a ``transformers.Trainer`` subclass: ``checkpoint-N`` appears only once complete.

    The Trainer writes the checkpoint under ``<output_dir>/.saving/`` (every process that writes a part of it, for
    sharded engines), then the main process renames it into ``<output_dir>`` and applies ``save_total_limit``.
    Whatever the Trainer drops beside the checkpoint in the staging folder (TRL's generated model card) goes with it.
    The last file written before the rename is the checkpoint's :data:`MANIFEST` (:func:`write_manifest`).  A save
    that fails for lack of space says so (:func:`venus_utils.core.io.explain_disk_full`: the checkpoint, the bytes it
    needs, the bytes free) and its partial files are removed; the earlier checkpoints are untouched.
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
        advice = f"the partial save was removed and the earlier checkpoints in {root} are intact: free some space and "
        advice += "run again to resume"
        try:
            with explain_disk_full(root / name, lambda: self._estimated_checkpoint_bytes(root), advice):
                super()._save_checkpoint(model, trial)
                self.accelerator.wait_for_everyone()
                if self.args.should_save:
                    write_manifest(staging / name)  # the checkpoint is whole from here on
                    clock = getattr(self, "train_clock", None)
                    if clock is not None:  # a record about the run, not needed to resume: outside the manifest
                        write_train_clock(staging / name, clock.seconds())
        except OSError as exc:
            if self.args.should_save and exc.errno in (errno.ENOSPC, errno.EDQUOT):
                shutil.rmtree(staging, ignore_errors=True)  # give the space back at once
            raise
        finally:
            self.args.output_dir = original
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

    def _estimated_checkpoint_bytes(self, root: Path) -> int:
        """About the size of a checkpoint: the newest one in ``root``, or the model's and optimizer's tensors."""
        found = checkpoints(root, complete_only=False)
        if found:
            return folder_bytes(found[-1][1])
        total = sum(p.numel() * p.element_size() for p in self.model.parameters())
        optimizer = getattr(self, "optimizer", None)
        for state in optimizer.state.values() if optimizer is not None else ():
            total += sum(v.numel() * v.element_size() for v in state.values() if hasattr(v, "element_size"))
        return total


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


@dataclass
class TrainClock:
    """Seconds spent training a run across the calls that trained it: ``before`` (the resumed checkpoint's
    :data:`TRAIN_CLOCK`; None when unknown: a checkpoint of older code) plus the time since ``started``."""

    before: float | None = 0.0
    started: float = field(default_factory=time.perf_counter)

    def seconds(self) -> float | None:
        return None if self.before is None else round(self.before + time.perf_counter() - self.started, 3)


def write_train_clock(checkpoint: str | Path, seconds: float | None) -> Path:
    """Record in ``checkpoint`` the seconds spent training up to it (:data:`TRAIN_CLOCK`; None: unknown)."""
    return write_json(Path(checkpoint) / TRAIN_CLOCK, {"train_wall_s": seconds})


def read_train_clock(checkpoint: str | Path | None) -> float | None:
    """The seconds of training a checkpoint recorded (0 without a checkpoint; None when it recorded none)."""
    if checkpoint is None:
        return 0.0
    try:
        value = read_json(Path(checkpoint) / TRAIN_CLOCK).get("train_wall_s")
    except (OSError, ValueError, AttributeError):
        return None
    return float(value) if isinstance(value, int | float) and value >= 0 else None


def train_to_end(
    trainer, point: ResumePoint, folder: str | Path, max_steps: int | None, limits: dict[str, Any]
) -> float | None:
    """:func:`train_or_restore`, then record a run that ended normally (:func:`mark_finished`) so that a rerun under
    the same ``limits`` trains nothing.  Returns the seconds spent training the run up to its end, across calls
    (:class:`TrainClock`; a finished run rerun: the time its last checkpoint recorded), or None when a checkpoint it
    resumed from did not record it."""
    before = read_train_clock(point.checkpoint)
    if point.finished:
        train_or_restore(trainer, point, max_steps)
        return before
    trainer.train_clock = TrainClock(before)  # AtomicCheckpoints writes it into each checkpoint
    train_or_restore(trainer, point, max_steps)
    if trainer.accelerator.is_main_process:
        mark_finished(folder, trainer.state.global_step, limits)
    # what a rerun of the finished run reports: the clock of the checkpoint at the last step, when there is one (the
    # end of training comes a moment after that save), so that both report the same seconds
    last = Path(folder) / f"checkpoint-{trainer.state.global_step}"
    recorded = read_train_clock(last) if (last / TRAIN_CLOCK).is_file() else None
    return recorded if recorded is not None else trainer.train_clock.seconds()


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


#: the files that decide a model's answers (weights, config, tokenizer); run records beside them do not
_MODEL_SUFFIXES = (".safetensors", ".bin", ".pt", ".jinja", ".model", ".txt")
_MODEL_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "vocab.json")
_WHOLE_FILE = 256 << 20  # larger files are sampled: their size and 16 spread 1 MiB blocks


def model_digest(model_dir: str | Path) -> str:
    """A content hash of the files of ``model_dir`` that decide its answers: a model folder saved again with the
    same weights (a rerun of a finished stage) keeps its digest, so its held-out answers are reused, not rescored."""
    h = hashlib.sha256()
    for f in sorted(Path(model_dir).iterdir()):
        if not f.is_file() or not (f.suffix in _MODEL_SUFFIXES or f.name in _MODEL_FILES):
            continue
        size = f.stat().st_size
        h.update(f"{f.name}\0{size}\0".encode())
        with f.open("rb") as fh:
            if size <= _WHOLE_FILE:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
            else:
                for k in range(16):
                    fh.seek(k * (size - (1 << 20)) // 15)
                    h.update(fh.read(1 << 20))
    return h.hexdigest()


def local_model_digest(model: str | Path) -> str | None:
    """:func:`model_digest` of a model folder; None for anything else (a hub name such as ``Qwen/Qwen3-4B``, a
    server URL): what a training run's resume guard records, so a model retrained at the same path is another run
    (:func:`guard_resume`)."""
    return model_digest(model) if Path(model).is_dir() else None
