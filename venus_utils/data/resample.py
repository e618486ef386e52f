"""Turn-aware resampling and the train / validation split (DR-Venus's ``prepare_trajectories.py``, stage 4).

DR-Venus repeats long trajectories so that the model sees more long-horizon behaviour: a row with
``turns = floor((len(messages) - 1) / 2)`` is emitted 1x when turns <= 50, 2x when 50 < turns <= 100 and
5x above (all configurable), copies contiguous in source order, then optionally shuffled with a seeded
full permutation (identical to ``DataFrame.sample(frac=1, random_state=seed)``).

The split is drawn over *questions* before resampling, so the copies of one trajectory never end up on
both sides and validation rows are not repeated.  DR-Venus writes no validation split (its training script
then validates on the training file), and shuffles only with ``--shuffle``: verl's sampler keeps the file's
order, so without it the 2x / 5x copies of a trajectory are trained on back to back.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..core.io import atomic_path
from ..core.protocol import DATA_SEED


@dataclass
class ResamplePolicy:
    """Bucket thresholds and multipliers; defaults are DR-Venus's (``prepare_trajectories.py``)."""

    short_max_turns: int = 50  # turns <= this: short bucket
    medium_max_turns: int = 100  # short < turns <= this: medium bucket; above: long bucket
    short_multiplier: int = 1
    medium_multiplier: int = 2
    long_multiplier: int = 5

    def __post_init__(self):
        if self.medium_max_turns < self.short_max_turns:
            raise ValueError(f"medium_max_turns ({self.medium_max_turns}) < short_max_turns ({self.short_max_turns})")
        for name in ("short_multiplier", "medium_multiplier", "long_multiplier"):
            if int(getattr(self, name)) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")

    def multiplier(self, turns: int) -> int:
        if turns <= self.short_max_turns:
            return self.short_multiplier
        if turns <= self.medium_max_turns:
            return self.medium_multiplier
        return self.long_multiplier

    def bucket(self, turns: int) -> str:
        if turns <= self.short_max_turns:
            return f"0-{self.short_max_turns}"
        if turns <= self.medium_max_turns:
            return f"{self.short_max_turns + 1}-{self.medium_max_turns}"
        return f">{self.medium_max_turns}"

    def labels(self) -> list[str]:
        return [
            f"0-{self.short_max_turns}",
            f"{self.short_max_turns + 1}-{self.medium_max_turns}",
            f">{self.medium_max_turns}",
        ]

    def as_dict(self) -> dict:
        return asdict(self)


def permutation(n: int, seed: int) -> np.ndarray:
    """pandas ``sample(frac=1, random_state=seed)`` order: ``RandomState(seed).permutation(n)``."""
    return np.random.RandomState(seed).permutation(n)


def plan(
    turns: Sequence[int], policy: ResamplePolicy, shuffle: bool = False, seed: int = DATA_SEED
) -> list[tuple[int, int]]:
    """Output order as (row index, copy number) pairs: copies contiguous in source order, then shuffled."""
    order = [(i, c) for i, t in enumerate(turns) for c in range(policy.multiplier(int(t)))]
    if shuffle and order:
        order = [order[j] for j in permutation(len(order), seed)]
    return order


def bucket_stats(turns: Sequence[int], policy: ResamplePolicy) -> dict:
    """``turn_buckets`` {original, resampled} and ``multiplier_distribution`` as in DR-Venus's stats.json."""
    original: Counter = Counter()
    resampled: Counter = Counter()
    multipliers: Counter = Counter()
    for t in turns:
        m = policy.multiplier(int(t))
        b = policy.bucket(int(t))
        original[b] += 1
        multipliers[str(m)] += 1
        if m:
            resampled[b] += m
    return {
        "turn_buckets": {"original": dict(original), "resampled": dict(resampled)},
        "multiplier_distribution": dict(multipliers),
    }


def split_groups(keys: Sequence[Hashable], val_fraction: float, seed: int) -> list[bool]:
    """``is_val`` per row: whole groups (same key, e.g. question) go to validation, seeded.

    ``round(val_fraction * groups)`` groups, at least one when ``val_fraction > 0`` and there are two or more
    groups, never all of them.
    """
    if not 0 <= val_fraction < 1:
        raise ValueError(f"val_fraction must be in [0, 1), got {val_fraction}")
    groups = list(dict.fromkeys(keys))
    n_val = int(round(val_fraction * len(groups)))
    if val_fraction > 0 and len(groups) >= 2:
        n_val = min(max(n_val, 1), len(groups) - 1)
    else:
        n_val = 0
    chosen = set()
    if n_val:
        order = np.random.RandomState(seed).permutation(len(groups))
        chosen = {groups[j] for j in order[:n_val]}
    return [k in chosen for k in keys]


def resample_table(
    table, policy: ResamplePolicy, shuffle: bool = True, seed: int = DATA_SEED, turns_column: str = "_turns"
):
    """A pyarrow table resampled by its turn counts, with ``_resample_multiplier`` / ``_sample_copy``.

    ``turns_column`` is used when present; otherwise turns are computed from ``messages``.
    """
    if turns_column in table.column_names:
        turns = table.column(turns_column).to_pylist()
    else:
        turns = [max(len(m) - 1, 0) // 2 for m in table.column("messages").to_pylist()]
    order = plan(turns, policy, shuffle, seed)
    out = table.take(pa.array([i for i, _ in order], type=pa.int64()))
    mult = [policy.multiplier(int(turns[i])) for i, _ in order]
    out = out.drop_columns([c for c in ("_resample_multiplier", "_sample_copy") if c in out.column_names])
    out = out.append_column("_resample_multiplier", pa.array(mult, type=pa.int64()))
    return out.append_column("_sample_copy", pa.array([c for _, c in order], type=pa.int64()))


def split_and_resample(
    table,
    policy: ResamplePolicy,
    val_fraction: float,
    seed: int = DATA_SEED,
    shuffle: bool = True,
    key: str = "question",
):
    """(train, val): split by ``key`` groups, resample the training side only, shuffle both when asked."""
    is_val = split_groups(table.column(key).to_pylist(), val_fraction, seed)
    val_idx = [i for i, v in enumerate(is_val) if v]
    train_idx = [i for i, v in enumerate(is_val) if not v]
    train = resample_table(table.take(pa.array(train_idx, type=pa.int64())), policy, shuffle, seed)
    val = table.take(pa.array(val_idx, type=pa.int64()))
    if shuffle and val.num_rows:
        val = val.take(pa.array(permutation(val.num_rows, seed), type=pa.int64()))
    return train, val


def write_train_val(
    table,
    out_dir,
    policy: ResamplePolicy,
    val_fraction: float,
    seed: int = DATA_SEED,
    shuffle: bool = True,
    columns: tuple[str, ...] = ("question", "messages", "gt"),
) -> dict:
    """Split ``table`` by question, resample the training side and write ``train.parquet`` / ``val.parquet``.

    Only ``columns`` are written (what verl's and TRL's multi-turn SFT datasets read).  Returns row counts.
    """

    train, val = split_and_resample(table, policy, val_fraction, seed, shuffle)
    out_dir = Path(out_dir)
    for name, part in (("train", train), ("val", val)):
        with atomic_path(out_dir / f"{name}.parquet") as tmp:
            pq.write_table(part.select(list(columns)), tmp, row_group_size=64)
    return {
        "train_rows": train.num_rows,
        "val_rows": val.num_rows,
        "train_questions": len(set(train.column("question").to_pylist())),
        "val_questions": len(set(val.column("question").to_pylist())),
    }
