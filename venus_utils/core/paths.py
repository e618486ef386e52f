"""Where things live: the repository, the read-only reference data and the run folders.

The package runs from a checkout (``pip install -e .``, ``make``) or from a plain install (``pip install
"venus-recipe @ git+..."`` on Colab), where ``REPO_ROOT`` is only the folder above the installed package
(site-packages) and :data:`IN_CHECKOUT` is False: there the profiles come from the copy the wheel installs
(``<prefix>/share/venus-recipe/params``) and relative run folders from the current folder (:func:`runs_base`).
"""

from __future__ import annotations

import os
import tomllib
from importlib import metadata
from pathlib import Path

PROJECT_NAME = "venus-recipe"

#: The stages: each is a notebook (``notebooks/<stage>.ipynb``) and a folder of a run (``runs/<profile>/<stage>``).
#: Code names a stage only through these (``tests/test_import_layers.py`` checks that no other module spells one).
SETUP_STAGE = "00_setup"
CLEANING_STAGE = "01_trajectory_cleaning"
RESAMPLING_STAGE = "02_turn_aware_resampling"
SFT_STAGE = "03_sft_unsloth"
RL_STAGE = "04_igpo_rl"
EVALUATION_STAGE = "05_evaluation"
DEMO_STAGE = "06_agent_demo"
STAGES = (SETUP_STAGE, CLEANING_STAGE, RESAMPLING_STAGE, SFT_STAGE, RL_STAGE, EVALUATION_STAGE, DEMO_STAGE)
#: the control arm of ``rl arms``: more SFT from the stopped SFT model, matched to the IGPO arm's FLOPs
CONTROL_DIR = f"{RL_STAGE}_control"
RFT_DIR = f"{RL_STAGE}_rft"  # rejection-sampling fine-tuning from the same SFT model (venus_utils.rl.rejection)
WORLD_DIR = f"{SETUP_STAGE}/world"  # the offline world, inside a run folder
TINY_MODEL_DIR = f"{SETUP_STAGE}/tiny_model"  # the tiny base model, inside a run folder

REPO_ROOT = Path(__file__).resolve().parents[2]  # venus_utils/core/paths.py -> the repository


def is_checkout(folder: str | Path) -> bool:
    """True when ``folder`` holds this project's ``pyproject.toml`` (a clone of the repository, not site-packages)."""
    try:
        project = tomllib.loads((Path(folder) / "pyproject.toml").read_text(encoding="utf-8")).get("project", {})
    except (OSError, ValueError):
        return False
    return project.get("name") == PROJECT_NAME


IN_CHECKOUT = is_checkout(REPO_ROOT)


def installed_params_dir() -> Path | None:
    """The profiles a wheel install carries (``[tool.setuptools.data-files]`` in pyproject.toml), or None."""
    try:
        files = metadata.distribution(PROJECT_NAME).files or []
    except metadata.PackageNotFoundError:
        return None
    for file in files:
        if file.suffix == ".yaml" and file.parent.name == "params" and PROJECT_NAME in file.parts:
            return Path(file.locate()).resolve().parent
    return None


def project_root() -> Path:
    """What relative paths in profiles (input files, models) start from: the repository root in a checkout, else
    the current folder (Colab: ``/content``)."""
    return REPO_ROOT if IN_CHECKOUT else Path.cwd()


def user_path(path: str | Path) -> Path:
    """A path a user gave (a profile's question file or model folder): as given (relative to the working directory)
    where it exists, else relative to the repository root (profiles name files like
    ``../shared/data/dr-venus/qa_test.parquet``; Papermill runs in the stage folder)."""
    path = Path(path).expanduser()
    return path if path.is_absolute() or path.exists() else REPO_ROOT / path


def runs_base() -> Path:
    """The folder a relative run folder (``runs/interactive``) is resolved against, whatever folder the kernel
    started in: ``VENUS_RUNS_DIR`` when set, else :func:`project_root`."""
    override = os.environ.get("VENUS_RUNS_DIR")
    return Path(override).expanduser().resolve() if override else project_root()


NOTEBOOKS_DIR = REPO_ROOT / "notebooks"
PARAMS_DIR = REPO_ROOT / "params" if IN_CHECKOUT else (installed_params_dir() or REPO_ROOT / "params")
RUNS_DIR = runs_base() / "runs"


def shared_data_dir() -> Path:
    """The reference data folder (DR-Venus examples and QA set), never copied into the repository.

    ``VENUS_SHARED_DATA`` overrides the default ``../shared/data`` (relative to the repository root).
    The folder may be absent: callers check ``.exists()`` and tests skip.
    """
    override = os.environ.get("VENUS_SHARED_DATA")
    return Path(override).expanduser().resolve() if override else (REPO_ROOT.parent / "shared" / "data").resolve()


def dr_venus_dir() -> Path:
    return shared_data_dir() / "dr-venus"
