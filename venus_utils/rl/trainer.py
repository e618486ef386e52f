"""The IGPO trainer's parts that need no TRL: training rows, advantages over processes, group signal, saving.

:class:`~venus_utils.rl.igpo_trainer.IGPOTrainer` (which imports TRL) uses them, and so do the stage's question
loading and model saving (:mod:`venus_utils.rl.questions`, :mod:`venus_utils.rl.stage`), without importing TRL:

- :func:`rl_rows`: training rows from a QA table;
- :func:`process_advantages`: one process's advantages, computed over the batch gathered from all processes;
- :func:`group_signal`: which groups of a batch can move the policy at all;
- :class:`DynamicBatch`: DAPO's dynamic sampling, the step's batch made of groups with an outcome signal;
- :func:`save_policy` / :func:`model_card`: the trained policy as a plain transformers folder, with its card.
"""

from __future__ import annotations

import copy
from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..agent.settings import write_model_agent_settings
from ..io import atomic_dir
from .advantages import compute_turn_advantages
from .config import IGPOConfig


def rl_rows(qa) -> list[dict]:
    """Training rows from a QA table with ``question`` and ``answer`` (e.g. ``eval.loaders.load_verl_qa``)."""
    rows = []
    for k, r in enumerate(qa.to_dict("records") if hasattr(qa, "to_dict") else qa):
        if not str(r.get("question", "")).strip():
            raise ValueError(f"QA row {k}: empty question")
        rows.append(
            {
                "prompt": [{"role": "user", "content": str(r["question"])}],
                "question": str(r["question"]),
                "ground_truth": str(r["answer"]),
                "id": str(r.get("id", k)),
            }
        )
    return rows


def process_advantages(
    gathered: Sequence[tuple], process_index: int, local_size: int, cfg: IGPOConfig, stats: dict | None = None
) -> list[list[float]]:
    """Advantages of one process's samples: computed on the gathered batch (every process's
    ``(rewards, length, group, judge score, completion digest)`` in process order), then sliced, so sharding changes
    nothing.  ``stats`` (if given) also gets the batch's :func:`group_signal`."""
    rewards, lengths, groups, scores, digests = zip(*gathered) if gathered else ((), (), (), (), ())
    adv = compute_turn_advantages(
        list(rewards), list(lengths), list(groups), gamma=cfg.gamma, mode=cfg.norm_mode, eps=cfg.adv_eps, stats=stats
    )
    if stats is not None:
        stats.update(group_signal(lengths, groups, scores, adv, digests))
    return adv[process_index * local_size : (process_index + 1) * local_size]


#: an advantage below this (in absolute value) is rounding noise of an all-equal group, not a signal
SIGNAL_TOLERANCE = 1e-6


def group_signal(
    lengths: Sequence[int],
    groups: Sequence[Hashable],
    judge_scores: Sequence[float],
    advantages: Sequence[Sequence[float]],
    digests: Sequence[Hashable] | None = None,
) -> dict[str, float]:
    """Which groups of a batch can move the policy at all (failed, zero-length rollouts take no part):

    - ``groups_with_signal``: the share of groups whose rollouts did not all get the same *judge score* (a group
      judged all right or all wrong gives plain GRPO nothing to learn).  It counts the judge's verdicts, not the
      outcome reward, so it means the same for every arm (IGPO's -1 format penalty on a malformed answer is not a
      judged difference);
    - ``groups_with_any_signal``: the share of groups with some non-zero advantage, from the outcome or from turn
      rewards (IGPO's information gain and format penalties);
    - ``groups_identical`` (with ``digests``, one per rollout of its completion tokens): the share of groups of two
      or more rollouts that are all the same trajectory: a policy that no longer explores.
    """
    outcomes: dict[Hashable, list[float]] = defaultdict(list)
    moved: dict[Hashable, bool] = defaultdict(bool)
    seen: dict[Hashable, list[Hashable]] = defaultdict(list)
    for k, (n, g, score, adv) in enumerate(zip(lengths, groups, judge_scores, advantages)):
        if n <= 0:
            continue
        if digests is not None:
            seen[g].append(digests[k])
        outcomes[g].append(float(score))
        moved[g] = moved[g] or any(abs(a) > SIGNAL_TOLERANCE for a in adv)
    k = len(outcomes)
    out = {
        "groups": k,
        "groups_with_signal": sum(len(set(v)) > 1 for v in outcomes.values()) / k if k else 0.0,
        "groups_with_any_signal": sum(moved.values()) / k if k else 0.0,
    }
    if digests is not None:
        several = [v for v in seen.values() if len(v) > 1]
        out["groups_identical"] = sum(len(set(v)) == 1 for v in several) / len(several) if several else 0.0
    return out


class DynamicBatch:
    """One step's batch of ``size`` episodes in groups of ``n``, made from one or more rollout rounds.

    Without ``dynamic_sampling`` the first round is the batch, as it came.  With it (DAPO), a group whose rollouts
    all got the same judge score (all right or all wrong: its outcome advantages are all zero) is set aside; the
    trainer rolls out further rounds of new questions (:meth:`add`) while the batch is not :attr:`full`, and
    :meth:`episodes` returns the groups with a signal first, topped up with the set-aside groups when the rounds ran
    out.  :meth:`stats` counts what was sampled, so the advantage-collapse measure stays comparable with a run
    without dynamic sampling (``sampled_groups_with_signal``).  Episodes need ``group`` and ``judge_score``.
    """

    def __init__(self, size: int, n: int, dynamic_sampling: bool):
        if dynamic_sampling and (n < 1 or size % n):
            raise ValueError(f"a batch of {size} episodes does not split into groups of {n}")
        self.size, self.n, self.dynamic = size, n, dynamic_sampling
        self.signal: list[list] = []
        self.flat: list[list] = []
        self.first: list = []
        self.rounds = 0
        self.seen: set[Hashable] = set()

    def add(self, episodes: Sequence) -> None:
        """One round's episodes, grouped by ``ep.group`` (the rollouts of one question)."""
        self.rounds += 1
        if self.rounds == 1:
            self.first = list(episodes)
        groups: dict[Hashable, list] = {}
        for ep in episodes:
            groups.setdefault(ep.group, []).append(ep)
        for gid, group in groups.items():
            if self.dynamic and len(group) != self.n:
                raise ValueError(f"group {gid!r} has {len(group)} rollouts; dynamic sampling needs {self.n} each")
            self.seen.add(gid)
            scores = {float(ep.judge_score) for ep in group}
            (self.signal if len(scores) > 1 else self.flat).append(group)

    @property
    def full(self) -> bool:
        """Enough groups with a signal (always, without dynamic sampling: one round is the batch)."""
        return not self.dynamic or len(self.signal) * self.n >= self.size

    def episodes(self) -> list:
        if not self.dynamic:
            return list(self.first)
        groups = (self.signal + self.flat)[: self.size // self.n]
        return [ep for g in groups for ep in g]

    def stats(self) -> dict[str, float]:
        sampled = len(self.signal) + len(self.flat)
        trained = min(sampled, self.size // self.n) if self.dynamic else sampled
        return {
            "groups_sampled": sampled,
            "sampled_groups_with_signal": len(self.signal) / sampled if sampled else 0.0,
            "groups_dropped": sampled - trained,
            "sampling_rounds": self.rounds,
        }


def save_policy(
    trainer,
    tokenizer,
    out_dir: str | Path,
    *,
    base_model: str | Path | None = None,
    profile: str | None = None,
    stage: str = "04_igpo_rl",
    heldout: Mapping[str, Any] | None = None,
) -> Path:
    """Save the trained policy as a plain transformers folder (a LoRA adapter is merged into the base), with a
    ``venus_agent.json`` saying how its rollouts ran (``trainer.igpo``'s system prompt style, max turns and tokens per
    turn), which the agent CLI, the demo and notebooks 05/06 use by default (:mod:`venus_utils.agent.settings`), and a
    ``README.md`` model card (:func:`model_card`: the SFT model ``base_model``, ``stage``, ``profile``, reward mode,
    steps, and the ``heldout`` results when given)."""
    model = trainer.accelerator.unwrap_model(trainer.model)
    if hasattr(model, "merge_and_unload"):
        model = copy.deepcopy(model).merge_and_unload()
    cfg: IGPOConfig = trainer.igpo
    card = model_card(
        cfg, int(trainer.state.global_step), base_model=base_model, profile=profile, stage=stage, heldout=heldout
    )
    with atomic_dir(out_dir) as tmp:  # write aside, then swap in
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / "README.md").write_text(card, encoding="utf-8")
        write_model_agent_settings(
            tmp,
            {
                "system_prompt_style": cfg.system_prompt_style,
                "max_turns": cfg.max_turns,
                "max_new_tokens": cfg.max_tokens_per_turn,
            },
            "rl",
        )
    return Path(out_dir)


def model_card(
    cfg: IGPOConfig,
    steps: int,
    *,
    base_model: str | Path | None = None,
    profile: str | None = None,
    stage: str = "04_igpo_rl",
    heldout: Mapping[str, Any] | None = None,
) -> str:
    """The RL model's ``README.md`` (:func:`save_policy`): the SFT model it started from, the stage and profile, the
    reward mode, the steps and sizes, and held-out results when given (``{"accuracy (SFT)": 0.41, ...}``)."""
    how = {
        "igpo": "IGPO (DR-Venus: information-gain turn rewards, format penalties and the judged outcome)",
        "grpo": "outcome-only GRPO (the judged answer alone, no turn rewards or format penalties: the baseline "
        "arm of the IGPO comparison)",
    }[cfg.reward_mode]
    rows = {
        "base (SFT) model": base_model if base_model is not None else "not recorded",
        "stage": stage,
        "profile": profile or "not recorded",
        "reward mode": cfg.reward_mode,
        "RL steps": steps,
        "questions per step x rollouts": f"{cfg.prompts_per_step} x {cfg.num_generations}",
        "learning rate": cfg.learning_rate,
        "KL coefficient": cfg.kl_coef,
        "weights": f"LoRA rank {cfg.lora_r}, merged" if cfg.lora_r else "full fine-tuning",
        "seed": cfg.seed,
    }
    rows.update({f"held-out {k}": v for k, v in (heldout or {}).items()})
    table = "\n".join(f"| {k} | {v} |" for k, v in rows.items())
    return (
        f"---\nlibrary_name: transformers\ntags:\n- venus-recipe\n- {cfg.reward_mode}\n---\n\n"
        f"# venus-recipe RL policy ({cfg.reward_mode})\n\n"
        f"A deep-research agent: the SFT model below after {steps} RL step{'' if steps == 1 else 's'} of {how}, "
        f"trained by the {stage} stage of venus-recipe (a reproduction of DR-Venus).\n\n| | |\n|---|---|\n"
        f"{table}\n\n"
        "Load it with `transformers.AutoModelForCausalLM.from_pretrained` on this folder, or run it as an agent "
        "with `python -m venus_utils.agent`; the stage folder's `summary.json` holds the whole configuration.\n"
    )
