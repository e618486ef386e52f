"""A command stops in order on SIGTERM or SIGINT (Ctrl-C): every process it started ends, its locks are released.

:func:`stop_on_signals` turns the two signals into :class:`Stopped` in the main thread (a ``BaseException``, like
``KeyboardInterrupt``: no ``except Exception`` swallows it, every ``finally`` and ``with`` on the way out runs, so the
folder locks are released).  It first sends SIGTERM to every process the command started, and to their process
groups other than the command's own (a child started in a session of its own, and what that child started);
:func:`end_processes` then waits for them and kills what is left.  The pipeline (:mod:`venus_utils.run.pipeline`) and
every stage command line (:func:`venus_utils.run.cli.run_cli`: ``sft train``, ``rl train``, ``rl arms`` and its
arms' processes) use it, and exit with 128 + the signal (143, 130).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading

import psutil


class Stopped(BaseException):  # noqa: N818 - like KeyboardInterrupt: no `except Exception` may swallow it
    """The run was told to stop (``signum``: SIGTERM or SIGINT).  ``processes`` are the processes the run had
    started when the signal came, and ``groups`` their process groups other than the pipeline's own (the kernel runs
    in a session of its own, and its pools in the kernel's group): :func:`end_processes` ends them."""

    def __init__(self, signum: int, processes: list, groups: set[int]):
        super().__init__(signal.Signals(signum).name)
        self.signum, self.processes, self.groups = signum, processes, groups


def started_processes() -> tuple[list, set[int]]:
    """Every process this one started that is still alive (children, their children...), and their process groups
    other than this process's own."""
    own = os.getpgid(0)
    procs = psutil.Process().children(recursive=True)
    groups = set()
    for proc in procs:
        try:
            group = os.getpgid(proc.pid)
        except OSError:
            continue
        if group != own:
            groups.add(group)
    return procs, groups


def end_processes(processes: list, groups: set[int], grace: float = 5.0) -> int:
    """End ``processes`` and everything in ``groups`` (SIGTERM, then SIGKILL after ``grace`` seconds for whatever is
    left); returns how many processes were asked to end.  Never signals this process's own group."""
    own = os.getpgid(0)
    groups = {g for g in groups if g != own}
    alive = [p for p in processes if p.is_running()]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        _signal_all(alive, groups, sig)
        _, alive = psutil.wait_procs(alive, timeout=grace)
        if not alive and not any(_group_alive(g) for g in groups):
            break
    return len(processes)


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except OSError:
        return False
    return True


def _stop(signum, frame) -> None:
    processes, groups = started_processes()  # now, while the kernel's children are still its children
    _signal_all(processes, groups, signal.SIGTERM)  # before the notebook client's clean-up interrupts the kernel
    raise Stopped(signum, processes, groups)


def _signal_all(processes: list, groups: set[int], sig: int) -> None:
    for group in groups:
        try:
            os.killpg(group, sig)
        except OSError:  # the group is gone
            pass
    for proc in processes:
        try:
            proc.send_signal(sig)
        except psutil.Error:
            pass


@contextlib.contextmanager
def stop_on_signals():
    """While inside: SIGTERM and SIGINT raise :class:`Stopped` in the main thread (the previous handlers come back
    after)."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread can set handlers
        yield
        return
    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def finish_stop(stop: Stopped) -> int:
    """After :class:`Stopped` reached the top of a command: ignore further signals (the processes are ending already),
    end what the command started (:func:`end_processes`); returns how many processes were asked to end."""
    with contextlib.suppress(Stopped):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        return end_processes(stop.processes, stop.groups)
    return 0  # pragma: no cover - a signal between the two calls above
