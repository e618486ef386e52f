"""The control arm's schedule and step count (issue 40): :mod:`venus_utils.sft.continuation`."""

from __future__ import annotations

import itertools
import math

import pytest

from venus_utils.core.checkpoints import read_train_clock, write_train_clock
from venus_utils.core.io import write_json
from venus_utils.sft.config import SFTConfig
from venus_utils.sft.continuation import (
    control_steps,
    lr_factor,
    planned_steps,
    seed_checkpoints,
    step_costs,
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


def _varied_rows(n=24):  # rows of many lengths, so that steps differ in cost
    return [{"length": 40 + 37 * (i * 7 % n), "n_loss": 10 + 3 * (i * 5 % n)} for i in range(n)]


def test_the_plan_spends_the_budget_to_within_half_a_step():
    rows = _varied_rows()
    cfg = SFTConfig(batching="grouped", global_batch_size=4, micro_batch_size=2, seed=3)
    costs = list(itertools.islice(step_costs(rows, cfg, _Config, start_step=5), 20))
    assert len(set(costs)) > 3  # the steps' costs differ: a mean would miss the budget
    budget = sum(costs[:7]) + 0.4 * costs[7]
    steps, planned = planned_steps(rows, cfg, _Config, 5, budget)
    assert steps == 7 and planned == pytest.approx(sum(costs[:7]))
    steps, planned = planned_steps(rows, cfg, _Config, 5, sum(costs[:7]) + 0.6 * costs[7])
    assert steps == 8 and abs(planned - budget) <= costs[7] / 2 + 0.2 * costs[7]
    assert planned_steps(rows, cfg, _Config, 5, costs[0] * 0.1) == (1, costs[0])  # at least one step
    # an epoch is 6 steps (24 rows / 4): step 5 is epoch 0's last, step 6 epoch 1's first, as the trainer counts them
    epoch1 = list(itertools.islice(step_costs(rows, cfg, _Config, start_step=6), 6))
    assert costs[1:7] == epoch1 and sum(epoch1) == pytest.approx(6 * step_flops(rows, cfg, _Config), rel=0.3)
    with pytest.raises(ValueError, match="more than"):
        planned_steps(rows, cfg, _Config, 5, 1e30)


def test_without_a_known_order_every_step_costs_the_mean():
    rows = _varied_rows()
    cfg = SFTConfig(batching="padded", global_batch_size=4, micro_batch_size=2, seed=3)
    mean = step_flops(rows, cfg, _Config)
    assert planned_steps(rows, cfg, _Config, 5, 10.4 * mean) == (10, pytest.approx(10 * mean))


@pytest.mark.parametrize(
    "n_rows, batch, pad",
    [(12, 4, 1), (13, 6, 8)],  # whole steps; then a short last step and a lone row in its micro-batch, widths rounded
)
def test_the_plan_costs_the_batches_a_resumed_run_trains_on(micro_model_dir, tmp_path, n_rows, batch, pad):
    """Each logged step's counted FLOPs equal the plan's for that step, across epochs, after a resume mid-epoch (the
    control resumes the stopped SFT run): the plan reads the data in the trainer's order."""
    from transformers import AutoConfig, AutoTokenizer

    from venus_utils.modeling import synthetic_conversations
    from venus_utils.sft import build_examples, train_sft

    tok = AutoTokenizer.from_pretrained(micro_model_dir)
    conversations = [c["messages"] for c in synthetic_conversations(n_rows, seed=4)]
    rows = build_examples(conversations, tok, max_length=4096).rows
    base = dict(
        engine="trl", learning_rate=1e-3, global_batch_size=batch, micro_batch_size=2, logging_steps=1, save_steps=2,
        eval_steps=None, max_length=4096, gradient_checkpointing=False, device="cpu", batching="grouped", seed=5,
        pad_to_multiple_of=pad,
    )  # fmt: skip
    train_sft(SFTConfig(max_steps=2, **base), micro_model_dir, rows, tmp_path)
    resumed = train_sft(SFTConfig(max_steps=9, **base), micro_model_dir, rows, tmp_path)  # 3 steps an epoch
    logged = [h["flops"] for h in resumed.history if h.get("step", 0) > 2 and "flops" in h]
    config = AutoConfig.from_pretrained(micro_model_dir)
    planned = list(itertools.islice(step_costs(rows, SFTConfig(**base), config, start_step=2), 7))
    assert len(logged) == 7 and len(set(planned)) > 2
    assert logged == pytest.approx(planned, rel=1e-9)
