"""The RL stage's steps that notebook 04 and ``python -m venus_utils.rl train`` share (:mod:`venus_utils.rl.stage`)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from venus_utils.core.checkpoints import ResumePoint
from venus_utils.core.profiles import ConfigError
from venus_utils.core.stage import Stage, StageMissing
from venus_utils.rl.config import IGPOConfig
from venus_utils.rl.stage import filter_questions, finish_limits, stage_inputs, summary_figures


def _finished(run_dir, name):
    (run_dir / name).mkdir(parents=True)
    (run_dir / name / "summary.json").write_text("{}")


def test_stage_inputs_check_the_questions_first(tmp_path):
    stage = Stage("04_igpo_rl", tmp_path)
    with pytest.raises(ConfigError, match="train_qa is not set"):  # the web tools need train_qa, even without SFT
        stage_inputs(stage, offline=False, train_qa=None)
    with pytest.raises(StageMissing, match="00_setup"):
        stage_inputs(stage, offline=True, train_qa=None)
    _finished(tmp_path, "00_setup")
    with pytest.raises(StageMissing, match="03_sft_unsloth"):
        stage_inputs(stage, offline=True, train_qa=None)
    _finished(tmp_path, "03_sft_unsloth")
    sft_dir, world_dir, train_file = stage_inputs(stage, offline=True, train_qa=None)
    assert sft_dir == stage.run_dir / "03_sft_unsloth" / "model" and world_dir == stage.run_dir / "00_setup" / "world"
    assert train_file == world_dir / "qa" / "train.parquet"  # the world has no RL split


def test_an_outside_sft_model_replaces_the_runs_sft_stage(tmp_path):
    """sft_model: RL starts from that folder, and the run needs no stage 03; a folder without a model fails first."""
    stage = Stage("04_igpo_rl", tmp_path / "run")
    _finished(stage.run_dir, "00_setup")
    shipped = tmp_path / "models" / "sft"
    with pytest.raises(FileNotFoundError, match="sft_model names .* which is not a model folder"):
        stage_inputs(stage, offline=True, train_qa=None, sft_model=str(shipped))
    shipped.mkdir(parents=True)
    (shipped / "config.json").write_text("{}")
    assert stage_inputs(stage, offline=True, train_qa=None, sft_model=str(shipped)).sft_dir == shipped.resolve()


def test_no_filter_keeps_every_question(tmp_path):
    rows = [{"id": "q1"}, {"id": "q2"}]
    kept, counts = filter_questions(Stage("04_igpo_rl", tmp_path), None, None, rows, None, None, IGPOConfig(), 0)
    assert kept == rows and counts == {"candidates": 2, "kept": 2}
    assert finish_limits(IGPOConfig(max_steps=3), 5.0) == {"max_steps": 3, "max_time_minutes": 5.0}


def test_summary_figures_from_the_trainer_log():
    log = [
        {
            "step": 1,
            "loss": 0.5,
            "reward": 0.0,
            "ig_mean": float("nan"),
            "penalty_rate": 0.5,
            "groups_with_signal": 0.0,
        },
        {"step": 2, "loss": 0.4, "reward": 0.5, "ig_mean": 0.2, "penalty_rate": 0.25, "groups_with_signal": 1.0},
        {"step": 2, "train_runtime": 1.0},
    ]  # the Trainer's closing entry
    trainer = SimpleNamespace(state=SimpleNamespace(log_history=log, global_step=2))
    figures = summary_figures(
        trainer,
        IGPOConfig(),
        ResumePoint(checkpoint="ck-1", step=1),
        sft_dir="sft",
        train_file="rl.parquet",
        questions={"candidates": 2, "kept": 2},
        judge="offline",
        comparison={},
    )
    assert (figures["steps"], figures["loss_last"], figures["final_reward"]) == (2, 0.4, 0.5)
    assert figures["mean_ig"] == 0.2 and figures["penalty_rate"] == 0.25 and figures["groups_with_signal"] == 0.5
    assert figures["resumed_from"] == "ck-1" and figures["rl_question_file"] == "rl.parquet"
    assert figures["heldout_accuracy_sft"] is None and figures["heldout_accuracy_rl"] is None  # no held-out set
    comparison = {"accuracy_before": 0.25, "accuracy_after": 0.5, "n": 4, "mcnemar_p": 0.5}
    figures = summary_figures(
        trainer,
        IGPOConfig(),
        ResumePoint(),
        sft_dir="sft",
        train_file="rl.parquet",
        questions={},
        judge="offline",
        comparison=comparison,
    )
    assert (figures["heldout_accuracy_sft"], figures["heldout_accuracy_rl"], figures["heldout_n"]) == (0.25, 0.5, 4)


def test_a_run_made_before_a_rename_is_continued_under_the_new_name(tmp_path):
    """The control and rejection sampling continue the SFT stage with the settings its summary recorded; a run made
    before eval_max_new_tokens became eval_max_tokens_per_turn recorded the old name."""
    from venus_utils.core.io import write_json
    from venus_utils.rl.control import sft_settings

    write_json(tmp_path / "03_sft_unsloth" / "summary.json", {"settings": {"eval_max_new_tokens": {"value": 128}}})
    assert sft_settings(tmp_path) == {"eval_max_tokens_per_turn": 128}


def test_rl_arms_refuses_the_cheaper_arms_beside_an_outside_sft_model(tmp_path, capsys):
    """They continue the run's own SFT stage; RL would start from the shipped model: refused before anything trains."""
    from venus_utils.rl.__main__ import main

    argv = ["arms", "--params", "params/cpu-rl.yaml", "--run-dir", str(tmp_path), "--arms", "igpo,control"]
    assert main(argv) == 2
    assert "these arms continue the run's own SFT stage, but RL starts from sft_model" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_the_question_filters_rollouts_count_in_the_budget_of_the_cheaper_arms(tmp_path, tiny_lm, monkeypatch):
    """filter_samples rolls the SFT policy out before training: RL's compute, so the control and rejection sampling
    are matched to it too (budget_flops: the training's FLOPs and the filter's, recorded in its counts)."""
    import torch

    import venus_utils.rl.stage as rl_stage
    from venus_utils.rl.stage import budget_flops

    model, tok = tiny_lm

    def rolls_out(model, tokenizer, rows, *args, **kwargs):
        with torch.no_grad():
            model(input_ids=torch.ones(2, 10, dtype=torch.long))  # the filter's generation, 20 positions
        return list(rows), {"candidates": len(rows), "kept": len(rows)}

    monkeypatch.setattr(rl_stage, "unsolved_questions", rolls_out)
    rows = [{"id": "q1"}, {"id": "q2"}]
    kept, counts = filter_questions(Stage("04_igpo_rl", tmp_path), model, tok, rows, None, None, IGPOConfig(), 2)
    assert kept == rows and counts["flops"] > 0
    history = [{"step": 1, "flops": 1e9}, {"step": 2, "flops": 2e9}, {"step": 2, "eval": 1}]
    assert budget_flops(history, counts) == 3e9 + counts["flops"]
    assert budget_flops(history, {"candidates": 2, "kept": 2}) == budget_flops(history) == 3e9  # no filter
    assert budget_flops([], counts) is None  # no training counted: nothing to match


def test_rejection_sampling_samples_what_rl_trained_on_or_rolled_out():
    """``rft_rollouts``: ``trained`` samples the IGPO arm's steps x prompts_per_step questions; ``rolled_out`` as many
    as dynamic sampling rolled out (here 2 and 3 rounds: 8 + 12 groups for 4 + 4 trained), read as a ratio of the
    logged means, so a logging window or a process count does not change it; the pool is drawn again when it runs
    out."""
    from venus_utils.rl.rejection import rft_groups, rft_questions

    cfg = IGPOConfig(max_steps=40, prompts_per_step=4)
    log = [
        {"step": 1, "loss": 0.1, "groups_sampled": 8.0, "groups_dropped": 4.0},
        {"step": 2, "loss": 0.1, "groups_sampled": 12.0, "groups_dropped": 8.0},
        {"step": 2, "train_runtime": 9.0},
    ]
    assert rft_groups(log, cfg) == rft_groups(log, cfg, "trained") == 8
    assert rft_groups(log, cfg, "rolled_out") == 20
    windowed = [
        {"step": 2, "loss": 0.1, "groups_sampled": 10.0, "groups_dropped": 6.0}
    ]  # the same two steps, averaged
    assert rft_groups(windowed, cfg, "rolled_out") == 20
    assert rft_groups([], cfg, "rolled_out") == 160  # no log: max_steps x prompts_per_step
    with pytest.raises(ValueError, match="rft_rollouts='all'"):
        rft_groups(log, cfg, "all")
    pool = [{"id": str(i)} for i in range(15)]
    drawn = rft_questions(pool, cfg, seed=3, groups=20)
    assert len(drawn) == 20 and {q["id"] for q in drawn} == {q["id"] for q in pool}
    assert rft_questions(pool, cfg, seed=3, groups=8) == drawn[:8]  # the same draw, cut shorter
