"""Evaluation figures (seaborn): accuracy by source, Pass@K curves (the paper's Figure 2), turns vs correctness.

Each function takes the tables of :mod:`venus_utils.eval.metrics`, draws on a new figure (or the given
axes), saves it atomically when ``path`` is given, and returns the figure.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..core.io import atomic_path
from .metrics import verdicts


def _figure(ax, size=(6, 3.5)):
    import matplotlib.pyplot as plt

    if ax is None:
        fig, ax = plt.subplots(figsize=size)
        return fig, ax
    return ax.figure, ax


def _save(fig, path: str | Path | None):
    if path is not None:
        path = Path(path)
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format=path.suffix.lstrip(".") or "png", dpi=120, bbox_inches="tight")
    return fig


def accuracy_by_source_bars(by_source: pd.DataFrame, ax=None, path=None, title="Judged accuracy by source"):
    """Bars of judged accuracy (and token F1) per group, from :func:`metrics.accuracy_by` (any ``by``)."""
    import seaborn as sns

    fig, ax = _figure(ax, (max(5, 0.9 * len(by_source) + 2), 3.5))
    group = by_source.index.name or "source"
    long = by_source.reset_index().melt(id_vars=group, value_vars=["accuracy", "f1"], var_name="metric")
    long[group] = long[group].astype(str)
    sns.barplot(data=long, x=group, y="value", hue="metric", ax=ax)
    ax.set(ylim=(0, 1), ylabel="score", xlabel="", title=title)
    ax.tick_params(axis="x", rotation=30)
    return _save(fig, path)


def pass_at_k_curves(curve: pd.DataFrame, hue: str | None = None, ax=None, path=None, title="Pass@K"):
    """Pass@K against K (log2 axis when K spans more than 4), one line per ``hue`` (model or source)."""
    import seaborn as sns

    fig, ax = _figure(ax)
    sns.lineplot(data=curve, x="k", y="pass_at_k", hue=hue, marker="o", ax=ax)
    if curve["k"].max() > 4:
        ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(curve["k"].unique()), labels=[str(k) for k in sorted(curve["k"].unique())])
    ax.set(ylim=(0, 1), xlabel="K (samples)", ylabel="Pass@K", title=title)
    return _save(fig, path)


def turns_vs_correctness(scored: pd.DataFrame, ax=None, path=None, title="Turns of correct and incorrect runs"):
    """How many turns correct and incorrect samples took (histogram, one bar colour per verdict)."""
    import seaborn as sns

    fig, ax = _figure(ax)
    data = scored.assign(outcome=verdicts(scored["correct"]))
    order = [o for o in ("correct", "incorrect", "unjudged") if o in set(data["outcome"])]
    sns.histplot(
        data=data,
        x="turns",
        hue="outcome",
        hue_order=order,
        multiple="dodge",
        discrete=True,
        shrink=0.8,
        palette={"correct": "#2ca02c", "incorrect": "#d62728", "unjudged": "#7f7f7f"},
        ax=ax,
    )
    ax.set(xlabel="turns", ylabel="samples", title=title)
    return _save(fig, path)


def terminations(term_table: pd.DataFrame, ax=None, path=None, title="How runs ended"):
    """Horizontal bars of the termination reasons, from :func:`metrics.termination_table`."""
    import seaborn as sns

    fig, ax = _figure(ax, (6, 0.4 * len(term_table) + 1.5))
    sns.barplot(data=term_table.reset_index(), y="termination", x="count", ax=ax, color="#6fa8dc")
    ax.set(xlabel="samples", ylabel="", title=title)
    return _save(fig, path)


def accuracy_intervals(
    tables: dict[str, pd.DataFrame], ax=None, path=None, title="Held-out accuracy (greedy) with 95% intervals"
):
    """Accuracy of one or more models (``{label: stats.accuracy_table(...)}``) per breakdown value, each bar with its
    95% interval, so a reader sees at once which differences the noise covers."""
    rows = pd.concat([t.assign(model=label) for label, t in tables.items()], ignore_index=True)
    rows["where"] = [v if g == "all" else f"{g}={v}" for g, v in zip(rows["group"], rows["value"])]
    places, models = list(dict.fromkeys(rows["where"])), list(tables)
    fig, ax = _figure(ax, (max(6, 1.1 * len(places) * max(1, len(models)) / 1.5 + 2), 3.6))
    width = 0.8 / max(1, len(models))
    for i, label in enumerate(models):
        part = rows[rows["model"] == label].set_index("where").reindex(places)
        x = np.arange(len(places)) + (i - (len(models) - 1) / 2) * width
        acc = part["accuracy"].astype(float)
        err = [(acc - part["ci_low"].astype(float)).clip(lower=0), (part["ci_high"].astype(float) - acc).clip(lower=0)]
        ax.bar(x, acc, width, yerr=err, capsize=3, label=label)
    ax.set_xticks(np.arange(len(places)), [f"{p}\n({_sizes(rows, p, models)})" for p in places], fontsize=8)
    ax.set(ylim=(0, 1), ylabel="accuracy", title=title)
    if len(models) > 1:  # beside the axes, never over a bar
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _save(fig, path)


def _sizes(rows: pd.DataFrame, place: str, models: list[str]) -> str:
    """``n=600``, or each model's n at ``place`` in legend order when they differ (``n=30 / 600``)."""
    at = rows[rows["where"] == place].set_index("model")["n"]
    sizes = [str(int(at[m])) if m in at.index else "-" for m in models]
    return f"n={sizes[0]}" if len(set(sizes)) == 1 else "n=" + " / ".join(sizes)
