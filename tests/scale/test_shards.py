"""The cleaner and the evaluation split into shards and merged: the merged statistics equal a single run's."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from venus_utils.data.clean import CleanConfig, diff_outputs, run_clean
from venus_utils.data.clean import main as clean_main
from venus_utils.data.clean.shards import merge_shards

RUN_ONLY = ("timings_s", "workers", "output_dir", "artifacts", "shards")  # paths, timings, process counts


def _cfg(world, out, **kw):
    return CleanConfig(
        input=world / "trajectories",
        output_dir=out,
        judge="offline",
        val_fraction=0.1,
        seed=3,
        tokenizer=world.parent / "tiny_model",
        max_tokens=3000,
        workers=1,
        progress=False,
        batch_rows=16,
        keep_metadata=True,
        **kw,
    )


def test_sharded_cleaning_merges_into_the_single_run(micro_run, tmp_path):
    world = micro_run / "00_setup" / "world"
    single = run_clean(_cfg(world, tmp_path / "single"))
    shards = [run_clean(_cfg(world, tmp_path / f"shard{i}", shard=(i, 3))) for i in range(3)]
    assert sum(s["rows"] for s in shards) == single["rows"]["source"] and shards[0]["tasks_total"] == 17
    merged = merge_shards(_cfg(world, tmp_path / "merged"), [tmp_path / f"shard{i}" for i in (2, 0, 1)])
    assert {k: v for k, v in merged.items() if k not in RUN_ONLY} == {
        k: v for k, v in single.items() if k not in RUN_ONLY
    }
    assert single["drop_reasons"].get("too_long") and single["drop_reasons"].get("incorrect_answer")  # filters ran
    files = ("cleaned_resampled.parquet", "train.parquet", "val.parquet")
    assert diff_outputs(tmp_path / "single", tmp_path / "merged", files) == []


def test_merge_refuses_missing_or_mismatched_shards(micro_run, tmp_path, capsys):
    world = micro_run / "00_setup" / "world"
    for i in range(2):
        assert (
            clean_main(
                [
                    "-i",
                    str(world / "trajectories"),
                    "-o",
                    str(tmp_path / f"s{i}"),
                    "--shard",
                    f"{i}/2",
                    "--judge",
                    "none",
                    "--workers",
                    "1",
                    "--quiet",
                ]
            )
            == 0
        )
    with pytest.raises(ValueError, match="exactly once"):
        merge_shards(
            CleanConfig(input=world, output_dir=tmp_path / "m", judge="none", progress=False), [tmp_path / "s0"]
        )
    with pytest.raises(ValueError, match="batch_rows"):
        merge_shards(
            CleanConfig(input=world, output_dir=tmp_path / "m", judge="none", progress=False, batch_rows=8),
            [tmp_path / "s0", tmp_path / "s1"],
        )
    assert (
        clean_main(
            [
                "-o",
                str(tmp_path / "m"),
                "--merge-shards",
                str(tmp_path / "s1"),
                str(tmp_path / "s0"),
                "--judge",
                "none",
                "--quiet",
            ]
        )
        == 0
    )
    stats = json.loads((tmp_path / "m" / "stats.json").read_text())
    assert stats["rows"]["source"] == 270 and stats["rows"]["source"] == stats["rows"]["kept"] + sum(
        stats["drop_reasons"].values()
    )
    assert clean_main(["-o", str(tmp_path / "x"), "--shard", "2/2", "-i", str(world)]) == 2
    assert "--shard" in capsys.readouterr().err


def _predictions(n_questions=30, samples=4, seed=0):
    import numpy as np

    rng = np.random.default_rng(seed)
    rows = []
    for q in range(n_questions):
        for s in range(samples):
            right = rng.random() < 0.4
            rows.append(
                {
                    "id": f"q{q:03d}",
                    "question": f"question {q}?",
                    "sample": s,
                    "source": f"src{q % 3}",
                    "answer": f"answer {q}",
                    "prediction": f"answer {q}" if right else f"answer {q} or {s}",
                    "turns": int(rng.integers(1, 9)),
                    "tool_call_count": int(rng.integers(0, 8)),
                    "termination": "answered" if rng.random() < 0.8 else "max_turns",
                }
            )
    return pd.DataFrame(rows).sample(frac=1.0, random_state=seed).reset_index(drop=True)  # workers' finishing order


def test_sharded_evaluation_merges_into_the_single_run():
    from venus_utils.eval import metrics

    judge = lambda q, p, a: [float(x == y) for x, y in zip(p, a)]  # noqa: E731
    preds = _predictions()
    single = metrics.canonical_order(metrics.score(preds, judge=judge))
    shards = [metrics.shard_questions(preds, f"{i}/4") for i in range(4)]
    assert sum(len(s) for s in shards) == len(preds)
    assert all(s.groupby("id").size().eq(4).all() for s in shards)  # a question's samples stay together
    merged = metrics.merge_scored(metrics.score(s, judge=judge) for s in reversed(shards))
    pd.testing.assert_frame_equal(merged, single, check_exact=True)
    assert metrics.summarize(merged) == metrics.summarize(single)
    for table in (metrics.accuracy_by_source, metrics.pass_at_k_curve, metrics.question_counts):
        pd.testing.assert_frame_equal(table(merged), table(single), check_exact=True)
    assert 0 < metrics.summarize(merged)["accuracy"] < 1
    with pytest.raises(ValueError, match="more than one shard"):
        metrics.merge_scored([shards[0], shards[0]])
    with pytest.raises(ValueError, match="I/N"):
        metrics.shard_questions(preds, "4")
