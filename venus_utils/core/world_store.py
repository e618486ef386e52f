"""The offline world folder, read: its on-disk layout and the readers of its pages, metadata and questions.

Why a module of its own: the local tools read a world folder (``LocalSearch.from_world``,
``LocalVisit.from_world``), and the world builder (:mod:`venus_utils.world`) runs those same tools to write its
expert trajectories.  With the readers inside the world package the tools imported the builder and the builder
the tools.  Here they sit below both, so the imports run one way:
``io`` -> ``world_store`` -> ``tools`` -> ``world`` (builder, expert).  This module therefore imports neither the tools
nor the builder, and only reads: at import it needs only :mod:`venus_utils.core.io`; the question tables come through
:mod:`venus_utils.core.qa_files` (pandas), imported when they are read.

Why at the top of the package rather than as ``venus_utils.world.store``: importing a submodule first runs its
package's ``__init__``, and ``venus_utils/world/__init__.py`` exposes the builder (``build_world``,
``WorldConfig``: what the notebooks call), so a reader inside ``world`` would still pull the builder, and with it
the tools, into every import of the tools.

Layout (the run-folder contract; the builder writes it, see :mod:`venus_utils.world.build` for the schemas):
``pages.jsonl``, ``qa/{train,val,test[,rl]}.parquet``, ``trajectories/train-NNNNN.parquet``,
``trajectory_noise.jsonl`` and ``world.json``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from .io import read_json, read_jsonl

if TYPE_CHECKING:
    import pandas as pd

PAGES_FILE = "pages.jsonl"  # one page per line: url, title, text, id, type, world
META_FILE = "world.json"  # the build's config, tool settings, counts and expected cleaner report
QA_DIR = "qa"  # one verl QA parquet per split
TRAJECTORIES_DIR = "trajectories"  # raw REDSearcher-schema shards
NOISE_FILE = "trajectory_noise.jsonl"  # the noise injected in each trajectory row

_NOT_A_WORLD = "not a world folder (build one with `python -m venus_utils.world build --out DIR`)"


def qa_path(world_dir: str | Path, split: str) -> Path:
    """The parquet file of one question split (``train``, ``val``, ``test``, ``rl``)."""
    return Path(world_dir) / QA_DIR / f"{split}.parquet"


def heldout_subworld(world: int, n_worlds: int, heldout_worlds: int) -> bool:
    """Whether sub-world ``world`` is held out: the last ``heldout_worlds`` have no training questions."""
    return world >= n_worlds - heldout_worlds


def subworld_group(world: int, n_worlds: int, heldout_worlds: int = 0, rl_worlds: int = 0) -> str:
    """Which use sub-world ``world`` is for, by index: ``heldout`` (the last ``heldout_worlds``: val and test
    questions only), ``rl`` (the ``rl_worlds`` before them: RL questions only) or ``sft`` (the rest: expert
    trajectories, plus their share of val/test/rl questions)."""
    if heldout_subworld(world, n_worlds, heldout_worlds):
        return "heldout"
    return "rl" if world >= n_worlds - heldout_worlds - rl_worlds else "sft"


def subworld_tier(world: int, n_worlds: int, hard_worlds: int = 0) -> str:
    """``hard`` for the last ``hard_worlds`` sub-worlds (4-5 hop chains, facts only on the page, namesakes), else
    ``easy``."""
    return "hard" if world >= n_worlds - hard_worlds else "easy"


def load_world_meta(world_dir: str | Path) -> dict:
    """The folder's ``world.json`` (raises FileNotFoundError when ``world_dir`` is not a world folder)."""
    path = Path(world_dir) / META_FILE
    if not path.exists():
        raise FileNotFoundError(f"{path}: {_NOT_A_WORLD}")
    return read_json(path)


def load_pages(world_dir: str | Path) -> list[dict]:
    """The folder's pages, in index order (raises FileNotFoundError when ``world_dir`` is not a world folder)."""
    path = Path(world_dir) / PAGES_FILE
    if not path.exists():
        raise FileNotFoundError(f"{path}: {_NOT_A_WORLD}")
    return read_jsonl(path)


def load_world_questions(world_dir: str | Path, split: str = "test") -> pd.DataFrame:
    """A split's questions (``venus_utils.core.qa_files`` table) with the world's columns: ``template``, ``hops``,
    ``world``, ``subworld`` ("trained": its sub-world also has training questions; "held-out": none of its
    sub-world's questions were trained on, only its pages are in the search index), ``tier`` (easy | hard),
    ``group`` (sft | rl | heldout: :func:`subworld_group`) and ``tier_group`` (both, e.g. ``hard/heldout``)."""
    from .qa_files import load_verl_qa  # pandas and numpy: kept out of the tools' import

    path = qa_path(world_dir, split)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no {split!r} split in this world folder")
    qa = load_verl_qa(path)
    cfg = load_world_meta(world_dir)["config"]
    n, held = int(cfg["n_worlds"]), int(cfg.get("heldout_worlds", 0))
    rl, hard = int(cfg.get("rl_worlds", 0)), int(cfg.get("hard_worlds", 0))
    if "world" in qa:
        qa["subworld"] = ["held-out" if heldout_subworld(int(w), n, held) else "trained" for w in qa["world"]]
        qa["tier"] = [subworld_tier(int(w), n, hard) for w in qa["world"]]
        qa["group"] = [subworld_group(int(w), n, held, rl) for w in qa["world"]]
        qa["tier_group"] = qa["tier"] + "/" + qa["group"]  # e.g. hard/heldout: the headline cell
    return qa
