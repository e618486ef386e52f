"""Notebook 04 helpers: load the policy, the worked IG example, and the training plots."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import pandas as pd

from ..io import read_jsonl


def load_policy(model_dir: str | Path, device: str = "cpu"):
    """The model and tokenizer saved by an earlier stage (``save_pretrained`` folder)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model_dir = Path(model_dir)
    if not (model_dir / "config.json").exists():
        raise FileNotFoundError(f"{model_dir}: no model here (config.json missing); run the SFT notebook first")
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    # the SFT export is bfloat16; on CPU train (and score IG) in float32, where tiny updates do not vanish
    dtype = torch.float32 if device == "cpu" else "auto"
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype).to(device)
    return model, tokenizer


def load_shared_rollout(path: str | Path, max_tokens: int, tokenizer, min_turns: int = 2) -> tuple[list[dict], str]:
    """A DR-Venus RL rollout cut after the last whole turn that fits in ``max_tokens`` (but keeping at least
    ``min_turns`` tool turns), followed by its final answer turn, and that final answer.

    The shared rollouts carry no ground truth, so the worked example scores the answer the rollout ended on.
    """
    from ..protocol import extract_answer

    data = json.loads(Path(path).read_text(encoding="utf-8"))
    messages = data["messages"]
    answer = extract_answer(messages[-1]["content"]) if messages[-1]["role"] == "assistant" else None
    answer = (answer or "").strip("*_ \n")  # the example ends with a markdown-bold answer
    if not answer:
        raise ValueError(f"{path}: the rollout does not end with an <answer>")
    final = [{"role": "assistant", "content": messages[-1]["content"]}]

    def size(msgs):
        return len(tokenizer(tokenizer.apply_chat_template(msgs, tokenize=False), add_special_tokens=False)["input_ids"])

    keep = 2
    for k in range(2, len(messages) - 1, 2):  # add (assistant, tool response) pairs while they fit
        if k // 2 > min_turns and size(messages[: k + 2] + final) > max_tokens:
            break
        keep = k + 2
    return messages[:keep] + final, answer


def own_rollout_example(model, tokenizer, tools, row: dict, cfg):
    """A worked-example episode from this run itself: the current policy answers one RL question with the run's tools
    (what the trainer does each step), for when DR-Venus's shared rollouts are not at hand.  Returns
    ``(episode, ground_truth)``."""
    import torch

    from .rollout import make_agent_rollout

    with torch.no_grad():
        episode = make_agent_rollout(tools)(model, tokenizer, [row], cfg)[0]
    return episode, str(row["ground_truth"]).split("<|answer_split|>")[0]


def turn_table(ep, ig_all, ig_filtered) -> pd.DataFrame:
    """One row per non-final turn: tool, IG scored at every boundary, IG with the tool filter."""
    return pd.DataFrame({"turn": range(ep.num_turns - 1), "tool": [t or "-" for t in ep.tool_names[:-1]],
                         "ig_every_turn": ig_all.gains, "ig_after_visit": ig_filtered.gains,
                         "value_after": ig_all.values[1:]})


def episodes_frame(path: str | Path) -> pd.DataFrame:
    return pd.DataFrame(read_jsonl(path)) if Path(path).exists() else pd.DataFrame()


def ig_by_turn(episodes: pd.DataFrame) -> pd.DataFrame:
    """Long table (step, turn, ig) of every IG value of the training rollouts."""
    rows = [{"step": e.step, "turn": t, "ig": g} for e in episodes.itertuples() for t, g in enumerate(e.info_gain)
            if g is not None]
    return pd.DataFrame(rows, columns=["step", "turn", "ig"])


def training_figure(metrics: pd.DataFrame, episodes: pd.DataFrame, path: str | Path | None = None):
    """Reward / accuracy, IG by turn, penalty rate, turns per episode, KL and entropy, one panel each."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    steps = metrics.dropna(subset=["reward"]) if "reward" in metrics else metrics
    fig, axes = plt.subplots(2, 3, figsize=(14, 7))
    for ax, cols, title in [(axes[0, 0], ["reward", "accuracy"], "outcome reward and accuracy"),
                            (axes[0, 2], ["penalty_rate"], "malformed-turn rate"), (axes[1, 0], ["turns"], "turns per episode"),
                            (axes[1, 1], ["kl"], "KL to the SFT policy"), (axes[1, 2], ["entropy"], "entropy")]:
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


def resume_settings(cfg, sft_model: str | Path, question_pool: Sequence[dict], filter_samples: int = 0) -> dict:
    """What defines an RL run, for :func:`venus_utils.checkpoints.guard_resume`: the IGPO config without its step
    limits and rollout engine, the SFT model, the question pool (before any filter: the filter samples) and the
    filter setting."""
    import hashlib

    skip = {"max_steps", "save_steps", "save_total_limit", "use_vllm", "vllm_mode", "vllm_server_base_url",
            "vllm_server_sync_weights", "vllm_tensor_parallel_size", "vllm_gpu_memory_utilization"}
    pool = hashlib.sha256("\n".join(str(r["id"]) for r in question_pool).encode()).hexdigest()[:16]
    return {**{k: v for k, v in cfg.to_dict().items() if k not in skip}, "sft_model": str(sft_model),
            "questions": f"{len(question_pool)} questions, sha256 {pool}", "filter_samples": filter_samples}


def rl_question_file(train_qa: str | Path | None, world_dir: str | Path | None) -> Path:
    """The RL questions (a verl-schema QA parquet): ``train_qa`` when it is set, else the offline world's RL split
    ``qa/rl.parquet`` (questions that are in no SFT trajectory and not held out, like DR-Venus's separate RL set;
    the world builds it with ``rl_frac``), else its ``qa/train.parquet`` (``world_dir``: ``00_setup/world``; None for
    the web tools).

    With the web tools there is no world to fall back on: DR-Venus trains RL on REDSearcher's RL question set
    (``REDSearcher_RL_1K``), which ``train_qa`` must name.  Raises :class:`~venus_utils.config.ConfigError` (unset)
    or FileNotFoundError (not there), naming the key, before any model loads.  A relative ``train_qa`` is read from
    the working directory, else from the repository root (Papermill runs in the stage folder).
    """
    from ..config import ConfigError
    from ..eval.loaders import _find  # the notebooks' rule for a user path: working directory, else repository root

    if train_qa:
        path = _find(train_qa)
        if not path.is_file():
            raise FileNotFoundError(f"train_qa names {train_qa}, which is not a file (looked in the working directory "
                                    "and in the repository root)")
        return path
    if world_dir is None:
        raise ConfigError("train_qa is not set, and with offline: false there is no offline world to take RL questions "
                          "from: set train_qa in the 04_igpo_rl section of the profile (or --set train_qa=PATH) to the "
                          "RL question parquet (verl schema, e.g. REDSearcher_RL_1K)")
    rl = Path(world_dir) / "qa" / "rl.parquet"
    if rl.is_file():
        return rl
    print(f"[rl] {world_dir} has no RL question split (world_knobs rl_frac): RL trains on the SFT questions")
    return Path(world_dir) / "qa" / "train.parquet"


def qa_rows(path: str | Path, limit: int | None = None, seed: int = 0) -> list[dict]:
    """Rows for the trainer / evaluation from a verl-schema QA parquet: ``limit`` questions drawn by seed, keeping the
    file's mix of templates and hop counts where it has them (the offline world), shuffled."""
    from ..eval.loaders import load_verl_qa, stratified_sample
    from .trainer import rl_rows

    qa = load_verl_qa(path)
    if limit is not None and limit < len(qa):
        qa = stratified_sample(qa, limit, seed=seed)
    return rl_rows(qa)


#: the per-step columns notebook 04 shows; groups_with_signal / groups_with_any_signal: shares of the step's groups whose
#: outcomes differ / with any non-zero advantage (IG and penalties too), i.e. that can move the policy
STEP_KEYS = ("reward", "accuracy", "ig_mean", "penalty_rate", "turns", "kl", "entropy", "adv_nonzero_frac",
             "groups_with_signal", "groups_with_any_signal")


def summarize_steps(metrics: pd.DataFrame, keys: Sequence[str] = STEP_KEYS) -> pd.DataFrame:
    cols = ["step", *[k for k in keys if k in metrics]]
    return metrics.dropna(subset=["reward"])[cols].reset_index(drop=True) if "reward" in metrics else metrics


def why_no_gain(comparison: dict, episodes: pd.DataFrame, metrics: pd.DataFrame | None = None) -> pd.DataFrame:
    """Measured reasons for a small RL gain, as one table.

    - held-out questions the RL policy fixed / broke / left unchanged (greedy answers, paired:
      :func:`venus_utils.eval.stats.paired_comparison`) and the exact McNemar p-value;
    - training groups whose rollouts all got the same outcome (no outcome signal: only IG and penalties move them),
      split into all-right and all-wrong, and the mean share of groups with a signal per step;
    - outcome accuracy of the training rollouts in the first and the last quarter of the steps, and the step count.
    """
    rows = {"held-out questions": comparison.get("n"), "fixed by RL": comparison.get("fixed"),
            "broken by RL": comparison.get("broken"),
            "unchanged": (comparison.get("both_right") or 0) + (comparison.get("both_wrong") or 0),
            "McNemar p (exact)": comparison.get("mcnemar_p")}
    if len(episodes) and {"step", "group", "judge_score"} <= set(episodes.columns):
        right = episodes.assign(right=episodes["judge_score"].astype(float) >= 1.0)
        groups = right.groupby(["step", "group"])["right"].agg(["min", "max"])
        rows.update({"training groups": len(groups),
                     "groups all right (no outcome signal)": int((groups["min"] == 1).sum()),
                     "groups all wrong (no outcome signal)": int((groups["max"] == 0).sum())})
        steps = sorted(right["step"].unique())
        quarter = max(1, len(steps) // 4)
        rows["RL steps"] = len(steps)
        rows["rollout accuracy, first quarter of steps"] = round(float(right[right["step"].isin(steps[:quarter])]["right"].mean()), 3)
        rows["rollout accuracy, last quarter of steps"] = round(float(right[right["step"].isin(steps[-quarter:])]["right"].mean()), 3)
    if metrics is not None and "groups_with_signal" in metrics:
        rows["mean share of groups with an outcome signal per step"] = round(float(metrics["groups_with_signal"].mean()), 3)
    return pd.DataFrame({"value": rows})


def heldout_eval(run_dir: str | Path, sft_dir: str | Path, source: str | Path | None, n: int | None, seed: int = 0,
                 device: str = "cpu"):
    """``(questions, settings)`` of RL's held-out evaluation: the run's held-out set (drawn once, the one notebook 03
    scored) and the SFT model's own protocol (its ``venus_agent.json``), so SFT and RL are compared on the same
    questions, greedy, and notebook 03's SFT results are reused.  ``(None, None)`` when ``n`` is 0 or there is no
    question source (no world, no ``heldout_qa``)."""
    from ..eval import heldout as ho

    if not n or source is None:
        return None, None
    return ho.heldout_questions(run_dir, source, n, seed), ho.EvalSettings.for_model(sft_dir, device=device)


def score_heldout(run_dir: str | Path, stage_dir: str | Path, sft_dir: str | Path, rl_dir: str | Path, questions,
                  settings, *, world_dir=None, tools=None, judge=None) -> tuple:
    """Greedy held-out results of the SFT model (notebook 03's, reused when they match) and of the RL model, and their
    paired comparison (:func:`venus_utils.eval.stats.paired_comparison`)."""
    from ..eval import heldout as ho
    from ..eval.stats import paired_comparison

    kw = dict(world_dir=world_dir, tools=tools, judge=judge)
    sft = ho.evaluate_model(sft_dir, questions, Path(stage_dir) / "heldout_sft.parquet", settings,
                            reuse_from=Path(run_dir) / ho.SCORED["SFT"], **kw)
    rl = ho.evaluate_model(rl_dir, questions, Path(stage_dir) / "heldout_rl.parquet", settings, **kw)
    a, b = ho.per_question(sft).set_index("id")["correct"], ho.per_question(rl).set_index("id")["correct"]
    return sft, rl, paired_comparison(a, b)


ARMS = {"IGPO": "04_igpo_rl", "GRPO (outcome only)": "04_igpo_rl_grpo"}


def arms(run_dir: str | Path) -> dict[str, Path]:
    """The RL runs of a run folder that finished (``summary.json``), by reward design: IGPO (``04_igpo_rl``) and the
    outcome-only GRPO arm (``04_igpo_rl_grpo``, ``python -m venus_utils.rl train --set reward_mode=grpo --out ...``)."""
    return {label: Path(run_dir) / name for label, name in ARMS.items() if (Path(run_dir) / name / "summary.json").exists()}


def arms_figure(run_dir: str | Path, sft_scored: pd.DataFrame | None = None, path: str | Path | None = None):
    """IGPO and GRPO side by side, when both ran: outcome reward and share of groups with an outcome signal per step,
    and held-out accuracy (greedy, 95% interval) of SFT and each arm.  None when fewer than two arms finished."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    from ..eval.heldout import per_question
    from ..eval.stats import accuracy_ci

    found = arms(run_dir)
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
    if "groups_with_signal" in steps:
        sns.lineplot(data=steps, x="step", y="groups_with_signal", hue="arm", ax=axes[1])
    axes[1].set_title("share of groups with an outcome signal")
    if acc:
        a = pd.DataFrame(acc)
        axes[2].bar(a["model"], a["accuracy"], yerr=[a["accuracy"] - a["ci_low"], a["ci_high"] - a["accuracy"]],
                    capsize=4, color="#8fb3d9")
        axes[2].set(ylabel="accuracy (95% CI)", title=f"held-out accuracy, greedy (n={int(a['n'].iloc[0])})")
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig
