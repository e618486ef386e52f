"""Each notebook's code as a plain script beside it, so that tools reading Python files read the notebooks too.

``notebooks/code/<notebook>.py`` holds a notebook's code cells in order, each under a ``# %% cell N`` line (N counts
all of the notebook's cells from 0, as Jupyter shows them); its prose is left in the notebook. The scripts are made
from the notebooks, never edited by hand: ``python -m venus_utils.run.notebook_code --write`` rewrites the stale ones
and removes a script whose notebook is gone, and ``tests/test_notebook_conventions.py`` fails while one is stale. The
project's duplicate finder, text searches and reviews then see the notebooks' code as they see the package's (ruff
reads the notebooks themselves and leaves the scripts out). Python's AST of a cell (:func:`code_cells`) is what the
tests check the notebooks' own rules on, such as no function of the notebook's own outside notebook 04's reward cells.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..core.io import atomic_write
from ..core.paths import NOTEBOOKS_DIR

#: where the scripts live, beside the notebooks
SCRIPTS_DIRNAME = "code"
HEADER = "# The code cells of {name}, made by `python -m venus_utils.run.notebook_code --write`: edit the notebook."


def _notebooks(notebooks_dir: Path) -> list[Path]:
    return sorted(notebooks_dir.glob("[0-9][0-9]_*.ipynb"))


def code_cells(path: str | Path) -> list[tuple[int, str]]:
    """``(cell index, source)`` of each code cell of the notebook at ``path``, in order."""
    nb = json.loads(Path(path).read_text(encoding="utf-8"))
    out = []
    for i, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") == "code":
            source = cell.get("source", "")
            out.append((i, "".join(source) if isinstance(source, list) else str(source)))
    return out


def script(path: str | Path) -> str:
    """The script of the notebook at ``path``: its header line, then each code cell under ``# %% cell N``."""
    path = Path(path)
    parts = [HEADER.format(name=path.name)]
    for i, source in code_cells(path):
        parts.append(f"# %% cell {i}\n{source.rstrip()}" if source.strip() else f"# %% cell {i}")
    return "\n\n".join(parts) + "\n"


def script_path(notebook: str | Path) -> Path:
    notebook = Path(notebook)
    return notebook.parent / SCRIPTS_DIRNAME / f"{notebook.stem}.py"


def stale_scripts(notebooks_dir: str | Path | None = None) -> dict[Path, str | None]:
    """Scripts that differ from their notebook (or are missing), with the text they should hold; a script without a
    notebook maps to None."""
    notebooks_dir = Path(notebooks_dir or NOTEBOOKS_DIR)
    stale: dict[Path, str | None] = {}
    wanted = {script_path(nb): script(nb) for nb in _notebooks(notebooks_dir)}
    for path, text in wanted.items():
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            stale[path] = text
    scripts = notebooks_dir / SCRIPTS_DIRNAME
    for path in sorted(scripts.glob("*.py")) if scripts.is_dir() else []:
        if path not in wanted:
            stale[path] = None
    return stale


def write_scripts(notebooks_dir: str | Path | None = None) -> list[Path]:
    """Rewrite the stale scripts (atomically) and remove those whose notebook is gone; returns the paths changed."""
    changed = []
    for path, text in stale_scripts(notebooks_dir).items():
        if text is None:
            path.unlink()
        else:
            atomic_write(path, text)
        changed.append(path)
    return changed


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--write", action="store_true", help="rewrite the stale scripts (default: list them, exit 1)")
    p.add_argument("--notebooks", default=None, help=f"the notebooks' folder (default {NOTEBOOKS_DIR})")
    args = p.parse_args(argv)
    if args.write:
        for path in write_scripts(args.notebooks):
            print(f"wrote {path}" if path.exists() else f"removed {path} (its notebook is gone)")
        return 0
    stale = stale_scripts(args.notebooks)
    for path, text in stale.items():
        print(f"{path}: {'no notebook' if text is None else 'stale'}", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
