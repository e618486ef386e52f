"""``python -m venus_utils.world build --out DIR [--seed N] [--size small|medium] [--n-worlds K] ...``

A bad argument (``--out`` naming a file, or a folder that cannot be created; settings that
:class:`WorldConfig` refuses) exits 2 with one message before anything is generated.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .build import WorldConfig, build_world
from .expert import VISIT_POLICIES
from .graph import SIZES


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m venus_utils.world", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="generate a world folder")
    b.add_argument("--out", required=True, help="output folder")
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--size", default="small", choices=list(SIZES))
    b.add_argument("--n-worlds", type=int, default=1, help="sub-worlds in one index")
    b.add_argument("--heldout-worlds", type=int, default=0, help="sub-worlds whose questions go to val/test only")
    b.add_argument("--top-k", type=int, default=WorldConfig.search_top_k, help="search results per query")
    b.add_argument("--snippet-chars", type=int, default=WorldConfig.snippet_chars)
    b.add_argument("--visit-sentences", type=int, default=WorldConfig.visit_max_sentences)
    b.add_argument("--visit-policy", default="always", choices=VISIT_POLICIES)
    b.add_argument("--max-trajectories", type=int, default=None)
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
    out, hint = Path(args.out), "expected a folder for the world, created if missing"
    if out.exists() and not out.is_dir():
        parser.error(f"--out is a file: {out} ({hint})")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # e.g. a file where a parent folder should be
        parser.error(f"cannot create the world folder {out}: {exc.strerror or exc} ({hint})")
    meta = build_world(out, **settings)
    print(json.dumps({"out": args.out, "counts": meta["counts"], "trajectories": meta["trajectories"]}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
