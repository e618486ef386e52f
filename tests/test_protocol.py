"""The protocol pieces added for the tools and the agent loop: byte-compatibility with DR-Venus's examples,
tag repair, turn parsing."""

from __future__ import annotations

import json
import re

import pytest

from venus_utils.core import protocol as p


def _examples(folder):
    return [json.loads(f.read_text()) for f in sorted(folder.glob("*.json"))]


def test_search_json_is_byte_identical_to_sft_examples(dr_venus_dir):
    checked = 0
    for ex in _examples(dr_venus_dir / "sft_examples"):
        for m in ex["messages"]:
            body = m["content"][len("<tool_response>\n") : -len("\n</tool_response>")] if m["role"] == "user" else ""
            if body.startswith('[{"query"'):
                blocks = json.loads(body)
                if all(b["web_page_info_list"] for b in blocks):
                    assert p.search_results_json([(b["query"], b["web_page_info_list"]) for b in blocks]) == body
                    checked += 1
    assert checked > 100


def test_visit_text_is_byte_identical_to_examples(dr_venus_dir):
    rx = re.compile(
        r"^The useful information in (.*?) for user goal (.*) as follows: \n\n"
        r"(?:Evidence in page: \n(.*?)\n\n)?Summary: \n(.*)$",
        re.S,
    )
    checked = 0
    for folder in ("sft_examples", "rl_rollouts"):
        for ex in _examples(dr_venus_dir / folder):
            for m in ex["messages"]:
                body = (
                    m["content"][len("<tool_response>\n") : -len("\n</tool_response>")] if m["role"] == "user" else ""
                )
                match = rx.match(body)
                if match and "\n=======\n" not in body:
                    url, goal, evidence, summary = match.groups()
                    # SFT examples end at the summary; RL rollouts keep the tool's trailing blank line
                    assert p.visit_result_text(url, goal, summary.rstrip(), evidence) == body.rstrip()
                    assert folder == "rl_rollouts" or p.visit_result_text(url, goal, summary, evidence) == body
                    checked += 1
    assert checked > 50


def test_search_json_keeps_failed_queries():
    out = json.loads(
        p.search_results_json(
            [
                ("a", [{"title": "t", "url": "u", "snippet": "s"}]),
                ("b", []),
                {"query": "c", "hits": [], "message": "Google search failed"},
            ]
        )
    )
    assert out[1] == {"query": "b", "web_page_info_list": [], "message": p.no_results_text("b")}
    assert out[2]["message"] == "Google search failed"


def test_visit_failed_frame():
    assert p.visit_failed_text("u", "g") == (
        "The useful information in u for user goal g as follows: \n\nEvidence in page: \n"
        f"{p.VISIT_FAILED_EVIDENCE}\n\nSummary: \n{p.VISIT_FAILED_SUMMARY}"
    )
    assert "Evidence" not in p.visit_failed_text("u", "g", with_evidence=False)


@pytest.mark.parametrize(
    "text, repaired",
    [
        ("<think>\nr\n</think>\n<answer>a</answer><tool_response>fake", "<think>\nr\n</think>\n<answer>a</answer>"),
        ("<think>\nreasoning <tool_call>{}</tool_call>", "<think>\nreasoning \n</think>\n<tool_call>{}</tool_call>"),
        ("<think>\nreasoning only", "<think>\nreasoning only\n</think>"),
        ("reasoning\n</think>\n<answer>x</answer>", "<think>\nreasoning\n</think>\n<answer>x</answer>"),
        ("<think>\nr\n</think>\n<answer>x</answer>", "<think>\nr\n</think>\n<answer>x</answer>"),
    ],
)
def test_repair_tags(text, repaired):
    assert p.repair_tags(text) == repaired


def test_parse_turn():
    call = p.tool_turn("r", "search", {"query": ["x"]})
    assert p.parse_turn(call).kind == "call" and p.parse_turn(call).call.arguments == {"query": ["x"]}
    assert p.parse_turn(p.answer_turn("r", "Paris")).answer == "Paris"
    assert p.parse_turn("<answer>x</answer>").error == "Missing <think></think>"
    assert p.parse_turn("<think>r</think>").error == "Ambiguous or incomplete output"
    assert p.parse_turn(call + "<answer>x</answer>").kind == "error"
    assert p.parse_turn("<think>r</think><tool_call>{bad</tool_call>").kind == "error"
    unknown = p.tool_turn("r", "PythonInterpreter", {})
    assert p.parse_turn(unknown).kind == "call"
    assert p.parse_turn(unknown, ("search", "visit")).error.startswith("Unknown tool 'PythonInterpreter'")
    relaxed = "<think>r</think><tool_call>{'name': 'search', 'arguments': {'query': ['x'],}}</tool_call>"
    assert p.parse_turn(relaxed).call.name == "search"  # json5 fallback


def test_call_signature_and_repetition():
    a = p.ToolCall("search", {"query": ["x"], "k": 1})
    b = p.ToolCall("search", {"k": 1, "query": ["x"]})
    assert p.call_signature(a) == p.call_signature(b)
    assert p.is_repetitive("abc" * 200) and not p.is_repetitive("short") and not p.is_repetitive("x" * 40 + "y" * 60)


def test_loop_messages_are_dr_venus_texts():
    assert p.MALFORMED_RL == "Your response was malformed. Please call a tool or provide a final answer."
    assert p.wrap_tool_response(p.MALFORMED_INFERENCE).startswith("<tool_response>\nERROR!\nPlease call a tool")
    assert p.FORCE_CONTEXT.startswith("You have reached the maximum context length.")
    assert p.FORCE_MAX_STEPS.startswith("You've reached the maximum number of tool calls.")
