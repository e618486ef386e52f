"""The demo talks to a trained model in the prompt it was trained with (its ``venus_agent.json``), with its limits,
unless the user (the UI's "System prompt" choice, the turn slider) or the operator (``--max-steps``...) says
otherwise."""

from __future__ import annotations

import json
import threading

import pytest

from venus_utils.core import protocol
from venus_utils.demo.runs import DemoSettings, agent_run_fn, default_settings

COMPACT = protocol.system_prompt(protocol.DEFAULT_DATE, style="compact")
DR_VENUS = protocol.system_prompt(protocol.DEFAULT_DATE, style="dr-venus")


@pytest.fixture
def rl_run(micro_run, model_copy, tmp_path):
    """A run folder whose best model (04_igpo_rl/model) says it was trained with the compact prompt, 2 turns of
    at most 16 new tokens (the file written by hand, as the RL save writes it)."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "00_setup").symlink_to(micro_run / "00_setup", target_is_directory=True)
    model = model_copy().rename(run / "04_igpo_rl")
    (model / "venus_agent.json").write_text(
        json.dumps({"system_prompt_style": "compact", "max_turns": 2, "max_new_tokens": 16, "stage": "rl"})
    )
    return run


class Limited:
    """The run's real model, failing the rollout at once on a generation above ``max_tokens`` (so a run with the
    wrong limits fails fast instead of generating 2048 tokens a turn); records each generation's limit."""

    def __init__(self, folder, max_tokens: int = 16):
        from venus_utils.agent.backends import TransformersBackend

        self.inner = TransformersBackend.from_pretrained(str(folder))
        self.chat, self.max_tokens, self.limits = self.inner.chat, max_tokens, []

    async def generate(self, conv, sampling):
        self.limits.append(sampling.max_new_tokens)
        if sampling.max_new_tokens > self.max_tokens or len(self.limits) > 12:
            raise RuntimeError(f"max_new_tokens={sampling.max_new_tokens}: not the model folder's limits")
        return await self.inner.generate(conv, sampling)


def _ask(settings, backend):
    return agent_run_fn("Where was the founder born?", settings, lambda m: None, threading.Event(), backend=backend)


def test_a_run_uses_the_models_prompt_and_limits_by_default(rl_run):
    settings = default_settings(rl_run).validated()
    assert settings.system_prompt_style == "auto" and settings.max_steps is None and settings.max_new_tokens is None
    backend = Limited(rl_run / "04_igpo_rl")
    result = _ask(settings, backend)
    assert result["error"] is None, result["error"]
    assert result["messages"][0]["content"] == COMPACT
    assert 1 <= result["turns"] <= 2 and set(backend.limits) == {16}
    assert result["agent_settings"]["system_prompt_style"] == "compact"
    assert "model folder (rl)" in result["agent_settings"]["from"]


def test_the_users_choice_overrides_the_model(rl_run):
    settings = default_settings(rl_run, system_prompt_style="dr-venus", max_steps=1, max_new_tokens=16).validated()
    result = _ask(settings, Limited(rl_run / "04_igpo_rl"))
    assert result["messages"][0]["content"] == DR_VENUS and result["turns"] == 1


def test_a_model_without_the_file_runs_with_the_demo_fallback(micro_run, model_copy):
    from venus_utils.demo.runs import agent_settings

    folder = model_copy()
    found = agent_settings(DemoSettings(model="checkpoint", checkpoint=str(folder)).validated(), str(folder))
    assert (found.system_prompt_style, found.max_turns, found.max_new_tokens) == ("dr-venus", 20, 2048)
    (folder / "venus_agent.json").write_text(
        json.dumps({"system_prompt_style": "compact", "max_turns": 500, "max_new_tokens": 50_000})
    )
    big = agent_settings(DemoSettings(model="checkpoint", checkpoint=str(folder)).validated(), str(folder))
    assert (big.system_prompt_style, big.max_turns, big.max_new_tokens) == ("compact", 200, 15_000)  # demo's bounds
    for bad in (dict(system_prompt_style="short"), dict(max_new_tokens=8)):
        with pytest.raises(ValueError):
            DemoSettings(**bad).validated()


def test_the_ui_offers_the_prompt_choice_and_follows_the_chosen_model(rl_run, micro_run):
    from venus_utils.demo.app import DemoServer

    seen = []
    server = DemoServer(
        run_fn=lambda q, settings, on_messages, stop: seen.append(settings) or {},
        defaults=default_settings(rl_run).validated(),
    )
    turns, note = server.model_defaults("tiny", "")
    assert turns == 2 and "prompt compact" in note
    base_model = str(micro_run / "00_setup" / "tiny_model")
    turns, note = server.model_defaults("checkpoint", base_model)  # no venus_agent.json: the demo's fallback
    assert turns == 20 and "prompt dr-venus" in note
    inputs = dict(
        model="tiny",
        checkpoint="",
        endpoint="",
        endpoint_model="model",
        endpoint_key="",
        tools="local",
        world_dir=str(rl_run / "00_setup" / "world"),
        serper_key="",
        jina_key="",
        summary_base="",
        summary_key="",
        summary_model="",
        max_steps=2,
    )
    list(server.start("Where?", **inputs, system_prompt_style="compact"))
    list(server.start("Where?", **inputs))
    assert [s.system_prompt_style for s in seen] == ["compact", "auto"]
    demo = server.build()
    radios = [c for c in demo.config["components"] if c.get("props", {}).get("elem_id") == "system-prompt"]
    assert radios and radios[0]["props"]["value"] == "auto"
    sliders = [c for c in demo.config["components"] if c.get("props", {}).get("label") == "Max steps"]
    assert sliders[0]["props"]["value"] == 2  # the run's model's own turns


def test_the_demo_cli_defaults_to_the_models_settings(rl_run, monkeypatch, capsys):
    import venus_utils.demo.app as app
    from venus_utils.demo.__main__ import main

    launched = {}
    monkeypatch.setattr(app, "launch", lambda **kwargs: launched.update(kwargs))
    main(["--run-dir", str(rl_run)])
    defaults = launched["defaults"]
    assert (defaults.system_prompt_style, defaults.max_steps, defaults.max_new_tokens) == ("auto", None, None)
    assert "prompt compact, max_turns 2, max_new_tokens 16 (model folder (rl))" in capsys.readouterr().out
    main(["--run-dir", str(rl_run), "--system-prompt-style", "dr-venus", "--max-steps", "5"])
    assert (launched["defaults"].system_prompt_style, launched["defaults"].max_steps) == ("dr-venus", 5)


def test_the_page_names_the_model_it_loaded_and_what_the_offline_agent_knows(rl_run, micro_run, monkeypatch):
    """Issue 23: the model choice read "tiny offline agent" for the run's RL model, and nothing told a visitor that the
    offline agent knows only its world (asked about Dune, it named a person of its world with confidence)."""
    pytest.importorskip("gradio")
    from venus_utils.core.qa_files import load_questions
    from venus_utils.demo.app import DemoServer

    monkeypatch.chdir(rl_run)
    server = DemoServer(defaults=default_settings(str(rl_run)))
    assert server.run_model_label() == "this run's RL model (04_igpo_rl)"
    note = server.world_note()
    first = load_questions(micro_run / "00_setup" / "world" / "qa" / "test.parquet")["question"].iloc[0]
    assert "knows only its offline world" in note and first in note
    base_only = DemoServer(defaults=default_settings(str(micro_run)))
    assert base_only.run_model_label().startswith("this run's untrained base model (")
    web = DemoServer(defaults=default_settings(str(rl_run), offline=False))
    assert web.world_note() == ""
