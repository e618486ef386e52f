"""One run at a time in a folder: a lock that a killed run cannot leave behind.

A run takes the lock of its folder before it deletes or writes anything there: the pipeline the run folder and the
folders of the stages it runs (:func:`venus_utils.run.pipeline.run_pipeline`), a stage run alone its stage folder
(:meth:`venus_utils.core.stage.Stage.start`, the stage command lines), a trainer its output folder, the cleaner its
output folder.  A second run on a held folder is refused at once, with the holder's pid, when it started, its command
and what to do.

The lock is an exclusive ``flock`` on a file in the folder (:data:`LOCK_FILE`, JSON: pid, host, start time, command,
token).  The kernel releases a ``flock`` when its holder ends however it ends, so a killed run's lock is free for the
next run, which reports the stale record it found ("cleared") and writes its own; a run that ends normally marks the
record released.  Where ``flock`` is not available (Windows, some network file systems) runs go on unlocked.

A holder's child processes are not refused by it:

- a process started by the holder (the pipeline's Papermill kernels, ``accelerate launch`` from a notebook) finds the
  holder's token in its environment (:data:`ENV`, set while the lock is held) and shares the lock;
- a forked process (``notebook_launcher``, data-loader workers) shares it through the process's table of held locks.

In a distributed run only the main process takes a lock; the others run under it.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import socket
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # Windows: runs go on unlocked
    fcntl = None

LOCK_FILE = ".venus.lock"
ENV = "VENUS_HELD_LOCKS"  # JSON {lock file: token} of the locks this process and its parents hold


class FolderInUse(ValueError):
    """Another live run holds the folder; ``holder`` is its record (pid, host, started, what, command)."""

    def __init__(self, message: str, holder: dict[str, Any] | None = None):
        super().__init__(message)
        self.holder = holder or {}


@dataclass
class FolderLock:
    """A folder's lock as this process has it: ``how`` is ``held`` (taken here), ``inherited`` (held by a parent
    process for this one) or ``unlocked`` (no ``flock`` on this system)."""

    folder: Path
    path: Path
    how: str
    token: str | None = None
    fd: int | None = None
    record: dict[str, Any] = field(default_factory=dict)
    pid: int = field(default_factory=os.getpid)

    @property
    def held(self) -> bool:
        return self.how == "held" and self.pid == os.getpid()

    def release(self) -> None:
        release(self)


_HELD: dict[Path, FolderLock] = {}  # lock file -> this process's lock (a forked child sees its parent's)


def _now() -> str:
    return _dt.datetime.now().astimezone().isoformat(timespec="seconds")


def _read_record(fd: int) -> dict[str, Any]:
    raw = os.pread(fd, 8192, 0).decode("utf-8", "replace").strip()
    if not raw:
        return {}
    try:
        record = json.loads(raw)
    except ValueError:
        record = None
    if isinstance(record, dict):
        return record
    first = raw.split()[0]
    return {"pid": int(first)} if first.isdigit() else {"pid": "?"}  # an older cleaner's lock: its pid only


def _inherited() -> dict[str, str]:
    try:
        held = json.loads(os.environ.get(ENV, "") or "{}")
    except ValueError:
        return {}
    return held if isinstance(held, dict) else {}


def _export(path: Path, token: str | None) -> None:
    held = _inherited()
    if token is None:
        held.pop(str(path), None)
    else:
        held[str(path)] = token
    if held:
        os.environ[ENV] = json.dumps(held)
    else:
        os.environ.pop(ENV, None)


def _alive(pid: Any) -> bool | None:
    """Whether process ``pid`` of this host runs (None: cannot tell)."""
    if not isinstance(pid, int) or pid <= 0:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by another user
    return True


def _command_line() -> str:
    """This process's command line, for the refusal message (``python -m venus_utils.sft train --params ...``)."""
    try:
        args = Path("/proc/self/cmdline").read_bytes().decode("utf-8", "replace").split("\0")[:-1]
    except OSError:
        args = [sys.executable, *sys.argv]
    if not args:
        return ""
    return " ".join([Path(args[0]).name, *args[1:]])[:300]


def describe_holder(record: dict[str, Any]) -> str:
    """``pid 123, started 2024-05-01T10:00:00+00:00 on host, `python -m ...``` for messages."""
    text = f"pid {record.get('pid', '?')}"
    if record.get("started"):
        text += f", started {record['started']}"
    if record.get("host") and record["host"] != socket.gethostname():
        text += f" on {record['host']}"
    if record.get("command"):
        text += f", `{record['command']}`"
    return text


def in_use_message(folder: Path, path: Path, record: dict[str, Any], what: str, hint: str = "") -> str:
    pid = record.get("pid", "?")
    holder = record.get("what") or what
    message = f"{folder} is in use by another {holder} (pid {pid})"
    details = describe_holder(record).removeprefix(f"pid {pid}").lstrip(", ")
    if details:
        message += f", {details}"
    same_host = record.get("host") in (None, socket.gethostname())
    if same_host and _alive(pid) is False:
        message += (
            f". That process has ended, but a process it started still holds the lock: end it (`fuser -v {path}` "
            "or `lsof` names it) and run again"
        )
    else:
        message += (
            f". Wait for it to end, or stop it (`kill {pid}`) and run again; a lock whose run was killed is cleared "
            "by itself"
        )
        if "kernel" in str(record.get("command", "")):
            message += " (a Jupyter kernel that ran a notebook by hand holds it until the notebook finishes or the "
            message += "kernel is restarted)"
    return message + (f"; {hint}" if hint else "")


def take(
    folder: str | os.PathLike,
    what: str = "run",
    *,
    lock_file: str = LOCK_FILE,
    hint: str = "",
    log: Callable[[str], Any] = print,
) -> tuple[FolderLock, bool]:
    """:func:`acquire`, and whether this call took the lock for this process (False: the process had it already;
    a caller that took it releases it).  A caller that removes what dead runs left in the folder does so only when
    it took the lock and holds it itself (``lock.held``): not under a parent's lock, whose run may own those files."""
    folder = Path(folder).absolute()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder.resolve() / lock_file
    if int(os.environ.get("RANK", "0") or 0) != 0:  # a distributed run's other processes run under the main one's
        return FolderLock(folder, path, "inherited"), False
    known = _HELD.get(path)
    if known is not None:
        if known.pid == os.getpid():
            return known, False
        return _keep(FolderLock(folder, path, "inherited", known.token, record=known.record))  # a forked child
    if fcntl is None:
        return _keep(FolderLock(folder, path, "unlocked"))
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        record = {}
        for _ in range(20):  # the holder writes its record just after it took the lock
            record = _read_record(fd)
            if record:
                break
            time.sleep(0.01)
        os.close(fd)
        token = _inherited().get(str(path))
        if token and token == record.get("token"):  # held for this process by a parent (the pipeline)
            return _keep(FolderLock(folder, path, "inherited", token, record=record))
        raise FolderInUse(in_use_message(folder, path, record, what, hint), record) from None
    except OSError:  # no flock on this file system: unlocked
        os.close(fd)
        return _keep(FolderLock(folder, path, "unlocked"))
    previous = _read_record(fd)
    if previous and not previous.get("released"):
        holder = f"{previous.get('what') or 'run'}, {describe_holder(previous)}"
        log(f"[lock] {folder}: cleared a stale lock ({holder}): that run ended without releasing it (killed?)")
    record = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": _now(),
        "what": what,
        "command": _command_line(),
        "token": uuid.uuid4().hex,
    }
    os.ftruncate(fd, 0)
    os.pwrite(fd, (json.dumps(record) + "\n").encode("utf-8"), 0)
    lock, taken = _keep(FolderLock(folder, path, "held", record["token"], fd, record))
    _export(path, lock.token)
    return lock, taken


def _keep(lock: FolderLock) -> tuple[FolderLock, bool]:
    """Record ``lock`` as this process's lock of its folder; ``(lock, True)``: this call took it."""
    _HELD[lock.path] = lock
    return lock, True


def acquire(
    folder: str | os.PathLike,
    what: str = "run",
    *,
    lock_file: str = LOCK_FILE,
    hint: str = "",
    log: Callable[[str], Any] = print,
) -> FolderLock:
    """Take the lock of ``folder`` for this process (``what``: the run, for messages: ``pipeline run``...) and keep
    it until :func:`release` (or the process ends); raises :class:`FolderInUse` when another live run holds it.

    Taking a lock this process (or a parent, for this process) already holds returns that lock.  A stale record
    (its run was killed) is reported through ``log``.  ``hint``: what else the refused run can do, for the message.
    """
    return take(folder, what, lock_file=lock_file, hint=hint, log=log)[0]


def release(lock: FolderLock | None) -> None:
    """Give up this process's lock of ``lock``'s folder (whoever in the process took it); a lock inherited from a
    parent stays with the parent."""
    if lock is None:
        return
    current = _HELD.get(lock.path)
    if current is not None:
        lock = current
        del _HELD[lock.path]
    if lock.fd is None or lock.pid != os.getpid():
        return
    fd, lock.fd = lock.fd, None
    try:
        record = {**lock.record, "released": _now()}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(record) + "\n").encode("utf-8"), 0)
    except OSError:
        pass
    finally:
        _export(lock.path, None)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


@contextlib.contextmanager
def hold(
    folder: str | os.PathLike,
    what: str = "run",
    *,
    lock_file: str = LOCK_FILE,
    hint: str = "",
    log: Callable[[str], Any] = print,
) -> Iterator[FolderLock]:
    """:func:`acquire` for a block: released at its end unless this process held it already."""
    lock, new = take(folder, what, lock_file=lock_file, hint=hint, log=log)
    try:
        yield lock
    finally:
        if new:
            release(lock)
