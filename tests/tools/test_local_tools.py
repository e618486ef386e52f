"""Local search (BM25) and visit over the world, the Toolbox dispatcher and the tools CLI."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest

from venus_utils.core import protocol
from venus_utils.core.world_store import load_pages
from venus_utils.tools import LocalSearch, LocalVisit, SearchHit, Toolbox, make_snippet, make_toolbox, serper_raw_text
from venus_utils.tools.search import model_search_text, raw_search_text
from venus_utils.tools.visit import select_sentences


def test_bm25_finds_the_entity_page_first(world_dir):
    pages = [p for p in load_pages(world_dir) if p["type"] in ("person", "city", "org")]
    search = LocalSearch.from_world(world_dir)
    assert search.top_k == 4 and search.snippet_chars == 70
    for page in pages:
        hits = search.hits(page["title"])
        assert 1 <= len(hits) <= 4
        assert hits[0].url == page["url"], page["title"]
        assert all(len(h.snippet) <= 70 + 4 for h in hits)


def test_search_no_results_and_multi_query(world_dir):
    search = LocalSearch.from_world(world_dir, top_k=2)
    title = load_pages(world_dir)[0]["title"]
    out = json.loads(asyncio.run(search.search([title, "qqqzzz"])))
    assert [b["query"] for b in out] == [title, "qqqzzz"]
    assert len(out[0]["web_page_info_list"]) == 2 and set(out[0]["web_page_info_list"][0]) == {
        "title",
        "url",
        "snippet",
    }
    assert out[1] == {"query": "qqqzzz", "web_page_info_list": [], "message": protocol.no_results_text("qqqzzz")}
    assert LocalSearch([], top_k=3).hits("anything") == []


def test_serper_raw_text_is_dr_venus_format():
    hits = [
        SearchHit("T1", "https://a/1", "snip one", date="Jan 1, 2020"),
        SearchHit("T2", "https://a/2", "snip two", source="src"),
    ]
    assert serper_raw_text("q x", hits) == (
        "A Google search for 'q x' found 2 results:\n\n## Web Results\n"
        "1. [T1](https://a/1)\nDate published: Jan 1, 2020\n\nsnip one\n\n"
        "2. [T2](https://a/2)\nSource: src\n\nsnip two"
    )
    assert serper_raw_text("none", []) == "No results found for 'none'. Try with a more general query."
    assert raw_search_text([("a", []), ("b", [])]) == serper_raw_text("a", []) + "\n=======\n" + serper_raw_text(
        "b", []
    )


def test_model_format_equals_cleaned_raw_text(world_dir):
    """What the agent sees equals what the cleaner makes of the raw text in the trajectories."""
    search_text = pytest.importorskip("venus_utils.data.search_text")
    search = LocalSearch.from_world(world_dir)
    titles = [p["title"] for p in load_pages(world_dir)[:30]]
    for q in titles:
        results = search.results([q])
        assert search_text.parse_search_reference(raw_search_text(results)) == model_search_text(results)
    results = search.results(titles[:3] + ["qqqzzz"])
    assert search_text.parse_search_strict(raw_search_text(results)) == model_search_text(results)


def test_snippet_cut_at_word_boundary():
    assert make_snippet("short text", 50) == "short text"
    assert make_snippet("alpha beta gamma delta", 12) == "alpha beta ..."


def test_visit_selects_goal_sentences(world_dir):
    pages = load_pages(world_dir)
    visit = LocalVisit.from_world(world_dir)
    person = next(p for p in pages if p["type"] == "person")
    out = visit.visit_one(person["url"], f"Find where {person['title']} was born.")
    assert out.startswith(
        f"The useful information in {person['url']} for user goal Find where {person['title']} was born. as follows: "
        "\n\nSummary: \n"
    )
    assert " was born in " in out.split("Summary: \n")[1]
    org = (
        next(p for p in pages if p["type"] == "org" and "Foundry" in p["title"])
        if any("Foundry" in p["title"] for p in pages)
        else next(p for p in pages if p["type"] == "org")
    )
    assert "founded by" in visit.visit_one(org["url"], f"Find who founded {org['title']}.")
    missing = visit.visit_one("https://wiki.venus/Nobody", "goal")
    assert missing.endswith(protocol.VISIT_FAILED_SUMMARY)
    evidence = LocalVisit(pages, with_evidence=True).visit_one(person["url"], "Find x.")
    assert "Evidence in page: \n" + person["text"] in evidence
    assert select_sentences("A is big. A was founded by B. A is in C.", "Find who founded A.", 1) == [
        "A was founded by B."
    ]
    both = asyncio.run(visit.visit([person["url"], org["url"]], "Find x."))
    assert both.count("\n=======\n") == 1


class _Slow:
    async def search(self, queries):
        await asyncio.sleep(5)

    async def visit(self, urls, goal):
        raise RuntimeError("boom")


def test_toolbox_never_raises(world_dir):
    box = make_toolbox("local", world_dir=world_dir)
    run = box.call_sync
    assert run("search", {}) == "[Search] Invalid request format: Input must be a JSON object containing 'query' field"
    assert run("search", {"query": [1, 2]}).startswith("[Search] Invalid request format")
    assert run("visit", {"url": ["x"]}).startswith("The useful information in x for user goal  as follows")
    assert run("visit", {"goal": "g"}).startswith("[Visit] Invalid request format")
    assert run("PythonInterpreter", {}) == "Error: Tool PythonInterpreter not found"
    assert json.loads(run("search", {"query": "a single string"}))[0]["query"] == "a single string"
    slow = Toolbox(_Slow(), _Slow(), timeout=0.2)
    assert slow.call_sync("search", {"query": ["x"]}) == "Tool execution timed out after 0.2 seconds."
    assert slow.call_sync("visit", {"url": "u", "goal": "g"}) == "Tool execution error: RuntimeError: boom"
    assert slow.stats == {"calls": 2, "errors": 1, "timeouts": 1}
    with pytest.raises(ValueError, match="world_dir"):
        make_toolbox("local")
    with pytest.raises(ValueError, match="unknown tool backend"):
        make_toolbox("bing")


def _cli(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "venus_utils.tools", *args], capture_output=True, text=True, timeout=120, env=env
    )


def test_cli_prints_model_view_and_exits_0_on_tool_failure(world_dir, monkeypatch):
    title = load_pages(world_dir)[0]["title"]
    out = _cli("search", title, "--world", str(world_dir))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == make_toolbox("local", world_dir=world_dir).call_sync("search", {"query": [title]})
    raw = _cli("search", title, "--world", str(world_dir), "--raw")
    assert raw.stdout.startswith(f"A Google search for '{title}' found")
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("SERPER_KEY_ID",)}
    env["SERPER_API_URL"] = "http://127.0.0.1:9/search"
    failed = _cli("search", "anything", "--backend", "serper", "--timeout", "5", env=env)
    assert failed.returncode == 0 and "SERPER_KEY_ID is not set" in failed.stdout


def test_a_tool_called_by_hand_works_where_an_event_loop_already_runs(world_dir):
    """Issue 23: ``call_sync`` used ``asyncio.run``, which fails inside Jupyter (its thread runs an event loop); it now
    runs through the package's one coroutine runner (``venus_utils.core.aio``), as the agent and the demo do."""
    box = make_toolbox("local", world_dir=world_dir)
    expected = box.call_sync("search", {"query": ["x"]})

    async def inside_a_running_loop():  # what a notebook cell is
        return box.call_sync("search", {"query": ["x"]})

    assert asyncio.run(inside_a_running_loop()) == expected
