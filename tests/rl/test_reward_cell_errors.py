"""Issue 42: a reward or advantage cell of notebook 04 that raises or returns what is not a finite number within
``REWARD_BOUND`` stops training with one message naming the cell, the RL step, the question and the value, and
nothing is saved; issue 39: the update runs under bf16 autocast where ``precision`` says so."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from venus_utils.rl.config import IGPOConfig
from venus_utils.rl.rewards import REWARD_BOUND, RewardCellError, call_reward_cell
from venus_utils.rl.step_batch import rule_advantages

from .test_trainer import _trainer, small_cfg


def own_copy(tiny_lm):
    """The session's micro model, copied: training here must not move the model other tests start from."""
    model, tok = tiny_lm
    return copy.deepcopy(model), tok


class Ep:
    question = "Which year was Kent founded?"


def nan_turns(ep):
    return [float("nan")]


def none_turns(ep):
    return None


def nested_turns(ep):
    return [[0.1, 0.2]]


def raising_turns(ep):
    raise KeyError("info_gan")


def text_turns(ep):
    return ["0.5"]


def huge_turns(ep):
    return [1e300]


@pytest.mark.parametrize(
    "cell, says",
    [
        (nan_turns, "nan, not a finite number"),
        (none_turns, "returned None: expected a list"),
        (nested_turns, "list [0.1, 0.2], not a number"),
        (raising_turns, "raised KeyError: 'info_gan'"),
        (text_turns, "str '0.5', not a number"),
        (huge_turns, f"1e+300, outside [-{REWARD_BOUND:g}, {REWARD_BOUND:g}]"),
    ],
)
def test_a_bad_turn_reward_cell_is_named_with_its_step_question_and_value(cell, says):
    with pytest.raises(RewardCellError) as caught:
        call_reward_cell(cell, Ep(), "turn", step=7)
    text = str(caught.value)
    assert text.startswith(f"{cell.__name__} at RL step 7 on question 'Which year was Kent founded?'")
    assert says in text and "\n" not in text


def test_an_outcome_cell_must_return_one_number():
    assert call_reward_cell(lambda ep: 1, Ep(), "outcome", step=0) == 1.0
    for bad, says in (("1", "str '1', not a number"), (True, "bool True"), ([1.0], "list [1.0]"), (math.inf, "inf")):
        with pytest.raises(RewardCellError, match="at RL step 3 on question") as caught:
            call_reward_cell(lambda ep, bad=bad: bad, Ep(), "outcome", step=3)
        assert says in str(caught.value)
    assert call_reward_cell(lambda ep: [0.5, None], Ep(), "turn") == [0.5, None]


def test_a_bad_advantage_rule_is_named_with_its_step_question_and_value():
    turns = [([0.5], 1.0, [(0, 3), (3, 5)])]

    def turn_advantages(rewards, outcomes, groups):
        return [[0.1, "x"]]

    with pytest.raises(RewardCellError, match=r"turn_advantages at RL step 4 on question 'q1' gave str 'x'"):
        rule_advantages(turn_advantages, turns, [5], ["q1"], step=4)
    with pytest.raises(RewardCellError, match="gave None for 1 rollouts"):
        rule_advantages(lambda r, o, g: None, turns, [5], ["q1"], step=4)
    with pytest.raises(RewardCellError, match="raised ZeroDivisionError"):
        rule_advantages(lambda r, o, g: [[1 / 0]], turns, [5], ["q1"], step=4)
    with pytest.raises(RewardCellError, match="outside"):
        rule_advantages(lambda r, o, g: [[0.0, 1e300]], turns, [5], ["q1"], step=4)
    assert rule_advantages(lambda r, o, g: [[0.25, -1]], turns, [5], ["q1"]) == [[0.25] * 3 + [-1.0] * 2]


@pytest.mark.parametrize("cell", [nan_turns, text_turns, huge_turns, raising_turns])
def test_training_stops_at_a_bad_cell_and_saves_nothing(tiny_lm, tmp_path, cell):
    """Notebook 04's path: the trainer calls the cell on every episode of the step; the first bad value stops it
    before any update, and no checkpoint or model appears."""

    def turn_reward(ep):
        return [cell(ep)[0]] * (ep.num_turns - 1) if ep.num_turns > 1 else []

    trainer = _trainer(own_copy(tiny_lm), tmp_path, small_cfg(max_steps=1), turn_reward=turn_reward)
    with pytest.raises(RewardCellError, match=r"^turn_reward at RL step 0 on question '(Which year|Who founded)"):
        trainer.train()
    assert trainer.state.global_step == 0
    assert not list(tmp_path.glob("checkpoint-*")) and not (tmp_path / "model").exists()


def test_precision_says_whether_the_update_runs_under_bf16_autocast(tiny_lm, tmp_path):
    assert IGPOConfig(precision="bf16").uses_bf16("cpu") and not IGPOConfig(precision="fp32").uses_bf16("cuda")
    with pytest.raises(ValueError, match="precision=.*expected one of"):
        IGPOConfig(precision="fp16")
    for precision in ("bf16", "fp32"):
        cfg = small_cfg(max_steps=1, precision=precision, save_steps=100)
        trainer = _trainer(own_copy(tiny_lm), tmp_path / precision, cfg, turn_reward=None)
        with trainer._cpu_autocast():
            assert torch.is_autocast_enabled("cpu") == (precision == "bf16")
        trainer.train()  # the update and the reference log-probs run in it
        assert trainer.state.global_step == 1
        logged = [r for r in trainer.metric_rows if "loss" in r]
        assert logged and math.isfinite(logged[-1]["loss"]) and math.isfinite(logged[-1]["kl"])
