"""Turn-level IGPO advantages (DR-Venus ``grpo_info_gain``, ``RL/verl/trainer/ppo/info_gain_advantage.py``).

Input per sample ``i``: a sparse map ``rewards[i]`` from token position to reward.  The outcome sits at the
last token ``lengths[i] - 1`` (always a reward position, even when 0); every other non-zero entry is an
information-gain or format-penalty position (which is why an IG of exactly 0 is stored as 1e-10).

1. group statistics per group id, pooled over all positions of one kind (outcome / IG) of all its samples:
   mean and population std ``sqrt(var + 1e-8)``; std = 1 when the group has <= 1 such value;
2. normalise: ``joint`` z-scores outcome and IG together; ``separate`` z-scores each kind on its own;
   ``scaled_separate`` also rescales IG by ``min(10, max(0.3, mean|A_out|) / (mean|A_ig| + eps))`` over the
   batch; ``raw_ig`` divides IG by its std (no mean), adds the sample's normalised outcome to each IG
   position and forces gamma to 0;
3. discount backwards over the sorted reward positions ``A_k = Â_k + gamma * A_{k+1}`` and give every token of
   the segment ``(p_{k-1}, p_k]`` the value ``A_k`` (the first segment starts at token 0).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence

import numpy as np

from .config import NORM_MODES

ZERO_REWARD = 1e-10  # an IG of exactly 0 is stored as this, so its position still counts


def _group_stats(values: Mapping[Hashable, list[float]]) -> dict[Hashable, tuple[float, float]]:
    stats = {}
    for g, vals in values.items():
        arr = np.asarray(vals, dtype=np.float64)
        mean = float(arr.mean()) if arr.size else 0.0
        std = 1.0 if arr.size <= 1 else math.sqrt(float(((arr - mean) ** 2).mean()) + 1e-8)
        stats[g] = (mean, std)
    return stats


def _split(rewards, lengths) -> tuple[list[float], list[list[int]], list[list[float]]]:
    """Outcome value and IG positions/values of each sample, with input checks."""
    outcomes, ig_pos, ig_val = [], [], []
    for i, (r, n) in enumerate(zip(rewards, lengths)):
        n = int(n)
        if n < 0:
            raise ValueError(f"sample {i}: negative length {n}")
        pos, val = [], []
        for p, v in sorted(r.items()):
            p, v = int(p), float(v)
            if not 0 <= p < n:
                raise ValueError(f"sample {i}: reward position {p} outside its {n} tokens")
            if not math.isfinite(v):
                raise ValueError(f"sample {i}: reward at position {p} is {v} (rewards must be finite)")
            if p != n - 1 and v != 0.0:
                pos.append(p)
                val.append(v)
        outcomes.append(float(r.get(n - 1, 0.0)) if n else 0.0)
        ig_pos.append(pos)
        ig_val.append(val)
    return outcomes, ig_pos, ig_val


def compute_turn_advantages(
    rewards: Sequence[Mapping[int, float]],
    lengths: Sequence[int],
    group_ids: Sequence[Hashable],
    *,
    gamma: float = 0.95,
    mode: str = "scaled_separate",
    eps: float = 1e-6,
    stats: dict | None = None,
) -> list[list[float]]:
    """Per-token advantages of each sample (see the module docstring); ``stats`` (if given) gets diagnostics.

    A sample of length 0 (padding) gets an empty list and takes no part in the statistics.
    """
    if mode not in NORM_MODES:
        raise ValueError(f"mode must be one of {NORM_MODES}, got {mode!r}")
    if not len(rewards) == len(lengths) == len(group_ids):
        raise ValueError(
            f"rewards ({len(rewards)}), lengths ({len(lengths)}) and group_ids ({len(group_ids)}) "
            "must have one entry per sample"
        )
    outcomes, ig_pos, ig_val = _split(rewards, lengths)
    live = [i for i, n in enumerate(lengths) if n > 0]

    out_by_g, ig_by_g, all_by_g = defaultdict(list), defaultdict(list), defaultdict(list)
    for i in live:
        g = group_ids[i]
        out_by_g[g].append(outcomes[i])
        ig_by_g[g].extend(ig_val[i])
        all_by_g[g].extend([outcomes[i], *ig_val[i]])

    out_norm = [0.0] * len(lengths)
    ig_norm: list[list[float]] = [[] for _ in lengths]
    if mode == "joint":
        st = _group_stats(all_by_g)
        for i in live:
            m, s = st[group_ids[i]]
            out_norm[i] = (outcomes[i] - m) / (s + eps)
            ig_norm[i] = [(v - m) / (s + eps) for v in ig_val[i]]
    else:
        st_out, st_ig = _group_stats(out_by_g), _group_stats(ig_by_g)
        for i in live:
            m, s = st_out[group_ids[i]]
            out_norm[i] = (outcomes[i] - m) / (s + eps)
            m_ig, s_ig = st_ig[group_ids[i]]
            if mode == "raw_ig":
                ig_norm[i] = [v / (s_ig + eps) + out_norm[i] for v in ig_val[i]]
            else:
                ig_norm[i] = [(v - m_ig) / (s_ig + eps) for v in ig_val[i]]
        if mode == "scaled_separate":
            abs_out = [abs(out_norm[i]) for i in live]
            abs_ig = [abs(v) for i in live for v in ig_norm[i]]
            out_mean = max(0.3, float(np.mean(abs_out)) if abs_out else 1.0)
            ig_mean = float(np.mean(abs_ig)) if abs_ig else 1.0
            scale = min(10.0, out_mean / (ig_mean + eps))
            ig_norm = [[v * scale for v in row] for row in ig_norm]
            if stats is not None:
                stats["ig_scale"] = scale
    if mode == "raw_ig":
        gamma = 0.0

    advantages = []
    for i, n in enumerate(lengths):
        n = int(n)
        adv = np.zeros(n, dtype=np.float64)
        if n:
            positions = ig_pos[i] + [n - 1]
            values = ig_norm[i] + [out_norm[i]]
            running, start, segs = 0.0, 0, []
            for v in reversed(values):
                running = v + gamma * running
                segs.append(running)
            segs.reverse()
            for p, a in zip(positions, segs):
                adv[start : p + 1] = a
                start = p + 1
        advantages.append(adv.tolist())

    if stats is not None:
        stats.update(
            num_ig_positions=sum(len(ig_pos[i]) for i in live),
            num_samples=len(live),
            all_same_outcome_groups=sum(1 for g, v in out_by_g.items() if len(v) > 1 and len(set(v)) == 1),
            num_groups=len(out_by_g),
        )
    return advantages
