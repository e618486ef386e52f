"""The newcomer's path: a notebook opened on its own (Colab downloads only the notebook), in a kernel where
``venus_utils`` is not importable, installs the package from the repository URL and runs; a checkout run by hand
from ``notebooks/`` writes every stage into one run folder; and installing into a runtime that already has its own
torch and transformers keeps them.

The kernels here use a Python that sees the default environment's packages but not the project: a venv whose
``.pth`` file points at a copy of site-packages made of links, without ``venus_utils`` and its editable hook.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import urllib.request
from pathlib import Path

import nbformat
import pytest

from venus_utils.core.paths import REPO_ROOT
from venus_utils.core.profiles import discover_notebooks
from venus_utils.run import install

NOTEBOOKS = discover_notebooks()
INSTALL_MARK = install.INSTALL_MARK
GIT = [
    "git",
    "-c",
    "user.name=test",
    "-c",
    "user.email=test@example.invalid",
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "init.defaultBranch=main",
    "-c",
    "commit.gpgsign=false",
]


def install_cell(nb) -> int:
    return next(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and INSTALL_MARK in c.source)


def repository_url() -> str:
    return tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["urls"]["Repository"]


# --- the committed notebooks -------------------------------------------------------------------------------------


def test_install_cells_are_identical_and_name_the_repository():
    sources = {nb.stem: nbformat.read(nb, as_version=4) for nb in NOTEBOOKS}
    cells = {stem: nb.cells[install_cell(nb)].source for stem, nb in sources.items()}
    assert set(cells.values()) == {install.install_cell(repository_url())}, (
        "an install cell is not venus_utils/run/install.py's INSTALL_CELL (--set-url <url> writes it)"
    )
    cell = next(iter(cells.values()))
    assert f'"git+{repository_url()}"' in cell, "REPO_URL and pyproject's [project.urls] Repository disagree"
    for stem, nb in sources.items():
        i = install_cell(nb)
        assert "parameters" in nb.cells[i - 1].metadata.get("tags", []), f"{stem}: install cell after parameters"
        assert f'apply_profile(globals(), "{stem}")' in nb.cells[i + 1].source, f"{stem}: profile cell after install"
    assert install.disagreements() == [], "python -m venus_utils.run.install --check"
    assert len(cell.splitlines()) <= 25, (
        "the install cell is read at a glance: its logic lives in venus_utils.run.install"
    )


def test_the_repository_url_is_one_setting_written_everywhere(tmp_path):
    """``--set-url`` writes pyproject's setting, every install cell and the README's Colab badge; a notebook keeps
    its format and every other byte; a URL the badge cannot use is refused before anything is written."""
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO_ROOT / name, tmp_path / name)
    shutil.copytree(REPO_ROOT / "notebooks", tmp_path / "notebooks", ignore=shutil.ignore_patterns("runs", ".*"))
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert install.disagreements(tmp_path) == []

    with pytest.raises(ValueError, match="not a GitHub repository URL"):
        install.set_url("https://example.org/me/venus-recipe", tmp_path)
    assert {p: p.read_bytes() for p in before} == before

    changed = install.set_url("https://github.com/someone/venus-recipe.git", tmp_path)
    assert sorted(changed) == sorted(p for p in before if p.suffix in (".toml", ".md", ".ipynb"))
    assert install.repository_url(tmp_path) == "https://github.com/someone/venus-recipe"
    assert install.disagreements(tmp_path) == []
    nb = nbformat.read(tmp_path / "notebooks" / "00_setup.ipynb", as_version=4)
    assert '"git+https://github.com/someone/venus-recipe"' in nb.cells[install_cell(nb)].source
    badge = "https://colab.research.google.com/github/someone/venus-recipe/blob/main/notebooks/00_setup.ipynb"
    assert badge in (tmp_path / "README.md").read_text()
    for path, old in before.items():  # only the URL changed
        new = path.read_bytes()
        assert new.replace(b"someone", b"OWNER_NOT_SET") == old, path
    assert install.set_url("https://github.com/someone/venus-recipe", tmp_path) == []  # nothing left to change

    (tmp_path / "README.md").write_text("no badge\n")
    assert install.disagreements(tmp_path) == ["README.md: no repository URL found"]


@pytest.mark.parametrize("gpu", [False, True])
def test_the_dependencies_step_keeps_the_runtimes_torch(gpu):
    command = install.dependencies_command(gpu=gpu, python="py", torch="2.8.0")
    assert command == [
        "py",
        "-m",
        "pip",
        "install",
        "-q",
        "venus-recipe[colab]" if gpu else "venus-recipe",
        "torch==2.8.0",
    ]
    assert "torch" not in " ".join(install.dependencies_command(gpu=gpu, torch=""))  # no torch: nothing to keep


# --- environments for the kernels -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """A site-packages view without the project, a kernel spec factory and a 'remote' repository (a git repository
    made from the working tree, standing in for the public URL)."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed: pip installs REPO_URL (git+...) with it")
    root = tmp_path_factory.mktemp("student")
    site = Path(sysconfig.get_paths()["purelib"])
    deps = root / "deps"
    deps.mkdir()
    for entry in site.iterdir():
        name = entry.name
        if name.endswith(".pth") or name.startswith(("__editable__", "venus_recipe", "venus_utils", "__pycache__")):
            continue
        (deps / name).symlink_to(entry)

    remote = root / "remote"
    remote.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO_ROOT / name, remote / name)
    shutil.copytree(REPO_ROOT / "params", remote / "params")
    shutil.copytree(REPO_ROOT / "venus_utils", remote / "venus_utils", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([*GIT, "init", "-q", str(remote)], check=True)
    subprocess.run([*GIT, "-C", str(remote), "add", "-A"], check=True)
    subprocess.run([*GIT, "-C", str(remote), "commit", "-q", "-m", "snapshot"], check=True)
    return {"root": root, "deps": deps, "remote": remote}


def hidden_python(ws, name: str) -> tuple[Path, str]:
    """A venv that sees the default environment's packages (pip, ipykernel, torch...) but not ``venus_utils``, and a
    Jupyter kernel spec running it. Returns (its site-packages, the kernel name)."""
    venv = ws["root"] / name
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    (purelib / "deps.pth").write_text(f"{ws['deps']}\n")
    probe = subprocess.run(
        [str(python), "-c", "import venus_utils"],
        capture_output=True,
        text=True,
        cwd=ws["root"],
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    assert probe.returncode != 0, "venus_utils must not be importable before the install cell runs"
    spec = ws["root"] / "jupyter" / "kernels" / name
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": name,
                "language": "python",
            }
        )
    )
    return purelib, name


@pytest.fixture
def kernel_env(workspace, monkeypatch):
    """What the kernels and the pip they run see: the kernel specs, no network, no build isolation (the build backend
    comes from the default environment), and no GPU extra whatever this machine has."""
    monkeypatch.setenv("JUPYTER_PATH", str(workspace["root"] / "jupyter"))
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.delenv("VENUS_RECIPE_DIR", raising=False)
    monkeypatch.delenv("VENUS_RUNS_DIR", raising=False)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_NO_BUILD_ISOLATION", "0")  # pip's inverted spelling: 0 turns build isolation off
    monkeypatch.setenv(
        "PATH",
        os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if not (Path(p) / "nvidia-smi").exists()),
    )
    return monkeypatch


def execute(nb, kernel: str, cwd: Path):
    from nbclient import NotebookClient

    NotebookClient(nb, kernel_name=kernel, timeout=600, resources={"metadata": {"path": str(cwd)}}).execute()
    return nb


def outputs(cell) -> str:
    return "".join(o.get("text", "") for o in cell.get("outputs", []))


def set_profile(nb, profile: str):
    params = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    assert 'profile = "interactive"' in params.source
    params.source = params.source.replace('profile = "interactive"', f'profile = "{profile}"', 1)


# --- the student paths ------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_notebook_alone_installs_the_package_from_the_repository_url(workspace, kernel_env, tmp_path):
    """Colab: only the notebook, in an empty folder; REPO_URL (here a local git repository) provides the package."""
    purelib, kernel = hidden_python(workspace, "bare")
    kernel_env.setenv("VENUS_RECIPE_URL", f"git+file://{workspace['remote']}")
    folder = tmp_path / "content"
    folder.mkdir()
    nb = nbformat.read(REPO_ROOT / "notebooks" / "03_sft_unsloth.ipynb", as_version=4)
    i = install_cell(nb)
    check = nbformat.v4.new_code_cell(
        "import json, venus_utils\nfrom venus_utils.core.stage import Stage\n"
        "stage = Stage.start('03_sft_unsloth', run_dir, stage_dir, profile)\n"
        "print('RESULT', json.dumps({'file': venus_utils.__file__, 'stage_dir': str(stage.dir), 'device': device,"
        " 'engine': engine, 'profile': profile}))"
    )
    nb.cells = nb.cells[: i + 2] + [check, nbformat.v4.new_code_cell(nb.cells[i].source)]  # the install cell again
    set_profile(nb, "colab")
    nbformat.write(nb, folder / "03_sft_unsloth.ipynb")

    execute(nb, kernel, folder)
    said = outputs(nb.cells[i])
    assert said.strip().count("\n") == 0, said
    assert f"pip installed venus-recipe @ git+file://{workspace['remote']}" in said and "keeping torch" in said
    assert "colab.yaml applied to 03_sft_unsloth" in outputs(nb.cells[i + 1])
    result = json.loads(outputs(nb.cells[i + 2]).split("RESULT ", 1)[1])
    assert Path(result["file"]).is_relative_to(purelib), "imported in the same kernel, from the installed package"
    assert result["stage_dir"] == str(folder / "runs" / "colab" / "03_sft_unsloth")  # relative to the current folder
    assert (result["device"], result["engine"], result["profile"]) == ("cuda", "unsloth", "colab")
    assert "already importable" in outputs(nb.cells[-1]) and "nothing installed" in outputs(nb.cells[-1])
    assert not (purelib / "torch").exists(), "the runtime's torch was replaced"
    assert sorted(p.name for p in folder.iterdir()) == ["03_sft_unsloth.ipynb", "runs"]


@pytest.mark.slow
def test_checkout_run_by_hand_from_notebooks_folder_shares_one_run_folder(workspace, kernel_env):
    """A clone opened in JupyterLab with a kernel that lacks the package: the install cell installs the checkout
    (editable), and 00 -> 02 run by hand from notebooks/ with profile = "smoke" land in <checkout>/runs/smoke."""
    purelib, kernel = hidden_python(workspace, "clone")
    checkout = workspace["root"] / "checkout"
    shutil.copytree(workspace["remote"], checkout, ignore=shutil.ignore_patterns(".git"))
    shutil.copytree(
        REPO_ROOT / "notebooks", checkout / "notebooks", ignore=shutil.ignore_patterns(".ipynb_checkpoints", "runs")
    )
    said = []
    for stem in ("00_setup", "01_trajectory_cleaning", "02_turn_aware_resampling"):
        nb = nbformat.read(checkout / "notebooks" / f"{stem}.ipynb", as_version=4)
        set_profile(nb, "smoke")
        execute(nb, kernel, checkout / "notebooks")
        said.append(outputs(nb.cells[install_cell(nb)]))
    assert said[0].startswith(f"pip installed {checkout}"), said[0]  # -e <checkout>
    assert all(f"already importable from {checkout / 'venus_utils'}" in s for s in said[1:]), said
    run = checkout / "runs" / "smoke"
    for stem in ("00_setup", "01_trajectory_cleaning", "02_turn_aware_resampling"):
        summary = json.loads((run / stem / "summary.json").read_text())
        assert summary["profile"] == "smoke"
    assert (run / "02_turn_aware_resampling" / "train.parquet").exists()
    assert not (checkout / "notebooks" / "runs").exists()


# --- a runtime with its own torch ------------------------------------------------------------------------------

COLAB_LIKE = {"torch": "2.8.0", "torchvision": "0.23.0", "triton": "3.4.0", "transformers": "5.17.0"}


def _index_reachable() -> bool:
    index = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple").rstrip("/")
    try:
        with urllib.request.urlopen(f"{index}/pip/", timeout=10):
            return True
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.parametrize("extra, pin_torch", [("", False), ("[colab]", True)], ids=["plain", "colab-extra"])
def test_install_keeps_the_runtimes_torch_and_transformers(extra, pin_torch, tmp_path):
    """In an environment that already holds Colab-like versions (stub distributions), pip must plan to install
    neither torch, torchvision, triton nor transformers: for a plain ``pip install venus-recipe`` the ranges alone
    must keep them; with the ``colab`` extra the install cell also names the runtime's torch, as it must: left
    free, pip takes the newest xformers, which needs a newer torch, and replaces the runtime's (a CUDA download)."""
    if not _index_reachable():
        pytest.skip("the package index is unreachable: the resolution needs it")
    src = tmp_path / "src"
    (src / "venus_utils").mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO_ROOT / name, src / name)
    shutil.copytree(REPO_ROOT / "params", src / "params")
    shutil.copy(REPO_ROOT / "venus_utils" / "__init__.py", src / "venus_utils")
    venv = tmp_path / "runtime"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    (purelib / "pip").symlink_to(Path(sysconfig.get_paths()["purelib"]) / "pip")
    for name, version in COLAB_LIKE.items():
        info = purelib / f"{name}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        (info / "INSTALLER").write_text("pip\n")
        (info / "RECORD").write_text("")
    report = tmp_path / "report.json"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_NO_INDEX")}
    env.update(PIP_RETRIES="1", PIP_TIMEOUT="30")
    dry_run = ["--dry-run", "--quiet", "--report", str(report)]
    if pin_torch:  # the install cell on a bare GPU runtime: the package alone from its URL, then its dependencies
        pip = [str(python), "-m", "pip", "install", "--quiet", "--no-deps", f"venus-recipe @ {src.as_uri()}"]
        done = subprocess.run(pip, capture_output=True, text=True, env=env, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        cmd = install.dependencies_command(gpu=True, python=str(python), torch=COLAB_LIKE["torch"])
        cmd[4:4] = dry_run
    else:  # `pip install venus-recipe` by hand: the ranges alone
        cmd = [str(python), "-m", "pip", "install", *dry_run, f"venus-recipe{extra} @ {src.as_uri()}"]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    planned = {
        item["metadata"]["name"].lower(): item["metadata"]["version"]
        for item in json.loads(report.read_text())["install"]
    }
    assert "venus-recipe" in planned or pin_torch  # the cell installed it (alone) before its dependencies
    moved = {name: planned[name] for name in COLAB_LIKE if name in planned}
    assert not moved, f"pip would replace the runtime's {moved}"
    if extra:
        assert "unsloth" in planned


def test_the_url_command_checks_and_refuses_in_one_line(capsys):
    assert install.main(["--check"]) == 0
    said = capsys.readouterr().out
    assert "everywhere" in said and ("the placeholder" in said) == (install.repository_url() == install.PLACEHOLDER)
    assert install.main(["--set-url", "http://example.org/x"]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: not a GitHub repository URL (https://github.com/<owner>/<name>): 'http://example.org/x'"
    )


def test_an_install_cell_edited_by_hand_is_reported_and_rewritten_from_its_one_source(tmp_path):
    """The install cell has one source, venus_utils/run/install.py's INSTALL_CELL: a notebook whose copy differs is
    named by --check, and --set-url writes the source back."""
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO_ROOT / name, tmp_path / name)
    shutil.copytree(REPO_ROOT / "notebooks", tmp_path / "notebooks", ignore=shutil.ignore_patterns("runs", ".*"))
    path = tmp_path / "notebooks" / "03_sft_unsloth.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells[install_cell(nb)].source += "\nprint('my edit')"
    nbformat.write(nb, path)
    assert install.disagreements(tmp_path) == [
        "notebooks/03_sft_unsloth.ipynb: its install cell is not venus_utils/run/install.py's INSTALL_CELL "
        f"(--set-url {repository_url()} writes it)"
    ]
    assert install.set_url(repository_url(), tmp_path) == [path]
    assert install.disagreements(tmp_path) == []
