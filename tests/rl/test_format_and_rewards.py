"""Turn format check (DR-Venus's ``format_checker.py``), penalty placement and token positions of the rewards."""

from __future__ import annotations

import pytest

from venus_utils.core import protocol
from venus_utils.core.protocol import turn_format_error, turn_format_errors
from venus_utils.rl.advantages import ZERO_REWARD
from venus_utils.rl.config import IGPOConfig
from venus_utils.rl.format_penalty import apply_format_penalties
from venus_utils.rl.rewards import (
    Episode,
    episode_rewards,
    igpo_outcome_reward,
    igpo_turn_reward,
    place_rewards,
    reward_functions,
    turn_reward_positions,
    with_search_cost,
)

TOOL = protocol.tool_turn("look it up", "search", {"query": ["kent county"]})
ANSWER = protocol.answer_turn("done", "2019")


@pytest.mark.parametrize(
    "text",
    [
        TOOL,
        "  <think>a</think><think>b</think>\n"
        "<tool_call>{'name': 'visit', 'arguments': {'url': ['u'], 'goal': 'g'}}</tool_call>\n",
        '<think>x</think><tool_call>{"name": "PythonInterpreter", "arguments": {}}\n<code>print(1)</code></tool_call>',
    ],
)
def test_good_tool_turns(text):
    assert turn_format_error(text, final=False) is None


@pytest.mark.parametrize(
    "text, reason",
    [
        ("", "empty"),
        ('<tool_call>{"name": "search", "arguments": {}}</tool_call>', "think"),
        ("hi <think>a</think><tool_call>{}</tool_call>", "before the first"),
        ("<think>a<think>b</think></think><tool_call>{}</tool_call>", "order"),
        (TOOL + " trailing", "after </tool_call>"),
        ('<think>a</think> so <tool_call>{"name": "s", "arguments": {}}</tool_call>', "between"),
        (TOOL + TOOL[TOOL.index("<tool_call>") :], "exactly one"),
        ('<think>a</think><tool_call>{"name": "s", "arguments": {}}</tool_call><answer>x</answer>', "must not"),
        ("<think>a</think><tool_call>{name: }</tool_call>", "JSON"),
        ('<think>a</think><tool_call>{"name": "s"}</tool_call>', "'arguments'"),
        ('<think>a</think><tool_call>{"name": "s", "arguments": "q"}</tool_call>', "not an object"),
        ("<think>a</think><tool_call> </tool_call>", "empty"),
    ],
)
def test_bad_tool_turns(text, reason):
    err = turn_format_error(text, final=False)
    assert err is not None and reason in err


def test_answer_turns():
    assert turn_format_error(ANSWER, final=True) is None
    assert "empty" in turn_format_error("<think>a</think><answer> </answer>", final=True)
    assert "after </answer>" in turn_format_error(ANSWER + "!", final=True)
    assert "must not" in turn_format_error(TOOL, final=True)  # a tool call where the answer should be
    assert "must not" in turn_format_error(ANSWER, final=False)  # an answer before the last turn
    assert turn_format_errors([TOOL, TOOL + "x", ANSWER]) == [None, "text after </tool_call>", None]


def test_penalties_replace_rewards():
    rewards, outcome = apply_format_penalties([0.3, None, 0.1], 1.0, [None, "bad", None, None])
    assert rewards == [0.3, -1.0, 0.1] and outcome == 1.0  # a skipped (None) turn gets a position when malformed
    rewards, outcome = apply_format_penalties([0.3], 1.0, [None, "no answer"])
    assert rewards == [0.3] and outcome == -1.0
    with pytest.raises(ValueError):
        apply_format_penalties([0.3], 1.0, [None])


IM_END = 2


def _episode(turn_texts=(TOOL, TOOL, ANSWER), tool_names=("search", "visit", None)):
    # prompt: 4 tokens; each assistant turn: 3 sampled tokens ending with <|im_end|>(2), then
    # "\n" (9), tool response 5 tokens ending with <|im_end|>, "\n", gen prompt 2 tokens
    prompt = [1, 5, 6, 7]
    completion, mask, boundaries = [], [], []
    for t in range(len(turn_texts)):
        boundaries.append(len(prompt) + len(completion))
        completion += [11, 12, IM_END]
        mask += [1, 1, 1]
        if t < len(turn_texts) - 1:
            env = [9, 1, 13, 14, 15, IM_END, 9, 1, 16]
            completion += env
            mask += [0] * len(env)
    completion.append(9)  # trailing newline after the final <|im_end|>
    mask.append(0)
    return Episode(
        question="q",
        ground_truth="2019",
        prompt_ids=prompt,
        completion_ids=completion,
        assistant_mask=mask,
        boundaries=boundaries,
        turns=list(turn_texts),
        tool_names=list(tool_names),
    )


def test_positions_on_the_im_end_closing_each_tool_response():
    ep = _episode()
    # turn 0: tokens 0-2, env 3-11 with the tool response's <|im_end|> at 8;
    # turn 1 starts at 12 -> its <|im_end|> at 20
    assert turn_reward_positions(ep, IM_END) == [8, 20]
    assert ep.completion_ids[8] == IM_END and ep.assistant_mask[8] == 0
    assert turn_reward_positions(ep, None) == [11, 23]  # fallback: the token before the next turn


def test_place_rewards():
    r = place_rewards(10, [0.0, None, -1.0], [2, 4, 6], 0.0)
    assert r == {2: ZERO_REWARD, 6: -1.0, 9: 0.0}  # exact zero kept as 1e-10, outcome present even when 0
    with pytest.raises(ValueError, match="turn 0"):
        place_rewards(10, [0.1], [9], 1.0)  # would sit on the outcome
    with pytest.raises(ValueError, match="not finite"):
        place_rewards(10, [float("nan")], [2], 1.0)


def test_default_reward_functions():
    ep = _episode(turn_texts=(TOOL, TOOL + " junk", ANSWER))
    ep.format_errors = turn_format_errors(ep.turns)
    ep.info_gain = [None, 0.25]
    ep.judge_score = 1.0
    assert igpo_turn_reward(ep) == [None, -1.0]
    assert igpo_turn_reward(ep, use_format_penalty=False) == [None, 0.25]
    assert igpo_outcome_reward(ep) == 1.0
    rewards = episode_rewards(ep, igpo_turn_reward(ep), igpo_outcome_reward(ep), IM_END)
    assert rewards == {20: -1.0, len(ep.completion_ids) - 1: 1.0}
    ep.format_errors[-1] = "empty <answer>"
    assert igpo_outcome_reward(ep) == -1.0
    with pytest.raises(ValueError, match="needs 2"):
        episode_rewards(ep, [0.1], 1.0, IM_END)


def test_default_rewards_need_the_format_checked():
    ep = _episode()
    ep.info_gain, ep.judge_score = [None, 0.25], 1.0
    with pytest.raises(ValueError, match="format errors"):  # not checked yet: no penalty can be placed
        igpo_turn_reward(ep)
    assert igpo_turn_reward(ep, use_format_penalty=False) == [None, 0.25]
    ep.info_gain = []  # not scored: every non-final turn without a reward position
    ep.format_errors = turn_format_errors(ep.turns)
    assert igpo_turn_reward(ep) == [None, None] and igpo_outcome_reward(ep) == 1.0


def test_search_cost():
    ep = _episode()  # search, visit, answer
    ep.format_errors, ep.info_gain, ep.judge_score = turn_format_errors(ep.turns), [None, 0.25], 1.0
    assert with_search_cost([None, 0.25], ep.tool_names, 0.1) == [-0.1, 0.25]  # a search turn gets a position
    assert with_search_cost([None, 0.25], ep.tool_names, 0.0) == [None, 0.25]  # DR-Venus: none
    turn_fn, outcome_fn = reward_functions(IGPOConfig(search_cost=0.1))
    assert turn_fn(ep) == [-0.1, 0.25] and outcome_fn(ep) == 1.0
    assert reward_functions(IGPOConfig())[0](ep) == igpo_turn_reward(ep) == [None, 0.25]
    with pytest.raises(ValueError, match="reward_mode=grpo has none"):
        IGPOConfig(reward_mode="grpo", search_cost=0.1)
    with pytest.raises(ValueError, match="search_cost"):
        IGPOConfig(search_cost=float("nan"))


def test_episode_validation():
    with pytest.raises(ValueError, match="assistant_mask"):
        Episode("q", "a", [1], [2, 3], [1], [1], ["t"], [None])
    with pytest.raises(ValueError, match="prompt length"):
        Episode("q", "a", [1, 2], [3], [1], [1], ["t"], [None])
