"""Issue 42: SIGTERM or SIGINT to a running pipeline ends every process the run started (the notebook's kernel, the
cleaner's process pool and its helpers), releases the locks, says so in one line and exits 128 + the signal."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from venus_utils.core.paths import REPO_ROOT


def _group_members(groups: set[int]) -> list[int]:
    alive = []
    for proc in psutil.process_iter(["pid", "status"]):
        try:
            if proc.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(proc.pid) in groups:
                alive.append(proc.pid)
        except (OSError, psutil.Error):
            continue
    return alive


@pytest.mark.parametrize("signum, status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_stops_every_process_of_the_run(tmp_path, signum, status):
    out = tmp_path / "run"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "venus_utils.run.pipeline", "--params", "params/smoke.yaml", "--out", str(out)]
    run = subprocess.Popen(
        [*cmd, "--only", "00,01"], cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        pipeline = psutil.Process(run.pid)
        deadline = time.monotonic() + 240
        started: list[psutil.Process] = []
        while time.monotonic() < deadline and run.poll() is None:
            started = pipeline.children(recursive=True)
            # stage 01 is running its cleaner pool: processes below the kernel (the forkserver and its workers)
            if (out / "01_trajectory_cleaning").is_dir() and sum(p.ppid() != run.pid for p in started) >= 2:
                break
            time.sleep(0.3)
        else:
            pytest.fail(f"stage 01 never started its worker processes: {run.communicate()[1][-2000:]}")
        groups = {os.getpgid(p.pid) for p in started} - {os.getpgid(run.pid)}
        assert groups, "the kernel runs in a process group of its own"
        run.send_signal(signum)
        stdout, stderr = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == status
    said = [line for line in stderr.splitlines() if line.startswith("pipeline stopped")]
    assert len(said) == 1 and signal.Signals(signum).name in said[0] and "--resume" in said[0]
    assert "Traceback" not in stderr, stderr[-3000:]
    time.sleep(0.5)
    assert not [p.pid for p in started if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not _group_members(groups)  # nothing of the kernel's group is left, pools included
    for lock in (
        out / ".venus.lock",
        out / "00_setup" / ".venus.lock",
        out / "01_trajectory_cleaning" / ".venus.lock",
    ):
        assert "released" in json.loads(lock.read_text()), lock
