"""The cleaner end to end: outputs, stats layout and accounting, resampling, split, inputs and errors."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from venus_utils.core import protocol
from venus_utils.data import clean as cleaner
from venus_utils.data.clean import CleanConfig, diff_outputs, run_clean
from venus_utils.data.sources import InputError

from .conftest import final, raw, section7_row, write_parquet

T = "<think>\nlook\n</think>\n<tool_call>\n{}\n</tool_call>"


def clean_row_with_turns(n: int, tag: str = "") -> dict:
    """A clean-schema row with ``n`` assistant turns (n - 1 distinct searches, then the answer)."""
    msgs = [{"role": "user", "content": f"question {n}{tag}"}]
    for i in range(n - 1):
        msgs += [
            {"role": "assistant", "content": protocol.tool_turn("look", "search", {"query": [f"q{i}"]})},
            {"role": "user", "content": protocol.wrap_tool_response("[]")},
        ]
    msgs.append({"role": "assistant", "content": protocol.answer_turn("done", f"answer {n}")})
    return {"question": f"question {n}{tag}", "gt": f"answer {n}", "messages": msgs}


def run(tmp_path, input_path, name="out", **kw) -> tuple[dict, pa.Table]:
    kw.setdefault("progress", False)
    kw.setdefault("workers", 1)
    stats = run_clean(CleanConfig(input=input_path, output_dir=tmp_path / name, **kw))
    return stats, pq.read_table(tmp_path / name / "cleaned_resampled.parquet")


def accounted(stats) -> bool:
    return stats["rows"]["source"] == stats["rows"]["kept"] + sum(stats["drop_reasons"].values())


@pytest.fixture
def mixed_file(tmp_path):
    """The every-defect row, a missing gt, a final message without answer and a clean row ending on a tool response."""
    rows = [
        section7_row(),
        raw([{"role": "user", "content": "q"}, final("r", "X")], answer=""),
        raw([{"role": "user", "content": "q"}, {"role": "assistant", "content": "<think>r</think> no answer"}]),
        {
            "meta": None,
            "question": "clean q",
            "gt": "Y",
            "system_prompt": None,
            "messages": [
                {"role": "user", "content": "clean q"},
                {"role": "assistant", "content": T},
                {"role": "user", "content": "<tool_response>\nr\n</tool_response>"},
            ],
        },
    ]
    schema = pa.schema(
        [
            ("meta", pa.struct([("question", pa.string()), ("answer", pa.string())])),
            ("question", pa.string()),
            ("gt", pa.string()),
            ("system_prompt", pa.string()),
            ("messages", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
        ]
    )
    return write_parquet(tmp_path / "train-00000.parquet", rows, schema)


def test_reference_stats_layout_and_counts(tmp_path, mixed_file):
    stats, table = run(tmp_path, mixed_file, compat="reference", keep_metadata=True, current_date="2026-03-01")
    assert list(stats)[:17] == [
        "input",
        "files",
        "output_dir",
        "system_prompt_mode",
        "allowed_tools",
        "turn_formula",
        "resample_policy",
        "rows",
        "pruned_tool_turns_removed",
        "pruned_tool_response_turns_removed",
        "pruned_tool_name_counts",
        "duplicate_tool_turns_removed",
        "drop_reasons",
        "tools_after_cleaning",
        "turn_buckets",
        "multiplier_distribution",
        "per_file",
    ]
    assert stats["rows"] == {"source": 4, "stage1_normalized": 2, "stage2_valid": 2, "final_resampled": 2, "kept": 2}
    assert stats["drop_reasons"] == {"missing_question_or_gt": 1, "raw_clean_failed": 1}
    assert stats["pruned_tool_name_counts"] == {"PythonInterpreter": 1, "google_scholar": 1}
    assert (stats["pruned_tool_turns_removed"], stats["pruned_tool_response_turns_removed"]) == (2, 2)
    assert stats["duplicate_tool_turns_removed"] == 1
    assert stats["tools_after_cleaning"] == {"search": 1, "visit": 1}
    assert stats["turn_buckets"] == {"original": {"0-50": 2}, "resampled": {"0-50": 2}}
    assert stats["per_file"]["train-00000.parquet"]["dropped"] == stats["drop_reasons"]
    assert stats["allowed_tools"] == ["search", "visit"] and stats["turn_formula"] == "(len(messages) - 1) / 2"
    assert table.column_names == [
        "question",
        "messages",
        "gt",
        "_source_file",
        "_source_row",
        "_turns",
        "_resample_multiplier",
        "_sample_copy",
    ]
    rows = table.to_pylist()
    assert [r["_source_row"] for r in rows] == [0, 3] and [r["_turns"] for r in rows] == [3, 1]
    assert rows[0]["messages"][0]["content"].endswith("\n\nCurrent date: 2026-03-01\n")
    assert rows[1]["messages"][-1]["content"].startswith("<tool_response>")  # reference validator gap reproduced
    assert accounted(stats)


def test_strict_counts_and_fixes(tmp_path, mixed_file):
    stats, table = run(tmp_path, mixed_file, keep_intermediate=True)
    assert stats["mode"] == "strict" and stats["shuffle"] is True
    assert stats["drop_reasons"] == {"missing_question_or_gt": 1, "final_missing_answer": 1, "ends_without_answer": 1}
    assert (
        stats["strict_fixes"]["answer_nested_open_removed"] == 1 and stats["strict_fixes"]["visit_goal_in_dedup"] == 1
    )
    assert set(stats["strict_fixes"]) == set(cleaner.rules.STRICT_FIXES)
    assert stats["judge"]["kind"] == "offline" and stats["judge"]["methods"] == {"exact": 1}
    assert table.column_names == ["question", "messages", "gt"] and table.num_rows == 1
    assert (tmp_path / "out" / "stage3_kept.parquet").exists() and (tmp_path / "out" / "judgements.jsonl").exists()
    assert accounted(stats)


def test_resampling_multipliers_and_shuffle(tmp_path):
    src = tmp_path / "rows.jsonl"
    src.write_text("".join(json.dumps(clean_row_with_turns(n)) + "\n" for n in (50, 51, 100, 101)))
    stats, table = run(tmp_path, src, compat="reference", keep_metadata=True)
    assert table.column("_turns").to_pylist() == [50, 51, 51, 100, 100, 101, 101, 101, 101, 101]
    assert table.column("_resample_multiplier").to_pylist() == [1, 2, 2, 2, 2, 5, 5, 5, 5, 5]
    assert table.column("_sample_copy").to_pylist() == [0, 0, 1, 0, 1, 0, 1, 2, 3, 4]
    assert stats["turn_buckets"] == {
        "original": {"0-50": 1, "51-100": 2, ">100": 1},
        "resampled": {"0-50": 1, "51-100": 4, ">100": 5},
    }
    assert stats["multiplier_distribution"] == {"1": 1, "2": 2, "5": 1}
    shuffled_stats, shuffled = run(tmp_path, src, "shuf", compat="reference", keep_metadata=True, shuffle=True, seed=7)
    perm = np.random.RandomState(7).permutation(10)  # pandas sample(frac=1, random_state=7)
    assert shuffled.to_pylist() == [table.to_pylist()[i] for i in perm]
    assert run(tmp_path, src, "shuf2", compat="reference", keep_metadata=True, shuffle=True, seed=7)[1].equals(
        shuffled
    )
    custom = run(
        tmp_path,
        src,
        "custom",
        compat="reference",
        policy=cleaner.ResamplePolicy(short_max_turns=60, medium_max_turns=100, medium_multiplier=3),
    )[0]
    assert custom["turn_buckets"]["original"] == {"0-60": 2, "61-100": 1, ">100": 1}
    assert custom["rows"]["final_resampled"] == 2 + 3 + 5


def test_strict_split_by_question(tmp_path):
    src = tmp_path / "rows.jsonl"
    rows = [clean_row_with_turns(n, tag=f"-{i}") for i in range(10) for n in (3, 60)]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    stats, combined = run(tmp_path, src, val_fraction=0.2, seed=1)
    train = pq.read_table(tmp_path / "out" / "train.parquet").to_pylist()
    val = pq.read_table(tmp_path / "out" / "val.parquet").to_pylist()
    assert stats["split"]["val_questions"] == 4 and len(val) == 4  # validation rows are not repeated
    assert not {r["question"] for r in train} & {r["question"] for r in val}
    assert len(train) == sum(
        2 if "question 60" in r["question"] else 1 for r in rows if r["question"] not in {v["question"] for v in val}
    )
    assert combined.num_rows == 30 and accounted(stats)
    again = run(tmp_path, src, "again", val_fraction=0.2, seed=1)[0]
    assert (
        pq.read_table(tmp_path / "again" / "train.parquet").to_pylist() == train and again["split"] == stats["split"]
    )


def test_incorrect_answers_are_dropped(tmp_path):
    rows = [clean_row_with_turns(3, tag=f"-{i}") for i in range(4)]
    rows[1]["gt"] = "something else entirely"
    src = tmp_path / "rows.json"
    src.write_text(json.dumps(rows))
    stats, table = run(tmp_path, src, judge="offline")
    assert stats["drop_reasons"] == {"incorrect_answer": 1} and table.num_rows == 3
    judged = [json.loads(line) for line in (tmp_path / "out" / "judgements.jsonl").read_text().splitlines()]
    assert [j["correct"] for j in judged] == [True, False, True, True] and judged[0]["em"] is True
    assert run(tmp_path, src, "nojudge", judge="none")[0]["rows"]["kept"] == 4


def test_token_accounting_and_too_long(tmp_path):
    from venus_utils.modeling import train_tokenizer

    rows = [clean_row_with_turns(n) for n in (2, 12)]
    tok = train_tokenizer([m["content"] for r in rows for m in r["messages"]] * 3, vocab_size=300)
    tok.save_pretrained(tmp_path / "tok")
    src = tmp_path / "rows.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    stats, table = run(tmp_path, src, tokenizer=tmp_path / "tok", keep_metadata=True, shuffle=False)
    tokens = table.column("_tokens").to_pylist()
    full = [dict(r, messages=[{"role": "system", "content": protocol.system_prompt()}] + r["messages"]) for r in rows]
    expected = [
        len(tok(tok.apply_chat_template(r["messages"], tokenize=False), add_special_tokens=False)["input_ids"])
        for r in full
    ]
    assert tokens == expected and tokens[0] < tokens[1]
    limit = (tokens[0] + tokens[1]) // 2
    stats2, table2 = run(tmp_path, src, "cut", tokenizer=tmp_path / "tok", max_tokens=limit)
    assert stats2["drop_reasons"] == {"too_long": 1} and table2.num_rows == 1 and accounted(stats2)
    assert stats2["tokens"]["kept_max"] == tokens[0]


def test_inputs_json_jsonl_and_workers(tmp_path, raw_dir):
    one = run(tmp_path, raw_dir, "one", compat="reference", keep_intermediate=True)[0]
    two = run(tmp_path, raw_dir, "two", compat="reference", keep_intermediate=True, workers=2, batch_rows=4)[0]
    assert (
        diff_outputs(
            tmp_path / "one",
            tmp_path / "two",
            ("cleaned_resampled.parquet", "stage1_normalized.parquet", "stage2_deduped.parquet"),
        )
        == []
    )
    assert one["rows"]["source"] == 40 and accounted(one) and accounted(two)
    rows = pq.read_table(sorted(raw_dir.glob("*.parquet"))[0]).to_pylist()
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    a = run(tmp_path, tmp_path / "rows.jsonl", "jsonl", compat="reference")[1]
    b = run(tmp_path, sorted(raw_dir.glob("*.parquet"))[0], "pq", compat="reference")[1]
    assert a.to_pylist() == b.to_pylist()


def test_reference_artifacts(tmp_path, raw_dir):
    stats = run(tmp_path, raw_dir, compat="reference", keep_intermediate=True, write_jsonl=True)[0]
    out = tmp_path / "out"
    lines = (out / "cleaned_resampled.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == stats["rows"]["final_resampled"]
    assert list(json.loads(lines[0])) == ["question", "messages", "gt"]
    assert pq.read_table(out / "stage1_normalized.parquet").num_rows == stats["rows"]["stage1_normalized"]
    assert pq.read_table(out / "stage2_deduped.parquet").column_names[:6] == [
        "question",
        "messages",
        "gt",
        "_source_file",
        "_source_row",
        "_turns",
    ]
    assert not list(out.glob(".clean-*"))  # temporary parts removed


def test_errors_name_file_and_column(tmp_path):
    bad = tmp_path / "train-0.parquet"
    pq.write_table(pa.table({"meta": [None], "question": ["q"]}), bad)
    with pytest.raises(InputError, match=r"train-0\.parquet: missing column 'messages'"):
        run(tmp_path, bad)
    pq.write_table(pa.table({"messages": [[{"role": "user", "content": "q"}]], "question": ["q"]}), bad)
    with pytest.raises(InputError, match=r"train-0\.parquet: missing column 'gt'"):
        run(tmp_path, bad)
    bad.write_bytes(b"not a parquet file")
    with pytest.raises(InputError, match=r"train-0\.parquet: cannot read parquet"):
        run(tmp_path, bad)
    broken = tmp_path / "rows.jsonl"
    broken.write_text('{"question": "q", "gt": "a", "messages": []}\n{oops\n')
    with pytest.raises(InputError, match=r"rows\.jsonl:2: not valid JSON"):
        run(tmp_path, broken)
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="No input files found"):
        run(tmp_path, tmp_path / "empty")
    with pytest.raises(ValueError, match="strict-mode"):
        CleanConfig(input=bad, output_dir=tmp_path, compat="reference", val_fraction=0.1)
    with pytest.raises(ValueError, match="needs --tokenizer"):
        CleanConfig(input=bad, output_dir=tmp_path, max_tokens=10)


def test_cli(tmp_path, mixed_file, capsys):
    code = cleaner.main(
        [
            "-i",
            str(mixed_file),
            "-o",
            str(tmp_path / "cli"),
            "--compat",
            "reference",
            "--quiet",
            "--current-date",
            "2026-03-01",
            "--workers",
            "1",
        ]
    )
    assert code == 0 and json.loads((tmp_path / "cli" / "stats.json").read_text())["rows"]["kept"] == 2
    assert cleaner.main(["-i", str(tmp_path / "nope"), "-o", str(tmp_path / "x"), "--quiet"]) == 2
    assert "does not exist" in capsys.readouterr().err


# ---- the shared DR-Venus examples ------------------------------------------------------------------------


def test_shared_examples_reference_idempotent(tmp_path, dr_venus_dir):
    folder = dr_venus_dir / "sft_examples"
    files = sorted(folder.glob("*.json"))
    if not files:
        pytest.skip(f"no SFT examples in {folder}")
    stats, table = run(tmp_path, folder, compat="reference", file_pattern="*.json", current_date="2026-03-01")
    n = len(files)
    assert stats["rows"] == {"source": n, "stage1_normalized": n, "stage2_valid": n, "final_resampled": n, "kept": n}
    assert (
        stats["drop_reasons"] == {}
        and stats["duplicate_tool_turns_removed"] == 0
        and stats["pruned_tool_turns_removed"] == 0
    )
    assert stats["turn_buckets"]["original"] == {"0-50": n}
    originals = [json.loads(f.read_text(encoding="utf-8")) for f in files]
    assert table.to_pylist() == [
        {"question": o["question"], "messages": o["messages"], "gt": o["gt"]} for o in originals
    ]
    again = run(
        tmp_path,
        tmp_path / "out" / "cleaned_resampled.parquet",
        "again",
        compat="reference",
        current_date="2026-03-01",
    )[1]
    assert again.equals(table)


def test_shared_examples_strict(tmp_path, dr_venus_dir):
    folder = dr_venus_dir / "sft_examples"
    if not list(folder.glob("*.json")):
        pytest.skip(f"no SFT examples in {folder}")
    stats, table = run(tmp_path, folder, file_pattern="*.json", current_date="2026-03-01", shuffle=False)
    # the exact offline judge accepts the two of DR-Venus's answers that are an alias ("Paul Beneke", "**Daniel
    # Mortimer**") and refuses the five that explain after their answer ("**1805**  The firm was founded in ...") or
    # name another thing ("Buffy the Vampire Slayer Season Eight" for "... comics"): web answers need the LLM judge
    assert accounted(stats) and stats["drop_reasons"] == {"incorrect_answer": 5}
    assert stats["judge"]["methods"] == {"exact": 2, "offline": 5}
    for row in table.to_pylist():
        answer = protocol.extract_answer(row["messages"][-1]["content"])
        assert "<answer>" not in answer and "<summary>" not in answer
    nested = stats["strict_fixes"]["answer_nested_open_removed"]
    assert nested == sum(
        "<answer>\n<summary>" in json.loads(f.read_text())["messages"][-1]["content"] for f in folder.glob("*.json")
    )


def test_system_prompt_style_sets_the_bundled_prompt(tmp_path, raw_dir):
    from venus_utils.core import protocol

    _, table = run(tmp_path, raw_dir, name="compact", current_date="2026-03-01", system_prompt_style="compact")
    first = table.column("messages").to_pylist()[0][0]
    assert first == {"role": "system", "content": protocol.system_prompt("2026-03-01", style="compact")}
    with pytest.raises(ValueError, match="system_prompt_style"):
        CleanConfig(input=raw_dir, output_dir=tmp_path / "x", system_prompt_style="short")
