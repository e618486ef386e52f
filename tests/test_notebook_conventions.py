"""Static checks on the committed notebooks: conventions that a reader and the pipeline rely on."""

from __future__ import annotations

import re

import nbformat
import pytest

from venus_utils.paths import PARAMS_DIR
from venus_utils.profiles import discover_notebooks, load_profile, notebook_defaults, notebook_params

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
