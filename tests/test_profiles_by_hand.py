"""Notebooks run by hand: a profile's values through ``apply_profile`` (Papermill's injected values win), and run
folders that do not depend on the folder the kernel started in."""

from __future__ import annotations

import json

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from venus_utils.core import paths
from venus_utils.core.profiles import (
    PIPELINE_ONLY,
    ConfigError,
    load_profile,
    notebook_defaults,
    notebook_params,
    run_by_papermill,
)
from venus_utils.core.stage import Stage, resolve_run_dir
from venus_utils.run.schemas import apply_profile

NOTEBOOKS = {nb.stem: nb for nb in sorted(paths.NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb"))}


def hand_namespace(stage: str, profile: str) -> dict:
    """What a kernel holds after the parameters cell of ``stage`` with ``profile = <profile>``."""
    ns = notebook_defaults(NOTEBOOKS[stage])
    ns.update(profile=profile, In=["", "# Parameters (Papermill overrides these...)\nprofile = ..."])
    return ns


@pytest.mark.parametrize("profile", ["smoke", "colab"])
@pytest.mark.parametrize("stage", ["00_setup", "03_sft_unsloth", "06_agent_demo"])
def test_a_hand_run_gets_what_the_pipeline_would_inject(stage, profile, capsys):
    ns = hand_namespace(stage, profile)
    applied = apply_profile(ns, stage)
    prof = load_profile(paths.PARAMS_DIR / f"{profile}.yaml")
    expected = notebook_params(prof, stage, notebook_defaults(NOTEBOOKS[stage]))
    for key, value in expected.items():
        if key in PIPELINE_ONLY:
            assert ns[key] == notebook_defaults(NOTEBOOKS[stage])[key], f"{key} must keep the notebook's value"
        else:
            assert ns[key] == value and applied[key] == value
    assert ns["run_dir"] == f"runs/{prof.name}" and ns["profile"] == prof.name
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and f"{profile}.yaml applied to {stage}" in out


def test_interactive_keeps_the_widgets_of_a_hand_run():
    ns = hand_namespace("06_agent_demo", "smoke")
    assert load_profile(paths.PARAMS_DIR / "smoke.yaml").sections["06_agent_demo"]["interactive"] is False
    apply_profile(ns, "06_agent_demo")
    assert ns["interactive"] is True


def test_default_profile_and_unknown_names_change_nothing(capsys):
    for name in ("interactive", "no_such_profile"):
        ns = hand_namespace("03_sft_unsloth", name)
        before = dict(ns)
        assert apply_profile(ns, "03_sft_unsloth") == {}
        assert ns == before
    out = capsys.readouterr().out
    assert "parameters cell as it is" in out and "no params/no_such_profile.yaml" in out and "smoke" in out


def test_a_chosen_run_dir_is_kept(tmp_path):
    ns = hand_namespace("02_turn_aware_resampling", "smoke")
    ns["run_dir"] = str(tmp_path / "mine")
    apply_profile(ns, "02_turn_aware_resampling")
    assert ns["run_dir"] == str(tmp_path / "mine") and ns["medium_max_turns"] == 7


def test_papermill_values_win(capsys):
    ns = hand_namespace("03_sft_unsloth", "smoke")
    ns["In"].append('# Parameters\nrun_dir = "/x/runs/smoke"\nmax_steps = 3\n')
    ns["max_steps"] = 3
    assert run_by_papermill(ns)
    assert apply_profile(ns, "03_sft_unsloth") == {} and ns["max_steps"] == 3
    assert "injected by Papermill" in capsys.readouterr().out
    ns = hand_namespace("03_sft_unsloth", "smoke")
    assert apply_profile(ns, "03_sft_unsloth", papermill=True) == {}


def test_profile_errors_name_the_key(tmp_path):
    (tmp_path / "typo.yaml").write_text("03_sft_unsloth:\n  max_stepz: 3\n")
    (tmp_path / "badtype.yaml").write_text("03_sft_unsloth:\n  max_steps: many\n")
    with pytest.raises(ConfigError, match="max_stepz"):
        apply_profile(hand_namespace("03_sft_unsloth", "typo"), "03_sft_unsloth", params_dir=tmp_path)
    with pytest.raises(ConfigError, match="max_steps"):
        apply_profile(hand_namespace("03_sft_unsloth", "badtype"), "03_sft_unsloth", params_dir=tmp_path)


PARAMS_CELL = (
    "# Parameters (Papermill overrides these from params/<profile>.yaml)\n"
    'run_dir = "runs/interactive"\nstage_dir = None\nprofile = "interactive"\nseed = 0\nvalue = 1\n'
)
APPLY_CELL = (
    "import json\nfrom venus_utils.run.schemas import apply_profile\n"
    "apply_profile(globals(), '00_demo', params_dir={params_dir!r})\n"
    "print('RESULT', json.dumps({{'run_dir': run_dir, 'profile': profile, 'seed': seed, 'value': value}}))"
)


def _result(nb) -> dict:
    text = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
    return json.loads(text.split("RESULT ", 1)[1])


def test_under_papermill_and_nbclient(tmp_path):
    """A real Papermill run keeps its injected values; the same notebook run by hand (nbclient) takes the profile."""
    import papermill
    from nbclient import NotebookClient

    (tmp_path / "mine.yaml").write_text("seed: 7\n00_demo:\n  value: 5\n")
    params = new_code_cell(PARAMS_CELL)
    params.metadata["tags"] = ["parameters"]
    nb = new_notebook(cells=[params, new_code_cell(APPLY_CELL.format(params_dir=str(tmp_path)))])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    src = tmp_path / "00_demo.ipynb"
    nbformat.write(nb, src)

    out = tmp_path / "out.ipynb"
    papermill.execute_notebook(
        str(src),
        str(out),
        parameters={"profile": "mine", "seed": 3},
        progress_bar=False,
        kernel_name="python3",
        cwd=str(tmp_path),
    )
    assert _result(nbformat.read(out, as_version=4)) == {
        "run_dir": "runs/interactive",
        "profile": "mine",
        "seed": 3,
        "value": 1,
    }

    nb.cells[0].source = PARAMS_CELL.replace('profile = "interactive"', 'profile = "mine"')
    NotebookClient(nb, kernel_name="python3", timeout=120, resources={"metadata": {"path": str(tmp_path)}}).execute()
    assert _result(nb) == {"run_dir": "runs/mine", "profile": "mine", "seed": 7, "value": 5}


# --- run folders -----------------------------------------------------------------------------------------------


def test_checkout_run_dirs_do_not_depend_on_the_current_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("VENUS_RUNS_DIR", raising=False)
    assert paths.IN_CHECKOUT and paths.is_checkout(paths.REPO_ROOT) and not paths.is_checkout(tmp_path)
    for cwd in (tmp_path, paths.NOTEBOOKS_DIR, paths.REPO_ROOT):
        monkeypatch.chdir(cwd)
        assert resolve_run_dir("runs/interactive") == paths.REPO_ROOT / "runs" / "interactive"
    assert resolve_run_dir(tmp_path / "abs") == tmp_path / "abs"


def test_venus_runs_dir_and_installed_package(tmp_path, monkeypatch):
    monkeypatch.setenv("VENUS_RUNS_DIR", str(tmp_path / "drive"))
    assert resolve_run_dir("runs/interactive") == tmp_path / "drive" / "runs" / "interactive"
    monkeypatch.delenv("VENUS_RUNS_DIR")
    # a plain (non-editable) install: REPO_ROOT is site-packages, so relative run folders follow the current folder
    monkeypatch.setattr(paths, "IN_CHECKOUT", False)
    monkeypatch.chdir(tmp_path)
    assert resolve_run_dir("runs/interactive") == tmp_path / "runs" / "interactive"
    assert paths.project_root() == tmp_path  # relative input paths of a profile, too
    stage = Stage.start("00_setup", "runs/interactive")
    assert stage.dir == tmp_path / "runs" / "interactive" / "00_setup" and stage.dir.is_dir()
