"""The cleaner split over machines: ``--shard i/n`` runs, then one ``--merge-shards`` run.

    python -m venus_utils.data.clean -i RAW -o shards/0 --shard 0/3      # on three machines (or processes)
    python -m venus_utils.data.clean -i RAW -o shards/1 --shard 1/3
    python -m venus_utils.data.clean -i RAW -o shards/2 --shard 2/3
    python -m venus_utils.data.clean -i RAW -o OUT --merge-shards shards/0 shards/1 shards/2 [same options]

Shard ``i`` cleans the input batches whose index is ``i`` modulo ``n`` (batches of ``--batch-rows`` rows, in
input-file order, so every shard agrees on the numbering) and writes ``shard.json`` (each batch's statistics and
kept-row records) plus its Arrow part files.  The merge reads every shard, checks that they were made with the
same input and cleaning settings and that each batch appears exactly once, and runs the single run's finishing steps
(:func:`.finish.finish`: length filter, correctness judge, resampling, split, writing) on the batches in input
order.  Its outputs and ``stats.json`` are therefore those of one run over the whole input, except timings, paths
and ``workers`` (tested).  The judge, ``--max-tokens``, the resampling and the split are applied at the merge,
with its options.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from ...core.io import write_json
from ...judging.judge import Judge
from .. import rules
from .batches import SHARD_FILE, BatchResult, CleanConfig, KeptRow, RunPaths, WorkerConfig, hold_output, run_tasks
from .finish import finish

FORMAT = "venus-clean-shard/1"
COUNTERS = ("dropped", "pruned_names", "tools", "fixes", "removed")  # BatchResult's Counter fields
PART_FILES = ("part", "stage1_part")  # BatchResult's part file fields


def _settings(cfg: CleanConfig, opts: rules.RuleOptions, files: list[Path]) -> dict[str, Any]:
    """What decides a batch's cleaning result: the rules' options, the tokenizer, the batching, the input files."""
    rules_opts = asdict(opts)
    rules_opts["allowed_tools"] = sorted(rules_opts["allowed_tools"])
    return {
        "rules": rules_opts,
        "tokenizer": str(cfg.tokenizer) if cfg.tokenizer else None,
        "batch_rows": cfg.batch_rows,
        "files": [p.name for p in files],
        "on_bad_line": cfg.on_bad_line,
    }


def result_record(res: BatchResult) -> dict[str, Any]:
    """A batch result as ``shard.json`` holds it: counters as dicts, part files by name (shard folders can move),
    kept rows as lists."""
    record = {f.name: getattr(res, f.name) for f in fields(res)}
    for key in COUNTERS:
        record[key] = dict(record[key])
    for key in PART_FILES:
        record[key] = Path(record[key]).name if record[key] else None
    record["kept"] = [list(k) for k in res.kept]
    return record


def result_from_record(record: dict[str, Any], parts_dir: Path) -> BatchResult:
    """The batch result of a ``shard.json`` record, its part files in ``parts_dir``."""
    values = {f.name: record[f.name] for f in fields(BatchResult) if f.name in record}
    for key in COUNTERS:
        values[key] = Counter(values[key])
    for key in PART_FILES:
        values[key] = str(parts_dir / values[key]) if values[key] else None
    values["kept"] = [KeptRow(*k) for k in values["kept"]]
    return BatchResult(**values)


def run_shard(cfg: CleanConfig, paths: RunPaths, opts: rules.RuleOptions) -> dict[str, Any]:
    """Clean this shard's batches (``cfg.shard``) into ``paths.output_dir``: part files and ``shard.json``."""
    t0 = time.perf_counter()
    parts = paths.output_dir / "parts"
    parts.mkdir(parents=True, exist_ok=True)
    for old in parts.glob("*.arrow"):  # a rerun replaces the shard
        old.unlink()
    seen = {"tasks": 0}
    results = run_tasks(paths.files, WorkerConfig.for_run(cfg, opts, parts), cfg, None, seen)
    index, count = cfg.shard
    record = {
        "format": FORMAT,
        "shard": [index, count],
        "input": str(paths.input),
        "files": [str(p) for p in paths.files],
        "tasks_total": seen["tasks"],
        "settings": _settings(cfg, opts, paths.files),
        "results": [result_record(r) for r in results],
        "rows": sum(r.source for r in results),
        "seconds": round(time.perf_counter() - t0, 3),
    }
    write_json(paths.output_dir / SHARD_FILE, record)
    if cfg.progress:
        print(
            f"shard {index}/{count}: {len(results)} of {seen['tasks']} batches, {record['rows']} rows "
            f"-> {paths.output_dir}"
        )
    return {k: v for k, v in record.items() if k != "results"}


def read_shards(shard_dirs: list[str | Path]) -> list[dict]:
    records = []
    for folder in shard_dirs:
        path = Path(folder) / SHARD_FILE
        if not path.exists():
            raise FileNotFoundError(f"{path}: not a cleaner shard (run the cleaner with --shard i/n first)")
        record = json.loads(path.read_text(encoding="utf-8"))
        if record.get("format") != FORMAT:
            raise ValueError(f"{path}: format {record.get('format')!r}, expected {FORMAT!r}")
        record["dir"] = Path(folder).resolve()
        records.append(record)
    if not records:
        raise ValueError("no shard folders given")
    return records


def _check_shards(records: list[dict], expected: dict[str, Any]) -> None:
    """The shards were made with the merge's settings, over the same input, and are every shard 0..n-1 once."""
    counts = {r["shard"][1] for r in records}
    if len(counts) != 1:
        raise ValueError(f"shards of different splits: n = {sorted(counts)}")
    for r in records:
        for key, value in expected.items():
            if r["settings"].get(key) != value:
                raise ValueError(
                    f"{r['dir']}: made with {key}={r['settings'].get(key)!r}, but this merge uses "
                    f"{value!r}; merge with the options the shards were cleaned with"
                )
        if r["tasks_total"] != records[0]["tasks_total"] or r["input"] != records[0]["input"]:
            raise ValueError(
                f"{r['dir']}: input {r['input']} ({r['tasks_total']} batches) differs from "
                f"{records[0]['input']} ({records[0]['tasks_total']} batches)"
            )
    shard_ids = sorted(r["shard"][0] for r in records)
    if shard_ids != list(range(counts.pop())):
        raise ValueError(f"shards {shard_ids} given: every shard 0..n-1 is needed exactly once")


def merge_shards(cfg: CleanConfig, shard_dirs: list[str | Path], judge: Judge | None = None) -> dict[str, Any]:
    """Finish a sharded run into ``cfg.output_dir``; returns the stats (as :func:`..run_clean`)."""
    t_start = time.perf_counter()
    records = read_shards(shard_dirs)
    files = [Path(p) for p in records[0]["files"]]
    opts = cfg.rule_options()
    _check_shards(records, _settings(cfg, opts, files))
    results = [result_from_record(res, r["dir"] / "parts") for r in records for res in r["results"]]
    results.sort(key=lambda res: res.index)
    if [res.index for res in results] != list(range(records[0]["tasks_total"])):
        raise ValueError("the shards do not cover every input batch exactly once")
    paths = RunPaths(Path(records[0]["input"]), files, Path(cfg.output_dir).expanduser().resolve())
    timings = {"clean": round(max(r["seconds"] for r in records), 3)}
    with hold_output(paths.output_dir, cfg.progress):
        stats = finish(cfg, paths, results, timings, t_start, judge)
        stats["shards"] = {"count": len(records), "dirs": [str(r["dir"]) for r in records]}
        write_json(paths.output_dir / "stats.json", stats)
    return stats
