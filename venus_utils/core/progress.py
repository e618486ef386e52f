"""A running stage's own progress, shown by the pipeline beside its stage bar without ``--log-output``.

The notebook of a stage runs in a Jupyter kernel whose output the pipeline does not see. The pipeline names a file
in the kernel's environment (``VENUS_PROGRESS_FILE``); the long loops of the package (SFT and RL steps, questions
answered by the agent, questions sampled) call :func:`report` with what they count, and :class:`ProgressWatcher` in
the pipeline reads the file and shows it beside the stage on the pipeline's bar: what, how many of how many, the
rate and the time left (one line: nothing is drawn that a later message could land behind).
Outside the pipeline (a notebook opened by hand, a stage's command line) no file is named and :func:`report` does
nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ENV = "VENUS_PROGRESS_FILE"
_EVERY_S = 1.0  # writes at most this often (and always the last count)
_counts: dict[str, dict[str, Any]] = {}  # per ``what``: when and where its count started, its last count and total
_written = [0.0]


def report(what: str, done: int, total: int | None) -> None:
    """``done`` of ``total`` ``what`` (e.g. "SFT steps") so far, shown beside the stage on the pipeline's bar; a
    no-op unless the pipeline named a file. The rate counts from the start of this count of ``what`` (a new count
    starts where ``total`` changes or ``done`` goes back: the next held-out pass); it never raises."""
    path = os.environ.get(ENV)
    if not path:
        return
    now = time.monotonic()
    count = _counts.get(what)
    if count is None or count["total"] != total or done <= count["last"]:
        count = _counts[what] = {"t0": now, "done0": done, "last": done, "total": total}
    count["last"] = done
    if now - _written[0] < _EVERY_S and done != total:
        return
    elapsed = now - count["t0"]
    rate = (done - count["done0"]) / elapsed if elapsed > 0 and done > count["done0"] else None
    left = (total - done) / rate if rate and total is not None and total >= done else None
    record = {"what": what, "done": done, "total": total, "rate_per_s": rate, "left_s": left}
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    with contextlib.suppress(OSError):  # never worth failing a stage for; a folder the pipeline removed stays gone
        tmp.write_text(json.dumps(record), encoding="utf-8")
        os.replace(tmp, target)
        _written[0] = now


def read(path: str | Path) -> dict | None:
    """The last record :func:`report` wrote to ``path`` (None: none yet, or unreadable)."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def describe(record: dict) -> str:
    """``SFT steps 1,200/4,200 · 1.1/s · 45 min left``."""
    total = f"/{record['total']:,}" if record.get("total") is not None else ""
    parts = [f"{record['what']} {record['done']:,}{total}"]
    rate = record.get("rate_per_s")
    if rate:
        parts.append(f"{rate:.2f}/s" if rate < 10 else f"{rate:.0f}/s")
    left = record.get("left_s")
    if left is not None:
        parts.append(f"{left / 60:.0f} min left" if left >= 90 else f"{left:.0f} s left")
    return " · ".join(parts)


class ProgressWatcher:
    """While inside: a temporary file named in ``os.environ`` (the kernels started inside inherit it), read every
    ``interval`` seconds and shown with ``show`` (a callable taking the text line; the pipeline's bar's postfix).
    Leaving removes the file and its folder (both made here) and restores the environment."""

    def __init__(self, show, interval: float = 1.0):
        self.show, self.interval = show, interval
        self._stop, self._lock = threading.Event(), threading.Lock()
        self._thread: threading.Thread | None = None
        self._dir: Path | None = None
        self._previous: str | None = None
        self._last: str | None = None
        self._label = ""

    @property
    def path(self) -> Path:
        assert self._dir is not None
        return self._dir / "progress.json"

    def __enter__(self) -> ProgressWatcher:
        self._dir = Path(tempfile.mkdtemp(prefix="venus-progress-"))
        self._previous = os.environ.get(ENV)
        os.environ[ENV] = str(self.path)
        self._thread = threading.Thread(target=self._run, name="venus-progress", daemon=True)
        self._thread.start()
        return self

    def start_stage(self, label: str = "") -> None:
        """A new stage (``label``, shown before its count): forget the last one's count."""
        with self._lock:
            with contextlib.suppress(OSError):
                self.path.unlink()
            self._last, self._label = None, label
            self.show(label)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            with self._lock:
                try:
                    record = read(self.path)
                    text = describe(record) if isinstance(record, dict) else None
                except (KeyError, TypeError, ValueError):  # a record this code did not write: skip it
                    text = None
                if text is not None and text != self._last:
                    self._last = text
                    self.show(f"{self._label} · {text}" if self._label else text)

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._previous is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = self._previous
        if self._dir is not None:  # made by __enter__: whatever a killed writer left in it goes too
            shutil.rmtree(self._dir, ignore_errors=True)
