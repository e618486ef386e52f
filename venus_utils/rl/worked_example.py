"""Notebook 04's worked example: one group of this run's own rollouts, from information gain to advantages.

:func:`own_group` rolls one RL question out ``num_generations`` times with the current policy and scores the rollouts
exactly as the trainer does (judge, information gain, format check: :mod:`.scoring`); :func:`turn_table` scores and
lays out a rollout's information gain turn by turn, :func:`reward_table` and :func:`outcome_table` what the notebook's
reward cells give it, and :func:`library_turn_advantages` the library's advantages of the group, one value per turn,
which the notebook's own advantage cell is checked against.  :func:`load_shared_rollout` is the option of scoring one
of DR-Venus's shared web rollouts instead (with the tiny offline model its values mean little).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd

from ..core.protocol import extract_answer, render_chat
from .advantages import compute_turn_advantages
from .config import IGPOConfig
from .info_gain import compute_info_gain
from .rewards import Episode, episode_rewards, reward_functions
from .rollout import make_agent_rollout
from .scoring import ig_settings, judge_episodes, score_turns


def load_shared_rollout(path: str | Path, max_tokens: int, tokenizer, min_turns: int = 2) -> tuple[list[dict], str]:
    """A DR-Venus RL rollout cut after the last whole turn that fits in ``max_tokens`` (but keeping at least
    ``min_turns`` tool turns), followed by its final answer turn, and that final answer.

    The shared rollouts carry no ground truth, so the worked example scores the answer the rollout ended on.
    """
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    messages = data["messages"]
    answer = extract_answer(messages[-1]["content"]) if messages[-1]["role"] == "assistant" else None
    answer = (answer or "").strip("*_ \n")  # the example ends with a markdown-bold answer
    if not answer:
        raise ValueError(f"{path}: the rollout does not end with an <answer>")
    final = [{"role": "assistant", "content": messages[-1]["content"]}]

    def size(msgs):
        text = render_chat(tokenizer, msgs)
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    keep = 2
    for k in range(2, len(messages) - 1, 2):  # add (assistant, tool response) pairs while they fit
        if k // 2 > min_turns and size(messages[: k + 2] + final) > max_tokens:
            break
        keep = k + 2
    return messages[:keep] + final, answer


def own_group(model, tokenizer, tools, rows: Sequence[dict], cfg: IGPOConfig, judge, *, candidates: int = 4):
    """A group of ``cfg.num_generations`` rollouts of one RL question by the current policy (sampled with ``cfg``'s
    settings, the torch generator seeded with ``cfg.seed``), judged, information gain and format errors filled in as
    the trainer fills them.  The first ``candidates`` rows are rolled out in one batch and the most instructive group
    is kept: the one whose judge scores differ most (an outcome signal), then the one with most scored turns.  A
    rollout whose generation failed (no tokens) is left out, as the trainer leaves it out of the statistics."""
    import torch

    if not rows:
        raise ValueError("no RL question to roll out for the worked example")
    picked = list(rows[: max(1, candidates)])
    batch = [row for row in picked for _ in range(cfg.num_generations)]
    torch.manual_seed(cfg.seed)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            rollout = make_agent_rollout(tools)
            episodes = rollout(model, tokenizer, batch, cfg)
            for k, ep in enumerate(episodes):
                ep.group = k // cfg.num_generations
            judge_episodes(judge, episodes, where=" of the worked example")
            score_turns(model, tokenizer, episodes, cfg, decoder=rollout.decoder)  # as the trainer scores them
    finally:
        model.train(was_training)
    groups = [episodes[g * cfg.num_generations : (g + 1) * cfg.num_generations] for g in range(len(picked))]

    def instructive(group):
        scores = [ep.judge_score for ep in group]
        scored_turns = sum(g is not None for ep in group for g in ep.info_gain)
        return (len(set(scores)) > 1, scored_turns)

    chosen = max(groups, key=instructive)  # max keeps the first of equals
    finished = [ep for ep in chosen if ep.num_turns and ep.completion_ids]  # a failed generation: no tokens to train
    if not finished:
        raise RuntimeError("every rollout of the worked example failed to generate (see the agent's error above)")
    return finished


def turn_table(model, tokenizer, ep: Episode, ground_truth, cfg: IGPOConfig) -> pd.DataFrame:
    """One row per non-final turn of ``ep``: its tool, the information gain toward ``ground_truth`` scored at every
    boundary and with DR-Venus's tool filter (after a visit only), and the policy's belief after the turn; scored as
    the trainer scores it (``cfg``'s IG type, pseudo answer and temperature)."""
    ig_all, ig_filtered = (
        compute_info_gain(
            model,
            tokenizer,
            ep.input_ids,
            ep.boundaries,
            ep.tool_names,
            ground_truth,
            tool_filter=kept,
            **ig_settings(cfg),
        )
        for kept in ("all", "visit")
    )
    return pd.DataFrame(
        {
            "turn": range(ep.num_turns - 1),
            "tool": [t or "-" for t in ep.tool_names[:-1]],
            "ig_every_turn": ig_all.gains,
            "ig_after_visit": ig_filtered.gains,
            "value_after": ig_all.values[1:],
        }
    )


def _dr_venus(cfg: IGPOConfig):
    """The library's (DR-Venus's) reward functions with ``cfg``'s settings, whatever its ``reward_mode``."""
    return reward_functions(dataclasses.replace(cfg, reward_mode="igpo"))


def reward_table(ep: Episode, turn_reward: Callable[[Episode], list], cfg: IGPOConfig) -> pd.DataFrame:
    """One row per non-final turn of ``ep``: its tool, format error, the belief in the ground truth after its tool
    response (None: not scored), its information gain, what ``turn_reward`` gives it, and beside it what the
    library's DR-Venus rule gives (``differs`` marks an edited rule's changes)."""
    ours, reference = turn_reward(ep), _dr_venus(cfg)[0](ep)
    return pd.DataFrame(
        {
            "turn": range(ep.num_turns - 1),
            "tool": [t or "-" for t in ep.tool_names[:-1]],
            "format_error": [e or "" for e in ep.format_errors[:-1]],
            "belief_after": ep.ig_values[1:],
            "info_gain": ep.info_gain,
            "turn_reward": ours,
            "dr_venus_reward": reference,
            "differs": [_differs(a, b) for a, b in zip(ours, reference, strict=True)],
        }
    )


def outcome_table(
    group: Sequence[Episode], outcome_reward: Callable[[Episode], float] | None = None, cfg: IGPOConfig | None = None
) -> pd.DataFrame:
    """One row per rollout of the group: turns, prediction, the judge's score and the answer turn's format error;
    with ``outcome_reward`` and ``cfg``, what it gives each rollout beside the library's DR-Venus rule."""
    table = pd.DataFrame(
        {
            "rollout": range(len(group)),
            "turns": [ep.num_turns for ep in group],
            "prediction": [ep.prediction for ep in group],
            "ground_truth": [ep.ground_truth for ep in group],
            "judge_score": [ep.judge_score for ep in group],
            "answer_format_error": [(ep.format_errors[-1] if ep.format_errors else None) or "" for ep in group],
        }
    )
    if outcome_reward is not None and cfg is not None:
        reference = _dr_venus(cfg)[1]
        table["outcome_reward"] = [outcome_reward(ep) for ep in group]
        table["dr_venus_outcome"] = [reference(ep) for ep in group]
        table["differs"] = [_differs(a, b) for a, b in zip(table["outcome_reward"], table["dr_venus_outcome"])]
    return table


def _differs(a: float | None, b: float | None) -> bool:
    return (a is None) != (b is None) or (a is not None and abs(a - b) > 1e-9)


def library_turn_advantages(
    group: Sequence[Episode],
    turn_rewards: Sequence[Sequence[float | None]],
    outcomes: Sequence[float],
    cfg: IGPOConfig,
    im_end_id: int | None,
    *,
    mode: str | None = None,
) -> list[list[float]]:
    """The trainer's advantages of one group (:func:`~.advantages.compute_turn_advantages` on the rewards placed on
    tokens, ``mode`` defaulting to ``cfg.norm_mode``), read back as one value per assistant turn: every token of a
    turn carries the same advantage, so its first sampled token's value stands for the turn."""
    placed = [episode_rewards(ep, r, o, im_end_id) for ep, r, o in zip(group, turn_rewards, outcomes, strict=True)]
    token_adv = compute_turn_advantages(
        placed,
        [len(ep.completion_ids) for ep in group],
        [0] * len(group),
        gamma=cfg.gamma,
        mode=mode or cfg.norm_mode,
        eps=cfg.adv_eps,
    )
    p0 = [len(ep.prompt_ids) for ep in group]
    return [[adv[b - p] for b in ep.boundaries] for ep, adv, p in zip(group, token_adv, p0, strict=True)]


def advantage_table(advantages: Sequence[Sequence[float]], library: Sequence[Sequence[float]]) -> pd.DataFrame:
    """One row per rollout: what the advantage cell gives each turn beside the library's DR-Venus rule
    (:func:`library_turn_advantages`), the largest difference and ``differs`` (an edited rule's changes)."""
    rows = []
    for i, (ours, theirs) in enumerate(zip(advantages, library, strict=True)):
        gap = max((abs(a - b) for a, b in zip(ours, theirs, strict=True)), default=0.0)
        rows.append(
            {
                "rollout": i,
                "turns": len(ours),
                "advantages (cell)": " ".join(f"{a:+.2f}" for a in ours),
                "advantages (DR-Venus)": " ".join(f"{b:+.2f}" for b in theirs),
                "largest difference": gap,
                "differs": gap > 1e-6,
            }
        )
    return pd.DataFrame(rows)
