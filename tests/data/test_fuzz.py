"""Hypothesis fuzzing of malformed rows: no crash, every row kept or counted under a drop reason."""

from __future__ import annotations

import json
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from venus_utils.data import rules
from venus_utils.data.clean import CleanConfig, run_clean
from venus_utils.data.rules import RuleOptions, clean_row

FRAGMENTS = [
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<answer>",
    "</answer>",
    "<summary>",
    "</summary>",
    "<tool_response>",
    "</tool_response>",
    "<code>",
    '{"name": "search", "arguments": {"query": ["a"]}}',
    '{"name": "visit", "arguments": {"url": "u", "goal": ["g"]}}',
    '{"name": "PythonInterpreter", "arguments": {}}',
    '{"name": 5}',
    "{'name': 'x', 'arguments': {}}",
    "A Google search for 'q' found 1 results:",
    "## Web Results",
    "1. [t](u)",
    "=======",
    "Source: s",
    "Date published: 1",
    "Web Results",
    "\n",
    " ",
    "text",
    "\ud83d\ude00",
]
content = st.lists(st.sampled_from(FRAGMENTS), max_size=12).map("".join)
role = st.sampled_from(["user", "assistant", "system", "tool", "function", None, 5])
message = st.one_of(
    st.fixed_dictionaries({"role": role, "content": st.one_of(content, st.none(), st.integers())}),
    st.fixed_dictionaries({"role": role}),
    st.text(max_size=3),
    st.none(),
)
messages = st.one_of(st.lists(message, max_size=9), st.none(), st.text(max_size=5), st.integers())
text = st.one_of(st.text(max_size=6), st.none(), st.integers(), st.just(""))
meta = st.one_of(
    st.fixed_dictionaries({"question": text, "answer": text}),
    st.none(),
    st.text(max_size=4),
    st.just('{"question": "q", "answer": "a"}'),
)
row = st.one_of(
    st.fixed_dictionaries({"meta": meta, "messages": messages}),
    st.fixed_dictionaries({"question": text, "gt": text, "messages": messages}),
    st.fixed_dictionaries({"meta": meta, "question": text, "gt": text, "messages": messages, "system_prompt": text}),
    st.lists(st.integers(), max_size=2),
    st.none(),
)

REFERENCE_REASONS = re.compile(
    r"^(missing_question_or_gt|raw_clean_failed|clean_input_invalid|too_short|bad_role_start|non_dict_message|"
    r"bad_role_at_\d+|non_str_content_at_\d+|first_user_contains_tool_response|user_missing_tool_response_at_\d+|"
    r"assistant_missing_think|final_assistant_missing_answer|final_assistant_contains_tool|assistant_missing_tool_call|"
    r"assistant_tool_turn_contains_answer)$"
)
STRICT_REASONS = set(rules.STRICT_DROP_REASONS) | {
    "missing_question_or_gt",
    "too_short",
    "bad_role_start",
    "non_dict_message",
    "first_user_contains_tool_response",
    "assistant_missing_think",
    "final_assistant_missing_answer",
    "final_assistant_contains_tool",
    "assistant_missing_tool_call",
    "assistant_tool_turn_contains_answer",
}


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(row)
def test_clean_row_never_crashes(r):
    ref = clean_row(r, RuleOptions(mode="reference"))
    assert (ref.reason is None) == (ref.messages is not None)
    assert ref.reason is None or REFERENCE_REASONS.match(ref.reason), ref.reason
    if ref.messages is not None:
        assert rules.validate_reference(ref.messages) is None
    strict = clean_row(r, RuleOptions(mode="strict"))
    assert (strict.reason is None) == (strict.messages is not None)
    assert strict.reason is None or strict.reason in STRICT_REASONS, strict.reason
    if strict.messages is not None:
        assert rules.validate_strict(strict.messages) is None
        assert rules.validate_reference(strict.messages) is None  # strict output also passes DR-Venus's validator


def _jsonable(r):
    try:
        json.dumps(r)
        return True
    except (TypeError, ValueError):
        return False


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(st.lists(row.filter(_jsonable), min_size=1, max_size=12))
def test_every_row_accounted_end_to_end(tmp_path_factory, rows):
    folder = tmp_path_factory.mktemp("fuzz")
    src = folder / "rows.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    if not any(isinstance(r, dict) and "messages" in r for r in rows):
        return  # a file without a 'messages' column is an input error, tested elsewhere
    if not any(isinstance(r, dict) and ("meta" in r or {"question", "gt"} <= set(r)) for r in rows):
        return
    for mode in ("reference", "strict"):
        stats = run_clean(CleanConfig(input=src, output_dir=folder / mode, compat=mode, progress=False, workers=1))
        rows_ = stats["rows"]
        assert rows_["source"] == len(rows)
        assert rows_["source"] == rows_["kept"] + sum(stats["drop_reasons"].values())
        assert rows_["final_resampled"] == sum(int(k) * v for k, v in stats["multiplier_distribution"].items())
