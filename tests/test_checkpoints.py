"""Checkpoint bookkeeping shared by the SFT and RL stages (the trainers themselves are tested in tests/sft and
tests/rl)."""

import json

import pytest

from venus_utils.core.checkpoints import (
    checkpoint_problem,
    checkpoints,
    discard_incomplete,
    finished_checkpoint,
    guard_resume,
    is_complete,
    mark_finished,
    resume_point,
    write_manifest,
)


def _checkpoint(folder, step, complete=True):
    path = folder / f"checkpoint-{step}"
    path.mkdir(parents=True)
    (path / "config.json").write_text("{}")
    if complete:
        (path / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    return path


def test_guard_resume_refuses_checkpoints_made_with_other_settings(tmp_path):
    folder = tmp_path / "04_igpo_rl"
    guard_resume(folder, {"learning_rate": 5e-5, "questions": "600"})  # a first run records its settings
    _checkpoint(folder, 200)
    guard_resume(folder, {"learning_rate": 5e-5, "questions": "600"})  # the same settings: resuming is fine
    with pytest.raises(ValueError, match=r"other settings \(filter_samples: None -> 2, questions: '600' -> '239'\)"):
        guard_resume(folder, {"learning_rate": 5e-5, "questions": "239", "filter_samples": 2})
    assert json.loads((folder / "resume_settings.json").read_text())["questions"] == "600"  # kept for the old run
    discard_incomplete(folder)
    for _, ckpt in checkpoints(folder):
        import shutil

        shutil.rmtree(ckpt)
    guard_resume(folder, {"learning_rate": 1e-4})  # no checkpoints left: a new run starts and records its settings
    assert json.loads((folder / "resume_settings.json").read_text()) == {"learning_rate": 1e-4}


def test_guard_resume_reads_a_setting_added_later_as_its_default(tmp_path):
    folder = tmp_path / "04_igpo_rl"
    guard_resume(folder, {"learning_rate": 5e-5})  # a run made before dynamic_sampling existed
    _checkpoint(folder, 100)
    defaults = {"dynamic_sampling": False}
    guard_resume(folder, {"learning_rate": 5e-5, "dynamic_sampling": False}, defaults=defaults)  # made with it
    with pytest.raises(ValueError, match=r"dynamic_sampling: False -> True"):
        guard_resume(folder, {"learning_rate": 5e-5, "dynamic_sampling": True}, defaults=defaults)
    other = tmp_path / "other"
    guard_resume(other, {"learning_rate": 5e-5})
    _checkpoint(other, 1)
    with pytest.raises(ValueError, match=r"dynamic_sampling: None -> False"):  # without defaults: a change
        guard_resume(other, {"learning_rate": 5e-5, "dynamic_sampling": False})


def test_guard_resume_stores_paths_inside_the_run_folder_relative_to_it(tmp_path):
    run, moved = tmp_path / "run", tmp_path / "elsewhere"
    guard_resume(run / "04", {"sft_model": str(run / "03" / "model"), "base": "/models/qwen"}, root=run)
    stored = json.loads((run / "04" / "resume_settings.json").read_text())
    assert stored == {"sft_model": "<run>/03/model", "base": "/models/qwen"}
    _checkpoint(run / "04", 2)
    run.rename(moved)
    guard_resume(moved / "04", {"sft_model": str(moved / "03" / "model"), "base": "/models/qwen"}, root=moved)
    with pytest.raises(ValueError, match="base"):
        guard_resume(moved / "04", {"sft_model": str(moved / "03" / "model"), "base": "/models/other"}, root=moved)


def test_incomplete_checkpoints_are_skipped_reported_and_removed(tmp_path):
    _checkpoint(tmp_path, 4)
    partial = _checkpoint(tmp_path, 8, complete=False)
    torn = _checkpoint(tmp_path, 12)
    (torn / "trainer_state.json").write_text('{"global_st')  # a kill while the state file was written
    (tmp_path / ".saving" / "checkpoint-16").mkdir(parents=True)
    assert [s for s, _ in checkpoints(tmp_path)] == [4] and not is_complete(partial)
    said = []
    point = resume_point(tmp_path, max_steps=20, log=said.append)
    assert point.step == 4 and point.checkpoint.endswith("checkpoint-4") and not point.finished
    assert not partial.exists() and not torn.exists() and not (tmp_path / ".saving").exists()
    assert len(said) == 3 and all("interrupted" in s for s in said)


def test_a_run_is_finished_at_max_steps_or_when_recorded_under_the_same_limits(tmp_path):
    assert resume_point(tmp_path / "none", 10).checkpoint is None
    _checkpoint(tmp_path, 10)
    assert resume_point(tmp_path, 10).finished and not resume_point(tmp_path, 12).finished
    _checkpoint(tmp_path, 15)  # stopped by its time limit before max_steps
    limits = {"max_steps": 100, "max_time_minutes": 26.0}
    assert not resume_point(tmp_path, 100, limits).finished
    mark_finished(tmp_path, 15, limits)
    assert resume_point(tmp_path, 100, limits).finished
    assert not resume_point(tmp_path, 100, {**limits, "max_time_minutes": 40.0}).finished  # a bigger budget continues
    assert "already finished" in resume_point(tmp_path, 100, limits).describe(100)
    assert finished_checkpoint(tmp_path) == (15, tmp_path / "checkpoint-15")  # the one its model came from


def test_finished_checkpoint_says_when_no_run_finished_or_the_record_is_not_one(tmp_path):
    with pytest.raises(FileNotFoundError, match="finished.json missing"):
        finished_checkpoint(tmp_path)
    (tmp_path / "finished.json").write_text('{"limits": {}}')
    with pytest.raises(ValueError, match="not a finished-run record"):
        finished_checkpoint(tmp_path)


def test_the_manifest_finds_a_missing_truncated_or_changed_file(tmp_path, monkeypatch):
    import venus_utils.core.checkpoints as ck

    path = _checkpoint(tmp_path, 6)
    (path / "weights.bin").write_bytes(b"w" * 3000)
    (path / "big.bin").write_bytes(b"a" * 3000 + b"b" * 3000 + b"c" * 3000)
    monkeypatch.setattr(ck, "FULL_HASH_BYTES", 5000)  # big.bin: hashed by its ends only
    monkeypatch.setattr(ck, "EDGE_BYTES", 1000)
    write_manifest(path)
    assert checkpoint_problem(path) is None
    (path / "big.bin").write_bytes(b"a" * 3000 + b"X" * 3000 + b"c" * 3000)
    assert checkpoint_problem(path) is None  # a change inside a large file, same size: not looked for (said so)
    (path / "weights.bin").write_bytes(b"w" * 2999 + b"x")
    assert "weights.bin: its content changed" in checkpoint_problem(path)
    (path / "weights.bin").write_bytes(b"w" * 1500)
    assert checkpoint_problem(path) == "weights.bin: 1500 bytes, 3000 when saved (truncated)"
    (path / "weights.bin").unlink()
    assert checkpoint_problem(path) == "weights.bin: missing (saved with 3000 bytes)"
    said = []
    assert resume_point(tmp_path, 10, log=said.append).checkpoint is None
    assert (tmp_path / "damaged" / "checkpoint-6").is_dir() and "weights.bin: missing" in said[0]


def test_the_training_clock_reads_what_a_checkpoint_recorded_and_nothing_it_did_not(tmp_path):
    """A resumed run's training time is its checkpoint's clock plus the call's; a checkpoint of older code (no
    clock), a damaged or negative record, is unknown (None), never 0."""
    import time

    from venus_utils.core.checkpoints import TRAIN_CLOCK, TrainClock, read_train_clock, write_train_clock

    assert read_train_clock(None) == 0.0  # training from the start
    ckpt = _checkpoint(tmp_path, 2)
    assert read_train_clock(ckpt) is None  # older code recorded none
    write_train_clock(ckpt, 12.5)
    assert read_train_clock(ckpt) == 12.5
    clock = TrainClock(read_train_clock(ckpt))
    time.sleep(0.01)
    assert clock.seconds() > 12.5
    assert TrainClock(None).seconds() is None
    for bad in ('{"train_wall_s": -1}', '{"train_wall_s": "7"}', "[1]", "{not json"):
        (ckpt / TRAIN_CLOCK).write_text(bad, encoding="utf-8")
        assert read_train_clock(ckpt) is None, bad
