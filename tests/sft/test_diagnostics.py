"""What-limits-the-agent diagnostics: token budget by part, training budget, rollout failure kinds."""

import pytest

from venus_utils.core import protocol
from venus_utils.modeling import synthetic_conversations
from venus_utils.sft.data import tokenize_conversation
from venus_utils.sft.diagnostics import diagnose_rollouts, token_budget, training_budget


def test_token_budget_parts_add_up_and_count_the_trained_tokens(micro_model_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(micro_model_dir)
    convs = [c["messages"] for c in synthetic_conversations(5, seed=2)]
    budget = token_budget(convs, tok)
    ex = [tokenize_conversation(c, tok) for c in convs]
    assert budget["total"] == pytest.approx(sum(len(e["input_ids"]) for e in ex) / 5, abs=0.1)
    assert budget["assistant"] == pytest.approx(
        sum(sum(label != -100 for label in e["labels"]) for e in ex) / 5, abs=0.1
    )
    parts = sum(budget[k] for k in ("system", "question", "tool_responses", "assistant", "template"))
    assert parts == pytest.approx(budget["total"], abs=0.5)
    assert budget["system"] == pytest.approx(
        len(tok(protocol.system_prompt(protocol.DEFAULT_DATE))["input_ids"]), abs=0.1
    )
    assert budget["template"] > 0 and budget["tool_responses"] > budget["question"] > 0
    assert token_budget(convs, tok, limit=1)["total"] == len(ex[0]["input_ids"])
    with pytest.raises(ValueError):
        token_budget([], tok)


def test_training_budget():
    out = training_budget(
        {"steps": 100, "wall_s": 600, "tokens_per_s": 5000}, train_rows=400, global_batch_size=8, mean_tokens=1000.04
    )
    assert out == {
        "eval_loss_last": None,
        "optimizer_steps": 100,
        "trajectories_seen": 800,
        "epochs": 2.0,
        "steps_per_minute": 10.0,
        "tokens_per_s": 5000,
        "mean_tokens_per_trajectory": 1000.0,
    }
    logs = [{"loss": 4.0 - 0.5 * i} for i in range(8)] + [{"eval_loss": 1.0}]
    trend = training_budget({"steps": 8}, 10, 1, 5.0, logs)
    assert (trend["loss_at_50%"], trend["loss_at_75%"], trend["loss_at_end"]) == (2.0, 1.0, 0.5)


def test_convergence_verdict_from_the_last_validation_loss():
    from venus_utils.sft.diagnostics import convergence_note

    def verdict(eval_loss, target=0.01):
        return training_budget({"steps": 10, "eval_loss_last": eval_loss}, 10, 1, 5.0, converged_eval_loss=target)

    done, failed = verdict(0.0019), verdict(0.0701)  # cpu-hard seed 10 and seed 11
    assert (done["converged"], done["eval_loss_last"]) == (True, 0.0019) and convergence_note(done) is None
    assert failed["converged"] is False and failed["converged_eval_loss"] == 0.01
    assert "0.0701 > 0.01" in convergence_note(failed)
    assert verdict(0.01)["converged"] is True  # at the line counts as converged
    assert verdict(None)["converged"] is None and convergence_note(verdict(None)) is None  # no validation loss
    assert "converged" not in verdict(0.5, target=None)  # no target: no verdict


def test_stopped_by_eval_loss_only_when_the_loss_reached_the_target_before_the_cap():
    def budget(steps, eval_loss, cap=4200):
        summary = {"steps": steps, "eval_loss_last": eval_loss}
        return training_budget(summary, 10, 1, 5.0, stop_at_eval_loss=0.01, max_steps=cap)

    early = budget(1500, 0.008)
    assert early["stopped_by_eval_loss"] is True and early["step_cap"] == 4200 and early["stop_at_eval_loss"] == 0.01
    assert budget(4200, 0.05)["stopped_by_eval_loss"] is False  # ran to the cap, never reached it
    assert budget(4200, 0.005)["stopped_by_eval_loss"] is False  # reached it only at the cap
    assert budget(900, 0.005, cap=-1)["stopped_by_eval_loss"] is True  # an epoch budget
    assert "stopped_by_eval_loss" not in training_budget({"steps": 3}, 10, 1, 5.0)


def _record(index, gt, prediction, tool_body, query="Kalo Group"):
    messages = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "Who founded Kalo Group?"},
        {"role": "assistant", "content": protocol.tool_turn("t", "search", {"query": [query]})},
        {"role": "user", "content": protocol.wrap_tool_response(tool_body)},
        {"role": "assistant", "content": protocol.answer_turn("t", prediction or "")},
    ]
    return {
        "index": index,
        "gt": gt,
        "prediction": prediction,
        "messages": messages,
        "tool_call_count": 1,
        "termination": "answered",
    }


def test_diagnose_rollouts_separates_reading_from_search_failures(tmp_path):
    import pandas as pd

    qa = pd.DataFrame(
        {
            "data_source": ["w"] * 3,
            "prompt": [[{"content": "Who founded Kalo Group?", "role": "user"}]] * 3,
            "reward_model": [{"ground_truth": "Rami Tel", "style": "rule"}] * 3,
            "extra_info": [{"index": f"q{i}", "split": "test", "hops": h} for i, h in enumerate([2, 2, 3])],
        }
    )
    qa.to_parquet(tmp_path / "test.parquet")
    records = [
        _record("q0", "Rami Tel", "Rami Tel", "Kalo Group was founded by Rami Tel."),  # right
        _record("q1", "Rami Tel", "Mo Du", "Kalo Group was founded by Rami Tel."),  # read it, answered wrong
        _record("q2", "Rami Tel", None, "nothing here", query="Something Else"),  # never found it
    ]
    per, by_hops = diagnose_rollouts(records, tmp_path / "test.parquet")
    assert per["correct"].tolist() == [True, False, False]
    assert per["retrieved"].tolist() == [True, True, False]
    assert per["retrieved_but_wrong"].tolist() == [False, True, False]
    assert per["first_query_from_question"].tolist() == [True, True, False]
    assert per["hops"].tolist() == [2, 2, 3]
    assert by_hops.loc[2, "accuracy"] == 0.5 and by_hops.loc[3, "retrieved"] == 0.0
    assert by_hops.loc["all", "rollouts"] == 3 and by_hops.loc["all", "retrieved_but_wrong"] == pytest.approx(0.333)
    per, _ = diagnose_rollouts(records)  # without the QA file: no hop counts
    assert per["hops"].isna().all()


def test_breakdown_by_sub_world_from_a_question_table():
    import pandas as pd

    from venus_utils.sft.diagnostics import breakdown

    table = pd.DataFrame(
        {
            "id": ["q0", "q1", "q2"],
            "hops": [2, 2, 3],
            "template": ["t", "t", "u"],
            "subworld": ["trained", "held-out", "held-out"],
        }
    )
    records = [
        _record("q0", "Rami Tel", "Rami Tel", "Kalo Group was founded by Rami Tel."),
        _record("q1", "Rami Tel", "Mo Du", "Kalo Group was founded by Rami Tel."),
        _record("q2", "Rami Tel", "Rami Tel", "Kalo Group was founded by Rami Tel."),
    ]
    per, by_hops = diagnose_rollouts(records, table)
    assert per["subworld"].tolist() == ["trained", "held-out", "held-out"] and per["template"].tolist() == [
        "t",
        "t",
        "u",
    ]
    assert by_hops.loc[2, "accuracy"] == 0.5
    by_sub = breakdown(per, "subworld")
    assert by_sub.loc["held-out", "accuracy"] == 0.5 and by_sub.loc["trained", "accuracy"] == 1.0
    assert by_sub.loc["all", "rollouts"] == 3


class _FixedModel:
    """Predicts ``targets[i]`` at position ``i`` (a stand-in with the interface teacher_forced_scores uses)."""

    device = "cpu"

    def __init__(self, targets, vocab=50):
        self.targets, self.vocab = targets, vocab

    def eval(self):
        return self

    def __call__(self, input_ids):
        import torch

        logits = torch.zeros(1, input_ids.shape[1], self.vocab)
        logits[0, torch.arange(len(self.targets)), torch.tensor(self.targets)] = 1.0
        return type("Out", (), {"logits": logits})()


def test_teacher_forced_scores_count_tokens_turns_and_trajectories():
    from venus_utils.sft.diagnostics import teacher_forced_scores

    ids = [1, 2, 3, 4, 5, 6, 7, 8]
    labels = [-100, -100, 3, 4, -100, -100, 7, 8]  # two assistant turns: tokens 2-3 and 6-7
    perfect = ids[1:] + [0]  # position i predicts token i + 1
    assert teacher_forced_scores(_FixedModel(perfect), [{"input_ids": ids, "labels": labels}]) == {
        "token_accuracy": 1.0,
        "turn_exact": 1.0,
        "trajectory_exact": 1.0,
    }
    one_wrong = list(perfect)
    one_wrong[5] = 9  # the first token of the second turn (label 7 at position 6) is predicted wrong
    untrained_wrong = list(perfect)
    untrained_wrong[3] = 9  # a masked position (tool output) does not count
    rows = [{"input_ids": ids, "labels": labels}]
    assert teacher_forced_scores(_FixedModel(one_wrong), rows) == {
        "token_accuracy": 0.75,
        "turn_exact": 0.5,
        "trajectory_exact": 0.0,
    }
    assert teacher_forced_scores(_FixedModel(untrained_wrong), rows)["trajectory_exact"] == 1.0


def test_checkpoint_curve_scores_evenly_spaced_checkpoints(micro_model_dir, tmp_path):
    import shutil

    from transformers import AutoTokenizer

    from venus_utils.sft.diagnostics import checkpoint_curve

    for step in (10, 20, 30, 40, 50):
        shutil.copytree(micro_model_dir, tmp_path / f"checkpoint-{step}")
    (tmp_path / "checkpoint-60").mkdir()  # an adapter-only (LoRA) checkpoint: skipped
    for step in (10, 20, 30, 40, 50, 60):  # what makes a checkpoint complete (venus_utils.core.checkpoints)
        (tmp_path / f"checkpoint-{step}" / "trainer_state.json").write_text(f'{{"global_step": {step}}}')
    tok = AutoTokenizer.from_pretrained(micro_model_dir)
    rows = [tokenize_conversation(c["messages"], tok) for c in synthetic_conversations(2, seed=5)]
    curve = checkpoint_curve(tmp_path, rows, max_checkpoints=3)
    assert curve["step"].tolist() == [10, 30, 50]
    assert curve[["token_accuracy", "turn_exact", "trajectory_exact"]].stack().between(0, 1).all()
    assert curve["token_accuracy"].nunique() == 1  # the same weights score the same
    assert checkpoint_curve(tmp_path, rows)["step"].tolist() == [10, 20, 30, 40, 50]
    assert checkpoint_curve(tmp_path, rows, max_checkpoints=0).empty
