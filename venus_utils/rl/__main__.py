"""The IGPO stage from the command line, the way notebook 04 runs it, under any launcher.

    python -m venus_utils.rl train --params params/smoke.yaml [--run-dir runs/smoke] [--out DIR] [--set max_steps=2]
    accelerate launch --config_file params/accelerate/single_node_8gpu.yaml \
        -m venus_utils.rl train --params params/paper.yaml
    python -m venus_utils.rl train --params params/cpu.yaml --set reward_mode=grpo --out runs/cpu/04_igpo_rl_grpo
    python -m venus_utils.rl train --params params/cpu.yaml --set dynamic_sampling=true --out runs/cpu/04_igpo_rl_ds
    python -m venus_utils.rl arms --params params/cpu.yaml [--arms igpo,grpo]   # both arms, then compared

It reads the ``04_igpo_rl`` parameters (the lesson's values of :mod:`venus_utils.defaults`, as in the notebook <
profile < ``--set``), starts from ``03_sft_unsloth/model``, rolls out with the offline world's tools
(``00_setup/world``) or the web tools, and trains with :class:`venus_utils.rl.igpo_trainer.IGPOTrainer` and DR-Venus's
default turn / outcome rewards (plus the notebook's optional ``search_cost``), or with ``--set reward_mode=grpo`` the
outcome-only GRPO baseline: the same SFT model, seed, questions and budget, only the rewards differ. Give that arm its
own ``--out`` folder (relative paths are taken from the working directory: run from the repository root) so that both
arms sit side by side in the run folder (:data:`venus_utils.eval.heldout.RL_ARMS` lists the folders notebooks 04 and 05
compare); a folder's checkpoints are never resumed with other settings. Every process rolls out its share of each
step's ``prompts_per_step x num_generations`` episodes; advantages are computed over the gathered batch. It writes
``model/`` (with a ``README.md`` model card), ``metrics.jsonl``, ``episodes.jsonl``, the newest ``checkpoint-N/``
folders (``save_total_limit``) and ``summary.json``; a rerun resumes from the newest checkpoint. The RL questions are
``train_qa`` (the paper profile: REDSearcher's RL set, verl parquet), else the offline world's RL split
``qa/rl.parquet`` (else its ``qa/train.parquet``). When the run has a held-out set (notebook 03 draws it), the SFT and
RL models are scored on it greedily, as in notebook 04 (``heldout_rl.parquet`` and the summary).
"""

from __future__ import annotations

import argparse
import sys

from ..cli import parse_sets, run_cli, stage_params
from ..distributed import is_main_process, world_size
from ..eval import heldout as ho
from ..eval.judge import Judge, judge_function
from ..io import write_json
from ..stage import Stage, resolve_run_dir
from ..tools import make_toolbox
from .config import IGPOConfig
from .policy import load_policy
from .questions import qa_rows
from .rewards import reward_functions
from .stage import (
    STAGE,
    filter_questions,
    heldout_eval,
    heldout_scores,
    resume,
    save_model,
    stage_inputs,
    summary_figures,
    train_policy,
)


def train(args: argparse.Namespace) -> dict:
    """The steps of :mod:`venus_utils.rl.stage`, back to back, as notebook 04 runs them."""
    params, profile = stage_params(args.params, STAGE, parse_sets(args.sets))
    cfg = IGPOConfig.from_dict(params)
    turn_reward, outcome_reward = reward_functions(cfg)
    # inputs first: a missing question file or upstream stage fails before the stage folder or any model exists
    stage = Stage(STAGE, args.run_dir or f"runs/{profile}", args.out, profile)
    stage.record_settings(params)
    sft_dir, world_dir, train_file = stage_inputs(stage, params["offline"], params["train_qa"])
    stage.dir.mkdir(parents=True, exist_ok=True)
    model, tokenizer = load_policy(sft_dir, params["device"])
    grader = Judge.from_env(params["judge"])  # one judge: its describe() at the end counts any offline fallbacks
    judge_fn, _ = judge_function(grader)
    tools = make_toolbox("local", world_dir) if params["offline"] else make_toolbox("web")
    train_rows = qa_rows(train_file, params["train_questions"], cfg.seed)
    filter_samples = int(params.get("filter_samples") or 0)
    # DR-Venus's rewards (plus the optional search_cost); the GRPO arm trains on the trainer's own
    rewards = dict(turn_reward=turn_reward, outcome_reward=outcome_reward) if cfg.reward_mode == "igpo" else {}
    point = resume(
        stage,
        cfg,
        sft_dir,
        train_rows,
        filter_samples=filter_samples,
        max_time_minutes=params["max_time_minutes"],
        rewards=rewards,
    )
    train_rows, counts = filter_questions(stage, model, tokenizer, train_rows, tools, judge_fn, cfg, filter_samples)
    trainer = train_policy(
        stage,
        model,
        tokenizer,
        train_rows,
        cfg,
        tools,
        judge_fn,
        point,
        device=params["device"],
        max_time_minutes=params["max_time_minutes"],
        **rewards,
    )
    save_model(stage, trainer, tokenizer, sft_dir)
    comparison: dict = {}
    if is_main_process():
        questions, settings = heldout_eval(
            stage, sft_dir, params["heldout_qa"], world_dir, params["heldout_n"], cfg.seed, params["device"]
        )
        if questions is not None:  # the same greedy held-out evaluation as notebooks 03-05
            kw = dict(sft_dir=sft_dir, world_dir=world_dir, tools=tools, judge=grader)
            comparison = ho.compare(
                heldout_scores(stage, "sft", questions, settings, **kw),
                heldout_scores(stage, "rl", questions, settings, **kw),
            )
    summary = dict(
        summary_figures(
            trainer,
            cfg,
            point,
            sft_dir=sft_dir,
            train_file=train_file,
            questions=counts,
            judge=grader.describe(),
            comparison=comparison,
        ),
        launched_from="python -m venus_utils.rl train",
    )
    if is_main_process():
        summary = stage.finish(**summary)
        print(
            f"[rl] {summary['steps']} steps ({cfg.reward_mode}) on {world_size()} process(es); "
            f"model: {stage.path('model')}"
        )
    return summary


#: ``arms`` choices: the --set each arm trains with (on top of the profile and the command's own --set)
ARMS = {
    "igpo": ("IGPO", {"reward_mode": "igpo"}),
    "grpo": ("GRPO", {"reward_mode": "grpo", "search_cost": 0.0}),
    "ds": ("IGPO + dynamic sampling", {"reward_mode": "igpo", "dynamic_sampling": True}),
}


def _arm_choices(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--arms",
        default="igpo,grpo",
        help=f"comma-separated arms to train from the run's one SFT model ({', '.join(ARMS)}; default igpo,grpo)",
    )


def arms(args: argparse.Namespace) -> dict:
    """Every arm of ``--arms`` from the run's one SFT model, each in its own folder
    (:data:`venus_utils.eval.heldout.RL_ARMS`) with the same questions, seed and budget (only the rewards differ; a
    finished arm is not trained again), then the paired held-out comparisons: each arm against SFT and, with both,
    IGPO against GRPO, with the smallest difference the design could detect (``arms.json`` in the run folder; pool
    several seeds' run folders with ``python -m venus_utils.eval compare``)."""
    chosen = [a.strip() for a in args.arms.split(",") if a.strip()]
    unknown = sorted(set(chosen) - set(ARMS))
    if unknown or not chosen:
        raise ValueError(f"--arms {args.arms!r}: choose among {', '.join(ARMS)}")
    if args.out is not None:
        raise ValueError("--out: each arm has its own folder (eval.heldout.RL_ARMS); give --run-dir instead")
    _, profile = stage_params(args.params, STAGE, parse_sets(args.sets))
    run = resolve_run_dir(args.run_dir or f"runs/{profile}")
    for arm in chosen:
        label, sets = ARMS[arm]
        overrides = [*args.sets, *(f"{k}={'true' if v is True else v}" for k, v in sets.items())]
        print(f"[arms] {label}: {run / ho.RL_ARMS[label]}", flush=True)
        train(
            argparse.Namespace(params=args.params, run_dir=str(run), out=str(run / ho.RL_ARMS[label]), sets=overrides)
        )
    rows = []
    pairs = [("SFT", f"RL ({ARMS[a][0]})") for a in chosen]
    if {"igpo", "grpo"} <= set(chosen):
        pairs.append(("RL (GRPO)", "RL (IGPO)"))
    for baseline, model in pairs:
        try:  # every question, and the headline slice (hard/heldout) when the world has a hard tier
            found = ho.compare_runs([run], baseline=baseline, model=model).to_dict("records")
        except FileNotFoundError as exc:  # no held-out set in this run (notebook 03 draws it): nothing to pair
            found = [{"error": str(exc)}]
        rows += [{"baseline": baseline, "model": model, **row} for row in found]
    result = {"run": str(run), "arms": chosen, "comparisons": rows}
    if is_main_process():
        write_json(run / "arms.json", result)
        for r in rows:
            if "error" in r:
                print(f"[arms] {r['model']} vs {r['baseline']}: not compared ({r['error']})")
                continue
            print(
                f"[arms] {r['model']} vs {r['baseline']} ({r['slice']}): "
                f"{r['accuracy_after']:.3f} vs {r['accuracy_before']:.3f} "
                f"(n = {r['n']}), difference {r['difference']:+.3f} "
                f"[{r['diff_ci_low']:+.3f}, {r['diff_ci_high']:+.3f}], McNemar p = {r['mcnemar_p']:.3g} "
                f"({r['fixed']} fixed / {r['broken']} broken), detectable difference "
                f"{r['detectable_difference']:.3f}: {r['verdict']}"
            )
    return result


def main(argv: list[str] | None = None) -> int:
    return run_cli(
        "rl",
        "IGPO RL (notebook 04) from the command line.",
        train,
        argv,
        commands={"arms": ("train several reward arms from one SFT model and compare them", _arm_choices, arms)},
    )


if __name__ == "__main__":
    sys.exit(main())
