"""Every cleaning rule of DR-Venus's ``prepare_trajectories.py`` (reference mode) and its fix (strict mode).

Sections follow the script's order and name its functions; the first tests run a hand-built raw row that has
every defect the cleaner handles at once (:func:`.conftest.section7_row`)."""

from __future__ import annotations

import json

import pytest

from venus_utils.core import protocol
from venus_utils.data import rules
from venus_utils.data.rules import RuleOptions, clean_row

from .conftest import SEARCH_1, VISIT_1, VISIT_2, asst, call, final, raw, resp, section7_row

REF = RuleOptions(mode="reference")
STRICT = RuleOptions(mode="strict")
PROMPT = protocol.system_prompt()
SEARCH_1_JSON = json.dumps(
    [
        {
            "query": "alpha beta",
            "web_page_info_list": [{"title": "Alpha", "url": "https://a.org/x", "snippet": "Alpha snippet."}],
        }
    ],
    ensure_ascii=False,
)


def tool(reasoning, name, args):
    return {"role": "assistant", "content": protocol.tool_turn(reasoning, name, args)}


def wrapped(body):
    return {"role": "user", "content": protocol.wrap_tool_response(body)}


# ---- the raw row with every defect at once ----------------------------------------------------------------


def test_section7_row_reference():
    out = clean_row(section7_row(), REF)
    assert out.reason is None
    assert out.messages == [
        {"role": "system", "content": PROMPT},
        {"role": "user", "content": "Who founded it?"},
        tool("I will search.", "search", {"query": ["alpha beta"]}),
        wrapped(SEARCH_1_JSON),
        tool("Visit it.", "visit", {"url": ["https://a.org/x"], "goal": "find founder"}),
        wrapped(VISIT_1),
        # the repeated visit with a new goal is a duplicate for DR-Venus (goal ignored)
        {
            "role": "assistant",
            "content": "<think>\nDone inner.\n\nExt summary\n\nS2\n</think>\n"
            "<answer>\n<summary>S2</summary>\n\n<answer>\n**X**\n</answer>",
        },  # nested leak kept
    ]
    assert (out.pruned_turns, out.pruned_responses, out.pruned_names) == (
        2,
        2,
        ["PythonInterpreter", "google_scholar"],
    )
    assert out.duplicates == 1
    assert out.removed == {"unusable_tool_turn": 1, "orphan_response": 2}
    # stage1 = after normalisation, before pruning: the python call text is kept verbatim
    assert any("<code>\nprint(1)\n</code>" in m["content"] for m in out.stage1)
    assert out.tool_names == ["search", "visit"]
    assert rules.turns_of(out.messages) == 3


def test_section7_row_strict():
    out = clean_row(section7_row(), STRICT)
    assert out.reason is None
    assert out.messages[-3:] == [
        tool("Again.", "visit", {"url": ["https://a.org/x"], "goal": "find year"}),  # new goal: kept
        wrapped(VISIT_2),
        {
            "role": "assistant",
            "content": "<think>\nDone inner.\n\nExt summary\n\nS2\n</think>\n<answer>\n**X**\n</answer>",
        },
    ]
    assert out.messages[2:6] == clean_row(section7_row(), REF).messages[2:6]
    assert out.fixes["visit_goal_in_dedup"] == 1 and out.fixes["answer_nested_open_removed"] == 1
    assert out.duplicates == 0 and out.pruned_turns == 2
    assert out.removed == {"tool_turn_missing_think": 1, "orphan_response": 2}


# ---- question / gt, system prompt -------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["reference", "strict"])
@pytest.mark.parametrize(
    "row",
    [
        {"meta": {"question": "", "answer": "a"}, "messages": []},
        {"meta": {"question": "q", "answer": 5}, "messages": []},
        {"meta": {"question": "q"}, "messages": []},
        {"question": "q", "messages": []},
        {"question": None, "gt": "a", "messages": []},
    ],
)
def test_missing_question_or_gt(row, mode):
    assert clean_row(row, RuleOptions(mode=mode)).reason == "missing_question_or_gt"


def test_blank_question_only_strict():
    row = raw([{"role": "user", "content": "q"}, final("r", "X")], question="  ")
    assert clean_row(row, REF).reason is None
    assert clean_row(row, STRICT).reason == "missing_question_or_gt"


def test_system_prompt_date_line():
    assert protocol.system_prompt("2026-03-01") == PROMPT + "\n\nCurrent date: 2026-03-01\n"
    assert not PROMPT.endswith("\n")


def test_system_prompt_row_mode():
    row = raw([{"role": "user", "content": "q"}, final("r", "X")])
    assert rules.choose_system_prompt(row, "template", "T") == "T"
    assert rules.choose_system_prompt({**row, "system_prompt": "ROW"}, "row", "T") == "ROW"
    assert rules.choose_system_prompt({**row, "system_prompt": "  "}, "row", "T") == "T"
    clean = {"question": "q", "gt": "X", "messages": [{"role": "system", "content": "SYS"}]}
    assert rules.choose_system_prompt(clean, "row", "T") == "SYS"


# ---- raw normalisation (normalize_raw_messages) ----------------------------------------------------------


@pytest.mark.parametrize(
    "messages",
    [
        [],
        "text",
        [{"role": "user", "content": "q"}, "x", final("r", "X")],
        [{"role": "user", "content": "q"}, {"role": "assistant", "content": 3}, final("r", "X")],
    ],
)
def test_raw_structural_failures(messages):
    assert clean_row(raw(messages), REF).reason == "raw_clean_failed"
    assert clean_row(raw(messages), STRICT).reason in rules.STRICT_DROP_REASONS


def test_raw_tool_role_drops_row_in_reference_only():
    msgs = [
        {"role": "user", "content": "q"},
        asst("s", call("search", {"query": ["a"]})),
        resp(SEARCH_1, role="tool"),
        final("r", "X"),
    ]
    assert clean_row(raw(msgs), REF).reason == "raw_clean_failed"
    out = clean_row(raw(msgs), STRICT)
    assert out.reason is None and out.fixes["tool_role_as_response"] == 1 and len(out.messages) == 5


def test_raw_leading_system_message():
    msgs = [{"role": "system", "content": "sys"}, {"role": "user", "content": "q"}, final("r", "X")]
    ref = clean_row(raw(msgs), REF)  # the system message becomes the question turn
    assert ref.reason is None and ref.messages[1]["content"] == "sys" and ref.removed["orphan_response"] == 1
    out = clean_row(raw(msgs), STRICT)
    assert out.messages[1] == {"role": "user", "content": "q"} and out.fixes["raw_leading_system_used"] == 1


def test_surrogate_fix():
    assert rules.fix_surrogates("a\ud83d\ude00b") == "a\U0001f600b"
    assert rules.fix_surrogates("a\ud800b") == "ab"
    assert rules.fix_surrogates("plain") == "plain"
    msgs = [{"role": "user", "content": "q \ud83d\ude00"}, final("r", "X")]
    assert clean_row(raw(msgs), REF).messages[1]["content"] == "q \U0001f600"


def test_web_results_heuristic_vs_routing():
    page = "The useful information in u for user goal g as follows: \n\nSummary: \nA page about ## Web Results."
    msgs = [
        {"role": "user", "content": "q"},
        asst("v", call("visit", {"url": "u", "goal": "g"})),
        resp(page),
        final("r", "X"),
    ]
    assert clean_row(raw(msgs), REF).messages[3]["content"].startswith("<tool_response>\n[")  # page parsed as search
    out = clean_row(raw(msgs), STRICT)
    assert out.messages[3] == wrapped(page) and out.fixes["visit_response_not_parsed_as_search"] == 1
    failed = "No results found for 'a'. Try with a more general query."
    msgs = [{"role": "user", "content": "q"}, asst("s", call("search", {"query": "a"})), resp(failed), final("r", "X")]
    assert clean_row(raw(msgs), REF).messages[3] == wrapped(failed)  # a failed search stays plain text
    body = json.loads(
        clean_row(raw(msgs), STRICT).messages[3]["content"][len("<tool_response>\n") : -len("\n</tool_response>")]
    )
    assert body == [{"query": "a", "web_page_info_list": [], "message": failed}]


# ---- tool-turn cleaning (clean_toolcall_output) ----------------------------------------------------------


@pytest.mark.parametrize(
    "text,expected",
    [
        # first think only, answer/summary tags removed (inner text kept), extra calls and prose discarded
        (
            "<think> a <answer>b</answer> <summary>c</summary> </think><think>second</think> prose"
            '<tool_call>{"name": "search", "arguments": {"query": "q"}}</tool_call>'
            '<tool_call>{"name": "visit"}</tool_call>',
            protocol.tool_turn("a b c", "search", {"query": ["q"]}),
        ),
        (  # json5
            "<think>x</think><tool_call>{'name': 'search', 'arguments': {'query': ['q1', 'q2'],}}</tool_call>",
            protocol.tool_turn("x", "search", {"query": ["q1", "q2"]}),
        ),
        (  # empty query list ok
            '<think>x</think><tool_call>{"name": "search", "arguments": {"query": [], "other": 1}}</tool_call>',
            protocol.tool_turn("x", "search", {"query": []}),
        ),
        ('<think>x</think><tool_call>{"name": "search", "arguments": {"query": 5}}</tool_call>', None),
        ('<think>x</think><tool_call>{"name": "visit", "arguments": {"url": "u"}}</tool_call>', None),  # goal needed
        (
            '<think>x</think><tool_call>{"name": "visit", "arguments": {"url": null, "urls": ["u"], "goal": "g"}}'
            "</tool_call>",
            None,
        ),
        (
            '<think>x</think><tool_call>{"name": "visit", "arguments": {"url": ["u"], "goal": []}}</tool_call>',
            protocol.tool_turn("x", "visit", {"url": ["u"], "goal": ""}),
        ),
        (
            '<think>x</think><tool_call>{"name": "PythonInterpreter", "arguments": {"a": 1}}'
            "<code>1</code></tool_call>",
            None,
        ),
        (
            '<think>x</think><tool_call>{"name": "other", "arguments": {"k": "v"}}</tool_call>',
            protocol.tool_turn("x", "other", {"k": "v"}),
        ),
        ('<think>x</think><tool_call>{"name": "other", "arguments": "v"}</tool_call>', None),
        (
            "<think> <summary></summary> </think>"
            '<tool_call>{"name": "search", "arguments": {"query": "q"}}</tool_call>',
            None,
        ),
        ("<think>x</think>no call", None),
        ("<think>x</think><tool_call>[1, 2]</tool_call>", None),
        ("<think>x</think><tool_call>{not json</tool_call>", None),
    ],
)
def test_tool_turn_reference(text, expected):
    assert rules.clean_tool_turn_reference(text) == expected


def test_python_interpreter_kept_verbatim_then_pruned():
    body = '{"name": "PythonInterpreter", "arguments": {}}\n<code>\nprint(2)\n</code>'
    assert (
        rules.clean_tool_turn_reference(f"<think>x</think><tool_call>\n{body}\n</tool_call>")
        == f"<think>\nx\n</think>\n<tool_call>\n{body}\n</tool_call>"
    )


@pytest.mark.parametrize(
    "args,fix,ok",
    [
        ({"query": []}, "search_args_rejected", False),
        ({"query": ["a", 3]}, "search_args_rejected", False),
        ({"query": ["a", " "]}, "search_args_rejected", False),
        ({"url": None, "urls": ["u"], "goal": "g"}, "visit_urls_fallback", True),
        ({"url": [], "goal": "g"}, "visit_args_rejected", False),
    ],
)
def test_tool_turn_strict_argument_validation(args, fix, ok):
    name = "search" if "query" in args else "visit"
    fixes = rules.Counter()
    text, parsed, why = rules.clean_tool_turn_strict(
        f"<think>x</think><tool_call>{call(name, args)}</tool_call>", fixes
    )
    assert (text is not None) == ok and fixes[fix] == 1


def test_tool_turn_strict_name_case_and_multiple_calls():
    fixes = rules.Counter()
    text, parsed, _ = rules.clean_tool_turn_strict(
        f"<think>x</think><tool_call>{call('Search', {'query': 'q'})}</tool_call>", fixes
    )
    assert text == protocol.tool_turn("x", "search", {"query": ["q"]}) and fixes["tool_name_case_normalized"] == 1
    two = (
        f"<think>x</think><tool_call>{call('search', {'query': 'a'})}</tool_call>"
        f"<tool_call>{call('search', {'query': 'b'})}</tool_call>"
    )
    assert rules.clean_tool_turn_strict(two, fixes)[2] == "multiple_tool_calls"
    assert rules.clean_tool_turn_reference(two) == protocol.tool_turn("x", "search", {"query": ["a"]})


# ---- final answer (clean_answer_output) ------------------------------------------------------------------


def test_final_answer_reference():
    assert (
        rules.clean_final_turn_reference("<think>r</think><answer>a</answer> <answer> b </answer>")
        == "<think>\nr\n</think>\n<answer>\nb\n</answer>"
    )
    assert (
        rules.clean_final_turn_reference("<think></think><answer>a</answer>")
        == "<think>\n\n</think>\n<answer>\na\n</answer>"
    )
    assert rules.clean_final_turn_reference("<answer>a</answer>") is None
    assert rules.clean_final_turn_reference("<think>r</think> a") is None
    assert (
        rules.clean_final_turn_reference("<think>r <answer>x</answer></think><answer>a</answer>")
        == "<think>\nr x\n</think>\n<answer>\na\n</answer>"
    )


@pytest.mark.parametrize(
    "text,expected,reason",
    [
        (
            "<think>r</think><answer>a <summary>s</summary></answer>",
            "<think>\nr\n\ns\n</think>\n<answer>\na\n</answer>",
            None,
        ),
        ("<think></think><answer>a</answer>", None, "final_empty_think"),
        ("<think>r</think><answer> </answer>", None, "final_empty_answer"),
        ("<think>r</think>no answer", None, "final_missing_answer"),
        ("<answer>a</answer>", None, "final_missing_think"),
    ],
)
def test_final_answer_strict(text, expected, reason):
    assert rules.clean_final_turn_strict(text, rules.Counter()) == (expected, reason)


def test_final_answer_reference_vs_strict_empty_think():
    row = raw(
        [{"role": "user", "content": "q"}, {"role": "assistant", "content": "<answer>X</answer><think></think>"}]
    )
    assert clean_row(row, REF).reason is None  # an empty final reasoning passes
    assert clean_row(row, STRICT).reason == "final_empty_think"


# ---- already-clean rows (normalize_clean_messages) -------------------------------------------------------


def clean_input(messages):
    return {"question": "q", "gt": "X", "messages": messages}


def test_clean_rows_system_handling():
    body = [{"role": "user", "content": "q"}, final("r", "X")]
    out = clean_row(clean_input([{"role": "system", "content": "OLD"}] + body), REF)
    assert out.messages[0]["content"] == PROMPT and out.messages[1:] == body
    out = clean_row(
        clean_input([{"role": "system", "content": "OLD"}] + body),
        RuleOptions(mode="reference", system_prompt_mode="row"),
    )
    assert out.messages[0]["content"] == "OLD"
    out = clean_row(clean_input(body), REF)
    assert out.messages == [{"role": "system", "content": PROMPT}] + body
    assert clean_row(clean_input([]), REF).reason == "clean_input_invalid"
    assert clean_row(clean_input(["x"]), REF).reason == "clean_input_invalid"


def test_clean_rows_bypass_normalisation_in_reference_only():
    msgs = [
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": '<think>x</think><tool_call>{"name": "search", "arguments": {"queries": "a"}}</tool_call>',
        },
        resp(SEARCH_1),
        final("r", "X"),
    ]
    out = clean_row(clean_input(msgs), REF)
    assert out.messages[1:] == msgs  # not standardised, search text not parsed
    strict = clean_row(clean_input(msgs), STRICT)
    assert strict.messages[2] == tool("x", "search", {"query": ["a"]}) and strict.messages[3] == wrapped(SEARCH_1_JSON)
    assert strict.fixes["clean_row_normalized"] == 1


def test_meta_json_string():
    row = {
        "meta": json.dumps({"question": "q", "answer": "X"}),
        "messages": [{"role": "user", "content": "q"}, final("r", "X")],
    }
    assert clean_row(row, REF).reason == "missing_question_or_gt"  # misrouted to the clean path
    out = clean_row(row, STRICT)
    assert out.reason is None and out.fixes["meta_json_string_parsed"] == 1


# ---- pruning, dedup (prune_disallowed_tool_turns, remove_duplicate_tool_calls) ---------------------------


def test_prune_removes_turn_and_following_responses():
    msgs = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": f"<think>x</think><tool_call>{call('search', {'query': ['a']})}</tool_call>"
            f"<tool_call>{call('Fetch', {})}</tool_call>",
        },
        resp("1"),
        resp("2"),
        {"role": "user", "content": "plain"},
        final("r", "X"),
    ]
    out = rules.RowOutcome()
    kept = rules.prune_disallowed(msgs, frozenset({"search", "visit"}), out, {})
    assert kept == msgs[:2] + msgs[5:]
    assert (out.pruned_turns, out.pruned_responses, out.pruned_names) == (1, 2, ["Fetch"])
    # no parseable call: kept; allowed check is case-insensitive
    msgs2 = [
        {"role": "assistant", "content": "<tool_call>{bad</tool_call>"},
        {"role": "assistant", "content": f"<tool_call>{call('SEARCH', {})}</tool_call>"},
    ]
    assert rules.prune_disallowed(msgs2, frozenset({"search"}), rules.RowOutcome(), {}) == msgs2


def _turn(name, args):
    return {"role": "assistant", "content": f"<think>x</think><tool_call>{call(name, args)}</tool_call>"}


@pytest.mark.parametrize(
    "first,second,duplicate",
    [
        (("search", {"query": ["b", "a"]}), ("search", {"query": ["a", " a ", "b"]}), True),
        (("search", {"query": ["a"]}), ("search", {"query": ["a", "b"]}), False),
        (("search", {"query": ["a"]}), ("search", {"queries": "a"}), True),
        (("search", {"query": ["A"]}), ("search", {"query": ["a"]}), False),
        (("visit", {"url": ["u"], "goal": "g1"}), ("visit", {"urls": "u", "goal": "g2"}), True),  # goal ignored
        (("visit", {"url": ["u"]}), ("visit", {"link": ["u"]}), True),
        (("visit", {"url": ["u"]}), ("search", {"query": ["u"]}), False),
    ],
)
def test_dedup_signatures(first, second, duplicate):
    msgs = [_turn(*first), resp("r1"), _turn(*second), resp("r2"), final("r", "X")]
    out = rules.RowOutcome()
    kept = rules.remove_duplicates(msgs, out, {}, strict=False)
    assert (out.duplicates == 1) == duplicate
    assert kept == (msgs[:2] + msgs[4:] if duplicate else msgs)


def test_dedup_requires_all_calls_seen_and_does_not_readd():
    two = {
        "role": "assistant",
        "content": f"<tool_call>{call('search', {'query': ['a']})}</tool_call>"
        f"<tool_call>{call('search', {'query': ['b']})}</tool_call>",
    }
    msgs = [_turn("search", {"query": ["a"]}), two, _turn("search", {"query": ["b"]})]
    out = rules.RowOutcome()
    assert rules.remove_duplicates(msgs, out, {}, strict=False) == msgs[:2]  # b seen via the two-call turn
    assert out.duplicates == 1


def test_dedup_strict_keeps_new_goal():
    msgs = [
        _turn("visit", {"url": ["u"], "goal": "g1"}),
        resp("r1"),
        _turn("visit", {"url": ["u"], "goal": "g2"}),
        resp("r2"),
        _turn("visit", {"url": ["u"], "goal": " g2 "}),
        resp("r3"),
    ]
    out = rules.RowOutcome()
    assert rules.remove_duplicates(msgs, out, {}, strict=True) == msgs[:4]
    assert out.duplicates == 1 and out.fixes["visit_goal_in_dedup"] == 1


# ---- validation (validate_messages) ----------------------------------------------------------------------

S = {"role": "system", "content": "s"}
Q = {"role": "user", "content": "q"}
T = {"role": "assistant", "content": "<think>x</think><tool_call>{}</tool_call>"}
R = {"role": "user", "content": "<tool_response>r</tool_response>"}
F = {"role": "assistant", "content": "<think>x</think><answer>a</answer>"}


@pytest.mark.parametrize(
    "messages,reason,strict_reason",
    [
        ([S, Q], "too_short", "too_short"),
        ([Q, Q, F], "bad_role_start", "bad_role_start"),
        ([S, Q, "x"], "non_dict_message", "non_dict_message"),
        ([S, F, F], "bad_role_at_1", "bad_role"),
        ([S, Q, T, Q, F], "user_missing_tool_response_at_3", "user_missing_tool_response"),
        ([S, {"role": "user", "content": 1}, F], "non_str_content_at_1", "non_str_content"),
        ([S, R, F], "first_user_contains_tool_response", "first_user_contains_tool_response"),
        (
            [S, Q, {"role": "assistant", "content": "<answer>a</answer>"}],
            "assistant_missing_think",
            "assistant_missing_think",
        ),
        (
            [S, Q, {"role": "assistant", "content": "<think>x</think>"}],
            "final_assistant_missing_answer",
            "final_assistant_missing_answer",
        ),
        (
            [S, Q, {"role": "assistant", "content": F["content"] + "<tool_call>{}</tool_call>"}],
            "final_assistant_contains_tool",
            "final_assistant_missing_answer",
        ),
        (
            [S, Q, {"role": "assistant", "content": "<think>x</think>hi"}, R, F],
            "assistant_missing_tool_call",
            "assistant_missing_tool_call",
        ),
        (
            [S, Q, {"role": "assistant", "content": T["content"] + "<answer>a</answer>"}, R, F],
            "assistant_tool_turn_contains_answer",
            "assistant_missing_tool_call",
        ),
        ([S, Q, T, R], None, "ends_without_answer"),  # a conversation ending with a tool response passes
        (
            [S, Q, T, {"role": "user", "content": "x <tool_response>r</tool_response>"}, F],
            None,
            "user_missing_tool_response",
        ),
        ([S, Q, T, R, F], None, None),
    ],
)
def test_validation_table(messages, reason, strict_reason):
    assert rules.validate_reference(messages) == reason
    assert rules.validate_strict(messages) == strict_reason


def test_validation_end_to_end_reasons():
    # a row whose only tool turn was pruned ends up as system, question, answer: valid; one ending on a tool
    # response passes the reference validator
    msgs = [
        {"role": "user", "content": "q"},
        asst("x", call("search", {"query": "a"})),
        resp(SEARCH_1),
        {"role": "assistant", "content": "<think>r</think>no answer"},
    ]
    assert clean_row(raw(msgs), REF).reason == "raw_clean_failed"
    assert clean_row(raw(msgs), STRICT).reason == "final_missing_answer"
    clean_ending_in_tool = clean_input([Q, T, R])
    assert clean_row(clean_ending_in_tool, REF).reason is None
    assert clean_row(clean_ending_in_tool, STRICT).reason == "ends_without_answer"


def test_strict_fix_names_are_documented():
    descriptions = list(rules.STRICT_FIXES.values())
    assert all(isinstance(d, str) and d.strip() for d in descriptions)
    assert len(set(descriptions)) == len(descriptions)  # each fix says what it changes
    assert all(name.isidentifier() and name.islower() for name in rules.STRICT_FIXES)
