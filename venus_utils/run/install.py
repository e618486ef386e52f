"""What a notebook's install cell does after it has put the package itself in place, and where the repository's URL
is set.

**The install cell** (:data:`INSTALL_CELL`, written into every notebook right after its ``parameters`` cell by
``--set-url``; ``--check`` names a notebook whose copy differs) runs only where ``venus_utils`` is not importable. It
installs the package alone (``pip install --no-deps``): from this checkout (editable) when the notebook sits in one,
else from ``REPO_URL`` (a bare runtime such as Colab, which downloads only the notebook). Then it calls
:func:`install_dependencies`, which installs the package's dependencies, with the ``colab`` extra (Unsloth) on a GPU
runtime, naming the runtime's torch so that pip keeps it. This module therefore imports nothing beyond the standard
library (and the package's own stdlib-only ``core.io`` and ``core.paths``): it runs before the dependencies are there.

**The repository URL** is one setting, ``[project.urls] Repository`` in ``pyproject.toml``. The install cells'
``REPO_URL`` and the README's Colab badge are written from it: ``python -m venus_utils.run.install --set-url
https://github.com/<owner>/venus-recipe`` sets it everywhere, ``--check`` lists what disagrees
(``tests/test_student_path.py`` runs it).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from ..core.io import atomic_write
from ..core.paths import REPO_ROOT

DIST = "venus-recipe"
PLACEHOLDER = "https://github.com/OWNER_NOT_SET/venus-recipe"  # until the repository is published
#: ``Repository = "<url>"`` under ``[project.urls]`` (a TOML basic string)
PYPROJECT_URL = re.compile(r'(?m)^(Repository = ")([^"]*)(")$')
#: the Colab badge's link in the README: ``https://colab.research.google.com/github/<owner>/<name>/blob/...``
BADGE_URL = re.compile(r"(https://colab\.research\.google\.com/github/)([^/\s)]+/[^/\s)]+)(/blob/)")

#: the install cell of every notebook, right after its ``parameters`` cell (``<URL>``: the repository URL);
#: ``--set-url`` writes it into every notebook, ``--check`` lists a notebook whose cell differs
INSTALL_CELL = """\
# Install venus_utils once per runtime (nothing where it imports already): this checkout (or VENUS_RECIPE_DIR), else,
# on a bare runtime such as Colab, the repository at REPO_URL; then its dependencies, keeping the runtime's torch.
import importlib.util
import os
import subprocess
import sys

REPO_URL = os.environ.get("VENUS_RECIPE_URL", "git+<URL>")  # pyproject.toml
if found := importlib.util.find_spec("venus_utils"):
    print(f"venus_utils already importable from {os.path.dirname(found.origin)}: nothing installed")
else:
    clone = next((d for d in ("..", ".") if os.path.isfile(f"{d}/venus_utils/run/install.py")), None)
    checkout = os.environ.get("VENUS_RECIPE_DIR") or clone  # notebooks opened in a clone of the repository
    package = ["-e", os.path.abspath(checkout)] if checkout else [f"venus-recipe @ {REPO_URL}"]
    subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", "--no-deps", *package])  # the package alone
    if checkout:  # an editable install is seen by new kernels; this one reads the checkout now
        sys.path.insert(0, package[1])
    importlib.invalidate_caches()
    from venus_utils.run.install import install_dependencies

    install_dependencies(package[-1])  # + Unsloth on a GPU (the `colab` extra): venus_utils/run/install.py
"""
INSTALL_MARK = "# Install venus_utils once per runtime"  # how an install cell starts


def install_cell(url: str) -> str:
    """The install cell with ``url`` as the repository URL (``REPO_URL``'s default)."""
    return INSTALL_CELL.replace("<URL>", url).rstrip("\n")


def on_gpu() -> bool:
    """A GPU runtime, as the install cell tells it: ``nvidia-smi`` is on the PATH."""
    return shutil.which("nvidia-smi") is not None


def dependencies_command(gpu: bool | None = None, python: str = sys.executable, torch: str | None = None) -> list[str]:
    """The pip command that installs the package's dependencies once the package is in place: ``venus-recipe`` (with
    the ``colab`` extra on a GPU: ``gpu``, default where ``nvidia-smi`` is found), and ``torch==<the runtime's
    version>`` (``torch``, default this Python's) where torch is installed, else pip may swap it for the version
    another package prefers (the newest xformers needs a newer torch: a multi-GB CUDA download)."""
    gpu = on_gpu() if gpu is None else gpu
    if torch is None:
        try:
            torch = importlib.metadata.version("torch")
        except importlib.metadata.PackageNotFoundError:
            torch = None
    return [
        python,
        "-m",
        "pip",
        "install",
        "-q",
        DIST + ("[colab]" if gpu else ""),
        *([f"torch=={torch}"] * bool(torch)),
    ]


def install_dependencies(source: str, gpu: bool | None = None) -> None:
    """The install cell's second step: runs :func:`dependencies_command` and says, in one line, what was installed
    (``source``: the checkout or ``venus-recipe @ <url>`` the cell installed) and which torch was kept."""
    gpu = on_gpu() if gpu is None else gpu
    command = dependencies_command(gpu)
    subprocess.check_call(command)
    kept = next((c.split("==", 1)[1] for c in command if c.startswith("torch==")), None)
    print(f"pip installed {source}" + ("[colab]" if gpu else "") + (f", keeping torch {kept}" if kept else ""))


# --- the repository URL: one setting ---------------------------------------------------------------------------


def github_path(url: str) -> str:
    """``owner/name`` of a ``https://github.com/owner/name`` URL (a trailing ``.git`` or ``/`` dropped); ValueError for
    anything else (the Colab badge opens notebooks from GitHub only), a name GitHub cannot have included: ``.``,
    ``..``, an empty one (``.git`` alone) or one still ending in ``.git``."""
    match = re.fullmatch(r"https://github\.com/([A-Za-z0-9][A-Za-z0-9_-]{0,38})/([A-Za-z0-9._-]{1,100})/?", url)
    if not match:
        raise ValueError(f"not a GitHub repository URL (https://github.com/<owner>/<name>): {url[:80]!r}")
    name = match[2].removesuffix(".git")
    if name in ("", ".", "..") or name.lower().endswith(".git"):
        raise ValueError(f"{url[:80]!r}: {match[2]!r} cannot be a GitHub repository's name")
    return f"{match[1]}/{name}"


def normalised_url(url: str) -> str:
    """``https://github.com/<owner>/<name>`` of a URL :func:`github_path` accepts."""
    return f"https://github.com/{github_path(url)}"


def repository_url(root: Path = REPO_ROOT) -> str:
    """The setting: ``[project.urls] Repository`` of ``root``'s ``pyproject.toml``."""
    found = PYPROJECT_URL.search((root / "pyproject.toml").read_text(encoding="utf-8"))
    if not found:
        raise ValueError(f"{root / 'pyproject.toml'}: no 'Repository = \"...\"' line under [project.urls]")
    return found[2]


def _notebooks(root: Path) -> list[Path]:
    return sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def _install_cells(nb: dict) -> list[dict]:
    """The install cells of a notebook (its code cells that start as :data:`INSTALL_CELL` does)."""
    return [c for c in nb["cells"] if c["cell_type"] == "code" and "".join(c["source"]).startswith(INSTALL_MARK)]


def disagreements(root: Path = REPO_ROOT) -> list[str]:
    """One line per place whose URL is not the setting's (or that lacks it), and per notebook whose install cell is
    not :data:`INSTALL_CELL` with the setting's URL; empty when all agree."""
    url = repository_url(root)
    out = []
    for path, pattern, want in [
        (root / "pyproject.toml", PYPROJECT_URL, url),
        (root / "README.md", BADGE_URL, github_path(url)),
    ]:
        found = [m[2] for m in pattern.finditer(path.read_text(encoding="utf-8"))]
        if not found:
            out.append(f"{path.relative_to(root)}: no repository URL found")
        out += [f"{path.relative_to(root)}: {got!r}, the setting is {want!r}" for got in found if got != want]
    for path in _notebooks(root):
        cells = _install_cells(json.loads(path.read_text(encoding="utf-8")))
        if len(cells) != 1:
            out.append(f"{path.relative_to(root)}: {len(cells)} install cells, one expected")
        elif "".join(cells[0]["source"]) != install_cell(url):
            out.append(
                f"{path.relative_to(root)}: its install cell is not venus_utils/run/install.py's INSTALL_CELL "
                f"(--set-url {url} writes it)"
            )
    return out


def set_url(url: str, root: Path = REPO_ROOT) -> list[Path]:
    """Make ``url`` the repository's URL in ``pyproject.toml`` and the README's badge, and write :data:`INSTALL_CELL`
    with it into every notebook; returns the files changed.  The whole URL is checked and every file's new text made
    before anything is written; then each is written atomically (a notebook keeps nbformat 4's one-space indent), and
    should a write fail, the files already written get their old text back: all of them change, or none."""
    url = normalised_url(url)  # refused before anything is read or written
    repository_url(root)  # the setting's line exists
    texts: dict[Path, tuple[str, str]] = {}
    pyproject = root / "pyproject.toml"
    text = pyproject.read_text(encoding="utf-8")
    texts[pyproject] = (text, PYPROJECT_URL.sub(lambda m: m[1] + url + m[3], text))
    readme = root / "README.md"
    text = readme.read_text(encoding="utf-8")
    texts[readme] = (text, BADGE_URL.sub(lambda m: m[1] + github_path(url) + m[3], text))
    for path in _notebooks(root):
        text = path.read_text(encoding="utf-8")
        nb = json.loads(text)
        cells = _install_cells(nb)
        if len(cells) != 1:
            raise ValueError(f"{path}: {len(cells)} install cells, one expected")
        cells[0]["source"] = install_cell(url).splitlines(keepends=True)
        texts[path] = (text, json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    changed: list[Path] = []
    try:
        for path, (old, new) in texts.items():
            if new != old:
                atomic_write(path, new)
                changed.append(path)
    except BaseException:
        for path in changed:
            atomic_write(path, texts[path][0])
        raise
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m venus_utils.run.install",
        description="The repository URL: pyproject.toml's [project.urls] Repository, the install cells, the badge.",
    )
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--set-url", metavar="URL", help="https://github.com/<owner>/<name>: set it everywhere")
    group.add_argument("--check", action="store_true", help="list the places that disagree with the setting")
    args = parser.parse_args(argv)
    try:
        if args.set_url:
            for path in set_url(args.set_url):
                print(f"wrote {path}")
            return 0
        wrong = disagreements()
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    url = repository_url()
    unset = " (the placeholder: --set-url it once the repository is public)" if url == PLACEHOLDER else ""
    print("\n".join(wrong) or f"the repository URL is {url} everywhere{unset}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
