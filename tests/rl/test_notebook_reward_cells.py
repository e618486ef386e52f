"""Notebook 04 writes IGPO's rules out in its cells (the turn reward, the outcome reward, the advantages); the command
line trains with the library's functions.  These tests run the notebook's own cells on real episodes (the agent loop
with the micro model's tokenizer, scored by :func:`venus_utils.rl.scoring.score_turns` as the trainer scores them)
and check that the cells and the library give the same numbers, under every setting the cells read, so the two
never drift."""

from __future__ import annotations

import asyncio
import copy
import json
import math

import numpy as np
import pytest

from venus_utils.agent import ScriptedBackend, run_agent
from venus_utils.core import protocol as p
from venus_utils.core.paths import NOTEBOOKS_DIR
from venus_utils.rl import worked_example
from venus_utils.rl.config import IGPOConfig
from venus_utils.rl.rewards import reward_functions
from venus_utils.rl.rollout import episode_from_rollout, rl_agent_config
from venus_utils.rl.scoring import judge_episodes, score_turns

NOTEBOOK = NOTEBOOKS_DIR / "04_igpo_rl.ipynb"


def cell(marker: str) -> str:
    """The source of the one code cell of notebook 04 that contains ``marker``."""
    nb = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    found = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code" and marker in "".join(c["source"])]
    assert len(found) == 1, f"{len(found)} cells of {NOTEBOOK.name} contain {marker!r}"
    return found[0]


class PageTools:
    """Every search and visit returns a page that states the answer."""

    async def run(self, call):
        return f"Kent was founded in 1987 ({call.name})."


SEARCH = p.tool_turn("look it up", "search", {"query": ["Kent founded"]})
VISIT = p.tool_turn("read the page", "visit", {"url": ["https://kent.example"], "goal": "year"})
MALFORMED = 'no think block <tool_call>{"name": "search", "arguments": {"query": ["Kent"]}}</tool_call>'
SCRIPTS = [  # one group of rollouts of one question: right, wrong, malformed turns, a malformed answer
    [SEARCH, VISIT, p.answer_turn("found it", "1987")],
    [VISIT, p.answer_turn("a guess", "1990")],
    [SEARCH, MALFORMED, VISIT, SEARCH, p.answer_turn("found it", "1987")],
    [SEARCH, SEARCH, "1987 without any tags"],
]


def group_of_episodes(tiny_lm, cfg: IGPOConfig):
    model, tok = tiny_lm
    episodes = []
    for script in SCRIPTS:
        rollout = asyncio.run(
            run_agent("When was Kent founded?", ScriptedBackend(list(script), tok), PageTools(), rl_agent_config(cfg))
        )
        episodes.append(episode_from_rollout(rollout, "1987", group="q"))
    judge_episodes(lambda qs, preds, gts: [float((a or "").strip() == g) for a, g in zip(preds, gts)], episodes)
    score_turns(model, tok, episodes, cfg)
    return episodes


CONFIGS = {
    "dr-venus": dict(),  # log_prob_diff, visit filter, format penalty, no search cost
    "prob-diff-all-turns-search-cost": dict(info_gain_type="prob_diff", ig_tool_filter="all", search_cost=0.1),
    "no-format-penalty": dict(ig_tool_filter="all", use_format_penalty=False, gamma=0.5),
}


@pytest.fixture(scope="module", params=list(CONFIGS), ids=list(CONFIGS))
def scored(request, tiny_lm):
    cfg = IGPOConfig(max_turns=6, max_tokens_per_turn=64, max_context_tokens=4096, **CONFIGS[request.param])
    return cfg, group_of_episodes(tiny_lm, cfg)


def reward_cells(cfg) -> dict:
    namespace = {"cfg": cfg}
    exec(cell("def turn_reward(ep):"), namespace)
    exec(cell("def outcome_reward(ep):"), namespace)
    return namespace


def test_the_episodes_exercise_every_rule(scored):
    cfg, group = scored
    assert {ep.judge_score for ep in group} == {0.0, 1.0}
    assert any(e for ep in group for e in ep.format_errors[:-1]) and any(ep.format_errors[-1] for ep in group)
    assert any(g is not None for ep in group for g in ep.info_gain)
    if cfg.ig_tool_filter == "visit":  # a search turn is not scored; its effect is credited at the next visit
        assert any(v is None for ep in group for v in ep.ig_values)


def test_the_reward_cells_give_the_library_rewards(scored):
    cfg, group = scored
    cells = reward_cells(cfg)
    library_turn, library_outcome = reward_functions(cfg)
    for ep in group:
        ours, theirs = cells["turn_reward"](ep), library_turn(ep)
        assert [r is None for r in ours] == [r is None for r in theirs], (ours, theirs)
        assert [r for r in ours if r is not None] == pytest.approx([r for r in theirs if r is not None], abs=1e-12)
        assert cells["outcome_reward"](ep) == library_outcome(ep)


def advantage_cell(cfg) -> dict:
    namespace = {**reward_cells(cfg), "np": np, "math": math}
    exec(cell("def turn_advantages(turn_rewards, outcomes, groups):"), namespace)
    return namespace


def batch_of_two_groups(group):
    """The group's rollouts as two questions' groups of a step's batch (the rescaling is over the batch)."""
    batch = copy.deepcopy(list(group))
    for k, ep in enumerate(batch):
        ep.group = "first" if k < 2 else "second"
    return batch


def token_advantages(batch, cfg, tok, rule=None):
    """What the trainer computes for ``batch``: the library's advantages, or ``rule``'s spread over each turn's
    tokens, on the tokens the loss trains (the assistant's)."""
    from venus_utils.rl.rewards import episode_rewards
    from venus_utils.rl.step_batch import process_advantages, turn_spans

    cells = reward_cells(cfg)
    turn, outcome = cells["turn_reward"], cells["outcome_reward"]
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    gathered, turns = [], []
    for ep in batch:
        rewards, value = turn(ep), float(outcome(ep))
        n = len(ep.completion_ids)
        gathered.append((episode_rewards(ep, rewards, value, im_end), n, ep.group, ep.judge_score, 0))
        turns.append((rewards, value, turn_spans(len(ep.prompt_ids), ep.boundaries, n)))
    adv = process_advantages(gathered, 0, len(batch), cfg, turn_advantages=rule, turns=turns if rule else None)
    return [[a for a, m in zip(row, ep.assistant_mask) if m] for row, ep in zip(adv, batch)]


def test_the_advantage_cell_trains_what_the_library_trains(scored, tiny_lm):
    """Issue 23: the advantage cell is a rule the trainer calls.  On a batch of two groups its advantages, spread
    over each turn's tokens as the trainer spreads them, equal the library's on every token the loss trains."""
    cfg, group = scored
    _, tok = tiny_lm
    rule = advantage_cell(cfg)["turn_advantages"]
    batch = batch_of_two_groups(group)
    ours, theirs = token_advantages(batch, cfg, tok, rule), token_advantages(batch, cfg, tok)
    assert sum(map(len, theirs)) > 0 and any(abs(a) > 0.1 for row in theirs for a in row)
    for a, b in zip(ours, theirs, strict=True):
        assert a == pytest.approx(b, abs=1e-6)


def test_the_advantage_check_shows_an_edit_and_training_would_use_it(scored, tiny_lm):
    cfg, group = scored
    _, tok = tiny_lm
    namespace = advantage_cell(cfg)
    turn_rewards = [namespace["turn_reward"](ep) for ep in group]
    outcomes = [namespace["outcome_reward"](ep) for ep in group]
    advantages = namespace["turn_advantages"](turn_rewards, outcomes, [ep.group for ep in group])
    assert [len(a) for a in advantages] == [ep.num_turns for ep in group]
    library = worked_example.library_turn_advantages(
        group, turn_rewards, outcomes, cfg, tok.convert_tokens_to_ids("<|im_end|>"), mode="scaled_separate"
    )
    assert not worked_example.advantage_table(advantages, library)["differs"].any()

    source = cell("def turn_advantages(turn_rewards, outcomes, groups):")
    forgetful = source.replace("running = value + cfg.gamma * running", "running = value")  # no discount
    assert forgetful != source
    edited = {**namespace}
    exec(forgetful, edited)
    changed = edited["turn_advantages"](turn_rewards, outcomes, [ep.group for ep in group])
    assert worked_example.advantage_table(changed, library)["differs"].any()
    batch = batch_of_two_groups(group)
    trained = token_advantages(batch, cfg, tok, edited["turn_advantages"])
    assert trained != token_advantages(batch, cfg, tok)  # what the trainer would train on changes with the cell
