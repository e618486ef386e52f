"""Static checks on the committed notebooks: conventions that a reader and the pipeline rely on."""

from __future__ import annotations

import re

import nbformat
import pytest

from venus_utils.core.paths import PARAMS_DIR
from venus_utils.core.profiles import discover_notebooks, load_profile, notebook_defaults, notebook_params

NOTEBOOKS = discover_notebooks()
PROFILES = sorted(PARAMS_DIR.glob("*.yaml"))


def test_notebooks_exist_in_order():
    stems = [nb.stem for nb in NOTEBOOKS]
    assert stems and stems[0] == "00_setup"
    assert [s[:2] for s in stems] == sorted(s[:2] for s in stems)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            assert not cell.get("outputs"), f"{path.name} cell {i} has outputs"
            assert cell.get("execution_count") is None, f"{path.name} cell {i} has an execution count"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_structure(path):
    nb = nbformat.read(path, as_version=4)
    first = nb.cells[0]
    assert first.cell_type == "markdown" and re.match(rf"# {path.stem[:2]} ·", first.source), "teaching intro first"
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, "exactly one parameters cell"
    assert {"run_dir", "stage_dir", "profile"} <= set(notebook_defaults(path))
    sources = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert 'find_spec("venus_utils")' in sources, "install cell"
    assert f'Stage.start("{path.stem}"' in sources and "stage.finish(" in sources
    assert "## Summary" in "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    # secrets never travel as parameters
    assert not re.search(r"(?i)api_?key\s*=", tagged[0].source)


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.stem)
def test_profiles_fit_the_notebooks(profile):
    prof = load_profile(profile)
    stems = {nb.stem for nb in NOTEBOOKS}
    assert set(prof.sections) <= stems, f"{profile.name} has sections for missing notebooks"
    for nb in NOTEBOOKS:
        notebook_params(prof, nb.stem, notebook_defaults(nb))  # raises on undeclared keys


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.stem)
def test_profile_keys_are_commented(profile):
    for lineno, line in enumerate(profile.read_text().splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or stripped.endswith(":"):
            continue  # blank, comment, or a section header
        assert "#" in line, f"{profile.name}:{lineno} has no comment: {line!r}"


#: schema fields whose default is not DR-Venus's value, and why (the rule of docs/reference.md: the config classes
#: hold DR-Venus's values as their defaults)
NOT_DR_VENUS = {"vllm_tensor_parallel_size": "must divide the run's processes; DR-Venus's 4 needs 4 GPUs per engine"}


def _schema_views():
    """(stage, config class) pairs: the notebooks whose training settings are a config class's fields."""
    from venus_utils.core.paths import RL_STAGE, SFT_STAGE
    from venus_utils.rl.config import IGPOConfig
    from venus_utils.sft.config import SFTConfig

    return [(SFT_STAGE, SFTConfig), (RL_STAGE, IGPOConfig)]


def _accepts(annotation, value) -> bool:
    import types
    import typing

    options = typing.get_args(annotation) if typing.get_origin(annotation) in (typing.Union, types.UnionType) else ()
    for option in options or (annotation,):
        if option is type(None) and value is None:
            return True
        if option is float and isinstance(value, int) and not isinstance(value, bool):
            return True
        if isinstance(option, type) and isinstance(value, option) and (option is bool or not isinstance(value, bool)):
            return True
        if typing.get_origin(option) is typing.Literal and value in typing.get_args(option):
            return True
    return False


@pytest.mark.parametrize("stage,config", _schema_views(), ids=lambda x: getattr(x, "__name__", x))
def test_the_parameters_cell_agrees_with_the_stage_schema(stage, config):
    """Issue 23: a notebook parameter that is a field of the stage's config class has the field's type, and where its
    comment states DR-Venus's value, that is the schema's default (DR-Venus's, by the rule of docs/reference.md); a
    test, so the two views of a setting never drift."""
    import ast
    import dataclasses
    import typing

    from venus_utils.core.paths import NOTEBOOKS_DIR

    path = NOTEBOOKS_DIR / f"{stage}.ipynb"
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    comments = dict(re.findall(r"^(\w+) = [^#\n]*#([^\n]*)$", cell.source, re.M))
    fields = {f.name: f for f in dataclasses.fields(config)}
    hints = typing.get_type_hints(config)
    words = {"on": True, "off": False}
    checked = 0
    for name, value in notebook_defaults(path).items():
        if name not in fields:
            continue
        assert _accepts(hints[name], value), f"{path.name}: {name} = {value!r} is not a {hints[name]}"
        stated = re.search(r"DR-Venus: ([-+0-9.e]+|True|False|on|off|\"[^\"]+\")\s*[),;]", comments.get(name, ""))
        if stated and name not in NOT_DR_VENUS:
            text = stated.group(1)
            dr_venus = words[text] if text in words else ast.literal_eval(text)
            assert dr_venus == fields[name].default, (
                f"{path.name}: {name}'s comment says DR-Venus uses {dr_venus!r}, {config.__name__} defaults to "
                f"{fields[name].default!r}"
            )
            checked += 1
    assert checked >= 5


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_parameters_cell_is_generated_from_the_defaults_module(path):
    """Issue 23: a setting is written once.  Each parameters cell is :func:`venus_utils.core.defaults.parameters_cell`
    (``python -m venus_utils.core.defaults --write`` rewrites a stale one), so the notebook, the stage CLIs and the run
    record read the same lesson values."""
    from venus_utils.core.defaults import parameters_cell, stage_defaults

    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    assert cell.source == parameters_cell(path.stem), (
        f"{path.name}: its parameters cell differs from venus_utils/core/defaults.py; edit the module, then run "
        "python -m venus_utils.core.defaults --write"
    )
    assert notebook_defaults(path) == stage_defaults(path.stem)


def test_writing_the_cells_rewrites_only_a_stale_cell(tmp_path):
    import shutil

    from venus_utils.core.defaults import parameters_cell, write_cells

    for path in NOTEBOOKS:
        shutil.copy(path, tmp_path / path.name)
    stale = tmp_path / NOTEBOOKS[0].name
    nb = nbformat.read(stale, as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    cell.source = cell.source.replace("seed = 0", "seed = 7")
    nbformat.write(nb, stale)
    assert write_cells(tmp_path) == [stale]
    assert nbformat.read(stale, as_version=4).cells[nb.cells.index(cell)].source == parameters_cell(stale.stem)
    for path in NOTEBOOKS:  # the committed layout, byte for byte (nbformat 4, one-space indent)
        assert (tmp_path / path.name).read_bytes() == path.read_bytes(), path.name


def test_the_stage_cli_reads_its_defaults_from_the_module_not_the_notebooks(monkeypatch):
    """The CLIs learn their defaults from :mod:`venus_utils.core.defaults`: no notebook is opened."""
    from venus_utils.core import profiles
    from venus_utils.core.paths import PARAMS_DIR, RL_STAGE
    from venus_utils.run.cli import stage_params

    def no_notebook(*args, **kwargs):
        raise AssertionError("a notebook was read")

    monkeypatch.setattr(profiles, "notebook_defaults", no_notebook)
    monkeypatch.setattr(nbformat, "read", no_notebook)
    params, name = stage_params(PARAMS_DIR / "smoke.yaml", RL_STAGE, {"search_cost": 0.25})
    assert name == "smoke" and params["search_cost"] == 0.25 and params["reward_mode"] == "igpo"


def test_the_code_scripts_are_made_from_the_notebooks():
    """notebooks/code/ holds each notebook's code cells (what the duplicate finder and text searches read)."""
    from venus_utils.run.notebook_code import stale_scripts

    stale = stale_scripts()
    assert not stale, f"stale: {sorted(p.name for p in stale)}: run python -m venus_utils.run.notebook_code --write"


def test_writing_the_scripts_rewrites_the_stale_ones_and_removes_orphans(tmp_path):
    import shutil

    from venus_utils.run.notebook_code import code_cells, main, script_path, write_scripts

    for nb in NOTEBOOKS[:2]:
        shutil.copy(nb, tmp_path / nb.name)
    assert {p.name for p in write_scripts(tmp_path)} == {f"{nb.stem}.py" for nb in NOTEBOOKS[:2]}
    assert write_scripts(tmp_path) == [] and main(["--notebooks", str(tmp_path)]) == 0
    first = script_path(tmp_path / NOTEBOOKS[0].name)
    text = first.read_text()
    for i, source in code_cells(NOTEBOOKS[0]):
        assert f"# %% cell {i}\n" in text and source.strip() in text
    first.write_text(text + "x = 1\n")  # edited by hand
    orphan = first.parent / "99_gone.py"
    orphan.write_text("")
    assert main(["--notebooks", str(tmp_path)]) == 1
    assert set(write_scripts(tmp_path)) == {first, orphan}
    assert first.read_text() == text and not orphan.exists()


def test_notebooks_define_no_logic_of_their_own_but_the_reward_cells():
    """Logic lives in venus_utils: a notebook defines no function or class at the top of a cell, except notebook
    04's reward cells, the one place a user edits logic (a widget's callback inside a cell's block is not logic)."""
    import ast

    from venus_utils.core.paths import RL_STAGE
    from venus_utils.rl.stage import REWARD_FUNCTIONS
    from venus_utils.run.notebook_code import code_cells

    found = []
    for nb in NOTEBOOKS:
        allowed = set(REWARD_FUNCTIONS) if nb.stem == RL_STAGE else set()
        for i, source in code_cells(nb):
            for node in ast.parse(source).body:
                if (
                    isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                    and node.name not in allowed
                ):
                    found.append(f"{nb.name} cell {i}: {node.name}")
    assert not found, f"move these into venus_utils: {found}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_introduction_lists_the_sections_and_says_what_to_change_first(path):
    """A reader learns from the first cell what the notebook holds, in order, and which parameter to try first: every
    numbered section heading is named there, and a "What to change first" line names at least one parameter."""
    nb = nbformat.read(path, as_version=4)
    intro = " ".join(nb.cells[0].source.replace("**", "").lower().split())  # one line, however it is wrapped
    headings = [
        m.group(1)
        for cell in nb.cells
        if cell.cell_type == "markdown"
        for m in re.finditer(r"(?m)^## \d+\. (.+)$", cell.source)
    ]
    assert headings, f"{path.name}: no numbered sections"
    missing = [h for h in headings if " ".join(h.lower().split()) not in intro]
    assert not missing, f"{path.name}: the introduction does not name the sections {missing}"
    change = re.search(r"\*\*What to change first:\*\*(.*?)(?:\n\n|$)", nb.cells[0].source, re.S)
    assert change and "`" in change.group(1), f"{path.name}: no 'What to change first' naming a parameter"
    params = set(notebook_defaults(path))
    named = set(re.findall(r"`(\w+)`", change.group(1)))
    assert named & params, f"{path.name}: 'What to change first' names none of the parameters {sorted(params)}"
