"""The IGPO stage from the command line, the way notebook 04 runs it, under any launcher.

    python -m venus_utils.rl train --params params/smoke.yaml [--run-dir runs/smoke] [--out DIR] [--set max_steps=2]
    accelerate launch --config_file params/accelerate/single_node_8gpu.yaml -m venus_utils.rl train --params params/paper.yaml
    python -m venus_utils.rl train --params params/cpu.yaml --set reward_mode=grpo --out runs/cpu/04_igpo_rl_grpo

It reads the ``04_igpo_rl`` parameters (notebook defaults < profile < ``--set``), starts from
``03_sft_unsloth/model``, rolls out with the offline world's tools (``00_setup/world``) or the web tools, and trains
with :class:`venus_utils.rl.trainer.IGPOTrainer` and DR-Venus's default turn / outcome rewards (plus the notebook's
optional ``search_cost``), or with ``--set reward_mode=grpo`` the outcome-only GRPO baseline: the same SFT model,
seed, questions and budget, only the rewards differ.  Give that arm its own ``--out`` folder (relative paths are
taken from the working directory: run from the repository root) so that both arms sit side by side in the run
folder; a folder's checkpoints are never resumed with another reward mode.  Every process rolls out its share of
each step's ``prompts_per_step x num_generations`` episodes; advantages are computed over the gathered batch.  It
writes ``model/`` (with a ``README.md`` model card), ``metrics.jsonl``, ``episodes.jsonl``, the newest
``checkpoint-N/`` folders (``save_total_limit``) and ``summary.json``; a rerun resumes from the newest checkpoint.
The RL questions are ``train_qa`` (the paper profile: REDSearcher's RL set, verl parquet), else the offline world's
RL split ``qa/rl.parquet`` (else its ``qa/train.parquet``).  When the run has a held-out set (notebook 03 draws it),
the SFT and RL models are scored on it greedily, as in notebook 04 (``heldout_rl.parquet`` and the summary).
"""

from __future__ import annotations

import argparse
import sys

from ..config import ConfigError
from ..launch import is_main_process, parse_sets, run_cli, stage_params, time_limit, world_size
from ..stage import Stage

STAGE = "04_igpo_rl"


def turn_reward_with_search_cost(cfg, search_cost: float):
    """DR-Venus's turn reward, minus ``search_cost`` for every search turn (notebook 04's reward cell)."""
    from .rewards import igpo_turn_reward

    def turn_reward(ep):
        rewards = igpo_turn_reward(ep, cfg.format_penalty, cfg.use_format_penalty)
        return [(r or 0.0) - search_cost if tool == "search" else r for r, tool in zip(rewards, ep.tool_names)]

    return turn_reward


def train(args: argparse.Namespace) -> dict:
    from datasets import Dataset

    from ..tools import make_toolbox
    from ..checkpoints import prepare_resume, train_to_end
    from . import report
    from .config import IGPOConfig
    from .rollout import make_agent_rollout, unsolved_questions
    from .trainer import IGPOTrainer, grpo_args, project_judge, save_policy

    params, profile = stage_params(args.params, STAGE, parse_sets(args.sets))
    cfg = IGPOConfig.from_dict(params)
    if cfg.reward_mode == "grpo" and params.get("search_cost"):
        raise ConfigError(f"search_cost={params['search_cost']} is a turn reward, and reward_mode=grpo has none: "
                          "set search_cost=0 for the GRPO arm")
    # inputs first: a missing question file or upstream stage fails before the stage folder or any model exists
    stage = Stage(STAGE, args.run_dir or f"runs/{profile}", args.out, profile)
    world_dir = stage.upstream("00_setup") / "world" if params["offline"] else None
    train_file = report.rl_question_file(params["train_qa"], world_dir)
    sft_dir = stage.upstream("03_sft_unsloth") / "model"
    stage.dir.mkdir(parents=True, exist_ok=True)
    model, tokenizer = report.load_policy(sft_dir, params["device"])
    judge_fn, judge_description = project_judge(params["judge"])
    tools = make_toolbox("local", world_dir) if params["offline"] else make_toolbox("web")
    train_rows = report.qa_rows(train_file, params["train_questions"], cfg.seed)
    filter_samples = int(params.get("filter_samples") or 0)
    limits = {"max_steps": cfg.max_steps, "max_time_minutes": params["max_time_minutes"]}
    point = prepare_resume(stage.dir, report.resume_settings(cfg, sft_dir, train_rows, filter_samples),
                           root=stage.run_dir, max_steps=cfg.max_steps, limits=limits, main_process=is_main_process())
    if filter_samples:
        from transformers import set_seed

        set_seed(cfg.seed)  # the filter samples: seeded, every arm of a comparison keeps the same questions
        train_rows, counts = unsolved_questions(model, tokenizer, train_rows, tools, judge_fn, cfg,
                                                samples=filter_samples, processes=world_size())
        print(f"[rl] questions the SFT policy does not always solve: {counts}")
    turn_reward = turn_reward_with_search_cost(cfg, params["search_cost"]) if params.get("search_cost") else None
    trainer = IGPOTrainer(model, tokenizer, Dataset.from_list(train_rows), cfg,
                          grpo_args(cfg, stage.dir, device=params["device"], world_size=world_size()),
                          rollout_fn=make_agent_rollout(tools), judge=judge_fn, turn_reward=turn_reward,
                          resume_step=point.step, callbacks=[time_limit(params["max_time_minutes"])])
    with stage.timed("train"):
        train_to_end(trainer, point, stage.dir, cfg.max_steps, limits)
    losses = [r["loss"] for r in trainer.state.log_history if "loss" in r]
    rewards = [r["reward"] for r in trainer.state.log_history if "reward" in r]
    signal = [r["groups_with_signal"] for r in trainer.state.log_history if r.get("groups_with_signal") is not None]
    summary = dict(steps=int(trainer.state.global_step), loss_last=losses[-1] if losses else None,
                   final_reward=rewards[-1] if rewards else None, reward_mode=cfg.reward_mode,
                   groups_with_signal=sum(signal) / len(signal) if signal else None, sft_model=str(sft_dir),
                   questions=str(train_file), judge=judge_description, resumed_from=point.checkpoint,
                   processes=world_size(), launched_from="python -m venus_utils.rl train", config=cfg.to_dict())
    if trainer.accelerator.is_main_process:
        save_policy(trainer, tokenizer, stage.path("model"), base_model=sft_dir, profile=profile)
    trainer.accelerator.wait_for_everyone()
    if is_main_process():
        questions, settings = report.heldout_eval(stage.run_dir, sft_dir, params["heldout_qa"] or world_dir,
                                                  params["heldout_n"], cfg.seed, params["device"])
        if questions is not None:  # the same greedy held-out evaluation as notebooks 03-05
            from ..eval.judge import Judge

            with stage.timed("heldout"):
                _, _, comparison = report.score_heldout(stage.run_dir, stage.dir, sft_dir, stage.path("model"),
                                                        questions, settings, world_dir=world_dir, tools=tools,
                                                        judge=Judge.from_env(params["judge"]))
            summary.update(heldout_accuracy_sft=comparison["accuracy_before"],
                           heldout_accuracy_rl=comparison["accuracy_after"], heldout_n=comparison["n"],
                           mcnemar_p=comparison["mcnemar_p"], heldout_comparison=comparison)
        summary = stage.finish(**summary)
        print(f"[rl] {summary['steps']} steps ({cfg.reward_mode}) on {world_size()} process(es); "
              f"model: {stage.path('model')}")
    return summary


def main(argv: list[str] | None = None) -> int:
    return run_cli("rl", "IGPO RL (notebook 04) from the command line.", train, argv)


if __name__ == "__main__":
    sys.exit(main())
