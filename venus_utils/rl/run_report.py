"""What an RL run did, from the files it wrote: the per-step table and figure, the episodes, why the held-out gain
is what it is, and the IGPO / outcome-only GRPO arms of a run folder side by side (notebook 04, sections 5-8).

- :func:`summarize_steps` (``metrics.jsonl``), :func:`ig_by_turn` (``episodes.jsonl``, read by
  :func:`venus_utils.eval.by_tool.episodes_frame`) and :func:`training_figure`: what happened during training (the
  tables by tool are :mod:`venus_utils.eval.by_tool`'s);
- :func:`why_no_gain`: the measured reasons for a small RL gain, as one table;
- :func:`arms` / :func:`arms_figure`: the RL arms of a run folder (:data:`venus_utils.eval.heldout.RL_ARMS`) and
  their comparison.
"""

from __future__ import annotations

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


def ig_by_turn(episodes: pd.DataFrame) -> pd.DataFrame:
    """Long table (step, turn, ig) of every IG value of the training rollouts."""
    rows = [
        {"step": e.step, "turn": t, "ig": g}
        for e in episodes.itertuples()
        for t, g in enumerate(e.info_gain)
        if g is not None
    ]
    return pd.DataFrame(rows, columns=["step", "turn", "ig"])


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
