"""Turn-level IGPO advantages (DR-Venus ``grpo_info_gain``, ``RL/verl/trainer/ppo/info_gain_advantage.py``).

Input per sample ``i``: a sparse map ``rewards[i]`` from token position to reward.  The outcome sits at the
last token ``lengths[i] - 1`` (always a reward position, even when 0); every other non-zero entry is an
information-gain or format-penalty position (which is why an IG of exactly 0 is stored as 1e-10).

1. group statistics per group id, pooled over all positions of one kind (outcome / IG) of all its samples:
   mean and population std ``sqrt(var + 1e-8)``; std = 1 when the group has <= 1 such value;
2. normalise: ``joint`` z-scores outcome and IG together; ``separate`` z-scores each kind on its own;
   ``scaled_separate`` also rescales IG by ``min(10, max(0.3, mean|A_out|) / (mean|A_ig| + eps))`` over the
   batch; ``raw_ig`` divides IG by its std (no mean), adds the sample's normalised outcome to each IG
   position and forces gamma to 0; with ``ig_kinds`` (a key per IG position, e.g. the tool its turn called) the
   IG statistics are taken per group and kind (``IGPOConfig.ig_norm = "tool"``: a visit against the group's
   visits);
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


def _discounted(n: int, positions: list[int], values: list[float], gamma: float) -> list[float]:
    """Per-token advantages of one sample of ``n`` tokens: ``A_k = value_k + gamma * A_{k+1}`` over its sorted reward
    positions, each value given to the tokens of its segment ``(p_{k-1}, p_k]``."""
    adv = np.zeros(n, dtype=np.float64)
    running, segs = 0.0, []
    for v in reversed(values):
        running = v + gamma * running
        segs.append(running)
    start = 0
    for p, a in zip(positions, reversed(segs)):
        adv[start : p + 1] = a
        start = p + 1
    return adv.tolist()


def compute_turn_advantages(
    rewards: Sequence[Mapping[int, float]],
    lengths: Sequence[int],
    group_ids: Sequence[Hashable],
    *,
    gamma: float = 0.95,
    mode: str = "scaled_separate",
    eps: float = 1e-6,
    stats: dict | None = None,
    ig_kinds: Sequence[Sequence[Hashable]] | None = None,
) -> list[list[float]]:
    """Per-token advantages of each sample (see the module docstring); ``stats`` (if given) gets diagnostics.

    A sample of length 0 (padding) gets an empty list and takes no part in the statistics.  ``ig_kinds``: per
    sample, a key for each of its IG positions in position order; IG is then normalised per (group, key).
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
    if ig_kinds is not None:
        if mode not in ("separate", "scaled_separate"):
            raise ValueError(f"ig_kinds normalise IG on its own: mode separate or scaled_separate, not {mode!r}")
        if len(ig_kinds) != len(lengths) or any(len(ig_kinds[i]) != len(ig_pos[i]) for i in live):
            raise ValueError("ig_kinds needs one key per IG position of every sample")
    kind = (lambda i, k: (group_ids[i], ig_kinds[i][k])) if ig_kinds is not None else (lambda i, k: group_ids[i])

    out_by_g, ig_by_g, all_by_g = defaultdict(list), defaultdict(list), defaultdict(list)
    for i in live:
        g = group_ids[i]
        out_by_g[g].append(outcomes[i])
        for k, v in enumerate(ig_val[i]):
            ig_by_g[kind(i, k)].append(v)
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
            if mode == "raw_ig":
                s_ig = st_ig[group_ids[i]][1] if ig_val[i] else 1.0
                ig_norm[i] = [v / (s_ig + eps) + out_norm[i] for v in ig_val[i]]
            else:
                ig_norm[i] = [
                    (v - st_ig[kind(i, k)][0]) / (st_ig[kind(i, k)][1] + eps) for k, v in enumerate(ig_val[i])
                ]
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

    advantages = [
        _discounted(int(n), ig_pos[i] + [int(n) - 1], ig_norm[i] + [out_norm[i]], gamma) if n else []
        for i, n in enumerate(lengths)
    ]

    if stats is not None:
        stats.update(
            num_ig_positions=sum(len(ig_pos[i]) for i in live),
            num_samples=len(live),
            all_same_outcome_groups=sum(1 for g, v in out_by_g.items() if len(v) > 1 and len(set(v)) == 1),
            num_groups=len(out_by_g),
        )
    return advantages
