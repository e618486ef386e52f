"""What-limits-the-agent diagnostics: token budget by part, training budget, rollout failure kinds."""

import pytest

from venus_utils import protocol
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
    assert budget["assistant"] == pytest.approx(sum(sum(l != -100 for l in e["labels"]) for e in ex) / 5, abs=0.1)
    parts = sum(budget[k] for k in ("system", "question", "tool_responses", "assistant", "template"))
    assert parts == pytest.approx(budget["total"], abs=0.5)
    assert budget["system"] == pytest.approx(len(tok(protocol.system_prompt(protocol.DEFAULT_DATE))["input_ids"]), abs=0.1)
    assert budget["template"] > 0 and budget["tool_responses"] > budget["question"] > 0
    assert token_budget(convs, tok, limit=1)["total"] == len(ex[0]["input_ids"])
    with pytest.raises(ValueError):
        token_budget([], tok)


def test_training_budget():
    out = training_budget({"steps": 100, "wall_s": 600, "tokens_per_s": 5000}, train_rows=400, global_batch_size=8,
                          mean_tokens=1000.04)
    assert out == {"optimizer_steps": 100, "trajectories_seen": 800, "epochs": 2.0, "steps_per_minute": 10.0,
                   "tokens_per_s": 5000, "mean_tokens_per_trajectory": 1000.0}
    logs = [{"loss": 4.0 - 0.5 * i} for i in range(8)] + [{"eval_loss": 1.0}]
    trend = training_budget({"steps": 8}, 10, 1, 5.0, logs)
    assert (trend["loss_at_50%"], trend["loss_at_75%"], trend["loss_at_end"]) == (2.0, 1.0, 0.5)


def _record(index, gt, prediction, tool_body, query="Kalo Group"):
    messages = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "Who founded Kalo Group?"},
        {"role": "assistant", "content": protocol.tool_turn("t", "search", {"query": [query]})},
        {"role": "user", "content": protocol.wrap_tool_response(tool_body)},
        {"role": "assistant", "content": protocol.answer_turn("t", prediction or "")},
    ]
    return {"index": index, "gt": gt, "prediction": prediction, "messages": messages, "tool_call_count": 1,
            "termination": "answered"}


def test_diagnose_rollouts_separates_reading_from_search_failures(tmp_path):
    import pandas as pd

    qa = pd.DataFrame({
        "data_source": ["w"] * 3,
        "prompt": [[{"content": "Who founded Kalo Group?", "role": "user"}]] * 3,
        "reward_model": [{"ground_truth": "Rami Tel", "style": "rule"}] * 3,
        "extra_info": [{"index": f"q{i}", "split": "test", "hops": h} for i, h in enumerate([2, 2, 3])],
    })
    qa.to_parquet(tmp_path / "test.parquet")
    records = [
        _record("q0", "Rami Tel", "Rami Tel", "Kalo Group was founded by Rami Tel."),   # right
        _record("q1", "Rami Tel", "Mo Du", "Kalo Group was founded by Rami Tel."),      # read it, answered wrong
        _record("q2", "Rami Tel", None, "nothing here", query="Something Else"),         # never found it
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
