"""Episodes, the reward functions IGPO calls on them, and where the rewards sit in the token sequence.

An :class:`Episode` is one rollout as the trainer sees it: the exact token ids the policy saw and sampled,
the assistant-token mask, the turn boundaries, the assistant turn texts and tool names.  After the rollout
the trainer fills in ``info_gain``, ``format_errors`` and ``judge_score`` (the judge's verdict), then calls two
plain functions, which a notebook may replace:

- ``turn_reward(ep) -> list[float | None]``: one entry per non-final turn (None = no reward position);
  DR-Venus: the IG, replaced by -1 on malformed turns (:func:`igpo_turn_reward`);
- ``outcome_reward(ep) -> float``: DR-Venus: the judge's 0/1, replaced by -1 when the final turn is
  malformed (:func:`igpo_outcome_reward`).

Both apply the format penalty with :func:`~.format_penalty.apply_format_penalties`, the one implementation of that
rule; notebook 04's reward cells call them and build on them.  :func:`with_search_cost` is the notebook's optional
extra turn reward (a cost per search call), which the command line applies the same way (:func:`reward_functions`).

``IGPOConfig.reward_mode='grpo'`` swaps both for the outcome-only baseline (:func:`reward_functions`): no turn
reward anywhere (:func:`no_turn_reward`) and the judge's score as the outcome, format penalties off
(:func:`judged_outcome_reward`).  The advantages are then the same code's outcome z-scores, which with no other
reward position cover every token of the trajectory: plain GRPO.

:func:`place_rewards` puts turn ``j``'s reward on the ``<|im_end|>`` that closes its tool response (the last
one before turn ``j + 1`` starts) and the outcome on the last completion token, as DR-Venus's
``info_gain_advantage.py`` does.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import math
import numbers
import textwrap
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.protocol import extract_answer, parse_tool_call, render_chat
from ..core.validation import described, quote
from .advantages import ZERO_REWARD
from .format_penalty import apply_format_penalties


@dataclass
class Episode:
    question: str
    ground_truth: str
    prompt_ids: list[int]  # system + question + the first generation prompt
    completion_ids: list[int]  # everything after: sampled tokens, tool responses, later generation prompts
    assistant_mask: list[int]  # 1 on sampled tokens (the loss mask), 0 elsewhere; len == len(completion_ids)
    boundaries: list[int]  # absolute context length right before each assistant turn; boundaries[0] == len(prompt_ids)
    turns: list[str]  # assistant turn texts as generated
    tool_names: list[str | None]  # tool called by each turn (None: none / unparseable)
    prediction: str | None = None
    group: Hashable = None  # rollouts of the same question share a group
    termination: str = ""
    # filled in by the trainer after the rollout
    info_gain: list[float | None] = field(default_factory=list)
    ig_values: list[float | None] = field(default_factory=list)
    format_errors: list[str | None] = field(default_factory=list)
    judge_score: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if len(self.assistant_mask) != len(self.completion_ids):
            raise ValueError(
                f"assistant_mask has {len(self.assistant_mask)} entries for {len(self.completion_ids)} "
                "completion tokens"
            )
        if len(self.turns) != len(self.boundaries) or len(self.tool_names) != len(self.turns):
            raise ValueError(
                f"{len(self.turns)} turns, {len(self.boundaries)} boundaries and {len(self.tool_names)} "
                "tool names: need one of each per assistant turn"
            )
        if self.boundaries and self.boundaries[0] != len(self.prompt_ids):
            raise ValueError(f"boundaries[0]={self.boundaries[0]} must be the prompt length {len(self.prompt_ids)}")

    @property
    def input_ids(self) -> list[int]:
        return list(self.prompt_ids) + list(self.completion_ids)

    @property
    def num_turns(self) -> int:
        return len(self.turns)


def _igpo_rewards(ep: Episode, penalty: float, use_format_penalty: bool) -> tuple[list[float | None], float]:
    """DR-Venus's turn rewards (the IG; None where it was not scored) and outcome (the judge's score), with the
    format penalty applied when ``use_format_penalty`` (the episode's ``format_errors`` must be filled in)."""
    gains = list(ep.info_gain) if ep.info_gain else [None] * max(0, ep.num_turns - 1)
    outcome = float(ep.judge_score)
    if not use_format_penalty:
        return gains, outcome
    if len(ep.format_errors) != ep.num_turns:
        raise ValueError(
            f"the episode has {ep.num_turns} turns but {len(ep.format_errors)} format errors: check its "
            "turns first (ep.format_errors = turn_format_errors(ep.turns); the trainer does)"
        )
    return apply_format_penalties(gains, outcome, ep.format_errors, penalty)


def igpo_turn_reward(ep: Episode, penalty: float = -1.0, use_format_penalty: bool = True) -> list[float | None]:
    """DR-Venus: each non-final turn earns its IG; a malformed one earns ``penalty`` instead."""
    return _igpo_rewards(ep, penalty, use_format_penalty)[0]


def igpo_outcome_reward(ep: Episode, penalty: float = -1.0, use_format_penalty: bool = True) -> float:
    """DR-Venus: the judge's score; ``penalty`` when the final (answer) turn is malformed."""
    return _igpo_rewards(ep, penalty, use_format_penalty)[1]


def with_search_cost(
    turn_rewards: Sequence[float | None], tool_names: Sequence[str | None], search_cost: float
) -> list[float | None]:
    """``turn_rewards`` with ``search_cost`` subtracted from every turn that called ``search`` (such a turn without a
    reward, None, then gets ``-search_cost``); unchanged when ``search_cost`` is 0 (DR-Venus)."""
    if not search_cost:
        return list(turn_rewards)
    return [(r or 0.0) - search_cost if tool == "search" else r for r, tool in zip(turn_rewards, tool_names)]


def no_turn_reward(ep: Episode) -> list[None]:
    """GRPO: no turn earns a reward of its own (no reward position before the outcome)."""
    return [None] * max(0, ep.num_turns - 1)


def judged_outcome_reward(ep: Episode) -> float:
    """GRPO: the judge's score of the final answer, whatever the format of the turns."""
    return float(ep.judge_score)


def reward_fingerprint(fn: Callable | None) -> str | None:
    """``"<name> sha256:<12 hex>"`` of a reward function's source text (notebook 04's reward cells, a module's
    function), so a run's resume guard sees an edited cell; functions without source text (built by ``exec``) are
    fingerprinted by their code (bytecode, constants, names).  None for None."""
    if fn is None:
        return None
    target = fn.func if isinstance(fn, functools.partial) else fn
    name = getattr(target, "__qualname__", None) or type(target).__name__
    try:
        text = textwrap.dedent(inspect.getsource(target))
        if isinstance(fn, functools.partial):
            text += repr((fn.args, sorted(fn.keywords.items())))
    except (OSError, TypeError):
        text = repr(_code_identity(getattr(target, "__code__", None)))
    return f"{name} sha256:{hashlib.sha256(text.encode('utf-8')).hexdigest()[:12]}"


def _code_identity(code) -> tuple:
    if code is None:
        return ()
    consts = tuple(_code_identity(c) if hasattr(c, "co_code") else repr(c) for c in code.co_consts)
    return (code.co_code.hex(), consts, code.co_names, code.co_varnames)


def reward_functions(cfg) -> tuple[Callable[[Episode], list], Callable[[Episode], float]]:
    """``(turn_reward, outcome_reward)`` of ``cfg.reward_mode`` (an :class:`~.config.IGPOConfig`): DR-Venus's
    (``igpo``, with ``cfg``'s format penalty, and :func:`with_search_cost` when ``cfg.search_cost`` is set) or the
    outcome-only baseline (``grpo``; the config refuses a search cost there)."""
    if cfg.reward_mode == "grpo":
        return no_turn_reward, judged_outcome_reward
    if cfg.reward_mode != "igpo":
        raise ValueError(f"reward_mode must be igpo or grpo, got {cfg.reward_mode!r}")

    def turn_reward(ep: Episode) -> list[float | None]:
        return with_search_cost(
            igpo_turn_reward(ep, cfg.format_penalty, cfg.use_format_penalty), ep.tool_names, cfg.search_cost
        )

    return turn_reward, lambda ep: igpo_outcome_reward(ep, cfg.format_penalty, cfg.use_format_penalty)


def turn_reward_positions(ep: Episode, im_end_id: int | None) -> list[int]:
    """Completion positions of the rewards of turns 0..T-2: the last ``<|im_end|>`` before the next turn."""
    p0 = len(ep.prompt_ids)
    positions = []
    for j in range(ep.num_turns - 1):
        end = ep.boundaries[j + 1] - p0  # completion index where turn j+1's first sampled token goes
        pos = end - 1
        if im_end_id is not None:
            for k in range(end - 1, -1, -1):
                if ep.completion_ids[k] == im_end_id:
                    pos = k
                    break
        positions.append(pos)
    return positions


#: The largest magnitude a reward cell (turn reward, outcome, advantage) may return.  IGPO's rewards are a few nats
#: of information gain, the -1 format penalty and a 0/1 outcome, its advantages z-scores; a value past this would
#: swamp every other signal of the batch (``1e300`` overflows the loss), so it is taken for a bug in the cell.
REWARD_BOUND = 100.0


class RewardCellError(ValueError):
    """A reward or advantage function (notebook 04's cells) raised, or returned something that is not a finite
    number within :data:`REWARD_BOUND` where one was expected; the message names the function, the RL step, the
    question and the value.  Training stops there and nothing is saved."""


def function_name(fn: Callable) -> str:
    """How a message names a reward function: ``turn_reward`` (notebook 04's cell of that name), or its repr."""
    return getattr(fn, "__name__", None) or quote(fn)


def number_problem(value: Any) -> str | None:
    """Why ``value`` cannot be a reward or an advantage (None when it can): not a real number (a string, a bool,
    None, a list...), not finite, or past :data:`REWARD_BOUND`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return f"{described(value)}, not a number"
    x = float(value)
    if not math.isfinite(x):
        return f"{quote(value)}, not a finite number"
    if abs(x) > REWARD_BOUND:
        return f"{quote(value)}, outside [-{REWARD_BOUND:g}, {REWARD_BOUND:g}]"
    return None


def call_reward_cell(fn: Callable, ep: Episode, kind: str, step: int | None = None) -> Any:
    """``fn(ep)`` checked: ``kind`` ``"turn"`` wants one number or None per non-final turn (a list or tuple),
    ``"outcome"`` one number; anything else, or an exception inside ``fn``, is a :class:`RewardCellError` naming the
    function, the step, the question and the value."""
    where = f"{function_name(fn)} at RL step {step if step is not None else '?'} on question {quote(ep.question, 90)}"
    try:
        out = fn(ep)
    except Exception as exc:
        raise RewardCellError(f"{where} raised {type(exc).__name__}: {quote(str(exc), 300)[1:-1]}") from exc
    if kind == "outcome":
        problem = number_problem(out)
        if problem:
            raise RewardCellError(f"{where} returned {problem}: an outcome reward is one number")
        return float(out)
    if hasattr(out, "tolist") and not isinstance(out, (list, tuple)):  # a numpy array of rewards
        out = out.tolist()
    if not isinstance(out, (list, tuple)):
        raise RewardCellError(
            f"{where} returned {described(out)}: expected a list with one number (or None) per non-final turn"
        )
    for j, r in enumerate(out):
        problem = None if r is None else number_problem(r)
        if problem:
            raise RewardCellError(f"{where} returned {problem} for turn {j} in {quote(out)}")
    return [None if r is None else float(r) for r in out]


def place_rewards(
    length: int, turn_rewards: Sequence[float | None], positions: Sequence[int], outcome: float
) -> dict[int, float]:
    """Sparse token-level rewards of one sample: turn rewards on ``positions`` and the outcome at ``length - 1``.

    None leaves the position empty; an exact 0.0 is stored as 1e-10 so that it still counts.
    """
    if length < 1:
        raise ValueError("a sample needs at least one completion token to carry its outcome")
    if len(turn_rewards) != len(positions):
        raise ValueError(f"{len(turn_rewards)} turn rewards for {len(positions)} positions")
    rewards: dict[int, float] = {}
    for j, (r, p) in enumerate(zip(turn_rewards, positions)):
        if r is None:
            continue
        if not math.isfinite(r):
            raise ValueError(f"turn {j}: reward {r} is not finite")
        if not 0 <= p < length - 1:
            raise ValueError(f"turn {j}: reward position {p} outside the completion (0..{length - 2})")
        rewards[p] = ZERO_REWARD if r == 0.0 else float(r)
    if not math.isfinite(outcome):
        raise ValueError(f"outcome {outcome} is not finite")
    rewards[length - 1] = float(outcome)
    return rewards


def episode_rewards(
    ep: Episode, turn_rewards: Sequence[float | None], outcome: float, im_end_id: int | None
) -> dict[int, float]:
    """Place an episode's turn rewards and outcome on its completion tokens."""
    expected = max(0, ep.num_turns - 1)
    if len(turn_rewards) != expected:
        raise ValueError(
            f"turn_reward returned {len(turn_rewards)} entries; the episode has {ep.num_turns} turns, "
            f"so it needs {expected} (one per non-final turn)"
        )
    return place_rewards(len(ep.completion_ids), turn_rewards, turn_reward_positions(ep, im_end_id), outcome)


def episode_from_messages(
    tokenizer, messages: Sequence[dict], ground_truth: str = "", *, group: Hashable = None
) -> Episode:
    """Re-render a finished message list with the chat template into an :class:`Episode`.

    For worked examples and for conversations that come without token ids (e.g. DR-Venus's shared rollouts).
    Training uses the agent loop's exact sampled ids instead (re-rendering can differ from what the
    policy saw).  Each turn boundary is the token count of the rendered context with the generation prompt;
    raises when that context is not a token-aligned prefix of the whole rendering.
    """
    messages = [dict(m) for m in messages]
    full = render_chat(tokenizer, messages)
    enc = tokenizer(full, add_special_tokens=False, return_offsets_mapping=True)
    ids, offsets = list(enc["input_ids"]), enc["offset_mapping"]
    ends = {end: k + 1 for k, (_, end) in enumerate(offsets)}  # char position -> token count ending there
    boundaries, spans, turns, names = [], [], [], []
    for k, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        context = render_chat(tokenizer, messages[:k], add_generation_prompt=True)
        if not full.startswith(context) or len(context) not in ends:
            raise ValueError(
                f"message {k}: the rendered context is not a token-aligned prefix of the conversation "
                "(the chat template rewrites earlier turns)"
            )
        stop = full.find("<|im_end|>", len(context))
        stop = len(full) if stop == -1 else stop + len("<|im_end|>")
        boundaries.append(ends[len(context)])
        spans.append((len(context), stop))
        turns.append(message["content"])
        call = parse_tool_call(message["content"])
        names.append(call.name if call is not None and call.ok else None)
    if not boundaries:
        raise ValueError("the conversation has no assistant turn")
    p0 = boundaries[0]
    mask = [int(any(a <= s < b for a, b in spans)) for s, _ in offsets[p0:]]
    return Episode(
        question=next((m["content"] for m in messages if m["role"] == "user"), ""),
        ground_truth=ground_truth,
        prompt_ids=ids[:p0],
        completion_ids=ids[p0:],
        assistant_mask=mask,
        boundaries=boundaries,
        turns=turns,
        tool_names=names,
        prediction=extract_answer(turns[-1]),
        group=group,
    )
