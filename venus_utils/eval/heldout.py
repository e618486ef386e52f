"""The one held-out evaluation: notebooks 03, 04 and 05 score models on the same questions with the same code.

- **One question set per run**: :func:`heldout_questions` draws it once from the world's test split (stratified by
  template, hop count and sub-world, so trained and held-out sub-worlds keep their shares) and writes it to
  ``<run>/heldout/``; every later call with the same size and seed reads that file.
- **One protocol**: :func:`evaluate_model` answers every question with the agent loop (greedy decoding for the
  headline accuracy, so a model's per-question results are deterministic and a later stage reuses them as a paired
  baseline; ``samples`` > 1 at a temperature gives pass@k, reported separately), many questions at once (the local
  backend batches concurrent generations into one ``generate`` call).
- **One scorer**: :func:`venus_utils.eval.metrics.score` with the configured :class:`~venus_utils.judging.judge.Judge`
  (the offline judge by default, the LLM judge when its endpoint is set); its verdict method is kept per answer.
- **One set of statistics**: :mod:`venus_utils.eval.stats` (intervals, paired McNemar comparisons).

A scored result is a table with one row per (question, sample): ``id``, ``sample``, ``question``, ``answer``,
``prediction``, ``correct``, ``judge_method``, ``turns``, ``termination`` and the question's ``template``, ``hops``
and ``subworld``.  :func:`load_scored` reads one back; :func:`per_question` reduces it to one row per question.
"""

from __future__ import annotations

import gzip
import os
import shutil
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ..agent import AgentConfig
from ..agent.file_runs import fold_parts
from ..agent.settings import AgentSettings, model_agent_settings
from ..core import qa_files as loaders
from ..core.checkpoints import model_digest
from ..core.io import atomic_dir, atomic_path, check_replaceable, read_json, write_json, write_jsonl
from ..core.paths import CONTROL_DIR, RFT_DIR, RL_STAGE, SFT_STAGE
from ..core.qa_files import load_questions, made_with, stratified_sample
from ..core.stage import RUN_PROFILE, SUMMARY
from ..core.world_store import load_world_questions
from ..judging.judge import Judge
from . import metrics
from .answering import answer_questions, part_files
from .stats import accuracy_ci, accuracy_table, comparison_table, paired_comparison, seed_level

HELDOUT_DIR = "heldout"
#: where each stage keeps its greedy held-out results (``scored``: parquet; the rollouts beside it as .jsonl)
#: the RL stage folders of a run, by training design: notebook 04's (IGPO), and the arms that
#: ``python -m venus_utils.rl train --set ... --out <run>/<folder>`` trains beside it from the same SFT model
RL_ARMS = {
    "IGPO": RL_STAGE,
    "GRPO": f"{RL_STAGE}_grpo",  # --set reward_mode=grpo: the outcome-only baseline
    "IGPO + dynamic sampling": f"{RL_STAGE}_ds",  # --set dynamic_sampling=true
}
#: the control: the stopped SFT model trained on with SFT for the IGPO arm's compute (``rl arms --arms ...,control``)
CONTROL = "more SFT"
#: rejection-sampling fine-tuning from the same SFT model for the IGPO arm's compute (``rl arms --arms ...,rft``)
RFT = "rejection sampling"
SCORED = {
    "base": f"{SFT_STAGE}/heldout_base.parquet",
    "SFT": f"{SFT_STAGE}/heldout_sft.parquet",
    **{f"RL ({arm})": f"{folder}/heldout_rl.parquet" for arm, folder in RL_ARMS.items()},
    CONTROL: f"{CONTROL_DIR}/heldout_rl.parquet",  # the arm's model, scored as the RL arms' are
    RFT: f"{RFT_DIR}/heldout_rl.parquet",
}
META_COLUMNS = ("template", "hops", "subworld", "world", "tier", "group", "tier_group")
#: the breakdowns of every held-out accuracy (summary.json's ``by``): tier and sub-world group together (the headline
#: is hard/heldout when the world has a hard tier), each alone, and hop counts
BREAKDOWN = ("tier_group", "tier", "subworld", "hops")
HEADLINE = "hard/heldout"  # the headline slice of a world with a hard tier (else every question: "all")


def headline_slice(pq: pd.DataFrame) -> tuple[str, pd.DataFrame]:
    """``(name, rows)`` of the headline: the hard tier's held-out sub-worlds when the table has them, else all."""
    if "tier_group" in pq and (pq["tier_group"] == HEADLINE).any():
        return HEADLINE, pq[pq["tier_group"] == HEADLINE]
    return "all", pq


DROP_COLUMNS = ("messages", "turn_log", "boundaries", "prompt_ids", "completion_ids", "completion_mask")


def draw_heldout(source: str | Path, n: int | None, seed: int = 0, split: str = "test") -> pd.DataFrame:
    """``n`` questions keeping the source's mix of templates, hop counts and sub-worlds (all of them when ``n`` is
    None): the first rows of a split are one template from trained sub-worlds and would overstate what the agent can
    do.  ``source``: an offline world folder (its ``split``), or a question file (verl parquet, JSONL, CSV) for the
    web profiles."""
    source = Path(source)
    if source.is_dir():
        qa = load_world_questions(source, split)
    else:
        qa = load_questions(source)
    return stratified_sample(qa, n, by=("template", "hops", "subworld", "tier"), seed=seed)


def heldout_questions(
    run_dir: str | Path, source: str | Path, n: int | None, seed: int = 0, split: str = "test"
) -> pd.DataFrame:
    """The run's held-out questions: drawn once (:func:`draw_heldout` from a world folder or a question file) into
    ``<run_dir>/heldout/`` (another split than ``test``: ``heldout/<split>/``, so drawing one never replaces the
    other) and read from there by every stage asking for the same source, ``n``, ``seed`` and ``split``."""
    folder = Path(run_dir) / HELDOUT_DIR / ("" if split == "test" else split)
    wanted = {"n": n, "seed": seed, "split": split, "source": Path(source).name}
    table = folder / "questions.parquet"
    if table.exists() and (folder / "meta.json").exists() and read_json(folder / "meta.json") == wanted:
        return pd.read_parquet(table)
    qa = draw_heldout(source, n, seed, split)
    with atomic_path(table) as tmp:
        qa.to_parquet(tmp)
    write_json(folder / "meta.json", wanted)
    print(f"[heldout] drew {len(qa)} questions from {Path(source).name} ({split}) into {folder}")
    return qa


#: held-out questions answered at once on the CPU (:attr:`EvalSettings.workers`)
CPU_WORKERS = 128


@dataclass
class EvalSettings:
    """How a model answers the held-out questions.  ``temperature`` 0 (greedy) for the headline accuracy."""

    max_turns: int = 8
    max_new_tokens: int = 128
    system_prompt_style: str = "dr-venus"
    temperature: float = 0.0
    samples: int = 1
    # questions answered at once (the local backend batches their generations); None: 128 on the CPU, 32 elsewhere.
    # On 2 CPU cores the cpu profile's 600 held-out questions took 76 s at 32, 71 s at 64 and 56 s at 128, with the
    # same answers; a large model's per-row KV cache on a GPU wants fewer rows
    workers: int | None = None
    # processes that answer side by side on the CPU, one thread each (eval.answering): None: one per torch thread
    # from 128 questions on (2 cores: 600 questions in 78 s against 114 s in one process, the same answers)
    processes: int | None = None
    device: str = "cpu"
    fast: bool = True  # the local backend's cached decoder (False: transformers generate; same greedy answers)
    dtype: str = "auto"  # auto: float32 on CPU, the saved dtype elsewhere | saved (agent.backends.load_pretrained)

    @classmethod
    def for_model(cls, model_dir: str | Path, **overrides: Any) -> EvalSettings:
        """The prompt style and limits the model folder says it was trained with (``venus_agent.json``, see
        :mod:`venus_utils.agent.settings`), with ``overrides`` (None values are ignored)."""
        found = model_agent_settings(
            model_dir, fallback={"max_turns": cls.max_turns, "max_new_tokens": cls.max_new_tokens}
        )
        values = {
            "system_prompt_style": found.system_prompt_style,
            "max_turns": found.max_turns,
            "max_new_tokens": found.max_new_tokens,
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def agent_config(self, context_tokens: int) -> AgentConfig:
        """The agent loop that answers: these settings (:class:`~venus_utils.agent.settings.AgentSettings`, the one
        way every consumer builds its loop), one attempt per question (to measure what the model does, not what a
        retry hides), a prompt plus answer within the model's ``context_tokens``."""
        return AgentSettings(self.system_prompt_style, self.max_turns, self.max_new_tokens).config(
            temperature=self.temperature,
            top_k=None,
            attempts=1,
            context_limit=context_tokens - self.max_new_tokens,
            time_limit_s=900.0,
        )

    def __post_init__(self) -> None:
        if self.workers is None:
            self.workers = CPU_WORKERS if str(self.device).startswith("cpu") else 32

    def protocol(self) -> dict[str, Any]:
        """What decides the answers (not how fast they come: workers, device and the decoder are left out)."""
        return {k: v for k, v in asdict(self).items() if k not in ("workers", "processes", "device", "fast")}


def evaluate_model(
    model_dir: str | Path,
    questions: pd.DataFrame,
    out_path: str | Path,
    settings: EvalSettings,
    *,
    world_dir: str | Path | None = None,
    tools: Any = None,
    judge: Any = None,
    reuse_from: str | Path | None = None,
    progress: bool = True,
) -> pd.DataFrame:
    """Answer ``questions`` with the model folder ``model_dir`` and score the answers; writes the raw rollouts to
    ``<out_path>.jsonl`` (resumable, restarted when the model or settings change) and the scored table to
    ``out_path`` (parquet).  Returns the scored table.  When ``out_path`` already holds the scored answers of this
    model, these questions and this protocol, it is read, not recomputed; so is ``reuse_from``, another stage's
    scored file (notebook 04 reads notebook 03's greedy SFT results instead of answering again)."""
    out_path = Path(out_path)
    rollouts = out_path.with_suffix(".jsonl")
    model_dir = Path(model_dir)
    fingerprint = dict(
        model=str(model_dir.resolve()),
        model_digest=model_digest(model_dir),
        questions=questions["id"].astype(str).tolist(),
        **settings.protocol(),
    )
    if judge is None:
        judge = Judge.from_env()
    # which judge decided (``offline-exact`` or the LLM's model name), not why it was chosen
    judged_by = getattr(judge, "name", None) or getattr(judge, "__name__", "a judge function")
    for done_path in [p for p in (reuse_from, out_path) if p is not None]:
        done = _reusable(Path(done_path), fingerprint, judged_by, len(questions) * settings.samples)
        if done is not None:
            print(
                f"[heldout] {Path(done_path).name}: {len(questions)} questions already answered and scored by this "
                "model with this protocol and judge (reused, not recomputed)"
            )
            return done
    fold_parts(rollouts, part_files(rollouts))  # a killed pass's answers belong to the fingerprint checked next
    loaders.fresh_predictions(rollouts, fingerprint, PLACE_KEYS)
    rows = [
        {"index": str(r.id), "question": r.question, "gt": r.answer, "data_source": r.source}
        for r in questions.itertuples(index=False)
    ]
    answer_questions(model_dir, rows, rollouts, settings, world_dir=world_dir, tools=tools, progress=progress)
    table = metrics.attach_answers(loaders.load_predictions(rollouts), questions)
    scored = metrics.score(table, judge=judge, progress=False)
    scored = scored.drop(columns=[c for c in DROP_COLUMNS if c in scored.columns]).assign(judge=judged_by)
    unjudged = int(scored["correct"].isna().sum())
    fell_back = int((scored.get("judge_method", pd.Series(dtype=str)) == "offline-fallback").sum())
    if unjudged or fell_back:
        print(
            f"[heldout] WARNING: the judge failed on {unjudged + fell_back} of {len(scored)} answers: "
            + (f"{unjudged} left out of every figure (not counted as wrong)" if unjudged else "")
            + ("; " if unjudged and fell_back else "")
            + (f"{fell_back} judged by the offline judge instead (JUDGE_FALLBACK=offline)" if fell_back else "")
        )
    with atomic_path(out_path) as tmp:
        scored.to_parquet(tmp)
    return scored


#: fingerprint keys that record where a model was, not what it is: its content digest decides, so a run folder
#: copied or moved keeps its scored answers
PLACE_KEYS = ("model",)


def _reusable(path: Path, fingerprint: dict, judged_by: str, rows: int) -> pd.DataFrame | None:
    """The scored table at ``path`` if it was made with ``fingerprint`` (its rollouts' sidecar), is complete and was
    scored by the same judge, every answer judged by it (no judge error, no offline fallback); else None."""
    if not (path.exists() and made_with(path.with_suffix(".jsonl"), fingerprint, PLACE_KEYS)):
        return None
    done = load_scored(path)
    same_judge = "judge" in done and len(done) and done["judge"].iloc[0] == judged_by
    fell_back = "judge_method" in done and (done["judge_method"] == "offline-fallback").any()
    fully_judged = not done["correct"].isna().any() and not fell_back
    complete = len(done) == rows and set(done["id"]) == set(fingerprint["questions"])
    return done if complete and same_judge and fully_judged else None


def _flips(scored: pd.DataFrame, fresh: pd.DataFrame, path: str, examples: list[dict]) -> list[dict[str, Any]]:
    """Per judge of ``scored`` (its ``judge`` column): answers, verdicts right -> wrong and wrong -> right under
    ``fresh``; every flipped answer is added to ``examples`` (table, judge, direction, prediction, truth)."""
    judged_by = scored["judge"].astype(str) if "judge" in scored else pd.Series("", index=scored.index)
    out = []
    for old in sorted(judged_by.unique()):
        rows = judged_by == old
        was, now = scored.loc[rows, "correct"], fresh.loc[rows, "correct"]
        flips = {"right_to_wrong": (was == 1) & (now == 0), "wrong_to_right": (was == 0) & (now == 1)}
        out.append({"judged_by": old, "n": int(rows.sum()), **{k: int(v.sum()) for k, v in flips.items()}})
        for direction, flipped in flips.items():
            for i in flipped[flipped].index:
                prediction, truth = scored.at[i, "prediction"], scored.at[i, "answer"]
                examples.append(
                    {"table": path, "judged_by": old, "direction": direction, "prediction": prediction, "truth": truth}
                )
    return out


def rejudge(
    run_dir: str | Path, judge: Any = None, write: bool = True, examples: list[dict] | None = None
) -> list[dict[str, Any]]:
    """Score again, with ``judge`` (default: the configured one), every held-out and validation table of a run
    folder that another judge scored (its ``judge`` column), from the answers the table holds: no model runs.  For a
    judge that changed its rule (``offline-strict-2`` -> ``offline-exact``), so that old and new results pair again.
    Returns one record per table: its path, the judges before and after, answers re-judged, verdicts that changed,
    and ``flips``: per earlier judge, its answers and the verdicts that went right -> wrong and wrong -> right (each
    flipped answer is appended to ``examples`` when given).  With ``write=False`` nothing is rewritten (a kept table
    is only read).  The stages' ``summary.json`` figures are not rewritten: where a verdict changed, rerun the stage
    to refresh them."""
    run = Path(run_dir)
    judge = judge if judge is not None else Judge.from_env()
    name = getattr(judge, "name", None) or getattr(judge, "__name__", "a judge function")
    tables = [run / rel for rel in SCORED.values()] + sorted(run.glob("*/validation_*.parquet"))
    out = []
    for path in (p for p in tables if p.is_file()):
        scored = load_scored(path)
        before = sorted(set(scored["judge"].dropna().astype(str))) if "judge" in scored else []
        if before == [name]:
            continue
        fresh = metrics.score(scored.drop(columns=["correct", "judge_method"], errors="ignore"), judge=judge)
        changed = int((fresh["correct"].fillna(-1) != scored["correct"].fillna(-1)).sum())
        flips = _flips(scored, fresh, str(path), examples if examples is not None else [])
        fresh = fresh.assign(judge=name)
        if write:
            with atomic_path(path) as tmp:
                fresh.to_parquet(tmp)
        record = {"table": str(path), "judged_by": before, "now": name, "answers": len(fresh), "changed": changed}
        out.append({**record, "flips": flips})
    return out


def rejudge_report(
    runs: Sequence[str | Path],
    judge: Any = None,
    examples: int = 25,
    relative_to: str | Path | None = None,
    write: bool = False,
) -> dict[str, Any]:
    """What re-judging run folders with ``judge`` (default: the configured one) changes (:func:`rejudge`; by default
    ``write=False``, a kept ``results/<run>`` table is only read): one row per (table, earlier judge) with its
    answers and the verdicts that went right -> wrong and wrong -> right, the totals per earlier judge, and the first
    ``examples`` distinct flipped answers with their truth (and the first table that holds each).  Table paths are
    shown relative to ``relative_to`` when given.  ``python -m venus_utils.eval rejudge results/* --dry-run --json
    FILE`` writes it (the committed ``results/rejudge-offline-exact.json``, checked by a test)."""
    judge = judge if judge is not None else Judge.from_env()
    name = getattr(judge, "name", None) or getattr(judge, "__name__", "a judge function")

    def shown(path: str | Path) -> str:
        return Path(os.path.relpath(path, relative_to)).as_posix() if relative_to is not None else str(path)

    rows, flipped = [], []
    for run in runs:
        for record in rejudge(run, judge, write=write, examples=flipped):
            rows += [{"table": shown(record["table"]), **flip} for flip in record["flips"]]
    totals: dict[str, dict[str, int]] = {}
    for row in rows:
        total = totals.setdefault(row["judged_by"], {"n": 0, "right_to_wrong": 0, "wrong_to_right": 0})
        for key in total:
            total[key] += row[key]
    distinct: dict[tuple, dict] = {}  # each flipped answer once, with the first table that holds it
    for e in flipped:
        distinct.setdefault((e["direction"], e["prediction"], e["truth"]), {**e, "table": shown(e["table"])})
    shown_examples = list(distinct.values())[:examples]
    return {"judge": name, "tables": rows, "totals": totals, "examples": shown_examples}


def run_results(run_dir: str | Path) -> dict[str, pd.DataFrame]:
    """The greedy held-out results a run folder holds, by model (:data:`SCORED`), for side-by-side tables."""
    return {label: load_scored(Path(run_dir) / rel) for label, rel in SCORED.items() if (Path(run_dir) / rel).exists()}


def load_scored(path: str | Path) -> pd.DataFrame:
    """A scored table written by :func:`evaluate_model`."""
    return pd.read_parquet(path)


def per_question(scored: pd.DataFrame) -> pd.DataFrame:
    """One row per question: ``correct`` (the majority over its samples; with greedy decoding its one answer),
    ``pass_rate`` (mean over samples) and the question's breakdown columns.  Samples the judge failed on
    (``correct`` NaN) are not counted, and a question without a judged sample is left out (:func:`summary` counts
    both): an unjudged answer is not a wrong one."""
    keep = [c for c in META_COLUMNS if c in scored.columns]
    g = scored[scored["correct"].notna()].groupby("id", sort=False)
    out = g.agg(pass_rate=("correct", "mean"), samples=("correct", "count"), turns=("turns", "mean"))
    out["correct"] = out["pass_rate"] >= 0.5
    if keep:
        out = out.join(g[keep].first())
    return out.reset_index()


def summary(scored: pd.DataFrame, by: tuple[str, ...] = BREAKDOWN) -> dict:
    """``summary.json`` figures of one scored evaluation: accuracy with n and interval, the judge methods used and
    the breakdowns (records of :func:`venus_utils.eval.stats.accuracy_table`)."""
    pq = per_question(scored)
    overall = accuracy_ci(pq["correct"].tolist())
    name, rows = headline_slice(pq)
    return {
        "headline": {"slice": name, **accuracy_ci(rows["correct"].tolist())},
        "accuracy": overall["accuracy"],
        "n": overall["n"],
        "ci_low": overall["ci_low"],
        "ci_high": overall["ci_high"],
        "samples_per_question": int(pq["samples"].min()) if len(pq) else 0,
        "judge_errors": int(scored["correct"].isna().sum()),
        "unjudged_questions": int(scored["id"].nunique() - len(pq)),
        "mean_turns": float(scored["turns"].mean()) if len(scored) else None,
        "judge_methods": {
            str(k): int(v) for k, v in scored.get("judge_method", pd.Series(dtype=str)).value_counts().items()
        },
        "by": accuracy_table(pq, by).to_dict("records"),
    }


def compare(baseline: pd.DataFrame, other: pd.DataFrame) -> dict[str, Any]:
    """Two models' scored held-out tables paired by question (:func:`venus_utils.eval.stats.paired_comparison`:
    accuracies, the difference with its interval, the exact McNemar p, fixed / broken counts and the verdict), with
    the same per slice (``by``: :data:`BREAKDOWN`, e.g. ``tier_group`` hard/heldout) and the headline slice's.  Both
    tables must have been judged by the same judge (its name in the ``judge`` column): a pair scored by two rules
    would measure the rules."""
    judges = [sorted(set(t["judge"].dropna().astype(str))) if "judge" in t else [] for t in (baseline, other)]
    if judges[0] and judges[1] and judges[0] != judges[1]:
        raise ValueError(
            f"cannot pair answers judged by {', '.join(judges[0])} with answers judged by {', '.join(judges[1])}: "
            "score both with one judge (python -m venus_utils.eval rejudge <run folder>)"
        )
    first, second = per_question(baseline), per_question(other)
    if first.empty or second.empty or not set(first["id"]) & set(second["id"]):
        raise ValueError(
            "the two tables share no question: they were drawn from different held-out sets (notebook 04's "
            "heldout_split val against notebook 03's test questions?) or one is empty"
        )
    out = paired_comparison(first.set_index("id")["correct"], second.set_index("id")["correct"])
    name, rows = headline_slice(second)
    headline = paired_comparison(first.set_index("id")["correct"], rows.set_index("id")["correct"])
    by = comparison_table(first, second, [c for c in BREAKDOWN if c in second])
    return {**out, "headline": {"slice": name, **headline}, "by": by[by["group"] != "all"].to_dict("records")}


#: the columns a kept result holds: enough to pair, pool and break down (no rollouts, no page text)
KEPT_COLUMNS = ("id", "sample", "question", "answer", "prediction", "correct", "em", "f1", "turns", "judge")
KEPT_COLUMNS += ("judge_method",)  # which answers the offline fallback judged when the LLM judge failed
KEPT_FILES = (SUMMARY, "arms.json", RUN_PROFILE, "metrics.jsonl")  # metrics: per RL step
#: an SFT-trained arm's log (SFT, more SFT, rejection sampling: one row per logged step), kept as its ``metrics.jsonl``
#: so that every kept arm's training log has one name
SFT_HISTORY = "train_history.json"
#: kept gzip-compressed (``<name>.gz``, ~40 KB an RL arm of the cpu lesson): the training rollouts' rewards, per-turn
#: information gain and advantages, the evidence for what an arm's update pushed (rl.run_report reads them)
KEPT_COMPRESSED = ("episodes.jsonl",)
KEPT_MARKER = "kept.json"  # what says a folder was written by keep_results (and lists it), which may then replace it
KEEP_TOOL = "eval keep"


def keep_results(run_dir: str | Path, out_dir: str | Path) -> list[Path]:
    """Copy what a run's held-out results say into ``out_dir`` (a folder to commit; run folders do not outlive a
    machine): each scored table of :data:`SCORED` that the run has, at the same place, reduced to
    :data:`KEPT_COLUMNS` and the breakdown columns; each stage's ``summary.json``; the run's ``arms.json`` and
    ``profile.yaml``; the validation tables beside each model (``eval validate``); each arm's training log as its
    ``metrics.jsonl`` (an RL arm's own; an SFT-trained arm's :data:`SFT_HISTORY`, one row per logged step), and each
    RL arm's ``episodes.jsonl`` compressed (:data:`KEPT_COMPRESSED`).  ``python -m venus_utils.eval
    compare`` pools such folders as it pools run folders.  Returns the files written."""
    run, out = Path(run_dir), Path(out_dir)
    if run.resolve() == out.resolve():
        raise ValueError(f"--out {out}: the run folder itself")
    check_replaceable(out, KEEP_TOOL, KEPT_MARKER)  # before anything is read
    tables = [run / rel for rel in SCORED.values()] + sorted(run.glob("*/validation_*.parquet"))
    tables = [path for path in tables if path.is_file()]
    if not tables:
        raise FileNotFoundError(f"{run}: no held-out results to keep ({', '.join(SCORED.values())})")
    files = [path for name in KEPT_FILES for path in [run / name, *sorted(run.glob(f"*/{name}"))] if path.is_file()]
    written = []
    # all of it or nothing; an earlier keep into the same folder is replaced whole while nobody added to it
    with atomic_dir(out, KEEP_TOOL, KEPT_MARKER) as tmp:
        for path in tables:
            scored = load_scored(path)
            keep = [c for c in (*KEPT_COLUMNS, *META_COLUMNS) if c in scored.columns]
            target = Path(tmp) / path.relative_to(run)
            target.parent.mkdir(parents=True, exist_ok=True)
            scored[keep].to_parquet(target, index=False)
            written.append(out / path.relative_to(run))
        for path in files:
            target = Path(tmp) / path.relative_to(run)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
            written.append(out / path.relative_to(run))
        for path in sorted(run.glob(f"*/{SFT_HISTORY}")):
            if not (path.parent / "metrics.jsonl").is_file():
                target = Path(tmp) / path.relative_to(run).with_name("metrics.jsonl")
                write_jsonl(target, read_json(path))
                written.append(out / target.relative_to(tmp))
        for name in KEPT_COMPRESSED:
            for path in sorted(run.glob(f"*/{name}")):
                target = Path(tmp) / path.relative_to(run).with_name(f"{name}.gz")
                target.parent.mkdir(parents=True, exist_ok=True)
                with path.open("rb") as src, target.open("wb") as raw:
                    with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:  # the same bytes each time
                        shutil.copyfileobj(src, gz)
                written.append(out / target.relative_to(tmp))
        write_json(Path(tmp) / KEPT_MARKER, {"run": str(run), "files": [str(w.relative_to(out)) for w in written]})
    return written


#: :func:`compare_runs`' row of the seed-level statistics (each run is a seed: its difference is one observation)
SEEDS_ROW = "seeds"


def compare_runs(run_dirs: Sequence[str | Path], baseline: str = "SFT", model: str = "RL (IGPO)") -> pd.DataFrame:
    """``model`` against ``baseline`` (labels of :data:`SCORED`) in each run folder, paired by question, and, for
    two or more runs (e.g. one per seed), pooled: every run's questions taken together as one paired sample (a
    question of run k counts as its own question).  One row per run plus ``pooled``, with
    :func:`venus_utils.eval.stats.paired_comparison`'s columns, for every question (``slice`` "all") and, when a
    run's world has a hard tier, again for the headline slice (:data:`HEADLINE`: the hard tier's held-out
    sub-worlds; pooled over the runs that have it), and a :data:`SEEDS_ROW` row per slice with the seed as the unit
    (:func:`~venus_utils.eval.stats.seed_level`: the runs' differences, their mean with a t-interval over runs, a
    sign count).  A run without both results is an error naming the missing files."""
    if baseline not in SCORED or model not in SCORED:
        raise ValueError(f"models are one of {sorted(SCORED)}; got {baseline!r} and {model!r}")
    pairs = []
    for run in map(Path, run_dirs):
        missing = [str(run / SCORED[label]) for label in (baseline, model) if not (run / SCORED[label]).exists()]
        if missing:
            raise FileNotFoundError(f"{run}: no held-out results at {', '.join(missing)}")
        pairs.append((run, *(per_question(load_scored(run / SCORED[label])) for label in (baseline, model))))
    rows = []
    for name in ("all", HEADLINE):
        before, after, differences = [], [], []
        for k, (run, a, b) in enumerate(pairs):
            if name == HEADLINE:
                found, b = headline_slice(b)
                if found != HEADLINE:  # no hard tier in this run's world
                    continue
                a = a[a["id"].isin(b["id"])]
            a, b = a.set_index("id")["correct"], b.set_index("id")["correct"]
            rows.append({"run": str(run), "slice": name, **paired_comparison(a, b)})
            if len(pairs) > 1 and not rows[-1]["n"]:  # nothing to pool or to count as a seed's difference
                raise ValueError(
                    f"{run}: {model} and {baseline} share no question ids ({name} questions; scored on different "
                    "held-out draws?): a pooled or seed-level comparison needs the same questions in each run"
                )
            differences.append(rows[-1]["difference"])
            before.append(a.rename(index=lambda q, k=k: f"{k}:{q}"))
            after.append(b.rename(index=lambda q, k=k: f"{k}:{q}"))
        if len(before) > 1:
            rows.append({"run": "pooled", "slice": name, **paired_comparison(pd.concat(before), pd.concat(after))})
            rows.append({"run": SEEDS_ROW, "slice": name, **seed_level(differences)})
    return pd.DataFrame(rows)


def comparison_frame(comparisons: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """:func:`compare_to`'s comparisons as a table, one row per model: the overall figures and the headline slice's
    accuracies, difference and McNemar p (the per-slice ``by`` records stay in the dicts, for ``summary.json``)."""
    rows = {}
    for label, c in comparisons.items():
        row = {k: v for k, v in c.items() if not isinstance(v, (dict, list))}
        head = c.get("headline") or {}
        for key in ("accuracy_before", "accuracy_after", "difference", "mcnemar_p", "n"):
            row[f"{head.get('slice', 'headline')}: {key}"] = head.get(key)
        rows[label] = row
    return pd.DataFrame(rows).T


def arm_pairs(labels: Sequence[str]) -> list[tuple[str, str]]:
    """The ``(baseline, model)`` pairs a run's held-out results are compared in, of the models ``labels`` names
    (:data:`SCORED`): every trained model (each RL arm, the control, rejection sampling) against the SFT model it
    started from, every RL arm against each cheaper way to spend its compute (:data:`CONTROL`: more SFT, "RL vs more
    SFT"; :data:`RFT`: fine-tuning on the SFT model's own right answers, "RL vs rejection sampling"), and IGPO
    against GRPO."""
    have = set(labels)
    rl = [label for label in labels if label.startswith("RL")]
    pairs = [("SFT", model) for model in [*rl, CONTROL, RFT] if model in have and "SFT" in have]
    for cheaper in (CONTROL, RFT):
        if cheaper in have:
            pairs += [(cheaper, model) for model in rl]
    if {"RL (IGPO)", "RL (GRPO)"} <= have:
        pairs.append(("RL (GRPO)", "RL (IGPO)"))
    return pairs


def compare_to(results: dict[str, pd.DataFrame]) -> dict[str, dict[str, Any]]:
    """The pairs of :func:`arm_pairs` of :func:`run_results`' models, each paired on the same questions
    (:func:`compare`), keyed by the model's label against SFT and by ``"<model> vs <baseline>"`` otherwise."""
    return {
        model if baseline == "SFT" else f"{model} vs {baseline}": compare(results[baseline], results[model])
        for baseline, model in arm_pairs(list(results))
    }


def run_story(run_dir: str | Path) -> dict[str, list[dict[str, Any]]]:
    """A run's held-out results in numbers (the book's first page): each model's accuracy on every question and on
    the headline slice, with n and 95% interval (:func:`summary`), and the paired verdicts (:func:`compare`) of
    :func:`arm_pairs`.  Empty lists for a run without held-out results."""
    results = run_results(run_dir)
    models = []
    for label, scored in results.items():
        s = summary(scored, by=())
        models.append(
            {"model": label, **{k: s[k] for k in ("n", "accuracy", "ci_low", "ci_high")}, "headline": s["headline"]}
        )
    comparisons = [
        {"baseline": baseline, "model": model, **compare(results[baseline], results[model])}
        for baseline, model in arm_pairs(list(results))
    ]
    return {"models": models, "comparisons": comparisons}
