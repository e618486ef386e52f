"""The cleaner's finishing steps: the cleaned batches (one run's, or every shard's) into the outputs and
``stats.json``.

:func:`finish` runs them in order over the :class:`~.batches.BatchResult` of every input batch:

1. :func:`merge_batches` — the batches' statistics merged in input order, their valid rows listed;
2. :func:`length_filter` — ``--max-tokens``: rows longer than that dropped (``too_long``);
3. :func:`judge_rows` — strict mode: the correctness judge (``incorrect_answer``, ``judge_error``);
4. :func:`resample` — the turn-aware resampling plan of the rows left, and its bucket statistics;
5. :func:`split_rows` — strict ``--val-fraction``: the seeded question-level train/val split, each side planned;
6. :func:`write_outputs` — the parquet / JSONL files, streamed row group by row group from the workers' part files;
7. :func:`build_stats` — the content of ``stats.json``.

The filters drop rows by their position in :attr:`MergedBatches.rows`; each step takes the positions still in
(``alive``, in input order) and the filters return those they keep.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.parquet as pq

from ...core.io import atomic_path, write_json, write_jsonl
from ...judging import answers
from ...judging.judge import Judge, Verdict
from .. import rules, sources
from ..resample import ResamplePolicy, bucket_stats, permutation, plan, split_groups
from .batches import BAD_ROWS_LISTED, BatchResult, CleanConfig, RunPaths, messages_type

OUTPUT_COLUMNS = ("question", "messages", "gt")
META_COLUMNS = ("_source_file", "_source_row", "_turns")
STRICT_META_COLUMNS = ("_tokens", "_chars")
Order = list[tuple[int, int]]  # a resampling plan: (position in the planned rows, copy number) per output row


# --------------------------------------------------------------------------------------------------
# reading the workers' part files, writing outputs


class Parts:
    """The workers' part files, memory-mapped, read back row by row in any order under one schema."""

    def __init__(self, paths: dict[int, str]):
        self.tables = {i: pa.ipc.open_file(pa.memory_map(p)).read_all() for i, p in paths.items()}
        schemas = [t.schema for t in self.tables.values()]
        self.schema = pa.unify_schemas(schemas, promote_options="permissive") if schemas else None
        self._conformed: dict[int, Any] = {}

    def _table(self, i: int):
        if i not in self._conformed:
            table = self.tables[i]
            for name in self.schema.names:
                if name not in table.column_names:
                    table = table.append_column(name, pa.nulls(table.num_rows, self.schema.field(name).type))
            table = table.select(self.schema.names)
            if not table.schema.equals(self.schema):
                try:
                    table = table.cast(self.schema)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                    table = pa.Table.from_pylist(table.to_pylist(), schema=self.schema)
            self._conformed[i] = table
        return self._conformed[i]

    def take(self, refs: list[tuple[int, int]], columns: list[str]):
        """Rows ``(part index, row)`` in the given order, as one table with ``columns``."""
        pieces, run_part, run_rows = [], None, []
        for part, row in refs + [(None, None)]:
            if part != run_part and run_rows:
                pieces.append(self._table(run_part).select(columns).take(pa.array(run_rows, type=pa.int64())))
                run_rows = []
            run_part = part
            if part is not None:
                run_rows.append(row)
        return pa.concat_tables(pieces)


class _Writer:
    """Streams row groups to a parquet file (and optionally JSONL), atomically."""

    def __init__(self, path: Path, schema, jsonl: Path | None = None):
        self._ctx = atomic_path(path)
        tmp = self._ctx.__enter__()
        self._writer = pq.ParquetWriter(str(tmp), schema)
        self.schema = schema
        self.rows = 0
        self._jctx = self._jsonl = None
        if jsonl is not None:
            self._jctx = atomic_path(jsonl)
            self._jsonl = self._jctx.__enter__().open("w", encoding="utf-8")

    def write(self, table) -> None:
        table = table.cast(self.schema)
        self._writer.write_table(table)
        self.rows += table.num_rows
        if self._jsonl is not None:
            for record in table.to_pylist():
                self._jsonl.write(json.dumps(record, ensure_ascii=False) + "\n")

    def close(self, ok: bool = True) -> None:
        self._writer.close()
        if self._jsonl is not None:
            self._jsonl.close()
            self._jctx.__exit__(*(sys.exc_info() if not ok else (None, None, None)))
        self._ctx.__exit__(*(sys.exc_info() if not ok else (None, None, None)))


def _output_schema(parts: Parts | None, columns: list[str], extra: list[tuple[str, Any]]):
    fields = []
    for name in columns:
        if parts is not None and parts.schema is not None and name in parts.schema.names:
            fields.append(parts.schema.field(name))
        elif name == "messages":
            fields.append(pa.field(name, messages_type()))
        elif name in ("question", "gt", "_source_file"):
            fields.append(pa.field(name, pa.string()))
        else:
            fields.append(pa.field(name, pa.int64()))
    fields.extend(pa.field(n, t) for n, t in extra)
    return pa.schema(fields)


def write_rows(
    path: Path,
    parts: Parts,
    refs: list[tuple[int, int]],
    columns: list[str],
    extra: dict[str, list] | None = None,
    jsonl: Path | None = None,
    chunk: int = 64,
) -> int:
    """Write rows ``refs`` (+ extra int64 / str columns, same length) to ``path`` in row groups of ``chunk``."""
    extra = extra or {}
    types = [
        (name, pa.int64() if all(isinstance(v, int) or v is None for v in vals) else pa.string())
        for name, vals in extra.items()
    ]
    writer = _Writer(path, _output_schema(parts, columns, types), jsonl)
    ok = False
    try:
        for start in range(0, len(refs), chunk):
            table = parts.take(refs[start : start + chunk], columns)
            for name, typ in types:
                table = table.append_column(name, pa.array(extra[name][start : start + chunk], type=typ))
            writer.write(table)
        if not refs:
            writer.write(pa.Table.from_pylist([], schema=writer.schema))
        ok = True
    finally:
        writer.close(ok)
    return writer.rows


def concat_parts(path: Path, paths: list[str]) -> int:
    """The part files ``paths`` one after the other into the parquet file ``path``; rows written."""
    parts = Parts(dict(enumerate(paths)))
    refs = [(i, r) for i, t in parts.tables.items() for r in range(t.num_rows)]
    return write_rows(path, parts, refs, list(parts.schema.names))


# --------------------------------------------------------------------------------------------------
# 1. merging the batches


class ValidRow(NamedTuple):
    """A row that passed the rules, over the whole input: where its messages lie (batch part file, row) and what
    the filters, the resampling and the split need."""

    part: int  # the batch's index (key of its part file)
    row: int  # row in the part file
    turns: int
    question: str
    answer: str | None
    gt: str
    tokens: int | None
    chars: int
    file: str  # input file name
    source_row: int  # row in the input file


@dataclass
class FileCounts:
    """One input file's counts (an entry of ``stats.json["per_file"]``)."""

    source_rows: int = 0
    stage1_rows: int = 0
    stage2_rows: int = 0
    dropped: Counter[str] = field(default_factory=Counter)
    pruned_tool_turns_removed: int = 0
    pruned_tool_response_turns_removed: int = 0
    duplicate_tool_turns_removed: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "source_rows": self.source_rows,
            "stage1_rows": self.stage1_rows,
            "stage2_rows": self.stage2_rows,
            "dropped": dict(self.dropped),
            "pruned_tool_turns_removed": self.pruned_tool_turns_removed,
            "pruned_tool_response_turns_removed": self.pruned_tool_response_turns_removed,
            "duplicate_tool_turns_removed": self.duplicate_tool_turns_removed,
        }


@dataclass
class MergedBatches:
    """Every batch's result merged in input order: the run's counts, each file's, and the valid rows."""

    per_file: dict[str, FileCounts]  # input file name -> counts, in input order
    rows: list[ValidRow] = field(default_factory=list)
    source: int = 0
    stage1: int = 0
    pruned_turns: int = 0
    pruned_responses: int = 0
    duplicates: int = 0
    dropped: Counter[str] = field(default_factory=Counter)
    pruned_names: Counter[str] = field(default_factory=Counter)
    tools: Counter[str] = field(default_factory=Counter)
    fixes: Counter[str] = field(default_factory=Counter)
    removed: Counter[str] = field(default_factory=Counter)
    part_paths: dict[int, str] = field(default_factory=dict)  # batch index -> part file of its valid rows
    stage1_paths: list[str] = field(default_factory=list)
    stage1_errors: list[str] = field(default_factory=list)
    bad_rows: list[str] = field(default_factory=list)  # the first BAD_ROWS_LISTED

    def drop(self, i: int, reason: str) -> None:
        """Count valid row ``i`` as dropped by a filter, in the run's and its file's drop reasons."""
        self.dropped[reason] += 1
        self.per_file[self.rows[i].file].dropped[reason] += 1


def merge_batches(results: list[BatchResult], files: list[Path]) -> MergedBatches:
    """Merge the batch results (in input order) over the input ``files``."""
    merged = MergedBatches({path.name: FileCounts() for path in files})
    for res in results:
        f = merged.per_file[res.file]
        f.source_rows += res.source
        f.stage1_rows += res.stage1
        f.stage2_rows += res.stage2
        f.dropped.update(res.dropped)
        f.pruned_tool_turns_removed += res.pruned_turns
        f.pruned_tool_response_turns_removed += res.pruned_responses
        f.duplicate_tool_turns_removed += res.duplicates
        merged.source += res.source
        merged.stage1 += res.stage1
        merged.pruned_turns += res.pruned_turns
        merged.pruned_responses += res.pruned_responses
        merged.duplicates += res.duplicates
        merged.dropped.update(res.dropped)
        merged.pruned_names.update(res.pruned_names)
        merged.tools.update(res.tools)
        merged.fixes.update(res.fixes)
        merged.removed.update(res.removed)
        if res.part:
            merged.part_paths[res.index] = res.part
        if res.stage1_part:
            merged.stage1_paths.append(res.stage1_part)
        if res.stage1_error:
            merged.stage1_errors.append(res.stage1_error)
        merged.bad_rows.extend(res.bad_rows[: BAD_ROWS_LISTED - len(merged.bad_rows)])
        merged.rows.extend(
            ValidRow(res.index, k.row, k.turns, k.question, k.answer, k.gt, k.tokens, k.chars, res.file, k.source_row)
            for k in res.kept
        )
    return merged


def print_per_file(merged: MergedBatches) -> None:
    """One progress line per input file."""
    for name, f in merged.per_file.items():
        print(
            f"{name}: source={f.source_rows} stage1={f.stage1_rows} stage2={f.stage2_rows} "
            f"pruned_tools_removed={f.pruned_tool_turns_removed} duplicates_removed={f.duplicate_tool_turns_removed}"
        )


# --------------------------------------------------------------------------------------------------
# 2-3. filters


def length_filter(merged: MergedBatches, alive: list[int], max_tokens: int | None) -> list[int]:
    """The rows of ``alive`` with at most ``max_tokens`` tokens (all without a limit); the others dropped
    ``too_long``."""
    if not max_tokens:
        return alive
    keep = []
    for i in alive:
        tokens = merged.rows[i].tokens
        if tokens is not None and tokens > max_tokens:
            merged.drop(i, "too_long")
        else:
            keep.append(i)
    return keep


@dataclass
class Judged:
    """What the correctness judge decided about the rows it saw."""

    alive: list[int]  # the rows judged correct
    verdicts: dict[int, Verdict]  # row -> verdict, every row judged
    judgements: list[dict[str, Any]]  # judgements.jsonl, one per row judged
    info: dict[str, Any]  # stats.json["judge"]
    seconds: float


def judge_rows(
    cfg: CleanConfig, merged: MergedBatches, alive: list[int], output_dir: Path, judge: Judge | None = None
) -> Judged:
    """Judge each row's final answer against its ``gt``; rows judged wrong are dropped ``incorrect_answer``, rows
    the judge failed on ``judge_error``.  Without ``judge``, one from ``cfg`` (closed after)."""
    t0 = time.perf_counter()
    own_judge = judge is None
    if own_judge:
        judge = Judge.from_env(cfg.judge, cache_path=cfg.judge_cache or output_dir / "judge_cache.sqlite")
    notice = judge.describe()
    if cfg.progress:
        print(f"[judge] {notice}")
    rows = [merged.rows[i] for i in alive]
    try:
        verdicts = judge.judge_many([(k.question, k.answer or "", k.gt) for k in rows], progress=cfg.progress)
    finally:
        if own_judge:
            judge.close()
    keep: list[int] = []
    by_row: dict[int, Verdict] = {}
    judgements: list[dict[str, Any]] = []
    for i, k, v in zip(alive, rows, verdicts):
        by_row[i] = v
        judgements.append(
            {
                "question": k.question,
                "answer": k.answer,
                "gt": k.gt,
                "correct": v.correct,
                "method": v.method,
                "score": v.score,
                "judge": v.judge,
                "error": v.error,
                "em": answers.exact_match(k.answer, k.gt),
                "f1": round(answers.token_f1(k.answer, k.gt), 4),
                "_source_file": k.file,
                "_source_row": k.source_row,
            }
        )
        if v.method == "error":
            merged.drop(i, "judge_error")
        elif not v.correct:
            merged.drop(i, "incorrect_answer")
        else:
            keep.append(i)
    info = {
        "kind": judge.kind,
        "name": judge.name,
        "notice": judge.describe(),  # after judging: it says how many answers fell back to the offline judge
        "methods": dict(Counter(v.method for v in verdicts)),
        "correct": sum(v.correct for v in verdicts),
        "judged": len(verdicts),
        "cached": sum(v.cached for v in verdicts),
    }
    return Judged(keep, by_row, judgements, info, round(time.perf_counter() - t0, 3))


# --------------------------------------------------------------------------------------------------
# 4-5. resampling and split


@dataclass
class Resampled:
    """The resampling plan of the rows kept (positions in ``alive``) and its bucket statistics."""

    order: Order
    buckets: dict[str, Any]  # stats.json's turn_buckets / multiplier_distribution


def resample(cfg: CleanConfig, merged: MergedBatches, alive: list[int]) -> Resampled:
    """Plan the turn-aware resampling of the rows ``alive`` (shuffled or not, seeded)."""
    turns = [merged.rows[i].turns for i in alive]
    return Resampled(plan(turns, cfg.policy, cfg.do_shuffle, cfg.seed), bucket_stats(turns, cfg.policy))


@dataclass
class Split:
    """The question-level train/val split of the rows kept: each side's rows and its order (``val``: one copy each)."""

    train_rows: list[int]
    val_rows: list[int]
    train_order: Order
    val_order: Order


def split_rows(cfg: CleanConfig, merged: MergedBatches, alive: list[int]) -> Split | None:
    """Strict ``--val-fraction``: hold out a seeded fraction of the questions; train resampled, val not (None
    without a split)."""
    if not (cfg.strict and cfg.val_fraction > 0):
        return None
    is_val = split_groups([merged.rows[i].question for i in alive], cfg.val_fraction, cfg.seed)
    train_rows = [i for i, v in zip(alive, is_val) if not v]
    val_rows = [i for i, v in zip(alive, is_val) if v]
    train_order = plan([merged.rows[i].turns for i in train_rows], cfg.policy, cfg.do_shuffle, cfg.seed)
    val_ids = permutation(len(val_rows), cfg.seed) if cfg.do_shuffle else range(len(val_rows))
    return Split(train_rows, val_rows, train_order, [(j, 0) for j in val_ids])


# --------------------------------------------------------------------------------------------------
# 6. writing


class RowWriter:
    """Writes valid rows in a resampling order, read from the part files, with the run's output columns
    (``--keep-metadata``: the meta columns, plus each row's resampling multiplier and copy number)."""

    def __init__(self, cfg: CleanConfig, merged: MergedBatches):
        self.rows = merged.rows
        self.parts = Parts(merged.part_paths)
        self.meta_columns = list(META_COLUMNS) + (list(STRICT_META_COLUMNS) if cfg.strict or cfg.tokenizer else [])
        self.columns = list(OUTPUT_COLUMNS) + (self.meta_columns if cfg.keep_metadata else [])
        self.policy: ResamplePolicy | None = cfg.policy if cfg.keep_metadata else None

    def write(self, path: Path, order: Order, rows: list[int], jsonl: Path | None = None) -> int:
        """Write ``rows[j]`` for each ``(j, copy)`` of ``order`` to ``path`` (and ``jsonl``); rows written."""
        chosen = [self.rows[rows[j]] for j, _ in order]
        extra = None
        if self.policy is not None:
            extra = {
                "_resample_multiplier": [self.policy.multiplier(k.turns) for k in chosen],
                "_sample_copy": [c for _, c in order],
            }
        return write_rows(path, self.parts, [(k.part, k.row) for k in chosen], self.columns, extra, jsonl)


@dataclass
class Written:
    """The files a run wrote (None: not written) and the rows in them."""

    final: Path
    final_rows: int
    jsonl: Path | None = None
    train: Path | None = None
    val: Path | None = None
    split_info: dict[str, Any] | None = None  # stats.json["split"]
    judgements: Path | None = None


def write_split(
    writer: RowWriter, output_dir: Path, split: Split, cfg: CleanConfig
) -> tuple[Path, Path, dict[str, Any]]:
    """``train.parquet`` and ``val.parquet``; their paths and ``stats.json["split"]``."""
    train_path, val_path = output_dir / "train.parquet", output_dir / "val.parquet"
    n_train = writer.write(train_path, split.train_order, split.train_rows)
    n_val = writer.write(val_path, split.val_order, split.val_rows)

    def questions(rows: list[int]) -> int:
        return len({writer.rows[i].question for i in rows})

    info = {
        "val_fraction": cfg.val_fraction,
        "seed": cfg.seed,
        "train_rows": n_train,
        "val_rows": n_val,
        "train_questions": questions(split.train_rows),
        "val_questions": questions(split.val_rows),
    }
    return train_path, val_path, info


def write_intermediate(
    writer: RowWriter, output_dir: Path, merged: MergedBatches, alive: list[int], judged: Judged | None, strict: bool
) -> None:
    """``--keep-intermediate``: the normalised rows (stage 1), the valid rows (stage 2) and, strict, the rows kept
    with their extracted answers and verdicts (stage 3)."""
    if merged.stage1_paths:
        concat_parts(output_dir / "stage1_normalized.parquet", merged.stage1_paths)
    if merged.part_paths:
        concat_parts(output_dir / "stage2_deduped.parquet", [merged.part_paths[i] for i in sorted(merged.part_paths)])
    if strict:
        kept = [merged.rows[i] for i in alive]
        extra: dict[str, list] = {"_answer": [k.answer for k in kept]}
        if judged is not None and judged.verdicts:
            verdicts = [judged.verdicts[i] for i in alive]
            extra.update(
                _judge_method=[v.method for v in verdicts],
                _judge_score=[None if v.score is None else str(v.score) for v in verdicts],
            )
        write_rows(
            output_dir / "stage3_kept.parquet",
            writer.parts,
            [(k.part, k.row) for k in kept],
            list(OUTPUT_COLUMNS) + writer.meta_columns,
            extra,
        )


def write_outputs(
    cfg: CleanConfig,
    output_dir: Path,
    merged: MergedBatches,
    alive: list[int],
    resampled: Resampled,
    split: Split | None,
    judged: Judged | None,
) -> Written:
    """Write the resampled rows (``cleaned_resampled.parquet``, ``--write-jsonl``), the split files, the
    intermediate files (``--keep-intermediate``) and ``judgements.jsonl``."""
    writer = RowWriter(cfg, merged)
    final = output_dir / "cleaned_resampled.parquet"
    jsonl = output_dir / "cleaned_resampled.jsonl" if cfg.write_jsonl else None
    written = Written(final, writer.write(final, resampled.order, alive, jsonl), jsonl)
    if split is not None:
        written.train, written.val, written.split_info = write_split(writer, output_dir, split, cfg)
    if cfg.keep_intermediate:
        write_intermediate(writer, output_dir, merged, alive, judged, cfg.strict)
    if judged is not None and judged.judgements:
        written.judgements = output_dir / "judgements.jsonl"
        write_jsonl(written.judgements, judged.judgements)
    return written


# --------------------------------------------------------------------------------------------------
# 7. stats.json


def build_stats(
    cfg: CleanConfig,
    paths: RunPaths,
    merged: MergedBatches,
    alive: list[int],
    resampled: Resampled,
    judged: Judged | None,
    written: Written,
    timings: dict[str, float],
) -> dict[str, Any]:
    """The content of ``stats.json``."""
    output_dir = paths.output_dir
    stats: dict[str, Any] = {
        "input": str(paths.input),
        "files": [str(p) for p in paths.files],
        "output_dir": str(output_dir),
        "system_prompt_mode": cfg.system_prompt_mode,
        "allowed_tools": sorted(cfg.allowed_tool_names),
        "turn_formula": "(len(messages) - 1) / 2",
        "resample_policy": cfg.policy.as_dict(),
        "rows": {
            "source": merged.source,
            "stage1_normalized": merged.stage1,
            "stage2_valid": len(merged.rows),
            "final_resampled": written.final_rows,
            "kept": len(alive),
        },
        "pruned_tool_turns_removed": merged.pruned_turns,
        "pruned_tool_response_turns_removed": merged.pruned_responses,
        "pruned_tool_name_counts": dict(merged.pruned_names),
        "duplicate_tool_turns_removed": merged.duplicates,
        "drop_reasons": dict(merged.dropped),
        "tools_after_cleaning": dict(merged.tools),
        **resampled.buckets,
        "per_file": {name: f.as_dict() for name, f in merged.per_file.items()},
        "artifacts": {
            "final_parquet": str(written.final),
            "final_jsonl": str(written.jsonl) if written.jsonl else None,
            "stage1_parquet": str(output_dir / "stage1_normalized.parquet") if cfg.keep_intermediate else None,
            "stage2_parquet": str(output_dir / "stage2_deduped.parquet") if cfg.keep_intermediate else None,
        },
        "mode": cfg.compat,
        "shuffle": cfg.do_shuffle,
        "seed": cfg.seed,
        "turns_removed_in_valid_rows": dict(merged.removed),
        "workers": cfg.workers or os.cpu_count(),
        "timings_s": timings,
    }
    if cfg.strict:
        stats["strict_fixes"] = {name: merged.fixes.get(name, 0) for name in rules.STRICT_FIXES}
        stats["judge"] = judged.info if judged else {"kind": "none", "notice": "correctness filter off (--judge none)"}
        stats["split"] = written.split_info
        stats["artifacts"].update(
            train_parquet=str(written.train) if written.train else None,
            val_parquet=str(written.val) if written.val else None,
            stage3_parquet=str(output_dir / "stage3_kept.parquet") if cfg.keep_intermediate else None,
            judgements=str(written.judgements) if written.judgements else None,
        )
    tokens = [merged.rows[i].tokens for i in alive if merged.rows[i].tokens is not None]
    stats["tokens"] = (
        {
            "tokenizer": str(cfg.tokenizer),
            "max_tokens": cfg.max_tokens,
            "kept_total": sum(tokens),
            "kept_mean": round(sum(tokens) / len(tokens), 1) if tokens else None,
            "kept_max": max(tokens, default=None),
        }
        if cfg.tokenizer
        else {"tokenizer": None, "note": "no --tokenizer: tokens not counted, no too_long filter"}
    )
    if merged.stage1_errors:
        stats["stage1_write_errors"] = merged.stage1_errors[:5]
    if merged.bad_rows:
        stats["bad_rows"] = merged.bad_rows
    return stats


# --------------------------------------------------------------------------------------------------
# the steps in order


def finish(
    cfg: CleanConfig,
    paths: RunPaths,
    results: list[BatchResult],
    timings: dict[str, float],
    t_start: float,
    judge: Judge | None = None,
) -> dict[str, Any]:
    """Finish a run over the cleaned batches ``results`` (input order): filter, resample, split, write the outputs
    and ``stats.json`` into ``paths.output_dir``; returns the stats.  ``timings`` (seconds, ``clean`` already in)
    gets ``judge``, ``write`` and ``total`` (since ``t_start``)."""
    merged = merge_batches(results, paths.files)
    if cfg.progress:
        print_per_file(merged)
    alive = length_filter(merged, list(range(len(merged.rows))), cfg.max_tokens)
    judged = None
    if cfg.strict and cfg.judge != "none":
        judged = judge_rows(cfg, merged, alive, paths.output_dir, judge)
        alive = judged.alive
        timings["judge"] = judged.seconds
    t0 = time.perf_counter()
    resampled = resample(cfg, merged, alive)
    split = split_rows(cfg, merged, alive)
    written = write_outputs(cfg, paths.output_dir, merged, alive, resampled, split, judged)
    timings["write"] = round(time.perf_counter() - t0, 3)
    timings["total"] = round(time.perf_counter() - t_start, 3)

    stats = build_stats(cfg, paths, merged, alive, resampled, judged, written, timings)
    if merged.bad_rows and cfg.progress:
        counts = ", ".join(f"{r}={merged.dropped[r]}" for r in sources.DROP_REASONS if merged.dropped.get(r))
        print(f"[clean] rows dropped before the rules: {counts}; first: {merged.bad_rows[0]}", file=sys.stderr)
    write_json(paths.output_dir / "stats.json", stats)
    if cfg.progress:
        print(f"Saved final parquet to: {paths.output_dir / 'cleaned_resampled.parquet'}")
        print(f"Saved stats to: {paths.output_dir / 'stats.json'}")
    return stats
