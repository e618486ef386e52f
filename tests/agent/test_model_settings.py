"""A trained model folder says how it runs (``venus_agent.json``: prompt style, max turns, tokens per turn) and the
agent CLI uses it unless told otherwise; ``agent ask`` prints the conversation as it happens."""

from __future__ import annotations

import json

import pytest

from venus_utils.agent.__main__ import main
from venus_utils.core import protocol
from venus_utils.core.io import read_jsonl


@pytest.fixture()
def model_dir(tmp_path, tiny_lm, tiny_tokenizer):
    """The tiny model saved as a model folder, with the venus_agent.json of a compact-prompt RL run (written by hand,
    as the RL save writes it)."""
    folder = tmp_path / "model"
    tiny_lm.save_pretrained(folder)
    tiny_tokenizer.save_pretrained(folder)
    (folder / "venus_agent.json").write_text(
        json.dumps({"system_prompt_style": "compact", "max_turns": 2, "max_new_tokens": 8, "stage": "rl"})
    )
    return folder


class Recorder:
    """Wraps the backend the CLI loads: records each generation's limit and what the CLI had printed by then; a
    generation past ``max_calls`` or above ``max_tokens`` fails the rollout at once (no DR-Venus-sized run)."""

    def __init__(self, inner, capsys, max_calls: int = 10, max_tokens: int = 64):  # 2 turns x 5 attempts
        self.inner, self.chat, self.capsys = inner, inner.chat, capsys
        self.max_calls, self.max_tokens = max_calls, max_tokens
        self.calls: list[dict] = []
        self.out: list[str] = []
        self.err: list[str] = []

    def printed(self) -> tuple[str, str]:
        captured = self.capsys.readouterr()
        self.out.append(captured.out)
        self.err.append(captured.err)
        return "".join(self.out), "".join(self.err)

    async def generate(self, conv, sampling):
        out, err = self.printed()
        self.calls.append(
            {
                "max_new_tokens": sampling.max_new_tokens,
                "stdout": out,
                "stderr": err,
                "system": conv.messages[0]["content"],
            }
        )
        if len(self.calls) > self.max_calls or sampling.max_new_tokens > self.max_tokens:
            raise RuntimeError(
                f"generation {len(self.calls)} with max_new_tokens={sampling.max_new_tokens}: "
                "not the model folder's limits"
            )
        return await self.inner.generate(conv, sampling)


@pytest.fixture()
def recorded(monkeypatch, capsys):
    """Every backend the CLI loads is wrapped in a :class:`Recorder` (the list of them)."""
    import venus_utils.agent.backends as backends

    made: list[Recorder] = []
    real = backends.load_backend

    def load_backend(*args, **kwargs):
        made.append(Recorder(real(*args, **kwargs), capsys))
        return made[-1]

    monkeypatch.setattr(backends, "load_backend", load_backend)
    return made


def test_ask_uses_the_model_folders_prompt_style_and_limits(model_dir, world_dir, tmp_path, recorded):
    trace = tmp_path / "trace.jsonl"
    assert (
        main(
            [
                "ask",
                "Where was Kalo born?",
                "--model",
                str(model_dir),
                "--world",
                str(world_dir),
                "--trace",
                str(trace),
            ]
        )
        == 0
    )
    out, err = recorded[0].printed()
    rec = read_jsonl(trace)[0]
    assert rec["messages"][0]["content"] == protocol.system_prompt(protocol.DEFAULT_DATE, style="compact")
    assert rec["termination"] != "exception", rec["error"]
    assert 1 <= rec["turns"] <= 2 and all(t["new_tokens"] <= 8 for t in rec["turn_log"])
    assert {c["max_new_tokens"] for c in recorded[0].calls} == {8}
    assert "prompt compact, max_turns 2, max_new_tokens 8 (model folder (rl))" in err
    assert "=== termination:" in out


def test_options_override_the_model_folder(model_dir, world_dir, tmp_path, recorded):
    trace = tmp_path / "trace.jsonl"
    assert (
        main(
            [
                "ask",
                "Where was Kalo born?",
                "--model",
                str(model_dir),
                "--world",
                str(world_dir),
                "--trace",
                str(trace),
                "--system-prompt-style",
                "dr-venus",
                "--max-turns",
                "1",
                "--max-new-tokens",
                "4",
            ]
        )
        == 0
    )
    rec = read_jsonl(trace)[0]
    assert rec["messages"][0]["content"] == protocol.system_prompt(protocol.DEFAULT_DATE, style="dr-venus")
    assert rec["turns"] == 1 and recorded[0].calls[0]["max_new_tokens"] == 4
    assert "prompt dr-venus, max_turns 1, max_new_tokens 4 (given)" in recorded[0].printed()[1]


def test_run_uses_the_model_folders_settings(model_dir, world_dir, tmp_path, recorded):
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"question": "Where was Kalo born?"}) + "\n")
    out = tmp_path / "preds.jsonl"
    assert (
        main(
            [
                "run",
                "--input",
                str(questions),
                "--output",
                str(out),
                "--model",
                str(model_dir),
                "--world",
                str(world_dir),
                "--workers",
                "1",
            ]
        )
        == 0
    )
    rec = read_jsonl(out)[0]
    assert rec["messages"][0]["content"] == protocol.system_prompt(protocol.DEFAULT_DATE, style="compact")
    assert 1 <= rec["turns"] <= 2 and {c["max_new_tokens"] for c in recorded[0].calls} == {8}
    assert json.loads(recorded[0].printed()[0])["ran"] == 1  # stdout: the summary JSON, as before


def test_a_model_without_the_file_gets_dr_venus_defaults_and_a_bad_file_is_refused(model_dir, world_dir, capsys):
    from venus_utils.agent.settings import resolve_agent_settings

    (model_dir / "venus_agent.json").unlink()
    plain = resolve_agent_settings(str(model_dir))
    assert (plain.system_prompt_style, plain.max_turns, plain.max_new_tokens) == ("dr-venus", 200, 15_000)
    assert resolve_agent_settings(str(model_dir), mode="rl").max_new_tokens == 8192
    assert resolve_agent_settings("http://127.0.0.1:9/v1").source is None  # an endpoint without --tokenizer
    (model_dir / "venus_agent.json").write_text('{"system_prompt_style": "short", "max_turns": 2}')
    with pytest.raises(SystemExit) as exit_info:
        main(["ask", "Where?", "--model", str(model_dir), "--world", str(world_dir)])
    assert exit_info.value.code == 2
    assert "venus_agent.json: system_prompt_style must be one of" in capsys.readouterr().err


def test_an_endpoint_reads_the_settings_of_its_tokenizer_folder(model_dir):
    from venus_utils.agent.settings import agent_config

    cfg = agent_config("http://127.0.0.1:9/v1", tokenizer=str(model_dir), temperature=0.5)
    assert (cfg.system_prompt_style, cfg.max_turns, cfg.max_new_tokens, cfg.temperature) == ("compact", 2, 8, 0.5)
    rl = agent_config(str(model_dir), mode="rl", max_turns=5)
    assert (rl.max_turns, rl.max_new_tokens, rl.attempts, rl.system_prompt_style) == (5, 8, 1, "compact")


def test_ask_prints_each_step_as_it_happens(world_dir, tiny_tokenizer, tmp_path, monkeypatch, capsys):
    """A scripted model (search, then answer) on the tiny world: when the second turn is generated, stdout already
    holds the question, the first assistant turn and the tool's response, and stderr a line per turn."""
    import venus_utils.agent.backends as backends
    from venus_utils.agent import ScriptedBackend

    folder = tmp_path / "scripted"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    turns = [
        protocol.tool_turn("Look it up.", "search", {"query": ["Kalo born"]}),
        protocol.answer_turn("Found it.", "Shilo"),
    ]
    recorder: list[Recorder] = []

    def load_backend(*args, **kwargs):
        recorder.append(Recorder(ScriptedBackend(turns, tiny_tokenizer), capsys))
        return recorder[0]

    monkeypatch.setattr(backends, "load_backend", load_backend)
    assert (
        main(
            [
                "ask",
                "Where was Kalo born?",
                "--model",
                str(folder),
                "--world",
                str(world_dir),
                "--max-turns",
                "3",
                "--max-new-tokens",
                "32",
            ]
        )
        == 0
    )
    first, second = recorder[0].calls
    assert "--- user ---\nWhere was Kalo born?" in first["stdout"] and "--- assistant ---" not in first["stdout"]
    assert "[agent] turn 1/3: generating" in first["stderr"]
    assert "Look it up." in second["stdout"] and "<tool_response>" in second["stdout"]
    assert "[agent] turn 2/3: generating" in second["stderr"]
    out, _ = recorder[0].printed()
    assert "Found it." in out and "=== prediction: Shilo" in out
    assert out.count("--- assistant ---") == 2  # each message printed once


def test_the_writer_checks_what_it_writes_and_the_reader_reads_it_back(tmp_path):
    from venus_utils.agent.settings import model_agent_settings, write_model_agent_settings

    values = {"system_prompt_style": "compact", "max_turns": 8, "max_new_tokens": 128}
    path = write_model_agent_settings(tmp_path, values, "sft")
    assert json.loads(path.read_text()) == {**values, "stage": "sft"} and not list(tmp_path.glob(".*tmp"))
    found = model_agent_settings(tmp_path)
    assert found.values() == values and found.stage == "sft" and found.source == str(path)
    assert set(found.origin.values()) == {"model"}
    for bad, message in (
        ({**values, "max_turns": 0}, "max_turns must be a whole number >= 1"),
        ({**values, "max_new_tokens": "128"}, "max_new_tokens must be"),
        ({"max_turns": 8}, "system_prompt_style, max_new_tokens missing"),
        ({**values, "turns": 3}, "unknown key"),
    ):
        with pytest.raises(ValueError, match=message):
            write_model_agent_settings(tmp_path, bad, "rl")
    with pytest.raises(ValueError, match="stage"):
        write_model_agent_settings(tmp_path, values, "dpo")
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match="expected a JSON object"):
        model_agent_settings(tmp_path)
    partial = {"max_turns": 3}  # a hand-written file may name some values: the others are the fallbacks
    path.write_text(json.dumps(partial))
    mixed = model_agent_settings(tmp_path, fallback={"max_new_tokens": 64})
    assert mixed.values() == {"system_prompt_style": "dr-venus", "max_turns": 3, "max_new_tokens": 64}
    assert (
        mixed.describe() == "prompt dr-venus (DR-Venus default), max_turns 3 (model folder (venus_agent.json)), "
        "max_new_tokens 64 (fallback)"
    )


def test_the_command_lines_name_a_turns_tokens_as_the_profiles_do():
    """``--max-tokens-per-turn`` is the profiles' ``max_tokens_per_turn`` (``--max-new-tokens``, the model folder's
    key, is the same option), wherever a model is run."""
    import argparse

    from venus_utils.agent.settings import add_settings_options

    parser = argparse.ArgumentParser()
    add_settings_options(parser)
    assert parser.parse_args(["--max-tokens-per-turn", "77"]).max_new_tokens == 77
    assert parser.parse_args(["--max-new-tokens", "78"]).max_new_tokens == 78
