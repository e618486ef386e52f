"""DR-Venus's turn-level format check (its ``format_checker.py``) and where its penalty goes.

Every assistant turn must be ``<think>...</think>`` followed by exactly one well-formed ``<tool_call>`` (a
non-final turn) or exactly one non-empty ``<answer>`` (the final turn), with nothing but whitespace around
them.  A failing non-final turn has its IG entry *replaced* by the penalty (which creates a reward position
even for a turn the tool filter skipped); a failing final turn has its *outcome* replaced by the penalty.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..protocol import load_tool_json as _load_tool_json  # the one tool-call JSON loader (json, then json5)

_TAGS = {
    name: re.compile(re.escape(tag))
    for name, tag in {
        "think_open": "<think>",
        "think_close": "</think>",
        "tc_open": "<tool_call>",
        "tc_close": "</tool_call>",
        "ans_open": "<answer>",
        "ans_close": "</answer>",
    }.items()
}


def turn_format_error(content: str, final: bool) -> str | None:
    """Why an assistant turn breaks the format, or None when it is well formed."""
    if not content or not content.strip():
        return "empty turn"
    pos = {name: [m.start() for m in rx.finditer(content)] for name, rx in _TAGS.items()}
    opens, closes = pos["think_open"], pos["think_close"]
    if not opens or len(opens) != len(closes):
        return "missing or unbalanced <think> tags"
    if content[: opens[0]].strip():
        return "text before the first <think>"
    for i in range(len(opens)):
        if opens[i] >= closes[i] or (i > 0 and closes[i - 1] >= opens[i]):
            return "<think> blocks out of order or nested"
    after_think = closes[-1] + len("</think>")
    if final:
        return _body_error(content, pos, "ans", "answer", forbidden="tc", after_think=after_think)
    error = _body_error(content, pos, "tc", "tool_call", forbidden="ans", after_think=after_think)
    if error:
        return error
    body = content[pos["tc_open"][0] + len("<tool_call>") : pos["tc_close"][0]].strip()
    if "pythoninterpreter" in body.lower() and "<code>" in body and "</code>" in body:
        return None
    try:
        obj = _load_tool_json(body)
    except Exception:
        return "tool call is not valid JSON"
    if not isinstance(obj, dict) or "name" not in obj or "arguments" not in obj:
        return "tool call needs 'name' and 'arguments'"
    if not isinstance(obj["arguments"], dict):
        return "tool call 'arguments' is not an object"
    return None


def _body_error(content: str, pos: dict, key: str, tag: str, *, forbidden: str, after_think: int) -> str | None:
    if pos[f"{forbidden}_open"] or pos[f"{forbidden}_close"]:
        other = "tool_call" if forbidden == "tc" else "answer"
        return f"a {'final' if key == 'ans' else 'tool'} turn must not contain <{other}>"
    opens, closes = pos[f"{key}_open"], pos[f"{key}_close"]
    if len(opens) != 1 or len(closes) != 1:
        return f"needs exactly one <{tag}>...</{tag}>"
    if opens[0] < after_think - len("</think>") or closes[0] < opens[0]:
        return f"<{tag}> must follow </think>"
    if content[after_think : opens[0]].strip():
        return f"text between </think> and <{tag}>"
    if content[closes[0] + len(f"</{tag}>") :].strip():
        return f"text after </{tag}>"
    if not content[opens[0] + len(f"<{tag}>") : closes[0]].strip():
        return f"empty <{tag}>"
    return None


def turn_format_errors(turns: Sequence[str]) -> list[str | None]:
    """The format error of each assistant turn of an episode; the last turn is checked as the answer turn."""
    return [turn_format_error(t, final=(i == len(turns) - 1)) for i, t in enumerate(turns)]


def apply_format_penalties(
    turn_rewards: Sequence[float | None], outcome: float, errors: Sequence[str | None], penalty: float = -1.0
) -> tuple[list[float | None], float]:
    """Replace the reward of each malformed turn by ``penalty``: DR-Venus's format penalty, implemented here only
    (:func:`~.rewards.igpo_turn_reward` and :func:`~.rewards.igpo_outcome_reward` apply it).

    ``turn_rewards`` has one entry per non-final turn (``len(errors) - 1``); ``errors[-1]`` is the final
    turn's, whose penalty replaces ``outcome``.
    """
    if len(turn_rewards) != max(0, len(errors) - 1):
        raise ValueError(f"{len(errors)} turns need {max(0, len(errors) - 1)} turn rewards, got {len(turn_rewards)}")
    rewards = [penalty if err else r for r, err in zip(turn_rewards, errors[:-1])]
    if errors and errors[-1]:
        outcome = penalty
    return rewards, outcome
