"""benchmarks/gpu_check.py, the GPU check, in the parts that need no run: its wheels, its profile, its out folder.
Its run on the CPU (device falls back) is in tests/test_notebooks.py, over the smoke run made there."""

from __future__ import annotations

import importlib.util
import re

import pytest

from venus_utils.core.paths import PARAMS_DIR
from venus_utils.run import pipeline

ROOT = PARAMS_DIR.parent


def load_check():
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "benchmarks" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pins(path):
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#")[0].strip()
        if "==" in line:
            name, version = line.split("==")
            out[re.sub(r"[-_.]+", "-", name.lower())] = version
    return out


def test_the_carried_wheels_are_the_locked_versions():
    wheels, lock = pins(ROOT / "requirements" / "gpu-check-wheels.txt"), pins(ROOT / "requirements" / "cpu.lock")
    assert {"trl", "datasets", "papermill", "ipykernel"} <= set(wheels)
    assert {name: version for name, version in wheels.items() if lock.get(name) != version} == {}


def test_its_smoke_profile_differs_only_by_the_device_and_is_valid(tmp_path):
    gpu_check = load_check()
    path = gpu_check.smoke_profile(tmp_path, "cuda")
    added = set(path.read_text().splitlines()) - set((PARAMS_DIR / "smoke.yaml").read_text().splitlines())
    assert [line.split("#")[0].split() for line in added] == [["device:", "cuda"]]
    assert pipeline.main(["--params", str(path), "--check"]) == 0


def test_it_replaces_only_an_out_folder_it_made_and_keeps_the_last_one(tmp_path):
    gpu_check = load_check()
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "notes.txt").write_text("keep")
    with pytest.raises(gpu_check.CheckFailed, match="not made by the GPU check"):
        gpu_check.prepare_out(theirs)
    assert (theirs / "notes.txt").read_text() == "keep"
    ours = tmp_path / "ours"
    gpu_check.prepare_out(ours)
    (ours / "gpu_check.json").write_text("{}")
    gpu_check.prepare_out(ours)
    assert (tmp_path / "ours-previous" / "gpu_check.json").is_file() and not (ours / "gpu_check.json").exists()


def test_it_refuses_a_smoke_run_inside_the_folder_it_replaces_and_a_large_model_on_the_cpu(tmp_path, capsys):
    gpu_check = load_check()
    out = tmp_path / "check"
    inside = out / "smoke"
    for stage in ("00_setup", "02_turn_aware_resampling"):
        (inside / stage).mkdir(parents=True)
    with pytest.raises(SystemExit):
        gpu_check.main(["--out", str(out), "--smoke-run", str(inside), "--shape", "micro"])
    assert "inside --out" in capsys.readouterr().err
    if not __import__("torch").cuda.is_available():
        assert gpu_check.main(["--out", str(tmp_path / "c2"), "--smoke-run", str(inside), "--device", "cpu"]) == 1
        assert "596M model would take hours" in capsys.readouterr().err
        assert not (tmp_path / "c2").exists()  # refused before anything was made
