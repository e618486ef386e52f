"""The control arm beside the RL arms: more SFT for the same compute, scored the way the RL arms are.

:func:`train_control_arm` continues the run's stopped SFT model (:mod:`venus_utils.sft.continuation`) with the
settings the SFT stage itself ran with (its ``summary.json`` records them), for the model FLOPs an RL arm counted
(:func:`venus_utils.rl.stage.train_flops`), into ``<run>/04_igpo_rl_control``, then answers the run's held-out
questions greedily with the SFT model's protocol and pairs it with the SFT model, as :mod:`venus_utils.rl.stage` does
for an RL arm.
Notebook 04 (``control_arm = True``) and ``python -m venus_utils.rl arms --arms ...,control`` both call it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core.io import read_json
from ..core.paths import CONTROL_DIR, SFT_STAGE
from ..core.profiles import RENAMED
from ..core.stage import SUMMARY, Stage
from ..eval import heldout as ho
from ..judging.judge import Judge
from ..sft.continuation import train_control
from ..tools import make_toolbox
from .stage import heldout_eval, heldout_scores, stage_inputs


def sft_settings(run_dir: str | Path) -> dict[str, Any]:
    """The settings the run's SFT stage ran with (the values its ``summary.json`` recorded, whatever their source)."""
    summary = Path(run_dir) / SFT_STAGE / SUMMARY
    if not summary.is_file():
        raise FileNotFoundError(f"{summary}: the run has no finished SFT stage to continue")
    recorded = read_json(summary).get("settings") or {}
    if not recorded:
        raise ValueError(f"{summary}: records no settings (a run from before settings were recorded)")
    # a run made before a parameter's rename recorded it under its old name
    return {RENAMED.get(name, name): entry["value"] for name, entry in recorded.items()}


def train_control_arm(
    run_dir: str | Path,
    budget_flops: float,
    *,
    offline: bool = True,
    train_qa: str | Path | None = None,
    heldout_qa: str | Path | None = None,
    heldout_n: int | None = None,
    heldout_split: str = "test",
    seed: int = 0,
    device: str = "cpu",
    judge: Any = None,
    tools: Any = None,
    profile: str | None = None,
    launched_from: str = "notebook 04",
) -> dict[str, Any]:
    """Train the control for ``budget_flops`` (a finished control is not trained again), score it on the run's
    held-out questions (``heldout_n`` of ``heldout_qa`` or the world's ``heldout_split``, as the RL arm's) with
    ``judge`` and ``tools`` (defaults: the configured judge, the run's offline tools), and return its
    ``summary.json``."""
    params = sft_settings(run_dir)
    stage = Stage(SFT_STAGE, run_dir, Path(run_dir) / CONTROL_DIR, profile)
    stage.hold()
    stage.record_settings(params)
    sft_dir, world_dir, _ = stage_inputs(stage, offline, train_qa)
    before = read_json(stage.dir / SUMMARY) if (stage.dir / SUMMARY).is_file() else {}
    figures = train_control(stage, params, float(budget_flops))
    if figures["train_wall_s"] is None and before.get("steps") == figures["steps"] and before.get("train_wall_s"):
        figures["train_wall_s"] = before["train_wall_s"]  # checkpoints of older code keep no clock: its summary's
    comparison: dict = {}
    questions, settings = heldout_eval(stage, sft_dir, heldout_qa, world_dir, heldout_n, seed, device, heldout_split)
    if questions is not None:  # the same greedy held-out evaluation as the RL arms'
        judge = judge if judge is not None else Judge.from_env()
        if tools is None:
            tools = make_toolbox("local", world_dir) if offline else make_toolbox("web")
        kw = dict(sft_dir=sft_dir, world_dir=world_dir, tools=tools, judge=judge)
        comparison = ho.compare(
            heldout_scores(stage, "sft", questions, settings, **kw),
            heldout_scores(stage, "rl", questions, settings, **kw),
        )
        figures["judge"] = judge.describe() if hasattr(judge, "describe") else str(judge)
    print(
        f"[control] {figures['steps']} SFT steps, {figures['flops_vs_budget']}x the RL arm's FLOPs; model: "
        f"{figures['model_dir']}",
        flush=True,
    )
    return stage.finish(**figures, heldout_comparison=comparison, launched_from=launched_from)


def control_reading(comparisons: dict[str, dict[str, Any]], control: dict[str, Any], rl_label: str) -> str:
    """What a run's control says, in sentences built from its own numbers (notebook 04, section 9): ``comparisons``
    as :func:`venus_utils.eval.heldout.compare_to` returns them for SFT, the control and the RL arm ``rl_label``
    (the headline slice when the world has one), ``control`` the control's ``summary.json``. When more SFT wins, it
    says what limits RL in this run and what would lift it."""

    def headline(key: str) -> dict[str, Any]:  # the headline slice's figures where the world has one
        return comparisons[key].get("headline") or comparisons[key]

    pair, more, rl = headline(f"{rl_label} vs {ho.CONTROL}"), headline(ho.CONTROL), headline(rl_label)
    where = "" if pair.get("slice", "all") == "all" else f"{pair['slice']} "
    numbers = (
        f"On the {pair['n']} {where}held-out questions, {rl_label} answers {pair['accuracy_after']:.3f} and more SFT "
        f"{pair['accuracy_before']:.3f}: "
        f"{pair['difference']:+.3f} [{pair['diff_ci_low']:+.3f}, {pair['diff_ci_high']:+.3f}], McNemar p = "
        f"{pair['mcnemar_p']:.2g} ({pair['fixed']} fixed / {pair['broken']} broken)."
    )
    if pair["diff_ci_low"] > 0:
        return f"{numbers} RL taught something that the same compute of SFT did not, on this seed."
    if pair["diff_ci_high"] >= 0:
        return f"{numbers} This run cannot tell RL from more training: the interval covers 0."
    return (
        f"{numbers} More SFT for the same compute does better. What limits RL here: it starts from an SFT model that "
        f"stopped at step {control['start_step']} with room left: {control['steps']} more SFT steps (learning rate "
        f"{control['learning_rate_start']:.3g} annealed to {control['learning_rate_floor']:.3g}) add "
        f"{more['difference']:+.3f} over the stopped model, the RL arm {rl['difference']:+.3f} for the same FLOPs. "
        "What would lift it: a stopping rule that lets SFT finish its schedule, then RL from that annealed model, "
        "compared with more SFT from there (docs/experiments.md: seeds 20-25)."
    )
