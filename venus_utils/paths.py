"""Where things live: the repository, the read-only reference data and the run folders."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS_DIR = REPO_ROOT / "notebooks"
PARAMS_DIR = REPO_ROOT / "params"
RUNS_DIR = REPO_ROOT / "runs"


def shared_data_dir() -> Path:
    """The reference data folder (DR-Venus examples and QA set), never copied into the repository.

    ``VENUS_SHARED_DATA`` overrides the default ``../shared/data`` (relative to the repository root).
    The folder may be absent: callers check ``.exists()`` and tests skip.
    """
    override = os.environ.get("VENUS_SHARED_DATA")
    return Path(override).expanduser().resolve() if override else (REPO_ROOT.parent / "shared" / "data").resolve()


def dr_venus_dir() -> Path:
    return shared_data_dir() / "dr-venus"
