"""The model answers the held-out questions: in this process, or on the CPU in several processes side by side.

On the CPU a decode step of the tiny models is many small operations, which two threads of one process share poorly
(each pays OpenMP's fork and join) and the agent's Python between them (tools, records, the decoder's bookkeeping)
runs on one core whatever the threads. Processes of one thread each, every one answering its share of the questions
with its own copy of the model and the world's tools, use the cores instead: 600 validation questions of the shipped
SFT model (10 turns x 128 tokens) took 78 s in two processes of one thread against 114 s in one process of two
threads on the same 2 idle cores, with the same answers to all 600 (``benchmarks/bench_eval.py`` runs both).

Each process writes its answers to a part file beside the rollouts (``<rollouts>.part<i>.jsonl``); when all have
finished they are folded into the rollouts file. A killed pass leaves its part files, and the next call folds them
in first: the answers they hold are not asked again.
"""

from __future__ import annotations

import math
import os
import threading
import time
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

import psutil
from tqdm.auto import tqdm

from ..agent import load_backend
from ..agent.file_runs import answered, fold_parts, run_file_async
from ..core.aio import run_coroutine
from ..core.checkpoints import check_model
from ..core.perf import process_context
from ..core.progress import ENV as PROGRESS_ENV
from ..core.progress import report as report_progress
from ..tools import make_toolbox

#: processes answer side by side from this many questions each (below, the processes' start, ~5 s each, costs more
#: than they save), at most :data:`MAX_PROCESSES`
MIN_QUESTIONS_PER_PROCESS = 64
MAX_PROCESSES = 8
#: the memory one answering process is given, as a multiple of its model's weights on disk (float32 weights from a
#: bf16 file, the KV caches of its questions, the world's tools); processes beyond what the free memory holds are
#: not started
MEMORY_PER_WEIGHT_BYTE = 4


def processes_for(
    settings: Any, questions: int, *, own_tools: bool, model_bytes: int = 0, available: int | None = None
) -> int:
    """How many processes answer ``questions`` questions: ``settings.processes`` when set, else on the CPU one per
    thread of this process (``torch.get_num_threads()``, at most :data:`MAX_PROCESSES`) while each gets at least
    :data:`MIN_QUESTIONS_PER_PROCESS` questions and the free memory (``available`` bytes, default: the machine's)
    holds :data:`MEMORY_PER_WEIGHT_BYTE` x ``model_bytes`` for each. One on a GPU, and one when another process
    cannot build the tools again (``own_tools``: web tools, tools changed by hand, or neither tools nor a world)."""
    if own_tools or not str(settings.device).startswith("cpu"):
        return 1
    if settings.processes is not None:
        return max(1, min(int(settings.processes), questions))
    import torch

    n = min(torch.get_num_threads(), MAX_PROCESSES, questions // MIN_QUESTIONS_PER_PROCESS)
    if model_bytes:
        free = psutil.virtual_memory().available if available is None else available
        n = min(n, free // (MEMORY_PER_WEIGHT_BYTE * model_bytes))
    return max(1, int(n))


def answer_questions(
    model_dir: Path,
    rows: list[dict],
    rollouts: Path,
    settings: Any,
    *,
    world_dir: str | Path | None,
    tools: Any = None,
    progress: bool = True,
) -> None:
    """Answer ``rows`` (``{index, question, gt, data_source}``) with the model folder into the JSONL ``rollouts``
    (resumable: what it holds is not asked again; the caller folds a killed pass's part files in first, before it
    checks the rollouts' fingerprint: :func:`venus_utils.eval.heldout.evaluate_model`)."""
    rollouts.parent.mkdir(parents=True, exist_ok=True)
    done = answered(rollouts)
    todo = [r for r in rows if any((str(r["index"]), s) not in done for s in range(settings.samples))]
    weights = sum(f.stat().st_size for f in Path(model_dir).glob("*.safetensors")) if Path(model_dir).is_dir() else 0
    if tools is None and world_dir is not None:
        tools = make_toolbox("local", world_dir)  # a missing world is one line here, not a process's traceback
    # the tools each process builds for itself from the arguments that built these (None: they cannot be)
    rebuild = tools.rebuild_args() if hasattr(tools, "rebuild_args") else None
    n = processes_for(settings, len(todo), own_tools=rebuild is None, model_bytes=weights)
    if n <= 1:
        _answer(model_dir, rows, rollouts, settings, tools=tools, progress=progress)
        return
    check_model(model_dir)  # a damaged model is one line here too
    import torch

    threads = max(1, torch.get_num_threads() // n)
    parts = [_part(rollouts, i) for i in range(n)]
    shares = [todo[i::n] for i in range(n)]
    workers = math.ceil(settings.workers / n)
    ctx = process_context()
    procs = [
        ctx.Process(
            target=_answer_part,
            args=(model_dir, shares[i], parts[i], settings, rebuild, threads, workers, os.getpid()),
            name=f"venus-heldout-{i}",
        )
        for i in range(n)
    ]
    bar = tqdm(total=len(todo) * settings.samples, desc=f"agent ({n} processes)", disable=not progress)
    try:
        for p in procs:
            p.start()
        failed: list[tuple[int, int]] = []
        while not failed and any(p.is_alive() for p in procs):
            wait([p.sentinel for p in procs if p.is_alive()], timeout=1.0)  # a second, or until one ends
            count = sum(_lines(part) for part in parts)
            bar.update(count - bar.n)
            report_progress("questions answered", count, bar.total)
            failed = [(i, p.exitcode) for i, p in enumerate(procs) if p.exitcode not in (None, 0)]
        if failed:  # the others are ended below: their answers so far are kept
            i, code = failed[0]
            raise RuntimeError(
                f"held-out answering: process {i + 1} of {n} exited with code {code} (its error is printed above); "
                f"the answers every process finished are kept in {rollouts.name}.part*.jsonl and a rerun resumes them"
            )
    finally:
        for p in procs:  # stopped or failed: none outlives the call
            if p.is_alive():
                p.terminate()
        for p in procs:
            if p.pid is not None:
                p.join()
        bar.close()
    fold_parts(rollouts, parts)


def part_files(rollouts: Path) -> list[Path]:
    """The part files a pass of several processes left beside ``rollouts`` (a killed one's, to fold in)."""
    return sorted(rollouts.parent.glob(f"{rollouts.name}.part*.jsonl"))


def _part(rollouts: Path, i: int) -> Path:
    return rollouts.with_name(f"{rollouts.name}.part{i}.jsonl")


def _lines(path: Path) -> int:
    try:
        with path.open("rb") as fh:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))
    except FileNotFoundError:
        return 0


def _answer(model_dir, rows, rollouts, settings, *, tools, progress, workers=None) -> None:
    """This process answers ``rows`` into ``rollouts`` with ``tools`` (None: the local tools need a world, and
    :func:`make_toolbox` says so)."""
    backend = load_backend(
        str(model_dir),
        device=settings.device,
        max_batch=max(1, workers or settings.workers),
        fast=settings.fast,
        dtype=settings.dtype,
    )
    if tools is None:
        tools = make_toolbox("local", None)
    cfg = settings.agent_config(int(getattr(backend.model.config, "max_position_embeddings", 8192)))
    run_coroutine(
        run_file_async(
            rows,
            rollouts,
            backend,
            tools,
            cfg,
            samples=settings.samples,
            workers=workers or settings.workers,
            progress=progress,
        )
    )


def _answer_part(model_dir, rows, part, settings, tools_args, threads, workers, caller: int) -> None:
    """One process of :func:`answer_questions`: ``threads`` torch threads, the tools ``make_toolbox(**tools_args)``,
    its share of the questions into ``part`` (the calling process reports the progress: this one's count would
    overwrite it). It ends when the process ``caller`` is gone (killed without the chance to end it): its answers
    so far stay in the part file."""
    import torch

    threading.Thread(target=_end_without, args=(caller,), name="venus-caller-watch", daemon=True).start()
    os.environ.pop(PROGRESS_ENV, None)
    torch.set_num_threads(threads)
    tools = make_toolbox(**tools_args)
    _answer(model_dir, rows, part, settings, tools=tools, progress=False, workers=workers)


def _end_without(pid: int, every_s: float = 1.0) -> None:
    """End this process once the process ``pid`` no longer exists."""
    while True:
        time.sleep(every_s)
        try:
            os.kill(pid, 0)
        except OSError:  # no such process (or another user's now: the caller's was ours)
            os._exit(1)
