"""Held-out comparisons across run folders, e.g. one run per seed.

    python -m venus_utils.eval compare runs/cpu runs/cpu-seed1 [--baseline SFT] [--model "RL (IGPO)"] [--json F]

Pairs ``--model`` with ``--baseline`` question by question in each run folder (their greedy held-out results,
written by notebooks 03 and 04 or ``python -m venus_utils.rl train``) and over all the runs together
(:func:`venus_utils.eval.heldout.compare_runs`); prints one row per run and the pooled row, and with ``--json``
writes them to a file.
"""

from __future__ import annotations

import argparse
import sys

from ..io import write_json
from .heldout import SCORED, compare_runs

COLUMNS = ["run", "n", "accuracy_before", "accuracy_after", "difference", "diff_ci_low", "diff_ci_high"]
COLUMNS += ["fixed", "broken", "mcnemar_p", "detectable_difference", "verdict"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m venus_utils.eval", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("compare", help="pair two models' held-out results in each run folder and pooled")
    c.add_argument("runs", nargs="+", help="run folders, e.g. runs/cpu runs/cpu-seed1")
    c.add_argument("--baseline", default="SFT", choices=sorted(SCORED))
    c.add_argument("--model", default="RL (IGPO)", choices=sorted(SCORED))
    c.add_argument("--json", default=None, help="also write the rows to this JSON file")
    args = p.parse_args(argv)
    try:
        table = compare_runs(args.runs, args.baseline, args.model)
    except (FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{args.model} against {args.baseline}, paired by question (greedy held-out results):")
    print(table[COLUMNS].to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    if args.json:
        write_json(args.json, {"baseline": args.baseline, "model": args.model, "rows": table.to_dict("records")})
    return 0


if __name__ == "__main__":
    sys.exit(main())
