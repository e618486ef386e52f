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
    from venus_utils.core.paths import dr_venus_dir as _dir

    path = _dir()
    if not path.exists():
        pytest.skip(f"shared DR-Venus data not found at {path} (set VENUS_SHARED_DATA)")
    return path


@pytest.fixture(scope="session")
def micro_model_dir(tmp_path_factory):
    """A micro Qwen3 + tokenizer built offline from synthetic DR-Venus conversations (a couple of seconds); shared by
    the modeling, SFT and fault tests."""
    from venus_utils.modeling import build_tiny_model, synthetic_conversations

    texts = [m["content"] for c in synthetic_conversations(60, seed=3) for m in c["messages"]]
    return build_tiny_model(tmp_path_factory.mktemp("micro") / "model", texts, size="micro", vocab_size=600)


def pytest_ignore_collect(collection_path, config):
    """In the Unsloth environment (`make test-unsloth` sets VENUS_UNSLOTH_ENV=1) collect only the test files
    that hold Unsloth tests: the others import packages that environment does not have (papermill, bm25s...)."""
    if os.environ.get("VENUS_UNSLOTH_ENV") != "1" or collection_path.suffix != ".py":
        return None
    if not collection_path.name.startswith("test_"):
        return None
    return "mark.unsloth" not in collection_path.read_text(encoding="utf-8", errors="ignore")
