"""Reliability, round 4: an exported model folder carries a hash manifest, checked wherever a model is loaded (a
damaged file is one line naming the folder and the file), and its files have the documented mode.  (A stopped
``rl arms``: ``tests/scale/test_rl_arms.py``; a study missing an arm: ``tests/eval/test_study.py``; ``--set-url``:
``tests/test_environment.py``.)"""

from __future__ import annotations

import json
import os
import shutil
import stat

import pytest

from venus_utils.core.checkpoints import MODEL_MANIFEST, DamagedModel, check_model, model_problem


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from venus_utils.world import build_world

    out = tmp_path_factory.mktemp("world")
    build_world(out, seed=0, size="tiny", progress=False)
    return out


@pytest.fixture(scope="module")
def sealed(tmp_path_factory, world):
    from venus_utils.modeling import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("model") / "model", world, size="micro", vocab_size=400)


@pytest.fixture()
def model(sealed, tmp_path):
    out = tmp_path / "model"
    shutil.copytree(sealed, out)
    return out


def test_an_exported_model_carries_its_manifest_with_the_documented_modes(sealed):
    manifest = json.loads((sealed / MODEL_MANIFEST).read_text())
    assert "model.safetensors" in manifest["files"] and "config.json" in manifest["files"]
    assert check_model(sealed) == sealed and model_problem(sealed) is None
    expected = 0o666 & ~_umask()
    modes = {f.name: stat.S_IMODE(f.stat().st_mode) for f in sealed.iterdir() if f.is_file()}
    assert modes and set(modes.values()) == {expected}, modes  # safetensors had written its weights 0600


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _truncate(model):
    weights = model / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-1000])


def _overwrite(model):  # the same size, other bytes: loads silently without the manifest
    weights = model / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-4000:-2000] = bytes(2000)
    weights.write_bytes(bytes(data))


@pytest.mark.parametrize("damage, said", [(_truncate, "truncated"), (_overwrite, "hash differs")])
def test_a_damaged_model_is_named_wherever_it_is_loaded(model, world, capsys, damage, said):
    damage(model)
    with pytest.raises(DamagedModel, match=rf"^{model}: damaged model folder: model.safetensors: .*{said}"):
        check_model(model)
    from venus_utils.agent.backends import load_pretrained
    from venus_utils.rl.policy import load_policy

    for load in (load_pretrained, load_policy):  # the agent, the demo and notebooks 05/06; the RL stage
        with pytest.raises(DamagedModel, match="model.safetensors"):
            load(model)
    from venus_utils.agent.__main__ import main as agent_main

    with pytest.raises(SystemExit) as exit_info:
        agent_main(["ask", "Where?", "--model", str(model), "--world", str(world)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "Traceback" not in "\n".join(err) and str(model) in err[-1] and "model.safetensors" in err[-1]
    from venus_utils.eval.__main__ import main as eval_main

    assert eval_main(["validate", "--model", str(model), "--world", str(world), "--n", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(model) in err[0] and "model.safetensors" in err[0]


def test_the_sft_stage_checks_its_starting_model(model):
    from venus_utils.sft.config import SFTConfig
    from venus_utils.sft.trainer import load_model

    _truncate(model)
    with pytest.raises(DamagedModel, match="model.safetensors"):
        load_model(model, SFTConfig(), "trl")


def test_a_model_without_a_manifest_is_checked_by_its_format(model):
    (model / MODEL_MANIFEST).unlink()  # an export of older code, or a downloaded model
    assert model_problem(model) is None
    _truncate(model)
    assert "model.safetensors" in model_problem(model) and "truncated" in model_problem(model)
