"""Before/after agent numbers of notebook 03."""

from venus_utils.sft import evaluate_as_agent, summarize_rollouts


def test_summary_counts_accuracy_format_and_terminations():
    records = [
        {"prediction": "Ripeia", "gt": "Republic of Ripeia<|answer_split|>Ripeia", "turns": 3, "tool_call_count": 2,
         "termination": "answered", "turn_log": [{"format_error": None}, {"format_error": None}, {"format_error": None}]},
        {"prediction": None, "gt": "Kotuia", "turns": 2, "tool_call_count": 0, "termination": "max_steps",
         "turn_log": [{"format_error": "no tool call"}, {"format_error": None}]},
    ]
    s = summarize_rollouts(records)
    assert s["accuracy"] == 0.5 and s["answered_rate"] == 0.5
    assert s["format_valid_turn_rate"] == 0.8 and s["mean_turns"] == 2.5 and s["mean_tool_calls"] == 1.0
    assert s["terminations"] == {"answered": 1, "max_steps": 1}


def test_untrained_model_runs_the_real_loop_and_scores_zero(micro_model_dir, tmp_path):
    from venus_utils.world import build_world

    world = tmp_path / "world"
    build_world(world, seed=0, size="tiny", progress=False)
    out = tmp_path / "rollouts.jsonl"
    s = evaluate_as_agent(micro_model_dir, world, world / "qa" / "test.parquet", out, limit=2, max_turns=2, max_new_tokens=8, workers=2)
    assert s["questions"] == 2 and s["accuracy"] == 0.0 and out.exists()
    assert sum(s["terminations"].values()) == 2


def test_heldout_sample_keeps_the_split_mix(tmp_path):
    from venus_utils.agent.runner import load_questions
    from venus_utils.sft import heldout_sample
    from venus_utils.world import build_world, load_world_questions

    world = tmp_path / "world"
    build_world(world, seed=1, size="tiny", progress=False, n_worlds=3, heldout_worlds=1)
    full = load_world_questions(world, "test")
    n = len(full) // 2
    drawn = heldout_sample(world, n, tmp_path / "q.jsonl", seed=0)
    assert len(drawn) == n and drawn["id"].is_unique
    assert [q["index"] for q in load_questions(tmp_path / "q.jsonl")] == drawn["id"].tolist()
    share = drawn["subworld"].eq("held-out").mean() - full["subworld"].eq("held-out").mean()
    assert abs(share) <= 1 / n + 0.05  # the held-out sub-world keeps its share of the split
    assert set(drawn["hops"]) == set(full["hops"])
