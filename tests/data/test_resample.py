"""Turn-aware resampling (DR-Venus's 1x / 2x / 5x by turn count) and the question-level train / validation split."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from venus_utils.data.resample import (
    ResamplePolicy,
    bucket_stats,
    permutation,
    plan,
    resample_table,
    split_groups,
    write_train_val,
)


def test_multipliers_at_the_thresholds():
    policy = ResamplePolicy()
    assert [policy.multiplier(t) for t in (1, 50, 51, 100, 101, 250)] == [1, 1, 2, 2, 5, 5]
    assert [policy.bucket(t) for t in (50, 51, 100, 101)] == ["0-50", "51-100", "51-100", ">100"]
    assert policy.labels() == ["0-50", "51-100", ">100"]
    with pytest.raises(ValueError):
        ResamplePolicy(short_max_turns=10, medium_max_turns=5)


def test_plan_contiguous_copies_then_seeded_permutation():
    turns = [50, 51, 100, 101]
    assert plan(turns, ResamplePolicy()) == [
        (0, 0),
        (1, 0),
        (1, 1),
        (2, 0),
        (2, 1),
        (3, 0),
        (3, 1),
        (3, 2),
        (3, 3),
        (3, 4),
    ]
    shuffled = plan(turns, ResamplePolicy(), shuffle=True, seed=42)
    assert shuffled == [plan(turns, ResamplePolicy())[j] for j in np.random.RandomState(42).permutation(10)]
    assert (
        shuffled
        == plan(turns, ResamplePolicy(), shuffle=True, seed=42)
        != plan(turns, ResamplePolicy(), shuffle=True, seed=1)
    )
    assert list(permutation(5, 3)) == list(np.random.RandomState(3).permutation(5))


def test_bucket_stats():
    assert bucket_stats([50, 51, 100, 101], ResamplePolicy()) == {
        "turn_buckets": {
            "original": {"0-50": 1, "51-100": 2, ">100": 1},
            "resampled": {"0-50": 1, "51-100": 4, ">100": 5},
        },
        "multiplier_distribution": {"1": 1, "2": 2, "5": 1},
    }


def test_split_groups_by_key():
    keys = ["a", "a", "b", "c", "c", "d", "e"]
    is_val = split_groups(keys, 0.4, seed=0)
    val_keys = {k for k, v in zip(keys, is_val) if v}
    assert len(val_keys) == 2 and all(v == (k in val_keys) for k, v in zip(keys, is_val))
    assert split_groups(keys, 0.4, seed=0) == is_val
    assert sum(split_groups(["a", "b"], 0.01, 0)) == 1 and sum(split_groups(["a"], 0.5, 0)) == 0
    assert not any(split_groups(keys, 0.0, 0))
    with pytest.raises(ValueError):
        split_groups(keys, 1.0, 0)


def test_resample_table_and_write_train_val(tmp_path):
    table = pa.table(
        {
            "question": ["q1", "q2", "q3", "q4"],
            "gt": ["a"] * 4,
            "_turns": [3, 60, 120, 4],
            "messages": [[{"role": "user", "content": "x"}]] * 4,
        }
    )
    out = resample_table(table, ResamplePolicy(), shuffle=False)
    assert out.column("question").to_pylist() == ["q1", "q2", "q2", "q3", "q3", "q3", "q3", "q3", "q4"]
    assert out.column("_sample_copy").to_pylist() == [0, 0, 1, 0, 1, 2, 3, 4, 0]
    counts = write_train_val(table, tmp_path, ResamplePolicy(), 0.25, seed=0)
    train, val = pq.read_table(tmp_path / "train.parquet"), pq.read_table(tmp_path / "val.parquet")
    assert train.column_names == ["question", "messages", "gt"] and val.num_rows == 1
    assert counts == {"train_rows": train.num_rows, "val_rows": 1, "train_questions": 3, "val_questions": 1}
    assert not set(train.column("question").to_pylist()) & set(val.column("question").to_pylist())
