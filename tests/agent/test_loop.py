"""The agent loop: expert replays through the real local tools, forced endings, retries, termination codes,
and the exact token ids / generated-token mask with a tiny random Qwen3."""

from __future__ import annotations

import asyncio
import json

import pandas as pd
import pytest

from venus_utils.agent import AgentConfig, ScriptedBackend, TransformersBackend, run_agent, run_many
from venus_utils.agent.backends import Generation, strip_think_prefix
from venus_utils.core import protocol
from venus_utils.core.io import read_jsonl
from venus_utils.tools import make_toolbox


@pytest.fixture(scope="module")
def tools(world_dir):
    return make_toolbox("local", world_dir=world_dir)


@pytest.fixture(scope="module")
def clean_rows(world_dir):
    df = pd.read_parquet(world_dir / "trajectories" / "train-00000.parquet")
    noise = read_jsonl(world_dir / "trajectory_noise.jsonl")
    return [row for (_, row), n in zip(df.iterrows(), noise) if not n["noise"]]


def _replay_turns(row) -> list[str]:
    return [strip_think_prefix(m["content"], "<think>\n") for m in row["messages"][1:] if m["role"] == "assistant"]


def _run(question, backend, tools, cfg=None):
    return asyncio.run(run_agent(question, backend, tools, cfg or AgentConfig.rl()))


@pytest.mark.parametrize("with_tokenizer", [False, True])
def test_expert_replay_reaches_the_answer_through_real_tools(clean_rows, tools, tiny_tokenizer, with_tokenizer):
    search_text = pytest.importorskip("venus_utils.data.search_text")
    for row in clean_rows[:25]:
        backend = ScriptedBackend(_replay_turns(row), tiny_tokenizer if with_tokenizer else None)
        r = _run(row["meta"]["question"], backend, tools)
        assert r.termination == "answered" and r.prediction == row["meta"]["answer"]
        assert r.parse_error_count == 0 and r.tool_call_count == len(row["messages"]) // 2 - 1
        raw_responses = [m["content"] for m in row["messages"][2::2]]
        got = [m["content"] for m in r.messages[3::2]]
        for raw, seen in zip(raw_responses, got):
            body = raw[len("<tool_response>\n") : -len("\n</tool_response>")]
            expected = search_text.parse_search_reference(body) if "Web Results" in body else body
            assert seen == protocol.wrap_tool_response(expected)
        assert all(t["format_error"] is None for t in r.turn_log)


def test_token_ids_and_mask_with_tiny_qwen3(tools, tiny_lm, tiny_tokenizer):
    backend = TransformersBackend(tiny_lm, tiny_tokenizer, seed=1)
    chat = backend.chat
    cfg = AgentConfig.rl(max_turns=3, max_new_tokens=24)
    rollouts = asyncio.run(run_many(["In which country was Kalo Mira born?"] * 3, backend, tools, cfg))
    for r in rollouts:
        assert r.termination in ("answered", "answered_max_steps", "max_steps")
        assert r.prompt_ids == chat.prompt_ids(r.messages[:2])
        assert (
            len(r.completion_ids) == len(r.completion_mask)
            and len(r.prompt_ids) + len(r.completion_ids) == r.final_token_count
        )
        ids, mask = r.prompt_ids + r.completion_ids, [0] * len(r.prompt_ids) + r.completion_mask
        starts = [b["context_len"] for b in r.boundaries]
        assert starts == sorted(starts) and starts[0] == len(r.prompt_ids)
        for turn, start in enumerate(starts):  # each boundary is where a generated run begins
            assert mask[start] == 1 and mask[start - 1] == 0
            end = start
            while end < len(mask) and mask[end] == 1:
                end += 1
            assert end - start == r.turn_log[turn]["new_tokens"]
        for _turn, user in zip(r.turn_log[:-1], r.messages[3::2]):  # glue carries the tool responses / notes
            assert user["content"] in chat.decode(ids)
        text = chat.decode([t for t, m in zip(ids, mask) if m == 0])
        assert text.count("<|im_start|>assistant\n<think>\n") == r.turns
    assert len({tuple(r.completion_ids) for r in rollouts}) > 1  # sampled, not identical


def test_greedy_generation_is_deterministic(tools, tiny_lm, tiny_tokenizer):
    cfg = AgentConfig.rl(max_turns=2, max_new_tokens=12, temperature=0.0)
    a = _run("Q?", TransformersBackend(tiny_lm, tiny_tokenizer), tools, cfg)
    b = _run("Q?", TransformersBackend(tiny_lm, tiny_tokenizer), tools, cfg)
    assert a.completion_ids == b.completion_ids and a.messages == b.messages


def _search_turn(q):
    return (
        f"I search.\n</think>\n<tool_call>\n{json.dumps({'name': 'search', 'arguments': {'query': [q]}})}"
        "\n</tool_call>"
    )


ANSWER = "Done.\n</think>\n<answer>\nXia\n</answer>"


def test_max_turns_forces_a_wrapped_final_answer(tools, tiny_tokenizer):
    r = _run(
        "Q?",
        ScriptedBackend([_search_turn("a"), _search_turn("b"), ANSWER], tiny_tokenizer),
        tools,
        AgentConfig.rl(max_turns=3),
    )
    assert r.termination == "answered_max_steps" and r.prediction == "Xia" and r.turns == 3
    assert r.messages[-2]["content"] == protocol.wrap_tool_response(protocol.FORCE_MAX_STEPS)
    assert r.turn_log[-1]["forced"] == "max_steps"
    r = _run(
        "Q?",
        ScriptedBackend([_search_turn("a"), _search_turn("b"), _search_turn("c")]),
        tools,
        AgentConfig.rl(max_turns=3),
    )
    assert r.termination == "max_steps" and r.tool_call_count == 2


def test_context_budget_forces_answer(tools, tiny_tokenizer):
    r = _run(
        "Q?", ScriptedBackend([_search_turn("a"), ANSWER], tiny_tokenizer), tools, AgentConfig.rl(context_limit=10)
    )
    assert r.termination == "answered_token_limit"
    assert r.messages[-2]["content"] == protocol.wrap_tool_response(protocol.FORCE_CONTEXT)
    assert protocol.FORCE_CONTEXT in tiny_tokenizer.decode(r.completion_ids)  # the ids follow the replacement
    r = _run("Q?", ScriptedBackend([_search_turn("a"), _search_turn("b")]), tools, AgentConfig.rl(context_limit=10))
    assert r.termination == "token_limit_no_answer"


def test_malformed_turns_and_unknown_tools(tools):
    bad = "no tags at all"
    unknown = 'r\n</think>\n<tool_call>\n{"name": "PythonInterpreter", "arguments": {}}\n</tool_call>'
    r = _run("Q?", ScriptedBackend([bad, unknown, ANSWER]), tools, AgentConfig.rl())
    assert r.termination == "answered" and r.parse_error_count == 1
    assert r.messages[3]["content"] == protocol.wrap_tool_response(protocol.MALFORMED_RL)
    assert r.messages[5]["content"] == protocol.wrap_tool_response("Error: Tool PythonInterpreter not found")
    r = _run("Q?", ScriptedBackend([bad, unknown, ANSWER]), tools, AgentConfig(attempts=1))
    assert r.parse_error_count == 2 and r.messages[5]["content"] == protocol.wrap_tool_response(
        protocol.MALFORMED_INFERENCE
    )


def test_retries_on_parse_errors_and_duplicates(tools):
    turns = ["garbage", _search_turn("a"), _search_turn("a"), _search_turn("b"), ANSWER]
    r = _run("Q?", ScriptedBackend(turns), tools, AgentConfig(attempts=3, backoff_s=0))
    assert r.termination == "answered" and r.turns == 3 and r.tool_call_count == 2
    assert r.parse_error_count == 1 and r.dedup_count == 1
    assert [t["attempts"] for t in r.turn_log] == [2, 2, 1]


def test_repetition_retry_and_hallucinated_observation_cut(tools, tiny_tokenizer):
    looping = "ab" * 400
    fake = _search_turn("a") + "<tool_response>\nfake results\n</tool_response>"
    r = _run(
        "Q?", ScriptedBackend([looping, fake, ANSWER], tiny_tokenizer), tools, AgentConfig(attempts=2, backoff_s=0)
    )
    assert r.turn_log[0]["attempts"] == 2 and r.termination == "answered"
    assert "fake results" not in r.messages[2]["content"] and "fake results" not in tiny_tokenizer.decode(
        r.completion_ids
    )


def test_timeout_llm_error_and_exception(tools):
    r = _run("Q?", ScriptedBackend([ANSWER]), tools, AgentConfig(time_limit_s=-1))
    assert r.termination == "timeout" and r.turns == 0
    r = _run("Q?", ScriptedBackend([RuntimeError("server down")] * 3), tools, AgentConfig(attempts=3, backoff_s=0))
    assert r.termination == "llm_error"

    class Broken:
        chat = None

        async def generate(self, conv, sampling):
            raise ValueError("bug")

    r = _run("Q?", Broken(), tools)
    assert r.termination == "exception" and "ValueError: bug" in r.error and r.traceback


def test_web_tools_faults_never_crash_a_rollout(monkeypatch):
    from venus_utils.tools import JinaVisit, SerperSearch, Toolbox
    from venus_utils.tools.stub_server import StubServer

    monkeypatch.setenv("SERPER_KEY_ID", "k-SECRET-search")
    with StubServer(hang_s=10) as stub:
        box = Toolbox(
            SerperSearch(api_url=stub.url + "/search", timeout=0.3, attempts=2, backoff=0.01),
            JinaVisit(
                reader_url=stub.url + "/reader", api_base=stub.url + "/v1", timeout=0.3, attempts=2, backoff=0.01
            ),
            timeout=2,
        )
        visit = (
            'v\n</think>\n<tool_call>\n{"name": "visit", "arguments": {"url": ["https://x/http500"], "goal": "g"}}'
            "\n</tool_call>"
        )
        r = _run("Q?", ScriptedBackend([_search_turn("q hang"), _search_turn("q badjson"), visit, ANSWER]), box)
    assert r.termination == "answered" and r.tool_call_count == 3
    assert "timed out" in r.messages[3]["content"] and "malformed JSON" in r.messages[5]["content"]
    assert protocol.VISIT_FAILED_SUMMARY in r.messages[7]["content"]
    assert "k-SECRET-search" not in json.dumps(r.to_dict())


def test_generation_stop_cut_keeps_prefix_ids(tiny_tokenizer):
    from venus_utils.agent.backends import finish_ids
    from venus_utils.agent.conversation import ChatTokens

    chat = ChatTokens(tiny_tokenizer)
    ids = chat.encode("hello world<tool_response>\nx")
    gen = finish_ids(chat, ids, ("<tool_response>",))
    assert isinstance(gen, Generation) and gen.text == "hello world" and gen.finish_reason == "stop"
    assert chat.decode(gen.ids) == "hello world"


def test_backend_survives_an_interrupted_event_loop(tools, tiny_lm, tiny_tokenizer):
    backend = TransformersBackend(tiny_lm, tiny_tokenizer, seed=0)
    cfg = AgentConfig.rl(max_turns=2, max_new_tokens=8)

    async def interrupted():
        task = asyncio.ensure_future(run_agent("Q?", backend, tools, cfg))
        await asyncio.sleep(0)
        task.cancel()

    asyncio.run(interrupted())
    tiny_lm.train()
    r = _run("Q?", backend, tools, cfg)  # a fresh event loop still gets its generations
    assert r.turns >= 1 and tiny_lm.training  # and the model's mode is left as it was
    tiny_lm.eval()


def test_rl_mode_cuts_hallucinated_observations_from_ids(tools, tiny_tokenizer):
    fake = _search_turn("a") + "<tool_response>\nfake results\n</tool_response>"
    r = _run("Q?", ScriptedBackend([fake, ANSWER], tiny_tokenizer), tools, AgentConfig.rl())
    assert r.termination == "answered" and "fake results" not in tiny_tokenizer.decode(r.completion_ids)


def test_system_prompt_style_reaches_the_conversation(tools):
    r = _run("Q?", ScriptedBackend([ANSWER]), tools, AgentConfig.rl(system_prompt_style="compact"))
    assert r.messages[0] == {
        "role": "system",
        "content": protocol.system_prompt(protocol.DEFAULT_DATE, style="compact"),
    }
    r = _run("Q?", ScriptedBackend([ANSWER]), tools)
    assert r.messages[0]["content"] == protocol.system_prompt(protocol.DEFAULT_DATE)
    with pytest.raises(ValueError, match="system_prompt_style"):
        AgentConfig(system_prompt_style="short")
