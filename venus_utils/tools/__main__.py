"""``python -m venus_utils.tools search "q1" "q2" [--backend local|serper] [--world DIR] [--timeout S]``
``python -m venus_utils.tools visit URL [URL ...] --goal "..." [--backend local|jina] [--world DIR] [--timeout S]``

Prints exactly what the model would see inside ``<tool_response>`` (``--raw``: the raw Serper text of
REDSearcher trajectories); every output goes through the toolbox, so ``--timeout`` bounds it and keys are
masked.  A failing tool still exits 0: the failure is in the text.  A bad argument (a missing world folder,
a file where a folder is expected, a non-positive timeout) exits 2 with one message.
"""

from __future__ import annotations

import argparse
import sys

from ..core.validation import POSITIVE, Range, number_argument
from .toolbox import Toolbox, make_toolbox


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m venus_utils.tools", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="tool", required=True)
    s = sub.add_parser("search")
    s.add_argument("queries", nargs="+")
    s.add_argument("--backend", default="local", choices=["local", "serper"])
    s.add_argument("--raw", action="store_true", help="print the raw Serper text instead")
    v = sub.add_parser("visit")
    v.add_argument("urls", nargs="+")
    v.add_argument("--goal", required=True)
    v.add_argument("--backend", default="local", choices=["local", "jina"])
    for p in (s, v):
        p.add_argument("--world", default=None, help="world folder (local backend)")
        p.add_argument(
            "--timeout", type=number_argument(POSITIVE, float), default=150.0, help="seconds for the whole call"
        )
        p.add_argument("--top-k", type=number_argument(Range(1, 100)), default=None)
        p.add_argument("--cache-dir", default=None)
    args = parser.parse_args(argv)
    knobs = {"top_k": args.top_k} if args.top_k else {}
    backend = "local" if args.backend == "local" else "web"
    if backend == "local" and not args.world:
        parser.error(
            "the local backend needs --world DIR (build one with `python -m venus_utils.world build --out DIR`)"
        )
    try:
        box: Toolbox = make_toolbox(
            backend, world_dir=args.world, timeout=args.timeout, cache_dir=args.cache_dir, **knobs
        )
    except (OSError, ValueError) as exc:  # a missing or malformed world folder, a cache folder that is a file
        parser.error(str(exc))
    arguments = {"query": args.queries} if args.tool == "search" else {"url": args.urls, "goal": args.goal}
    print(box.call_sync(args.tool, arguments, raw=args.tool == "search" and args.raw))
    return 0


if __name__ == "__main__":
    sys.exit(main())
