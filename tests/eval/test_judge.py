"""The judge: shortcuts, the offline judge, and the LLM path against a stand-in OpenAI-compatible server."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from venus_utils.eval import judge as J


class StandIn:
    """A tiny OpenAI-compatible /chat/completions server on 127.0.0.1 that grades by a rule."""

    def __init__(self, reply=None, fail_first: int = 0):
        self.requests: list[dict] = []
        self.reply = reply or (lambda prompt: "correct: yes" if "[response]: right" in prompt else "correct: no")
        self.fail_first = fail_first
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
                if outer.fail_first > 0:
                    outer.fail_first -= 1
                    self.send_response(500)
                    self.end_headers()
                    return
                text = outer.reply(body["messages"][0]["content"])
                data = json.dumps({"choices": [{"message": {"role": "assistant", "content": text}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def server():
    s = StandIn()
    yield s
    s.close()


@pytest.fixture
def no_endpoint(monkeypatch):
    for name in (
        "JUDGE_API_BASE",
        "API_BASE",
        "JUDGE_API_KEY",
        "API_KEY",
        "JUDGE_MODEL",
        "JUDGE_MODEL_NAME",
        "ENABLE_JUDGE_THINKING",
    ):
        monkeypatch.setenv(name, "")  # set (so .env files are not consulted) but empty


def test_grader_prompt_is_browsecomp():
    prompt = J.grader_prompt("Q?", "A", "G")
    assert prompt.startswith(
        "Judge whether the following [response] to [question] is correct or not based on the precise"
    )
    assert "[question]: Q?\n\n[response]: A\n" in prompt and "[correct_answer]: G\n" in prompt
    assert "confidence: The extracted confidence score between 0|\\%| and 100|\\%|" in prompt
    assert "any one of the following" in J.grader_prompt("Q", "A", "x<|answer_split|>y")


@pytest.mark.parametrize(
    "reply,verdict",
    [
        ("reasoning...\ncorrect: yes\nconfidence: 90", True),
        ("correct: no", False),
        ("**correct:** Yes", True),
        ("[correct_answer]: x\ncorrect: no", False),
        ("incorrect: yes", None),
        ("<think>correct: yes</think>correct: no", False),
        ("", None),
    ],
)
def test_parse_verdict(reply, verdict):
    assert J.parse_verdict(reply) == verdict


def test_offline_judge(no_endpoint):
    judge = J.Judge.from_env()
    assert judge.kind == "offline" and "offline judge" in judge.describe() and "JUDGE_API_BASE" in judge.describe()
    out = judge.judge_many(
        [
            ("q", "The Beatles", "Beatles"),
            ("q", "**Paris** is the capital", "Paris<|answer_split|>x"),
            ("q", "Berlin", "Paris"),
            ("q", "", "Paris"),
            ("q", "answer here", "Paris"),
        ]
    )
    assert [(v.correct, v.method) for v in out] == [
        (True, "exact"),
        (True, "offline"),
        (False, "offline"),
        (False, "empty"),
        (False, "empty"),
    ]
    assert out[2].judge == "offline-f1>=0.5"
    assert (
        J.Judge(offline_threshold=0.9)
        .judge("q", "Buffy the Vampire Slayer Season Eight", "Buffy the Vampire Slayer comics")
        .correct
        is False
    )
    with pytest.raises(ValueError, match="JUDGE_API_BASE"):
        J.Judge.from_env("llm")


def test_llm_judge_against_stand_in_server(server, no_endpoint, monkeypatch, tmp_path):
    monkeypatch.setenv("JUDGE_API_BASE", server.base)
    monkeypatch.setenv("JUDGE_API_KEY", "sk-test-secret")
    monkeypatch.setenv("JUDGE_MODEL", "stand-in-judge")
    judge = J.Judge.from_env(cache_path=tmp_path / "cache.sqlite", backoff=0)
    assert judge.kind == "llm" and "stand-in-judge" in judge.describe() and "sk-test-secret" not in judge.describe()
    items = [
        ("q1", "right", "gold"),
        ("q2", "wrong", "gold"),
        ("q3", "gold", "gold"),
        ("q4", "right", "a<|answer_split|>b"),
    ]
    verdicts = judge.judge_many(items)
    assert [(v.correct, v.method) for v in verdicts] == [(True, "llm"), (False, "llm"), (True, "exact"), (True, "llm")]
    assert len(server.requests) == 3  # the exact match needed no call
    req = server.requests[0]  # requests run concurrently: find them by content
    assert req["path"] == "/v1/chat/completions" and req["auth"] == "Bearer sk-test-secret"
    assert (
        req["body"]["model"] == "stand-in-judge" and req["body"]["temperature"] == 0.1 and req["body"]["top_p"] == 0.95
    )
    prompts = [r["body"]["messages"][0]["content"] for r in server.requests]
    assert any("[question]: q4" in p and "any one of the following (they are equivalent): a; b" in p for p in prompts)
    # cached on disk, keyed by (question, answer, gt, model): a new judge makes no call
    again = J.Judge.from_env(cache_path=tmp_path / "cache.sqlite").judge_many(items)
    assert [v.correct for v in again] == [True, False, True, True] and all(
        v.cached for v in again if v.method == "llm"
    )
    assert len(server.requests) == 3
    monkeypatch.setenv("JUDGE_MODEL", "another-model")
    J.Judge.from_env(cache_path=tmp_path / "cache.sqlite").judge("q1", "right", "gold")
    assert len(server.requests) == 4
    judge.close()


def test_llm_judge_fallback_env_retries_and_errors(no_endpoint, monkeypatch, tmp_path):
    flaky = StandIn(fail_first=1)
    try:
        monkeypatch.setenv("API_BASE", flaky.base)  # DR-Venus's fallback names
        monkeypatch.setenv("API_KEY", "k2")
        judge = J.Judge.from_env(cache_path=tmp_path / "c.sqlite", backoff=0)
        assert judge.model == J.DEFAULT_MODEL
        assert judge.judge("q", "right", "gold").correct  # the first attempt got a 500, the retry succeeded
        assert len(flaky.requests) == 2
        flaky.reply = lambda prompt: "I cannot tell."
        v = judge.judge("q", "other", "gold")
        assert v.method == "error" and not v.correct and "correct: yes|no" in v.error
        flaky.fail_first = 10
        v = judge.judge("q", "third", "gold")
        assert v.method == "error" and "after 3 attempts" in v.error and "k2" not in v.error
    finally:
        flaky.close()


def test_judge_function_for_metrics_and_rl(no_endpoint):
    judge, description = J.judge_function()
    assert judge(["q", "q"], ["Paris", "Rome"], ["Paris", "Paris"]) == [1.0, 0.0]
    assert description.startswith("offline judge (no JUDGE_API_BASE")
    made = J.Judge.from_env("offline")
    judge, description = J.judge_function(made)
    assert judge(["q"], ["Rome"], ["Rome"]) == [1.0] and description == made.describe()
    with pytest.raises(ValueError, match="auto, llm or offline"):
        J.judge_function("remote")


def test_cleaner_uses_the_llm_judge(server, no_endpoint, monkeypatch, tmp_path):
    from venus_utils import protocol
    from venus_utils.data.clean import CleanConfig, run_clean

    rows = [
        {
            "question": f"q{i}",
            "gt": "gold",
            "messages": [
                {"role": "user", "content": f"q{i}"},
                {"role": "assistant", "content": protocol.answer_turn("r", ans)},
            ],
        }
        for i, ans in enumerate(["right", "wrong", "gold"])
    ]
    (tmp_path / "rows.json").write_text(json.dumps(rows))
    monkeypatch.setenv("JUDGE_API_BASE", server.base)
    stats = run_clean(
        CleanConfig(input=tmp_path / "rows.json", output_dir=tmp_path / "out", progress=False, workers=1)
    )
    assert stats["judge"]["kind"] == "llm" and stats["judge"]["methods"] == {"llm": 2, "exact": 1}
    assert stats["drop_reasons"] == {"incorrect_answer": 1} and stats["rows"]["kept"] == 2
    assert (tmp_path / "out" / "judge_cache.sqlite").exists()
