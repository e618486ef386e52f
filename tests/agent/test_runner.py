"""Question files -> resumable predictions, and the agent CLI with a saved tiny model."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

from venus_utils.agent import AgentConfig, ScriptedBackend, question_rows, run_file
from venus_utils.agent.backends import strip_think_prefix
from venus_utils.core.io import read_jsonl
from venus_utils.tools import make_toolbox

DR_VENUS_FIELDS = {
    "question",
    "messages",
    "prediction",
    "termination",
    "turns",
    "parse_error_count",
    "tool_call_count",
    "dedup_count",
    "final_token_count",
    "elapsed_seconds",
}


def _expert_policy(world_dir):
    """Replays the expert trajectory of whichever question is asked (the tools run for real)."""
    df = pd.read_parquet(world_dir / "trajectories" / "train-00000.parquet")
    noise = read_jsonl(world_dir / "trajectory_noise.jsonl")
    by_q = {
        row["meta"]["question"]: [
            strip_think_prefix(m["content"], "<think>\n") for m in row["messages"][1:] if m["role"] == "assistant"
        ]
        for (_, row), n in zip(df.iterrows(), noise)
        if not n["noise"]
    }

    def policy(messages):
        turns = by_q[messages[1]["content"]]
        return turns[sum(m["role"] == "assistant" for m in messages)]

    return policy, by_q


def test_run_file_jsonl_is_resumable(world_dir, tmp_path):
    policy, by_q = _expert_policy(world_dir)
    questions = list(by_q)[:4]
    src = tmp_path / "q.jsonl"
    src.write_text(
        "".join(json.dumps({"question": q, "answer": "?", "id": f"q{i}"}) + "\n" for i, q in enumerate(questions))
    )
    out = tmp_path / "preds.jsonl"
    tools = make_toolbox("local", world_dir=world_dir)
    s1 = run_file(src, out, ScriptedBackend(policy), tools, AgentConfig.rl(), samples=2, workers=3, progress=False)
    assert s1["ran"] == 8 and s1["terminations"] == {"answered": 8}
    recs = read_jsonl(out)
    assert DR_VENUS_FIELDS <= set(recs[0]) and {"index", "sample", "gt", "turn_log", "boundaries"} <= set(recs[0])
    assert "completion_ids" not in recs[0]
    with out.open("a") as fh:
        fh.write('{"index": "torn')  # a killed run leaves half a line
    s2 = run_file(src, out, ScriptedBackend(policy), tools, AgentConfig.rl(), samples=2, progress=False)
    assert s2["skipped"] == 8 and s2["ran"] == 0 and len(read_jsonl(out)) == 8
    s3 = run_file(src, out, ScriptedBackend(policy), tools, AgentConfig.rl(), samples=3, progress=False)
    assert s3["ran"] == 4 and len(read_jsonl(out)) == 12


def test_fold_parts_adds_each_whole_record_once_and_removes_the_parts(tmp_path):
    """The answers other processes wrote beside a rollouts file are folded in: torn lines left out, a key the file
    holds already (a fold killed before it removed its parts, then folded again) not added twice."""
    from venus_utils.agent.file_runs import answered, fold_parts

    def rec(i, sample=0, text="x"):
        return json.dumps({"index": f"q{i}", "sample": sample, "prediction": text}) + "\n"

    out = tmp_path / "r.jsonl"
    out.write_text(rec(0) + rec(1))
    a, b = tmp_path / "r.jsonl.part0.jsonl", tmp_path / "r.jsonl.part1.jsonl"
    a.write_text(rec(1, text="again") + rec(2) + '{"index": "q3", "sam')  # a double and a torn last line
    b.write_text(rec(3) + rec(3, sample=1))
    assert fold_parts(out, [a, b, tmp_path / "r.jsonl.part2.jsonl"]) == 3  # a missing part is nothing to fold
    assert not a.exists() and not b.exists()
    records = read_jsonl(out)
    assert [(r["index"], r["sample"]) for r in records] == [("q0", 0), ("q1", 0), ("q2", 0), ("q3", 0), ("q3", 1)]
    assert records[1]["prediction"] == "x"  # the file's own answer stays
    assert answered(out) == {("q0", 0), ("q1", 0), ("q2", 0), ("q3", 0), ("q3", 1)}
    assert fold_parts(out, []) == 0 and fold_parts(tmp_path / "none.jsonl", [tmp_path / "no.part"]) == 0


def test_run_file_on_world_parquet(world_dir, tmp_path):
    policy, by_q = _expert_policy(world_dir)
    qa = pd.read_parquet(world_dir / "qa" / "train.parquet")
    keep = qa[[p[0]["content"] in by_q for p in qa["prompt"]]].head(5)
    keep.to_parquet(tmp_path / "train5.parquet")
    rows = question_rows(tmp_path / "train5.parquet")
    assert [r["question"] for r in rows] == [p[0]["content"] for p in keep["prompt"]]
    out = tmp_path / "p.jsonl"
    run_file(
        tmp_path / "train5.parquet",
        out,
        ScriptedBackend(policy),
        make_toolbox("local", world_dir=world_dir),
        AgentConfig.rl(),
        token_ids=False,
        progress=False,
    )
    from venus_utils.core.protocol import split_aliases

    for rec in read_jsonl(out):
        assert rec["prediction"] in split_aliases(rec["gt"])


def test_load_questions_errors(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "a"}\n{"nope": 1}\n')
    with pytest.raises(ValueError, match="bad.jsonl: row 1: empty question"):
        question_rows(bad)
    (tmp_path / "x.csv").write_text("q")
    with pytest.raises(ValueError, match=r"x.csv: missing column\(s\) \['question'\]"):
        question_rows(tmp_path / "x.csv")
    (tmp_path / "torn.jsonl").write_text('{"question": "a"}\n{oops\n')
    with pytest.raises(ValueError, match="torn.jsonl:2"):
        question_rows(tmp_path / "torn.jsonl")
    with pytest.raises(FileNotFoundError):
        question_rows(tmp_path / "missing.jsonl")


def test_cli_ask_with_saved_tiny_model(world_dir, tiny_lm, tiny_tokenizer, tmp_path):
    model_dir = tmp_path / "model"
    tiny_lm.save_pretrained(model_dir)
    tiny_tokenizer.save_pretrained(model_dir)
    trace = tmp_path / "trace.jsonl"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "venus_utils.agent",
            "ask",
            "Where was Kalo born?",
            "--model",
            str(model_dir),
            "--world",
            str(world_dir),
            "--max-turns",
            "2",
            "--max-new-tokens",
            "16",
            "--trace",
            str(trace),
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "=== termination:" in out.stdout
    rec = read_jsonl(trace)[0]
    assert rec["completion_ids"] and len(rec["completion_ids"]) == len(rec["completion_mask"])
    missing = subprocess.run(
        [sys.executable, "-m", "venus_utils.agent", "ask", "q", "--model", str(model_dir)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert missing.returncode != 0 and "--world" in missing.stderr


def test_openai_compatible_backend(world_dir, tiny_tokenizer):
    import asyncio

    from venus_utils.agent import OpenAIBackend, run_agent
    from venus_utils.agent.conversation import ChatTokens
    from venus_utils.tools.stub_server import StubServer

    tools = make_toolbox("local", world_dir=world_dir)
    chat = ChatTokens(tiny_tokenizer)
    with StubServer() as stub:
        backend = OpenAIBackend(stub.url + "/v1", tokenizer=tiny_tokenizer)
        r = asyncio.run(run_agent("Q?", backend, tools, AgentConfig()))
        assert r.termination == "answered" and r.prediction == "stub answer"
        sent = stub.requests[-1]
        assert sent["prompt"] == r.prompt_ids and sent["top_k"] == 20 and sent["presence_penalty"] == 1.1
        assert r.completion_ids == chat.encode(stub.completion_text) + [tiny_tokenizer.eos_token_id]  # re-tokenised
        stub.completion_ids = chat.encode(stub.completion_text)[:-1] + [7, tiny_tokenizer.eos_token_id]
        r = asyncio.run(run_agent("Q?", backend, tools, AgentConfig()))
        assert r.completion_ids == stub.completion_ids  # the server's sampled ids, exactly
        r = asyncio.run(
            run_agent("Q?", OpenAIBackend(stub.url + "/v1", model="agent", mode="chat"), tools, AgentConfig())
        )
        assert r.prediction == "stub answer" and stub.requests[-1]["messages"][1]["content"] == "Q?"
        assert r.completion_ids is None
    with pytest.raises(ValueError, match="tokenizer"):
        OpenAIBackend("http://x/v1")
    down = asyncio.run(
        run_agent(
            "Q?",
            OpenAIBackend("http://127.0.0.1:9/v1", mode="chat", timeout=2),
            tools,
            AgentConfig(attempts=2, backoff_s=0),
        )
    )
    assert down.termination == "llm_error"
