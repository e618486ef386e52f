"""IGPO reinforcement learning with DR-Venus's turn-level rewards (notebook 04; arXiv 2604.19859).

- :mod:`.info_gain`: the per-turn information gain, KV-cache method and naive reference;
- :mod:`.format_penalty`: the turn format check and where its -1 goes;
- :mod:`.rewards`: :class:`Episode`, the default turn / outcome reward functions, reward placement;
- :mod:`.advantages`: :func:`compute_turn_advantages` (joint / separate / scaled_separate / raw_ig);
- :mod:`.loss`: the policy loss (PPO clip, k3 KL, token mean);
- :mod:`.rollout`: agent-loop rollouts as episodes, held-out accuracy;
- :mod:`.igpo_trainer`: :class:`~.igpo_trainer.IGPOTrainer` (a TRL ``GRPOTrainer`` subclass) and ``grpo_args``;
- :mod:`.scoring`: what a finished rollout gets before its rewards (the judge's verdict, IG, the format check);
- :mod:`.batch`: a step's batch (advantages over processes, ``group_signal``, dynamic sampling);
- :mod:`.policy`: the policy loaded (``load_policy``) and saved (``save_policy``); :mod:`.questions`: the RL questions;
- :mod:`.stage`: notebook 04's steps (resume, filter, train, save, held-out scores); :mod:`.worked_example`: its
  worked example (a group of rollouts, from information gain to advantages);
- :class:`IGPOConfig`: every knob, DR-Venus's values as defaults.

Torch / TRL are imported by the submodules that need them, not here (``IGPOTrainer``: import it from
:mod:`venus_utils.rl.igpo_trainer`).  The judge the trainer takes: :func:`venus_utils.judging.judge.judge_function`.
"""

from ..core.protocol import turn_format_error, turn_format_errors
from .advantages import compute_turn_advantages
from .config import IGPOConfig
from .format_penalty import apply_format_penalties
from .info_gain import compute_info_gain, turn_info_gains
from .rewards import (
    Episode,
    episode_from_messages,
    episode_rewards,
    igpo_outcome_reward,
    igpo_turn_reward,
    place_rewards,
)

__all__ = [
    "Episode",
    "IGPOConfig",
    "apply_format_penalties",
    "compute_info_gain",
    "compute_turn_advantages",
    "episode_from_messages",
    "episode_rewards",
    "igpo_outcome_reward",
    "igpo_turn_reward",
    "place_rewards",
    "turn_format_error",
    "turn_format_errors",
    "turn_info_gains",
]
