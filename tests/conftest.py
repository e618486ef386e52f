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


@pytest.fixture(scope="module")
def sft_rows(micro_model_dir):
    """Tokenized SFT rows of 12 synthetic conversations for the micro model: the SFT and fault tests' data."""
    from transformers import AutoTokenizer

    from venus_utils.modeling import synthetic_conversations
    from venus_utils.sft import build_examples

    tok = AutoTokenizer.from_pretrained(micro_model_dir)
    return build_examples([c["messages"] for c in synthetic_conversations(12, seed=4)], tok, max_length=4096).rows


def micro_sft_config(**kw):
    """The settings of a few fast SFT steps of the micro model on the CPU (plain TRL unless ``engine`` is given),
    ``kw`` over them. Imports lazily: the Unsloth tests import unsloth before transformers."""
    from venus_utils.sft import SFTConfig

    base = dict(
        engine="trl",
        learning_rate=3e-3,
        global_batch_size=4,
        micro_batch_size=2,
        max_steps=4,
        logging_steps=1,
        save_steps=2,
        eval_steps=None,
        max_length=4096,
        gradient_checkpointing=False,
        device="cpu",
    )
    return SFTConfig(**{**base, **kw})


def pytest_ignore_collect(collection_path, config):
    """In the Unsloth environment (`make test-unsloth` sets VENUS_UNSLOTH_ENV=1) collect only the test files
    that hold Unsloth tests: the others import packages that environment does not have (papermill, bm25s...)."""
    if os.environ.get("VENUS_UNSLOTH_ENV") != "1" or collection_path.suffix != ".py":
        return None
    if not collection_path.name.startswith("test_"):
        return None
    return "mark.unsloth" not in collection_path.read_text(encoding="utf-8", errors="ignore")
