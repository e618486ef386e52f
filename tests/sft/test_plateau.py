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
    # a flat start is a model still learning the format (the cpu lesson answers nothing for ~500 steps): no plateau
    assert not plateau_reached([0.0, 0.0, 0.0, 0.0, 0.0], rule)
    assert not plateau_reached([0.0, 0.01, 0.0, 0.01], rule)
    assert plateau_reached([0.0, 0.0, 0.25, 0.26, 0.24], rule)  # risen, then flat
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


def _micro_sft(tmp_path, **sets):
    """``(run folder, sft train argv)`` on a micro run: checkpoints every 2 steps, the plateau rule scoring 4
    validation questions with the offline judge, a 10% floor."""
    from tests.scale.conftest import build_micro_run

    run = build_micro_run(tmp_path / "run")
    base = {
        "save_steps": 2,
        "plateau_questions": 4,
        "plateau_patience": 1,
        "plateau_min_gain": 0.1,
        "anneal_steps": 3,
        "schedule_by_time": True,
        "min_lr_ratio": 0.1,
        "warmup_ratio": 0.0,
        "logging_steps": 1,
        "eval_max_turns": 2,
        "eval_max_tokens_per_turn": 8,
        "judge_kind": "offline",
        **sets,
    }
    argv = ["-m", "venus_utils.sft", "train", "--params", "params/smoke.yaml", "--run-dir", str(run)]
    return run, argv + [x for k, v in base.items() for x in ("--set", f"{k}={v}")]


@pytest.mark.slow
def test_a_seed_that_never_rises_trains_to_its_cap(tmp_path):
    """``sft train`` with the rule on the micro model, which answers nothing: the curve stays flat at 0, which is no
    plateau, so the run trains to ``max_steps`` (the cap that bounds a seed that never learns); a rerun trains
    nothing."""
    from tests.scale.conftest import run_cli

    run, argv = _micro_sft(tmp_path, max_steps=8)
    run_cli(argv, timeout=600)
    stage = run / "03_sft_unsloth"
    summary = json.loads((stage / "summary.json").read_text())
    assert summary["steps"] == 8 and summary["plateau"]["plateau_step"] is None
    curve = read_curve(stage)
    assert curve["step"].tolist() == [2, 4, 6, 8] and (curve["accuracy"] == 0).all() and (curve["n"] == 4).all()
    run_cli(argv, timeout=600)  # finished: nothing trained again, no checkpoint scored again
    assert read_curve(stage)["step"].tolist() == [2, 4, 6, 8]


@pytest.mark.slow
def test_sft_stops_at_the_plateau_and_ends_annealed(tmp_path):
    """The rule inside the trainer, with a scorer that gives the curve (0.0, 0.5, 0.5: risen, then flat): the plateau
    at the third checkpoint (step 6, patience 1), the rate from there by cosine to the floor over 3 steps, the run
    ends annealed at step 9 of a 40-step cap with its last checkpoint scored; a resumed run goes on with the curve."""
    from transformers import AutoTokenizer

    from venus_utils.sft import SFTConfig, examples_from_parquet, train_sft
    from venus_utils.sft.plateau import Plateau

    run, _ = _micro_sft(tmp_path)
    tokenizer = AutoTokenizer.from_pretrained(run / "00_setup" / "tiny_model")
    rows = examples_from_parquet(run / "02_turn_aware_resampling" / "train.parquet", tokenizer, max_length=4096).rows
    cfg = SFTConfig(
        engine="trl", max_steps=40, save_steps=2, logging_steps=1, global_batch_size=4, micro_batch_size=4,
        learning_rate=0.002, schedule_by_time=True, min_lr_ratio=0.1, warmup_ratio=0.0, eval_steps=None,
        stop_at_eval_loss=None, device="cpu",
    )  # fmt: skip
    scores = {2: 0.0, 4: 0.5, 6: 0.5}
    scored = []

    def score(checkpoint):
        step = int(checkpoint.name.split("-")[1])
        scored.append(step)
        assert (checkpoint / "config.json").is_file()  # the checkpoint just saved
        return {"accuracy": scores.get(step, 0.5), "n": 4}

    out = tmp_path / "sft"
    rule = PlateauRule(questions=4, patience=1, min_gain=0.1, anneal_steps=3)
    result = train_sft(cfg, run / "00_setup" / "tiny_model", rows, out, plateau=Plateau(rule, score, 0.1))
    assert result.steps == 9 and scored == [2, 4, 6, 9]
    record = json.loads((out / "plateau.json").read_text())
    assert record["plateau_step"] == 6 and record["anneal"]["end_step"] == 9
    assert read_curve(out)["phase"].tolist() == ["training", "training", "plateau", "annealed"]
    rates = {h["step"]: h["learning_rate"] for h in result.history if "learning_rate" in h}
    peak, start = 0.002, rates[7] / 0.002  # step 7 trains at the rate the base schedule set at step 6
    assert rates[7] < rates[6] and start > 0.9
    # a quarter-way point of the anneal is not on a line: 0.1 + (start - 0.1) x (1 + cos(pi / 3)) / 2 at step 7 + 1
    assert rates[8] == pytest.approx(peak * anneal_factor(6, 3, start, 0.1)(7), rel=1e-9)
    assert rates[9] == pytest.approx(peak * anneal_factor(6, 3, start, 0.1)(8), rel=1e-9)
    again = train_sft(cfg, run / "00_setup" / "tiny_model", rows, out, plateau=Plateau(rule, score, 0.1))
    assert again.steps == 9 and scored == [2, 4, 6, 9]  # finished: not trained, not scored again
