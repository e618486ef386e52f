"""``python -m venus_utils.world build --out DIR [--seed N] [--size small|medium] [--n-worlds K] ...``

A bad argument (``--out`` naming a file, a link, a folder that holds what this command did not write, or one that
cannot be created; settings that :class:`WorldConfig` refuses, counts and sizes out of range) exits 2 with one message
before anything is generated.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..core.io import FolderNotOurs, check_replaceable
from ..core.validation import field_limits, number_argument
from .build import WORLD_TOOL, WorldConfig, build_world
from .expert import VISIT_POLICIES
from .graph import SIZES

LIMITS = field_limits(WorldConfig)[0]  # each knob's allowed numbers, as its WorldConfig field states them


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m venus_utils.world", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="generate a world folder")
    b.add_argument("--out", required=True, help="output folder")
    b.add_argument("--seed", type=number_argument(LIMITS["seed"]), default=0)
    b.add_argument("--size", default="small", choices=list(SIZES))
    b.add_argument("--n-worlds", type=number_argument(LIMITS["n_worlds"]), default=1, help="sub-worlds in one index")
    b.add_argument(
        "--heldout-worlds",
        type=number_argument(LIMITS["heldout_worlds"]),
        default=0,
        help="sub-worlds whose questions go to val/test only",
    )
    b.add_argument(
        "--top-k",
        type=number_argument(LIMITS["search_top_k"]),
        default=WorldConfig.search_top_k,
        help="search results per query",
    )
    b.add_argument("--snippet-chars", type=number_argument(LIMITS["snippet_chars"]), default=WorldConfig.snippet_chars)
    b.add_argument(
        "--visit-sentences",
        type=number_argument(LIMITS["visit_max_sentences"]),
        default=WorldConfig.visit_max_sentences,
    )
    b.add_argument("--visit-policy", default="always", choices=VISIT_POLICIES)
    b.add_argument("--max-trajectories", type=number_argument(LIMITS["max_trajectories"]), default=None)
    args = parser.parse_args(argv)
    settings = dict(
        seed=args.seed,
        size=args.size,
        n_worlds=args.n_worlds,
        heldout_worlds=args.heldout_worlds,
        search_top_k=args.top_k,
        snippet_chars=args.snippet_chars,
        visit_max_sentences=args.visit_sentences,
        visit_policy=args.visit_policy,
        max_trajectories=args.max_trajectories,
    )
    try:
        WorldConfig(**settings)
    except ValueError as exc:
        parser.error(str(exc))
    out = Path(args.out)
    try:
        check_replaceable(out, WORLD_TOOL)  # a file, a link, a folder holding anything else: one line, nothing built
        meta = build_world(out, **settings)
    except FolderNotOurs as exc:
        parser.error(f"--out {exc}")
    except OSError as exc:  # e.g. a folder that cannot be created
        parser.error(f"cannot write the world folder {out}: {exc.strerror or exc}")
    print(json.dumps({"out": args.out, "counts": meta["counts"], "trajectories": meta["trajectories"]}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
