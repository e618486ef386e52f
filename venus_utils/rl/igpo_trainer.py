"""IGPOTrainer: TRL's GRPOTrainer with DR-Venus's turn-level rewards and per-token advantages.

TRL provides the loop (repeat sampler over groups of ``n``, generation buffering, optimizer, checkpoints,
logging).  Two methods are replaced:

- ``_generate_and_score_completions``: roll out each question with the agent loop (exact sampled ids; with
  ``dynamic_sampling``, DAPO's refill of groups without an outcome signal: :meth:`IGPOTrainer.sample_batch`),
  compute the information gain with the same weights, the format check, the judge's verdict, call the turn /
  outcome reward functions, place the rewards on tokens, and turn them into per-token advantages of shape (B, T)
  over the *whole* batch, all processes gathered (DR-Venus's ``info_gain_advantage.py``);
- ``_compute_loss``: :func:`venus_utils.rl.loss.policy_loss` (PPO clip, k3 KL to the reference, token mean
  over the batch) on assistant tokens only.

Per-step metrics go to ``metrics.jsonl`` and per-episode records (IG by turn...) to ``episodes.jsonl`` in
the output folder.  ``IGPOConfig.reward_mode='grpo'`` trains the outcome-only baseline with the same loop: only the
reward functions change (:func:`venus_utils.rl.rewards.reward_functions`).

This module imports TRL at import time, as TRL's own ``grpo_trainer.py`` does; the parts that need no TRL live beside
it (:mod:`.scoring`: judge, information gain, format check; :mod:`.batch`: advantages over processes, group signal,
dynamic sampling; :mod:`.policy`: saving the policy; :mod:`.questions`: training rows), and ``import venus_utils.rl``
imports neither.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch
from accelerate.utils import gather_object
from transformers import TrainerCallback
from trl import GRPOConfig, GRPOTrainer
from trl.trainer.utils import pad

from ..core.checkpoints import AtomicCheckpoints
from ..core.env import available
from ..core.io import read_jsonl, write_jsonl
from ..core.perf import FlopCounter, PhaseTimer
from ..core.protocol import extract_answer
from ..judging.judge import JudgeFn
from .config import IGPOConfig
from .loss import policy_loss, token_logprobs
from .rewards import Episode, call_reward_cell, episode_rewards, reward_functions
from .rollout import VLLMServer
from .scoring import judge_episodes, score_turns
from .step_batch import DynamicBatch, TurnAdvantages, process_advantages, turn_spans

#: rollout_fn(model, tokenizer, rows, cfg, llm=None) -> one Episode per row, same order (rows repeat for the
#: group); ``llm`` is TRL's vLLM engine when ``use_vllm`` is on (weights already synced), else None
RolloutFn = Callable[..., list[Episode]]


def grpo_args(cfg: IGPOConfig, output_dir: str | Path, *, device: str = "cpu", world_size: int = 1, **overrides):
    """The TRL ``GRPOConfig`` that runs ``cfg``: one optimizer step per ``prompts_per_step x n`` trajectories."""
    per_step = cfg.trajectories_per_step
    if per_step % (cfg.micro_batch_size * world_size):
        raise ValueError(
            f"{per_step} trajectories per step do not split into micro-batches of "
            f"{cfg.micro_batch_size} on {world_size} processes"
        )
    accumulation = per_step // (cfg.micro_batch_size * world_size)
    cuda = device != "cpu" and torch.cuda.is_available()
    server = cfg.use_vllm and cfg.vllm_mode == "server"
    if server and cfg.vllm_server_sync_weights and not available("vllm"):
        raise RuntimeError(
            "vllm_mode='server' with weight sync uses TRL's vLLM client, which needs vllm installed "
            "in the training environment (`make gpu`); or set vllm_server_sync_weights=False"
        )
    # colocate needs a GPU and vllm (else transformers generation); server + sync: TRL's client pushes the weights;
    # server without sync: rollouts only call the server's OpenAI API (rollout.VLLMServer), TRL has no vLLM part
    vllm = (server and cfg.vllm_server_sync_weights) or (cfg.use_vllm and not server and cuda and available("vllm"))
    kwargs = dict(
        # the settings TRL takes as they are (IGPOConfig's "trl" metadata; gradient_checkpointing among them, always
        # passed: TRL's GRPOConfig turns it on by default), then what is derived or fixed here
        cfg.trl_values(),
        output_dir=str(output_dir),
        gradient_accumulation_steps=accumulation,
        steps_per_generation=accumulation,
        num_iterations=1,
        lr_scheduler_type="constant",
        warmup_steps=0,
        beta=0.0,  # the KL term is ours (policy_loss), not TRL's
        loss_type="dapo",
        save_strategy="steps",
        logging_steps=1,
        report_to="none",
        remove_unused_columns=False,
        use_vllm=vllm,
        use_cpu=not cuda,
        bf16=cuda and torch.cuda.is_bf16_supported() and cfg.uses_bf16("cuda"),
        disable_dropout=True,
        log_completions=False,
        shuffle_dataset=True,
    )
    if vllm and not server:  # TRL's colocated engine; the agent loop generates with it (rollout.make_agent_rollout)
        kwargs.update(cfg.trl_values("trl_colocate"), vllm_mode="colocate", vllm_importance_sampling_correction=False)
    elif vllm:  # `trl vllm-serve`: TRL pushes the weights, the agent loop calls its OpenAI API
        kwargs.update(cfg.trl_values("trl_server"), vllm_mode="server", vllm_importance_sampling_correction=False)
    kwargs.update(overrides)
    return GRPOConfig(**kwargs)


class MetricsFile(TrainerCallback):
    """Keeps every log line of the run in ``metrics.jsonl`` (rewritten atomically each step)."""

    def __init__(self, path: Path, rows: list[dict]):
        self.path, self.rows = path, rows

    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_world_process_zero and logs:
            self.rows.append({"step": state.global_step, **logs})
            write_jsonl(self.path, self.rows)


class IGPOTrainer(AtomicCheckpoints, GRPOTrainer):
    """TRL's ``GRPOTrainer`` with the agent-loop rollout, IGPO's rewards and advantages and
    :func:`~.loss.policy_loss` (see the module docstring); a ``checkpoint-N`` folder appears only when complete
    (:class:`~venus_utils.core.checkpoints.AtomicCheckpoints`).

    ``judge`` scores the final answers (:func:`venus_utils.judging.judge.judge_function`); ``turn_reward`` /
    ``outcome_reward`` replace DR-Venus's rewards and ``turn_advantages`` (a rule over the step's whole batch,
    :data:`~.batch.TurnAdvantages`) its advantages (``reward_mode='igpo'`` only: notebook 04's cells);
    ``resume_step``: the checkpoint step a rerun resumes from.
    """

    def __init__(
        self,
        model,
        tokenizer,
        train_dataset,
        cfg: IGPOConfig,
        args,
        *,
        rollout_fn: RolloutFn,
        judge: JudgeFn,
        turn_reward: Callable[[Episode], list] | None = None,
        outcome_reward: Callable[[Episode], float] | None = None,
        turn_advantages: TurnAdvantages | None = None,
        ref_model=None,
        peft_config=None,
        callbacks=None,
        resume_step: int | None = None,
    ):
        self.igpo = cfg
        self.rollout_fn, self.judge = rollout_fn, judge
        if peft_config is None and cfg.lora_r:
            peft_config = lora_config(cfg)
        if cfg.reward_mode == "grpo" and any(f is not None for f in (turn_reward, outcome_reward, turn_advantages)):
            raise ValueError(
                "reward_mode='grpo' trains on the judged outcome alone: pass turn_reward / "
                "outcome_reward / turn_advantages only with reward_mode='igpo'"
            )
        self.turn_advantages = turn_advantages
        default_turn, default_outcome = reward_functions(cfg)
        self.turn_reward, self.outcome_reward = turn_reward or default_turn, outcome_reward or default_outcome
        if not args.gradient_checkpointing and getattr(model, "is_gradient_checkpointing", False):
            model.gradient_checkpointing_disable()  # off means off, also for a model an earlier trainer turned it on
        if peft_config is None and cfg.kl_coef and ref_model is None:
            ref_model = copy.deepcopy(model)  # the frozen starting policy (DR-Venus: the SFT checkpoint)
        self._ref = ref_model.eval().requires_grad_(False) if ref_model is not None else None
        out = Path(args.output_dir)
        self.metrics_path, self.episodes_path = out / "metrics.jsonl", out / "episodes.jsonl"
        self.metric_rows = _history(self.metrics_path, resume_step, inclusive=True)  # logged after step N
        self.episode_rows = _history(self.episodes_path, resume_step, inclusive=False)  # rolled out before it
        callbacks = [*(callbacks or []), MetricsFile(self.metrics_path, self.metric_rows)]
        super().__init__(
            model=model,
            reward_funcs=[_trl_outcome(judge)],
            args=args,
            train_dataset=train_dataset,
            processing_class=tokenizer,
            callbacks=callbacks,
            peft_config=peft_config,
        )
        if self._ref is not None:
            self._ref.to(self.accelerator.device)
        if cfg.dynamic_sampling and self.accelerator.num_processes > 1:
            raise ValueError(
                "dynamic_sampling decides per step which questions to roll out next, in one process: run without "
                "accelerate launch, or set dynamic_sampling to false for this "
                f"{self.accelerator.num_processes}-process run"
            )
        self.im_end_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
        self.phases = PhaseTimer()  # this step's seconds per phase, logged as time_<phase>_s
        # the model FLOPs of training (rollouts, information gain, reference and update), logged per step as
        # ``flops`` (all processes): what the control arm of ``rl arms`` is matched to (rollouts generated by vLLM
        # run outside this model and are not counted)
        self.flop_counter, self._flops_logged, self._step_flops = FlopCounter(self.model, self._ref), 0.0, 0.0

    def create_model_card(self, *args, **kwargs):
        """No TRL model card ("a fine-tuned version of [None]") in the stage folder or a checkpoint: the RL
        model's card is the one :func:`~.policy.save_policy` writes into ``model/``."""
        return None

    # --- rollout and rewards -------------------------------------------------------------------------
    def policy(self):
        return self.accelerator.unwrap_model(self.model)

    def _synced_llm(self):
        """TRL's colocated vLLM engine with this step's weights, a :class:`~.rollout.VLLMServer` (server mode;
        synced first when TRL holds the client), or None (transformers generation)."""
        cfg = self.igpo
        if self.use_vllm and self.state.global_step != self._last_loaded_step:
            self.vllm_generation.sync_weights()
            self._last_loaded_step = self.state.global_step
            if cfg.vllm_mode == "server":
                self.accelerator.wait_for_everyone()  # the main process pushed the weights; all may generate
        if cfg.use_vllm and cfg.vllm_mode == "server":
            if getattr(self, "_vllm_server", None) is None:
                self._vllm_server = VLLMServer.connect(cfg.vllm_server_base_url)
            return self._vllm_server
        return self.vllm_generation.llm if self.use_vllm else None

    def judge_episodes(self, episodes: Sequence[Episode]) -> None:
        """The judge's verdict on each episode's final answer (:func:`~.scoring.judge_episodes`)."""
        judge_episodes(self.judge, episodes, where=f" of step {self.state.global_step}")

    def score_episodes(self, episodes: Sequence[Episode]) -> list[dict[int, float]]:
        """Fill IG and format errors on each judged episode (:func:`~.scoring.score_turns`), call the reward functions
        and return each episode's token-level rewards."""
        decoder = getattr(self.rollout_fn, "decoder", None)  # the rollouts' kept caches: IG reads them
        score_turns(self.policy(), self.processing_class, episodes, self.igpo, decoder=decoder)
        if decoder is not None:
            decoder.clear()  # the update changes the weights: the caches are stale, and their memory is the update's
        rewards = []
        for ep in episodes:
            if ep.num_turns == 0 or not ep.completion_ids:  # a failed rollout: no tokens, no statistics
                ep.extra.update(turn_rewards=[], outcome=0.0)
                rewards.append({})
                continue
            step = self.state.global_step
            turn = call_reward_cell(self.turn_reward, ep, "turn", step)
            outcome = call_reward_cell(self.outcome_reward, ep, "outcome", step)
            ep.extra.update(turn_rewards=list(turn), outcome=outcome)
            rewards.append(episode_rewards(ep, turn, outcome, self.im_end_id))
        return rewards

    def _roll_out(self, policy, rows) -> list[Episode]:
        """One rollout per row (rows repeat for the group), judged; ``ep.group`` is the row's id."""
        with self.phases("rollout"):
            episodes = self.rollout_fn(policy, self.processing_class, rows, self.igpo, llm=self._synced_llm())
        timing = getattr(self.rollout_fn, "timing", None) or {}
        if "generate_s" in timing:  # of the rollout time, what the model's generation took (the rest: tools, loop)
            self.phases.add("generation", timing["generate_s"])
            self.phases.add("rollout", -timing["generate_s"])
        if len(episodes) != len(rows):
            raise RuntimeError(f"rollout_fn returned {len(episodes)} episodes for {len(rows)} rows")
        for ep, row in zip(episodes, rows):
            ep.group = row.get("id", row["question"])
        with self.phases("judge"):
            self.judge_episodes(episodes)
        return episodes

    def refill_rows(self, seen: set, sampling_round: int) -> list[dict]:
        """Dynamic sampling's next round: ``prompts_per_step`` questions of the training set not yet rolled out in
        this step, drawn with a generator seeded by (seed, step, round), so a resumed run draws the same ones; each
        row repeated ``num_generations`` times."""
        cfg, data = self.igpo, self.train_dataset
        ids = data["id"] if "id" in data.column_names else data["question"]
        fresh = [k for k, gid in enumerate(ids) if gid not in seen]
        rng = np.random.default_rng([cfg.seed, self.state.global_step, sampling_round])
        picked = rng.choice(fresh, size=min(cfg.prompts_per_step, len(fresh)), replace=False) if fresh else []
        return [data[int(k)] for k in picked for _ in range(cfg.num_generations)]

    def sample_batch(self, policy, inputs) -> tuple[list[Episode], dict]:
        """This step's judged episodes (``len(inputs)`` of them) and the sampling counts: the rollouts of ``inputs``,
        or with ``dynamic_sampling`` groups with an outcome signal from up to ``max_sampling_rounds`` rounds
        (:class:`~.batch.DynamicBatch`)."""
        cfg = self.igpo
        batch = DynamicBatch(len(inputs), cfg.num_generations, cfg.dynamic_sampling)
        batch.add(self._roll_out(policy, inputs))
        while not batch.full and batch.rounds < cfg.max_sampling_rounds:
            rows = self.refill_rows(batch.seen, batch.rounds)
            if not rows:  # every question of the training set is already in this step
                break
            batch.add(self._roll_out(policy, rows))
        return batch.episodes(), batch.stats()

    def _generate_and_score_completions(self, inputs):
        device, mode = self.accelerator.device, "train" if self.model.training else "eval"
        policy = self.policy()
        was_training = policy.training
        policy.eval()
        try:
            with torch.no_grad():
                episodes, sampling = self.sample_batch(policy, inputs)
                with self.phases("info_gain"):
                    rewards = self.score_episodes(episodes)
        finally:
            policy.train(was_training)
        t_prepare = time.perf_counter()

        # advantages over the whole batch (all processes), then this process's slice
        lengths = [len(ep.completion_ids) if r else 0 for ep, r in zip(episodes, rewards)]
        everything = gather_object(
            [
                (r, n, ep.group, float(ep.judge_score), hash(tuple(ep.completion_ids)), ig_kinds(ep))
                for r, n, ep in zip(rewards, lengths, episodes)
            ]
        )
        turns = None
        if self.turn_advantages is not None:  # notebook 04's advantage cell: it needs the rewards per turn
            turns = gather_object(
                [
                    (
                        ep.extra.get("turn_rewards", []),
                        ep.extra.get("outcome", 0.0),
                        turn_spans(len(ep.prompt_ids), ep.boundaries, n) if n else [],
                    )
                    for ep, n in zip(episodes, lengths)
                ]
            )
        stats: dict = dict(sampling)
        local_adv = process_advantages(
            everything,
            self.accelerator.process_index,
            len(episodes),
            self.igpo,
            stats,
            turn_advantages=self.turn_advantages,
            turns=turns,
            step=self.state.global_step,
        )

        for ep, adv, n in zip(episodes, local_adv, lengths):  # what each turn was pushed by (episodes.jsonl)
            ep.extra["turn_advantages"] = turn_mean_advantages(ep, adv, n)
        prompt_ids = pad(
            [torch.tensor(ep.prompt_ids) for ep in episodes],
            padding_value=self._tokenizer.pad_token_id,
            padding_side="left",
        ).to(device)
        prompt_mask = pad(
            [torch.ones(len(ep.prompt_ids), dtype=torch.long) for ep in episodes], padding_value=0, padding_side="left"
        ).to(device)
        pad_id = self._tokenizer.pad_token_id
        completion_ids = pad(
            [torch.tensor(ep.completion_ids if n else [pad_id]) for ep, n in zip(episodes, lengths)],
            padding_value=pad_id,
            padding_side="right",
        ).to(device)
        completion_mask = pad(
            [torch.ones(n, dtype=torch.long) if n else torch.zeros(1, dtype=torch.long) for n in lengths],
            padding_value=0,
            padding_side="right",
        ).to(device)
        tool_mask = pad(
            [torch.tensor(ep.assistant_mask if n else [0], dtype=torch.long) for ep, n in zip(episodes, lengths)],
            padding_value=0,
            padding_side="right",
        ).to(device)
        advantages = pad(
            [torch.tensor(a or [0.0], dtype=torch.float32) for a in local_adv], padding_value=0.0, padding_side="right"
        ).to(device)
        loss_mask = completion_mask * tool_mask
        num_items = self.accelerator.gather(loss_mask.sum()).sum()

        ids = torch.cat([prompt_ids, completion_ids], 1)
        attn = torch.cat([prompt_mask, completion_mask], 1)
        out = {
            "prompt_ids": prompt_ids,
            "prompt_mask": prompt_mask,
            "completion_ids": completion_ids,
            "completion_mask": completion_mask,
            "tool_mask": tool_mask,
            "advantages": advantages,
            "num_items_in_batch": num_items,
        }
        with torch.no_grad():
            if self.igpo.kl_coef:
                out["ref_per_token_logps"] = self._logps(self._ref, ids, attn, completion_ids.size(1), ref=True)
            if self.args.gradient_accumulation_steps % self.args.steps_per_generation or self.num_iterations > 1:
                out["old_per_token_logps"] = self._logps(policy, ids, attn, completion_ids.size(1))
        self.phases.add("advantages", time.perf_counter() - t_prepare)
        self._record(episodes, advantages, loss_mask, stats, mode)
        return out

    def training_step(self, *args, **kwargs):
        """TRL's step; its time outside the rollout phases is the policy update (forward, backward)."""
        before = sum(self.phases.seconds.values())
        t0 = time.perf_counter()
        loss = super().training_step(*args, **kwargs)
        self.flop_counter.settle()  # the backward pass is done: no recomputation is owed
        inside = sum(self.phases.seconds.values()) - before
        self.phases.add("update", time.perf_counter() - t0 - inside)
        mine = torch.tensor(self.flop_counter.flops - self._flops_logged, dtype=torch.float64, device=loss.device)
        self._flops_logged = self.flop_counter.flops
        self._step_flops += float(self.accelerator.reduce(mine, reduction="sum"))
        return loss

    def log(self, logs: dict, *args, **kwargs):
        """Each logged step also records its seconds per phase (``time_generation_s``, ``time_rollout_s`` (tools and
        the agent loop), ``time_judge_s``, ``time_info_gain_s``, ``time_advantages_s``, ``time_update_s``) and the
        model FLOPs it spent (``flops``: :class:`venus_utils.core.perf.FlopCounter`, every process)."""
        if "loss" in logs and self.phases.seconds:
            logs = {**logs, **{f"time_{k}_s": round(v, 3) for k, v in self.phases.seconds.items()}}
            self.phases = PhaseTimer()
        if "loss" in logs and self._step_flops:
            logs = {**logs, "flops": self._step_flops}  # model FLOPs since the last logged step, all processes
            self._step_flops = 0.0
        return super().log(logs, *args, **kwargs)

    def _cpu_autocast(self):
        """bf16 autocast for the update and the reference log-probs on a CPU (``IGPOConfig.precision``; on CUDA the
        training arguments' ``bf16`` does it)."""
        on = self.accelerator.device.type == "cpu" and self.igpo.uses_bf16("cpu")
        return torch.autocast("cpu", dtype=torch.bfloat16, enabled=on)

    def _logps(self, model, ids, attn, k, ref=False):
        rows = []
        for s in range(0, ids.size(0), self.args.per_device_train_batch_size):
            sl = slice(s, s + self.args.per_device_train_batch_size)
            if model is None:  # PEFT: the reference is the base with the adapter disabled
                with self.policy().disable_adapter(), self._cpu_autocast():
                    rows.append(
                        token_logprobs(self.policy(), ids[sl], attn[sl], k, temperature=self.igpo.temperature)[0]
                    )
            else:
                with self._cpu_autocast():
                    rows.append(token_logprobs(model, ids[sl], attn[sl], k, temperature=self.igpo.temperature)[0])
        return torch.cat(rows)

    # --- loss --------------------------------------------------------------------------------------------
    def _compute_loss(self, model, inputs):
        ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], 1)
        attn = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], 1)
        k = inputs["completion_ids"].size(1)
        with self._cpu_autocast():
            logps, entropy = token_logprobs(model, ids, attn, k, temperature=self.igpo.temperature, entropy=True)
        mask = inputs["completion_mask"] * inputs["tool_mask"]
        mode = "train" if self.model.training else "eval"
        normalizer = inputs["num_items_in_batch"].clamp(min=1.0) / self.accelerator.num_processes
        if mode == "train":
            normalizer = normalizer * self.current_gradient_accumulation_steps / self.args.steps_per_generation
        else:
            normalizer = mask.sum().clamp(min=1.0)
        cfg = self.igpo
        loss, st = policy_loss(
            logps,
            inputs["advantages"],
            mask,
            old_logps=inputs.get("old_per_token_logps"),
            ref_logps=inputs.get("ref_per_token_logps"),
            clip_low=cfg.clip_ratio_low,
            clip_high=cfg.clip_ratio_high,
            dual_clip=cfg.dual_clip,
            kl_coef=cfg.kl_coef,
            normalizer=normalizer,
        )
        sums = self.accelerator.reduce(
            torch.stack([st["kl"], st["clipped"], (entropy * mask).sum(), st["pg"], st["tokens"]]).float(),
            reduction="sum",
        )
        n = sums[4].clamp(min=1.0)
        for name, value in zip(("kl", "clip_ratio", "entropy", "policy_loss"), sums[:4] / n):
            self._metrics[mode][name].append(value.item())
        return loss

    # --- metrics -----------------------------------------------------------------------------------------
    def _record(self, episodes, advantages, loss_mask, stats, mode):
        m = self._metrics[mode]
        rows = gather_object([_episode_row(ep, self.state.global_step) for ep in episodes])
        ig = [g for r in rows for g in r["info_gain"] if g is not None]
        turns = sum(r["num_turns"] for r in rows)
        m["reward"].append(sum(r["outcome"] for r in rows) / len(rows))
        m["accuracy"].append(sum(r["judge_score"] >= 1.0 for r in rows) / len(rows))
        m["turns"].append(turns / len(rows))
        m["penalty_rate"].append(sum(r["malformed_turns"] for r in rows) / max(turns, 1))
        m["ig_mean"].append(sum(ig) / len(ig) if ig else float("nan"))
        m["ig_positions"].append(stats.get("num_ig_positions", 0) / len(rows))
        if "ig_scale" in stats and stats.get("num_ig_positions"):  # without IG positions the scale means nothing
            m["ig_scale"].append(stats["ig_scale"])
        # shares of groups that can move the policy, and of groups whose rollouts are all one trajectory
        for key in ("groups_with_signal", "groups_with_any_signal", "groups_identical"):
            m[key].append(stats.get(key, 0.0))
        # what was rolled out for the step (dynamic sampling rolls out more than it trains on)
        for key in ("sampled_groups_with_signal", "sampling_rounds"):
            m[key].append(float(stats[key]))
        counts = torch.tensor([stats["groups_sampled"], stats["groups_dropped"]], dtype=torch.float64)
        counts = self.accelerator.reduce(counts.to(advantages.device), reduction="sum")  # all processes' groups
        m["groups_sampled"].append(float(counts[0]))
        m["groups_dropped"].append(float(counts[1]))
        adv = advantages[loss_mask.bool()]
        local = [adv.abs().sum(), (adv != 0).sum(), torch.tensor(adv.numel(), device=adv.device)]
        sums = self.accelerator.reduce(torch.stack([x.float() for x in local]), reduction="sum")  # all processes
        m["adv_abs_mean"].append((sums[0] / sums[2]).item() if sums[2] else 0.0)
        m["adv_nonzero_frac"].append((sums[1] / sums[2]).item() if sums[2] else 0.0)
        if not torch.isfinite(advantages).all():
            raise FloatingPointError("non-finite advantages: check the rewards of this batch")
        if self.accelerator.is_main_process and mode == "train":
            self.episode_rows.extend(rows)
            write_jsonl(self.episodes_path, self.episode_rows)


def turn_mean_advantages(ep: Episode, advantages: Sequence[float], n: int) -> list[float | None]:
    """The mean advantage over each turn's sampled tokens (None for a turn without any), from an episode's per-token
    advantages over its ``n`` completion tokens: what the update pushed each turn by."""
    if not n or not advantages:
        return [None] * ep.num_turns
    out = []
    for start, end in turn_spans(len(ep.prompt_ids), ep.boundaries, n):
        values = [a for a, m in zip(advantages[start:end], ep.assistant_mask[start:end]) if m]
        out.append(round(sum(values) / len(values), 4) if values else None)
    return out


def ig_kinds(ep: Episode) -> list[str]:
    """The tool of each turn that carries a turn reward, in turn order (the key ``IGPOConfig.ig_norm = "tool"``
    normalises information gain by; "none" for a turn that called no tool)."""
    rewards = ep.extra.get("turn_rewards") or []
    return [ep.tool_names[j] or "none" for j, r in enumerate(rewards) if r is not None]


def lora_config(cfg: IGPOConfig):
    """LoRA on every linear layer (``cfg.lora_r > 0``); the KL reference is then the adapter-disabled base."""
    from peft import LoraConfig

    return LoraConfig(
        r=cfg.lora_r, lora_alpha=2 * cfg.lora_r, lora_dropout=0.0, target_modules="all-linear", task_type="CAUSAL_LM"
    )


def _trl_outcome(judge: JudgeFn):
    """The judge as a TRL reward function (TRL requires one; IGPO itself scores episodes in ``score_episodes``)."""

    def judged_outcome(prompts, completions, question, ground_truth, **kwargs):
        texts = [c if isinstance(c, str) else c[-1]["content"] for c in completions]
        return judge(list(question), [extract_answer(t) or "" for t in texts], list(ground_truth))

    return judged_outcome


def _episode_row(ep: Episode, step: int) -> dict:
    return {
        "step": step,
        "group": str(ep.group),
        "question": ep.question,
        "ground_truth": ep.ground_truth,
        "prediction": ep.prediction,
        "termination": ep.termination,
        "num_turns": ep.num_turns,
        "tool_names": ep.tool_names,
        "info_gain": ep.info_gain,
        "format_errors": ep.format_errors,
        "malformed_turns": sum(1 for e in ep.format_errors if e),
        "turn_rewards": ep.extra.get("turn_rewards"),
        "turn_advantages": ep.extra.get("turn_advantages"),
        "outcome": ep.extra.get("outcome"),
        "judge_score": ep.judge_score,
        "completion_tokens": len(ep.completion_ids),
        "assistant_tokens": int(sum(ep.assistant_mask)),
    }


def _history(path: Path, resume_step: int | None, inclusive: bool) -> list[dict]:
    """Rows of an earlier run when resuming from the checkpoint of step ``resume_step``, else none."""
    if resume_step is None or not path.exists():
        return []
    keep = (lambda s: s <= resume_step) if inclusive else (lambda s: s < resume_step)
    return [r for r in read_jsonl(path) if keep(r.get("step", 0))]
