"""Fixtures for the data tests: raw REDSearcher rows built by hand, each exercising the cleaning rules."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from venus_utils.data import synthetic


def call(name: str, arguments) -> str:
    return json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)


def asst(reasoning: str, call_text: str) -> dict:
    return {
        "role": "assistant",
        "content": f"<think>\n{reasoning}\n</think>\n\n<tool_call>\n{call_text}\n</tool_call>",
    }


def resp(text: str, role: str = "user") -> dict:
    return {"role": role, "content": f"<tool_response>\n{text}\n</tool_response>"}


def final(reasoning: str, answer: str) -> dict:
    return {"role": "assistant", "content": f"<think>\n{reasoning}\n</think>\n<answer>\n{answer}\n</answer>"}


def raw(messages: list, question: str = "Who founded it?", answer: str = "X") -> dict:
    return {"meta": {"question": question, "answer": answer}, "messages": messages, "system_prompt": None}


SEARCH_1 = (
    "A Google search for 'alpha beta' found 1 results:\n\n## Web Results\n"
    "1. [Alpha](https://a.org/x)\n\nAlpha snippet."
)
VISIT_1 = (
    "The useful information in https://a.org/x for user goal find founder as follows: \n\nSummary: \nFounded by X."
)
VISIT_2 = "The useful information in https://a.org/x for user goal find year as follows: \n\nSummary: \nIn 1805."


def section7_row() -> dict:
    """A raw row with every defect at once: a turn without a tool call, two consecutive user messages,
    queries/urls/list-goal calls, a PythonInterpreter turn and an unknown tool, a repeated visit with a new goal,
    and a final message with two <answer> blocks and an external <summary>."""
    return raw(
        [
            {"role": "user", "content": "Who founded it?"},
            asst("I will search.", call("search", {"queries": "alpha beta"})),
            resp(SEARCH_1),
            {"role": "assistant", "content": "Just prose, no tool call"},
            resp("orphan"),
            asst("Visit it.", call("visit", {"urls": "https://a.org/x", "goal": ["find founder", "other"]})),
            resp(VISIT_1),
            resp("second consecutive"),
            asst("Compute.", call("PythonInterpreter", {}) + "\n<code>\nprint(1)\n</code>"),
            resp("1"),
            asst("Scholar.", call("google_scholar", {"q": "x"})),
            resp("scholar output"),
            asst("Again.", call("visit", {"url": ["https://a.org/x"], "goal": "find year"})),
            resp(VISIT_2),
            {
                "role": "assistant",
                "content": "<think>\nDone <summary>inner</summary>.\n</think>\n<summary>Ext summary</summary>\n"
                "<answer>\n<summary>S2</summary>\n\n<answer>\n**X**\n</answer>",
            },
        ]
    )


def write_parquet(path, rows, schema=None):
    table = pa.Table.from_pylist(rows, schema=schema or synthetic.raw_schema())
    pq.write_table(table, path, row_group_size=3)
    return path


@pytest.fixture
def raw_dir(tmp_path):
    """A folder with two raw shards of small synthetic rows (every defect at a high rate)."""
    folder = tmp_path / "raw"
    synthetic.write_raw_shards(folder, 40, seed=3, spec=synthetic.SMALL, rows_per_file=25, row_group_rows=7)
    return folder
