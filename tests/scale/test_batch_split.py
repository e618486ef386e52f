"""The SFT batch over processes: a profile's micro-batch that does not divide a process's share is lowered, so the
documented ``accelerate launch --config_file params/accelerate/ddp_cpu_2proc.yaml`` command runs params/smoke.yaml."""

from __future__ import annotations

import json

import pytest

from venus_utils.core.paths import REPO_ROOT
from venus_utils.sft.config import SFTConfig
from venus_utils.sft.trainer import batch_split

from .conftest import run_cli


@pytest.mark.parametrize(
    "global_batch, micro, processes, split, said",
    [
        (4, 4, 1, (4, 1), False),  # smoke, one process
        (4, 4, 2, (2, 1), True),  # smoke under ddp_cpu_2proc: 2 trajectories per process
        (32, 1, 8, (1, 4), False),  # paper: micro-batch 1 on 8 GPUs
        (12, 4, 2, (3, 2), True),  # 6 per process: 4 does not divide it, 3 does
        (8, 2, 2, (2, 2), False),
    ],
)
def test_batch_split(global_batch, micro, processes, split, said, capsys):
    cfg = SFTConfig(global_batch_size=global_batch, micro_batch_size=micro)
    assert batch_split(cfg, processes) == split
    micro_used, accumulation = split
    assert micro_used * accumulation * processes == global_batch
    out = capsys.readouterr().out
    assert ("using micro-batches of" in out) == said


def test_a_global_batch_that_does_not_split_over_the_processes_is_refused():
    with pytest.raises(ValueError, match="global_batch_size 4 does not split over 3 processes"):
        batch_split(SFTConfig(global_batch_size=4, micro_batch_size=1), 3)


def test_the_accelerate_cpu_file_documents_the_smoke_command():
    text = (REPO_ROOT / "params" / "accelerate" / "ddp_cpu_2proc.yaml").read_text()
    assert (
        "accelerate launch --config_file params/accelerate/ddp_cpu_2proc.yaml -m venus_utils.sft train "
        "--params params/smoke.yaml"
    ) in text


@pytest.mark.slow
def test_the_documented_ddp_command_runs_the_smoke_profile(micro_run, tmp_path):
    """The command of ddp_cpu_2proc.yaml with the smoke profile's own batch (4 = micro 4), on this test's run
    folder and with fewer steps."""
    out = tmp_path / "sft"
    res = run_cli(
        [
            "-m",
            "venus_utils.sft",
            "train",
            "--params",
            "params/smoke.yaml",
            "--run-dir",
            str(micro_run),
            "--out",
            str(out),
            "--set",
            "max_steps=2",
            "--set",
            "eval_steps=null",
        ],
        processes=2,
        timeout=600,
    )
    assert "using micro-batches of 2" in res.stdout + res.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["processes"] == 2 and summary["steps"] == 2
    assert (out / "model" / "model.safetensors").exists()
