"""Step cards: parsing a trace into steps, HTML (escaped, safe links) and the printed trace."""

from __future__ import annotations

import json

import pytest

from venus_utils.core import protocol
from venus_utils.demo import cards
from venus_utils.demo.display import LiveCards, show_trace


def _trace():
    search_body = protocol.search_results_json(
        [
            (
                "capital of France",
                [
                    {
                        "title": "Paris - Wiki",
                        "url": "https://en.wikipedia.org/wiki/Paris",
                        "snippet": "Paris is the capital",
                    }
                ],
            ),
            ("no such thing", []),
        ]
    )
    visit_body = protocol.visit_result_text(
        "https://en.wikipedia.org/wiki/Paris",
        "find capital",
        "Paris is the capital.",
        evidence="Paris is the capital and largest city of France.",
    )
    return [
        {"role": "system", "content": protocol.system_prompt()},
        {"role": "user", "content": "What is the capital of France?"},
        {
            "role": "assistant",
            "content": protocol.tool_turn(
                "Search first.", "search", {"query": ["capital of France", "no such thing"]}
            ),
        },
        {"role": "user", "content": protocol.wrap_tool_response(search_body)},
        {
            "role": "assistant",
            "content": protocol.tool_turn(
                "Open it.", "visit", {"url": ["https://en.wikipedia.org/wiki/Paris"], "goal": "find capital"}
            ),
        },
        {"role": "user", "content": protocol.wrap_tool_response(visit_body)},
        {"role": "assistant", "content": "<think>\noops\n</think>\n<tool_call>\n{not json\n</tool_call>"},
        {"role": "user", "content": protocol.wrap_tool_response(protocol.MALFORMED_INFERENCE)},
        {"role": "user", "content": protocol.wrap_tool_response(protocol.FORCE_MAX_STEPS)},
        {"role": "assistant", "content": protocol.answer_turn("It is Paris.", "Paris")},
    ]


def test_steps_from_messages():
    steps = cards.steps_from_messages(_trace())
    assert [s.kind for s in steps] == ["question", "search", "visit", "error", "note", "answer"]
    question, search, visit, error, note, answer = steps
    assert question.text == "What is the capital of France?"
    assert search.queries == ["capital of France", "no such thing"] and not search.pending
    assert search.results[0]["hits"][0]["url"] == "https://en.wikipedia.org/wiki/Paris"
    assert search.results[1]["hits"] == [] and "No results" in search.results[1]["error"]
    assert visit.results == [
        {
            "url": "https://en.wikipedia.org/wiki/Paris",
            "goal": "find capital",
            "evidence": "Paris is the capital and largest city of France.",
            "summary": "Paris is the capital.",
        }
    ]
    assert "not valid JSON" in error.text and "ERROR!" in error.text
    assert "maximum number of tool calls" in note.text
    assert answer.text == "Paris" and answer.think == "It is Paris." and answer.turn == 4


def test_pending_call_and_multi_url_visit():
    msgs = _trace()[:3]
    assert cards.steps_from_messages(msgs)[-1].pending
    body = protocol.TOOL_SEPARATOR.join(
        [protocol.visit_result_text("http://a.org", "g", "A"), protocol.visit_failed_text("http://b.org", "g")]
    )
    parsed = cards.parse_visit_result(body)
    assert [p["url"] for p in parsed] == ["http://a.org", "http://b.org"]
    assert parsed[0]["evidence"] == "" and parsed[0]["summary"] == "A"
    assert "could not be accessed" in parsed[1]["evidence"]


def test_html_is_escaped_and_links_are_safe():
    msgs = _trace()
    msgs[1]["content"] = "<script>alert(1)</script> what?"
    evil = protocol.search_results_json([("q", [{"title": "<b>x</b>", "url": "javascript:alert(1)", "snippet": "s"}])])
    msgs[3]["content"] = protocol.wrap_tool_response(evil)
    page = cards.render_html(cards.steps_from_messages(msgs))
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert 'href="javascript' not in page and "&lt;b&gt;x&lt;/b&gt;" in page
    assert 'href="https://en.wikipedia.org/wiki/Paris"' in page and 'rel="noopener noreferrer"' in page
    assert page.count('class="vr-card') == 6


def test_text_trace_and_live_view(capsys):
    steps = cards.steps_from_messages(_trace())
    text = cards.render_text(steps)
    assert "SEARCH  capital of France | no such thing" in text and "ANSWER  Paris" in text
    view = LiveCards(interactive=False)
    msgs = _trace()
    for i in range(2, len(msgs) + 1):
        view.update(msgs[:i])
    view.finish(msgs)
    out = capsys.readouterr().out
    assert out.count("SEARCH") == 1 and out.count("ANSWER") == 1 and out.count("QUESTION") == 1


def test_replay_shared_rollout(dr_venus_dir, capsys):
    path = dr_venus_dir / "rl_rollouts" / "0000.json"
    trace = cards.load_trace(path)
    steps = show_trace(trace["messages"], interactive=False, max_steps=3)
    assert steps[0].kind == "question" and steps[-1].kind == "answer"
    assert sum(s.kind in ("search", "visit") for s in steps) == len(steps) - 2
    assert all(not s.pending for s in steps)
    assert "steps not shown" in capsys.readouterr().out


def test_load_trace_errors(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"messages": [{"role": "user", "content": "q"}]}) + "\n")
    assert cards.load_trace(path)["messages"][0]["content"] == "q"
    with pytest.raises(IndexError):
        cards.load_trace(path, index=3)
    (tmp_path / "bad.json").write_text('{"x": 1}')
    with pytest.raises(ValueError, match="not a trace"):
        cards.load_trace(tmp_path / "bad.json")
