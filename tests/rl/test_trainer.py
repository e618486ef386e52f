"""IGPOTrainer end to end on the micro model: agent-loop rollouts, IG, advantages (B, T), loss, checkpoints."""

from __future__ import annotations

import math

import pytest
import torch

from venus_utils.core.io import read_jsonl
from venus_utils.core.perf import flops_per_token
from venus_utils.rl.config import IGPOConfig
from venus_utils.rl.igpo_trainer import IGPOTrainer, grpo_args
from venus_utils.rl.rollout import episode_from_rollout, make_agent_rollout
from venus_utils.rl.training_rows import rl_rows


class EchoTools:
    """Stand-in for the offline world's Toolbox: every call returns a fixed page about the question."""

    async def run(self, call):
        return f"The page says the answer is 1987. ({call.name})"


def exact_judge(questions, predictions, answers):
    return [float(p.strip() == a.strip()) for p, a in zip(predictions, answers)]


def small_cfg(**kw):
    base = dict(
        prompts_per_step=2,
        num_generations=2,
        micro_batch_size=2,
        max_steps=2,
        save_steps=1,
        max_turns=3,
        max_tokens_per_turn=12,
        max_context_tokens=4096,
        ig_tool_filter=None,
        learning_rate=1e-3,
        kl_coef=0.01,
        precision="fp32",  # exact checks (a one-step KL > 0); the bf16 path: test_reward_cell_errors.py
    )
    base.update(kw)
    return IGPOConfig(**base)


ROWS = rl_rows(
    [
        {"id": "q1", "question": "Which year was Kent founded?", "answer": "1987"},
        {"id": "q2", "question": "Who founded Medway Labs?", "answer": "Karo Mitel<|answer_split|>Karo"},
    ]
)


def _trainer(tiny_lm, out, cfg, resume_step=None, **kwargs):
    """An IGPOTrainer on ``ROWS`` with the echo tools and the exact judge; ``kwargs`` replace its other arguments."""
    from datasets import Dataset

    model, tok = tiny_lm
    kwargs = {"turn_reward": lambda ep: ep.info_gain, **kwargs}
    return IGPOTrainer(
        model,
        tok,
        Dataset.from_list(ROWS),
        cfg,
        grpo_args(cfg, out),
        rollout_fn=make_agent_rollout(EchoTools()),
        judge=exact_judge,
        resume_step=resume_step,
        **kwargs,
    )


def test_episode_from_agent_rollout(tiny_lm):
    import asyncio

    from venus_utils.agent import ScriptedBackend, run_agent
    from venus_utils.core.protocol import answer_turn, tool_turn

    _, tok = tiny_lm
    backend = ScriptedBackend(
        [tool_turn("find it", "visit", {"url": ["u"], "goal": "year"}), answer_turn("ok", "1987")], tok
    )
    r = asyncio.run(run_agent("Which year?", backend, EchoTools()))
    ep = episode_from_rollout(r, "1987", group="q")
    assert ep.num_turns == 2 and ep.tool_names == ["visit", None] and ep.prediction == "1987"
    assert ep.boundaries[0] == len(ep.prompt_ids)
    gen = tok.decode(ep.input_ids[: ep.boundaries[1]])
    assert gen.endswith(
        "<|im_start|>assistant\n<think>\n"
    )  # a boundary is the context ending with the generation prompt
    sampled = [t for t, m in zip(ep.completion_ids, ep.assistant_mask) if m]
    assert "1987" in tok.decode(sampled) and "The page says" not in tok.decode(sampled)


def test_two_steps_checkpoint_and_resume(tiny_lm, tmp_path):
    model, _ = tiny_lm
    before = {k: v.clone() for k, v in model.state_dict().items()}
    trainer = _trainer(tiny_lm, tmp_path, small_cfg())
    trainer.train()
    assert trainer.state.global_step == 2
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())  # the policy moved

    rows = read_jsonl(tmp_path / "metrics.jsonl")
    steps = [r for r in rows if "reward" in r]
    assert len(steps) == 2
    for r in steps:
        for key in ("reward", "ig_mean", "penalty_rate", "turns", "accuracy", "kl", "entropy", "adv_abs_mean"):
            assert key in r and r[key] is not None and math.isfinite(r[key]), key
        assert r["adv_nonzero_frac"] > 0  # finite, non-zero advantages
        phases = ("generation", "rollout", "judge", "info_gain", "advantages", "update")
        assert all(r[f"time_{p}_s"] >= 0 for p in phases) and r["time_generation_s"] > 0  # the per-phase table
        # the step's model FLOPs (issue 40's compute match): at least the update's forward and backward over the
        # step's 4 episodes of at least 10 positions each
        assert r["flops"] >= 3 * 4 * 10 * flops_per_token(model.config)
    assert steps[1]["kl"] > 0  # the second step is measured against the moved policy
    episodes = read_jsonl(tmp_path / "episodes.jsonl")
    assert len(episodes) == 8 and {e["step"] for e in episodes} == {0, 1}
    assert all(len(e["info_gain"]) == e["num_turns"] - 1 for e in episodes)
    # what the update pushed each turn by (issue 40's mechanism table): one value per turn, finite where it has tokens
    assert all(len(e["turn_advantages"]) == e["num_turns"] for e in episodes)
    assert any(a is not None and math.isfinite(a) for e in episodes for a in e["turn_advantages"])
    assert (tmp_path / "checkpoint-2").is_dir()

    resumed = _trainer(tiny_lm, tmp_path, small_cfg(max_steps=3), resume_step=2)
    resumed.train(resume_from_checkpoint=str(tmp_path / "checkpoint-2"))
    assert resumed.state.global_step == 3
    assert {e["step"] for e in read_jsonl(tmp_path / "episodes.jsonl")} == {0, 1, 2}
    assert not (tmp_path / ".saving").exists() and not (tmp_path / "README.md").exists()  # no TRL model card left


def test_rerunning_a_finished_rl_run_trains_nothing(tiny_lm, tmp_path, capsys):
    """The Trainer alone would train a step past max_steps when resumed from the final checkpoint."""
    from venus_utils.core.checkpoints import prepare_resume, train_to_end

    cfg, limits = small_cfg(), {"max_steps": 2}
    for _ in range(2):
        point = prepare_resume(tmp_path, {"lr": cfg.learning_rate}, root=None, max_steps=cfg.max_steps, limits=limits)
        trainer = _trainer(tiny_lm, tmp_path, cfg, resume_step=point.step)
        train_to_end(trainer, point, tmp_path, cfg.max_steps, limits)
        assert trainer.state.global_step == 2
    assert point.finished and "already finished" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2"]
    assert {e["step"] for e in read_jsonl(tmp_path / "episodes.jsonl")} == {0, 1}


def test_rollout_config_carries_the_system_prompt_style():
    from venus_utils.rl.rollout import rl_agent_config

    assert rl_agent_config(IGPOConfig()).system_prompt_style == "dr-venus"
    assert rl_agent_config(IGPOConfig(system_prompt_style="compact")).system_prompt_style == "compact"
    with pytest.raises(ValueError, match="system_prompt_style"):
        IGPOConfig(system_prompt_style="short")


def test_time_limit_stops_training_after_the_budget(tiny_lm, tmp_path):
    from venus_utils.core.callbacks import time_limit

    trainer = _trainer(tiny_lm, tmp_path, small_cfg(max_steps=4))
    trainer.add_callback(time_limit(1e-9))  # already spent: stops after the first step
    trainer.train()
    assert trainer.state.global_step == 1
    assert (
        time_limit(None).on_step_end(None, None, type("C", (), {"should_training_stop": False})()).should_training_stop
        is False
    )


def test_why_no_gain_pairs_questions_and_counts_flat_groups():
    import pandas as pd

    from venus_utils.eval.stats import paired_comparison
    from venus_utils.rl.run_report import why_no_gain

    before = pd.Series([False, True, False], index=["a", "b", "c"])
    after = pd.Series([True, False, False], index=["a", "b", "c"])
    episodes = pd.DataFrame(
        {
            "step": [1, 1, 1, 1, 2, 2],
            "group": ["x", "x", "y", "y", "x", "x"],
            "judge_score": [1.0, 1.0, 0.0, 0.0, 1.0, 0.2],
        }
    )
    metrics = pd.DataFrame({"step": [1, 2], "groups_with_signal": [0.0, 1.0]})
    table = why_no_gain(paired_comparison(before, after), episodes, metrics)["value"]
    assert (table["held-out questions"], table["fixed by RL"], table["broken by RL"], table["unchanged"]) == (
        3,
        1,
        1,
        1,
    )
    assert table["McNemar p (exact)"] == 1.0 and table["RL steps"] == 2
    assert table["training groups"] == 3
    assert table["groups all right (no outcome signal)"] == 1 and table["groups all wrong (no outcome signal)"] == 1
    assert (
        table["rollout accuracy, first quarter of steps"] == 0.5
        and table["rollout accuracy, last quarter of steps"] == 0.5
    )
    assert table["mean share of groups with an outcome signal per step"] == 0.5
    assert pd.isna(why_no_gain({}, pd.DataFrame())["value"]["held-out questions"])


def test_ig_by_tool_splits_gains_by_tool_and_outcome():
    import pandas as pd

    from venus_utils.eval.by_tool import ig_by_tool

    episodes = pd.DataFrame(
        {
            # the final (answer) turn has no gain; None: a turn the tool filter did not score
            "tool_names": [["search", "visit", None], ["search", "visit", "visit", None], ["search", None]],
            "info_gain": [[2.0, -1.0], [1.0, -3.0, None], [0.5]],
            "judge_score": [1.0, 0.0, 0.0],
        }
    )
    table = ig_by_tool(episodes).set_index(["tool", "episode"])
    assert table.loc[("visit", "all"), "turns"] == 2 and table.loc[("visit", "all"), "mean_ig"] == -2.0
    assert table.loc[("visit", "right"), "share_negative"] == 1.0
    assert table.loc[("search", "wrong"), "turns"] == 2 and table.loc[("search", "wrong"), "mean_ig"] == 0.75
    assert table.loc[("search", "right"), "median_ig"] == 2.0 and table.loc[("search", "all"), "share_negative"] == 0
    assert len(ig_by_tool(pd.DataFrame())) == 0


def test_unsolved_questions_keeps_what_the_policy_does_not_always_solve(monkeypatch):
    from venus_utils.rl import rollout
    from venus_utils.rl.training_rows import rl_rows

    rows = rl_rows([{"id": str(i), "question": f"q{i}?", "answer": "a"} for i in range(4)])
    outcomes = {"q0?": [1.0, 1.0], "q1?": [1.0, 0.0], "q2?": [0.0, 0.0], "q3?": [0.0, 1.0]}
    seen = {}

    def fake_accuracy(model, tokenizer, rows, tools, judge, cfg, *, samples, agent_cfg=None):
        seen["samples"] = samples
        return {
            "predictions": [{"question": r["question"], "correct": c} for r in rows for c in outcomes[r["question"]]]
        }

    monkeypatch.setattr(rollout, "evaluate_accuracy", fake_accuracy)
    kept, counts = rollout.unsolved_questions(None, None, rows, None, None, None, samples=2)
    assert [r["question"] for r in kept] == ["q1?", "q2?", "q3?"] and seen["samples"] == 2
    assert counts == {
        "candidates": 4,
        "always_solved": 1,
        "sometimes_solved": 2,
        "never_solved": 1,
        "unjudged": 0,
        "kept": 3,
    }


def test_unsolved_questions_refuses_several_processes_and_an_all_solved_pool(monkeypatch):
    from venus_utils.rl import rollout
    from venus_utils.rl.training_rows import rl_rows

    rows = rl_rows([{"id": "0", "question": "q0?", "answer": "a"}])
    monkeypatch.setattr(
        rollout, "evaluate_accuracy", lambda *a, **k: {"predictions": [{"question": "q0?", "correct": 1.0}]}
    )
    with pytest.raises(ValueError, match="runs in one process"):
        rollout.unsolved_questions(None, None, rows, None, None, None, samples=1, processes=2)
    with pytest.raises(ValueError, match="solves all 1 RL questions"):
        rollout.unsolved_questions(None, None, rows, None, None, None, samples=1)


def test_phase_table_averages_the_logged_steps_after_the_first():
    import pandas as pd

    from venus_utils.rl.run_report import phase_table

    metrics = pd.DataFrame(
        [
            {"step": 1, "time_generation_s": 9.0, "time_update_s": 9.0},  # warm-up
            {"step": 2, "time_generation_s": 1.0, "time_update_s": 3.0},
            {"step": 3, "time_generation_s": 3.0, "time_update_s": 1.0},
            {"step": 3, "train_runtime": 20.0},  # TRL's closing line
        ]
    )
    t = phase_table(metrics).set_index("phase")
    assert t.loc["generation", "seconds_per_step"] == 2.0 and t.loc["update", "share"] == 0.5
    assert phase_table(pd.DataFrame([{"step": 1, "loss": 0.1}])).empty


def test_the_information_gain_reads_the_rollouts_kept_caches(tiny_lm, tmp_path, monkeypatch):
    """A step's IG copies in the keys and values the rollouts' decoder kept (one token a row encoded again), and
    the decoder's caches are dropped before the update."""
    from venus_utils.modeling.kv_decode import KVDecoder

    seen = []
    encode = KVDecoder.encode

    def counting(self, prompts, extra=0):
        before = dict(self.stats)
        out = encode(self, prompts, extra)
        seen.append((self, self.stats["encoded_tokens"] - before["encoded_tokens"], len(prompts)))
        return out

    monkeypatch.setattr(KVDecoder, "encode", counting)
    trainer = _trainer(tiny_lm, tmp_path / "rl", small_cfg(max_steps=1, save_steps=10))
    kept_at_update = []
    loss = type(trainer)._compute_loss

    def recording(self, model, inputs):
        kept_at_update.append(len(self.rollout_fn.decoder._entries))
        return loss(self, model, inputs)

    monkeypatch.setattr(type(trainer), "_compute_loss", recording)
    trainer.train()
    decoder = trainer.rollout_fn.decoder
    assert decoder is not None and seen
    assert all(dec is decoder and encoded == rows for dec, encoded, rows in seen)
    assert kept_at_update and set(kept_at_update) == {0}  # cleared before the update: stale once it changes weights


def test_rollouts_the_information_gain_will_not_read_keep_no_caches(tiny_lm, tmp_path, monkeypatch):
    """Where the information gain scores a step's episodes one at a time (a model whose cache per trajectory passes
    ``BATCHED_ROW_BYTES``), the rollouts drop their kept caches when they return instead of holding them to the
    end of the step."""
    import venus_utils.rl.info_gain as ig

    trainer = _trainer(tiny_lm, tmp_path / "rl", small_cfg(max_steps=1, save_steps=10))
    rows = [{"question": "Where was Ana Lu born?", "ground_truth": "Paris"}] * 2
    trainer.rollout_fn(trainer.model, trainer.processing_class, rows, trainer.igpo)
    assert trainer.rollout_fn.decoder._entries  # the batched IG reads them
    monkeypatch.setattr(ig, "BATCHED_ROW_BYTES", 0)
    trainer.rollout_fn(trainer.model, trainer.processing_class, rows, trainer.igpo)
    assert trainer.rollout_fn.decoder._entries == []
