"""The synthetic raw-trajectory generator and the notebook helpers."""

from __future__ import annotations

import json

import pyarrow.parquet as pq

from venus_utils.data import curation_report, synthetic
from venus_utils.data.clean import CleanConfig, run_clean
from venus_utils.data.resample import ResamplePolicy


def test_generator_is_seeded_and_raw_schema(tmp_path):
    a = list(synthetic.raw_rows(5, seed=1, spec=synthetic.SMALL))
    assert (
        a
        == list(synthetic.raw_rows(5, seed=1, spec=synthetic.SMALL))
        != list(synthetic.raw_rows(5, seed=2, spec=synthetic.SMALL))
    )
    paths = synthetic.write_raw_shards(tmp_path, 23, seed=0, spec=synthetic.SMALL, rows_per_file=10, row_group_rows=4)
    assert [p.name for p in paths] == [
        "train-00000-of-00003.parquet",
        "train-00001-of-00003.parquet",
        "train-00002-of-00003.parquet",
    ]
    pf = pq.ParquetFile(paths[0])
    assert pf.schema_arrow.equals(synthetic.raw_schema()) and pf.metadata.num_row_groups == 3
    assert sum(pq.ParquetFile(p).metadata.num_rows for p in paths) == 23
    row = a[0]
    assert set(row) == {"meta", "messages", "system_prompt"} and row["messages"][0]["role"] in ("user", "system")


def test_realistic_sizes_and_buckets():
    rows = list(synthetic.raw_rows(60, seed=0))
    turns = [sum(m["role"] == "assistant" for m in r["messages"]) for r in rows]
    chars = [sum(len(m["content"]) for m in r["messages"]) for r in rows]
    assert max(turns) > 100 and any(50 < t <= 100 for t in turns) and min(turns) <= 50
    assert 20_000 < sum(chars) / len(chars) < 400_000  # tens to hundreds of KB per trajectory, like REDSearcher's


def test_every_defect_reaches_the_cleaner(tmp_path):
    spec = synthetic.SyntheticSpec(
        min_turns=3,
        max_turns=12,
        medium_share=0,
        long_share=0,
        think_words=(3, 6),
        results_per_search=(1, 2),
        snippet_words=(2, 4),
        visit_words=(3, 6),
        defect_rate=0.25,
    )
    synthetic.write_raw_shards(tmp_path / "raw", 120, seed=0, spec=spec)
    stats = run_clean(
        CleanConfig(
            input=tmp_path / "raw", output_dir=tmp_path / "out", progress=False, workers=1, keep_intermediate=True
        )
    )
    ref = run_clean(
        CleanConfig(input=tmp_path / "raw", output_dir=tmp_path / "ref", compat="reference", progress=False, workers=1)
    )
    fixes = stats["strict_fixes"]
    for name in (
        "answer_nested_open_removed",
        "search_separator_removed",
        "search_source_line_removed",
        "search_failure_kept",
        "multiple_tool_calls_rejected",
        "visit_goal_in_dedup",
        "raw_leading_system_used",
        "tool_role_as_response",
    ):
        assert fixes[name] > 0, name
    for reason in ("missing_question_or_gt", "ends_without_answer", "final_missing_answer", "incorrect_answer"):
        assert stats["drop_reasons"].get(reason, 0) > 0, reason
    assert ref["drop_reasons"]["raw_clean_failed"] > 0
    assert ref["pruned_tool_name_counts"].keys() == {"PythonInterpreter", "google_scholar"}
    assert (
        ref["duplicate_tool_turns_removed"] > 0 and stats["turns_removed_in_valid_rows"]["tool_turn_missing_think"] > 0
    )

    # notebook 01 helpers
    rows = list(synthetic.raw_rows(120, seed=0, spec=spec))
    examples = curation_report.rule_examples(rows)
    assert {
        "tool call standardised",
        "turn without reasoning dropped",
        "multi-query search: '=======' leak",
        "failed query in a search",
    } <= set(examples["rule"])
    assert "<table>" in curation_report.side_by_side_html(examples)
    table = curation_report.drop_reason_table({"strict": stats, "reference": ref})
    assert table.loc["(source)", "strict"] == 120 and table.loc["(kept)", "reference"] == ref["rows"]["kept"]
    funnel = curation_report.funnel(stats)
    assert list(funnel["stage"]) == list(curation_report.FUNNEL_STAGES) and funnel["rows"].iloc[0] == 120
    assert curation_report.plot_funnel(funnel) is not None
    judgements = curation_report.read_judgements(tmp_path / "out" / "judgements.jsonl")
    crosstab, agreement, disagreements = curation_report.judge_agreement(judgements)
    assert 0 <= agreement <= 1 and int(crosstab.values.sum()) == len(judgements)

    # notebook 02 helpers
    kept = curation_report.load_kept(tmp_path / "out")
    policy = ResamplePolicy(short_max_turns=4, medium_max_turns=7)
    before = curation_report.trajectory_table(kept, policy)
    assert len(before) == stats["rows"]["kept"] and curation_report.length_label(before).startswith("≈")
    after = curation_report.resampled_view(before)
    assert len(after) == int(before["multiplier"].sum())
    shares = curation_report.bucket_token_shares(before, policy)
    assert abs(shares["token share after"].sum() - 1) < 1e-9 and list(shares.index) == policy.labels()
    positions = curation_report.tool_positions(kept)
    assert {"search", "visit", "answer"} <= set(positions["tool"])
    grid = curation_report.what_if(before, [4, 6], [7], [1, 5])
    assert len(grid) == 4 and grid["training rows"].min() >= len(before)
    assert curation_report.plot_distributions(before, after, "turns", "turns") is not None
    json.dumps(curation_report.funnel(stats).to_dict())
