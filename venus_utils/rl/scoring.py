"""What happens to a finished rollout before its rewards: the judge's verdict, the information gain of its turns and
their format check, filled in on the :class:`~.rewards.Episode`.

The trainer calls these every step (:meth:`~.igpo_trainer.IGPOTrainer.score_episodes`), and notebook 04's worked
example calls the same functions on a group of the run's own rollouts, so the example's rewards are the trainer's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..core.protocol import turn_format_errors
from ..judging.judge import JudgeFn, JudgeUnavailable
from .config import IGPOConfig
from .info_gain import compute_info_gains
from .rewards import Episode


def judge_episodes(judge: JudgeFn, episodes: Sequence[Episode], where: str = "") -> None:
    """The judge's verdict on each episode's final answer (``ep.judge_score``), one call per batch; the answers it
    failed on are asked once more (a transient failure), and any still unjudged raise :class:`JudgeUnavailable`
    (``where`` names the step in the message)."""
    asked = list(range(len(episodes)))
    scores = [math.nan] * len(episodes)
    for _attempt in range(2):
        got = judge(
            [episodes[i].question for i in asked],
            [episodes[i].prediction or "" for i in asked],
            [episodes[i].ground_truth for i in asked],
        )
        for i, s in zip(asked, got, strict=True):
            scores[i] = float(s)
        asked = [i for i in asked if math.isnan(scores[i])]
        if not asked:
            break
    if asked:  # an unjudged answer is neither right nor wrong: no outcome reward can be given for it
        raise JudgeUnavailable(
            f"the judge failed on {len(asked)} of {len(scores)} final answers{where}; "
            "RL does not train on unjudged answers. Fix the judge's endpoint and resume (the last checkpoint "
            "is kept), or set JUDGE_FALLBACK=offline."
        )
    for ep, score in zip(episodes, scores, strict=True):
        ep.judge_score = score


def ig_settings(cfg: IGPOConfig) -> dict:
    """How ``cfg`` scores information gain (type, pseudo answer, temperature, chunk size), for
    :func:`~.info_gain.compute_info_gain` / :func:`~.info_gain.compute_info_gains` beside a tool filter."""
    return dict(
        info_gain_type=cfg.info_gain_type,
        template=cfg.pseudo_answer,
        temperature=cfg.temperature,
        chunk_size=cfg.ig_chunk_size,
    )


def score_turns(policy, tokenizer, episodes: Sequence[Episode], cfg: IGPOConfig, decoder=None) -> None:
    """Fill each episode's ``info_gain`` / ``ig_values`` (the policy's belief in the ground truth after each turn,
    with ``cfg``'s tool filter, every episode of the batch at once) and ``format_errors`` (DR-Venus's turn check).
    ``decoder``: the cached decoder that generated the episodes on ``policy`` (its kept keys and values are read,
    not encoded again)."""
    gains = compute_info_gains(
        policy,
        tokenizer,
        [
            dict(
                input_ids=ep.input_ids,
                boundaries=ep.boundaries,
                tool_names=ep.tool_names,
                ground_truth=ep.ground_truth,
            )
            for ep in episodes
        ],
        tool_filter=cfg.ig_tool_filter,
        decoder=decoder,
        **ig_settings(cfg),
    )
    for ep, ig in zip(episodes, gains, strict=True):
        ep.info_gain, ep.ig_values = ig.gains, ig.values
        ep.format_errors = turn_format_errors(ep.turns)
