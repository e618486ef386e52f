"""``python -m venus_utils.tools search "q1" "q2" [--backend local|serper] [--world DIR] [--timeout S]``
``python -m venus_utils.tools visit URL [URL ...] --goal "..." [--backend local|jina] [--world DIR] [--timeout S]``

Prints exactly what the model would see inside ``<tool_response>`` (``--raw``: the raw Serper text of
REDSearcher trajectories).  A failing tool still exits 0: the failure is in the text.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from .toolbox import Toolbox, make_toolbox


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m venus_utils.tools", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
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
        p.add_argument("--timeout", type=float, default=150.0, help="seconds for the whole call")
        p.add_argument("--top-k", type=int, default=None)
        p.add_argument("--cache-dir", default=None)
    args = parser.parse_args(argv)
    knobs = {"top_k": args.top_k} if args.top_k else {}
    backend = "local" if args.backend == "local" else "web"
    if backend == "local" and not args.world:
        parser.error("the local backend needs --world DIR (build one with `python -m venus_utils.world build --out DIR`)")
    box: Toolbox = make_toolbox(backend, world_dir=args.world, timeout=args.timeout, cache_dir=args.cache_dir, **knobs)
    if args.tool == "search" and args.raw:
        from .search import raw_search_text

        results = box.search_backend.results(args.queries)
        results = asyncio.run(results) if asyncio.iscoroutine(results) else results
        print(raw_search_text(results))
        return 0
    arguments = {"query": args.queries} if args.tool == "search" else {"url": args.urls, "goal": args.goal}
    print(box.call_sync(args.tool, arguments))
    return 0


if __name__ == "__main__":
    sys.exit(main())
