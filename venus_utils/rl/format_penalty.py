"""Where DR-Venus's format penalty goes (its ``info_gain_advantage.py``): a turn that breaks the protocol, by
:func:`venus_utils.core.protocol.turn_format_error` (DR-Venus's ``format_checker.py``, kept with the protocol), has its
IG entry *replaced* by the penalty (which creates a reward position even for a turn the tool filter skipped); a failing
final turn has its *outcome* replaced by the penalty.
"""

from __future__ import annotations

from collections.abc import Sequence


def apply_format_penalties(
    turn_rewards: Sequence[float | None], outcome: float, errors: Sequence[str | None], penalty: float = -1.0
) -> tuple[list[float | None], float]:
    """Replace the reward of each malformed turn by ``penalty``: DR-Venus's format penalty, implemented here only
    (:func:`~.rewards.igpo_turn_reward` and :func:`~.rewards.igpo_outcome_reward` apply it).

    ``turn_rewards`` has one entry per non-final turn (``len(errors) - 1``); ``errors[-1]`` is the final
    turn's, whose penalty replaces ``outcome``.
    """
    if len(turn_rewards) != max(0, len(errors) - 1):
        raise ValueError(f"{len(errors)} turns need {max(0, len(errors) - 1)} turn rewards, got {len(turn_rewards)}")
    rewards = [penalty if err else r for r, err in zip(turn_rewards, errors[:-1])]
    if errors and errors[-1]:
        outcome = penalty
    return rewards, outcome
