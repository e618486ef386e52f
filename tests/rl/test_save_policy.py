"""The RL save writes ``venus_agent.json`` beside the policy: the rollouts' system prompt style, max turns and
tokens per turn, which the agent CLI, the demo and notebooks 05/06 use by default."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

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


@pytest.mark.parametrize(
    ("device", "lora", "dtype"),
    [("cpu", False, "float32"), ("cuda", False, "float32"), ("cpu", True, "float32"), ("cuda", True, "auto")],
)
def test_full_fine_tuning_loads_float32_master_weights_on_every_device(
    micro_model_dir, monkeypatch, device, lora, dtype
):
    """The SFT export is bf16: RL's full fine-tuning must train float32 weights on a GPU as on the CPU (AdamW at
    lr 1e-6 on bf16 weights rounds every update away); LoRA over a frozen base keeps the folder's dtype on a GPU."""
    import torch
    from transformers import AutoModelForCausalLM

    from venus_utils.rl.policy import load_policy

    seen = {}

    class Loaded:
        def to(self, where):
            seen["to"] = where
            return self

    def fake(path, dtype=None, **kwargs):
        seen["dtype"] = dtype
        return Loaded()

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", fake)
    load_policy(micro_model_dir, device, lora=lora)
    assert seen == {"dtype": torch.float32 if dtype == "float32" else "auto", "to": device}
