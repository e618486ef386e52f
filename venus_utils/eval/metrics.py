"""Evaluation metrics over the agent's predictions: accuracy, pass@k, per-source tables and behaviour.

The flow in notebook 05 is ``attach_answers`` (predictions + ground truth) -> ``score`` (exact match and
token F1 from :mod:`venus_utils.judging.answers`, the judge's verdict from :mod:`venus_utils.judging.judge`) ->
the tables below.  A *scored* table has one row per (question, sample) with at least ``id``, ``source``,
``sample``, ``correct`` (0/1, the judge's verdict), ``em``, ``f1``, ``turns``, ``tool_call_count`` and
``termination``.

Large evaluations split over machines with :func:`shard_questions` and come back together with
:func:`merge_scored`; the merged figures equal a single run's (tested).

``pass_at_k`` is the unbiased estimator of Chen et al. (2021), the one behind the Pass@K curves of the
DR-Venus paper (Figure 2): with ``n`` samples of which ``c`` are correct,
``pass@k = 1 - C(n-c, k) / C(n, k)``, the probability that at least one of ``k`` samples drawn without
replacement is correct.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import pandas as pd

from ..core.paper import results_table
from ..core.validation import parse_shard
from ..judging import answers
from ..judging.judge import Judge, judged_score


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from ``n`` samples with ``c`` correct (``1 <= k <= n``, ``0 <= c <= n``)."""
    if not (
        isinstance(n, (int, np.integer)) and isinstance(c, (int, np.integer)) and isinstance(k, (int, np.integer))
    ):
        raise TypeError(f"pass_at_k takes integers, got n={n!r}, c={c!r}, k={k!r}")
    if n < 1 or not 0 <= c <= n:
        raise ValueError(f"pass_at_k needs n >= 1 and 0 <= c <= n (n={n}, c={c})")
    if not 1 <= k <= n:
        raise ValueError(f"pass_at_k needs 1 <= k <= n (k={k}, n={n})")
    if n - c < k:
        return 1.0
    # 1 - C(n-c, k)/C(n, k) = 1 - prod_{i=n-c+1}^{n} (1 - k/i), stable for large n
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


# --------------------------------------------------------------------------------------------------------
# Joining predictions and ground truth, scoring
# --------------------------------------------------------------------------------------------------------
def attach_answers(predictions: pd.DataFrame, qa: pd.DataFrame) -> pd.DataFrame:
    """Add ``id``, ``answer`` and ``source`` from ``qa`` to each prediction.

    Predictions are matched on ``id`` when they carry one, else on the question text.  Predictions that
    match no question are counted in ``result.attrs["dropped"]["no_ground_truth"]``; if none matches, a
    ``ValueError`` says so (wrong QA file).
    """
    qa_extra = [c for c in qa.columns if c not in ("id", "question")]  # answer, source, hops...
    preds = predictions.drop(columns=[c for c in qa_extra if c in predictions.columns])
    if "id" in preds.columns and preds["id"].notna().all():
        merged = preds.assign(id=preds["id"].astype(str)).merge(qa[["id", *qa_extra]], on="id", how="left")
    else:
        lookup = qa.drop_duplicates("question")[["question", "id", *qa_extra]]
        merged = preds.drop(columns=["id"], errors="ignore").merge(lookup, on="question", how="left")
    missing = merged["answer"].isna()
    if len(merged) and missing.all():
        raise ValueError(
            f"none of the {len(merged)} predictions matches a question of the QA table "
            f"(first: {merged['question'].iloc[0][:80]!r})"
        )
    out = merged[~missing].reset_index(drop=True)
    out.attrs["dropped"] = {"no_ground_truth": int(missing.sum())}
    return out


def score(
    table: pd.DataFrame,
    judge: Any = None,
    exact_match: Callable[[str, str], float] | None = None,
    token_f1: Callable[[str, str], float] | None = None,
    progress: bool = False,
) -> pd.DataFrame:
    """Add ``em``, ``f1`` and ``correct`` columns to a table with ``question``, ``prediction``, ``answer``.

    ``judge`` decides ``correct``: a :class:`venus_utils.judging.judge.Judge` (its verdict method, e.g. exact /
    llm / offline / error, goes in ``judge_method``), or a function ``(questions, predictions, answers) ->
    scores``; by default the configured judge (``Judge.from_env()``).  EM and F1 come from
    :mod:`venus_utils.judging.answers` unless given.
    """
    if exact_match is None or token_f1 is None:
        exact_match = exact_match or answers.exact_match
        token_f1 = token_f1 or answers.token_f1
    out = table.copy()
    preds = out["prediction"].fillna("").astype(str).tolist()
    golds = out["answer"].astype(str).tolist()
    out["em"] = [float(exact_match(p, g)) for p, g in zip(preds, golds)]
    out["f1"] = [float(token_f1(p, g)) for p, g in zip(preds, golds)]
    if judge is None:
        judge = Judge.from_env()
    questions = out["question"].astype(str).tolist()
    if hasattr(judge, "judge_many"):
        verdicts = judge.judge_many(zip(questions, preds, golds), progress=progress)
        out["correct"] = [v.value for v in verdicts]
        out["judge_method"] = [v.method for v in verdicts]
    else:
        out["correct"] = [judged_score(v) for v in judge(questions, preds, golds)]
    return out


# --------------------------------------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------------------------------------
def question_counts(scored: pd.DataFrame) -> pd.DataFrame:
    """One row per question: ``n`` judged samples, ``c`` correct, mean accuracy, EM, F1, turns and tool calls.

    Samples the judge failed on (``correct`` NaN) are not counted; a question without a judged sample is left out
    (:func:`summarize` counts both)."""
    g = scored[scored["correct"].notna()].groupby(["id", "source"], sort=False)
    return (
        g.agg(
            n=("correct", "count"),
            c=("correct", "sum"),
            accuracy=("correct", "mean"),
            em=("em", "mean"),
            f1=("f1", "mean"),
            turns=("turns", "mean"),
            tool_calls=("tool_call_count", "mean"),
        )
        .reset_index()
        .astype({"n": int, "c": int})
    )


def pass_at_k_curve(scored: pd.DataFrame, ks: Iterable[int] | None = None, by: str | None = None) -> pd.DataFrame:
    """Mean pass@k over questions for each ``k`` (up to the largest judged sample count), optionally per ``by``.

    Each ``k`` averages the questions with at least ``k`` judged samples (all of them, unless the judge failed on
    some answers); ``questions`` says how many.  Returns columns ``k``, ``pass_at_k``, ``questions`` (and ``by``).
    """
    pq = question_counts(scored)
    groups = [(None, pq)] if by is None else list(pq.groupby(by, sort=True))
    rows = []
    for key, part in groups:
        n_max = int(part["n"].max()) if len(part) else 0
        for k in sorted(set(ks or range(1, n_max + 1))):
            enough = part[part["n"] >= k]
            if k < 1 or not len(enough):
                continue
            value = float(np.mean([pass_at_k(int(n), int(c), k) for n, c in zip(enough["n"], enough["c"])]))
            rows.append({**({by: key} if by else {}), "k": k, "pass_at_k": value, "questions": len(enough)})
    return pd.DataFrame(rows)


def accuracy_by(scored: pd.DataFrame, by: str = "source") -> pd.DataFrame:
    """Per group of ``by`` (and overall): questions and samples judged, judged accuracy, EM, F1, mean turns, and
    the samples the judge failed on (``unjudged``: in no other column)."""

    def agg(part: pd.DataFrame) -> dict:
        unjudged = part["correct"].isna()
        part = part[~unjudged]
        return {
            "questions": part["id"].nunique(),
            "samples": len(part),
            "unjudged": int(unjudged.sum()),
            "accuracy": part["correct"].mean(),
            "em": part["em"].mean(),
            "f1": part["f1"].mean(),
            "turns": part["turns"].mean(),
        }

    rows = {str(key): agg(part) for key, part in scored.groupby(by, sort=True)}
    rows["all"] = agg(scored)
    return (
        pd.DataFrame(rows)
        .T.rename_axis(by)
        .astype(
            {
                "questions": int,
                "samples": int,
                "unjudged": int,
                "accuracy": float,
                "em": float,
                "f1": float,
                "turns": float,
            }
        )
    )


def accuracy_by_source(scored: pd.DataFrame) -> pd.DataFrame:
    """:func:`accuracy_by` the ``source`` column (benchmark or ``data_source``)."""
    return accuracy_by(scored, "source")


def verdicts(correct: pd.Series) -> pd.Series:
    """``correct`` as words: correct, incorrect, or unjudged (the judge failed: not a wrong answer)."""
    return pd.Series(
        np.where(correct.isna(), "unjudged", np.where(correct >= 1, "correct", "incorrect")), index=correct.index
    )


def behaviour_vs_correctness(scored: pd.DataFrame) -> pd.DataFrame:
    """Turns, tool calls and parse errors of correct against incorrect (and unjudged) samples (mean and median)."""
    cols = [c for c in ("turns", "tool_call_count", "parse_error_count") if c in scored]
    table = scored.assign(outcome=verdicts(scored["correct"])).groupby("outcome")[cols]
    return table.agg(["mean", "median", "count"])


def termination_table(scored: pd.DataFrame) -> pd.DataFrame:
    """How runs ended (answered, max_steps, timeout...): count, share and accuracy per reason."""
    g = scored.groupby("termination", sort=False)["correct"]
    out = pd.DataFrame({"count": g.size(), "accuracy": g.mean()})
    out["share"] = out["count"] / out["count"].sum()
    return out.sort_values("count", ascending=False)[["count", "share", "accuracy"]]


def summarize(scored: pd.DataFrame, ks: Iterable[int] | None = None) -> dict:
    """Key figures for ``summary.json``: accuracy (mean over samples), EM, F1, pass@k, counts."""
    curve = pass_at_k_curve(scored, ks)
    pq = question_counts(scored)
    return {
        "accuracy": float(scored["correct"].mean()) if len(scored) else float("nan"),
        "exact_match": float(scored["em"].mean()) if len(scored) else float("nan"),
        "f1": float(scored["f1"].mean()) if len(scored) else float("nan"),
        "pass_at_k": {int(k): float(v) for k, v in zip(curve.get("k", []), curve.get("pass_at_k", []))},
        "n_questions": int(len(pq)),
        "n_samples": int(len(scored)),
        "judge_errors": int(scored["correct"].isna().sum()),  # unjudged samples, left out of every figure
        "unjudged_questions": int(scored["id"].nunique() - len(pq)),
        "samples_per_question": int(pq["n"].min()) if len(pq) else 0,
        "mean_turns": float(scored["turns"].mean()) if len(scored) else float("nan"),
        "terminations": {str(k): int(v) for k, v in scored["termination"].value_counts().items()},
    }


# --------------------------------------------------------------------------------------------------------
# Sharded evaluation: split the questions, answer and score each shard anywhere, merge
# --------------------------------------------------------------------------------------------------------
def shard_questions(table: pd.DataFrame, shard: str | tuple[int, int], key: str = "id") -> pd.DataFrame:
    """The rows of shard ``i/n``: questions (by ``key``, in order of first appearance) ``i, i+n, ...``.

    Every sample of a question lands in the same shard, so pass@k can be computed after the merge.  Works on a
    QA table (one row per question: the file to give ``python -m venus_utils.agent run --input``) and on
    predictions or scored tables.
    """
    i, n = parse_shard(shard)
    codes = pd.factorize(table[key].astype(str), sort=False)[0]
    return table[codes % n == i]


def merge_scored(parts: Iterable[pd.DataFrame], key: str = "id") -> pd.DataFrame:
    """The shards' scored (or prediction) tables as one table, in a canonical order (question, then sample).

    A (question, sample) pair that occurs in two shards is an error.  :func:`summarize` and the other tables
    of the merged table equal those of a single run's table put in the same order (:func:`canonical_order`).
    """
    parts = list(parts)
    if not parts:
        raise ValueError("no shard tables to merge")
    merged = pd.concat(parts, ignore_index=True)
    cols = [key, "sample"] if "sample" in merged else [key]
    dup = merged.duplicated(cols, keep=False)
    if dup.any():
        first = merged.loc[dup, cols].iloc[0].tolist()
        raise ValueError(f"{int(dup.sum())} rows occur in more than one shard (first: {cols} = {first})")
    return canonical_order(merged, key)


def canonical_order(table: pd.DataFrame, key: str = "id") -> pd.DataFrame:
    """Rows sorted by question ``key`` then ``sample`` (a stable order whatever the workers' finishing order)."""
    cols = [key, "sample"] if "sample" in table else [key]
    return (
        table.assign(_key=table[key].astype(str))
        .sort_values(["_key", *cols[1:]], kind="stable")
        .drop(columns="_key")
        .reset_index(drop=True)
    )


def paper_comparison(run_label: str, accuracy: dict[str, float]) -> pd.DataFrame:
    """The paper's benchmark table (accuracy %, :func:`venus_utils.core.paper.results_table`) with this run beside it.

    ``accuracy`` maps a benchmark or QA-set name to a fraction in [0, 1].  Names that are paper benchmarks
    fill the paper's columns; other sets (e.g. the offline world's test split) get their own columns, empty
    for the paper's models: the numbers are not comparable and the table does not pretend they are.
    """
    paper = results_table().astype(float)
    row = pd.DataFrame(
        {name: [100.0 * float(v) if v is not None and not math.isnan(v) else np.nan] for name, v in accuracy.items()},
        index=[run_label],
    )
    return pd.concat([paper, row], axis=0)
