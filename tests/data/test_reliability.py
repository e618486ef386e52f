"""Reliability of the cleaner (issue 15): deep nesting, unclosed tags, unreadable rows, empty files, killed runs.

Every input row is either kept or counted under a drop reason; an error names the file and the line / row.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from venus_utils.core import protocol
from venus_utils.data import clean as cleaner
from venus_utils.data import rules, sources
from venus_utils.data.clean import CleanConfig, run_clean
from venus_utils.data.rules import RuleOptions, clean_row
from venus_utils.data.sources import InputError

from .test_clean import accounted, clean_row_with_turns

REPO = Path(__file__).resolve().parents[2]


def write_jsonl(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def cli(tmp_path, src, name, *args) -> tuple[int, dict | None]:
    """The cleaner's command line (``python -m venus_utils.data.clean``'s ``main``); (exit code, stats)."""
    out = tmp_path / name
    code = cleaner.main(["-i", str(src), "-o", str(out), "--quiet", "--judge", "none", *args])
    stats = json.loads((out / "stats.json").read_text()) if (out / "stats.json").exists() else None
    return code, stats


def nested(depth: int, leaf=None):
    for _ in range(depth):
        leaf = [leaf]
    return leaf


def deep_json(depth: int) -> str:
    return "[" * depth + "]" * depth


# ---- 3. deeply nested JSON ---------------------------------------------------------------------------------


def deep_lines() -> tuple[list[str], int]:
    """JSONL lines: good rows around the four deep rows of the issue; (lines, number of deep rows)."""
    good = [json.dumps(clean_row_with_turns(2, tag=f"-{i}")) for i in range(6)]
    deep_field = '{"question": "q", "gt": "a", "x": ' + deep_json(5000) + ', "messages": []}'
    content = clean_row_with_turns(2, tag="-deep-content")
    content["messages"][1]["content"] = "DEEP"
    deep_content = json.dumps(content).replace('"DEEP"', deep_json(600))  # a 600-deep list as message content
    calls = []
    for name, args in (("lookup", {"a": 1}), ("search", {"query": ["x"]})):  # arguments nested 995 deep
        row = clean_row_with_turns(3, tag=f"-deep-call-{name}")
        body = json.dumps({"name": name, "arguments": {**args, "deep": "DEEP"}}).replace('"DEEP"', deep_json(995))
        row["messages"][1]["content"] = f"<think>\nlook\n</think>\n<tool_call>\n{body}\n</tool_call>"
        calls.append(json.dumps(row))
    return good[:2] + [deep_field] + good[2:4] + [deep_content] + calls + good[4:], 4


@pytest.mark.parametrize(
    "args",
    [
        ("--workers", "1"),
        ("--workers", "2", "--batch-rows", "2"),
        ("--workers", "1", "--compat", "reference"),
        ("--workers", "2", "--batch-rows", "2", "--compat", "reference"),
    ],
    ids=["strict-1", "strict-2", "reference-1", "reference-2"],
)
def test_deeply_nested_rows_are_dropped_not_crashes(tmp_path, args):
    lines, n_deep = deep_lines()
    src = write_jsonl(tmp_path / "rows.jsonl", lines)
    code, stats = cli(tmp_path, src, "out", *args)
    assert code == 0
    assert stats["drop_reasons"] == {"too_deep": n_deep} and stats["rows"]["kept"] == len(lines) - n_deep
    assert accounted(stats)
    # the two rows too deep to read are named by file and line; the deep tool calls are found by the rules
    assert [re.sub(r".*/", "", d) for d in stats["bad_rows"]] == [
        "rows.jsonl:3: nested deeper than 32 levels",
        "rows.jsonl:6: nested deeper than 32 levels",
    ]


def test_deep_rows_in_a_json_file_and_straight_to_the_rules(tmp_path):
    good = [clean_row_with_turns(2, tag=f"-{i}") for i in range(3)]
    src = tmp_path / "rows.json"
    src.write_text(
        "["
        + ", ".join(
            [
                json.dumps(good[0]),
                deep_json(5000),
                json.dumps(good[1]),
                '{"a": ' + json.dumps(nested(40)) + "}",
                json.dumps(good[2]),
            ]
        )
        + "]"
    )
    stats = run_clean(CleanConfig(input=src, output_dir=tmp_path / "out", progress=False, workers=1, judge="none"))
    assert stats["drop_reasons"] == {"too_deep": 2} and stats["rows"]["kept"] == 3 and accounted(stats)
    assert [d.split(": ", 1)[1] for d in stats["bad_rows"]] == [
        "row 1: nested deeper than 32 levels",
        "row 3: nested deeper than 32 levels",
    ]
    single = tmp_path / "one.json"
    single.write_text('{"question": "q", "gt": "a", "messages": ' + deep_json(5000) + "}")
    assert run_clean(CleanConfig(input=single, output_dir=tmp_path / "one", progress=False, workers=1, judge="none"))[
        "drop_reasons"
    ] == {"too_deep": 1}
    # a row that reaches the rules without the reader (parquet, callers of clean_row): same drop in both modes
    row = clean_row_with_turns(2)
    row["messages"][1]["content"] = nested(600)
    for mode in ("strict", "reference"):
        assert clean_row(row, RuleOptions(mode=mode)).reason == "too_deep"
    assert clean_row(clean_row_with_turns(2), RuleOptions(mode="reference")).reason is None
    assert not sources.too_deep(nested(sources.MAX_DEPTH)) and sources.too_deep(nested(sources.MAX_DEPTH + 1))
    assert sources.text_too_deep("[" * 33) and not sources.text_too_deep("[" * 32 + "]" * 40 + "[]" * 100)
    assert sources.text_too_deep('{"name": "x", "arguments": "' + "[" * 40 + "]" * 40 + '"}')  # JSON in a string


# ---- 4. linear time on unclosed tags -----------------------------------------------------------------------

TAGS = (
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<answer>",
    "</answer>",
    "<summary>",
    "</summary>",
    "<code>",
    "</code>",
    "<tool_response>",
    "</tool_response>",
)
CALL = protocol.render_tool_call("search", {"query": ["q"]})
PY_CALL = protocol.render_tool_call("PythonInterpreter", {})
TOOL_TURNS = (
    "{x}",
    "<think>{x}</think>\n<tool_call>\n" + CALL + "\n</tool_call>",
    "<think>\nr\n</think>\n{x}<tool_call>\n" + CALL + "\n</tool_call>",
    "<think>\nr\n</think>\n<tool_call>\n" + PY_CALL + "<code>{x}\n</tool_call>",
    "<think>\nr\n</think>\n<tool_call>\n" + CALL + "\n</tool_call>{x}",
)
FINAL_TURNS = (
    "{x}",
    "<think>{x}</think>\n<answer>a</answer>",
    "<think>\nr\n</think>\n{x}<answer>a</answer>",
    "<think>\nr\n</think>\n<answer>{x}</answer>",
    "<think>\nr\n</think>\n<answer>a</answer>{x}",
    "<think>\nr\n</think>\n<summary>{x}</summary><answer>a</answer>",
)
RESPONSES = (
    "<tool_response>\n{x}\n</tool_response>",
    "A Google search for 'q' found 1 results:\n\n## Web Results\n{x}",
)


def _groups(n: int) -> dict[str, list[dict]]:
    """Per (tag, place): the rows (raw and clean schema) with the tag repeated n times in that turn or response."""
    tool, response, fin = (s.replace("{x}", "r") for s in (TOOL_TURNS[1], RESPONSES[0], FINAL_TURNS[1]))
    places = (
        [(f"tool turn {i}", t, response, fin) for i, t in enumerate(TOOL_TURNS)]
        + [(f"response {i}", tool, r, fin) for i, r in enumerate(RESPONSES)]
        + [(f"final turn {i}", tool, response, f) for i, f in enumerate(FINAL_TURNS)]
    )
    groups = {}
    for tag in TAGS:
        for place, t, r, f in places:
            msgs = [
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": t.replace("{x}", tag * n)},
                {"role": "user", "content": r.replace("{x}", tag * n)},
                {"role": "assistant", "content": f.replace("{x}", tag * n)},
            ]
            groups[f"{tag!r} x {n} in {place}"] = [
                {"meta": {"question": "q", "answer": "a"}, "messages": msgs},
                {"question": "q", "gt": "a", "messages": msgs},
            ]
    return groups


def _cpu_seconds(rows: list[dict]) -> float:
    """CPU time (not wall time: other processes do not count) of cleaning ``rows`` in both modes."""
    t0 = time.process_time()
    for row in rows:
        for mode in ("strict", "reference"):
            clean_row(row, RuleOptions(mode=mode))
    return time.process_time() - t0


def test_unclosed_tags_take_linear_time():
    """4x the text must cost well under 16x the time (quadratic) -- linear is ~4x; a ratio, no time limit."""
    small, large = _groups(1000), _groups(4000)  # "<think>" * 4000: 28 kB in one turn
    for (name, rows_small), rows_large in zip(small.items(), large.values()):
        base = min(_cpu_seconds(rows_small) for _ in range(2))
        for _ in range(3):  # a try disturbed by the machine gets another chance; a quadratic case fails all three
            ratio = _cpu_seconds(rows_large) / base
            if ratio < 8:
                break
        assert ratio < 8, f"{name}: 4x the text took {ratio:.1f}x the time (linear: ~4, quadratic: ~16)"


FRAGMENTS = [
    "<think>",
    "</think>",
    "<thinking>",
    "</thinking>",
    "<THINK>",
    "</Think>",
    "<thin\u212a>",
    "<tool_call>",
    "</tool_call>",
    "<answer>",
    "</answer>",
    "<Answer>",
    "<summary>",
    "</summary>",
    "</\u017fummary>",
    "<code>",
    "</code>",
    "</CODE>",
    "x",
    "\n",
    "<",
    ">",
    "/",
]  # U+212A and U+017F match "k" and "s" under IGNORECASE


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=14).map("".join))
def test_tag_patterns_match_like_the_regexes(text):
    for pattern in (rules.THINK_RE, rules.ANSWER_RE, rules.TOOL_CALL_RE, rules.SUMMARY_RE):
        assert [m.span() for m in pattern.finditer(text)] == [m.span() for m in pattern.regex.finditer(text)]
        assert pattern.findall(text) == pattern.regex.findall(text)
        found, expected = pattern.search(text), pattern.regex.search(text)
        assert (found and found.span()) == (expected and expected.span())
        for repl in (r"\1", ""):
            assert pattern.sub(repl, text) == pattern.regex.sub(repl, text)
    body = '{"name": "PythonInterpreter", "arguments": {}}' + text  # protocol's <code> cut, unchanged
    cut = body.find("<code>")
    if cut != -1:
        match = re.search(r"<code>(.*?)</code>", body[cut:], re.DOTALL | re.IGNORECASE)
        assert protocol.parse_tool_call_body(body).code == (match.group(1) if match else body[cut + 6 :])


# ---- 9a / 9d. unreadable rows: an error naming file and line / row, or --on-bad-line drop ------------------


def test_bad_jsonl_line_is_an_error_or_counted_with_on_bad_line_drop(tmp_path, capsys):
    good = [json.dumps(clean_row_with_turns(2, tag=f"-{i}")) for i in range(5)]
    src = write_jsonl(
        tmp_path / "rows.jsonl", good[:2] + ["{oops"] + good[2:] + ['{"question": "q\xff", "gt": "a", "messages": []}']
    )
    src.write_bytes(src.read_bytes().replace("\xff".encode(), b"\xff"))  # and a line that is not UTF-8
    code, _ = cli(tmp_path, src, "err")
    assert code == 2
    err = capsys.readouterr().err
    assert f"{src}:3: not valid JSON" in err and "--on-bad-line drop" in err
    for workers in ("1", "2"):
        code, stats = cli(
            tmp_path, src, f"drop{workers}", "--on-bad-line", "drop", "--workers", workers, "--batch-rows", "2"
        )
        assert (
            code == 0 and stats["drop_reasons"] == {"bad_line": 2} and stats["rows"]["kept"] == 5 and accounted(stats)
        )
        assert stats["per_file"]["rows.jsonl"]["dropped"] == {"bad_line": 2}
        assert [d.split(": ")[0] for d in stats["bad_rows"]] == [f"{src}:3", f"{src}:7"]
    assert run_clean(
        CleanConfig(
            input=src, output_dir=tmp_path / "api", on_bad_line="drop", progress=False, workers=1, judge="none"
        )
    )["drop_reasons"] == {"bad_line": 2}
    with pytest.raises(ValueError, match="on_bad_line"):
        CleanConfig(input=src, output_dir=tmp_path, on_bad_line="skip")


def bad_utf8_parquet(path: Path, n: int = 5, bad: tuple[int, ...] = (3,)) -> Path:
    """A clean-schema parquet file whose rows ``bad`` hold a message that is not UTF-8."""
    rows = [clean_row_with_turns(2, tag=f"-{i}") for i in range(n)]
    typ = pa.list_(pa.struct([("role", pa.binary()), ("content", pa.binary())]))
    msgs = [
        [
            {"role": m["role"].encode(), "content": m["content"].encode() + (b"\xff" if i in bad else b"")}
            for m in r["messages"]
        ]
        for i, r in enumerate(rows)
    ]
    table = pa.table(
        {
            "question": [r["question"] for r in rows],
            "gt": [r["gt"] for r in rows],
            "messages": pa.array(msgs, type=typ).view(
                pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
            ),
        }
    )
    pq.write_table(table, path, row_group_size=2)
    return path


def test_invalid_utf8_in_parquet_names_file_row_and_column(tmp_path, capsys):
    src = bad_utf8_parquet(tmp_path / "train-0.parquet")
    for workers in ("1", "2"):
        code, _ = cli(tmp_path, src, f"err{workers}", "--workers", workers, "--batch-rows", "2")
        assert code == 2
        assert f"{src}: row 3, column 'messages': invalid UTF-8" in capsys.readouterr().err
        code, stats = cli(
            tmp_path, src, f"drop{workers}", "--workers", workers, "--batch-rows", "2", "--on-bad-line", "drop"
        )
        assert (
            code == 0
            and stats["drop_reasons"] == {"invalid_utf8": 1}
            and stats["rows"]["kept"] == 4
            and accounted(stats)
        )
        (detail,) = stats["bad_rows"]
        assert detail.startswith(
            f"{src}: row 3, column 'messages': invalid UTF-8 ('utf-8' codec can't decode byte 0xff"
        )


def test_shards_carry_dropped_lines_like_a_single_run(tmp_path):
    from venus_utils.data.clean.shards import merge_shards

    lines = [json.dumps(clean_row_with_turns(2, tag=f"-{i}")) for i in range(7)]
    src = write_jsonl(tmp_path / "rows.jsonl", lines[:3] + ["{oops"] + lines[3:] + [deep_json(2000)])
    kw = dict(input=src, progress=False, workers=1, judge="none", batch_rows=2, on_bad_line="drop")
    single = run_clean(CleanConfig(output_dir=tmp_path / "single", **kw))
    for i in range(2):
        run_clean(CleanConfig(output_dir=tmp_path / f"s{i}", shard=(i, 2), **kw))
    merged = merge_shards(CleanConfig(output_dir=tmp_path / "merged", **kw), [tmp_path / "s1", tmp_path / "s0"])
    assert merged["drop_reasons"] == single["drop_reasons"] == {"bad_line": 1, "too_deep": 1}
    assert merged["bad_rows"] == single["bad_rows"] and len(single["bad_rows"]) == 2
    with pytest.raises(ValueError, match="on_bad_line"):
        merge_shards(
            CleanConfig(output_dir=tmp_path / "m2", **{**kw, "on_bad_line": "error"}),
            [tmp_path / "s0", tmp_path / "s1"],
        )


# ---- 9c. empty inputs ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name,data",
    [
        ("rows.jsonl", ""),
        ("rows.jsonl", "\n  \n"),
        ("rows.json", ""),
        ("rows.json", " \n"),
        ("rows.json", "[]"),
        ("train-0.parquet", None),
    ],
)
def test_empty_files_are_an_error_naming_the_file(tmp_path, capsys, name, data):
    src = tmp_path / name
    if data is None:
        pq.write_table(
            pa.Table.from_pylist(
                [], schema=pa.schema([("question", pa.string()), ("gt", pa.string()), ("messages", pa.string())])
            ),
            src,
        )
    else:
        src.write_text(data)
    with pytest.raises(InputError, match=re.escape(f"{src}: holds no rows (empty file)")):
        run_clean(CleanConfig(input=src, output_dir=tmp_path / "out", progress=False, workers=1))
    assert cli(tmp_path, src, "cli")[0] == 2 and f"{src}: holds no rows" in capsys.readouterr().err


# ---- 9b. leftovers of killed runs ----------------------------------------------------------------------------

PAUSED_CLEANER = """
import sys, time
from venus_utils.data import clean, sources
real = sources.iter_batches
def paused(*args, **kwargs):  # the real cleaner, held after its first batch until the test kills it
    for item in real(*args, **kwargs):
        yield item
        time.sleep(120)
sources.iter_batches = paused
sys.exit(clean.main(sys.argv[1:]))
"""


def test_rerun_removes_what_a_killed_run_left_and_spares_live_runs(tmp_path, capsys):
    src = write_jsonl(tmp_path / "rows.jsonl", [json.dumps(clean_row_with_turns(2, tag=f"-{i}")) for i in range(8)])
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            PAUSED_CLEANER,
            "-i",
            str(src),
            "-o",
            str(out),
            "--quiet",
            "--workers",
            "1",
            "--batch-rows",
            "2",
            "--judge",
            "none",
        ],
        cwd=REPO,
    )
    try:
        deadline = time.monotonic() + 60
        while not list(out.glob(".clean-*/part-*.arrow")):
            assert proc.poll() is None and time.monotonic() < deadline, "the paused cleaner did not start"
            time.sleep(0.05)
        (work,) = out.glob(".clean-*")
        tmp_files = [out / ".cleaned_resampled.parquet.k2j4h6g8.tmp", out / ".stats.json.a1b2c3d4.tmp"]
        for f in tmp_files:  # what io.atomic_path leaves when its writer is killed
            f.write_text("half written")
        (out / "notes.txt").write_text("mine")
        (out / ".other.json.x1y2z3.tmp").write_text("not the cleaner's")
        # while it runs, a second run on the same output folder is refused and removes nothing ...
        with pytest.raises(ValueError, match=rf"in use by another cleaner run \(pid {proc.pid}\)"):
            run_clean(CleanConfig(input=src, output_dir=out, progress=False, workers=1, judge="none"))
        assert cli(tmp_path, src, "out")[0] == 2 and "in use by another cleaner run" in capsys.readouterr().err
        assert work.is_dir() and all(f.exists() for f in tmp_files)
        # ... and a run on another output folder goes on beside it
        other = run_clean(
            CleanConfig(input=src, output_dir=tmp_path / "other", progress=False, workers=1, judge="none")
        )
        assert other["rows"]["kept"] == 8 and work.is_dir()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert work.is_dir() and all(f.exists() for f in tmp_files)  # what the killed run left
    stats = run_clean(CleanConfig(input=src, output_dir=out, progress=False, workers=1, judge="none"))
    assert stats["rows"]["kept"] == 8
    assert not list(out.glob(".clean-*")) and not any(f.exists() for f in tmp_files)
    assert (out / "notes.txt").exists() and (out / ".other.json.x1y2z3.tmp").exists()  # not the cleaner's: kept
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == [".clean.lock", ".other.json.x1y2z3.tmp"]
    assert os.path.getsize(out / ".clean.lock") > 0
