"""Held-out comparisons across run folders, e.g. one run per seed; a model scored on validation questions.

    python -m venus_utils.eval compare runs/cpu runs/cpu-seed1 [--baseline SFT] [--model "RL (IGPO)"] [--json F]
    python -m venus_utils.eval validate --model runs/cpu/03_sft_unsloth/model --world runs/cpu/00_setup/world \
        [--split val] [--n 200] [--max-turns 14] [--out runs/cpu/validation_sft.parquet]
    python -m venus_utils.eval keep runs/cpu-hard-seed10 --out results/cpu-hard-seed10
    python -m venus_utils.eval rejudge runs/cpu
    python -m venus_utils.eval rejudge results/* --dry-run --json results/rejudge-offline-exact.json
    python -m venus_utils.eval study results/cpu-lesson-seed2{0..5} [--json F] [--markdown]

Pairs ``--model`` with ``--baseline`` question by question in each run folder (their greedy held-out results,
written by notebooks 03 and 04 or ``python -m venus_utils.rl train``) and over all the runs together
(:func:`venus_utils.eval.heldout.compare_runs`); prints one row per run and the pooled row, for every question and
for the headline slice (hard/heldout) when the runs' worlds have a hard tier, and with ``--json`` writes them to a
file.

``validate`` answers ``--n`` questions of a world's ``--split`` (``val`` by default: the questions settings are chosen
on; the held-out ``test`` questions only report) greedily, as the held-out evaluation does, and prints the accuracy
per tier and sub-world group (``tier_group``, e.g. hard/heldout) with 95% intervals.

``keep`` copies a run's held-out results (the scored tables without rollouts, every ``summary.json``, ``arms.json``)
into a folder to commit, ``results/<run>`` (:func:`venus_utils.eval.heldout.keep_results`): a run folder does not
outlive its machine, so seeds run in different sessions are pooled from there (``compare results/a results/b``).

``rejudge`` scores a run's held-out and validation tables again with the current judge, from the answers they hold
(no model runs), when another judge scored them (:func:`venus_utils.eval.heldout.rejudge`): answers scored by two
judges are never paired.  It prints, per table, the verdicts that went right -> wrong and wrong -> right;
``--dry-run`` rewrites no table (for kept results), ``--json`` writes the flips per (table, earlier judge) and examples
(:func:`venus_utils.eval.heldout.rejudge_report`; ``results/rejudge-offline-exact.json`` is such a file).

``study`` reads a pre-registered study of several seeds as registered (:mod:`venus_utils.eval.study`): every pair of
models in every run, pooled and with the seed as the unit, on the headline slice; the headline table (a row per seed,
pooled, seed-level) and the decision rule's criteria, each with its numbers.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from ..agent.settings import add_settings_options
from ..core.io import write_json
from ..core.validation import AT_LEAST_1, SEED, number_argument
from .by_tool import mechanism
from .heldout import (
    SCORED,
    SEEDS_ROW,
    EvalSettings,
    compare_runs,
    draw_heldout,
    evaluate_model,
    keep_results,
    rejudge_report,
    summary,
)
from .shipped import ship
from .study import Rule, decide, headline_table, markdown_table, study

COLUMNS = ["run", "slice", "n", "accuracy_before", "accuracy_after", "difference", "diff_ci_low", "diff_ci_high"]
COLUMNS += ["fixed", "broken", "mcnemar_p", "detectable_difference", "verdict"]
SEED_COLUMNS = ["slice", "seeds", "mean_difference", "seed_ci_low", "seed_ci_high", "seed_t_p", "positive", "negative"]
SEED_COLUMNS += ["sign_p"]


def validate(args) -> int:
    """``validate``: the model's greedy accuracy on the split, overall and per slice, from the one evaluation code."""
    if args.n < 1:
        print("error: --n must be at least 1", file=sys.stderr)
        return 2
    model = Path(args.model)
    try:
        questions = draw_heldout(args.world, args.n, seed=args.seed, split=args.split)
        settings = EvalSettings.for_model(
            model,
            max_turns=args.max_turns,
            max_new_tokens=args.max_new_tokens,
            system_prompt_style=args.system_prompt_style,
        )
        out = Path(args.out) if args.out else model.parent / f"validation_{args.split}.parquet"
        scored = evaluate_model(model, questions, out, settings, world_dir=args.world)
    except (FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    figures = summary(scored)
    print(f"{model} on {len(questions)} {args.split} questions of {args.world} (greedy; scored table: {out}):")
    for row in figures["by"]:
        if row["group"] in ("all", "tier_group", "tier"):
            print(
                f"  {row['group']:>10} {row['value']:<14} {row['accuracy']:.3f} "
                f"[{row['ci_low']:.3f}, {row['ci_high']:.3f}]  n = {row['n']}"
            )
    return 0


def run_study(args) -> int:
    """``study``: the headline table and the registered rule's criteria (:mod:`venus_utils.eval.study`)."""
    try:
        arms = [a.strip() for a in args.arms.split(",") if a.strip()] if args.arms else None
        result = study(args.runs, arms)
    except (FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    decision = decide(result, Rule(sft_band=args.sft_band, plateau_margin=args.plateau_margin))
    table = headline_table(result)
    slices = sorted({p["slice"] for p in result["pairs"].values()})
    print(f"{', '.join(slices)}, accuracy and paired difference (* McNemar p < 0.05), per seed, pooled, seed-level:")
    print(markdown_table(table) if args.markdown else table.to_string(index=False))
    for line in result["untrained"]:
        print(f"note: {line}")
    if result["compute"]:
        print("\ncompute: each arm's counted model FLOPs, x the IGPO arm's (training and question filter):")
        for seed, ratios in result["compute"].items():
            print(f"  seed {seed}: " + ", ".join(f"{label} {ratio:.3f}x" for label, ratio in ratios.items()))
    print("\nthe registered rule:")
    print("\n".join(decision["lines"]))
    how = mechanism(result["runs"], result["seeds"])
    pooled = how[(how["run"] == "pooled") & how["tool"].isin(["search", "visit", "(answer)"])] if len(how) else how
    if len(pooled):
        print("\nwhat each arm's update pushed, by tool (training episodes of every seed, pooled):")
        print(pooled.drop(columns="run").to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    if args.json:
        records = how.astype(object).where(how.notna(), None).to_dict("records")
        write_json(
            args.json, {**result, "table": table.to_dict("records"), "decision": decision, "mechanism": records}
        )
    return 0


def run_rejudge(args) -> int:
    """``rejudge``: the run folders' tables scored again by the current judge, rewritten unless ``--dry-run``; the
    verdicts that changed, per table and earlier judge (:func:`venus_utils.eval.heldout.rejudge_report`)."""
    runs = [run for run in args.runs if Path(run).is_dir()]  # a shell glob over results/ also names files
    report = rejudge_report(runs, relative_to=Path.cwd(), write=not args.dry_run)
    for row in report["tables"]:
        changed = row["right_to_wrong"] + row["wrong_to_right"]
        print(
            f"{row['table']}: {row['n']} answers judged by {row['judged_by']} re-judged by {report['judge']}: "
            f"{changed} verdicts changed ({row['right_to_wrong']} right -> wrong, "
            f"{row['wrong_to_right']} wrong -> right)"
        )
    if args.json:
        write_json(args.json, report)
    changed = any(r["right_to_wrong"] or r["wrong_to_right"] for r in report["tables"])
    if changed and not args.dry_run:
        print("the stages' summary.json figures predate these verdicts: rerun those stages to refresh them")
    if not report["tables"]:
        print(f"{', '.join(args.runs)}: every table is judged by the current judge")
    else:
        tables = len({r["table"] for r in report["tables"]})
        print(f"{tables} tables re-judged" + (" (--dry-run: none rewritten)" if args.dry_run else ""))
    return 0


def _band(value: str) -> tuple[float, float]:
    """``"0.2,0.7"`` -> (0.2, 0.7): two accuracies, low <= high."""
    try:
        low, high = (float(x) for x in value.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r}: expected LOW,HIGH, e.g. 0.2,0.7") from None
    if not 0 <= low <= high <= 1:
        raise argparse.ArgumentTypeError(f"{value!r}: need 0 <= LOW <= HIGH <= 1")
    return low, high


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m venus_utils.eval", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("compare", help="pair two models' held-out results in each run folder and pooled")
    c.add_argument("runs", nargs="+", help="run folders, e.g. runs/cpu runs/cpu-seed1")
    c.add_argument("--baseline", default="SFT", choices=sorted(SCORED))
    c.add_argument("--model", default="RL (IGPO)", choices=sorted(SCORED))
    c.add_argument("--json", default=None, help="also write the rows to this JSON file")
    v = sub.add_parser("validate", help="score a model on a world's validation questions, by tier and sub-world group")
    v.add_argument("--model", required=True, help="a model folder (save_pretrained output)")
    v.add_argument("--world", required=True, help="the offline world folder (00_setup/world)")
    v.add_argument("--split", default="val", help="the world's question split (default val)")
    v.add_argument(
        "--n", type=number_argument(AT_LEAST_1), default=200, help="questions drawn, stratified (default 200)"
    )
    add_settings_options(v)
    v.add_argument("--seed", type=number_argument(SEED), default=0, help="the draw's seed")
    v.add_argument("--out", default=None, help="scored table (parquet; default <model>/../validation_<split>.parquet)")
    r = sub.add_parser("rejudge", help="score a run's held-out tables again with the current judge (no model runs)")
    r.add_argument("runs", nargs="+", help="run folders, e.g. runs/cpu (or kept ones: results/*)")
    r.add_argument("--dry-run", action="store_true", help="count the verdicts that would change; rewrite no table")
    r.add_argument("--json", default=None, help="also write the flips per table and earlier judge to this file")
    s = sub.add_parser("study", help="a multi-seed study read as registered: the headline table and the decision")
    s.add_argument("runs", nargs="+", help="one run folder per seed, e.g. results/cpu-lesson-seed20 ...")
    s.add_argument("--json", default=None, help="also write the comparisons, the table and the decision to this file")
    s.add_argument("--markdown", action="store_true", help="print the headline table as Markdown (the README's copy)")
    s.add_argument(
        "--sft-band",
        type=_band,
        default=Rule.sft_band,
        metavar="LOW,HIGH",
        help="criterion 1: the SFT accuracy band the study registered (default 0.2,0.6; seeds 30-35: 0.2,0.7)",
    )
    s.add_argument(
        "--plateau-margin",
        type=float,
        default=None,
        help="criterion 1b, where the study registered it: SFT at its plateau when more SFT gains at most this much "
        "over it, pooled (seeds 30-35: 0.03)",
    )
    s.add_argument(
        "--arms",
        default=None,
        help=f"comma-separated models to read, when not every run has every arm ({', '.join(SCORED)}; default: "
        "every model the runs have, which every run must have)",
    )
    k = sub.add_parser("keep", help="copy a run's held-out results into a folder to commit (results/<run>)")
    k.add_argument("run", help="the run folder, e.g. runs/cpu-hard-seed10")
    k.add_argument("--out", required=True, help="where to copy them, e.g. results/cpu-hard-seed10")
    h = sub.add_parser("ship", help="copy a run's SFT model into models/ with the record a test holds it to")
    h.add_argument("--run", required=True, help="the run folder, e.g. runs/cpu-teacher")
    h.add_argument("--out", required=True, help="the model folder to write, e.g. models/cpu-teacher-sft-seed0")
    h.add_argument("--n", type=number_argument(AT_LEAST_1), default=32, help="validation questions recorded")
    args = p.parse_args(argv)
    commands = {
        "ship": run_ship,
        "validate": validate,
        "rejudge": run_rejudge,
        "study": run_study,
        "keep": run_keep,
        "compare": run_compare,
    }
    try:  # a file or value that cannot be used is one line, not a traceback
        return commands[args.command](args)
    except (FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def run_ship(args) -> int:
    """``ship``: a run's SFT model into ``models/`` with its record (:mod:`venus_utils.eval.shipped`)."""
    record = ship(args.run, args.out, args.n)
    right = sum(r["correct"] for r in record["answers"]["rows"])
    print(f"shipped {args.run}'s SFT model in {args.out}: {right} of {args.n} recorded validation answers right")
    return 0


def run_keep(args) -> int:
    """``keep``: a run's held-out results into a folder to commit."""
    written = keep_results(args.run, args.out)
    print(f"kept {len(written)} files of {args.run} in {args.out}:")
    for path in written:
        print(f"  {path}")
    return 0


def run_compare(args) -> int:
    """``compare``: two models' held-out results paired by question, per run, pooled and with the seed as the unit."""
    table = compare_runs(args.runs, args.baseline, args.model)
    print(f"{args.model} against {args.baseline}, paired by question (greedy held-out results):")
    seeds = table["run"] == SEEDS_ROW
    print(table.loc[~seeds, COLUMNS].to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    if seeds.any():
        print("\nwith the seed as the unit (each run one seed: its difference one observation; t-interval over runs):")
        counts = {"seeds": int, "positive": int, "negative": int}
        print(table.loc[seeds, SEED_COLUMNS].astype(counts).to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    if args.json:
        rows = [{k: v for k, v in r.items() if not pd.isna(v)} for r in table.to_dict("records")]  # each row its own
        write_json(args.json, {"baseline": args.baseline, "model": args.model, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
