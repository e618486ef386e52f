"""An unclosed <think>: inference repairs it before the call, RL training (DR-Venus's dr_agent_loop.py) at the end."""

from __future__ import annotations

import asyncio

import pytest

from venus_utils.agent import AgentConfig, ScriptedBackend, run_agent
from venus_utils.core import protocol as p
from venus_utils.core.protocol import turn_format_error
from venus_utils.rl.config import IGPOConfig
from venus_utils.rl.rewards import igpo_turn_reward
from venus_utils.rl.rollout import episode_from_rollout, rl_agent_config

CALL = '<tool_call>\n{"name": "visit", "arguments": {"url": ["u"], "goal": "g"}}\n</tool_call>'
UNCLOSED_CALL = "<think>\nI should visit u " + CALL  # the model forgot </think>


class EchoTools:
    async def run(self, call):
        return f"The page says the answer is 1987. ({call.name})"


@pytest.mark.parametrize(
    "text, inference, training",
    [
        (UNCLOSED_CALL, "<think>\nI should visit u \n</think>\n" + CALL, UNCLOSED_CALL + "\n</think>"),
        (
            "<think>\nso <answer>x</answer>",
            "<think>\nso \n</think>\n<answer>x</answer>",
            "<think>\nso <answer>x</answer>\n</think>",
        ),
        ("<think>\nreasoning only", "<think>\nreasoning only\n</think>", "<think>\nreasoning only\n</think>"),
        (
            "r\n</think>\n<answer>x</answer>",
            "<think>\nr\n</think>\n<answer>x</answer>",
            "<think>\nr\n</think>\n<answer>x</answer>",
        ),
        (
            "<think>\nr\n</think>\n<answer>a</answer><tool_response>fake",
            "<think>\nr\n</think>\n<answer>a</answer>",
            "<think>\nr\n</think>\n<answer>a</answer>",
        ),
    ],
)
def test_repair_modes(text, inference, training):
    assert p.repair_tags(text) == p.repair_tags(text, "inference") == inference
    assert p.repair_tags(text, "training") == training
    with pytest.raises(ValueError, match="repair mode"):
        p.repair_tags(text, "eval")


def test_the_training_repair_leaves_the_call_inside_think_and_the_format_check_flags_it():
    inference, training = p.repair_tags(UNCLOSED_CALL, "inference"), p.repair_tags(UNCLOSED_CALL, "training")
    assert turn_format_error(inference, final=False) is None
    assert turn_format_error(training, final=False) == "<tool_call> must follow </think>"
    # the loop still runs the call, as DR-Venus's RL loop does (its parser finds the call inside the think block)
    assert p.parse_turn(training).kind == "call" and p.parse_turn(training).call.name == "visit"


def test_rl_rollouts_repair_the_training_way_and_inference_keeps_its_own():
    assert AgentConfig().tag_repair == "inference" and AgentConfig.rl().tag_repair == "training"
    assert rl_agent_config(IGPOConfig()).tag_repair == "training"
    with pytest.raises(ValueError, match="tag_repair"):
        AgentConfig(tag_repair="sometimes")


def test_an_rl_episode_with_an_unclosed_think_call_gets_the_penalty(tiny_lm):
    _, tok = tiny_lm
    # the generation prompt already opens <think>, so the model's text starts inside the think block
    turns = ["I should visit u " + CALL, p.answer_turn("found it", "1987")]
    cfg = IGPOConfig(max_turns=3, max_tokens_per_turn=64, max_context_tokens=4096)
    got = {}
    for name, acfg in (("rl", rl_agent_config(cfg)), ("inference", AgentConfig(max_turns=3))):
        r = asyncio.run(run_agent("Which year?", ScriptedBackend(list(turns), tok), EchoTools(), acfg))
        ep = episode_from_rollout(r, "1987", group="q")
        ep.format_errors = [turn_format_error(t, final=(i == ep.num_turns - 1)) for i, t in enumerate(ep.turns)]
        ep.info_gain = [0.25]
        got[name] = (ep.tool_names, ep.turns[0], igpo_turn_reward(ep), r.turn_log[0]["format_error"])
    tools, first, reward, logged = got["rl"]
    assert tools == ["visit", None] and first.endswith(CALL + "\n</think>")  # the tool still ran
    assert reward == [-1.0] and logged == "<tool_call> must follow </think>"
    tools, first, reward, logged = got["inference"]
    assert tools == ["visit", None] and "\n</think>\n<tool_call>" in first
    assert reward == [0.25] and logged is None
