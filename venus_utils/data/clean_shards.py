"""The cleaner split over machines: ``--shard i/n`` runs, then one ``--merge-shards`` run.

    python -m venus_utils.data.clean -i RAW -o shards/0 --shard 0/3      # on three machines (or processes)
    python -m venus_utils.data.clean -i RAW -o shards/1 --shard 1/3
    python -m venus_utils.data.clean -i RAW -o shards/2 --shard 2/3
    python -m venus_utils.data.clean -i RAW -o OUT --merge-shards shards/0 shards/1 shards/2 [same options]

Shard ``i`` cleans the input batches whose index is ``i`` modulo ``n`` (batches of ``--batch-rows`` rows, in
input-file order, so every shard agrees on the numbering) and writes ``shard.json`` (each batch's statistics and
kept-row records) plus its Arrow part files.  The merge reads every shard, checks that they were made with the
same input and cleaning settings and that each batch appears exactly once, and runs the single-run finishing step
(correctness judge, length filter, resampling, split, writing) on the batches in input order.  Its outputs and
``stats.json`` are therefore those of one run over the whole input, except timings, paths and ``workers``
(tested).  The judge, ``--max-tokens``, the resampling and the split are applied at the merge, with its options.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..io import write_json

FORMAT = "venus-clean-shard/1"
SHARD_FILE = "shard.json"
COUNTERS = ("dropped", "pruned_names", "tools", "fixes", "removed")


def _settings(cfg, opts, files: list[Path]) -> dict[str, Any]:
    """What decides a batch's cleaning result: the rules' options, the tokenizer, the batching, the input files."""
    rules_opts = asdict(opts)
    rules_opts["allowed_tools"] = sorted(rules_opts["allowed_tools"])
    return {"rules": rules_opts, "tokenizer": str(cfg.tokenizer) if cfg.tokenizer else None,
            "batch_rows": cfg.batch_rows, "files": [p.name for p in files], "on_bad_line": cfg.on_bad_line}


def run_shard(cfg, files: list[Path], input_path: Path, output_dir: Path, opts) -> dict:
    """Clean this shard's batches (``cfg.shard``) into ``output_dir``: part files and ``shard.json``."""
    from .clean import _run_tasks, _worker_config

    t0 = time.perf_counter()
    parts = output_dir / "parts"
    parts.mkdir(parents=True, exist_ok=True)
    for old in parts.glob("*.arrow"):  # a rerun replaces the shard
        old.unlink()
    seen: dict = {"tasks": 0}
    wcfg = _worker_config(cfg, opts, parts)
    results = _run_tasks(files, wcfg, cfg, None, seen)
    for res in results:
        for key in COUNTERS:
            res[key] = dict(res[key])
        for key in ("part", "stage1_part"):
            res[key] = Path(res[key]).name if res[key] else None  # relative: shard folders can move
        res["kept"] = [list(k) for k in res["kept"]]
    index, count = cfg.shard
    record = {"format": FORMAT, "shard": [index, count], "input": str(input_path), "files": [str(p) for p in files],
              "tasks_total": seen["tasks"], "settings": _settings(cfg, opts, files), "results": results,
              "rows": sum(r["source"] for r in results), "seconds": round(time.perf_counter() - t0, 3)}
    write_json(output_dir / SHARD_FILE, record)
    if cfg.progress:
        print(f"shard {index}/{count}: {len(results)} of {seen['tasks']} batches, {record['rows']} rows -> {output_dir}")
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


def merge_shards(cfg, shard_dirs: list[str | Path], judge=None) -> dict:
    """Finish a sharded run into ``cfg.output_dir``; returns the stats (as :func:`~.clean.run_clean`)."""
    from .clean import _finish, hold_output

    t_start = time.perf_counter()
    records = read_shards(shard_dirs)
    files = [Path(p) for p in records[0]["files"]]
    opts = cfg.rule_options()
    expected = _settings(cfg, opts, files)
    counts = {r["shard"][1] for r in records}
    if len(counts) != 1:
        raise ValueError(f"shards of different splits: n = {sorted(counts)}")
    for r in records:
        for key, value in expected.items():
            if r["settings"].get(key) != value:
                raise ValueError(f"{r['dir']}: made with {key}={r['settings'].get(key)!r}, but this merge uses "
                                 f"{value!r}; merge with the options the shards were cleaned with")
        if r["tasks_total"] != records[0]["tasks_total"] or r["input"] != records[0]["input"]:
            raise ValueError(f"{r['dir']}: input {r['input']} ({r['tasks_total']} batches) differs from "
                             f"{records[0]['input']} ({records[0]['tasks_total']} batches)")
    shard_ids = sorted(r["shard"][0] for r in records)
    if shard_ids != list(range(counts.pop())):
        raise ValueError(f"shards {shard_ids} given: every shard 0..n-1 is needed exactly once")
    results = []
    for r in records:
        for res in r["results"]:
            for key in COUNTERS:
                res[key] = Counter(res[key])
            for key in ("part", "stage1_part"):
                res[key] = str(r["dir"] / "parts" / res[key]) if res[key] else None
            res["kept"] = [tuple(k) for k in res["kept"]]
            results.append(res)
    results.sort(key=lambda res: res["index"])
    if [res["index"] for res in results] != list(range(records[0]["tasks_total"])):
        raise ValueError("the shards do not cover every input batch exactly once")
    output_dir = Path(cfg.output_dir).expanduser().resolve()
    timings = {"clean": round(max(r["seconds"] for r in records), 3)}
    with hold_output(output_dir, cfg.progress):
        stats = _finish(cfg, files, Path(records[0]["input"]), output_dir, opts.allowed_tools, results, timings, t_start, judge)
        stats["shards"] = {"count": len(records), "dirs": [str(r["dir"]) for r in records]}
        write_json(output_dir / "stats.json", stats)
    return stats
