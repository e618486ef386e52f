"""IGPO on the micro model with deterministic scripted rollouts, for comparing 1 and 2 processes.

    python tests/scale/rl_ddp_script.py MODEL_DIR OUT_DIR [CHECKPOINT]   # CHECKPOINT: resume from it
    accelerate launch --config_file params/accelerate/ddp_cpu_2proc.yaml tests/scale/rl_ddp_script.py MODEL_DIR OUT_DIR

Sampling makes two real runs differ, so each rollout here is scripted from its question and its copy number in
the group (copy 0 answers right, copy 1 wrong, so outcomes and advantages differ); everything after the rollout
(IG with the policy, judge, gathered advantages, PPO/KL loss, gradient sync) is the real trainer.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter
from pathlib import Path


class EchoTools:
    async def run(self, call):
        return f"The page says the answer is 1987. ({call.name})"


def exact_judge(questions, predictions, answers):
    return [float(p.strip() == a.strip()) for p, a in zip(predictions, answers)]


def scripted_rollout(model, tokenizer, rows, cfg, llm=None):
    from venus_utils.agent import ScriptedBackend, run_agent
    from venus_utils.core.protocol import answer_turn, tool_turn
    from venus_utils.rl.rollout import episode_from_rollout, rl_agent_config

    copies, episodes = Counter(), []
    for row in rows:  # a group's copies arrive together on one process (micro-batch = group size)
        k = copies[row["id"]]
        copies[row["id"]] += 1
        turns = [
            tool_turn(f"look up {row['id']} copy {k}", "visit", {"url": [f"https://w/{k}"], "goal": "year"}),
            answer_turn("found it", row["ground_truth"] if k == 0 else "no idea"),
        ]
        backend = ScriptedBackend(turns, tokenizer)
        r = asyncio.run(run_agent(row["question"], backend, EchoTools(), rl_agent_config(cfg)))
        episodes.append(episode_from_rollout(r, row["ground_truth"], row["id"]))
    return episodes


def main(model_dir: str, out_dir: str, checkpoint: str | None = None) -> None:
    import torch
    from datasets import Dataset

    from venus_utils.core.distributed import leave, world_size
    from venus_utils.rl import IGPOConfig
    from venus_utils.rl.igpo_trainer import IGPOTrainer, grpo_args
    from venus_utils.rl.policy import load_policy
    from venus_utils.rl.training_rows import rl_rows

    torch.manual_seed(0)
    model, tok = load_policy(model_dir, "cpu")
    start = {k: v.detach().clone() for k, v in model.state_dict().items()}
    rows = rl_rows(
        [
            {"id": f"q{i}", "question": f"Which year was company {i} founded?", "answer": str(1980 + i)}
            for i in range(8)
        ]
    )
    cfg = IGPOConfig(
        prompts_per_step=2,
        num_generations=2,
        micro_batch_size=2,
        max_steps=3,
        save_steps=2,
        max_turns=3,
        max_tokens_per_turn=16,
        max_context_tokens=4096,
        ig_tool_filter="all",
        learning_rate=2e-3,
        kl_coef=0.01,
        precision="fp32",  # the test compares processes, not precisions: bf16 rounds their ~1e-7 differences up
    )
    trainer = IGPOTrainer(
        model,
        tok,
        Dataset.from_list(rows),
        cfg,
        grpo_args(cfg, out_dir, world_size=world_size()),
        rollout_fn=scripted_rollout,
        judge=exact_judge,
        resume_step=int(checkpoint.rsplit("-", 1)[1]) if checkpoint else None,
    )
    trainer.train(resume_from_checkpoint=checkpoint)
    if trainer.accelerator.is_main_process:
        steps = [r for r in trainer.state.log_history if "loss" in r and "reward" in r]
        weights = trainer.accelerator.unwrap_model(trainer.model).state_dict()
        result = {
            "processes": world_size(),
            "loss": [r["loss"] for r in steps],
            "adv_abs_mean": [r["adv_abs_mean"] for r in steps],
            "ig_mean": [r["ig_mean"] for r in steps],
            "moved": max((weights[k] - start[k]).abs().max().item() for k in start),
        }
        Path(out_dir, "result.json").write_text(json.dumps(result))
        torch.save({k: v.detach().clone() for k, v in weights.items()}, Path(out_dir, "weights.pt"))
    leave(0)  # every process, past a barrier; gloo's teardown at exit can deadlock (distributed.leave)


if __name__ == "__main__":
    main(*sys.argv[1:4])
