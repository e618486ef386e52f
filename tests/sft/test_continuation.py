"""The control arm's schedule and step count (issue 40): :mod:`venus_utils.sft.continuation`."""

from __future__ import annotations

import math

import pytest

from venus_utils.core.checkpoints import read_train_clock, write_train_clock
from venus_utils.core.io import write_json
from venus_utils.sft.config import SFTConfig
from venus_utils.sft.continuation import (
    control_steps,
    lr_factor,
    seed_checkpoints,
    step_flops,
    stopped_checkpoint,
)


def test_the_schedule_starts_where_sft_stopped_and_anneals_to_the_floor():
    f = lr_factor(start_step=1800, steps=400, start=0.67, floor=0.1)
    assert f(1800) == pytest.approx(0.67) and f(2200) == pytest.approx(0.1) and f(2600) == pytest.approx(0.1)
    assert f(2000) == pytest.approx(0.1 + 0.57 * 0.5)  # half-way: the cosine's middle
    values = [f(s) for s in range(1800, 2201)]
    assert values == sorted(values, reverse=True)


def test_the_step_count_matches_the_budget_and_refuses_a_missing_one():
    assert control_steps(1e12, 2.5e9) == 400 and control_steps(1e3, 2.5e9) == 1
    for bad in (None, 0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="FLOPs must be a positive number"):
            control_steps(bad, 1e9)


class _Config:  # what step_flops reads of a model config
    hidden_size, vocab_size, num_attention_heads, num_key_value_heads, head_dim = 8, 10, 2, 1, 4
    num_hidden_layers, intermediate_size = 1, 16


def test_one_steps_flops_follow_the_batching():
    """Padded to the longest row of each micro-batch, output layer on the trained positions, x3 for the backward."""
    rows = [{"length": 10, "n_loss": 4}, {"length": 6, "n_loss": 2}]
    layers = 2 * (8 * 4 * (2 * 2 + 2 * 1) + 3 * 8 * 16)  # per position
    head = 2 * 8 * 10
    batch = dict(global_batch_size=2, micro_batch_size=2, pad_to_multiple_of=1)
    padded = SFTConfig(batching="padded", **batch)
    assert step_flops(rows, padded, _Config) == pytest.approx(3 * (layers * 20 + head * 6))
    free = SFTConfig(batching="padding_free", **batch)
    assert step_flops(rows, free, _Config) == pytest.approx(3 * (layers * 16 + head * 6))
    rounded = SFTConfig(batching="padded", **{**batch, "pad_to_multiple_of": 64})  # widths rounded up, as collated
    assert step_flops(rows, rounded, _Config) == pytest.approx(3 * (layers * 128 + head * 64))


def test_a_run_that_never_finished_cannot_be_continued(tmp_path):
    with pytest.raises(FileNotFoundError, match="no finished SFT run"):
        stopped_checkpoint(tmp_path)
    write_json(tmp_path / "checkpoints" / "finished.json", {"step": 5, "limits": {}})
    with pytest.raises(FileNotFoundError, match="checkpoint-5"):
        stopped_checkpoint(tmp_path)


def test_the_control_starts_from_a_copy_of_the_stopped_checkpoint_with_its_own_clock(tmp_path):
    """The copy's training clock starts at zero (the control's training time is its own, not SFT's 30 minutes);
    the SFT run's checkpoint is left as it was, and a control with checkpoints of its own is not seeded again."""
    sft = tmp_path / "03_sft"
    ckpt = sft / "checkpoints" / "checkpoint-5"
    write_json(ckpt / "trainer_state.json", {"global_step": 5, "log_history": [{"step": 5, "learning_rate": 2e-4}]})
    write_train_clock(ckpt, 1800.0)
    write_json(sft / "checkpoints" / "finished.json", {"step": 5, "limits": {}})
    write_json(sft / "checkpoints" / "resume_settings.json", {})
    control = tmp_path / "04_control"
    assert seed_checkpoints(sft, control) == (5, 2e-4)
    copy = control / "checkpoints" / "checkpoint-5"
    assert read_train_clock(copy) == 0.0 and read_train_clock(ckpt) == 1800.0
    write_train_clock(copy, 60.0)  # the control trained on
    seed_checkpoints(sft, control)
    assert read_train_clock(copy) == 60.0 and not list((control / "checkpoints").glob(".*partial"))
