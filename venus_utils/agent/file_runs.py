"""Run the agent over a question file: resumable JSONL predictions with DR-Venus's inference fields.

Input: ``.jsonl`` rows with ``question`` (and optionally ``answer``/``gt``, ``index``), or a ``.parquet`` in
the verl QA schema (``prompt`` = [{role: user, content}], ``reward_model.ground_truth``, ``extra_info.index``).
Output: one line per (question, sample) with question, messages, prediction, termination, turns,
parse_error_count, tool_call_count, dedup_count, final_token_count, elapsed_seconds (DR-Venus's record) plus
index, sample, gt, data_source, turn_log, boundaries (and token ids with ``token_ids=True``).  Lines already
in the output are kept and skipped on a rerun; a torn last line (a killed run) is dropped.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from ..core.aio import run_coroutine
from ..core.io import atomic_write, dumps_json
from ..core.progress import report as report_progress
from .loop import AgentConfig, run_agent

QUESTION_FILE = "a .jsonl or .csv with a 'question' column, or a verl-schema .parquet"


def _blank(path: Path) -> bool:
    with path.open("rb") as fh:
        return not fh.read(1 << 16).strip() and not fh.read(1)


def question_rows(path: str | Path) -> list[dict]:
    """``[{index, question, gt, data_source}]`` from a verl-schema parquet, JSONL or CSV question file
    (read by :func:`venus_utils.core.qa_files.load_questions`; answers are optional here).

    A missing file, a folder, an empty file or one without a single question raises (FileNotFoundError,
    IsADirectoryError, ValueError) with a message that names the path and what it should be."""
    from ..core.qa_files import load_questions as load_question_table

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"question file not found: {path} (expected {QUESTION_FILE})")
    if path.is_dir():
        raise IsADirectoryError(f"not a question file: {path} is a folder (expected {QUESTION_FILE})")
    if _blank(path):
        raise ValueError(f"question file is empty: {path} (expected {QUESTION_FILE})")
    table = load_question_table(path, require_answer=False)
    if table.empty:
        raise ValueError(f"question file has no questions: {path} (expected {QUESTION_FILE})")
    return [
        {"index": r.id, "question": r.question, "gt": r.answer or None, "data_source": r.source}
        for r in table.itertuples(index=False)
    ]


def _good_lines(path: Path) -> list[tuple[tuple[str, int], str]]:
    """``((index, sample), line)`` of each whole record in ``path`` (a torn line, a killed run's last, is left out)."""
    good = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
            good.append(((str(rec["index"]), int(rec["sample"])), line))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            continue
    return good


def answered(output: Path) -> set[tuple[str, int]]:
    """Keys already answered; drops a torn trailing line (rewritten atomically)."""
    if not output.exists():
        return set()
    good = _good_lines(output)
    atomic_write(output, "".join(f"{line}\n" for _, line in good))
    return {key for key, _ in good}


def fold_parts(output: Path, parts: list[Path]) -> int:
    """Append the whole records of the part files ``parts`` (answers written beside ``output`` by other processes)
    to ``output``, atomically and once each (a key ``output`` holds already is not added again: a fold killed before
    it removed its parts is folded again without doubles), then remove the parts; returns the records added."""
    parts = [p for p in parts if p.exists()]
    if not parts:
        return 0
    kept = _good_lines(output) if output.exists() else []
    seen = {key for key, _ in kept}
    added = []
    for part in parts:
        for key, line in _good_lines(part):
            if key not in seen:
                seen.add(key)
                added.append(line)
    atomic_write(output, "".join(f"{line}\n" for _, line in kept) + "".join(f"{line}\n" for line in added))
    for part in parts:
        part.unlink(missing_ok=True)
    return len(added)


async def run_file_async(
    input_path: str | Path | list[dict],
    output_path: str | Path,
    backend: Any,
    tools: Any,
    cfg: AgentConfig | None = None,
    samples: int = 1,
    workers: int = 4,
    limit: int | None = None,
    token_ids: bool = False,
    progress: bool = True,
) -> dict:
    """Answer ``input_path`` (a question file, or the rows :func:`question_rows` read from one) into the
    JSONL ``output_path``; returns a summary (questions, skipped, ran, terminations, output)."""
    questions = (input_path if isinstance(input_path, list) else question_rows(input_path))[:limit]
    output = Path(output_path)
    output.parent.mkdir(parents=True, exist_ok=True)
    done = answered(output)
    todo = [(q, s) for q in questions for s in range(samples) if (q["index"], s) not in done]
    gate = asyncio.Semaphore(max(1, workers))
    bar = tqdm(total=len(todo), desc="agent", disable=not progress)
    counts: dict[str, int] = {}

    async def one(q: dict, sample: int) -> None:
        async with gate:
            rollout = await run_agent(q["question"], backend, tools, cfg)
        record = {
            "index": q["index"],
            "sample": sample,
            "gt": q["gt"],
            "data_source": q["data_source"],
            **rollout.to_dict(token_ids=token_ids),
        }
        with output.open("a", encoding="utf-8") as fh:  # one line per finished rollout: resumable
            fh.write(dumps_json(record, indent=None) + "\n")
        counts[rollout.termination] = counts.get(rollout.termination, 0) + 1
        bar.update(1)
        report_progress("questions answered", sum(counts.values()), len(todo))

    await asyncio.gather(*(one(q, s) for q, s in todo))
    bar.close()
    return {
        "questions": len(questions),
        "skipped": len(done),
        "ran": len(todo),
        "terminations": counts,
        "output": str(output),
    }


def run_file(*args, **kwargs) -> dict:
    """Blocking :func:`run_file_async` (also inside Jupyter)."""
    return run_coroutine(run_file_async(*args, **kwargs))
