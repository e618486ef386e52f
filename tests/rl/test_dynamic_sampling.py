"""DAPO-style dynamic sampling: groups without an outcome signal are set aside and the step is refilled."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest

from venus_utils.core.io import read_jsonl
from venus_utils.rl.config import IGPOConfig
from venus_utils.rl.igpo_trainer import IGPOTrainer, grpo_args
from venus_utils.rl.rollout import make_agent_rollout
from venus_utils.rl.step_batch import DynamicBatch
from venus_utils.rl.training_rows import rl_rows

from .test_trainer import EchoTools, exact_judge, small_cfg


def _group(gid, scores):
    return [SimpleNamespace(group=gid, judge_score=s) for s in scores]


def test_without_dynamic_sampling_the_first_round_is_the_batch_and_is_counted():
    batch = DynamicBatch(6, 2, dynamic_sampling=False)
    first = _group("a", [1, 1]) + _group("b", [0, 1]) + _group("c", [0, 0])
    batch.add(first)
    assert batch.full and batch.episodes() == first
    assert batch.stats() == {
        "groups_sampled": 3,
        "sampled_groups_with_signal": pytest.approx(1 / 3),
        "groups_dropped": 0,
        "sampling_rounds": 1,
    }


def test_dynamic_sampling_keeps_signal_groups_first_and_tops_up_with_the_others():
    batch = DynamicBatch(6, 2, dynamic_sampling=True)
    batch.add(_group("a", [1, 1]) + _group("b", [0, 1]) + _group("c", [0, 0]))
    assert not batch.full and batch.seen == {"a", "b", "c"}
    batch.add(_group("d", [0, 0]) + _group("e", [1, 0]) + _group("f", [1, 1]))
    assert not batch.full  # 2 of the 3 groups the step needs
    # the rounds ran out: the groups with a signal come first, then the first set-aside ones
    assert [ep.group for ep in batch.episodes()] == ["b", "b", "e", "e", "a", "a"]
    assert batch.stats() == {
        "groups_sampled": 6,
        "sampled_groups_with_signal": pytest.approx(2 / 6),
        "groups_dropped": 3,
        "sampling_rounds": 2,
    }
    batch.add(_group("g", [0.5, 1]) + _group("h", [1, 1]) + _group("i", [0, 1]))
    assert batch.full and [ep.group for ep in batch.episodes()] == ["b", "b", "e", "e", "g", "g"]


def test_dynamic_sampling_refuses_groups_of_the_wrong_size():
    with pytest.raises(ValueError, match="groups of 4"):
        DynamicBatch(6, 4, dynamic_sampling=True)
    batch = DynamicBatch(4, 2, dynamic_sampling=True)
    with pytest.raises(ValueError, match="group 'a' has 3 rollouts"):
        batch.add(_group("a", [1, 0, 1]) + _group("b", [1]))


ROWS = rl_rows(
    [
        {"id": "easy1", "question": "Which year was Kent founded?", "answer": "1987"},
        {"id": "easy2", "question": "Which year was Medway founded?", "answer": "1990"},
        {"id": "mixed1", "question": "Who founded Medway Labs?", "answer": "Karo"},
        {"id": "mixed2", "question": "Who founded Kent Works?", "answer": "Mitel"},
    ]
)


def scripted_rollout(tools):
    """The agent loop's rollouts, with answers set per question: the 'easy' questions are answered right by every
    rollout (no outcome signal), the 'mixed' ones right by every other rollout."""
    agent = make_agent_rollout(tools)

    def rollout(model, tokenizer, rows, cfg, llm=None):
        episodes = agent(model, tokenizer, rows, cfg, llm=llm)
        for k, (ep, row) in enumerate(zip(episodes, rows)):
            right = row["id"].startswith("easy") or k % 2 == 0
            ep.prediction = row["ground_truth"] if right else "no idea"
        return episodes

    return rollout


def test_the_trainer_refills_steps_with_groups_that_have_an_outcome_signal(tiny_lm, tmp_path):
    from datasets import Dataset

    model, tok = copy.deepcopy(tiny_lm[0]), tiny_lm[1]  # trained here: the session's model stays as it was
    kw = dict(max_steps=2, max_turns=2, max_tokens_per_turn=8, dynamic_sampling=True, max_sampling_rounds=4)
    # grpo: the outcome reward is the judge score itself (the micro model's malformed turns would turn IGPO's
    # outcome into the format penalty, -1 for every rollout)
    cfg = small_cfg(reward_mode="grpo", **kw)
    trainer = IGPOTrainer(
        model,
        tok,
        Dataset.from_list(ROWS),
        cfg,
        grpo_args(cfg, tmp_path),
        rollout_fn=scripted_rollout(EchoTools()),
        judge=exact_judge,
    )
    trainer.train()
    episodes = read_jsonl(tmp_path / "episodes.jsonl")
    assert len(episodes) == 8  # 2 steps x 2 groups x 2 rollouts: the batch keeps its size
    for step in (0, 1):  # only the two mixed questions are trained on, whatever the sampler drew first
        trained = {e["group"] for e in episodes if e["step"] == step}
        assert trained == {"mixed1", "mixed2"}, trained
    steps = [r for r in read_jsonl(tmp_path / "metrics.jsonl") if "reward" in r]
    for r in steps:
        assert r["groups_with_signal"] == 1.0 and r["adv_nonzero_frac"] > 0  # every trained group moves the policy
        assert r["groups_sampled"] == 2 * r["sampling_rounds"] or r["groups_sampled"] == 4
        assert r["sampled_groups_with_signal"] == pytest.approx(2 / r["groups_sampled"])
        assert r["groups_dropped"] == r["groups_sampled"] - 2


def test_refill_draws_unseen_questions_reproducibly_per_step_and_round(tiny_lm, tmp_path):
    from datasets import Dataset

    model, tok = copy.deepcopy(tiny_lm[0]), tiny_lm[1]
    cfg = small_cfg(dynamic_sampling=True)
    trainer = IGPOTrainer(
        model, tok, Dataset.from_list(ROWS), cfg, grpo_args(cfg, tmp_path), rollout_fn=None, judge=exact_judge
    )
    rows = trainer.refill_rows({"easy1", "mixed1"}, 1)
    assert [r["id"] for r in rows[::2]] in (["easy2", "mixed2"], ["mixed2", "easy2"])
    assert [r["id"] for r in rows] == [r["id"] for r in trainer.refill_rows({"easy1", "mixed1"}, 1)]
    assert rows[0] == rows[1]  # each question repeated for its group
    assert trainer.refill_rows({r["id"] for r in ROWS}, 1) == []  # nothing left to draw


def test_dynamic_sampling_is_a_config_field_with_a_bounded_number_of_rounds():
    assert IGPOConfig().dynamic_sampling is False  # DR-Venus trains without it
    with pytest.raises(ValueError, match="max_sampling_rounds"):
        IGPOConfig(max_sampling_rounds=0)


def test_arms_of_a_run_folder_include_dynamic_sampling_and_plot_the_rolled_out_signal(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import pandas as pd

    from venus_utils.core.io import write_json, write_jsonl
    from venus_utils.rl import run_report

    scored = pd.DataFrame({"id": ["a", "b", "c"], "correct": [True, False, True], "turns": [3, 4, 3]})
    old_run = [{"step": s, "reward": 0.5, "groups_with_signal": 0.25} for s in (1, 2)]  # logged before the keys
    ds_run = [
        {"step": s, "reward": 0.5, "groups_with_signal": 1.0, "groups_sampled": 10, "sampled_groups_with_signal": 0.4}
        for s in (1, 2)
    ]
    for folder, rows in (("04_igpo_rl", old_run), ("04_igpo_rl_ds", ds_run), ("04_igpo_rl_grpo", None)):
        (tmp_path / folder).mkdir()
        if rows is None:
            continue  # an arm that never finished: no summary.json
        write_json(tmp_path / folder / "summary.json", {"stage": folder})
        write_jsonl(tmp_path / folder / "metrics.jsonl", rows)
        scored.to_parquet(tmp_path / folder / "heldout_rl.parquet")
    assert run_report.arms(tmp_path) == {
        "IGPO": tmp_path / "04_igpo_rl",
        "IGPO + dynamic sampling": tmp_path / "04_igpo_rl_ds",
    }
    (tmp_path / "04_igpo_rl" / "summary.json").unlink()  # notebook 04 rerun: its own summary is not written yet
    assert list(run_report.arms(tmp_path)) == ["IGPO + dynamic sampling"]
    assert list(run_report.arms(tmp_path, current=tmp_path / "04_igpo_rl")) == ["IGPO", "IGPO + dynamic sampling"]
    fig = run_report.arms_figure(tmp_path, scored, tmp_path / "arms.png", current=tmp_path / "04_igpo_rl")
    assert fig is not None and (tmp_path / "arms.png").exists()
    signal = {
        line.get_label(): [float(y) for y in line.get_ydata()] for line in fig.axes[1].get_lines() if line.get_label()
    }
    assert [0.25, 0.25] in signal.values() and [0.4, 0.4] in signal.values()  # rolled-out share, old runs: trained

    why = run_report.why_no_gain({"n": 3}, pd.DataFrame(), pd.DataFrame(ds_run))["value"]
    assert why["groups rolled out per step"] == 10 and why["share of rolled-out groups with an outcome signal"] == 0.4


def test_advantage_by_tool_shows_what_the_update_pushed_each_kind_of_turn_by():
    import pandas as pd

    from venus_utils.eval import by_tool

    episodes = pd.DataFrame(
        [
            {"tool_names": ["search", "visit", None], "turn_advantages": [1.0, -0.5, 0.8], "judge_score": 1.0},
            {"tool_names": ["search", "visit", None], "turn_advantages": [0.2, -1.5, -0.8], "judge_score": 0.0},
            {
                "tool_names": ["search", None],
                "turn_advantages": [None, -0.1],
                "judge_score": 0.0,
            },  # no tokens: left out
        ]
    )
    table = by_tool.advantage_by_tool(episodes).set_index(["tool", "episode"])
    assert table.loc[("visit", "right"), "mean_advantage"] == -0.5  # a right episode's visit, pushed down
    assert table.loc[("visit", "all"), "share_pushed_down"] == 1.0 and table.loc[("visit", "all"), "turns"] == 2
    assert table.loc[("(answer)", "wrong"), "turns"] == 2 and ("search", "wrong") in table.index
    assert by_tool.advantage_by_tool(episodes.drop(columns="turn_advantages")).empty  # runs before the column
