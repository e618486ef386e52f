"""Reliability, round 4: an exported model folder carries a hash manifest, checked wherever a model is loaded (a
damaged file is one line naming the folder and the file), its files have the documented mode, and ``--set-url``
checks the whole URL and writes all its files or none.  (A stopped ``rl arms``: ``tests/scale/test_rl_arms.py``; a
study missing an arm: ``tests/eval/test_study.py``.)"""

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


def test_a_checkpoint_s_files_get_the_documented_mode_too(tmp_path):
    from venus_utils.core.checkpoints import write_manifest

    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"x")
    weights.chmod(0o600)
    write_manifest(tmp_path)
    assert stat.S_IMODE(weights.stat().st_mode) == 0o666 & ~_umask()


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


# --- --set-url: the whole URL checked, all its files written or none -------------------------------------------------
@pytest.fixture()
def checkout(tmp_path):
    from venus_utils.core.paths import REPO_ROOT

    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO_ROOT / name, tmp_path / name)
    shutil.copytree(REPO_ROOT / "notebooks", tmp_path / "notebooks", ignore=shutil.ignore_patterns("runs", ".*"))
    return tmp_path


@pytest.mark.parametrize("name", [".git", ".", "..", "x.git.git", "..git"])
def test_set_url_refuses_a_name_github_cannot_have_before_writing_anything(checkout, name):
    from venus_utils.run import install

    before = {p: p.read_bytes() for p in checkout.rglob("*") if p.is_file()}
    with pytest.raises(ValueError, match="cannot be a GitHub repository's name|not a GitHub repository URL"):
        install.set_url(f"https://github.com/someone/{name}", checkout)
    assert {p: p.read_bytes() for p in before} == before
    assert install.disagreements(checkout) == []


def test_set_url_writes_all_its_files_or_none(checkout, monkeypatch):
    from venus_utils.run import install

    before = {p: p.read_bytes() for p in checkout.rglob("*") if p.is_file()}
    real, writes = install.atomic_write, []

    def failing(path, text):  # the disk fills up at the third file
        writes.append(path)
        if len(writes) == 3:
            raise OSError(28, "No space left on device")
        return real(path, text)

    monkeypatch.setattr(install, "atomic_write", failing)
    with pytest.raises(OSError, match="No space"):
        install.set_url("https://github.com/someone/venus-recipe", checkout)
    assert {p: p.read_bytes() for p in before} == before  # the two written first got their old text back
    assert install.disagreements(checkout) == []
    monkeypatch.setattr(install, "atomic_write", real)
    assert install.set_url("https://github.com/someone/venus-recipe.git/", checkout)
    assert install.repository_url(checkout) == "https://github.com/someone/venus-recipe"
    assert install.disagreements(checkout) == []
