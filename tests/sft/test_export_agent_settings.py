"""The SFT export writes ``venus_agent.json`` into the model folders: the system prompt the training data used and
the agent limits to run the model with, which the agent CLI, the demo and notebooks 05/06 read."""

import json

import pytest

from venus_utils.modeling import synthetic_conversations
from venus_utils.sft import build_examples, train_sft

from ..conftest import micro_sft_config

AGENT = {"system_prompt_style": "compact", "max_turns": 8, "max_new_tokens": 128}


@pytest.fixture(scope="module")
def rows(micro_model_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(micro_model_dir)
    return build_examples([c["messages"] for c in synthetic_conversations(6, seed=4)], tok, max_length=4096).rows


def _cfg(**kw):
    return micro_sft_config(**{**dict(global_batch_size=2, max_steps=1, save_steps=100), **kw})


def _read(folder):
    return json.loads((folder / "venus_agent.json").read_text())


def test_lora_export_writes_the_agent_settings_into_both_folders_and_a_rerun_updates_them(
    micro_model_dir, rows, tmp_path
):
    from venus_utils.agent.settings import model_agent_settings

    res = train_sft(_cfg(finetuning="lora", lora_r=4), micro_model_dir, rows[:4], tmp_path, agent_settings=AGENT)
    for folder in (res.model_dir, res.adapter_dir):
        assert _read(folder) == {**AGENT, "stage": "sft"}
    found = model_agent_settings(res.model_dir)
    assert (found.system_prompt_style, found.max_turns, found.max_new_tokens, found.stage) == (
        "compact",
        8,
        128,
        "sft",
    )
    again = train_sft(
        _cfg(finetuning="lora", lora_r=4),
        micro_model_dir,
        rows[:4],
        tmp_path,
        agent_settings={**AGENT, "max_turns": 12},
    )  # finished: nothing trained, the file rewritten
    assert again.steps == res.steps and _read(tmp_path / "model")["max_turns"] == 12
    assert _read(tmp_path / "adapter")["max_turns"] == 12


def test_without_agent_settings_no_file_is_written(micro_model_dir, rows, tmp_path):
    res = train_sft(_cfg(), micro_model_dir, rows[:2], tmp_path)
    assert not (res.model_dir / "venus_agent.json").exists()


@pytest.mark.parametrize(
    "bad,message",
    [
        ({**AGENT, "system_prompt_style": "short"}, "system_prompt_style"),
        ({"system_prompt_style": "compact"}, "max_turns, max_new_tokens missing"),
        ({**AGENT, "max_turn": 3}, "unknown key"),
    ],
)
def test_bad_agent_settings_are_refused_before_training(micro_model_dir, rows, tmp_path, bad, message):
    with pytest.raises(ValueError, match=message):
        train_sft(_cfg(), micro_model_dir, rows[:2], tmp_path, agent_settings=bad)
    assert not (tmp_path / "checkpoints").exists()
