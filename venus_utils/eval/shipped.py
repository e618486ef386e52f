"""A model shipped with the repository (``models/``), with the record that lets anyone check it.

The reward-cell loop (``params/cpu-rl.yaml``) starts RL from an SFT model made once by the recipe itself, so a student
edits notebook 04's reward cells and sees what changes in minutes instead of training SFT first. Such a model is only
worth shipping with a record a test can hold it to:

- :func:`ship` copies a run's SFT model into a folder and writes ``record.json`` beside it: the run that made it
  (profile, seed, SFT steps, the plateau), the world it was trained in (seed, size, knobs: rebuilt from them in
  seconds, so no world is shipped), its accuracy on the run's validation questions where ``eval validate`` scored
  them, and its greedy answers to ``n`` validation questions;
- :func:`verify` rebuilds that world, answers the same questions with the same evaluation code and returns every
  question whose answer differs from the record (``tests/eval/test_shipped_model.py`` allows 2 of 32, a near tie
  another CPU's arithmetic can flip).

``python -m venus_utils.eval ship --run runs/cpu-teacher --out models/cpu-teacher-sft-seed0`` remakes it.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from ..core.checkpoints import model_digest
from ..core.io import atomic_dir, read_json, write_json
from ..core.paths import SETUP_STAGE, SFT_STAGE
from ..core.profiles import load_profile
from ..core.stage import RUN_PROFILE, SUMMARY
from ..world import build_world
from .heldout import EvalSettings, draw_heldout, evaluate_model, load_scored, summary

RECORD = "record.json"  # written by ship, beside the model's files (it lists them under "files")
SHIP_TOOL = "eval ship"
VALIDATION_TABLE = "validation_val.parquet"  # eval validate's table beside the run's SFT model


def world_of(run_dir: str | Path) -> dict[str, Any]:
    """How the run's world was built (seed, size, knobs), from the run's own ``profile.yaml``."""
    profile = load_profile(Path(run_dir) / RUN_PROFILE)
    section = profile.stage_params(SETUP_STAGE)
    return {
        "seed": int(section.get("seed", 0)),
        "size": section.get("world_size", "small"),
        "knobs": dict(section.get("world_knobs") or {}),
    }


def build_recorded_world(world: dict[str, Any], out_dir: str | Path) -> Path:
    """The world a record names, built into ``out_dir`` (``build_world``, ~4 s for the lesson's small world)."""
    build_world(out_dir, seed=world["seed"], size=world["size"], progress=False, **world["knobs"])
    return Path(out_dir)


def _answers(model_dir: Path, world_dir: Path, n: int, seed: int, work: Path) -> list[dict[str, Any]]:
    questions = draw_heldout(world_dir, n, seed=seed, split="val")
    scored = evaluate_model(
        model_dir,
        questions,
        work / "answers.parquet",
        EvalSettings.for_model(model_dir),
        world_dir=world_dir,
        progress=False,
    )
    return [
        {"id": str(r.id), "prediction": str(r.prediction), "correct": bool(r.correct)}
        for r in scored.sort_values("id").itertuples()
    ]


def ship(run_dir: str | Path, out: str | Path, n: int = 32, seed: int = 0) -> dict[str, Any]:
    """Copy ``run_dir``'s SFT model into ``out`` with its ``record.json`` (see the module); returns the record."""
    run = Path(run_dir)
    model_dir = run / SFT_STAGE / "model"
    if not (model_dir / "config.json").is_file():
        raise FileNotFoundError(f"{run}: no SFT model ({model_dir}); run the profile's stages 00-03 first")
    profile = load_profile(run / RUN_PROFILE)
    sft = read_json(run / SFT_STAGE / SUMMARY)
    world = world_of(run)
    record: dict[str, Any] = {
        "made_by": f"make pipeline PROFILE={profile.name}: notebook 03's model (python -m venus_utils.eval ship)",
        "profile": profile.name,
        "seed": profile.shared.get("seed", 0),
        "sft_steps": sft.get("steps"),
        "plateau": {
            k: v for k, v in (sft.get("plateau") or {}).items() if k in ("rule", "plateau_step", "best_accuracy")
        },
        "world": world,
    }
    table = run / SFT_STAGE / VALIDATION_TABLE
    made_by = table.with_suffix(".jsonl.params.json")  # the answers' fingerprint, written beside them
    if table.is_file() and made_by.is_file() and read_json(made_by).get("model_digest") == model_digest(model_dir):
        # eval validate --split val by this very model: its accuracy on the run's validation questions
        figures = summary(load_scored(table))
        record["validation"] = {k: figures[k] for k in ("n", "accuracy", "ci_low", "ci_high", "headline")}
    with tempfile.TemporaryDirectory() as tmp:
        world_dir = build_recorded_world(world, Path(tmp) / "world")
        record["answers"] = {"split": "val", "n": n, "seed": seed}
        record["answers"]["rows"] = _answers(model_dir, world_dir, n, seed, Path(tmp))
    with atomic_dir(out, SHIP_TOOL, RECORD) as folder:
        for path in sorted(model_dir.iterdir()):
            if path.is_file():
                shutil.copy2(path, folder / path.name)
        write_json(folder / RECORD, record)
    return read_json(Path(out) / RECORD)


def verify(model_dir: str | Path, work: str | Path) -> list[str]:
    """Rebuild the recorded world in ``work``, answer the recorded questions again with ``model_dir``: one line per
    question whose answer or verdict differs from ``record.json`` (none: the model answers what its record says)."""
    model_dir, work = Path(model_dir), Path(work)
    record = read_json(model_dir / RECORD)
    world_dir = build_recorded_world(record["world"], work / "world")
    asked = record["answers"]
    rows = _answers(model_dir, world_dir, asked["n"], asked["seed"], work)
    recorded = {r["id"]: r for r in asked["rows"]}
    if sorted(recorded) != [r["id"] for r in rows]:
        return [f"the world drew other questions than the record's ({len(rows)} against {len(recorded)})"]
    return [
        f"{r['id']}: answered {r['prediction']!r} ({'right' if r['correct'] else 'wrong'}), the record says "
        f"{recorded[r['id']]['prediction']!r} ({'right' if recorded[r['id']]['correct'] else 'wrong'})"
        for r in rows
        if (r["prediction"], r["correct"]) != (recorded[r["id"]]["prediction"], recorded[r["id"]]["correct"])
    ]
