"""Notebook 04's worked example: the information gain of every turn of one rollout.

The rollout is one of DR-Venus's shared RL rollouts (:func:`load_shared_rollout`), or, where those are not at hand,
one of this run's own (:func:`own_rollout_example`); :func:`turn_table` lays out its IG turn by turn.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from ..protocol import ANSWER_SPLIT, extract_answer, render_chat
from .rollout import make_agent_rollout


def load_shared_rollout(path: str | Path, max_tokens: int, tokenizer, min_turns: int = 2) -> tuple[list[dict], str]:
    """A DR-Venus RL rollout cut after the last whole turn that fits in ``max_tokens`` (but keeping at least
    ``min_turns`` tool turns), followed by its final answer turn, and that final answer.

    The shared rollouts carry no ground truth, so the worked example scores the answer the rollout ended on.
    """
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    messages = data["messages"]
    answer = extract_answer(messages[-1]["content"]) if messages[-1]["role"] == "assistant" else None
    answer = (answer or "").strip("*_ \n")  # the example ends with a markdown-bold answer
    if not answer:
        raise ValueError(f"{path}: the rollout does not end with an <answer>")
    final = [{"role": "assistant", "content": messages[-1]["content"]}]

    def size(msgs):
        text = render_chat(tokenizer, msgs)
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

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

    with torch.no_grad():
        episode = make_agent_rollout(tools)(model, tokenizer, [row], cfg)[0]
    return episode, str(row["ground_truth"]).split(ANSWER_SPLIT)[0]


def turn_table(ep, ig_all, ig_filtered) -> pd.DataFrame:
    """One row per non-final turn: tool, IG scored at every boundary, IG with the tool filter."""
    return pd.DataFrame(
        {
            "turn": range(ep.num_turns - 1),
            "tool": [t or "-" for t in ep.tool_names[:-1]],
            "ig_every_turn": ig_all.gains,
            "ig_after_visit": ig_filtered.gains,
            "value_after": ig_all.values[1:],
        }
    )
