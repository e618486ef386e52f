"""The environment files agree with each other (pyproject.toml, environment.yml, the locks)."""

from __future__ import annotations

import re
import tomllib

import yaml

from venus_utils.paths import REPO_ROOT

PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==([^\s;]+)")


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(lines) -> dict[str, str]:
    out = {}
    for line in lines:
        m = PIN.match(line.strip())
        if m:
            out[norm(m.group(1))] = m.group(2)
    return out


def pyproject_pins() -> dict[str, str]:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    return pins(project["dependencies"] + project["optional-dependencies"]["test"])


def test_environment_yml_matches_pyproject():
    env = yaml.safe_load((REPO_ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    assert pins(pip_section) == pyproject_pins()
    assert "-e ." in pip_section


def test_every_dependency_is_pinned_exactly():
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    loose = [d for d in project["dependencies"] if not PIN.match(d)]
    assert not loose, f"unpinned dependencies: {loose}"


def test_cpu_lock_contains_the_same_versions():
    lock = pins((REPO_ROOT / "requirements" / "cpu.lock").read_text().splitlines())
    for name, version in pyproject_pins().items():
        assert lock.get(name) == version, f"{name}: pyproject {version}, cpu.lock {lock.get(name)}"
    # no CUDA-only or GPU-extra packages in the default environment
    for gpu_only in ("vllm", "unsloth", "triton", "xformers", "bitsandbytes", "torchvision"):
        assert gpu_only not in lock


def test_gpu_and_unsloth_locks_are_consistent():
    gpu = pins((REPO_ROOT / "requirements" / "gpu.txt").read_text().splitlines())
    uns = pins((REPO_ROOT / "requirements" / "unsloth-cpu.txt").read_text().splitlines())
    # the version window the code must support (install.md): transformers 5.17-5.24, trl 1.15-1.16
    assert gpu["unsloth"] == uns["unsloth"] and gpu["trl"] == uns["trl"] == "1.15.0"
    assert gpu["transformers"] == uns["transformers"] == "5.17.0"
    assert uns["torch"] == "2.13.0" and "torchvision" not in uns
