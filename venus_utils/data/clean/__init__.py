"""The trajectory cleaner: ``python -m venus_utils.data.clean -i RAW -o OUT [options]``.

Same options and outputs as DR-Venus's ``SFT/data_clean/prepare_trajectories.py`` (``cleaned_resampled.parquet``
and ``stats.json``, plus the ``--keep-intermediate`` / ``--write-jsonl`` artifacts), with two modes:

- ``--compat reference``: the reference script's output rows, message texts and stats counts, quirks included;
- ``--compat strict`` (default): the fixes of DR-Venus's cleaning defects
  (:data:`venus_utils.data.rules.STRICT_FIXES`), plus the stages DR-Venus describes but does not ship: correctness
  filtering with the project's judge (drop reason ``incorrect_answer``), token accounting with ``--tokenizer`` and
  a ``--max-tokens`` filter (``too_long``), a seeded question-level ``--val-fraction`` split into
  ``train.parquet`` / ``val.parquet``, shuffled by default.

How it runs: input files are read in batches (parquet streamed per row group / batch, JSON and JSONL whole
per file); batches are cleaned in worker processes, which write their valid rows to memory-mappable Arrow
part files; the main process merges the per-batch statistics in input order, applies the correctness and
length filters, plans resampling and the split, and streams the outputs row group by row group.  Every input
row is counted: ``rows.source == rows.kept + sum(drop_reasons)``; a row that cannot be read at all (a JSONL line
that is not JSON, a parquet row that is not UTF-8) stops the run with an error naming the file and the line / row,
or with ``--on-bad-line drop`` is counted under ``bad_line`` / ``invalid_utf8`` (``stats.json["bad_rows"]`` lists
the first ones); a row nested deeper than :data:`..sources.MAX_DEPTH` is counted under ``too_deep``.  ``--shard i/n``
cleans every n-th batch on another machine and ``--merge-shards`` finishes them into the single run's outputs
(:mod:`.shards`).

A run holds its output folder (an exclusive ``flock`` on ``OUT/.clean.lock``, released by the kernel however the
run ends): a second run on the same folder is refused while the first is alive, and a run that gets the lock
removes what killed runs left there (``.clean-*`` work folders, ``.<artifact>.*.tmp`` files of half-written
outputs) -- nobody else can be using them.  Runs on different output folders never touch each other's files.

The cleaner's modules, in the order a run goes through them: :mod:`.batches` (its options, the worker processes that
clean the input batches, the output folder's lock), :mod:`.shards` (``--shard`` / ``--merge-shards``: the batches
cleaned on several machines), :mod:`.finish` (the finishing steps over the cleaned batches: filters, judge,
resampling, split, outputs); this package's own module is the entry point and the command line, and the imports go
the other way: this one -> shards -> finish -> batches.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from ...core import protocol
from ...core.validation import AT_LEAST_1, NON_NEGATIVE, PROPER_FRACTION, SEED, number_argument, parse_shard
from ...judging.judge import Judge
from .. import rules, sources
from ..resample import ResamplePolicy
from .batches import (
    ARTIFACTS,
    LOCK_FILE,
    WORK_PREFIX,
    CleanConfig,
    RunPaths,
    WorkerConfig,
    hold_output,
    remove_leftovers,
    run_tasks,
)
from .finish import OUTPUT_COLUMNS, finish
from .shards import merge_shards, read_shards, run_shard

__all__ = [
    "ARTIFACTS",
    "LOCK_FILE",
    "OUTPUT_COLUMNS",
    "WORK_PREFIX",
    "CleanConfig",
    "build_parser",
    "config_from_args",
    "diff_outputs",
    "hold_output",
    "main",
    "merge_shards",
    "remove_leftovers",
    "run_clean",
]


def run_clean(cfg: CleanConfig, judge: Judge | None = None) -> dict[str, Any]:
    """Clean, filter, resample and write; returns the stats (also written to ``stats.json``).

    With ``cfg.shard`` only that shard's batches are cleaned, into a shard folder (:func:`.shards.run_shard`;
    returns its summary).
    """
    t_start = time.perf_counter()
    paths = RunPaths.of(cfg)
    for path in paths.files:  # fail fast on an unusable file before any work
        if sources.kind_of(path) == "parquet":
            sources.check_parquet(path)
    opts = cfg.rule_options()
    with hold_output(paths.output_dir, cfg.progress):
        if cfg.shard is not None:  # a shard keeps its part files; shards.merge_shards finishes the run
            return run_shard(cfg, paths, opts)
        tmp_dir = tempfile.mkdtemp(prefix=WORK_PREFIX, dir=paths.output_dir)
        try:
            wcfg = WorkerConfig.for_run(cfg, opts, tmp_dir)
            total = sources.count_rows(paths.files)
            t0 = time.perf_counter()
            results = run_tasks(paths.files, wcfg, cfg, total)
            timings = {"clean": round(time.perf_counter() - t0, 3)}
            return finish(cfg, paths, results, timings, t_start, judge)
        finally:
            shutil.rmtree(tmp_dir, ignore_errors=True)


# --------------------------------------------------------------------------------------------------
# comparing two runs


def diff_outputs(a: str | Path, b: str | Path, files: tuple[str, ...] = ("cleaned_resampled.parquet",)) -> list[str]:
    """Differences between two cleaner output folders: rows / message texts of ``files`` and stats counts.

    Used to check ``--compat reference`` against DR-Venus's script and the benchmark's baseline.  Paths,
    timings and keys only one side has are ignored; an empty list means identical.
    """
    a, b = Path(a), Path(b)
    out: list[str] = []
    for name in files:
        ta, tb = pq.read_table(a / name), pq.read_table(b / name)
        cols = [c for c in ta.column_names if c in tb.column_names]
        if set(ta.column_names) != set(tb.column_names):
            out.append(f"{name}: columns {ta.column_names} != {tb.column_names}")
        if ta.num_rows != tb.num_rows:
            out.append(f"{name}: {ta.num_rows} rows != {tb.num_rows}")
            continue
        for col in cols:
            va, vb = ta.column(col).to_pylist(), tb.column(col).to_pylist()
            bad = [i for i, (x, y) in enumerate(zip(va, vb)) if x != y]
            if bad:
                out.append(f"{name}: column {col} differs in {len(bad)} rows (first: row {bad[0]})")
    sa = json.loads((a / "stats.json").read_text(encoding="utf-8"))
    sb = json.loads((b / "stats.json").read_text(encoding="utf-8"))
    for key in (
        "system_prompt_mode",
        "allowed_tools",
        "turn_formula",
        "resample_policy",
        "pruned_tool_turns_removed",
        "pruned_tool_response_turns_removed",
        "pruned_tool_name_counts",
        "duplicate_tool_turns_removed",
        "drop_reasons",
        "tools_after_cleaning",
        "turn_buckets",
        "multiplier_distribution",
    ):
        if sa.get(key) != sb.get(key):
            out.append(f"stats.{key}: {sa.get(key)} != {sb.get(key)}")
    for key in ("source", "stage1_normalized", "stage2_valid", "final_resampled"):
        if sa["rows"].get(key) != sb["rows"].get(key):
            out.append(f"stats.rows.{key}: {sa['rows'].get(key)} != {sb['rows'].get(key)}")
    pa_, pb_ = sa.get("per_file", {}), sb.get("per_file", {})
    if pa_ != pb_:
        out.append(f"stats.per_file differs: {sorted(pa_)} vs {sorted(pb_)}")
    return out


# --------------------------------------------------------------------------------------------------
# CLI


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m venus_utils.data.clean",
        description="Clean, validate, filter and resample deep-research trajectories (DR-Venus recipe).",
    )
    p.add_argument(
        "--input",
        "-i",
        default=None,
        help="input file (.parquet, .json, .jsonl) or folder (required unless --merge-shards)",
    )
    p.add_argument("--output-dir", "-o", required=True, help="output folder (created)")
    p.add_argument("--file-pattern", default="train-*.parquet", help="glob used when --input is a folder")
    p.add_argument("--system-prompt-mode", choices=("template", "row"), default="template")
    p.add_argument(
        "--system-prompt-style",
        choices=protocol.SYSTEM_PROMPT_STYLES,
        default="dr-venus",
        help="bundled prompt: dr-venus (exact) | compact (offline profiles; the agent loop must match)",
    )
    p.add_argument("--current-date", default=None, help="date appended to the bundled system prompt")
    p.add_argument("--short-max-turns", type=number_argument(AT_LEAST_1), default=50)
    p.add_argument("--medium-max-turns", type=number_argument(AT_LEAST_1), default=100)
    p.add_argument("--short-multiplier", type=number_argument(AT_LEAST_1), default=1)
    p.add_argument("--medium-multiplier", type=number_argument(AT_LEAST_1), default=2)
    p.add_argument("--long-multiplier", type=number_argument(AT_LEAST_1), default=5)
    p.add_argument(
        "--shuffle",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="shuffle the resampled output (default: off in reference mode, on in strict mode)",
    )
    p.add_argument("--seed", type=number_argument(SEED), default=protocol.DATA_SEED)
    p.add_argument("--keep-intermediate", action="store_true")
    p.add_argument("--keep-metadata", action="store_true")
    p.add_argument("--write-jsonl", action="store_true")
    p.add_argument("--allowed-tools", nargs="+", default=list(rules.DEFAULT_ALLOWED_TOOLS))
    p.add_argument(
        "--compat",
        choices=rules.MODES,
        default="strict",
        help="reference: DR-Venus's exact output; strict (default): DR-Venus's cleaning defects fixed + filters",
    )
    p.add_argument(
        "--judge",
        choices=("auto", "llm", "offline", "none"),
        default="auto",
        help="strict: correctness judge (auto = LLM when JUDGE_API_BASE/API_BASE is set, else offline)",
    )
    p.add_argument(
        "--judge-cache", default=None, help="SQLite verdict cache (default <output-dir>/judge_cache.sqlite)"
    )
    p.add_argument("--tokenizer", default=None, help="local tokenizer folder for token accounting")
    p.add_argument(
        "--max-tokens",
        type=number_argument(AT_LEAST_1),
        default=None,
        help="strict: drop rows longer than this (reason too_long)",
    )
    p.add_argument(
        "--val-fraction",
        type=number_argument(PROPER_FRACTION, float),
        default=0.0,
        help="strict: fraction of questions in val.parquet",
    )
    p.add_argument(
        "--workers", type=number_argument(NON_NEGATIVE), default=0, help="worker processes (0 = one per core)"
    )
    p.add_argument("--batch-rows", type=number_argument(AT_LEAST_1), default=16, help="rows per worker task")
    p.add_argument(
        "--on-bad-line",
        choices=sources.ON_BAD_LINE,
        default="error",
        help="a row that cannot be read (JSONL line not valid JSON, parquet row not UTF-8): error (stop, "
        "naming file and line / row) or drop (count it under bad_line / invalid_utf8 and go on)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar or per-file lines")
    p.add_argument(
        "--shard",
        default=None,
        metavar="I/N",
        help="clean only input batches I, I+N, ... into a shard folder (see venus_utils.data.clean.shards)",
    )
    p.add_argument(
        "--merge-shards",
        nargs="+",
        default=None,
        metavar="DIR",
        help="finish a sharded run: merge these shard folders into --output-dir (stats equal a single run's)",
    )
    return p


def config_from_args(args: argparse.Namespace) -> CleanConfig:
    policy = ResamplePolicy(
        args.short_max_turns,
        args.medium_max_turns,
        args.short_multiplier,
        args.medium_multiplier,
        args.long_multiplier,
    )
    return CleanConfig(
        input=args.input,
        output_dir=args.output_dir,
        file_pattern=args.file_pattern,
        system_prompt_mode=args.system_prompt_mode,
        system_prompt_style=args.system_prompt_style,
        current_date=args.current_date,
        policy=policy,
        shuffle=args.shuffle,
        seed=args.seed,
        keep_intermediate=args.keep_intermediate,
        keep_metadata=args.keep_metadata,
        write_jsonl=args.write_jsonl,
        allowed_tools=tuple(args.allowed_tools),
        compat=args.compat,
        judge=args.judge,
        judge_cache=args.judge_cache,
        tokenizer=args.tokenizer,
        max_tokens=args.max_tokens,
        val_fraction=args.val_fraction,
        workers=args.workers,
        batch_rows=args.batch_rows,
        progress=not args.quiet,
        shard=parse_shard(args.shard, "--shard") if args.shard else None,
        on_bad_line=args.on_bad_line,
    )


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.merge_shards:
            args.input = args.input or read_shards(args.merge_shards)[0]["input"]
            merge_shards(config_from_args(args), args.merge_shards)
            return 0
        if not args.input:
            raise ValueError("--input is required (unless --merge-shards)")
        run_clean(config_from_args(args))
    except (sources.InputError, FileNotFoundError, ValueError) as exc:
        print(f"clean: error: {exc}", file=sys.stderr)
        return 2
    return 0
