"""The demo's run object, settings validation and URL handling (no browser)."""

from __future__ import annotations

import os
import threading
import time

import pytest

from venus_utils.core import protocol
from venus_utils.demo.runs import (
    MAX_QUESTION_CHARS,
    DemoSettings,
    InputError,
    Run,
    check_question,
    hide_secrets,
    normalize_base_url,
)


@pytest.mark.parametrize(
    "url,expected",
    [
        ("http://127.0.0.1:6001", "http://127.0.0.1:6001/v1"),  # DR-Venus's rstrip("/v1") made this :600
        ("http://127.0.0.1:6001/v1", "http://127.0.0.1:6001/v1"),
        ("http://127.0.0.1:6001/v1/", "http://127.0.0.1:6001/v1"),
        (" https://api.example.com/v1/chat/completions ", "https://api.example.com/v1"),
        ("https://example.com/api/openai/v1/models", "https://example.com/api/openai/v1"),
        ("http://host:8011/", "http://host:8011/v1"),
    ],
)
def test_normalize_base_url(url, expected):
    assert normalize_base_url(url) == expected


@pytest.mark.parametrize(
    "url",
    ["", "127.0.0.1:6001", "ftp://host/v1", "javascript:alert(1)", "http://host:99999/v1", "http://" + "a" * 600],
)
def test_normalize_base_url_rejects(url):
    with pytest.raises(InputError):
        normalize_base_url(url)


def test_settings_validation():
    s = DemoSettings(model="endpoint", endpoint="http://localhost:8001", max_steps="12").validated()
    assert s.endpoint == "http://localhost:8001/v1" and s.max_steps == 12
    for bad in (
        dict(model="gpt"),
        dict(tools="bing"),
        dict(max_steps=0),
        dict(max_steps=201),
        dict(model="checkpoint", checkpoint=""),
        dict(serper_key="k" * 513),
    ):
        with pytest.raises(InputError):
            DemoSettings(**bad).validated()
    with pytest.raises(InputError):
        check_question("   ")
    with pytest.raises(InputError):
        check_question("x" * (MAX_QUESTION_CHARS + 1))


def test_hide_secrets():
    assert hide_secrets("bad key sk-abcdef for user", ["sk-abcdef", ""]) == "bad key *** for user"


def _slow_run_fn(steps=50, delay=0.05):
    def run_fn(question, settings, on_messages, stop_event):
        messages = [{"role": "user", "content": question}]
        for i in range(steps):
            if stop_event.is_set():
                return {"prediction": "", "termination": "stopped", "turns": i, "messages": messages}
            messages.append({"role": "assistant", "content": protocol.tool_turn("t", "search", {"query": [f"q{i}"]})})
            messages.append({"role": "user", "content": protocol.wrap_tool_response("[]")})
            on_messages(messages)
            time.sleep(delay)
        messages.append({"role": "assistant", "content": protocol.answer_turn("done", "42")})
        return {"prediction": "42", "termination": "answered", "turns": steps + 1, "messages": messages}

    return run_fn


def test_run_completes_and_reports_messages():
    run = Run("q?", DemoSettings(), _slow_run_fn(steps=3, delay=0)).start()
    assert run.wait(5) and run.status == "Completed"
    messages, result, _ = run.snapshot()
    assert result["prediction"] == "42" and len(messages) == 8


def test_run_stop_ends_the_thread():
    run = Run("q?", DemoSettings(), _slow_run_fn(steps=1000, delay=0.01)).start()
    time.sleep(0.1)
    run.stop()
    assert run.wait(5), "the run thread did not end after stop()"
    assert run.status == "Stopped" and run.result["termination"] == "stopped" and run.result["turns"] < 1000


def test_run_error_is_shown_without_keys():
    def boom(question, settings, on_messages, stop_event):
        raise RuntimeError(f"auth failed with key {settings.serper_key}")

    run = Run("q?", DemoSettings(serper_key="serper-secret-123"), boom).start()
    assert run.wait(5) and run.status == "Error"
    assert "serper-secret-123" not in run.error and "***" in run.error


# ---- the real agent loop behind a run (scripted model, offline world tools) ---------------------------
@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from venus_utils.world import build_world

    out = tmp_path_factory.mktemp("runner") / "00_setup" / "world"
    build_world(out, seed=0, size="small", progress=False)
    return out


def _search_forever(messages):
    n = sum(m["role"] == "assistant" for m in messages)
    return protocol.tool_turn(f"look {n}", "search", {"query": [f"city {n}"]})[len("<think>\n") :]


def test_agent_run_fn_reports_every_step_and_answers(world):
    from venus_utils.agent.backends import ScriptedBackend
    from venus_utils.demo.runs import agent_run_fn

    turns = [protocol.tool_turn("s", "search", {"query": ["capital"]}), protocol.answer_turn("done", "Nowhere")]
    seen = []
    settings = DemoSettings(world_dir=str(world), max_steps=5).validated()
    result = agent_run_fn(
        "Where?", settings, lambda m: seen.append(len(m)), threading.Event(), backend=ScriptedBackend(turns)
    )
    assert result["termination"] == "answered" and result["prediction"] == "Nowhere"
    assert result["tool_call_count"] == 1 and "prompt_ids" not in result
    assert seen == sorted(seen) and seen[-1] >= 4  # the feed grew as the run went (system, question, call, result)


def test_agent_run_fn_stops_between_steps(world):
    from venus_utils.agent.backends import ScriptedBackend
    from venus_utils.demo.runs import agent_run_fn

    stop = threading.Event()

    def on_messages(messages):
        if len(messages) >= 6:
            stop.set()

    settings = DemoSettings(world_dir=str(world), max_steps=50).validated()
    result = agent_run_fn("Where?", settings, on_messages, stop, backend=ScriptedBackend(_search_forever))
    assert result["termination"] == "stopped" and result["turns"] <= 3 and result["error"] is None


def test_make_tools_and_backend_refuse_clearly(world, tmp_path):
    from venus_utils.demo.runs import default_settings, make_backend, make_tools

    with pytest.raises(InputError, match="no offline world"):
        make_tools(DemoSettings(world_dir=str(tmp_path)))
    assert make_tools(DemoSettings(world_dir=str(world))).names == ("search", "visit")
    with pytest.raises(InputError, match="no model found"):
        make_backend(default_settings(tmp_path))  # an empty run folder has no model
    with pytest.raises(InputError, match="not a model folder"):
        make_backend(DemoSettings(model="checkpoint", checkpoint=str(tmp_path / "nope")))
    # issue 42: a folder that is no model (here: the root, through ..) is named as such, before any loader reads it
    with pytest.raises(InputError, match=r"not a model folder \(no config.json\)"):
        make_backend(DemoSettings(model="checkpoint", checkpoint=str(tmp_path / os.path.relpath("/etc", tmp_path))))
    backend = make_backend(
        DemoSettings(model="endpoint", endpoint="http://127.0.0.1:6001", endpoint_key="typed-key").validated()
    )
    assert backend.api_key == "typed-key" and backend.base_url == "http://127.0.0.1:6001/v1"
    run = world.parent.parent
    s = default_settings(run, model="http://127.0.0.1:6001", offline=False)
    assert s.model == "endpoint" and s.tools == "web" and s.validated().endpoint == "http://127.0.0.1:6001/v1"


def test_ui_keys_take_effect_and_never_go_to_the_environment(monkeypatch):
    """The Serper key typed in the UI is the one the search request carries; os.environ is never touched."""
    import asyncio
    import http.server
    import json as _json
    import os

    from venus_utils.demo.runs import make_tools

    seen = []

    class FakeSerper(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            seen.append(self.headers.get("X-API-KEY"))
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            body = _json.dumps({"organic": [{"title": "Paris", "link": "https://example.org/paris", "snippet": "s"}]})
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args):
            pass

    httpd = http.server.HTTPServer(("127.0.0.1", 0), FakeSerper)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    monkeypatch.setenv("SERPER_KEY_ID", "environment-key-0000")
    try:
        box = make_tools(
            DemoSettings(
                tools="web", serper_key="typed-serper-key", jina_key="typed-jina-key", summary_key="typed-summary-key"
            )
        )
        box.search_backend.api_url = f"http://127.0.0.1:{httpd.server_address[1]}/search"
        text = asyncio.run(box.call("search", {"query": ["capital of France"]}))
    finally:
        httpd.shutdown()
    assert seen == ["typed-serper-key"] and "https://example.org/paris" in text
    assert (box.visit_backend.jina_key, box.visit_backend.extractor_key) == ("typed-jina-key", "typed-summary-key")
    assert not {"typed-serper-key", "typed-jina-key", "typed-summary-key"} & set(os.environ.values())


def test_check_service_against_a_fake_openai_server():
    """The "Check service" button: the URL is normalised (a port ending in 1 survives) and /models is listed."""
    import http.server
    import json as _json

    pytest.importorskip("gradio")
    from venus_utils.demo.app import DemoServer

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            ok = self.path == "/v1/models" and self.headers.get("Authorization") == "Bearer typed-key"
            body = _json.dumps({"data": [{"id": "model"}]} if ok else {"error": self.path}).encode()
            self.send_response(200 if ok else 401)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        port = httpd.server_address[1]
        server = DemoServer(run_fn=lambda *a: {})
        assert server.check_service(f"http://127.0.0.1:{port}", "typed-key").startswith("✅")
        failed = server.check_service(f"http://127.0.0.1:{port}/v1/", "wrong-key-123")
        assert failed.startswith("❌") and "wrong-key-123" not in failed
        assert "must look like" in server.check_service("localhost:8000", "")
    finally:
        httpd.shutdown()
