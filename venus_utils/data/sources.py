"""Reading trajectory files: parquet streamed per row group / batch, JSON and JSONL.

Raw REDSearcher rows carry ``meta`` (``{question, answer}``) and ``messages``; already-clean rows carry
``question``, ``messages`` and ``gt`` (the two input schemas of DR-Venus's ``prepare_trajectories.py``).  A file
that cannot be read, that holds no rows, or that lacks the columns of both schemas, stops the run with an
:class:`InputError` naming the file and the column; problems inside a row are left to the rules (they become
drop reasons).

A row that cannot be read at all -- a JSONL line that is not JSON, a parquet row whose strings are not UTF-8 --
is an :class:`InputError` naming the file and the line / row, or, with ``on_bad_line="drop"``, a :class:`BadRow`
that the cleaner counts under its drop reason (``bad_line``, ``invalid_utf8``).  A row nested deeper than
:data:`MAX_DEPTH` is always a :class:`BadRow` (``too_deep``): it is not JSON a trajectory can be, and deeper
structures would exhaust Python's recursion limit when they are decoded, pickled to a worker or re-encoded.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pyarrow.parquet as pq

PARQUET_SUFFIXES = (".parquet", ".pq")
JSON_SUFFIXES = (".json",)
JSONL_SUFFIXES = (".jsonl", ".ndjson")
COLUMNS = ("meta", "messages", "question", "gt", "system_prompt")

#: Deepest nesting of lists / objects accepted in a row or in a tool call's JSON (a trajectory row nests 3-4
#: levels).  It keeps every recursive step of the cleaner (decoding -- json5 fails at ~45 levels of objects --,
#: pickling to a worker, the surrogate fix, re-encoding) inside Python's recursion limit, whatever the caller's
#: stack, so that what is dropped as too_deep does not depend on the worker count or the mode.
MAX_DEPTH = 32
TOO_DEEP = "too_deep"  # drop reason: nested deeper than MAX_DEPTH
BAD_LINE = "bad_line"  # drop reason (on_bad_line="drop"): a JSONL line that is not valid JSON
INVALID_UTF8 = "invalid_utf8"  # drop reason (on_bad_line="drop"): a parquet row with strings that are not UTF-8
DROP_REASONS = (TOO_DEEP, BAD_LINE, INVALID_UTF8)
ON_BAD_LINE = ("error", "drop")


class InputError(ValueError):
    """An input file that cannot be used; the message names the file (and the column, line or row)."""


@dataclass(frozen=True)
class BadRow:
    """An input row that could not be read: ``reason`` is its drop reason, ``detail`` names file, row and cause."""

    reason: str
    detail: str


def check_on_bad_line(on_bad_line: str) -> str:
    if on_bad_line not in ON_BAD_LINE:
        raise ValueError(f"on_bad_line must be one of {ON_BAD_LINE}, got {on_bad_line!r}")
    return on_bad_line


def _bad(reason: str, detail: str, on_bad_line: str) -> BadRow:
    """The BadRow for an unreadable row, or the InputError when such rows stop the run."""
    if on_bad_line == "drop":
        return BadRow(reason, detail)
    raise InputError(f"{detail} [--on-bad-line drop counts such rows under drop reason '{reason}' and goes on]")


# --------------------------------------------------------------------------------------------------
# nesting depth


def too_deep(obj: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether lists / tuples / dicts nest more than ``limit`` levels in ``obj`` (walked without recursion)."""
    if not isinstance(obj, (list, tuple, dict)):
        return False
    stack = [(obj, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        for child in item.values() if isinstance(item, dict) else item:
            if isinstance(child, (list, tuple, dict)):
                stack.append((child, depth + 1))
    return False


_BRACKET_RE = re.compile(r"[\[\]{}]")


def text_too_deep(text: str, limit: int = MAX_DEPTH) -> bool:
    """Whether the brackets of the JSON (or json5) ``text`` nest more than ``limit`` levels, without parsing it.

    Linear time.  Brackets inside strings count too, so JSON carried in a string value (tool-call arguments given
    as a JSON string, decoded again later) is measured with the rest; no real tool call has ``limit`` brackets
    left open inside its strings.
    """
    if text.count("[") + text.count("{") <= limit:
        return False
    depth = 0
    for bracket in _BRACKET_RE.finditer(text):
        if bracket.group() in "[{":
            depth += 1
            if depth > limit:
                return True
        else:
            depth = max(depth - 1, 0)
    return False


# --------------------------------------------------------------------------------------------------
# files


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


def _no_rows(path: Path) -> InputError:
    return InputError(f"{path}: holds no rows (empty file)")


def _open_parquet(path: Path):
    try:
        return pq.ParquetFile(path)
    except Exception as exc:
        raise InputError(f"{path}: cannot read parquet file ({type(exc).__name__}: {exc})") from None


def check_parquet(path: Path):
    """The opened parquet file, once it is known to be readable, to hold rows and to have the needed columns."""
    pf = _open_parquet(path)
    check_columns(path, set(pf.schema_arrow.names))
    if pf.metadata.num_rows == 0:
        raise _no_rows(path)
    return pf


def parquet_rows(path: Path) -> int:
    return _open_parquet(path).metadata.num_rows


def parquet_batches(path: Path, batch_rows: int = 32) -> Iterator[tuple[int, Any]]:
    """(row offset, pyarrow RecordBatch) pairs, reading only the columns the cleaner uses."""
    pf = check_parquet(path)
    names = set(pf.schema_arrow.names)
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


# --------------------------------------------------------------------------------------------------
# JSON and JSONL


class _TooDeepToDecode(Exception):
    pass


def _decode(data: bytes, where: str) -> Any:
    """One JSON document; InputError when it is not JSON, _TooDeepToDecode when too deep for the decoders."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        try:  # lone surrogate escapes and NaN are valid for Python's json
            return json.loads(data)
        except RecursionError:
            raise _TooDeepToDecode() from None
        except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
            raise InputError(f"{where}: not valid JSON ({exc})") from None


def _too_deep_row(where: str) -> BadRow:
    return BadRow(TOO_DEEP, f"{where}: nested deeper than {MAX_DEPTH} levels")


def _row(data: bytes, where: str) -> Any:
    """A JSONL line or a .json array item as a row (a too_deep BadRow when nested too deep); InputError if not JSON."""
    try:
        obj = _decode(data, where)
    except _TooDeepToDecode:
        return _too_deep_row(where)
    return _too_deep_row(where) if too_deep(obj) else obj


_ARRAY_TOKEN_RE = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{},]', re.DOTALL)


def _array_items(data: bytes, path: Path) -> list[bytes] | None:
    """The items of a top-level JSON array as byte strings, split without recursion; None if ``data`` is not one."""
    start = len(data) - len(data.lstrip())
    if data[start : start + 1] != b"[":
        return None
    items, depth, begin = [], 0, start + 1
    for token in _ARRAY_TOKEN_RE.finditer(data, start):
        c = token.group()
        if c in (b"[", b"{"):
            depth += 1
        elif c in (b"]", b"}"):
            depth -= 1
            if depth == 0:
                items.append(data[begin : token.start()])
                if data[token.end() :].strip():
                    raise InputError(f"{path}: not valid JSON (extra data after the top-level array)")
                return [item for item in items if item.strip()]
        elif c == b"," and depth == 1:
            items.append(data[begin : token.start()])
            begin = token.end()
    raise InputError(f"{path}: not valid JSON (the top-level array is not closed)")


def _jsonl_rows(data: bytes, path: Path, on_bad_line: str) -> list[Any]:
    rows = []
    for n, line in enumerate(data.splitlines(), 1):
        if line.strip():
            try:
                rows.append(_row(line, f"{path}:{n}"))
            except InputError as exc:
                rows.append(_bad(BAD_LINE, str(exc), on_bad_line))
    return rows


def _json_document_rows(data: bytes, path: Path) -> list[Any]:
    """The rows of a .json file: one document, so a broken one is an error whatever ``on_bad_line`` says."""
    if not data.strip():
        return []
    try:
        obj = _decode(data, str(path))
    except _TooDeepToDecode:  # too deep to decode whole: decode the array's rows one by one
        items = _array_items(data, path)
        if items is None:
            return [_too_deep_row(str(path))]
        return [_row(item, f"{path}: row {i}") for i, item in enumerate(items)]
    rows = obj if isinstance(obj, list) else [obj]
    return [_too_deep_row(f"{path}: row {i}") if too_deep(row) else row for i, row in enumerate(rows)]


def json_rows(path: Path, on_bad_line: str = "error") -> list[Any]:
    """The rows of a .json (one object or a list of objects) or .jsonl file; unreadable ones as :class:`BadRow`."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read file ({exc})") from None
    if kind_of(path) == "jsonl":
        rows = _jsonl_rows(data, path, check_on_bad_line(on_bad_line))
    else:
        rows = _json_document_rows(data, path)
    if not rows:
        raise _no_rows(path)
    keys: set[str] = set()
    readable = False
    for row in rows:
        if isinstance(row, dict):
            keys.update(row)
        readable = readable or not isinstance(row, BadRow)
    if readable:
        check_columns(path, keys)
    return rows


# --------------------------------------------------------------------------------------------------
# batches


def iter_batches(path: Path, batch_rows: int = 32, on_bad_line: str = "error") -> Iterator[tuple[int, Any]]:
    """(row offset, batch) for any supported file; a batch is a RecordBatch or a list of row dicts (and BadRows)."""
    kind = kind_of(path)
    if kind == "parquet":
        yield from parquet_batches(path, batch_rows)
        return
    rows = json_rows(path, on_bad_line)
    for start in range(0, len(rows), batch_rows):
        yield start, rows[start : start + batch_rows]


def batch_to_rows(batch: Any, where: str | Path = "", offset: int = 0, on_bad_line: str = "error") -> list:
    """The rows of a batch; a parquet row that cannot be decoded (strings not UTF-8) is an InputError naming
    ``where`` (the file), the row (``offset`` + its index in the batch) and the column, or a BadRow (``drop``)."""
    if not hasattr(batch, "to_pylist"):
        return list(batch)
    try:
        return batch.to_pylist()
    except UnicodeDecodeError:
        pass
    rows = []
    for i in range(batch.num_rows):
        one = batch.slice(i, 1)
        try:
            rows.append(one.to_pylist()[0])
        except UnicodeDecodeError as exc:
            bad = [name for name, column in zip(one.schema.names, one.columns) if not _decodes(column)]
            column = f", column '{bad[0]}'" if bad else ""
            rows.append(_bad(INVALID_UTF8, f"{where}: row {offset + i}{column}: invalid UTF-8 ({exc})", on_bad_line))
    return rows


def _decodes(column) -> bool:
    try:
        column.to_pylist()
        return True
    except UnicodeDecodeError:
        return False


def count_rows(files: list[Path]) -> int | None:
    """Total rows when cheap to know (parquet metadata); None when a JSON file would have to be parsed."""
    total = 0
    for path in files:
        if kind_of(path) != "parquet":
            return None
        total += parquet_rows(path)
    return total


def read_rows(files: list[Path], limit: int) -> list:
    """The first ``limit`` readable rows of ``files`` (for looking at data, not for cleaning it)."""
    rows: list = []
    for path in files:
        for offset, batch in iter_batches(path, batch_rows=min(limit, 64)):
            rows.extend(r for r in batch_to_rows(batch, path, offset) if not isinstance(r, BadRow))
            if len(rows) >= limit:
                return rows[:limit]
    return rows
