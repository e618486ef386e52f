"""The judge: shortcuts, the offline judge, and the LLM path against a stand-in OpenAI-compatible server."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from venus_utils.judging import judge as J


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
            ("q", "**Paris** is the capital", "Paris<|answer_split|>x"),  # exact: more than the answer, refused
            ("q", "The answer is **Paris**.", "Paris<|answer_split|>x"),
            ("q", "Berlin", "Paris"),
            ("q", "", "Paris"),
            ("q", "answer here", "Paris"),
        ]
    )
    assert [(v.correct, v.method) for v in out] == [
        (True, "exact"),
        (False, "offline"),
        (True, "exact"),
        (False, "offline"),
        (False, "empty"),
        (False, "empty"),
    ]
    assert out[3].judge == J.OFFLINE_NAME == "offline-exact"
    buffy = judge.judge("q", "Buffy the Vampire Slayer Season Eight", "Buffy the Vampire Slayer comics")
    assert buffy.correct is False
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
        v = judge._llm("q", "other", "gold")
        assert v.method == "error" and not v.correct and "correct: yes|no" in v.error
        flaky.fail_first = 10
        v = judge._llm("q", "third", "gold")
        assert v.method == "error" and "after 3 attempts" in v.error and "k2" not in v.error
        with pytest.raises(J.JudgeUnavailable, match="failed on 1 of the 1 answers"):  # never a wrong answer
            judge.judge("q", "fourth", "gold")
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
    from venus_utils.core import protocol
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


# ---------------------------------------------------------------------------------------------------------------
# issue 22, items 2 and 4: a judge URL's credentials are never shown; a dead judge cannot pass as a result


def test_judge_url_credentials_are_redacted(tmp_path):
    from venus_utils.core.env import redact

    judge = J.Judge(
        api_base="http://alice:pa55word@judge.lan:8000/v1?api-key=SECRETKEY&x=1", cache_path=tmp_path / "c"
    )
    shown = judge.describe() + judge.endpoint + redact(f"error talking to {judge.api_base}: refused")
    assert "pa55word" not in shown and "SECRETKEY" not in shown
    assert "http://***@judge.lan:8000/v1?api-key=***&x=1" in judge.describe()
    for url in (
        "https://h/v1?authToken=T0KEN1&clientSecret=S3CRET&secretKey=K3Y&sessiontoken=S3SS",
        "https://ghp_T0KEN1:x-oauth-basic@github.com/x",
    ):
        assert not {"T0KEN1", "S3CRET", "K3Y", "S3SS"} & set(re.split(r"[=&@:/?]", redact(url)))
    assert redact("see https://tok3n@h/v1#token=abc, then") == "see https://***@h/v1#token=***, then"
    judge.close()


def dead_judge(monkeypatch, tmp_path, **env):
    monkeypatch.setenv("JUDGE_API_BASE", "http://127.0.0.1:9/v1")  # nothing listens on port 9
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return J.Judge.from_env(cache_path=tmp_path / "c.sqlite", backoff=0, timeout=2)


def test_a_dead_judge_stops_the_batch_with_a_clear_message(no_endpoint, monkeypatch, tmp_path):
    judge = dead_judge(monkeypatch, tmp_path)
    items = [("q", f"answer {i}", "gold") for i in range(50)] + [("q", "gold", "gold")]
    with pytest.raises(J.JudgeUnavailable) as info:
        judge.judge_many(items)
    message = str(info.value)
    assert "failed on 50 of the 50 answers it was asked about" in message and "127.0.0.1:9" in message
    assert "JUDGE_FALLBACK=offline" in message and "not wrong answers" in message
    assert judge.errors <= J.DEAD_AFTER + judge.max_workers  # given up on, not 50 x 3 attempts
    judge.close()


def test_a_dead_judge_stops_even_when_exact_matches_decide_most_answers(no_endpoint, monkeypatch, tmp_path):
    """The share counts the answers the LLM was asked about: 3 failures among 103 answers, 100 of them exact."""
    judge = dead_judge(monkeypatch, tmp_path)
    items = [("q", "gold", "gold")] * 100 + [("q", f"answer {i}", "gold") for i in range(3)]
    with pytest.raises(J.JudgeUnavailable, match="failed on 3 of the 3 answers"):
        judge.judge_many(items)
    judge.close()


def test_a_dead_judge_falls_back_to_offline_when_asked(no_endpoint, monkeypatch, tmp_path):
    judge = dead_judge(monkeypatch, tmp_path, JUDGE_FALLBACK="offline")
    verdicts = judge.judge_many([("q", "Paris, France", "Paris"), ("q", "Rome", "Paris"), ("q", "Paris", "Paris")])
    assert [v.method for v in verdicts] == ["offline-fallback", "offline-fallback", "exact"]
    assert [v.value for v in verdicts] == [0.0, 0.0, 1.0]  # offline, only an exact answer is right
    assert "2 answers judged by the offline judge after LLM errors" in judge.describe()
    monkeypatch.setenv("JUDGE_FALLBACK", "sometimes")
    with pytest.raises(ValueError, match="JUDGE_FALLBACK must be one of stop, offline"):
        J.Judge.from_env(cache_path=tmp_path / "c.sqlite")
    judge.close()


def test_a_few_judge_errors_are_left_out_not_scored_wrong(no_endpoint, tmp_path):
    import math

    import pandas as pd

    from venus_utils.eval import heldout, metrics

    server = StandIn(reply=lambda prompt: "no verdict" if "[response]: odd" in prompt else "correct: no")
    try:
        judge = J.Judge(api_base=server.base, cache_path=tmp_path / "c.sqlite", backoff=0, attempts=1)
        preds = ["odd"] + ["gold"] * 20 + ["wrong"] * 19  # 1 error in 40: under the 5% share
        table = pd.DataFrame(
            {"id": [f"q{i}" for i in range(40)], "source": "s", "question": "q", "prediction": preds, "answer": "gold"}
        )
        scored = metrics.score(table.assign(turns=1, tool_call_count=0, termination="answered"), judge=judge)
        assert math.isnan(scored["correct"].iloc[0]) and scored["judge_method"].iloc[0] == "error"
        figures = metrics.summarize(scored)
        assert figures["accuracy"] == 20 / 39 and figures["judge_errors"] == 1 and figures["unjudged_questions"] == 1
        assert figures["n_questions"] == 39
        by = metrics.accuracy_by(scored, "source").loc["all"]
        assert (by["samples"], by["unjudged"], by["accuracy"]) == (39, 1, 20 / 39)
        assert metrics.pass_at_k_curve(scored).to_dict("records") == [{"k": 1, "pass_at_k": 20 / 39, "questions": 39}]
        assert set(metrics.behaviour_vs_correctness(scored).index) == {"correct", "incorrect", "unjudged"}
        held = heldout.summary(scored, by=())
        assert held["n"] == 39 and held["accuracy"] == 20 / 39 and held["judge_errors"] == 1
        plain = metrics.score(table.assign(turns=1), judge=J.judge_function(judge)[0])  # the plain-function path
        assert math.isnan(plain["correct"].iloc[0])
        judge.close()
    finally:
        server.close()


def test_rl_refuses_to_train_on_unjudged_answers():
    from types import SimpleNamespace

    from venus_utils.rl.igpo_trainer import IGPOTrainer

    episodes = [SimpleNamespace(question="q", prediction="a", ground_truth="g", judge_score=0.0) for _ in range(2)]
    calls = []

    def flaky(questions, predictions, truths):  # the second answer fails, and fails again when asked once more
        calls.append(len(questions))
        return [1.0, float("nan")] if len(questions) == 2 else [float("nan")] * len(questions)

    fake = SimpleNamespace(judge=flaky, state=SimpleNamespace(global_step=7))
    with pytest.raises(J.JudgeUnavailable, match="failed on 1 of 2 final answers of step 7"):
        IGPOTrainer.judge_episodes(fake, episodes)
    assert calls == [2, 1]
    recovers = SimpleNamespace(  # a transient failure: the second asking judges it
        judge=lambda q, p, g: [1.0, float("nan")] if len(q) == 2 else [0.0], state=SimpleNamespace(global_step=8)
    )
    IGPOTrainer.judge_episodes(recovers, episodes)
    assert [ep.judge_score for ep in episodes] == [1.0, 0.0]


def test_the_cleaner_stops_on_a_dead_judge(no_endpoint, monkeypatch, tmp_path):
    from venus_utils.core import protocol
    from venus_utils.data.clean import CleanConfig, run_clean

    rows = [
        {
            "question": f"q{i}",
            "gt": "gold",
            "messages": [
                {"role": "user", "content": f"q{i}"},
                {"role": "assistant", "content": protocol.answer_turn("r", f"answer {i}")},
            ],
        }
        for i in range(12)
    ]
    (tmp_path / "rows.json").write_text(json.dumps(rows))
    monkeypatch.setenv("JUDGE_API_BASE", "http://127.0.0.1:9/v1")
    with pytest.raises(J.JudgeUnavailable, match="failed on 12 of the 12"):
        run_clean(CleanConfig(input=tmp_path / "rows.json", output_dir=tmp_path / "out", progress=False, workers=1))
