"""The cleaner's core: its options, the worker processes that clean input batches, and the output folder's lock.

The first of the cleaner's modules (:mod:`venus_utils.data.clean` lists them in a run's order); the others import
it.

- :class:`CleanConfig` — the cleaner's options; :class:`RunPaths` — a run's input files and output folder;
- :class:`WorkerConfig`, :func:`run_tasks` — input batches cleaned in worker processes, each into a
  :class:`BatchResult` (its statistics, its Arrow part files and a :class:`KeptRow` per valid row);
- :func:`hold_output` — an output folder held by one run, with what killed runs left there removed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import pyarrow as pa
from tqdm.auto import tqdm

from ...core import protocol
from ...core.locks import release, take
from ...core.perf import process_pool
from ...judging.judge import KINDS
from .. import rules, sources
from ..resample import ResamplePolicy
from ..tokens import counter_for

SHARD_FILE = "shard.json"  # a shard folder's record (.shards)
#: What a run writes into the output folder (each through ``io.atomic_path``: ``.<name>.<random>.tmp`` first).
ARTIFACTS = (
    "cleaned_resampled.parquet",
    "cleaned_resampled.jsonl",
    "train.parquet",
    "val.parquet",
    "stage1_normalized.parquet",
    "stage2_deduped.parquet",
    "stage3_kept.parquet",
    "judgements.jsonl",
    "stats.json",
    SHARD_FILE,
)
LOCK_FILE = ".clean.lock"  # locked by the run that holds the output folder (hold_output)
WORK_PREFIX = ".clean-"  # the run's work folder (worker part files), removed at the end
BAD_ROWS_LISTED = 20  # stats.json["bad_rows"]: the first rows dropped before the rules, by file and line / row


def messages_type():
    """The Arrow type of a ``messages`` column: a list of ``{role, content}`` strings."""
    return pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))


@dataclass
class CleanConfig:
    """Options of the cleaner; defaults are DR-Venus's (``prepare_trajectories.py``) where it has them."""

    input: str | Path
    output_dir: str | Path
    file_pattern: str = "train-*.parquet"
    system_prompt_mode: str = "template"  # template: the bundled prompt | row: the row's own prompt when present
    current_date: str | None = None  # appended to the bundled prompt ("2026-03-01" in DR-Venus's data)
    system_prompt_style: str = (
        "dr-venus"  # bundled prompt: dr-venus (DR-Venus's exact text) | compact (offline profiles)
    )
    policy: ResamplePolicy = field(default_factory=ResamplePolicy)
    shuffle: bool | None = None  # None: off in reference mode (as DR-Venus), on in strict mode
    seed: int = protocol.DATA_SEED
    keep_intermediate: bool = False
    keep_metadata: bool = False
    write_jsonl: bool = False
    allowed_tools: tuple[str, ...] = rules.DEFAULT_ALLOWED_TOOLS
    compat: str = "strict"  # strict | reference
    judge: str = (
        "auto"  # strict: auto (LLM if configured, else offline) | llm | offline | none (no correctness filter)
    )
    judge_cache: str | Path | None = None  # default <output_dir>/judge_cache.sqlite
    tokenizer: str | Path | None = None  # local tokenizer folder for token accounting
    max_tokens: int | None = None  # strict: drop rows above this many tokens (needs tokenizer)
    val_fraction: float = 0.0  # strict: fraction of questions held out in val.parquet (0: no split files)
    workers: int = 0  # worker processes; 0 = one per CPU core
    batch_rows: int = 16  # rows per worker task
    progress: bool = True
    shard: tuple[int, int] | None = None  # (i, n): clean batches i, i+n, ... only, into a shard folder (.shards)
    on_bad_line: str = (
        "error"  # an unreadable row (JSONL line not JSON, parquet row not UTF-8): error | drop (counted)
    )

    def __post_init__(self):
        if self.compat not in rules.MODES:
            raise ValueError(f"compat must be one of {rules.MODES}, got {self.compat!r}")
        if self.system_prompt_mode not in ("template", "row"):
            raise ValueError(f"system_prompt_mode must be 'template' or 'row', got {self.system_prompt_mode!r}")
        protocol.check_system_prompt_style(self.system_prompt_style)
        if self.judge not in (*KINDS, "none"):
            raise ValueError(f"judge must be {', '.join(KINDS)} or none, got {self.judge!r}")
        if self.compat == "reference" and (self.max_tokens or self.val_fraction):
            raise ValueError("--max-tokens and --val-fraction are strict-mode options (DR-Venus's script has neither)")
        if self.max_tokens and not self.tokenizer:
            raise ValueError("--max-tokens needs --tokenizer (tokens are counted with the training tokenizer)")
        if not 0 <= self.val_fraction < 1:
            raise ValueError(f"val_fraction must be in [0, 1), got {self.val_fraction}")
        if self.batch_rows < 1:
            raise ValueError("batch_rows must be >= 1")
        sources.check_on_bad_line(self.on_bad_line)
        if self.shard is not None and not (len(self.shard) == 2 and 0 <= self.shard[0] < self.shard[1]):
            raise ValueError(f"shard must be (i, n) with 0 <= i < n, got {self.shard!r}")

    def rule_options(self) -> rules.RuleOptions:
        """The per-row rules' options: mode, system prompt, allowed tools (the same for a run and its shards)."""
        prompt = protocol.system_prompt(self.current_date, style=self.system_prompt_style)
        return rules.RuleOptions(self.compat, self.system_prompt_mode, prompt, self.allowed_tool_names)

    @property
    def allowed_tool_names(self) -> frozenset[str]:
        """The allowed tool names, lower-cased as the rules compare them."""
        return frozenset(t.lower() for t in self.allowed_tools)

    @property
    def strict(self) -> bool:
        return self.compat == "strict"

    @property
    def do_shuffle(self) -> bool:
        return self.strict if self.shuffle is None else bool(self.shuffle)


@dataclass(frozen=True)
class RunPaths:
    """Where a run reads and writes: the input (file or folder), its files in order, the output folder."""

    input: Path
    files: list[Path]
    output_dir: Path

    @classmethod
    def of(cls, cfg: CleanConfig) -> RunPaths:
        """``cfg``'s input and output resolved, the input files listed (an unusable input: error)."""
        input_path = Path(cfg.input).expanduser().resolve()
        output_dir = Path(cfg.output_dir).expanduser().resolve()
        return cls(input_path, sources.list_input_files(input_path, cfg.file_pattern), output_dir)


# --------------------------------------------------------------------------------------------------
# one batch's result


class KeptRow(NamedTuple):
    """A row of a batch that passed the rules: what the filters, the resampling and the split need to know of it
    (its messages stay in the batch's part file)."""

    row: int  # row number in the batch's part file
    turns: int
    question: str
    answer: str | None  # strict: the final answer, for the judge (reference: None)
    gt: str
    tokens: int | None  # None without a tokenizer
    chars: int
    source_row: int  # row number in the input file


@dataclass
class BatchResult:
    """One input batch cleaned: its statistics, its part files and its valid rows (in part-file order)."""

    index: int  # the batch's number over the whole input (input-file order)
    file: str  # the input file's name
    source: int = 0  # rows read
    stage1: int = 0  # rows normalised (stage1_normalized)
    stage2: int = 0  # rows valid (stage2_deduped)
    dropped: Counter[str] = field(default_factory=Counter)  # drop reason -> rows
    pruned_turns: int = 0
    pruned_responses: int = 0
    pruned_names: Counter[str] = field(default_factory=Counter)
    duplicates: int = 0
    tools: Counter[str] = field(default_factory=Counter)  # tool calls in valid rows, by name
    fixes: Counter[str] = field(default_factory=Counter)  # strict fixes applied, by name
    removed: Counter[str] = field(default_factory=Counter)  # turns removed from valid rows, by reason
    part: str | None = None  # Arrow file of the valid rows
    stage1_part: str | None = None  # Arrow file of the normalised rows (--keep-intermediate)
    stage1_error: str | None = None  # why the normalised rows could not be written
    kept: list[KeptRow] = field(default_factory=list)
    bad_rows: list[str] = field(default_factory=list)  # the first unreadable rows, by file and line / row


# --------------------------------------------------------------------------------------------------
# worker side


@dataclass(frozen=True)
class WorkerConfig:
    """What a worker process needs to clean a batch."""

    rules: rules.RuleOptions
    tmp_dir: str  # where part files go
    keep_stage1: bool
    tokenizer: str | None
    on_bad_line: str = "error"

    @classmethod
    def for_run(cls, cfg: CleanConfig, opts: rules.RuleOptions, tmp_dir: str | Path) -> WorkerConfig:
        return cls(
            opts, str(tmp_dir), cfg.keep_intermediate, str(cfg.tokenizer) if cfg.tokenizer else None, cfg.on_bad_line
        )


class Task(NamedTuple):
    index: int
    file: str  # the file's name (per-file statistics)
    offset: int
    batch: Any
    path: str = ""  # the file's full path (error messages)


_WCFG: WorkerConfig | None = None


def _init_worker(wcfg: WorkerConfig) -> None:
    global _WCFG
    _WCFG = wcfg


def _plain_messages(rows: list[dict]) -> bool:
    """Whether every message is exactly {role: str, content: str} (then no type inference is needed)."""
    for row in rows:
        for m in row["messages"]:
            if not (
                isinstance(m, dict)
                and len(m) == 2
                and isinstance(m.get("role"), str)
                and isinstance(m.get("content"), str)
            ):
                return False
    return True


def _write_part(rows: list[dict], path: Path) -> str:
    schema = None
    if _plain_messages(rows):
        schema = pa.schema(
            [
                (
                    name,
                    messages_type()
                    if name == "messages"
                    else pa.string()
                    if name in ("question", "gt", "_source_file")
                    else pa.int64(),
                )
                for name in rows[0]
            ]
        )
    table = pa.Table.from_pylist(rows, schema=schema)
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return str(path)


def _work(task: Task) -> BatchResult:
    """Clean one batch; valid rows go to an Arrow part file, statistics come back."""
    wcfg = _WCFG
    assert wcfg is not None, "worker not initialised"
    opts = wcfg.rules
    counter = counter_for(wcfg.tokenizer) if wcfg.tokenizer else None
    res = BatchResult(task.index, task.file)
    kept_rows: list[dict] = []
    stage1_rows: list[dict] = []
    for i, row in enumerate(sources.batch_to_rows(task.batch, task.path or task.file, task.offset, wcfg.on_bad_line)):
        res.source += 1
        source_row = task.offset + i
        if isinstance(row, sources.BadRow):
            res.dropped[row.reason] += 1
            if len(res.bad_rows) < BAD_ROWS_LISTED:
                res.bad_rows.append(row.detail)
            continue
        out = rules.clean_row(row, opts)
        res.fixes.update(out.fixes)
        if out.stage1 is not None:
            res.stage1 += 1
            res.pruned_turns += out.pruned_turns
            res.pruned_responses += out.pruned_responses
            res.pruned_names.update(out.pruned_names)
            res.duplicates += out.duplicates
            if wcfg.keep_stage1:
                stage1_rows.append(
                    {
                        "question": out.question,
                        "messages": out.stage1,
                        "gt": out.gt,
                        "_source_file": task.file,
                        "_source_row": source_row,
                    }
                )
        if out.reason is not None:
            res.dropped[out.reason] += 1
            continue
        tokens = None
        if counter is not None:
            try:
                tokens = counter.count(out.messages)
            except Exception:  # a chat template that cannot render this row
                res.dropped["tokenize_failed"] += 1
                continue
        res.stage2 += 1
        res.removed.update(out.removed)
        res.tools.update(out.tool_names)
        turns = rules.turns_of(out.messages)
        chars = sum(
            len(m.get("content") or "")
            for m in out.messages
            if isinstance(m, dict) and isinstance(m.get("content"), str)
        )
        row_out = {
            "question": out.question,
            "messages": out.messages,
            "gt": out.gt,
            "_source_file": task.file,
            "_source_row": source_row,
            "_turns": turns,
        }
        if opts.strict or tokens is not None:
            row_out.update(_tokens=tokens, _chars=chars)
        answer = protocol.extract_answer(out.messages[-1].get("content") or "") if opts.strict else None
        res.kept.append(KeptRow(len(kept_rows), turns, out.question, answer, out.gt, tokens, chars, source_row))
        kept_rows.append(row_out)
    tmp = Path(wcfg.tmp_dir)
    if kept_rows:
        res.part = _write_part(kept_rows, tmp / f"part-{task.index:07d}.arrow")
    if stage1_rows:
        try:
            res.stage1_part = _write_part(stage1_rows, tmp / f"stage1-{task.index:07d}.arrow")
        except Exception as exc:  # unvalidated rows may mix types that Arrow cannot hold in one column
            res.stage1_error = f"{type(exc).__name__}: {exc}"
    return res


# --------------------------------------------------------------------------------------------------
# main side


def _tasks(
    files: list[Path],
    batch_rows: int,
    shard: tuple[int, int] | None = None,
    seen: dict[str, int] | None = None,
    on_bad_line: str = "error",
) -> Iterator[Task]:
    """Batches in input order; with ``shard=(i, n)`` only those whose index is i modulo n (``seen["tasks"]``: all)."""
    index = 0
    for path in files:
        for offset, batch in sources.iter_batches(path, batch_rows, on_bad_line):
            if shard is None or index % shard[1] == shard[0]:
                yield Task(index, path.name, offset, batch, str(path))
            index += 1
            if seen is not None:
                seen["tasks"] = index


def run_tasks(
    files: list[Path], wcfg: WorkerConfig, cfg: CleanConfig, total: int | None, seen: dict[str, int] | None = None
) -> list[BatchResult]:
    """Clean the input batches (``cfg.shard``'s only, if set) in ``cfg.workers`` processes; results in input order.

    ``total``: rows expected (progress bar; a single batch runs in this process); ``seen["tasks"]``: batches in the
    whole input, counted on the way.
    """
    workers = cfg.workers or os.cpu_count() or 1
    if total is not None and total <= cfg.batch_rows:
        workers = 1
    results: list[BatchResult] = []
    bar = tqdm(total=total, unit="row", desc=f"clean [{cfg.compat}]", disable=not cfg.progress)

    def take(res: BatchResult) -> None:
        results.append(res)
        bar.update(res.source)

    try:
        if workers <= 1:
            _init_worker(wcfg)
            for task in _tasks(files, cfg.batch_rows, cfg.shard, seen, cfg.on_bad_line):
                take(_work(task))
        else:
            with process_pool(workers, _init_worker, (wcfg,)) as pool:
                pending = set()
                for task in _tasks(files, cfg.batch_rows, cfg.shard, seen, cfg.on_bad_line):
                    pending.add(pool.submit(_work, task))
                    if len(pending) >= 2 * workers:  # bounded memory: a few batches in flight
                        done, pending = wait(pending, return_when=FIRST_COMPLETED)
                        for fut in done:
                            take(fut.result())
                for fut in pending:
                    take(fut.result())
    finally:
        bar.close()
    results.sort(key=lambda r: r.index)
    return results


# --------------------------------------------------------------------------------------------------
# the output folder


def remove_leftovers(output_dir: Path) -> list[str]:
    """Remove what killed runs left in ``output_dir``: work folders and half-written artifacts (names returned).

    Only call it while holding the folder (:func:`hold_output`): then no live run can own any of them.
    """
    removed = []
    for path in sorted(output_dir.glob(WORK_PREFIX + "*")):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path.name)
    for name in ARTIFACTS:
        for path in sorted(output_dir.glob(f".{name}.*.tmp")):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                removed.append(path.name)
    return removed


@contextlib.contextmanager
def hold_output(output_dir: Path, progress: bool = False) -> Iterator[None]:
    """Hold ``output_dir`` for one run: an exclusive lock on ``OUT/.clean.lock`` (:mod:`venus_utils.core.locks`: a
    ``flock``, released by the kernel when the process ends, killed or not), then :func:`remove_leftovers`.  Another
    live run holding it: :class:`~venus_utils.core.locks.FolderInUse` (a ValueError) naming its pid.

    Where ``flock`` is not available (Windows, some network file systems) the run goes on unlocked and removes
    nothing: it cannot tell a live run's files from a dead one's.
    """
    output_dir.mkdir(parents=True, exist_ok=True)
    say = print if progress else (lambda _message: None)
    lock, new = take(output_dir, "cleaner run", lock_file=LOCK_FILE, hint="or use another --output-dir", log=say)
    try:
        if new and lock.held:
            removed = remove_leftovers(output_dir)
            if removed:
                say(f"{output_dir}: removed leftovers of killed runs: {', '.join(removed)}")
        yield
    finally:
        if new:
            release(lock)
