"""RL rollouts in vLLM server mode, client side, against the stand-in OpenAI-compatible server on 127.0.0.1.

The server gets the exact context token ids as the prompt (``/v1/completions``, ``return_tokens_as_token_ids``)
and its sampled ids are used as they come back; a server that returns text only is re-tokenised (not exact, and
the episode says what the policy would have sampled only up to tokenisation).
"""

from __future__ import annotations

import json

import pytest

from venus_utils.rl import IGPOConfig
from venus_utils.rl.igpo_trainer import grpo_args
from venus_utils.rl.rollout import VLLMServer, make_agent_rollout
from venus_utils.rl.training_rows import rl_rows
from venus_utils.tools.stub_server import StubServer

ROWS = rl_rows(
    [
        {"id": "q1", "question": "Which year was Kent founded?", "answer": "stub answer"},
        {"id": "q2", "question": "Who founded Medway Labs?", "answer": "Karo Mitel"},
    ]
)


class NoTools:
    async def run(self, call):  # the stub's policy answers at once
        raise AssertionError("no tool call expected")


@pytest.fixture(scope="module")
def policy(micro_run):
    from venus_utils.rl.policy import load_policy

    return load_policy(micro_run / "00_setup" / "tiny_model", "cpu")


def _server_cfg(url, **kw):
    return IGPOConfig(
        use_vllm=True,
        vllm_mode="server",
        vllm_server_base_url=url,
        vllm_server_sync_weights=False,
        prompts_per_step=2,
        num_generations=2,
        micro_batch_size=2,
        max_steps=1,
        save_steps=10,
        max_turns=2,
        max_tokens_per_turn=16,
        max_context_tokens=4096,
        **kw,
    )


def test_server_rollouts_use_the_sampled_ids_exactly(policy):
    from venus_utils.agent.conversation import ChatTokens

    model, tok = policy
    chat = ChatTokens(tok)
    with StubServer() as stub:
        cfg = _server_cfg(stub.url)
        server = VLLMServer.connect(stub.url)  # /v1/models lists nothing: DR-Venus's served name "model"
        assert server.api_url == stub.url + "/v1" and server.model == "model"
        stub.served_models = ["dr-venus-4b"]
        assert VLLMServer.connect(stub.url + "/v1").model == "dr-venus-4b"  # the name the server reports
        sampled = chat.encode(stub.completion_text) + [tok.convert_tokens_to_ids("<|im_end|>")]
        stub.completion_ids = sampled[:-2] + [7, sampled[-1]]  # not what re-tokenising the text would give
        episodes = make_agent_rollout(NoTools())(model, tok, ROWS, cfg, llm=server)
        assert len(stub.requests) == len(ROWS)
        by_prompt = {tuple(body["prompt"]): body for body in stub.requests}  # requests arrive concurrently
        for ep in episodes:
            body = by_prompt[tuple(ep.prompt_ids)]  # the exact context ids were sent, not text
            assert body["return_tokens_as_token_ids"] and body["model"] == "model"
            assert body["temperature"] == cfg.temperature and body["top_p"] == cfg.top_p
            assert ep.completion_ids == stub.completion_ids and ep.prediction == "stub answer"
        stub.completion_ids = None  # a server that returns text only: re-tokenised
        episodes = make_agent_rollout(NoTools())(model, tok, ROWS[:1], cfg, llm=server)
        assert episodes[0].completion_ids == sampled


def test_trainer_rolls_out_on_the_server(policy, tmp_path):
    """``vllm_mode='server'`` without weight sync: TRL has no vLLM part, every rollout goes to the server."""
    from datasets import Dataset

    from venus_utils.rl.igpo_trainer import IGPOTrainer

    model, tok = policy
    with StubServer() as stub:
        cfg = _server_cfg(stub.url, kl_coef=0.0)
        args = grpo_args(cfg, tmp_path)
        assert not args.use_vllm
        trainer = IGPOTrainer(
            model,
            tok,
            Dataset.from_list(ROWS),
            cfg,
            args,
            rollout_fn=make_agent_rollout(NoTools()),
            judge=lambda q, p, a: [float(x == y) for x, y in zip(p, a)],
        )
        trainer.train()
        assert len(stub.requests) == cfg.trajectories_per_step
    episodes = [json.loads(line) for line in (tmp_path / "episodes.jsonl").read_text().splitlines()]
    assert [e["prediction"] for e in episodes] == ["stub answer"] * 4
    assert sorted(e["judge_score"] for e in episodes) == [0.0, 0.0, 1.0, 1.0]


def test_server_mode_settings_are_checked(monkeypatch):
    with pytest.raises(ValueError, match="vllm_server_base_url"):
        IGPOConfig(use_vllm=True, vllm_mode="server")
    with pytest.raises(ValueError, match="vllm_mode"):
        IGPOConfig(vllm_mode="remote")
    import venus_utils.rl.igpo_trainer as igpo_trainer

    monkeypatch.setattr(igpo_trainer, "available", lambda name: False)
    cfg = IGPOConfig(use_vllm=True, vllm_mode="server", vllm_server_base_url="http://127.0.0.1:8000")
    with pytest.raises(RuntimeError, match="vllm installed"):
        grpo_args(cfg, "unused")
