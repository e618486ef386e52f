"""What an RL run did, from the files it wrote: the per-step table and figure, the episodes, why the held-out gain
is what it is, and the IGPO / outcome-only GRPO arms of a run folder side by side (notebook 04, sections 5-8).

- :func:`summarize_steps` (``metrics.jsonl``), :func:`episodes_frame` / :func:`ig_by_turn` / :func:`ig_by_tool`
  (``episodes.jsonl``) and :func:`training_figure`: what happened during training;
- :func:`why_no_gain`: the measured reasons for a small RL gain, as one table;
- :func:`arms` / :func:`arms_figure`: the RL arms of a run folder (:data:`venus_utils.eval.heldout.RL_ARMS`) and
  their comparison.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from ..core.io import read_jsonl
from ..eval.heldout import RL_ARMS, per_question
from ..eval.stats import accuracy_ci

#: the per-step columns notebook 04 shows; groups_with_signal / groups_with_any_signal: shares of the step's trained
#: groups whose outcomes differ / with any non-zero advantage (IG and penalties too), i.e. that can move the policy;
#: sampled_groups_with_signal / groups_sampled: the same share among all the groups rolled out for the step, and
#: their number (dynamic sampling rolls out more groups than it trains on; without it the two shares agree);
#: groups_identical: the share of groups whose rollouts are all one trajectory (with entropy: is the policy exploring?)
STEP_KEYS = (
    "reward",
    "accuracy",
    "ig_mean",
    "penalty_rate",
    "turns",
    "kl",
    "entropy",
    "adv_nonzero_frac",
    "groups_with_signal",
    "groups_with_any_signal",
    "groups_identical",
    "sampled_groups_with_signal",
    "groups_sampled",
)


def summarize_steps(metrics: pd.DataFrame, keys: Sequence[str] = STEP_KEYS) -> pd.DataFrame:
    """One row per training step (the logged rows with a reward) with its ``step`` and the ``keys`` it has."""
    cols = ["step", *[k for k in keys if k in metrics]]
    return metrics.dropna(subset=["reward"])[cols].reset_index(drop=True) if "reward" in metrics else metrics


#: the RL step's phases the trainer times (``time_<phase>_s`` per logged step), in the order they run
PHASES = {
    "generation": "the policy generates the turns (local decoder or vLLM)",
    "rollout": "the rest of the rollouts: tools, the agent loop",
    "judge": "the judge scores the final answers",
    "info_gain": "information gain of every turn (the policy scores the ground truth)",
    "advantages": "rewards to turn-level advantages, reference log-probabilities for the KL",
    "update": "the policy's forward and backward passes and the optimizer step",
}


def phase_table(metrics: pd.DataFrame) -> pd.DataFrame:
    """Seconds per RL step by phase (mean over the logged steps, the first one, a warm-up, left out when there are
    more), with each phase's share and what it is; empty for a run logged before phases were timed."""
    cols = [f"time_{p}_s" for p in PHASES if f"time_{p}_s" in metrics]
    if not cols:
        return pd.DataFrame(columns=["phase", "seconds_per_step", "share", "what"])
    steps = metrics.dropna(subset=cols)
    steps = steps.iloc[1:] if len(steps) > 1 else steps
    means = steps[cols].mean()
    total = float(means.sum()) or 1.0
    return pd.DataFrame(
        [
            {"phase": c[5:-2], "seconds_per_step": float(v), "share": float(v) / total, "what": PHASES[c[5:-2]]}
            for c, v in means.items()
        ]
    )


def episodes_frame(path: str | Path) -> pd.DataFrame:
    """The training rollouts (``episodes.jsonl``, or the ``episodes.jsonl.gz`` that ``eval keep`` keeps), one row
    each; empty when neither exists."""
    for candidate in (Path(path), Path(f"{path}.gz")):
        if candidate.is_file():
            return pd.DataFrame(read_jsonl(candidate))
    return pd.DataFrame()


def ig_by_turn(episodes: pd.DataFrame) -> pd.DataFrame:
    """Long table (step, turn, ig) of every IG value of the training rollouts."""
    rows = [
        {"step": e.step, "turn": t, "ig": g}
        for e in episodes.itertuples()
        for t, g in enumerate(e.info_gain)
        if g is not None
    ]
    return pd.DataFrame(rows, columns=["step", "turn", "ig"])


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


def training_figure(metrics: pd.DataFrame, episodes: pd.DataFrame, path: str | Path | None = None):
    """Reward / accuracy, IG by turn, penalty rate, turns per episode, KL and entropy, one panel each."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    steps = metrics.dropna(subset=["reward"]) if "reward" in metrics else metrics
    fig, axes = plt.subplots(2, 3, figsize=(14, 7))
    for ax, cols, title in [
        (axes[0, 0], ["reward", "accuracy"], "outcome reward and accuracy"),
        (axes[0, 2], ["penalty_rate"], "malformed-turn rate"),
        (axes[1, 0], ["turns"], "turns per episode"),
        (axes[1, 1], ["kl"], "KL to the SFT policy"),
        (axes[1, 2], ["entropy"], "entropy"),
    ]:
        for col in cols:
            if col in steps:
                sns.lineplot(x=steps["step"], y=steps[col], ax=ax, label=col, marker="o")
        ax.set_title(title)
    ig = ig_by_turn(episodes) if len(episodes) else pd.DataFrame(columns=["turn", "ig"])
    if len(ig):
        sns.boxplot(data=ig, x="turn", y="ig", ax=axes[0, 1], color="#8fb3d9")
    axes[0, 1].set_title("information gain by turn (all steps)")
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig


def why_no_gain(comparison: dict, episodes: pd.DataFrame, metrics: pd.DataFrame | None = None) -> pd.DataFrame:
    """Measured reasons for a small RL gain, as one table.

    - held-out questions the RL policy fixed / broke / left unchanged (greedy answers, paired:
      :func:`venus_utils.eval.stats.paired_comparison`) and the exact McNemar p-value;
    - training groups whose rollouts all got the same outcome (no outcome signal: only IG and penalties move them),
      split into all-right and all-wrong, and the mean share of groups with a signal per step;
    - outcome accuracy of the training rollouts in the first and the last quarter of the steps, and the step count.
    """
    rows = {
        "held-out questions": comparison.get("n"),
        "fixed by RL": comparison.get("fixed"),
        "broken by RL": comparison.get("broken"),
        "unchanged": (comparison.get("both_right") or 0) + (comparison.get("both_wrong") or 0),
        "McNemar p (exact)": comparison.get("mcnemar_p"),
    }
    if len(episodes) and {"step", "group", "judge_score"} <= set(episodes.columns):
        right = episodes.assign(right=episodes["judge_score"].astype(float) >= 1.0)
        groups = right.groupby(["step", "group"])["right"].agg(["min", "max"])
        rows.update(
            {
                "training groups": len(groups),
                "groups all right (no outcome signal)": int((groups["min"] == 1).sum()),
                "groups all wrong (no outcome signal)": int((groups["max"] == 0).sum()),
            }
        )
        steps = sorted(right["step"].unique())
        quarter = max(1, len(steps) // 4)
        rows["RL steps"] = len(steps)
        for label, part in (("first", steps[:quarter]), ("last", steps[-quarter:])):
            accuracy = right[right["step"].isin(part)]["right"].mean()
            rows[f"rollout accuracy, {label} quarter of steps"] = round(float(accuracy), 3)
    if metrics is not None and "groups_with_signal" in metrics:
        signal = metrics["groups_with_signal"].mean()
        rows["mean share of groups with an outcome signal per step"] = round(float(signal), 3)
    if metrics is not None and "groups_sampled" in metrics and metrics["groups_sampled"].notna().any():
        # dynamic sampling: the groups above are the trained ones; these are all that were rolled out
        rows["groups rolled out per step"] = round(float(metrics["groups_sampled"].mean()), 2)
        share = metrics["sampled_groups_with_signal"].mean()
        rows["share of rolled-out groups with an outcome signal"] = round(float(share), 3)
    return pd.DataFrame({"value": rows})


def arms(run_dir: str | Path, current: str | Path | None = None) -> dict[str, Path]:
    """The RL runs of a run folder that finished (``summary.json``), by design
    (:data:`~venus_utils.eval.heldout.RL_ARMS`): IGPO (``04_igpo_rl``), the outcome-only GRPO arm
    (``04_igpo_rl_grpo``: ``python -m venus_utils.rl train --set reward_mode=grpo --out ...``) and IGPO with
    dynamic sampling (``04_igpo_rl_ds``: ``--set dynamic_sampling=true``).  ``current``: the stage folder being run
    (notebook 04 draws the figure before its own ``summary.json`` is written), counted when it has metrics.
    """
    folders = {label: Path(run_dir) / name for label, name in RL_ARMS.items()}
    here = Path(current).resolve() if current is not None else None

    def done(folder: Path) -> bool:
        if here is not None and folder.resolve() == here:
            return (folder / "metrics.jsonl").exists()
        return (folder / "summary.json").exists()

    return {label: folder for label, folder in folders.items() if done(folder)}


def arms_figure(
    run_dir: str | Path,
    sft_scored: pd.DataFrame | None = None,
    path: str | Path | None = None,
    current: str | Path | None = None,
):
    """The RL arms side by side, when two or more ran: outcome reward and share of rolled-out groups with an outcome
    signal per step, and held-out accuracy (greedy, 95% interval) of SFT and each arm.  None when fewer than two
    arms finished (``current``: see :func:`arms`)."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    found = arms(run_dir, current)
    if len(found) < 2:
        return None
    steps, acc = [], []
    if sft_scored is not None:
        acc.append({"model": "SFT", **accuracy_ci(per_question(sft_scored)["correct"].tolist())})
    for label, folder in found.items():
        m = pd.DataFrame(read_jsonl(folder / "metrics.jsonl"))
        steps.append(summarize_steps(m).assign(arm=label))
        scored = folder / "heldout_rl.parquet"
        if scored.exists():
            acc.append({"model": label, **accuracy_ci(per_question(pd.read_parquet(scored))["correct"].tolist())})
    steps = pd.concat(steps, ignore_index=True)
    fig, axes = plt.subplots(1, 3, figsize=(15, 3.6))
    sns.lineplot(data=steps, x="step", y="reward", hue="arm", ax=axes[0]).set_title("outcome reward per step")
    if "groups_with_signal" in steps:  # among the rolled-out groups (runs from before dynamic sampling: the trained)
        steps["signal"] = steps["groups_with_signal"]
        if "sampled_groups_with_signal" in steps:
            steps["signal"] = steps["sampled_groups_with_signal"].fillna(steps["signal"])
        sns.lineplot(data=steps, x="step", y="signal", hue="arm", ax=axes[1])
    axes[1].set_title("share of rolled-out groups with an outcome signal")
    if acc:
        a = pd.DataFrame(acc)
        axes[2].bar(
            a["model"],
            a["accuracy"],
            yerr=[a["accuracy"] - a["ci_low"], a["ci_high"] - a["accuracy"]],
            capsize=4,
            color="#8fb3d9",
        )
        axes[2].set(ylabel="accuracy (95% CI)", title=f"held-out accuracy, greedy (n={int(a['n'].iloc[0])})")
        axes[2].tick_params(axis="x", labelrotation=20)  # "IGPO + dynamic sampling" would overlap its neighbours
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig
