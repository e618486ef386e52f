"""A model retrained (or rebuilt) at the same path is another run: the SFT and RL resume guards record its digest."""

from __future__ import annotations

import pytest

from venus_utils.core.checkpoints import guard_resume


def _model(folder, weights: bytes):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text('{"model_type": "qwen3"}')
    (folder / "model.safetensors").write_bytes(weights)
    return folder


def _checkpoint(folder):
    (folder / "checkpoint-2").mkdir(parents=True)
    (folder / "checkpoint-2" / "config.json").write_text("{}")
    (folder / "checkpoint-2" / "trainer_state.json").write_text('{"global_step": 2}')


def test_rl_refuses_checkpoints_of_another_sft_model_at_the_same_path(tmp_path):
    from venus_utils.rl.config import IGPOConfig
    from venus_utils.rl.stage import resume_settings

    rows = [{"id": "q1"}]
    sft = _model(tmp_path / "sft", b"old weights")
    before = resume_settings(IGPOConfig(), sft, rows)
    assert before["sft_model_digest"]
    folder = tmp_path / "04"
    _checkpoint(folder)
    guard_resume(folder, before)
    guard_resume(folder, resume_settings(IGPOConfig(), sft, rows))  # the same model: resumes
    _model(sft, b"new weights")
    with pytest.raises(ValueError, match="sft_model_digest"):
        guard_resume(folder, resume_settings(IGPOConfig(), sft, rows))
    assert resume_settings(IGPOConfig(), "Qwen/Qwen3-4B-Thinking-2507", rows)["sft_model_digest"] is None


def test_a_run_made_before_digests_still_resumes(tmp_path):
    """Its stored settings have no digest: the guard takes today's (its path decided, as when it was made)."""
    from venus_utils.core.io import write_json
    from venus_utils.rl.config import IGPOConfig
    from venus_utils.rl.stage import resume_settings

    sft = _model(tmp_path / "sft", b"weights")
    now = resume_settings(IGPOConfig(), sft, [{"id": "q1"}])
    folder = tmp_path / "04"
    _checkpoint(folder)
    write_json(folder / "resume_settings.json", {k: v for k, v in now.items() if k != "sft_model_digest"})
    with pytest.raises(ValueError, match="sft_model_digest"):
        guard_resume(folder, now)  # without the default the missing key is a change
    guard_resume(folder, now, defaults={"sft_model_digest": now["sft_model_digest"]})


def test_sft_records_its_base_models_digest(tmp_path):
    from venus_utils.sft.config import SFTConfig
    from venus_utils.sft.trainer import resume_settings

    rows = [{"length": 10}]
    base = _model(tmp_path / "tiny_model", b"a world's tiny model")
    first = resume_settings(SFTConfig(), base, rows)
    _model(base, b"another world's tiny model")
    second = resume_settings(SFTConfig(), base, rows)
    assert first["base_model"] == second["base_model"] and first["base_model_digest"] != second["base_model_digest"]
    assert resume_settings(SFTConfig(), "Qwen/Qwen3-4B-Thinking-2507", rows)["base_model_digest"] is None
