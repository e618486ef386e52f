"""Tables and figures of notebooks 01 (cleaning) and 02 (resampling); the logic lives here, tested.

Notebook 01: :func:`rule_examples` (each rule on a real before/after example), :func:`drop_reason_table`,
:func:`funnel` / :func:`plot_funnel` (beside DR-Venus's published 10,001 -> 9,365 -> 18,745) and
:func:`judge_agreement`.  Notebook 02: :func:`trajectory_table`, :func:`tool_positions`,
:func:`bucket_token_shares`, :func:`what_if` and the plots.
"""

from __future__ import annotations

import html
import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from ..core import protocol
from . import rules
from .resample import ResamplePolicy
from .search_text import parse_search_reference, parse_search_strict

#: DR-Venus's published funnel (its README): raw trajectories, after cleaning + correctness filtering, after
#: resampling.
PUBLISHED_FUNNEL = {"source": 10_001, "correct": 9_365, "resampled": 18_745}
FUNNEL_STAGES = ("source", "normalised", "valid", "correct", "resampled")


# --------------------------------------------------------------------------------------------------
# notebook 01


def _clip(text: Any, limit: int) -> str:
    text = "" if text is None else str(text)
    return (
        text
        if len(text) <= limit
        else text[: limit // 2] + f"\n[... {len(text) - limit} characters ...]\n" + text[-limit // 2 :]
    )


#: The column naming, for each example, the function of DR-Venus's ``prepare_trajectories.py`` that applies the
#: rule and, where the strict mode changes the outcome, the strict fix (:data:`~.rules.STRICT_FIXES`) involved.
STEP_COLUMN = "DR-Venus function / strict fix"


def _example(rule: str, step: str, before: str, ref: Any, strict: Any, limit: int) -> dict:
    return {
        "rule": rule,
        STEP_COLUMN: step,
        "before (raw)": _clip(before, limit),
        "after (reference)": _clip(ref, limit),
        "after (strict)": _clip(strict, limit),
    }


def rule_examples(rows: Iterable[dict], limit: int = 700) -> pd.DataFrame:
    """For each rule, the first real message of ``rows`` it changes, before and after, in both modes."""
    found: dict[str, dict] = {}
    removed = "(turn removed, with its tool response)"

    def want(key: str) -> bool:
        return key not in found

    for row in rows:
        messages = row.get("messages") if isinstance(row, dict) else None
        if not isinstance(messages, list):
            continue
        for i, m in enumerate(messages):
            if not isinstance(m, dict) or not isinstance(m.get("content"), str):
                continue
            text, role = m["content"], m.get("role")
            last = i == len(messages) - 1
            if role == "assistant" and not last:
                calls = rules.tool_calls_in(text)
                name = calls[0].get("name") if calls else None
                strict_turn = rules.clean_tool_turn_strict(text, Counter())[0]
                if want("std") and calls and any(k in (calls[0].get("arguments") or {}) for k in ("queries", "urls")):
                    found["std"] = _example(
                        "tool call standardised",
                        "clean_toolcall_output",
                        text,
                        rules.clean_tool_turn_reference(text),
                        strict_turn,
                        limit,
                    )
                if want("nothink") and "<think>" not in text:
                    found["nothink"] = _example(
                        "turn without reasoning dropped", "clean_toolcall_output", text, removed, removed, limit
                    )
                if want("prune") and isinstance(name, str) and name.lower() not in rules.DEDUP_TOOLS:
                    found["prune"] = _example(
                        f"disallowed tool pruned ({name})",
                        "prune_disallowed_tool_turns",
                        text,
                        removed,
                        removed,
                        limit,
                    )
                if want("multi") and len(protocol.TOOL_CALL_RE.findall(text)) > 1:
                    found["multi"] = _example(
                        "several calls in one turn",
                        "clean_toolcall_output; multiple_tool_calls_rejected",
                        text,
                        rules.clean_tool_turn_reference(text),
                        "(turn rejected: its response answers more than the first call)",
                        limit,
                    )
            elif role in ("user", "tool") and i > 0 and "Web Results" in text:
                body = text.replace("<tool_response>", "").replace("</tool_response>", "").strip()
                key = "sep" if "=======" in body else "source" if "\nSource:" in body else "search"
                if want(key):
                    label = {
                        "sep": "multi-query search: '=======' leak",
                        "source": "search 'Source:' line",
                        "search": "search text parsed to JSON",
                    }[key]
                    found[key] = _example(
                        label,
                        {
                            "sep": "parse_search_results; search_separator_removed",
                            "source": "parse_search_results; search_source_line_removed",
                            "search": "parse_search_results",
                        }[key],
                        body,
                        parse_search_reference(body),
                        parse_search_strict(body),
                        limit,
                    )
                if want("fail") and "No results found" in body:
                    found["fail"] = _example(
                        "failed query in a search",
                        "parse_search_results; search_failure_kept",
                        body,
                        parse_search_reference(body),
                        parse_search_strict(body),
                        limit,
                    )
            elif last and role == "assistant" and len(protocol.ANSWER_RE.findall(text)) and "<summary>" in text:
                if want("final"):
                    found["final"] = _example(
                        "final answer with <summary> / nested <answer>",
                        "clean_answer_output; answer_nested_open_removed, answer_summary_removed",
                        text,
                        rules.clean_final_turn_reference(text),
                        rules.clean_final_turn_strict(text, Counter())[0],
                        limit,
                    )
        if len(found) >= 10:
            break
    return pd.DataFrame(list(found.values()))


def side_by_side_html(examples: pd.DataFrame) -> str:
    """The examples as an HTML table with pre-formatted, wrapped cells (for ``IPython.display.HTML``)."""
    cols = list(examples.columns)
    head = "".join(f"<th style='text-align:left'>{html.escape(c)}</th>" for c in cols)
    body = []
    for _, row in examples.iterrows():
        cells = "".join(
            "<td style='vertical-align:top;text-align:left'>"
            "<pre style='white-space:pre-wrap;font-size:11px;max-width:420px'>"
            f"{html.escape(str(row[c]))}</pre></td>"
            for c in cols
        )
        body.append(f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def drop_reason_table(stats_by_mode: dict[str, dict]) -> pd.DataFrame:
    """Rows per drop reason for each run (e.g. {"reference": stats, "strict": stats}), plus kept rows."""
    table = (
        pd.DataFrame({mode: pd.Series(s["drop_reasons"], dtype="int64") for mode, s in stats_by_mode.items()})
        .fillna(0)
        .astype(int)
    )
    table.loc["(kept)"] = [s["rows"]["kept"] for s in stats_by_mode.values()]
    table.loc["(source)"] = [s["rows"]["source"] for s in stats_by_mode.values()]
    return table.rename_axis("drop reason")


def funnel(stats: dict) -> pd.DataFrame:
    """Rows at each stage: source -> normalised -> valid -> correct (kept) -> resampled."""
    rows = stats["rows"]
    values = [rows["source"], rows["stage1_normalized"], rows["stage2_valid"], rows["kept"], rows["final_resampled"]]
    return pd.DataFrame(
        {"stage": FUNNEL_STAGES, "rows": values, "share of source": [v / max(rows["source"], 1) for v in values]}
    )


def plot_funnel(run: pd.DataFrame, label: str = "this run"):
    """This run's funnel beside DR-Venus's published one (rows and share of source)."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
    sns.barplot(data=run, x="stage", y="rows", ax=axes[0], color="tab:blue")
    axes[0].set_title(f"{label}")
    published = pd.DataFrame({"stage": list(PUBLISHED_FUNNEL), "rows": list(PUBLISHED_FUNNEL.values())})
    sns.barplot(data=published, x="stage", y="rows", ax=axes[1], color="tab:gray")
    axes[1].set_title("DR-Venus (published): cleaning + correctness, then resampling")
    for ax in axes:
        for container in ax.containers:
            ax.bar_label(container, fmt="{:,.0f}", fontsize=8)
        ax.set_xlabel("")
    fig.tight_layout()
    return fig


def read_judgements(path: str | Path) -> pd.DataFrame:
    path = Path(path)
    if not path.exists():
        return pd.DataFrame(columns=["question", "answer", "gt", "correct", "method", "score", "em", "f1"])
    return pd.DataFrame([json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()])


def judge_agreement(judgements: pd.DataFrame) -> tuple[pd.DataFrame, float | None, pd.DataFrame]:
    """(exact match x judge crosstab, agreement rate, the rows where they disagree)."""
    if judgements.empty:
        return pd.DataFrame(), None, judgements
    em = judgements["em"].astype(bool).rename("exact match")
    verdict = judgements["correct"].astype(bool).rename("judge: correct")
    table = pd.crosstab(em, verdict)
    agree = float((em == verdict).mean())
    disagree = judgements.loc[em != verdict, ["answer", "gt", "method", "score", "f1"]]
    return table, agree, disagree


# --------------------------------------------------------------------------------------------------
# notebook 02


def trajectory_table(table, policy: ResamplePolicy | None = None) -> pd.DataFrame:
    """One row per trajectory: turns, tokens (or None), characters, tool calls, bucket and multiplier."""
    policy = policy or ResamplePolicy()
    names = table.column_names
    turns = table.column("_turns").to_pylist() if "_turns" in names else None
    tokens = table.column("_tokens").to_pylist() if "_tokens" in names else [None] * table.num_rows
    out = []
    for i, messages in enumerate(table.column("messages").to_pylist()):
        calls = Counter()
        for m in messages:
            if m.get("role") == "assistant":
                calls.update(c.get("name") for c in rules.tool_calls_in(m.get("content")))
        chars = sum(len(m.get("content") or "") for m in messages)
        t = turns[i] if turns else rules.turns_of(messages)
        out.append(
            {
                "turns": t,
                "tokens": tokens[i],
                "chars": chars,
                "search": calls.get("search", 0),
                "visit": calls.get("visit", 0),
                "bucket": policy.bucket(t),
                "multiplier": policy.multiplier(t),
            }
        )
    df = pd.DataFrame(out)
    df["length"] = df["tokens"] if df["tokens"].notna().all() and len(df) else df["chars"] / 4.0
    return df


def length_label(df: pd.DataFrame) -> str:
    return "tokens" if len(df) and df["tokens"].notna().all() else "≈ tokens (characters / 4: no tokenizer)"


def resampled_view(df: pd.DataFrame) -> pd.DataFrame:
    """The per-trajectory table with each row repeated by its multiplier (what training sees)."""
    return df.loc[df.index.repeat(df["multiplier"])].reset_index(drop=True)


def tool_positions(table, bins: int = 5) -> pd.DataFrame:
    """Share of search / visit / answer at each relative turn position (``bins`` equal slices of a trajectory)."""
    counts: Counter = Counter()
    for messages in table.column("messages").to_pylist():
        turns = [m for m in messages if m.get("role") == "assistant"]
        for k, m in enumerate(turns):
            position = min(int(k / max(len(turns), 1) * bins), bins - 1)
            calls = rules.tool_calls_in(m.get("content"))
            name = calls[0].get("name") if calls else ("answer" if "<answer>" in (m.get("content") or "") else "other")
            counts[(position, str(name))] += 1
    df = pd.DataFrame([{"position": p, "tool": t, "turns": n} for (p, t), n in counts.items()])
    if df.empty:
        return df
    df["share"] = df["turns"] / df.groupby("position")["turns"].transform("sum")
    labels = {p: f"{100 * p // bins}-{100 * (p + 1) // bins}%" for p in range(bins)}
    df["position"] = df["position"].map(labels)
    return df.sort_values(["position", "tool"]).reset_index(drop=True)


def bucket_token_shares(df: pd.DataFrame, policy: ResamplePolicy) -> pd.DataFrame:
    """Per bucket: trajectories and share of training tokens, before and after resampling."""
    df = df.assign(
        bucket=[policy.bucket(t) for t in df["turns"]], multiplier=[policy.multiplier(t) for t in df["turns"]]
    )
    out = pd.DataFrame(index=pd.Index(policy.labels(), name="bucket"))
    out["trajectories"] = df.groupby("bucket").size()
    out["multiplier"] = [
        policy.multiplier(t) for t in (policy.short_max_turns, policy.medium_max_turns, policy.medium_max_turns + 1)
    ]
    out["copies"] = out["trajectories"] * out["multiplier"]
    tokens = df.groupby("bucket")["length"].sum()
    out["token share before"] = tokens / max(tokens.sum(), 1)
    after = tokens * out["multiplier"]
    out["token share after"] = after / max(after.sum(), 1)
    return out.fillna(0)


def what_if(
    df: pd.DataFrame,
    short_max: Iterable[int],
    medium_max: Iterable[int],
    long_multipliers: Iterable[int],
    medium_multipliers: Iterable[int] = (2,),
) -> pd.DataFrame:
    """Training rows and long-trajectory token share for a grid of policies."""
    rows = []
    for s in short_max:
        for m in medium_max:
            if m < s:
                continue
            for mm in medium_multipliers:
                for lm in long_multipliers:
                    pol = ResamplePolicy(s, m, 1, mm, lm)
                    mult = df["turns"].map(pol.multiplier)
                    tokens = df["length"] * mult
                    long = df["turns"] > s
                    rows.append(
                        {
                            "short_max_turns": s,
                            "medium_max_turns": m,
                            "medium_multiplier": mm,
                            "long_multiplier": lm,
                            "training rows": int(mult.sum()),
                            "rows / source": float(mult.sum() / max(len(df), 1)),
                            "token share of >short": float(tokens[long].sum() / max(tokens.sum(), 1)),
                        }
                    )
    return pd.DataFrame(rows)


def plot_distributions(before: pd.DataFrame, after: pd.DataFrame, column: str, label: str):
    """Histogram, ECDF and bucket bars of ``column`` before and after resampling."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    both = pd.concat([before.assign(data="before"), after.assign(data="after resampling")], ignore_index=True)
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.6))
    hues = ["before", "after resampling"]
    sns.histplot(
        data=both, x=column, hue="data", hue_order=hues, element="step", stat="count", common_norm=False, ax=axes[0]
    )
    axes[0].set_xlabel(label)
    sns.ecdfplot(data=both, x=column, hue="data", hue_order=hues, ax=axes[1])
    axes[1].set_xlabel(label)
    counts = both.groupby(["data", "bucket"]).size().rename("rows").reset_index()
    order = [b for b in dict.fromkeys(before.sort_values("turns")["bucket"])] + sorted(
        set(counts["bucket"]) - set(before["bucket"])
    )
    sns.barplot(data=counts, x="bucket", y="rows", hue="data", hue_order=hues, order=order, ax=axes[2])
    axes[2].set_title("rows per turn bucket")
    fig.tight_layout()
    return fig


def load_kept(clean_dir: str | Path):
    """The kept rows of a cleaner run, one copy each, with metadata (strict: stage3, reference: stage2)."""
    clean_dir = Path(clean_dir)
    for name in ("stage3_kept.parquet", "stage2_deduped.parquet"):
        if (clean_dir / name).exists():
            return pq.read_table(clean_dir / name)
    raise FileNotFoundError(
        f"{clean_dir} has neither stage3_kept.parquet nor stage2_deduped.parquet: run notebook 01 "
        "(the cleaner with keep_intermediate=True) first"
    )
