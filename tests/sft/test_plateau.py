"""SFT to its plateau (venus_utils.sft.plateau): each checkpoint answers validation questions of the held-out
sub-worlds; once the accuracy stops rising the run anneals to the schedule's floor and ends there."""

from __future__ import annotations

import json

import pytest

from venus_utils.sft.plateau import PlateauRule, anneal_factor, plateau_from_params, plateau_reached, read_curve


def test_the_plateau_is_patience_checkpoints_without_the_gain():
    rule = PlateauRule(questions=10, patience=2, min_gain=0.02)
    assert not plateau_reached([0.1, 0.3], rule)  # too short to tell
    assert not plateau_reached([0.1, 0.3, 0.35, 0.36], rule)  # 0.35 beat 0.30 by 0.05
    assert plateau_reached([0.1, 0.3, 0.31, 0.30], rule)  # +0.01 and +0.00 over the best before them
    assert plateau_reached([0.1, 0.4, 0.3, 0.2], rule)  # falling is no gain either
    assert not plateau_reached([0.0, 0.0, 0.0, 0.03], rule)
    with pytest.raises(ValueError):
        PlateauRule(questions=0)


def test_the_anneal_is_a_cosine_from_the_rate_at_the_plateau_to_the_floor():
    f = anneal_factor(1000, 200, 0.6, 0.1)
    assert f(1000) == pytest.approx(0.6) and f(1200) == pytest.approx(0.1) and f(1500) == pytest.approx(0.1)
    # a quarter of the way: 0.1 + 0.5 x (1 + cos(pi / 4)) / 2 = 0.526777 (linear: 0.475)
    assert f(1050) == pytest.approx(0.5267766952966369, rel=1e-12)


def test_the_rule_needs_the_offline_world_one_process_and_no_loss_line():
    base = {"plateau_questions": 5, "stop_at_eval_loss": None}
    assert plateau_from_params({"plateau_questions": 0}, ".", None, None) is None
    with pytest.raises(ValueError, match="offline world"):
        plateau_from_params(base, ".", None, None)
    with pytest.raises(ValueError, match="one process"):
        plateau_from_params(base, ".", "world", None, processes=2)
    with pytest.raises(ValueError, match="stop_at_eval_loss"):
        plateau_from_params({**base, "stop_at_eval_loss": 0.01}, ".", "world", None)


@pytest.mark.slow
def test_sft_stops_at_the_plateau_and_ends_annealed(tmp_path):
    """``sft train`` with the rule: checkpoints every 2 steps answer 4 validation questions (the micro model answers
    none: flat at 0), the plateau comes at the second (patience 1), the run anneals over 3 steps to the floor and
    ends at step 7 of a 40-step cap; a rerun trains nothing."""
    from tests.scale.conftest import build_micro_run, run_cli

    run = build_micro_run(tmp_path / "run")
    sets = {
        "max_steps": 40,
        "save_steps": 2,
        "plateau_questions": 4,
        "plateau_patience": 1,
        "plateau_min_gain": 0.5,
        "anneal_steps": 3,
        "schedule_by_time": True,
        "min_lr_ratio": 0.1,
        "warmup_ratio": 0.0,
        "logging_steps": 1,
        "eval_max_turns": 2,
        "eval_max_new_tokens": 8,
        "judge_kind": "offline",
    }
    argv = ["-m", "venus_utils.sft", "train", "--params", "params/smoke.yaml", "--run-dir", str(run)]
    argv += [x for k, v in sets.items() for x in ("--set", f"{k}={v}")]
    run_cli(argv, timeout=600)
    stage = run / "03_sft_unsloth"
    summary = json.loads((stage / "summary.json").read_text())
    assert summary["steps"] == 7 and summary["plateau"]["plateau_step"] == 4
    curve = read_curve(stage)
    assert curve["step"].tolist() == [2, 4, 7] and curve["phase"].tolist() == ["training", "plateau", "annealed"]
    assert (curve["n"] == 4).all()
    history = json.loads((stage / "train_history.json").read_text())
    rates = {h["step"]: h["learning_rate"] for h in history if "learning_rate" in h}
    peak = 0.002
    # the schedule's own cosine over 40 steps until the plateau (step 5 trains at the rate it set at step 4), then
    # from there to the floor (10% of the peak) over 3 steps
    start = rates[5] / peak
    assert rates[5] < rates[4] and rates[7] == pytest.approx(peak * anneal_factor(4, 3, start, 0.1)(6), rel=1e-9)
    assert rates[6] == pytest.approx(peak * anneal_factor(4, 3, start, 0.1)(5), rel=1e-9) and start > 0.9
    assert min(rates.values()) >= 0.1 * peak - 1e-12
    assert (stage / "model" / "config.json").is_file()
    checkpoints = sorted(p.name for p in (stage / "checkpoints").glob("checkpoint-*"))
    run_cli(argv, timeout=600)  # finished: nothing trained again
    assert json.loads((stage / "summary.json").read_text())["steps"] == 7
    assert sorted(p.name for p in (stage / "checkpoints").glob("checkpoint-*")) == checkpoints
    assert read_curve(stage)["step"].tolist() == [2, 4, 7]
