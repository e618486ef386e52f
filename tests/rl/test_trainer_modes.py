"""IGPOTrainer on the micro model: the GRPO arm, group-signal metrics, checkpoint rotation and the model card."""

from __future__ import annotations

import pytest

from venus_utils.core.io import read_jsonl
from venus_utils.rl.igpo_trainer import IGPOTrainer, grpo_args
from venus_utils.rl.rollout import make_agent_rollout

from .test_trainer import ROWS, EchoTools, exact_judge, small_cfg


def _trainer(tiny_lm, out, cfg, resume_step=None, **kw):
    from datasets import Dataset

    model, tok = tiny_lm
    return IGPOTrainer(
        model,
        tok,
        Dataset.from_list(ROWS),
        cfg,
        grpo_args(cfg, out),
        rollout_fn=make_agent_rollout(EchoTools()),
        judge=exact_judge,
        resume_step=resume_step,
        **kw,
    )


def test_grpo_arm_trains_on_the_judged_outcome_only(tiny_lm, tmp_path):
    cfg = small_cfg(reward_mode="grpo", max_turns=2, max_tokens_per_turn=8)
    with pytest.raises(ValueError, match="reward_mode='grpo'"):
        _trainer(tiny_lm, tmp_path / "refused", cfg, turn_reward=lambda ep: ep.info_gain)
    trainer = _trainer(tiny_lm, tmp_path, cfg)
    trainer.train()
    episodes = read_jsonl(tmp_path / "episodes.jsonl")
    assert len(episodes) == 8
    for e in episodes:
        assert e["turn_rewards"] == [None] * (e["num_turns"] - 1)  # no turn reward position at all
        assert e["outcome"] == e["judge_score"]  # no format penalty on the outcome either
    steps = [r for r in read_jsonl(tmp_path / "metrics.jsonl") if "reward" in r]
    assert len(steps) == 2
    for r in steps:
        assert r["ig_positions"] == 0 and "ig_scale" not in r
        assert 0.0 <= r["groups_with_signal"] <= 1.0 and r["groups_with_any_signal"] == r["groups_with_signal"]


def test_only_the_newest_checkpoints_are_kept_and_resume_still_works(tiny_lm, tmp_path):
    from venus_utils.rl.policy import save_policy

    cfg = small_cfg(max_steps=4, save_steps=1, max_turns=2, max_tokens_per_turn=8)
    assert cfg.save_total_limit == 2 and grpo_args(cfg, tmp_path).save_total_limit == 2
    trainer = _trainer(tiny_lm, tmp_path, cfg, turn_reward=lambda ep: ep.info_gain)
    trainer.train()
    assert sorted(p.name for p in tmp_path.glob("checkpoint-*")) == ["checkpoint-3", "checkpoint-4"]
    steps = [r for r in read_jsonl(tmp_path / "metrics.jsonl") if "reward" in r]
    assert len(steps) == 4 and all(0.0 <= r["groups_with_any_signal"] <= 1.0 for r in steps)

    resumed = _trainer(
        tiny_lm,
        tmp_path,
        small_cfg(max_steps=5, save_steps=1, max_turns=2, max_tokens_per_turn=8),
        resume_step=4,
        turn_reward=lambda ep: ep.info_gain,
    )
    resumed.train(resume_from_checkpoint=str(tmp_path / "checkpoint-4"))
    assert resumed.state.global_step == 5
    assert sorted(p.name for p in tmp_path.glob("checkpoint-*")) == ["checkpoint-4", "checkpoint-5"]
    assert {e["step"] for e in read_jsonl(tmp_path / "episodes.jsonl")} == {0, 1, 2, 3, 4}
    # no TRL model card anywhere: not in the stage folder, not in a checkpoint
    assert not list(tmp_path.rglob("README.md"))

    model_dir = save_policy(
        resumed,
        tiny_lm[1],
        tmp_path / "model",
        base_model="runs/x/03_sft_unsloth/model",
        profile="cpu",
        heldout={"accuracy (SFT)": 0.25, "accuracy (RL)": 0.5},
    )
    card = (model_dir / "README.md").read_text()
    for text in (
        "runs/x/03_sft_unsloth/model",
        "| stage | 04_igpo_rl |",
        "| profile | cpu |",
        "| reward mode | igpo |",
        "| RL steps | 5 |",
        "| held-out accuracy (RL) | 0.5 |",
        "information-gain turn rewards",
    ):
        assert text in card, text
    assert "[None]" not in card and (model_dir / "config.json").exists()
    assert [p.name for p in tmp_path.rglob("README.md")] == ["README.md"]  # only the model's own card


@pytest.mark.parametrize("on", [False, True])
def test_gradient_checkpointing_in_the_update_follows_the_config(on, tiny_lm, tmp_path):
    """TRL's GRPOConfig turns it on by default; the CPU lesson sets it off (a recomputed forward per update)."""
    cfg = small_cfg(max_steps=1, max_turns=2, max_tokens_per_turn=8, gradient_checkpointing=on)
    assert grpo_args(cfg, tmp_path).gradient_checkpointing is on
    trainer = _trainer(tiny_lm, tmp_path, cfg)
    trainer.train()  # the Trainer turns it on when training starts
    assert trainer.state.global_step == 1 and trainer.model.is_gradient_checkpointing is on


def test_an_advantage_rule_replaces_the_library_s_in_training(tiny_lm, tmp_path):
    """Issue 23: notebook 04's advantage cell is trained: the trainer hands the step's batch to the rule (turn rewards,
    outcomes, groups) and gives every token of a turn the turn's advantage (one value per turn: each trained token
    gets it, none is left at 0)."""
    seen = []

    def turn_advantages(turn_rewards, outcomes, groups):
        seen.append((len(turn_rewards), sorted(set(groups))))
        return [[0.25] * (len(rewards) + 1) for rewards in turn_rewards]

    cfg = small_cfg(max_steps=1)
    trainer = _trainer(tiny_lm, tmp_path, cfg, turn_advantages=turn_advantages)
    trainer.train()
    assert seen and seen[0][0] == cfg.prompts_per_step * cfg.num_generations and len(seen[0][1]) == 2
    step = read_jsonl(tmp_path / "metrics.jsonl")[0]
    assert step["adv_abs_mean"] == pytest.approx(0.25) and step["adv_nonzero_frac"] == 1.0

    with pytest.raises(ValueError, match="only with reward_mode='igpo'"):
        _trainer(tiny_lm, tmp_path / "grpo", small_cfg(reward_mode="grpo"), turn_advantages=turn_advantages)


def test_an_advantage_rule_of_the_wrong_shape_is_an_error_that_says_so():
    from venus_utils.rl.step_batch import rule_advantages

    turns = [([0.5], 1.0, [(0, 3), (3, 5)]), ([], 0.0, [(0, 4)])]
    got = rule_advantages(lambda r, o, g: [[1.0, 2.0], [3.0]], turns, [5, 4], ["a", "a"])
    assert got == [[1.0, 1.0, 1.0, 2.0, 2.0], [3.0] * 4]
    with pytest.raises(ValueError, match="one advantage per turn"):
        rule_advantages(lambda r, o, g: [[1.0], [3.0]], turns, [5, 4], ["a", "a"])
    with pytest.raises(ValueError, match="one row per rollout"):
        rule_advantages(lambda r, o, g: [[1.0, 2.0]], turns, [5, 4], ["a", "a"])
    with pytest.raises(ValueError, match="not a finite number"):
        rule_advantages(lambda r, o, g: [[1.0, float("nan")], [3.0]], turns, [5, 4], ["a", "a"])


def test_a_rule_s_batch_reports_the_counts_the_library_reports():
    """With notebook 04's advantage rule the step's metrics still count reward positions and groups (ig_positions)."""
    from venus_utils.rl.config import IGPOConfig
    from venus_utils.rl.step_batch import process_advantages

    turns = [([0.5, None], 1.0, [(0, 2), (2, 4), (4, 5)]), ([-1.0], 1.0, [(0, 3), (3, 4)]), ([], 0.0, [])]
    gathered = [({}, 5, "a", 1.0, 1), ({}, 4, "a", 1.0, 2), ({}, 0, "b", 0.0, 3)]  # the last one failed: no tokens
    stats = {}

    def rule(rewards, outcomes, groups):
        return [[0.0] * (len(x) + 1) for x in rewards]

    process_advantages(gathered, 0, 3, IGPOConfig(), stats, turn_advantages=rule, turns=turns)
    assert (stats["num_ig_positions"], stats["num_samples"], stats["num_groups"]) == (2, 2, 1)
    assert stats["all_same_outcome_groups"] == 1 and stats["groups_with_signal"] == 0.0
