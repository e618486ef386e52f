"""SFT trained to its plateau: stop where the agent stops getting better on validation questions, then anneal.

The validation-loss line (``stop_at_eval_loss``) stopped SFT where its teacher-forced loss on trajectories of the
sub-worlds it trains on reached 0.01, with its learning rate still at 28-74% of the peak: more SFT from there gained
+0.24 pooled on the held-out questions (seeds 20-25), and a loss on seen sub-worlds cannot see a model that fits
them and answers nothing elsewhere (seed 21). This rule watches what the recipe is for, the agent's answers:

- at every checkpoint (``save_steps``) the checkpoint answers ``PlateauRule.questions`` validation questions of the
  **held-out sub-worlds** (the world's ``val`` split; every ``val`` question when the world has no held-out
  sub-worlds) greedily, with the evaluation code every stage uses (:func:`venus_utils.eval.heldout.evaluate_model`);
  its accuracy is the curve notebook 03 draws;
- the plateau: ``patience`` checkpoints in a row none of which beats the best accuracy before them by
  ``min_gain``, once the curve has risen ``min_gain`` above its first point (:func:`plateau_reached`: the flat start
  of a model still learning the format is no plateau);
- then the anneal: from the learning rate at that step, cosine down to the schedule's floor (``min_lr_ratio`` x the
  peak) over ``anneal_steps`` steps, and the run ends there, annealed (a run that never plateaus ends at
  ``max_steps``, where the schedule has annealed too: the cap bounds the time on a seed that learns late or never).

The held-out *test* questions are never looked at. The curve, the plateau step and the anneal are kept in
``<stage>/plateau.json`` (a resumed run goes on with them); the scored checkpoints in ``<stage>/plateau/``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ..core.io import read_json, write_json
from ..core.qa_files import stratified_sample
from ..core.world_store import load_world_questions
from ..eval import heldout as ho
from .schedule import lr_factor as cosine

PLATEAU_FILE = "plateau.json"
SCORED_DIR = "plateau"


@dataclass(frozen=True)
class PlateauRule:
    """The numbers of the rule (see the module): validation questions per checkpoint, the checkpoints without a gain
    that make a plateau, the gain that counts, the anneal's length in optimizer steps."""

    questions: int = 60
    patience: int = 2
    min_gain: float = 0.02
    anneal_steps: int = 200

    def __post_init__(self):
        if self.questions < 1 or self.patience < 1 or self.anneal_steps < 1 or not 0 <= self.min_gain < 1:
            raise ValueError(f"plateau rule {asdict(self)}: questions, patience, anneal_steps >= 1; 0 <= min_gain < 1")


def plateau_reached(accuracies: Sequence[float], rule: PlateauRule) -> bool:
    """Whether the last ``rule.patience`` accuracies all stay below the best one before them plus ``rule.min_gain``.
    A curve shorter than ``patience + 1``, or one whose best before them is not ``min_gain`` above its first point
    (flat at the start: a model still learning the format answers nothing for hundreds of steps), has not
    plateaued; a seed that never rises trains to ``max_steps``."""
    if len(accuracies) <= rule.patience:
        return False
    best_before = max(accuracies[: -rule.patience])
    if best_before < accuracies[0] + rule.min_gain:  # the curve has not risen yet: still learning the format
        return False
    return all(a < best_before + rule.min_gain for a in accuracies[-rule.patience :])


def validation_questions(world_dir: str | Path, n: int, seed: int = 0) -> pd.DataFrame:
    """``n`` questions of the world's ``val`` split from its held-out sub-worlds (all of ``val`` when it has none),
    drawn keeping their mix of templates, hops and sub-worlds."""
    qa = load_world_questions(world_dir, "val")
    if "group" in qa and (qa["group"] == "heldout").any():
        qa = qa[qa["group"] == "heldout"]
    if qa.empty:
        raise ValueError(f"{world_dir}: no validation questions (val split) for the plateau rule")
    return stratified_sample(qa, n, by=("template", "hops", "subworld", "tier"), seed=seed)


def anneal_factor(start_step: int, steps: int, start: float, floor: float) -> Callable[[int], float]:
    """Multiple of the peak rate at optimizer step ``s``: ``start`` at ``start_step``, cosine down to ``floor`` at
    ``start_step + steps`` (and ``floor`` after)."""

    def factor(step: int) -> float:
        return floor + (start - floor) * cosine((step - start_step) / max(steps, 1))

    return factor


def checkpoint_scorer(
    questions: pd.DataFrame, settings: ho.EvalSettings, out_dir: str | Path, *, world_dir: Any, judge: Any
) -> Callable[[Path], dict[str, Any]]:
    """``score(checkpoint folder) -> {accuracy, n, right}``: the checkpoint answers ``questions`` (greedy, the one
    evaluation code), its scored table in ``<out_dir>/plateau/<checkpoint>.parquet``."""

    def score(checkpoint: Path) -> dict[str, Any]:
        scored = ho.evaluate_model(
            checkpoint,
            questions,
            Path(out_dir) / SCORED_DIR / f"{checkpoint.name}.parquet",
            settings,
            world_dir=world_dir,
            judge=judge,
            progress=False,
        )
        correct = scored["correct"].dropna()
        return {"accuracy": float(correct.mean()) if len(correct) else 0.0, "n": int(len(correct))}

    return score


def plateau_stop(rule: PlateauRule, out_dir: str | Path, score: Callable[[Path], dict[str, Any]], floor: float):
    """The trainer callback of the rule: scores each checkpoint as it is saved (``score``), starts the anneal at the
    plateau (the learning-rate schedule from there is :func:`anneal_factor` down to ``floor``), and ends the run
    ``rule.anneal_steps`` later with a checkpoint. Its record (``plateau.json``) lets a resumed run go on."""
    from transformers import TrainerCallback

    record_path = Path(out_dir) / PLATEAU_FILE

    class PlateauStop(TrainerCallback):
        def __init__(self):
            self.record: dict[str, Any] = {"rule": asdict(rule), "curve": [], "plateau_step": None}

        def _write(self) -> None:
            write_json(record_path, self.record)

        def _anneal(self, lr_scheduler) -> None:
            a = self.record["anneal"]
            fn = anneal_factor(a["start_step"], a["steps"], a["start_factor"], floor)
            lr_scheduler.lr_lambdas = [fn] * len(lr_scheduler.lr_lambdas)

        def on_train_begin(self, args, state, control, lr_scheduler=None, **kwargs):
            if record_path.is_file():  # a resumed run: its curve so far, and the anneal if it had begun
                found = read_json(record_path)
                if found.get("rule") == asdict(rule):
                    self.record = found
                    self.record["curve"] = [c for c in found.get("curve", []) if c["step"] <= state.global_step]
                    if self.record.get("anneal") and self.record["anneal"]["start_step"] <= state.global_step:
                        self._anneal(lr_scheduler)
                    else:
                        self.record.pop("anneal", None)
                        self.record["plateau_step"] = None
            scored = {c["step"] for c in self.record["curve"]}
            resumed = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            if state.global_step and state.global_step not in scored and not self.record.get("anneal"):
                if state.is_world_process_zero and resumed.is_dir():  # killed between its save and its score
                    self._score(args, state, lr_scheduler, kwargs.get("optimizer"))
            return control

        def on_save(self, args, state, control, lr_scheduler=None, optimizer=None, **kwargs):
            anneal = self.record.get("anneal")
            if not state.is_world_process_zero or (anneal and state.global_step < anneal["end_step"]):
                return control  # the anneal's own checkpoints are not scored, its last one is
            self._score(args, state, lr_scheduler, optimizer)
            return control

        def _score(self, args, state, lr_scheduler, optimizer) -> None:
            """Score the checkpoint of this step, record it, and start the anneal at a plateau."""
            checkpoint = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            found = score(checkpoint)
            rate = optimizer.param_groups[0]["lr"] if optimizer is not None else None
            self.record["curve"].append({"step": state.global_step, **found, "learning_rate": rate})
            accuracies = [c["accuracy"] for c in self.record["curve"]]
            print(
                f"[plateau] step {state.global_step}: {found['accuracy']:.3f} of {found['n']} validation questions "
                f"(best {max(accuracies):.3f})",
                flush=True,
            )
            if not self.record.get("anneal") and plateau_reached(accuracies, rule) and lr_scheduler is not None:
                base = lr_scheduler.base_lrs[0]
                start = (rate / base) if rate is not None and base else floor
                # within the cap: a plateau near max_steps anneals over the steps left, so the run still ends annealed
                left = args.max_steps - state.global_step if args.max_steps and args.max_steps > 0 else None
                steps = max(1, min(rule.anneal_steps, left)) if left is not None else rule.anneal_steps
                self.record["plateau_step"] = state.global_step
                self.record["anneal"] = {
                    "start_step": state.global_step,
                    "steps": steps,
                    "start_factor": start,
                    "floor_factor": floor,
                    "end_step": state.global_step + steps,
                }
                self._anneal(lr_scheduler)
                print(
                    f"[plateau] no gain of {rule.min_gain} in {rule.patience} checkpoints: annealing from "
                    f"{start:.0%} to {floor:.0%} of the peak over {steps} steps",
                    flush=True,
                )
            self._write()

        def on_step_end(self, args, state, control, **kwargs):
            anneal = self.record.get("anneal")
            if anneal and state.global_step >= anneal["end_step"]:
                control.should_training_stop = True
                control.should_save = True
            return control

    return PlateauStop()


def read_curve(stage_dir: str | Path) -> pd.DataFrame:
    """The validation accuracy of each scored checkpoint (``plateau.json``), with where the plateau and the anneal
    were: columns step, accuracy, n, learning_rate, and ``phase`` (training | plateau | annealed)."""
    path = Path(stage_dir) / PLATEAU_FILE
    if not path.is_file():
        return pd.DataFrame(columns=["step", "accuracy", "n", "learning_rate", "phase"])
    record = read_json(path)
    curve = pd.DataFrame(record.get("curve", []))
    plateau = record.get("plateau_step")
    if len(curve):
        curve["phase"] = "training"
        if plateau is not None:
            curve.loc[curve["step"] == plateau, "phase"] = "plateau"
            curve.loc[curve["step"] > plateau, "phase"] = "annealed"
    return curve


@dataclass
class Plateau:
    """The rule of a run, ready for the trainer: the numbers, how a checkpoint is scored, the schedule's floor."""

    rule: PlateauRule
    score: Callable[[Path], dict[str, Any]]
    floor: float

    def callback(self, out_dir: str | Path):
        return plateau_stop(self.rule, out_dir, self.score, self.floor)

    def limits(self) -> dict[str, Any]:
        """What the rule adds to the run's finish limits (a rerun with the same rule after it ended trains nothing)."""
        return {"plateau": asdict(self.rule)}


def plateau_from_params(
    params: dict[str, Any], stage_dir: str | Path, world_dir: str | Path | None, judge: Any, processes: int = 1
) -> Plateau | None:
    """The stage's rule from its parameters (``plateau_questions`` > 0, ``plateau_patience``, ``plateau_min_gain``,
    ``anneal_steps``; the agent limits ``eval_max_turns`` / ``eval_max_tokens_per_turn`` and
    ``system_prompt_style``; the floor ``min_lr_ratio`` of the schedule), else None. It needs the offline world
    (its validation questions), one process (the anneal changes the learning rate of the process that scores), and
    no ``stop_at_eval_loss``."""
    n = int(params.get("plateau_questions") or 0)
    if not n:
        return None
    if world_dir is None:
        raise ValueError("plateau_questions: the plateau rule scores the offline world's validation questions")
    if processes > 1:
        raise ValueError("plateau_questions: the plateau rule runs in one process (set num_processes to 1)")
    if params.get("finetuning") == "lora":
        raise ValueError("plateau_questions: a LoRA checkpoint holds the adapter only; the rule scores full models")
    if params.get("stop_at_eval_loss") is not None:
        raise ValueError("plateau_questions and stop_at_eval_loss both end the run: set one of them (the other None)")
    rule = PlateauRule(n, params["plateau_patience"], params["plateau_min_gain"], params["anneal_steps"])
    questions = validation_questions(world_dir, n, params["seed"])
    device = params.get("device") or "cpu"
    settings = ho.EvalSettings(
        max_turns=params["eval_max_turns"],
        max_new_tokens=params["eval_max_tokens_per_turn"],
        system_prompt_style=params["system_prompt_style"],
        device="cpu" if device == "auto" else device,
    )
    score = checkpoint_scorer(questions, settings, stage_dir, world_dir=world_dir, judge=judge)
    floor = params["min_lr_ratio"] if params.get("schedule_by_time") else 0.0
    return Plateau(rule, score, floor)


def plateau_summary(stage_dir: str | Path) -> dict[str, Any] | None:
    """The stage summary's record of the rule: the curve, the plateau's step and accuracy, the anneal, the final
    checkpoint's accuracy; None when the run had no plateau rule."""
    path = Path(stage_dir) / PLATEAU_FILE
    if not path.is_file():
        return None
    record = read_json(path)
    curve = record.get("curve", [])
    return {
        "rule": record.get("rule"),
        "plateau_step": record.get("plateau_step"),
        "anneal": record.get("anneal"),
        "best_accuracy": max((c["accuracy"] for c in curve), default=None),
        "last_accuracy": curve[-1]["accuracy"] if curve else None,
        "curve": curve,
    }
