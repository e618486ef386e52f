"""The environment files agree with each other: pyproject.toml gives ranges, the locks (requirements/*.lock,
requirements/*.txt, environment.yml) give exact versions, and every locked version lies inside its range."""

from __future__ import annotations

import re
import tomllib

import pytest
import yaml
from packaging.requirements import Requirement

from venus_utils.core.paths import REPO_ROOT

PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==([^\s;]+)")
LOCKS = ["requirements/cpu.lock", "requirements/gpu.txt", "requirements/unsloth-cpu.txt"]


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(lines) -> dict[str, str]:
    out = {}
    for line in lines:
        m = PIN.match(line.strip())
        if m:
            out[norm(m.group(1))] = m.group(2)
    return out


def project() -> dict:
    return tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]


def requirements(*extras: str) -> dict[str, Requirement]:
    """pyproject's dependencies (plus the named extras) by normalised name."""
    proj = project()
    lines = proj["dependencies"] + [r for e in extras for r in proj["optional-dependencies"][e]]
    return {norm(r.name): r for r in map(Requirement, lines)}


def lock(path: str) -> dict[str, str]:
    return pins((REPO_ROOT / path).read_text().splitlines())


def environment_yml_pins() -> dict[str, str]:
    env = yaml.safe_load((REPO_ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    assert "-e ." in pip_section
    return pins(pip_section)


def test_dependencies_are_ranges_with_a_floor():
    """No exact pin (it would replace a hosted runtime's torch or transformers); every package has a lower bound."""
    for extra in [None, *project()["optional-dependencies"]]:
        reqs = requirements(extra) if extra else requirements()
        for name, req in reqs.items():
            ops = {s.operator for s in req.specifier}
            assert "==" not in ops and "===" not in ops, f"{name} is pinned exactly: {req}"
            assert ops & {">=", ">", "~="}, f"{name} has no lower bound: {req}"


def test_torch_range_keeps_the_runtimes_torch():
    torch = requirements("colab")["torch"]
    for version in ("2.6.0", "2.8.0", "2.9.1", "2.13.0", "2.14.0"):
        assert torch.specifier.contains(version), f"{torch} would replace a runtime's torch {version}"


@pytest.mark.parametrize("path", LOCKS)
def test_every_lock_lies_inside_the_ranges(path):
    """Each lock is a verified environment of this project: its versions must satisfy pyproject's ranges (the
    default dependencies, the test extra and, for the GPU locks, the extras they install)."""
    pinned = lock(path)
    reqs = requirements("test", "gpu") if path.endswith("gpu.txt") else requirements("test", "colab")
    checked = 0
    for name, req in reqs.items():
        if name in pinned:
            checked += 1
            version = pinned[name]
            assert req.specifier.contains(version, prereleases=True), f"{path}: {name}=={version} not in {req}"
    assert checked >= 10


def test_cpu_lock_holds_every_dependency():
    """`make` installs pyproject with `-c requirements/cpu.lock`: every dependency must be pinned there, so the
    default environment stays exactly the verified one."""
    pinned = lock("requirements/cpu.lock")
    missing = sorted(set(requirements("test")) - set(pinned))
    assert not missing, f"not in cpu.lock: {missing}"
    # no CUDA-only or GPU-extra packages in the default environment
    for gpu_only in ("vllm", "unsloth", "triton", "xformers", "bitsandbytes", "torchvision"):
        assert gpu_only not in pinned


def test_environment_yml_matches_the_cpu_lock():
    """environment.yml pins the direct dependencies (and the test extra) to the cpu.lock versions."""
    env = environment_yml_pins()
    pinned = lock("requirements/cpu.lock")
    assert set(env) == set(requirements("test"))
    for name, version in env.items():
        assert pinned[name] == version, f"{name}: environment.yml {version}, cpu.lock {pinned[name]}"


def test_gpu_and_unsloth_locks_are_consistent():
    gpu = lock("requirements/gpu.txt")
    uns = lock("requirements/unsloth-cpu.txt")
    # the version window the code must support (docs/scaling.md, "Environments"): transformers 5.17-5.24,
    # trl 1.15-1.16;
    # Unsloth caps them at 5.17 / 1.15, so the GPU and Unsloth locks sit at the bottom of the window
    assert gpu["unsloth"] == uns["unsloth"] and gpu["trl"] == uns["trl"] == "1.15.0"
    assert gpu["transformers"] == uns["transformers"] == "5.17.0"
    assert uns["torch"] == "2.13.0" and "torchvision" not in uns
