"""Shared fixtures. Kept light: it is imported in both environments (.venv and .venv-unsloth)."""

from __future__ import annotations

import os

import pytest

# Never reach a model hub from a test.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def dr_venus_dir():
    """The shared DR-Venus reference data; tests that need it skip cleanly when it is absent."""
    from venus_utils.paths import dr_venus_dir as _dir

    path = _dir()
    if not path.exists():
        pytest.skip(f"shared DR-Venus data not found at {path} (set VENUS_SHARED_DATA)")
    return path
