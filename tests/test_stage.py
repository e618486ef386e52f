"""Where a run folder keeps its models: the lookups that the evaluation, the demo and the benchmarks share."""

from __future__ import annotations

import pytest

from venus_utils.core.stage import best_model, model_candidates, resolve_model


def test_models_of_a_run_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="no model found"):
        best_model(tmp_path)
    for folder in ("00_setup/tiny_model", "03_sft_unsloth/model"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "config.json").write_text("{}")
    assert [label for label, _ in model_candidates(tmp_path)] == ["sft", "base"]
    assert resolve_model("auto", tmp_path) == ("sft", str(tmp_path / "03_sft_unsloth" / "model"))
    (tmp_path / "04_igpo_rl").mkdir()
    (tmp_path / "04_igpo_rl" / "config.json").write_text("{}")
    assert best_model(tmp_path) == ("rl", tmp_path / "04_igpo_rl")
    assert resolve_model("http://host:8000/v1", tmp_path) == ("http://host:8000/v1", "http://host:8000/v1")
