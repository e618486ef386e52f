"""One RL step's batch: the advantages of one process's samples, computed over every process's
(:func:`process_advantages`: the library's rule, or a rule written as a function of the turn rewards, such as notebook
04's advantage cell, :func:`rule_advantages`); which groups of it can move the policy at all (:func:`group_signal`);
and DAPO's dynamic sampling (:class:`DynamicBatch`).  :class:`~venus_utils.rl.igpo_trainer.IGPOTrainer` uses them;
they need no TRL.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Sequence

from ..core.validation import described, quote
from .advantages import compute_turn_advantages
from .config import IGPOConfig
from .rewards import RewardCellError, function_name, number_problem

#: an advantage rule over a batch: each rollout's turn rewards (one per non-final turn; None: no reward of its own),
#: outcome and group (its question) -> one advantage per turn of each rollout (notebook 04's ``turn_advantages`` cell)
TurnAdvantages = Callable[[list[list[float | None]], list[float], list[Hashable]], Sequence[Sequence[float]]]


def process_advantages(
    gathered: Sequence[tuple],
    process_index: int,
    local_size: int,
    cfg: IGPOConfig,
    stats: dict | None = None,
    *,
    turn_advantages: TurnAdvantages | None = None,
    turns: Sequence[tuple] | None = None,
    step: int | None = None,
) -> list[list[float]]:
    """Advantages of one process's samples: computed on the gathered batch (every process's
    ``(rewards, length, group, judge score, completion digest[, IG kinds])`` in process order), then sliced, so
    sharding changes nothing; the IG kinds (the tool of each rewarded turn) are read with ``cfg.ig_norm = "tool"``.
    With ``turn_advantages`` (and ``turns``, each sample's ``(turn rewards, outcome, turn spans)`` gathered
    the same way) that rule replaces the library's (:func:`rule_advantages`).  ``stats`` (if given) also gets
    the batch's :func:`group_signal`."""
    rewards, lengths, groups, scores, digests = (
        [list(col) for col in zip(*(t[:5] for t in gathered))] if gathered else ([], [], [], [], [])
    )
    if turn_advantages is None:
        by_tool = cfg.ig_norm == "tool"
        adv = compute_turn_advantages(
            list(rewards),
            list(lengths),
            list(groups),
            gamma=cfg.gamma,
            mode=cfg.norm_mode,
            eps=cfg.adv_eps,
            stats=stats,
            ig_kinds=[t[5] if n else [] for t, n in zip(gathered, lengths)] if by_tool else None,
        )
    else:
        if turns is None or len(turns) != len(gathered):
            raise ValueError("turn_advantages needs each sample's (turn rewards, outcome, turn spans)")
        adv = rule_advantages(turn_advantages, turns, lengths, groups, step=step)
        if stats is not None:  # what the library's rule reports of a batch (a rule has no IG scale of its own)
            stats.update(rule_statistics(turns, lengths, groups))
    if stats is not None:
        stats.update(group_signal(lengths, groups, scores, adv, digests))
    return adv[process_index * local_size : (process_index + 1) * local_size]


def turn_spans(prompt_length: int, boundaries: Sequence[int], completion_length: int) -> list[tuple[int, int]]:
    """``[(start, end), ...]`` in completion tokens of each assistant turn (its tool response included, which the
    loss masks): from its boundary (an absolute position, after ``prompt_length`` prompt tokens) to the next."""
    starts = [b - prompt_length for b in boundaries]
    return list(zip(starts, [*starts[1:], completion_length]))


def rule_statistics(turns: Sequence[tuple], lengths: Sequence[int], groups: Sequence[Hashable]) -> dict[str, int]:
    """The batch counts :func:`~.advantages.compute_turn_advantages` reports, for a batch a rule scored: turn reward
    positions, rollouts with tokens, groups, and groups of two or more whose outcomes are all the same."""
    live = [k for k, n in enumerate(lengths) if n > 0]
    outcomes: dict[Hashable, list[float]] = defaultdict(list)
    for k in live:
        outcomes[groups[k]].append(float(turns[k][1]))
    return {
        "num_ig_positions": sum(r is not None for k in live for r in turns[k][0]),
        "num_samples": len(live),
        "all_same_outcome_groups": sum(1 for v in outcomes.values() if len(v) > 1 and len(set(v)) == 1),
        "num_groups": len(outcomes),
    }


def rule_advantages(
    rule: TurnAdvantages,
    turns: Sequence[tuple],
    lengths: Sequence[int],
    groups: Sequence[Hashable],
    *,
    step: int | None = None,
) -> list[list[float]]:
    """Token advantages from a ``rule`` over the batch's rollouts with tokens (in batch order): it gets their turn
    rewards, outcomes and groups (``turns[k]``: ``(turn rewards, outcome, turn spans)``) and returns one advantage
    per turn of each rollout, which every token of that turn receives.  A failed rollout (no tokens) gets none.  A
    rule that raises, or returns the wrong shape or a value that is not a finite number within
    :data:`~.rewards.REWARD_BOUND`, is a :class:`~.rewards.RewardCellError` naming the rule, the step (``step``), the
    question (its group) and the value."""
    live = [k for k, n in enumerate(lengths) if n > 0]
    name = f"{function_name(rule)} at RL step {step if step is not None else '?'}"
    try:
        rows = rule([list(turns[k][0]) for k in live], [float(turns[k][1]) for k in live], [groups[k] for k in live])
    except Exception as exc:
        raise RewardCellError(f"{name} raised {type(exc).__name__}: {quote(str(exc), 300)[1:-1]}") from exc
    if not isinstance(rows, (list, tuple)) or len(rows) != len(live):
        got = f"{len(rows)} rows" if isinstance(rows, (list, tuple)) else described(rows)
        raise RewardCellError(f"{name} gave {got} for {len(live)} rollouts: one row per rollout")
    adv = [[0.0] * n for n in lengths]
    for k, row in zip(live, rows):
        spans, where = turns[k][2], f"{name} on question {quote(groups[k], 90)}"
        if hasattr(row, "tolist") and not isinstance(row, (list, tuple)):
            row = row.tolist()
        if not isinstance(row, (list, tuple)) or len(row) != len(spans):
            got = f"{len(row)} values" if isinstance(row, (list, tuple)) else described(row)
            raise RewardCellError(f"{where} gave {got} for a rollout of {len(spans)} turns: one advantage per turn")
        for j, value in enumerate(row):
            problem = number_problem(value)
            if problem:
                raise RewardCellError(f"{where} gave {problem} for turn {j} in {quote(row)}")
        for (start, end), value in zip(spans, row):
            adv[k][start:end] = [float(value)] * (end - start)
    return adv


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
