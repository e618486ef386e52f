"""What a notebook's install cell does after it has put the package itself in place, and where the repository's URL
is set.

**The install cell** (the same in every notebook, right after its ``parameters`` cell) runs only where ``venus_utils``
is not importable. It installs the package alone (``pip install --no-deps``): from this checkout (editable) when the
notebook sits in one, else from ``REPO_URL`` (a bare runtime such as Colab, which downloads only the notebook). Then it
calls :func:`install_dependencies`, which installs the package's dependencies, with the ``colab`` extra (Unsloth) on
a GPU runtime, naming the runtime's torch so that pip keeps it. This module therefore imports nothing beyond the
standard library (and the package's own stdlib-only ``core.io`` and ``core.paths``): it runs before the
dependencies are there.

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
#: ``REPO_URL = os.environ.get("VENUS_RECIPE_URL", "git+<url>")`` in every install cell
CELL_URL = re.compile(r'(REPO_URL = os\.environ\.get\("VENUS_RECIPE_URL", "git\+)([^"]*)(")')
#: ``Repository = "<url>"`` under ``[project.urls]`` (a TOML basic string)
PYPROJECT_URL = re.compile(r'(?m)^(Repository = ")([^"]*)(")$')
#: the Colab badge's link in the README: ``https://colab.research.google.com/github/<owner>/<name>/blob/...``
BADGE_URL = re.compile(r"(https://colab\.research\.google\.com/github/)([^/\s)]+/[^/\s)]+)(/blob/)")


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


def _places(root: Path) -> list[tuple[Path, re.Pattern, str]]:
    """Every file that holds the URL, the pattern that finds it there, and what the setting makes of it."""
    url = repository_url(root)
    places = [(root / "pyproject.toml", PYPROJECT_URL, url), (root / "README.md", BADGE_URL, github_path(url))]
    places += [(nb, CELL_URL, url) for nb in sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb"))]
    return places


def _read(path: Path) -> str:
    """The text the URL is looked up in: a notebook's cells, joined; any other file as it is."""
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".ipynb":
        return text
    return "\n".join("".join(cell["source"]) for cell in json.loads(text)["cells"])


def disagreements(root: Path = REPO_ROOT) -> list[str]:
    """One line per place whose URL is not the setting's (or that lacks it); empty when all agree."""
    out = []
    for path, pattern, want in _places(root):
        found = [m[2] for m in pattern.finditer(_read(path))]
        if not found:
            out.append(f"{path.relative_to(root)}: no repository URL found")
        out += [f"{path.relative_to(root)}: {got!r}, the setting is {want!r}" for got in found if got != want]
    return out


def set_url(url: str, root: Path = REPO_ROOT) -> list[Path]:
    """Make ``url`` the repository's URL in ``pyproject.toml``, every install cell and the README's badge; returns the
    files changed.  The whole URL is checked and every file's new text made before anything is written; then each is
    written atomically (a notebook keeps nbformat 4's one-space indent), and should a write fail, the files already
    written get their old text back: all of them change, or none."""
    url = normalised_url(url)  # refused before anything is read or written
    repository_url(root)  # the setting's line exists
    texts: dict[Path, tuple[str, str]] = {}
    pyproject = root / "pyproject.toml"
    text = pyproject.read_text(encoding="utf-8")
    texts[pyproject] = (text, PYPROJECT_URL.sub(lambda m: m[1] + url + m[3], text))
    places = [(root / "README.md", BADGE_URL, github_path(url))]
    places += [(nb, CELL_URL, url) for nb in sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb"))]
    for path, pattern, want in places:
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".ipynb":
            nb = json.loads(text)
            for cell in nb["cells"]:
                cell["source"] = pattern.sub(lambda m, w=want: m[1] + w + m[3], "".join(cell["source"]))
                cell["source"] = cell["source"].splitlines(keepends=True)
            new = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
        else:
            new = pattern.sub(lambda m, w=want: m[1] + w + m[3], text)
        texts[path] = (text, new)
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
