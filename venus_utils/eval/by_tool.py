"""What the training turns of RL runs gained and what the update pushed them by, tool by tool: the tables notebook 04
shows for its own run (sections 6-8) and ``python -m venus_utils.eval study`` prints for a study's seeds, read from
the arms' training episodes (``episodes.jsonl``, or the ``.gz`` that ``eval keep`` keeps).

- :func:`episodes_frame`: the training rollouts, one row each;
- :func:`ig_by_tool`: the information gain by tool and by how the episode ended;
- :func:`advantage_by_tool`: the mean advantage by tool and outcome, and the share of turns pushed down;
- :func:`mechanism`: both, per arm, per run and pooled over runs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from ..core.io import read_jsonl
from .heldout import RL_ARMS


def episodes_frame(path: str | Path) -> pd.DataFrame:
    """The training rollouts (``episodes.jsonl``, or the ``episodes.jsonl.gz`` that ``eval keep`` keeps), one row
    each; empty when neither exists."""
    for candidate in (Path(path), Path(f"{path}.gz")):
        if candidate.is_file():
            return pd.DataFrame(read_jsonl(candidate))
    return pd.DataFrame()


def ig_by_tool(episodes: pd.DataFrame) -> pd.DataFrame:
    """Information gain by the tool a turn called and by how its episode ended: per (tool, episode) the number of
    turns, the mean and median gain and the share of turns whose gain is negative (the answer got less likely).

    ``info_gain[t]`` belongs to turn ``t`` (``tool_names[t]``); a turn the tool filter did not score (None) is left
    out. A tool whose mean is negative is one IGPO's turn-level advantages push the policy away from.
    """
    rows = [
        {
            "tool": tool or "(no tool call)",
            "episode": "right" if float(e.judge_score) >= 1.0 else "wrong",
            "ig": float(g),
        }
        for e in episodes.itertuples()
        for tool, g in zip(e.tool_names, e.info_gain)
        if g is not None
    ]
    columns = ["tool", "episode", "turns", "mean_ig", "median_ig", "share_negative"]
    if not rows:
        return pd.DataFrame(columns=columns)
    long = pd.DataFrame(rows)
    both = pd.concat([long, long.assign(episode="all")])
    table = both.groupby(["tool", "episode"])["ig"].agg(
        turns="size", mean_ig="mean", median_ig="median", share_negative=lambda v: float((v < 0).mean())
    )
    return table.reset_index()[columns]


def advantage_by_tool(episodes: pd.DataFrame) -> pd.DataFrame:
    """What the update pushed each kind of turn by: the mean advantage over a turn's sampled tokens
    (``turn_advantages`` of ``episodes.jsonl``), by the tool the turn called ("(answer)" for the last turn) and by how
    its episode ended, with the share of such turns pushed down (advantage < 0).  Under GRPO every turn of an episode
    gets its outcome's advantage; under IGPO a turn's own information gain moves it too, so a tool whose gain is
    negative on average is pushed down even in episodes that end right.  Empty for runs before the column existed."""
    rows = []
    for e in episodes.itertuples():
        advantages = getattr(e, "turn_advantages", None)
        if not isinstance(advantages, (list, tuple)):
            continue
        last = len(e.tool_names) - 1
        for t, (tool, a) in enumerate(zip(e.tool_names, advantages)):
            if a is None or (isinstance(a, float) and math.isnan(a)):
                continue
            kind = "(answer)" if t == last else (tool or "(no tool call)")
            rows.append({"tool": kind, "episode": "right" if float(e.judge_score) >= 1.0 else "wrong", "advantage": a})
    columns = ["tool", "episode", "turns", "mean_advantage", "share_pushed_down"]
    if not rows:
        return pd.DataFrame(columns=columns)
    long = pd.DataFrame(rows)
    both = pd.concat([long, long.assign(episode="all")])
    table = both.groupby(["tool", "episode"])["advantage"].agg(
        turns="size", mean_advantage="mean", share_pushed_down=lambda v: float((v < 0).mean())
    )
    return table.reset_index()[columns]


def mechanism(run_dirs: Sequence[str | Path], names: Sequence[str] | None = None) -> pd.DataFrame:
    """What each RL arm's update pushed, tool by tool, from the arms' training episodes (``episodes.jsonl``, or the
    ``.gz`` that ``eval keep`` keeps) in several runs (one per seed, named by ``names``) and pooled over them: per arm,
    tool and episode outcome (right, wrong, all), the turns, the mean information gain (:func:`ig_by_tool`) and the
    mean advantage with the share of turns pushed down (:func:`advantage_by_tool`). IGPO losing to GRPO while a
    ``visit`` turn's mean gain is negative is the mechanism this table can show. Runs or arms without episodes are
    left out."""
    names = list(names) if names is not None else [Path(run).name for run in run_dirs]
    keys = ["tool", "episode"]
    frames = []
    for arm, folder in RL_ARMS.items():
        found = []
        for name, run in zip(names, run_dirs):
            episodes = episodes_frame(Path(run) / folder / "episodes.jsonl")
            if not episodes.empty:
                found.append((name, episodes))
        if len(found) > 1:
            found.append(("pooled", pd.concat([e for _, e in found], ignore_index=True)))
        for name, episodes in found:
            ig = ig_by_tool(episodes)[[*keys, "turns", "mean_ig"]]
            adv = advantage_by_tool(episodes).rename(columns={"turns": "scored_turns"})
            table = ig.merge(adv, on=keys, how="outer")
            # the answer turn has advantages, no IG; a count stays an int (the outer merge made it a float)
            table["turns"] = table["turns"].fillna(table["scored_turns"]).astype(int)
            frames.append(table.assign(run=name, arm=f"RL ({arm})"))
    columns = ["arm", "run", *keys, "turns", "mean_ig", "mean_advantage", "share_pushed_down"]
    if not frames:
        return pd.DataFrame(columns=columns)
    return pd.concat(frames, ignore_index=True).reindex(columns=columns)
