"""Web backends against a real local HTTP server that injects faults: every failure becomes text for the model,
every call is bounded by its timeout, keys never reach the output."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from venus_utils.core import protocol
from venus_utils.tools import JinaVisit, SerperSearch, Toolbox


def _search(stub, **kw):
    return SerperSearch(api_url=stub.url + "/search", timeout=kw.pop("timeout", 2.0), backoff=0.01, **kw)


def _visit(stub, **kw):
    return JinaVisit(
        reader_url=stub.url + "/reader",
        api_base=stub.url + "/v1",
        model="summ",
        timeout=kw.pop("timeout", 2.0),
        backoff=0.01,
        **kw,
    )


def test_serper_success_sends_key_and_hides_it(stub, keys):
    out = asyncio.run(_search(stub, top_k=3).search(["alpha", "beta leakkey"]))
    blocks = json.loads(out)
    assert [len(b["web_page_info_list"]) for b in blocks] == [3, 3]
    assert blocks[0]["web_page_info_list"][0] == {
        "title": "Result 1 for alpha",
        "url": "https://example.org/alpha/1",
        "snippet": "Snippet 1 about alpha.",
    }
    assert any(h.get("X-API-KEY") == keys["SERPER_KEY_ID"] for h in stub.headers)
    box = Toolbox(_search(stub), _visit(stub))
    leaked = box.call_sync("search", {"query": ["gamma leakkey"]})
    assert keys["SERPER_KEY_ID"] not in leaked and "key=***" in leaked


def test_serper_faults_become_messages(stub, keys):
    search = _search(stub, timeout=0.5, attempts=3)
    t0 = time.monotonic()
    blocks = json.loads(
        asyncio.run(
            search.search(["a http429", "b http500", "c badjson", "d hang", "e noresults", "f slowbody", "ok"])
        )
    )
    elapsed = time.monotonic() - t0
    by_q = {b["query"]: b for b in blocks}
    assert len(by_q["a http429"]["web_page_info_list"]) == 10  # retried through two 429s
    assert stub.hits["search:a http429"] == 3
    assert "HTTP 500" in by_q["b http500"]["message"] and stub.hits["search:b http500"] == 3
    assert "malformed JSON" in by_q["c badjson"]["message"]
    assert "timed out" in by_q["d hang"]["message"]
    assert by_q["e noresults"]["message"] == protocol.no_results_text("e noresults")
    assert "timed out" in by_q["f slowbody"]["message"]
    assert len(by_q["ok"]["web_page_info_list"]) == 10
    assert elapsed < 8  # 3 attempts x 0.5 s + back-off, queries in parallel (the hang alone lasts 20 s)


def test_serper_env_endpoint_and_cache(stub, keys, monkeypatch, tmp_path):
    monkeypatch.setenv("SERPER_API_URL", stub.url + "/search")
    search = SerperSearch(cache_dir=str(tmp_path), backoff=0.01)
    first = asyncio.run(search.search(["cached query"]))
    second = asyncio.run(SerperSearch(cache_dir=str(tmp_path)).search(["cached query"]))
    assert first == second and stub.hits["search:cached query"] == 1
    assert keys["SERPER_KEY_ID"] not in "".join(p.read_text() for p in tmp_path.rglob("*.json"))


def test_jina_visit_with_extractor(stub, keys):
    out = asyncio.run(_visit(stub).visit(["https://site.org/a"], "Find the founding year."))
    assert out == protocol.visit_result_text(
        "https://site.org/a",
        "Find the founding year.",
        summary="For the goal 'Find the founding year.': founded in 1931 by Ada Example.",
        evidence="The company was founded in 1931 by Ada Example.",
    )
    assert any(h.get("Authorization") == f"Bearer {keys['JINA_API_KEYS']}" for h in stub.headers)
    assert any(h.get("Authorization") == f"Bearer {keys['API_KEY']}" for h in stub.headers)


def test_jina_faults_become_failure_frames(stub, keys):
    visit = _visit(stub, timeout=0.5, attempts=2, extractor_attempts=2)
    urls = [
        "https://s/http503once",
        "https://s/http500",
        "https://s/hang",
        "https://s/emptypage",
        "https://s/slowbody",
        "https://s/leakkey",
    ]
    t0 = time.monotonic()
    parts = asyncio.run(visit.visit(urls, "Find it.")).split("\n=======\n")
    assert time.monotonic() - t0 < 8
    assert len(parts) == len(urls)
    assert "Summary: \nFor the goal" in parts[0]  # one 503, then fine
    for part in parts[1:5]:
        assert protocol.VISIT_FAILED_SUMMARY in part and "[visit error:" in part
    assert "Summary: \nFor the goal" in parts[5]
    once = asyncio.run(visit.visit(["https://s/x"], "badsummaryonce goal"))
    assert "Summary: \nFor the goal" in once
    never = asyncio.run(visit.visit(["https://s/y"], "badsummary goal"))
    assert protocol.VISIT_FAILED_SUMMARY in never and "extractor failed" in never
    box = Toolbox(_search(stub), visit)
    leaked = box.call_sync("visit", {"url": ["https://s/leakkey2"], "goal": "Find it."})
    assert keys["JINA_API_KEYS"] not in leaked


def test_jina_without_extractor_uses_page_sentences(stub, keys, monkeypatch):
    monkeypatch.delenv("API_BASE", raising=False)
    visit = JinaVisit(reader_url=stub.url + "/reader", backoff=0.01, max_sentences=1)
    out = asyncio.run(visit.visit(["https://s/page"], "When was it founded?"))
    assert out.endswith("Summary: \nThe company was founded in 1931 by Ada Example.")


def test_toolbox_timeout_bounds_a_hanging_call(stub, keys):
    box = Toolbox(_search(stub, timeout=5.0, attempts=3), _visit(stub), timeout=0.5)
    t0 = time.monotonic()
    assert box.call_sync("search", {"query": ["x hang"]}) == "Tool execution timed out after 0.5 seconds."
    assert time.monotonic() - t0 < 3


def test_missing_keys_are_reported(stub, monkeypatch):
    for k in ("SERPER_KEY_ID", "JINA_API_KEYS", "API_KEY"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setattr("venus_utils.core.env.load_dotenv_files", lambda *a: [])
    out = json.loads(asyncio.run(_search(stub).search(["q"])))
    assert "SERPER_KEY_ID is not set" in out[0]["message"]


def test_keys_given_to_backends_are_used_and_hidden(stub, monkeypatch):
    for k in ("SERPER_KEY_ID", "JINA_API_KEYS", "API_KEY"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setattr("venus_utils.core.env.load_dotenv_files", lambda *a: [])
    search = _search(stub, api_key="ui-serper-KEY-9")
    visit = _visit(stub, jina_key="ui-jina-KEY-8", extractor_key="ui-llm-KEY-7")
    assert "ui-serper-KEY-9" not in repr(search) and "ui-jina-KEY-8" not in repr(visit)
    box = Toolbox(search, visit)
    out = box.call_sync("search", {"query": ["q leakkey"]})
    assert "key=***" in out and "ui-serper-KEY-9" not in out
    page = box.call_sync("visit", {"url": ["https://s/page"], "goal": "Find it."})
    assert "Summary: \nFor the goal" in page
    sent = [h.get("Authorization") for h in stub.headers]
    assert "Bearer ui-jina-KEY-8" in sent and "Bearer ui-llm-KEY-7" in sent


def test_oversized_bodies_are_refused_on_every_path(stub, keys):
    box = Toolbox(_search(stub, max_bytes=300), _visit(stub, max_bytes=100))
    model_view = json.loads(box.call_sync("search", {"query": ["big"]}))
    assert (
        model_view[0]["message"]
        == "Google search failed for 'big': the response is larger than 300 bytes. Please try again later."
    )
    raw = box.call_sync("search", {"query": ["big"]}, raw=True)
    assert raw == model_view[0]["message"]
    assert stub.hits["search:big"] == 2  # refused at once, not retried
    page = box.call_sync("visit", {"url": ["https://s/big"], "goal": "Find it."})
    assert protocol.VISIT_FAILED_SUMMARY in page and "[visit error: the response is larger than 100 bytes]" in page
    roomy = Toolbox(_search(stub, max_bytes=100_000), _visit(stub))
    assert roomy.call_sync("search", {"query": ["big"]}, raw=True).startswith(
        "A Google search for 'big' found 10 results"
    )


def _web_cli(stub, monkeypatch, capsys, *argv):
    """``python -m venus_utils.tools`` in this process against the stub; ``(stdout, stderr, seconds)``."""
    from venus_utils.tools.__main__ import main

    monkeypatch.setenv("SERPER_API_URL", stub.url + "/search")
    monkeypatch.setenv("JINA_READER_URL", stub.url + "/reader")
    monkeypatch.delenv("API_BASE", raising=False)  # visit keeps the page's own sentences: a leaked key would show
    monkeypatch.setattr("venus_utils.core.env.load_dotenv_files", lambda *a: [])
    t0 = time.monotonic()
    assert main(list(argv)) == 0
    elapsed = time.monotonic() - t0
    out = capsys.readouterr()
    return out.out, out.err, elapsed


CLI_OUTPUT_PATHS = {
    "search": lambda fault: ["search", f"q {fault}", "--backend", "serper"],
    "search --raw": lambda fault: ["search", f"q {fault}", "--backend", "serper", "--raw"],
    "visit": lambda fault: ["visit", f"https://s/{fault}", "--goal", "Find it.", "--backend", "jina"],
}


@pytest.mark.parametrize("path", sorted(CLI_OUTPUT_PATHS))
def test_cli_output_is_bounded_by_timeout(path, stub, keys, monkeypatch, capsys):
    timeout = 1.0  # the stub hangs for 20 s; each HTTP attempt would wait up to 30-60 s
    out, err, elapsed = _web_cli(stub, monkeypatch, capsys, *CLI_OUTPUT_PATHS[path]("hang"), "--timeout", str(timeout))
    assert out.strip() == "Tool execution timed out after 1 seconds."
    assert elapsed < timeout * 3  # a generous bound: it returned because of the timeout, not the server


@pytest.mark.parametrize("path", sorted(CLI_OUTPUT_PATHS))
def test_cli_output_masks_echoed_keys(path, stub, keys, monkeypatch, capsys):
    out, err, _ = _web_cli(stub, monkeypatch, capsys, *CLI_OUTPUT_PATHS[path]("leakkey"), "--timeout", "10")
    assert stub.hits  # the server was asked and echoed the key it received
    for value in keys.values():
        assert value not in out and value not in err
    assert "***" in out
