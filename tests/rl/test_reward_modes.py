"""IGPO against outcome-only GRPO (``IGPOConfig.reward_mode``), and the share of groups that carry a signal."""

from __future__ import annotations

import math

import pytest

from venus_utils.rl.advantages import compute_turn_advantages
from venus_utils.rl.config import NORM_MODES, IGPOConfig
from venus_utils.rl.rewards import Episode, episode_rewards, igpo_outcome_reward, igpo_turn_reward, reward_functions
from venus_utils.rl.step_batch import group_signal, process_advantages

EPS = 1e-6


def _episode(group: str, info_gain, errors, judge: float) -> Episode:
    """Three turns (visit, visit, answer) over 15 completion tokens; turn rewards sit before 5 and 10."""
    ep = Episode(
        question="q",
        ground_truth="a",
        prompt_ids=[1, 2, 3],
        completion_ids=list(range(15)),
        assistant_mask=[1] * 15,
        boundaries=[3, 8, 13],
        turns=["t0", "t1", "t2"],
        tool_names=["visit", "visit", None],
        group=group,
    )
    ep.info_gain, ep.format_errors, ep.judge_score = list(info_gain), list(errors), judge
    return ep


def _batch(ig_shift: float = 0.0) -> list[Episode]:
    """Group A: outcomes differ, a malformed tool turn and a malformed answer turn.  Group B: every rollout right,
    only the information gain differs.  ``ig_shift`` changes every IG value."""
    s = ig_shift
    return [
        _episode("A", [0.5 + s, 0.1 + s], [None, None, None], 1.0),
        _episode("A", [0.2 + s, None], ["text before the first <think>", None, None], 0.0),
        _episode("A", [None, 0.3 + s], [None, None, "needs exactly one <answer>...</answer>"], 1.0),
        _episode("B", [0.9 + s, 0.4 + s], [None, None, None], 1.0),
        _episode("B", [-0.2 + s, 0.0 + s], [None, None, None], 1.0),
    ]


def _advantages(episodes, cfg):
    turn_fn, outcome_fn = reward_functions(cfg)
    rewards = [episode_rewards(ep, turn_fn(ep), outcome_fn(ep), None) for ep in episodes]
    gathered = [
        (r, len(ep.completion_ids), ep.group, ep.judge_score, hash(tuple(ep.completion_ids)))
        for r, ep in zip(rewards, episodes)
    ]
    stats: dict = {}
    return rewards, process_advantages(gathered, 0, len(episodes), cfg, stats), stats


def test_reward_mode_is_checked():
    assert IGPOConfig().reward_mode == "igpo"
    with pytest.raises(ValueError, match="reward_mode=.*expected one of"):
        IGPOConfig(reward_mode="ppo")


def test_grpo_rewards_are_the_judged_outcome_alone():
    episodes = _batch()
    turn_fn, outcome_fn = reward_functions(IGPOConfig(reward_mode="grpo"))
    assert [turn_fn(ep) for ep in episodes] == [[None, None]] * len(episodes)  # no IG, no format penalty
    assert [outcome_fn(ep) for ep in episodes] == [1.0, 0.0, 1.0, 1.0, 1.0]  # a malformed answer turn keeps its score


def test_igpo_rewards_are_dr_venus_defaults_unchanged():
    cfg = IGPOConfig(reward_mode="igpo")
    turn_fn, outcome_fn = reward_functions(cfg)
    for ep in _batch():
        assert turn_fn(ep) == igpo_turn_reward(ep, cfg.format_penalty, cfg.use_format_penalty)
        assert outcome_fn(ep) == igpo_outcome_reward(ep, cfg.format_penalty, cfg.use_format_penalty)
    assert reward_functions(cfg)[0](_batch()[1]) == [-1.0, None]  # the malformed turn's IG became the penalty
    assert reward_functions(cfg)[1](_batch()[2]) == -1.0


@pytest.mark.parametrize("mode", NORM_MODES)
def test_grpo_advantages_are_outcome_only_group_z_scores_on_every_token(mode):
    cfg = IGPOConfig(reward_mode="grpo", norm_mode=mode, adv_eps=EPS)
    rewards, adv, stats = _advantages(_batch(), cfg)
    assert all(set(r) == {14} for r in rewards)  # the outcome position only: nothing from IG or penalties
    outcomes = {"A": [1.0, 0.0, 1.0], "B": [1.0, 1.0]}
    expected = []
    for _g, values in outcomes.items():
        mean = sum(values) / len(values)
        std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values) + 1e-8)
        expected += [(v - mean) / (std + EPS) for v in values]
    for row, want in zip(adv, expected):
        assert row == pytest.approx([want] * 15, abs=1e-9)  # broadcast to every token, as the outcome segment
    assert stats["num_ig_positions"] == 0
    _, shifted, _ = _advantages(_batch(ig_shift=0.37), cfg)
    assert shifted == adv  # the information gain contributes nothing


def test_igpo_advantages_keep_the_turn_rewards():
    cfg = IGPOConfig(reward_mode="igpo", adv_eps=EPS)
    episodes = _batch()
    rewards, adv, _ = _advantages(episodes, cfg)
    direct = compute_turn_advantages(
        rewards,
        [15] * len(episodes),
        [ep.group for ep in episodes],
        gamma=cfg.gamma,
        mode=cfg.norm_mode,
        eps=cfg.adv_eps,
    )
    assert adv == direct  # the trainer's path is the existing IGPO computation
    grpo = _advantages(episodes, IGPOConfig(reward_mode="grpo", adv_eps=EPS))[1]
    assert adv != grpo
    assert any(abs(a) > 1e-3 for a in adv[3])  # group B: every rollout right, yet IG moves it
    assert _advantages(_batch(ig_shift=0.37), cfg)[1] != adv


def test_groups_with_signal_counts_outcome_variance_and_any_signal():
    _, _, grpo = _advantages(_batch(), IGPOConfig(reward_mode="grpo"))
    assert (grpo["groups"], grpo["groups_with_signal"], grpo["groups_with_any_signal"]) == (2, 0.5, 0.5)
    _, _, igpo = _advantages(_batch(), IGPOConfig(reward_mode="igpo"))
    assert (igpo["groups"], igpo["groups_with_signal"], igpo["groups_with_any_signal"]) == (2, 0.5, 1.0)


def test_group_signal_skips_failed_rollouts_and_single_rollout_groups():
    scores = [1.0, 0.0, 0.0, 1.0, 1.0, 1.0]
    lengths = [3, 3, 0, 3, 3, 3]
    groups = ["a", "a", "b", "c", "c", "d"]
    advantages = [[1.0] * 3, [-1.0] * 3, [], [1e-12] * 3, [0.0] * 3, [0.0] * 3]
    got = group_signal(lengths, groups, scores, advantages)
    # b (only a failed rollout) takes no part; c: one outcome, rounding noise only; d: a single rollout
    assert got == {
        "groups": 3,
        "groups_with_signal": pytest.approx(1 / 3),
        "groups_with_any_signal": pytest.approx(1 / 3),
    }
    assert group_signal([], [], [], []) == {"groups": 0, "groups_with_signal": 0.0, "groups_with_any_signal": 0.0}


def test_checkpoint_limit_and_reward_mode_in_the_resume_settings():
    from venus_utils.rl.stage import resume_settings

    assert IGPOConfig().save_total_limit == 2 and IGPOConfig(save_total_limit=None).save_total_limit is None
    with pytest.raises(ValueError, match="save_total_limit=0"):
        IGPOConfig(save_total_limit=0)
    rows = [{"id": "q1"}]
    igpo, grpo = (resume_settings(IGPOConfig(reward_mode=m), "sft", rows) for m in ("igpo", "grpo"))
    assert igpo["reward_mode"] == "igpo" and igpo != grpo  # a folder's checkpoints never resume the other arm
    assert "save_total_limit" not in igpo  # may change on a resume


def test_reward_functions_and_search_cost_define_the_run(tmp_path):
    """An edited reward cell (issue 21) or another search cost is another run: its checkpoints are never resumed
    nor restored as the finished model of the old rewards."""
    from venus_utils.core.checkpoints import guard_resume
    from venus_utils.rl.rewards import reward_fingerprint
    from venus_utils.rl.stage import resume_settings

    def turn_reward(ep):
        return [None] * (ep.num_turns - 1)

    same = {}
    exec("def turn_reward(ep):\n    return [None] * (ep.num_turns - 1)\n", same)  # no source text: by its code
    edited = {}
    exec("def turn_reward(ep):\n    return [0.5] * (ep.num_turns - 1)\n", edited)
    assert reward_fingerprint(turn_reward).startswith("test_reward_functions_and_search_cost_define_the_run.")
    assert reward_fingerprint(same["turn_reward"]) != reward_fingerprint(edited["turn_reward"])
    assert reward_fingerprint(same["turn_reward"]) == reward_fingerprint(dict(same)["turn_reward"])
    assert reward_fingerprint(None) is None

    rows = [{"id": "q1"}]
    run = resume_settings(IGPOConfig(), "sft", rows, rewards={"turn_reward": same["turn_reward"]})
    (tmp_path / "checkpoint-2").mkdir()
    (tmp_path / "checkpoint-2" / "config.json").write_text("{}")
    (tmp_path / "checkpoint-2" / "trainer_state.json").write_text('{"global_step": 2}')
    guard_resume(tmp_path, run)
    guard_resume(tmp_path, resume_settings(IGPOConfig(), "sft", rows, rewards={"turn_reward": same["turn_reward"]}))
    for changed in (
        resume_settings(IGPOConfig(), "sft", rows, rewards={"turn_reward": edited["turn_reward"]}),
        resume_settings(IGPOConfig(search_cost=0.1), "sft", rows, rewards={"turn_reward": same["turn_reward"]}),
    ):
        with pytest.raises(ValueError, match="made with other settings") as info:
            guard_resume(tmp_path, changed)
        assert "turn_reward" in str(info.value) or "search_cost" in str(info.value)
    with pytest.raises(ValueError, match="unknown reward functions"):
        resume_settings(IGPOConfig(), "sft", rows, rewards={"turn_rewards": turn_reward})


def test_groups_with_signal_counts_judge_scores_the_same_way_in_every_arm():
    """A group judged all right, one of whose answers is malformed: IGPO's outcome rewards differ (1 and the -1
    penalty), the judge's verdicts do not.  Every arm reports no outcome signal for it (issue 21); the penalty still
    moves IGPO's advantages (``groups_with_any_signal``)."""
    episodes = [
        _episode("C", [0.4, 0.1], [None, None, None], 1.0),
        _episode("C", [0.4, 0.1], [None, None, "needs exactly one <answer>...</answer>"], 1.0),
    ]
    _, _, igpo = _advantages(episodes, IGPOConfig(reward_mode="igpo", adv_eps=EPS))
    _, _, grpo = _advantages(episodes, IGPOConfig(reward_mode="grpo", adv_eps=EPS))
    assert igpo["groups_with_signal"] == grpo["groups_with_signal"] == 0.0
    assert igpo["groups_with_any_signal"] == 1.0 and grpo["groups_with_any_signal"] == 0.0


def test_groups_whose_rollouts_are_one_trajectory_are_counted():
    from venus_utils.rl.step_batch import group_signal

    lengths, groups = [3, 3, 3, 3, 3], ["a", "a", "b", "b", "c"]
    got = group_signal(lengths, groups, [1.0] * 5, [[0.0] * 3] * 5, digests=[7, 7, 1, 2, 9])
    assert got["groups_identical"] == 0.5  # a: the same twice; b: two trajectories; c: a single rollout, not counted
    assert "groups_identical" not in group_signal(lengths, groups, [1.0] * 5, [[0.0] * 3] * 5)
