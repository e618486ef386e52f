"""The RL save writes ``venus_agent.json`` beside the policy: the rollouts' system prompt style, max turns and
tokens per turn, which the agent CLI, the demo and notebooks 05/06 use by default."""

from __future__ import annotations

import json
from types import SimpleNamespace

from venus_utils.rl.config import IGPOConfig
from venus_utils.rl.policy import save_policy


def test_save_policy_writes_how_the_rollouts_ran(tiny_lm, tmp_path):
    from transformers import AutoModelForCausalLM

    model, tokenizer = tiny_lm
    cfg = IGPOConfig(max_turns=8, max_tokens_per_turn=128, system_prompt_style="compact")
    trainer = SimpleNamespace(
        model=model,
        accelerator=SimpleNamespace(unwrap_model=lambda m: m),
        igpo=cfg,
        state=SimpleNamespace(global_step=3),
    )
    out = save_policy(trainer, tokenizer, tmp_path / "model")
    assert json.loads((out / "venus_agent.json").read_text()) == {
        "system_prompt_style": "compact",
        "max_turns": 8,
        "max_new_tokens": 128,
        "stage": "rl",
    }
    AutoModelForCausalLM.from_pretrained(out)  # still a plain transformers folder

    from venus_utils.agent import agent_config

    run = agent_config(str(out))
    assert (run.system_prompt_style, run.max_turns, run.max_new_tokens) == ("compact", 8, 128)
