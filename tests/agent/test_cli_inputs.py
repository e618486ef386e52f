"""The agent CLI checks every path before it loads a model: a missing or misplaced world, model, tokenizer,
question file or output exits 2 with one message naming the path and what it should be (no traceback)."""

from __future__ import annotations

import json

import pytest

from venus_utils.agent import AgentConfig, ScriptedBackend, question_rows, run_file
from venus_utils.agent.__main__ import main
from venus_utils.core.io import read_jsonl
from venus_utils.tools import make_toolbox

QUESTION_HINT = "(expected a .jsonl or .csv with a 'question' column, or a verl-schema .parquet)"
MODEL_HINT = "(expected a save_pretrained model folder or an http(s)://host:port/v1 server)"


def usage_error(argv, capsys) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main([str(a) for a in argv])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.strip().splitlines()[-1].removeprefix("python -m venus_utils.agent: error: ")


@pytest.fixture()
def paths(tmp_path, world_dir):
    """A question file, a folder that passes for a model folder (never loaded), a plain file."""
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"question": "Where was Kalo born?"}) + "\n")
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    return {"q": questions, "model": model, "file": a_file, "world": world_dir, "tmp": tmp_path}


def test_ask_missing_or_misplaced_model(paths, capsys):
    ask = ["ask", "Where?", "--world", paths["world"]]
    missing = paths["tmp"] / "no-model"
    assert usage_error([*ask, "--model", missing], capsys) == f"model folder not found: {missing} {MODEL_HINT}"
    assert (
        usage_error([*ask, "--model", paths["file"]], capsys)
        == f"not a model folder: {paths['file']} is a file {MODEL_HINT}"
    )
    empty = paths["tmp"] / "empty"
    empty.mkdir()
    assert (
        usage_error([*ask, "--model", empty], capsys) == f"not a model folder: {empty} has no config.json {MODEL_HINT}"
    )
    broken = usage_error([*ask, "--model", paths["model"]], capsys)  # config.json but no weights or tokenizer
    assert broken.startswith(f"cannot load the model {paths['model']}: ") and broken.endswith(MODEL_HINT)
    no_tok = paths["tmp"] / "no-tokenizer"
    assert usage_error([*ask, "--model", "http://127.0.0.1:9/v1", "--tokenizer", no_tok], capsys) == (
        f"tokenizer folder not found: {no_tok} "
        "(expected the folder of the model's tokenizer, e.g. its save_pretrained folder)"
    )


def test_ask_missing_or_misplaced_world_and_trace(paths, capsys):
    ask = ["ask", "Where?", "--model", paths["model"]]
    missing = paths["tmp"] / "no-world"
    assert usage_error([*ask, "--world", missing], capsys) == (
        f"world folder not found: {missing} (build one with `python -m venus_utils.world build --out {missing}`)"
    )
    assert usage_error([*ask, "--world", paths["file"]], capsys).startswith(
        f"not a world folder: {paths['file']} is a file"
    )
    assert usage_error(ask, capsys).startswith("--tools local needs --world DIR")
    assert usage_error([*ask, "--world", paths["world"], "--trace", paths["tmp"]], capsys) == (
        f"trace is a folder: {paths['tmp']} (expected a .jsonl file to write, its folder created if missing)"
    )
    assert (
        usage_error(["ask", "  ", "--model", paths["model"], "--world", paths["world"]], capsys)
        == "the question is empty"
    )


def test_run_missing_empty_or_misplaced_question_file(paths, capsys):
    run = ["run", "--output", paths["tmp"] / "out.jsonl", "--model", paths["model"], "--world", paths["world"]]
    missing = paths["tmp"] / "missing.jsonl"
    assert usage_error([*run, "--input", missing], capsys) == f"question file not found: {missing} {QUESTION_HINT}"
    assert (
        usage_error([*run, "--input", paths["tmp"]], capsys)
        == f"not a question file: {paths['tmp']} is a folder {QUESTION_HINT}"
    )
    for name, text in (("empty.jsonl", ""), ("blank.jsonl", "\n \n"), ("empty.csv", "")):
        (paths["tmp"] / name).write_text(text)
        assert usage_error([*run, "--input", paths["tmp"] / name], capsys) == (
            f"question file is empty: {paths['tmp'] / name} {QUESTION_HINT}"
        )
    header = paths["tmp"] / "header.csv"
    header.write_text("question,answer\n")
    assert (
        usage_error([*run, "--input", header], capsys) == f"question file has no questions: {header} {QUESTION_HINT}"
    )
    wrong = paths["tmp"] / "wrong.jsonl"
    wrong.write_text('{"text": "no question column"}\n')
    assert "missing column(s) ['question']" in usage_error([*run, "--input", wrong], capsys)
    assert not (paths["tmp"] / "out.jsonl").exists()


def test_run_output_must_be_a_writable_file(paths, capsys):
    run = ["run", "--input", paths["q"], "--model", paths["model"], "--world", paths["world"]]
    assert usage_error([*run, "--output", paths["tmp"]], capsys) == (
        f"output is a folder: {paths['tmp']} (expected a .jsonl file to write, its folder created if missing)"
    )
    below = paths["file"] / "out.jsonl"
    assert usage_error([*run, "--output", below], capsys).startswith(
        f"cannot create the folder of the output {below}: "
    )


def test_run_file_takes_the_rows_load_questions_read(paths):
    rows = question_rows(paths["q"])
    out = paths["tmp"] / "preds" / "p.jsonl"
    answer = "Done.\n</think>\n<answer>\nShilo\n</answer>"
    summary = run_file(
        rows,
        out,
        ScriptedBackend([answer]),
        make_toolbox("local", world_dir=paths["world"]),
        AgentConfig.rl(),
        progress=False,
    )
    assert summary["questions"] == 1 and summary["ran"] == 1
    assert [r["prediction"] for r in read_jsonl(out)] == ["Shilo"]


def test_ask_against_a_dead_endpoint_says_why_and_fails(paths, capsys, monkeypatch):
    """Issue 22, item 5: no answer because the model could not be asked is an error, with its reason."""
    import asyncio

    real_sleep = asyncio.sleep

    async def no_wait(seconds, *args, **kwargs):  # the loop's back-off between attempts
        await real_sleep(0)

    monkeypatch.setattr(asyncio, "sleep", no_wait)
    code = main(["ask", "Where was Kalo born?", "--model", "http://127.0.0.1:9/v1", "--world", str(paths["world"])])
    out, err = capsys.readouterr()
    assert code == 1 and "termination: llm_error" in out
    last = err.strip().splitlines()[-1]
    assert last.startswith("[agent] error: the model at http://127.0.0.1:9/v1 failed: ConnectError")
    assert "127.0.0.1:9/v1/chat/completions" in last and "Traceback" not in err
