"""A micro run folder with the outputs of stages 00 and 02 (tiny world, micro model, cleaned SFT data), and a
helper that runs a command line under ``accelerate launch --cpu``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from venus_utils.core.io import write_json
from venus_utils.core.paths import REPO_ROOT

PYTHON = sys.executable
ACCELERATE_CPU = REPO_ROOT / "params" / "accelerate" / "ddp_cpu_2proc.yaml"  # DDP over gloo on this machine


def build_micro_run(run_dir: Path) -> Path:
    """``00_setup`` (world, micro model) and ``02_turn_aware_resampling`` (train/val parquet) in ``run_dir``."""
    from venus_utils.data.clean import CleanConfig, run_clean
    from venus_utils.modeling import build_tiny_model
    from venus_utils.world import build_world

    setup = run_dir / "00_setup"
    build_world(setup / "world", seed=0, size="tiny", progress=False)
    build_tiny_model(setup / "tiny_model", setup / "world", size="micro", vocab_size=600)
    write_json(setup / "summary.json", {"stage": "00_setup"})
    data = run_dir / "02_turn_aware_resampling"
    run_clean(
        CleanConfig(
            input=setup / "world" / "trajectories",
            output_dir=data,
            judge="none",
            val_fraction=0.1,
            workers=1,
            progress=False,
            seed=0,
        )
    )
    write_json(data / "summary.json", {"stage": "02_turn_aware_resampling"})
    return run_dir


@pytest.fixture(scope="session")
def micro_run(tmp_path_factory) -> Path:
    return build_micro_run(tmp_path_factory.mktemp("scale") / "run")


def run_cli(args: list[str], processes: int = 1, timeout: float = 120.0) -> subprocess.CompletedProcess:
    """``python <args>`` (one process) or ``accelerate launch --config_file ddp_cpu_2proc.yaml <args>`` (DDP, gloo)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "PYTHONPATH": str(REPO_ROOT)}
    if processes > 1:
        cmd = [
            PYTHON,
            "-m",
            "accelerate.commands.launch",
            "--config_file",
            str(ACCELERATE_CPU),
            "--num_processes",
            str(processes),
            "--main_process_port",
            str(_free_port()),
            *args,
        ]
    else:
        cmd = [PYTHON, *args]
    res = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    if res.returncode:
        raise AssertionError(f"{' '.join(cmd)} failed ({res.returncode}):\n{res.stdout[-3000:]}\n{res.stderr[-6000:]}")
    return res


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
