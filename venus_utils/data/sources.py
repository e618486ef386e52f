"""Reading trajectory files: parquet streamed per row group / batch, JSON and JSONL.

Raw REDSearcher rows carry ``meta`` (``{question, answer}``) and ``messages``; already-clean rows carry
``question``, ``messages`` and ``gt`` (spec sft-data.md §1).  A file that cannot be read, or that lacks the
columns of both schemas, stops the run with an :class:`InputError` naming the file and the column;
problems inside a row are left to the rules (they become drop reasons).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import orjson

PARQUET_SUFFIXES = (".parquet", ".pq")
JSON_SUFFIXES = (".json",)
JSONL_SUFFIXES = (".jsonl", ".ndjson")
COLUMNS = ("meta", "messages", "question", "gt", "system_prompt")


class InputError(ValueError):
    """An input file that cannot be used; the message names the file (and the column)."""


def list_input_files(input_path: str | Path, file_pattern: str = "train-*.parquet") -> list[Path]:
    """The file itself, or the folder's files matching ``file_pattern``, sorted by name."""
    path = Path(input_path).expanduser().resolve()
    if path.is_file():
        return [path]
    if not path.exists():
        raise FileNotFoundError(f"input {path} does not exist")
    files = sorted(p for p in path.glob(file_pattern) if p.is_file())
    if not files:
        raise FileNotFoundError(f"No input files found under {path} with pattern {file_pattern!r}")
    return files


def kind_of(path: Path) -> str:
    name = path.name.lower()
    if name.endswith(PARQUET_SUFFIXES):
        return "parquet"
    if name.endswith(JSONL_SUFFIXES):
        return "jsonl"
    if name.endswith(JSON_SUFFIXES):
        return "json"
    raise InputError(f"{path}: unsupported file type (expected .parquet, .json or .jsonl)")


def check_columns(path: Path, columns: set[str]) -> None:
    """Raise unless the columns fit the raw (meta, messages) or clean (question, messages, gt) schema."""
    if "messages" not in columns:
        raise InputError(f"{path}: missing column 'messages' (columns: {sorted(columns)})")
    if "meta" in columns:
        return
    for name in ("question", "gt"):
        if name not in columns:
            raise InputError(
                f"{path}: missing column '{name}': rows need 'meta' (raw REDSearcher schema) or 'question' and 'gt' "
                f"(clean schema); columns: {sorted(columns)}"
            )


def _open_parquet(path: Path):
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(path)
    except Exception as exc:
        raise InputError(f"{path}: cannot read parquet file ({type(exc).__name__}: {exc})") from None


def parquet_rows(path: Path) -> int:
    return _open_parquet(path).metadata.num_rows


def parquet_batches(path: Path, batch_rows: int = 32) -> Iterator[tuple[int, Any]]:
    """(row offset, pyarrow RecordBatch) pairs, reading only the columns the cleaner uses."""
    pf = _open_parquet(path)
    names = set(pf.schema_arrow.names)
    check_columns(path, names)
    columns = [c for c in COLUMNS if c in names]
    offset = 0
    try:
        for batch in pf.iter_batches(batch_size=batch_rows, columns=columns, use_threads=False):
            yield offset, batch
            offset += batch.num_rows
    except InputError:
        raise
    except Exception as exc:
        raise InputError(f"{path}: cannot read rows from {offset} on ({type(exc).__name__}: {exc})") from None


def _loads(data: bytes | str, where: str) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        try:  # lone surrogate escapes and NaN are valid for Python's json
            return json.loads(data)
        except ValueError as exc:
            raise InputError(f"{where}: not valid JSON ({exc})") from None


def json_rows(path: Path) -> list[Any]:
    """The rows of a .json (one object or a list of objects) or .jsonl file."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read file ({exc})") from None
    if kind_of(path) == "jsonl":
        rows = [_loads(line, f"{path}:{n}") for n, line in enumerate(data.splitlines(), 1) if line.strip()]
    else:
        obj = _loads(data, str(path))
        rows = obj if isinstance(obj, list) else [obj]
    keys: set[str] = set()
    for row in rows:
        if isinstance(row, dict):
            keys.update(row)
    if rows:
        check_columns(path, keys)
    return rows


def iter_batches(path: Path, batch_rows: int = 32) -> Iterator[tuple[int, Any]]:
    """(row offset, batch) for any supported file; a batch is a RecordBatch or a list of row dicts."""
    kind = kind_of(path)
    if kind == "parquet":
        yield from parquet_batches(path, batch_rows)
        return
    rows = json_rows(path)
    for start in range(0, len(rows), batch_rows):
        yield start, rows[start : start + batch_rows]


def batch_to_rows(batch: Any) -> list:
    return batch.to_pylist() if hasattr(batch, "to_pylist") else list(batch)


def count_rows(files: list[Path]) -> int | None:
    """Total rows when cheap to know (parquet metadata); None when a JSON file would have to be parsed."""
    total = 0
    for path in files:
        if kind_of(path) != "parquet":
            return None
        total += parquet_rows(path)
    return total


def read_rows(files: list[Path], limit: int) -> list:
    """The first ``limit`` rows of ``files`` (for looking at data, not for cleaning it)."""
    rows: list = []
    for path in files:
        for _, batch in iter_batches(path, batch_rows=min(limit, 64)):
            rows.extend(batch_to_rows(batch))
            if len(rows) >= limit:
                return rows[:limit]
    return rows
