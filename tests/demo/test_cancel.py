"""A cancelled demo run stops on the server, and runs hold their slot until their thread ends (issue 15, item 6).

Gradio frees its concurrency slot as soon as a client cancels, and used to leave the run going (a local model
kept generating up to max_new_tokens): clients that submit and cancel could pile up threads beyond the limit.
"""

from __future__ import annotations

import threading
import time

import pytest

from venus_utils.core import protocol
from venus_utils.demo.runs import DemoSettings, Run, RunSlots, agent_run_fn

from .conftest import run_threads

pytestmark = [
    pytest.mark.filterwarnings("ignore:'future.no_silent_downcasting'"),
    pytest.mark.filterwarnings("ignore:The copy keyword is deprecated"),
]


def _wait_for(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def test_stop_ends_a_local_generation_in_progress(micro_run, model_copy, monkeypatch):
    """The model never ends its turn and takes 10 ms a token (15000 new tokens: minutes): Stop ends the run thread
    at once."""
    from venus_utils.agent.backends import TransformersBackend

    folder = model_copy(suppress_eos=True)
    settings = DemoSettings(
        model="checkpoint",
        checkpoint=str(folder),
        world_dir=str(micro_run / "00_setup" / "world"),
        max_steps=5,
        max_new_tokens=15_000,
        system_prompt_style="compact",
    ).validated()
    generating = threading.Event()
    original = TransformersBackend.generate_ids

    def observed(self, prompts, sampling):
        if not generating.is_set():
            self.model.register_forward_pre_hook(lambda module, args: time.sleep(0.01))
            generating.set()
        return original(self, prompts, sampling)

    monkeypatch.setattr(TransformersBackend, "generate_ids", observed)
    run = Run("Where was the founder of the oldest company born?", settings, agent_run_fn).start()
    assert generating.wait(60), "the run never started generating"
    time.sleep(0.3)  # well inside the 15000-token generation
    run.stop()
    assert run.wait(10), "the run thread still runs 10 s after stop(): the generation was not interrupted"
    assert run.status == "Stopped" and run.result["termination"] == "stopped" and run.result["turns"] == 0


def test_run_slots_count_runs_until_their_thread_ends():
    release = threading.Event()

    def lingering(question, settings, on_messages, stop):  # ignores Stop for a while, like a slow tool call
        release.wait(10)
        return {"prediction": "", "termination": "stopped", "turns": 0}

    slots = RunSlots(2)
    first, second, third = (Run(f"q{i}", DemoSettings(), lingering) for i in range(3))
    assert slots.start(first) and slots.start(second)
    first.stop()  # stopped, but its thread is still going: it keeps its slot
    assert not slots.start(third, timeout=0.3) and slots.live() == 2 and not third.alive
    release.set()
    assert slots.start(third, timeout=10) and third.wait(10) and first.wait(10) and second.wait(10)
    waiting = Run("q", DemoSettings(), lingering)
    waiting.stop()  # stopped while waiting for a slot: never starts, done at once
    assert slots.start(waiting) and waiting.done and waiting.status == "Stopped" and waiting.wait(0)


def endless(messages):
    """A slow scripted model that never stops searching."""
    time.sleep(0.5)
    n = sum(m["role"] == "assistant" for m in messages)
    return protocol.tool_turn(f"Still looking ({n}).", "search", {"query": [f"city {n}"]})[len("<think>\n") :]


def test_cancelled_clients_stop_their_runs_and_stay_within_the_limit(micro_run):
    """Six clients, one after the other, submit and cancel through the real Gradio queue (concurrency 2): every
    run stops, and there are never more than two live run threads."""
    pytest.importorskip("gradio")
    client_mod = pytest.importorskip("gradio_client")
    from venus_utils.agent.backends import ScriptedBackend
    from venus_utils.demo.app import DemoServer

    def run_fn(question, settings, on_messages, stop):
        return agent_run_fn(question, settings, on_messages, stop, backend=ScriptedBackend(endless))

    limit = 2
    # 200 turns of 0.5 s: an uncancelled run goes on for 100 s or more, far past the 60 s a cancelled one is given (a
    # loaded machine delays the cancel, not the turns' sleep)
    server = DemoServer(
        run_fn, DemoSettings(world_dir=str(micro_run / "00_setup" / "world"), max_steps=200), concurrency=limit
    )
    demo = server.build()
    _, url, _ = demo.launch(
        server_name="127.0.0.1", server_port=None, prevent_thread_lock=True, quiet=True, ssr_mode=False
    )
    most, sampling = [0], threading.Event()

    def sample():
        while not sampling.is_set():
            most[0] = max(most[0], len(run_threads()))
            time.sleep(0.005)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        inputs = dict(
            model="tiny",
            checkpoint="",
            endpoint="",
            endpoint_model="model",
            endpoint_key="",
            tools="local",
            world_dir=str(micro_run / "00_setup" / "world"),
            serper_key="",
            jina_key="",
            summary_base="",
            summary_key="",
            summary_model="",
            max_steps=200,
        )
        runs: list[Run] = []
        for i in range(6):
            client = client_mod.Client(url, verbose=False, analytics_enabled=False, download_files=False)
            job = client.submit(f"question {i}", *inputs.values(), api_name="/start")
            _wait_for(
                lambda i=i: any(r.question == f"question {i}" and r.status == "Running" for r in server.runs.values()),
                30,
                f"run {i} to start",
            )
            runs.append(next(r for r in server.runs.values() if r.question == f"question {i}"))
            job.cancel()
        for run in runs:
            assert run.wait(60), f"{run.question}: the run thread still runs 60 s after its client cancelled"
            assert run.status == "Stopped" and run.result["termination"] == "stopped"
    finally:
        sampling.set()
        sampler.join()
        demo.close()
    assert 1 <= most[0] <= limit, f"{most[0]} run threads at once with a limit of {limit}"
    assert not run_threads()
