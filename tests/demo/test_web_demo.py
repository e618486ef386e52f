"""The Gradio web demo in a real headless browser (Debian chromium driven by Playwright).

The server runs the real agent loop (:func:`venus_utils.agent.loop.run_agent`) on the offline world's
local tools; the model is a scripted policy (search the question, visit the top hit, answer with its
title) so that the test takes seconds.  Skips cleanly without gradio, playwright or /usr/bin/chromium.

CI needs: ``pip install gradio playwright`` and ``apt-get install -y chromium`` (never ``playwright install``).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import time

import pytest

from venus_utils.core import protocol

gr = pytest.importorskip("gradio")
sync_api = pytest.importorskip("playwright.sync_api")
CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
if CHROMIUM is None:
    pytest.skip("chromium is not installed (apt-get install -y chromium)", allow_module_level=True)

from venus_utils.agent.backends import ScriptedBackend  # noqa: E402
from venus_utils.demo.app import DemoServer  # noqa: E402
from venus_utils.demo.runs import DemoSettings, agent_run_fn  # noqa: E402

pytestmark = [
    pytest.mark.filterwarnings("ignore:'future.no_silent_downcasting'"),
    pytest.mark.filterwarnings("ignore:The copy keyword is deprecated"),
]

BROWSER_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def researcher(messages: list[dict]) -> str:
    """Search the question, visit the first hit, answer with the visited page's title."""
    assistant_turns = sum(m["role"] == "assistant" for m in messages)
    question = messages[1]["content"]
    if assistant_turns == 0:
        return protocol.tool_turn("I will search for it.", "search", {"query": [question]})[len("<think>\n") :]
    last = protocol.TOOL_RESPONSE_RE.search(messages[-1]["content"]).group(1).strip()
    if assistant_turns == 1:
        hit = json.loads(last)[0]["web_page_info_list"][0]
        researcher.title = hit["title"]
        return protocol.tool_turn("Open the top hit.", "visit", {"url": [hit["url"]], "goal": question})[
            len("<think>\n") :
        ]
    return protocol.answer_turn("The page answers it.", f"{researcher.title}")[len("<think>\n") :]


def endless(messages: list[dict]) -> str:
    """A slow model that never stops searching (for the Stop button)."""
    time.sleep(0.3)
    n = sum(m["role"] == "assistant" for m in messages)
    return protocol.tool_turn(f"Still looking ({n}).", "search", {"query": [f"city number {n}"]})[len("<think>\n") :]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from venus_utils.world import build_world

    out = tmp_path_factory.mktemp("demo") / "world"
    build_world(out, seed=0, size="small", progress=False)
    return out


@pytest.fixture(scope="module")
def server(world):
    policies = {"endless": endless}
    seen_settings: list[DemoSettings] = []

    def run_fn(question, settings, on_messages, stop):
        seen_settings.append(settings)
        policy = policies.get(question.split()[0], researcher)
        return agent_run_fn(question, settings, on_messages, stop, backend=ScriptedBackend(policy))

    srv = DemoServer(run_fn, DemoSettings(world_dir=str(world), max_steps=30), concurrency=1)
    srv.seen_settings = seen_settings
    demo = srv.build()
    port = _free_port()
    _, url, _ = demo.launch(
        server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True, ssr_mode=False
    )
    srv.url = url
    yield srv
    demo.close()


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser, server):
    page = browser.new_page()
    page.goto(server.url)
    page.locator("#question textarea").wait_for(timeout=30_000)
    yield page
    page.close()


def test_binds_localhost(server):
    assert server.url.startswith("http://127.0.0.1:")


def test_ask_see_cards_get_answer(page, server, world):
    question = "Where was the founder of the oldest company born?"
    page.locator("#question textarea").fill(question)
    page.locator("#start").click()
    feed = page.locator("#feed")
    feed.locator(".vr-card[data-kind=search]").first.wait_for(timeout=30_000)
    feed.locator(".vr-card[data-kind=visit]").first.wait_for(timeout=30_000)
    answer = page.locator("#final-answer")
    answer.get_by_text("answered").wait_for(timeout=30_000)
    assert researcher.title in answer.inner_text()
    assert "Completed" in page.locator("#status").inner_text()
    # the search card shows the local search results as links to world pages
    links = feed.locator(".vr-card[data-kind=search] a")
    assert links.count() > 0 and links.first.get_attribute("rel") == "noopener noreferrer"
    assert feed.locator(".vr-card[data-kind=answer]").count() == 1


def test_stop_stops_the_run(page, server):
    page.locator("#question textarea").fill("endless research please")
    page.locator("#start").click()
    page.locator("#feed .vr-card[data-kind=search]").nth(1).wait_for(timeout=30_000)
    page.locator("#stop").click()
    page.locator("#status").get_by_text("Stopped").wait_for(timeout=30_000)
    run = next(r for r in server.runs.values() if r.question.startswith("endless"))
    assert run.wait(10) and run.done, "the agent thread still runs after Stop"
    n_cards = page.locator("#feed .vr-card[data-kind=search]").count()
    assert 2 <= n_cards < 30
    assert run.result["termination"] == "stopped"
    time.sleep(1.0)  # nothing more arrives once stopped
    assert page.locator("#feed .vr-card[data-kind=search]").count() == n_cards


def test_ui_settings_reach_the_run(page, server):
    page.get_by_text("Web tool keys").click()
    page.get_by_label("Serper key").fill("serper-key-from-the-ui")
    page.locator("#question textarea").fill("Which city hosts the largest museum?")
    page.locator("#start").click()
    page.locator("#final-answer").get_by_text("answered").wait_for(timeout=30_000)
    settings = server.seen_settings[-1]
    assert settings.serper_key == "serper-key-from-the-ui" and settings.tools == "local"
    assert "serper-key-from-the-ui" not in page.content()  # a password field is not echoed in the page


def test_bad_input_is_refused(page, server):
    page.locator("#start").click()  # empty question
    page.locator("#status").get_by_text("type a question first").wait_for(timeout=10_000)
    area = page.locator("#question textarea")
    assert int(area.get_attribute("maxlength")) == 4000


def test_concurrent_users_wait_in_the_queue(browser, server):
    """With one run slot, a second user's run starts only when the first one ends."""
    first, second = browser.new_page(), browser.new_page()
    try:
        for p in (first, second):
            p.goto(server.url)
            p.locator("#question textarea").wait_for(timeout=30_000)
        first.locator("#question textarea").fill("endless queue test")
        first.locator("#start").click()
        first.locator("#feed .vr-card[data-kind=search]").first.wait_for(timeout=30_000)
        second.locator("#question textarea").fill("Who founded the queued company?")
        second.locator("#start").click()
        time.sleep(1.5)
        assert not any(r.question.startswith("Who founded the queued") for r in server.runs.values())
        first.locator("#stop").click()
        second.locator("#final-answer").get_by_text("answered").wait_for(timeout=30_000)
        assert "Stopped" in first.locator("#status").inner_text()
    finally:
        first.close()
        second.close()
