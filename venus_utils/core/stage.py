"""What a notebook needs to be one stage of the pipeline, and where a run folder keeps its models.

Each notebook starts with ``stage = Stage.start("03_sft_unsloth", run_dir)`` and ends with
``stage.finish(**key_figures)``.  Its artifacts go in ``stage.dir`` (``runs/<profile>/<NN_stage>/``);
earlier stages are reached only through ``stage.upstream("01_trajectory_cleaning")``, which checks that
the earlier stage finished (its ``summary.json`` exists) and says what to run when it did not.
``Stage.start`` holds the stage folder (:mod:`venus_utils.core.locks`) until ``finish``: a second run of the same stage
is refused at once, naming the first one's pid; under the pipeline, which holds the folders of the stages it runs,
the notebook shares the pipeline's lock.

The models a run trained are found the same way from outside a stage (the evaluation, the agent demo, the
benchmarks): :func:`model_candidates` lists them by the stage that made them, :func:`best_model` picks the best
(RL > SFT > the tiny base model) and :func:`resolve_model` reads the notebooks' ``model`` parameter.
"""

from __future__ import annotations

import datetime as _dt
import time
from pathlib import Path
from typing import Any

from .io import read_json, write_json
from .locks import FolderLock, acquire, release
from .paths import RL_STAGE, SFT_STAGE, TINY_MODEL_DIR, runs_base
from .perf import gpu_peak_memory_gib
from .profiles import settings_record

SUMMARY = "summary.json"
RUN_PROFILE = "profile.yaml"  # the profile a pipeline run read, in the run folder


class StageMissing(FileNotFoundError):
    """An upstream stage has not produced its artifacts yet."""


def resolve_run_dir(run_dir: str | Path) -> Path:
    """An absolute run folder: a relative one (``runs/interactive``) is taken from
    :func:`venus_utils.core.paths.runs_base`
    (``VENUS_RUNS_DIR``, else the repository root of a checkout, else the current folder), so a notebook run from
    JupyterLab in ``notebooks/``, by Papermill from the repository root or on Colab in ``/content`` writes to the
    same place as the other stages of its run."""
    run_dir = Path(run_dir).expanduser()
    return run_dir if run_dir.is_absolute() else (runs_base() / run_dir)


class Stage:
    def __init__(
        self, name: str, run_dir: str | Path, stage_dir: str | Path | None = None, profile: str | None = None
    ):
        self.name = name
        self.run_dir = resolve_run_dir(run_dir).resolve()
        self.dir = Path(stage_dir).resolve() if stage_dir else self.run_dir / name
        self.profile = profile or self.run_dir.name
        self._t0 = time.perf_counter()
        self.timings: dict[str, float] = {}
        self.lock: FolderLock | None = None
        self.settings: dict[str, dict[str, Any]] | None = None  # record_settings: each value and where it came from

    @classmethod
    def start(
        cls,
        name: str,
        run_dir: str | Path,
        stage_dir: str | Path | None = None,
        profile: str | None = None,
        params: dict[str, Any] | None = None,
    ) -> Stage:
        """The stage, its folder made and held (:meth:`hold`) until :meth:`finish`.  ``params`` (a notebook passes its
        ``globals()``): the run's parameters, recorded in ``summary.json`` with where each came from
        (:meth:`record_settings`)."""
        stage = cls(name, run_dir, stage_dir, profile)
        stage.hold()
        if params is not None:
            stage.record_settings(params)
        return stage

    def record_settings(self, params: dict[str, Any]) -> None:
        """Keep each parameter's value and source (:func:`venus_utils.core.profiles.settings_record`) for
        ``summary.json``'s ``settings``."""
        self.settings = settings_record(self.name, self.profile, params)

    def hold(self) -> FolderLock:
        """Make and hold this stage's folder (:func:`venus_utils.core.locks.acquire`: raises
        :class:`~venus_utils.core.locks.FolderInUse` while another run of it is alive); call it before anything in the
        folder is deleted or written.  Holding it again is a no-op; :meth:`finish` releases it."""
        self.lock = acquire(
            self.dir, f"run of {self.name}", hint="or give this run another run folder (run_dir, --run-dir)"
        )
        return self.lock

    def path(self, *parts: str) -> Path:
        """A path inside this stage's folder."""
        return self.dir.joinpath(*parts)

    def upstream(self, name: str) -> Path:
        """The folder of an earlier stage; raises :class:`StageMissing` if that stage has not finished."""
        folder = self.run_dir / name
        if not (folder / SUMMARY).exists():
            raise StageMissing(
                f"{self.name} needs the outputs of {name}, but {folder / SUMMARY} does not exist. Run "
                f"notebooks/{name}.ipynb first (or `python -m venus_utils.run.pipeline --params params/<profile>.yaml "
                f"--only {name[:2]}`)."
            )
        return folder

    def upstream_summary(self, name: str) -> dict[str, Any]:
        return read_json(self.upstream(name) / SUMMARY)

    def timed(self, label: str):
        """Context manager that records the wall time of a block under ``timings[label]``."""
        stage = self

        class _Timer:
            def __enter__(self):
                self.t0 = time.perf_counter()
                return self

            def __exit__(self, *exc):
                stage.timings[label] = round(time.perf_counter() - self.t0, 3)
                return False

        return _Timer()

    def finish(self, **figures: Any) -> dict[str, Any]:
        """Write ``summary.json`` (key figures, timings, elapsed time) and return it."""
        summary = {
            "stage": self.name,
            "profile": self.profile,
            "finished_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            "elapsed_s": round(time.perf_counter() - self._t0, 3),
            "timings_s": dict(self.timings),
            **figures,
        }
        peak = gpu_peak_memory_gib()
        if peak is not None:
            summary["gpu_peak_memory_gib"] = peak
        if self.settings is not None:
            summary["settings"] = self.settings
        write_json(self.dir / SUMMARY, summary)
        release(self.lock)
        self.lock = None
        return summary


# --------------------------------------------------------------------------------------------------------
# Models of a run folder
# --------------------------------------------------------------------------------------------------------
MODEL_STAGES = (("rl", RL_STAGE), ("sft", SFT_STAGE), ("base", TINY_MODEL_DIR))


def model_candidates(run_dir: str | Path) -> list[tuple[str, Path]]:
    """The models a run folder holds, best first: RL, then SFT, then the tiny base model.

    A stage's model is ``<stage>/model`` (or the stage folder itself) when it holds a ``config.json``.
    """
    run_dir = Path(run_dir)
    found = []
    for label, stage in MODEL_STAGES:
        for folder in (run_dir / stage / "model", run_dir / stage):
            if (folder / "config.json").exists():
                found.append((label, folder))
                break
    return found


def best_model(run_dir: str | Path) -> tuple[str, Path]:
    """``(label, folder)`` of the best model in the run folder (RL > SFT > base); raises when there is none."""
    found = model_candidates(run_dir)
    if not found:
        raise FileNotFoundError(
            f"{run_dir}: no model found (looked for {', '.join(s for _, s in MODEL_STAGES)}); run notebooks/00_setup "
            "first (it builds the tiny base model), or point the notebook at a checkpoint"
        )
    return found[0]


def resolve_model(model: str, run_dir: str | Path) -> tuple[str, str]:
    """``(label, model)`` for the notebooks' ``model`` parameter: ``auto`` is the run's best model
    (:func:`best_model`); a folder or an ``http(s)://`` endpoint is used as given."""
    if model == "auto":
        label, folder = best_model(run_dir)
        return label, str(folder)
    return (model if model.startswith(("http://", "https://")) else Path(model).name), model
