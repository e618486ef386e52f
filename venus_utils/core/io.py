"""Atomic file writing and small JSON helpers.

Every artifact the recipe writes goes through :func:`atomic_write` (or one of its wrappers): the data is
written to a temporary file in the destination folder and moved into place with ``os.replace``, so a
reader never sees a half-written file and a killed run leaves the previous version intact.

A save that fails for lack of space (a full disk, or a quota) is reported as such by every writer here and by
:func:`explain_disk_full` around other saves (the trainers' checkpoints): ``OSError(ENOSPC, "No space left on
device: saving <path> needs about N MB, M MB free")`` instead of what the writing library said (PyTorch's
``basic_ios::clear`` / ``PytorchStreamWriter failed``, safetensors' ``IoError``).  The previous version stays intact.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


def _umask() -> int:
    """The process umask, read without changing it where the system shows it (``os.umask`` sets it to read it,
    which races with other threads creating files)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, needed: int | None = None) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it replaces ``path`` atomically.

    Use it for writers that want a file name (``pyarrow.parquet.write_table``, ``save_pretrained`` of a
    single file...).  On an exception the temporary file is removed and ``path`` is left untouched; a failure for
    lack of space is raised as :class:`DiskFull` (``needed``: the bytes to write, when known; else the size of the
    previous version or of what was written).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.fchmod(fd, 0o666 & ~_umask())  # the mode an ordinary open() would give, not mkstemp's private 0600
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    except BaseException as exc:
        full = disk_full_error(exc, path, lambda: needed or max(_size(path), _size(tmp_path)))  # before the cleanup
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()
        if full is not None:
            raise full from exc
        raise


#: The file that lists what a tool of this project wrote into an output folder (:func:`atomic_dir` with ``tool``):
#: the folder may be replaced only while it holds nothing else.
WRITTEN_MARKER = ".venus-written.json"


class FolderNotOurs(ValueError):
    """An output folder that a command may not replace: it holds a file the command did not write, it is a symbolic
    link, or it (or a folder above it) is a file.  The message is one line naming the path and the first such file."""


def _listed_files(folder: Path, marker: str) -> set[str] | None:
    """The files ``marker`` in ``folder`` lists (paths relative to the folder), or None when it lists none."""
    try:
        record = json.loads((folder / marker).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    files = record.get("files") if isinstance(record, dict) else None
    return {str(f) for f in files} if isinstance(files, list) else None


def folder_files(folder: Path) -> Iterator[str]:
    """Every entry under ``folder`` that is not a folder (files, links, anything else), as a path relative to it,
    in a stable order; links are listed, never followed."""
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        base = Path(root)
        for name in sorted(files + [d for d in dirs if (base / d).is_symlink()]):
            yield (base / name).relative_to(folder).as_posix()


def check_replaceable(path: str | os.PathLike, tool: str, marker: str = WRITTEN_MARKER) -> None:
    """Refuse (:class:`FolderNotOurs`) to let ``tool`` replace ``path`` unless it is missing, an empty folder, or a
    folder holding only the files its ``marker`` lists (what a tool of this project wrote there, and said so).  A
    symbolic link, a file, or a file where a folder above it should be is refused too."""
    path = Path(path)
    if path.is_symlink():
        target = os.path.realpath(path)
        raise FolderNotOurs(f"{path}: is a symbolic link (to {target}); {tool} writes only into a real folder")
    if not path.exists():
        for parent in path.parents:
            if parent.exists() or parent.is_symlink():
                if not parent.is_dir():
                    raise FolderNotOurs(f"{path}: {parent} is a file, not a folder")
                break
        return
    if not path.is_dir():
        raise FolderNotOurs(f"{path}: is a file, not a folder")
    listed = _listed_files(path, marker)
    for name in folder_files(path):
        if name == marker:
            continue
        if listed is None or name not in listed:
            raise FolderNotOurs(
                f"{path}: holds {name}, which {tool} did not write there; move it away or choose another folder "
                "(an output folder is replaced only while it holds nothing but what this tool wrote)"
            )


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike, tool: str | None = None, marker: str = WRITTEN_MARKER) -> Iterator[Path]:
    """Yield a temporary sibling folder; on success it replaces the folder ``path`` (models, adapters, worlds).

    A killed or failed writer leaves the previous folder intact and no half-written one behind; a failure for lack
    of space is raised as :class:`DiskFull` (the bytes needed: about the previous folder's, or what was written).

    ``tool`` (a command's name): ``path`` is checked with :func:`check_replaceable` before anything is written and
    again just before it is replaced, and ``marker`` in the new folder lists every file written (a JSON object; one
    the writer made itself gains the ``files`` key), so that a later run of a tool may replace it while nobody has
    added anything.  Without ``tool`` (a stage's own folders, inside a stage folder it holds) the folder is replaced
    as it is.
    """
    path = Path(path)
    if tool is not None:
        check_replaceable(path, tool, marker)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    tmp.chmod(0o777 & ~_umask())
    try:
        yield tmp
        if tool is not None:
            try:
                record = json.loads((tmp / marker).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                record = {}
            record = {**(record if isinstance(record, dict) else {}), "written_by": tool}
            record["files"] = [f for f in folder_files(tmp) if f != marker]
            atomic_write(tmp / marker, json.dumps(record, indent=2, ensure_ascii=False) + "\n")
            check_replaceable(path, tool, marker)  # nothing was added meanwhile
        if path.exists():
            shutil.rmtree(path)
        tmp.rename(path)
    except BaseException as exc:
        full = disk_full_error(exc, path, lambda: max(folder_bytes(path), folder_bytes(tmp)))  # before the cleanup
        shutil.rmtree(tmp, ignore_errors=True)
        if full is not None:
            raise full from exc
        raise


# --------------------------------------------------------------------------------------------------------------
# A full disk, said so

#: what the writing libraries say when a write found no space (checked in lower case)
FULL_DISK_TEXTS = ("no space left on device", "storagefull", "os error 28", "code: 28", "errno 28")
#: what they say when a stream write failed without saying why (PyTorch's zip writer, C++ iostreams)
STREAM_WRITE_TEXTS = (
    "basic_ios::clear",
    "iostream error",
    "pytorchstreamwriter failed",
    "file write failed",
    "unexpected pos",
)
#: a failed stream write is taken for a full disk when less than the save's size plus this much is free (the size is
#: an estimate, and a file system needs room for its own records)
SLACK_BYTES = 64 * 2**20


class DiskFull(OSError):
    """A save failed for lack of space (``errno`` ENOSPC or EDQUOT); the message names the path and the sizes."""


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def folder_bytes(path: str | os.PathLike) -> int:
    """Bytes of the files under ``path`` (a file: its size; missing: 0)."""
    path = Path(path)
    if not path.is_dir():
        return _size(path)
    total = 0
    for root, _dirs, files in os.walk(path):
        total += sum(_size(Path(root, f)) for f in files)
    return total


def free_bytes(path: str | os.PathLike) -> int | None:
    """Free space for an unprivileged writer on the file system of ``path`` (its nearest existing folder)."""
    path = Path(path).absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return None


def _amount(n: int | None) -> str:
    """``n`` bytes for a message: ``512 bytes``, ``40.2 kB``, ``3.1 MB``, ``8,046 MB``."""
    if n is None:
        return "? MB"
    if n < 1000:
        return f"{n} bytes"
    if n < 100_000:
        return f"{n / 1e3:.1f} kB"
    return f"{n / 1e6:.1f} MB" if n < 10e6 else f"{n / 1e6:,.0f} MB"


def disk_full_error(
    exc: BaseException,
    path: str | os.PathLike,
    needed: int | Callable[[], int] | None = None,
    advice: str = "free some space and run again",
) -> DiskFull | None:
    """``exc`` (raised while saving ``path``) as a :class:`DiskFull` naming ``path``, the bytes ``needed`` (a number,
    or a function called only now) and the bytes free; None when ``exc`` is not a full disk.

    A full disk is an ``OSError`` with errno ENOSPC / EDQUOT, an error whose text says so (safetensors:
    ``IoError(Os { code: 28, kind: StorageFull ...``), or a failed stream write (PyTorch: ``basic_ios::clear``,
    ``PytorchStreamWriter failed``, ``file write failed``) while less than what the save needs plus
    :data:`SLACK_BYTES` is free.  Anything else, and an error already explained, is None.
    """
    if not isinstance(exc, Exception) or isinstance(exc, DiskFull):
        return None
    text = str(exc).lower()
    code = exc.errno if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT) else None
    if code is None and any(t in text for t in FULL_DISK_TEXTS):
        code = errno.ENOSPC
    stream = code is None and any(t in text for t in STREAM_WRITE_TEXTS)
    if code is None and not stream:
        return None
    try:
        wanted = int(needed() if callable(needed) else needed or 0)
    except Exception:  # an estimate only: never hide the error behind another
        wanted = 0
    free = free_bytes(path)
    if stream:
        if free is None or free >= wanted + SLACK_BYTES:
            return None  # a stream error with room to spare: something else
        code = errno.ENOSPC
    what = "Disk quota exceeded" if code == errno.EDQUOT else "No space left on device"
    need = f"needs about {_amount(wanted)}" if wanted else "failed"
    message = f"{what}: saving {os.fspath(path)} {need}, {_amount(free)} free"
    return DiskFull(code, f"{message}; {advice}" if advice else message)


@contextlib.contextmanager
def explain_disk_full(
    path: str | os.PathLike,
    needed: int | Callable[[], int] | None = None,
    advice: str = "free some space and run again",
) -> Iterator[None]:
    """Run a save of ``path`` (``torch.save``, ``save_pretrained``...); a failure for lack of space is raised as
    :class:`DiskFull` (:func:`disk_full_error`), the original error as its cause; other errors pass unchanged."""
    try:
        yield
    except Exception as exc:
        full = disk_full_error(exc, path, needed, advice)
        if full is None:
            raise
        raise full from exc


def atomic_write(path: str | os.PathLike, data: str | bytes) -> Path:
    """Write text or bytes to ``path`` atomically and return the path."""
    path = Path(path)
    with atomic_path(path, len(data)) as tmp:  # characters: about the bytes
        if isinstance(data, bytes):
            tmp.write_bytes(data)
        else:
            tmp.write_text(data, encoding="utf-8")
    return path


def _default(obj: Any) -> Any:
    # numpy scalars / arrays and paths show up in summaries; make them JSON without importing numpy.
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if hasattr(obj, "item"):
        return obj.item()
    if isinstance(obj, (Path, os.PathLike)):
        return str(obj)
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


def dumps_json(obj: Any, *, indent: int | None = 2) -> str:
    return json.dumps(obj, indent=indent, ensure_ascii=False, default=_default, allow_nan=True)


def write_json(path: str | os.PathLike, obj: Any, *, indent: int | None = 2) -> Path:
    return atomic_write(path, dumps_json(obj, indent=indent) + "\n")


def read_json(path: str | os.PathLike) -> Any:
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: file not found") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from None


def write_jsonl(path: str | os.PathLike, rows) -> Path:
    return atomic_write(path, "".join(dumps_json(r, indent=None) + "\n" for r in rows))


def read_jsonl(path: str | os.PathLike) -> list[Any]:
    """One value per non-empty line of ``path`` (gzip-compressed when it ends in ``.gz``)."""
    path = Path(path)
    rows = []
    opened = gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else path.open(encoding="utf-8")
    with opened as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{lineno}: not valid JSON ({exc})") from None
    return rows
