"""Faults a long run meets: a damaged checkpoint (issue item 6), two runs on one folder (7), a full disk (8).

The SFT runs train the micro model for a few steps on the CPU (seconds); the lock tests start a second Python
process (and, for the pipeline, a Papermill kernel).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from venus_utils.core.checkpoints import checkpoints, is_complete, resume_point

from .conftest import micro_sft_config as _cfg

REPO = Path(__file__).resolve().parents[1]


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


# ----------------------------------------------------------------------------------------------------------------
# 6. a damaged checkpoint


def _old_checkpoint(folder: Path, step: int) -> Path:
    """A checkpoint as the Trainer writes it (weights in safetensors, optimizer with torch.save), without the
    manifest this code adds: what an older version of the recipe left."""
    import torch
    from safetensors.torch import save_file

    path = folder / f"checkpoint-{step}"
    path.mkdir(parents=True)
    save_file({"w": torch.randn(64, 64)}, str(path / "model.safetensors"))
    torch.save({"state": {0: {"exp_avg": torch.randn(64, 64)}}}, path / "optimizer.pt")
    (path / "config.json").write_text("{}")
    (path / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    return path


@pytest.mark.parametrize("damaged", ["model.safetensors", "optimizer.pt"])
def test_a_truncated_file_in_an_old_checkpoint_is_skipped_named_and_kept_aside(tmp_path, damaged):
    _old_checkpoint(tmp_path, 4)
    newest = _old_checkpoint(tmp_path, 8)
    _truncate(newest / damaged)
    assert not is_complete(newest) and [s for s, _ in checkpoints(tmp_path)] == [4]
    said = []
    point = resume_point(tmp_path, max_steps=20, log=said.append)
    assert point.step == 4 and point.checkpoint.endswith("checkpoint-4")
    (message,) = [s for s in said if "checkpoint-8" in s]
    assert damaged in message and "damaged" in message
    kept = tmp_path / "damaged" / "checkpoint-8"
    assert str(kept) in message and (kept / damaged).exists()  # moved aside, not deleted
    assert not newest.exists()


@pytest.mark.parametrize("damaged", ["model.safetensors", "optimizer.pt"])
def test_sft_resumes_from_the_newest_intact_checkpoint_when_the_newest_is_truncated(
    micro_model_dir, sft_rows, tmp_path, capsys, damaged
):
    from venus_utils.sft import train_sft

    train_sft(_cfg(max_steps=4), micro_model_dir, sft_rows, tmp_path)
    ckpts = tmp_path / "checkpoints"
    _truncate(ckpts / "checkpoint-4" / damaged)
    capsys.readouterr()
    resumed = train_sft(_cfg(max_steps=6), micro_model_dir, sft_rows, tmp_path)
    assert resumed.resumed_from.endswith("checkpoint-2") and resumed.steps == 6
    out = capsys.readouterr().out
    assert f"{ckpts / 'checkpoint-4'}" in out and damaged in out and "continuing from" in out
    assert (ckpts / "damaged" / "checkpoint-4" / damaged).exists()
    assert [s for s, _ in checkpoints(ckpts)] == [2, 4, 6] and all(is_complete(p) for _, p in checkpoints(ckpts))


def test_a_checkpoint_records_its_files_and_a_changed_byte_is_found(micro_model_dir, sft_rows, tmp_path):
    """The manifest written at save time: sizes and hashes of every file, so a same-size corruption is found too."""
    from venus_utils.sft import train_sft

    train_sft(_cfg(max_steps=2), micro_model_dir, sft_rows, tmp_path)
    ckpt = tmp_path / "checkpoints" / "checkpoint-2"
    manifest = json.loads((ckpt / "checkpoint_manifest.json").read_text())
    assert {"model.safetensors", "optimizer.pt", "trainer_state.json"} <= set(manifest["files"])
    assert is_complete(ckpt)
    weights = ckpt / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0xFF
    weights.write_bytes(bytes(data))
    assert not is_complete(ckpt)


# ----------------------------------------------------------------------------------------------------------------
# 7. one run per folder

HOLD_STAGES = """
import pathlib, sys, time
from venus_utils.core.stage import Stage
run_dir, ready = sys.argv[1], pathlib.Path(sys.argv[2])
for name in ("03_sft_unsloth", "04_igpo_rl"):
    Stage.start(name, run_dir)
ready.write_text("held")
time.sleep(300)
"""


def _wait_for(path: Path, proc: subprocess.Popen, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        if proc.poll() is not None:
            output = proc.stdout.read() if proc.stdout else ""
            raise AssertionError(f"the holding process ended ({proc.returncode}): {output[-3000:]}")
        assert time.monotonic() < deadline, "the holding process did not start"
        time.sleep(0.05)


def test_a_second_run_of_a_stage_is_refused_and_a_killed_runs_lock_is_cleared(
    micro_model_dir, sft_rows, tmp_path, capsys
):
    from venus_utils.core.stage import Stage
    from venus_utils.rl.config import IGPOConfig
    from venus_utils.rl.stage import resume
    from venus_utils.sft import train_sft

    run = tmp_path / "run"
    ready = tmp_path / "ready"
    proc = subprocess.Popen([sys.executable, "-c", HOLD_STAGES, str(run), str(ready)], cwd=REPO)
    try:
        _wait_for(ready, proc)
        sft_dir = run / "03_sft_unsloth"
        (sft_dir / "summary.json").write_text("{}")  # an earlier run's result
        t0 = time.monotonic()
        with pytest.raises(ValueError, match=rf"in use by .*\(pid {proc.pid}\)") as refused:
            Stage.start("03_sft_unsloth", run)
        assert time.monotonic() - t0 < 5, "refused at once"
        assert "started" in str(refused.value) and "wait for it to end" in str(refused.value).lower()
        with pytest.raises(ValueError, match=rf"pid {proc.pid}"):  # two trainers on the same checkpoints
            train_sft(_cfg(), micro_model_dir, sft_rows, sft_dir)
        with pytest.raises(ValueError, match=rf"pid {proc.pid}"):
            resume(Stage("04_igpo_rl", run), IGPOConfig(), micro_model_dir, [])
        assert (sft_dir / "summary.json").exists() and not (sft_dir / "checkpoints").exists()  # nothing touched
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    capsys.readouterr()
    stage = Stage.start("03_sft_unsloth", run)  # the killed run's lock is stale: cleared, and said so
    said = capsys.readouterr().out
    assert f"pid {proc.pid}" in said and "stale" in said
    stage.finish()
    again = Stage.start("03_sft_unsloth", run)  # released by finish(): nothing stale to report
    assert "stale" not in capsys.readouterr().out
    again.finish()


HOLDING_NB = (
    "import os, pathlib, time\n"
    "from venus_utils.core.stage import Stage\n"
    "stage = Stage.start(NAME, run_dir, stage_dir, profile)\n"
    "hold = os.environ.get('VENUS_TEST_HOLD')\n"
    "if hold:\n"
    "    pathlib.Path(hold + '.ready').write_text('running')\n"
    "    t0 = time.time()\n"
    "    while not os.path.exists(hold) and time.time() - t0 < 180:\n"
    "        time.sleep(0.1)\n"
    "stage.finish(value=value)\n"
)

PIPELINE = """
import sys
from venus_utils.run.pipeline import run_pipeline
run_pipeline(sys.argv[1], sys.argv[2], only=sys.argv[3], notebooks_dir=sys.argv[4], progress=False)
"""


def _notebook(path: Path, name: str) -> None:
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    cell = new_code_cell('run_dir = "runs/x"\nstage_dir = None\nprofile = "x"\nvalue = 1\n')
    cell.metadata["tags"] = ["parameters"]
    nb = new_notebook(cells=[cell, new_code_cell(HOLDING_NB.replace("NAME", repr(name)))])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


def test_a_second_pipeline_on_a_run_folder_is_refused_at_once_and_deletes_nothing(tmp_path):
    from venus_utils.run.pipeline import run_pipeline

    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    _notebook(nbs / "00_done.ipynb", "00_done")
    _notebook(nbs / "01_hold.ipynb", "01_hold")
    params = tmp_path / "p.yaml"
    params.write_text("profile: t\n")
    out = tmp_path / "runs"
    (out / "00_done").mkdir(parents=True)
    (out / "00_done" / "summary.json").write_text('{"stage": "00_done"}')  # a finished stage of this run
    hold = tmp_path / "hold"
    env = {**os.environ, "VENUS_TEST_HOLD": str(hold)}
    proc = subprocess.Popen(
        [sys.executable, "-c", PIPELINE, str(params), str(out), "01", str(nbs)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        _wait_for(Path(str(hold) + ".ready"), proc, 180)  # its kernel runs (and took the stage's lock)
        t0 = time.monotonic()
        with pytest.raises(ValueError, match=rf"in use by another pipeline run \(pid {proc.pid}\)") as refused:
            run_pipeline(params, out, notebooks_dir=nbs, progress=False)
        assert time.monotonic() - t0 < 10, "refused before any kernel started"
        assert "wait for it to end" in str(refused.value).lower()
        assert (out / "00_done" / "summary.json").read_text() == '{"stage": "00_done"}'  # nothing deleted
        hold.write_text("go")
        output, _ = proc.communicate(timeout=180)
        assert proc.returncode == 0, output[-3000:]  # the first run finished: its kernel was not refused
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    assert json.loads((out / "01_hold" / "summary.json").read_text())["stage"] == "01_hold"


# ----------------------------------------------------------------------------------------------------------------
# 8. a full disk


def _little_free(monkeypatch, free: int = 3 * 2**20) -> None:
    usage = shutil.disk_usage("/")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: type(usage)(usage.total, usage.total - free, free))


def test_a_checkpoint_save_on_a_full_disk_says_so_and_keeps_the_previous_checkpoint(
    micro_model_dir, sft_rows, tmp_path, monkeypatch
):
    import torch

    from venus_utils.sft import train_sft

    save = torch.save

    def full_disk_at_step_4(obj, f, *args, **kwargs):
        if "checkpoint-4" in str(f):
            raise RuntimeError("[enforce fail at inline_container.cc:626] . unexpected pos 576: basic_ios::clear")
        return save(obj, f, *args, **kwargs)

    monkeypatch.setattr(torch, "save", full_disk_at_step_4)
    _little_free(monkeypatch, free=200_000)
    with pytest.raises(OSError) as failed:
        train_sft(_cfg(max_steps=4), micro_model_dir, sft_rows, tmp_path)
    ckpts = tmp_path / "checkpoints"
    message = str(failed.value)
    assert failed.value.errno == errno.ENOSPC and "No space left on device" in message
    assert str(ckpts / "checkpoint-4") in message and " MB, 0.2 MB free" in message, message
    assert "basic_ios" not in message and "basic_ios::clear" in str(failed.value.__cause__)
    assert [s for s, _ in checkpoints(ckpts)] == [2] and is_complete(ckpts / "checkpoint-2")  # intact
    assert not (ckpts / ".saving").exists()  # the partial save went, giving its space back


def test_the_atomic_writers_explain_a_full_disk_and_leave_the_previous_version(tmp_path, monkeypatch):
    from venus_utils.core.io import atomic_dir, atomic_write

    model = tmp_path / "model"
    atomic_write(model / "weights.bin", b"x" * 5_000_000)
    _little_free(monkeypatch, free=100_000)
    with pytest.raises(OSError, match=r"No space left on device: saving .*model needs about 5\.0 MB, 0\.1 MB free"):
        with atomic_dir(model) as tmp:
            (tmp / "weights.bin").write_bytes(b"y" * 1000)
            raise RuntimeError("basic_ios::clear: iostream error")
    assert (model / "weights.bin").read_bytes() == b"x" * 5_000_000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]

    def no_space(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_text", no_space)
    with pytest.raises(OSError, match=r"No space left on device: saving .*summary\.json needs about") as failed:
        atomic_write(tmp_path / "summary.json", "{}")
    assert failed.value.errno == errno.ENOSPC and not list(tmp_path.glob(".summary.json.*"))


def test_errors_that_are_not_a_full_disk_are_not_rewritten(tmp_path, monkeypatch):
    from venus_utils.core.io import atomic_dir

    with pytest.raises(ValueError, match="^bad value$"):
        with atomic_dir(tmp_path / "a"):
            raise ValueError("bad value")
    with pytest.raises(RuntimeError, match="basic_ios::clear"):  # a stream error with plenty of space: not a full disk
        with atomic_dir(tmp_path / "b"):
            raise RuntimeError("basic_ios::clear: iostream error")
    _little_free(monkeypatch)
    with pytest.raises(PermissionError):  # an unrelated OSError, even on a nearly full disk
        with atomic_dir(tmp_path / "c"):
            raise PermissionError(errno.EACCES, "Permission denied")
