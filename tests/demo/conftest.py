"""A micro run folder for the demo tests: a tiny offline world and a micro Qwen3 model folder (built offline)."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def micro_run(tmp_path_factory) -> Path:
    """``00_setup/world`` and ``00_setup/tiny_model`` (what notebook 00 leaves), a few seconds on CPU."""
    from venus_utils.modeling import build_tiny_model
    from venus_utils.world import build_world

    setup = tmp_path_factory.mktemp("demo_run") / "00_setup"
    build_world(setup / "world", seed=0, size="tiny", progress=False)
    build_tiny_model(setup / "tiny_model", setup / "world", size="micro", vocab_size=600)
    return setup.parent


@pytest.fixture
def model_copy(micro_run, tmp_path):
    """``copy(suppress_eos=False)`` -> a fresh copy of the micro model folder (so no test finds another's model
    already loaded).  ``suppress_eos`` makes the model never end a turn: its generations run to max_new_tokens."""

    def copy(suppress_eos: bool = False) -> Path:
        out = tmp_path / f"model_{len(list(tmp_path.glob('model_*')))}"
        shutil.copytree(micro_run / "00_setup" / "tiny_model", out)
        if suppress_eos:
            from transformers import AutoTokenizer

            from venus_utils.agent.conversation import ChatTokens
            from venus_utils.core.checkpoints import seal_model

            config = json.loads((out / "generation_config.json").read_text())
            config["suppress_tokens"] = sorted(ChatTokens(AutoTokenizer.from_pretrained(out)).eos_ids)
            (out / "generation_config.json").write_text(json.dumps(config))
            seal_model(out)  # changed as an export would write it: sealed again
        return out

    yield copy
    from venus_utils.agent.backends import release_models

    release_models()


def run_threads() -> list[threading.Thread]:
    """The live threads of demo runs."""
    return [t for t in threading.enumerate() if t.name == "venus-demo-run" and t.is_alive()]
