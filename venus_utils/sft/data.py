"""Training examples: one whole trajectory = one sample, with DR-Venus's loss mask.

DR-Venus (verl's ``MultiTurnSFTDataset``, ``SFT/verl/utils/dataset/multiturn_sft_dataset.py``) renders the
conversation with the model's chat template (``tools=None``: the system prompt already lists the tools) and
supervises *every* assistant turn: per message ``i`` it renders ``messages[:i]`` and ``messages[:i+1]`` and
tokenizes the difference.

- system, user (the question) and tool-response (user) segments: label -100;
- assistant segment: the generation prompt ``<|im_start|>assistant\\n<think>\\n`` gets -100, everything after it up
  to and including ``<|im_end|>\\n`` is trained (so the newline after ``<|im_end|>`` is trained, and the ``<think>``
  opener never is: at inference it is part of the prompt);
- the reasoning of earlier turns stays in the input (the template keeps it because tool results are not queries).

Labels are aligned with ``input_ids`` (the model shifts them), as in Hugging Face causal-LM training.
Over-long trajectories are never truncated (truncation would cut the final answer): they are dropped and counted
under ``too_long``, the same policy as the cleaner's ``--max-tokens`` filter.
"""

from __future__ import annotations

import html
import logging
import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from ..core.perf import process_pool
from ..core.protocol import render_chat

IGNORE = -100
log = logging.getLogger(__name__)


class ConversationError(ValueError):
    """A conversation that cannot become a training sample (the message says why)."""


def _as_messages(messages: Any) -> list[dict[str, str]]:
    """Plain ``[{role, content}]`` from a list, a numpy array (parquet via pandas) or similar."""
    if messages is None or isinstance(messages, (str, bytes, dict)):
        raise ConversationError(f"messages must be a list of {{role, content}} dicts, got {type(messages).__name__}")
    out = []
    for i, m in enumerate(list(messages)):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
            raise ConversationError(f"message {i} is not a {{role: str, content: str}} dict")
        out.append({"role": m["role"], "content": m["content"]})
    if not out:
        raise ConversationError("no messages")
    return out


def render(messages: list[dict], tokenizer, add_generation_prompt: bool = False) -> str:
    """The chat-template text of ``messages`` (empty list -> empty string)."""
    if not messages:
        return ""
    return render_chat(tokenizer, messages, add_generation_prompt=add_generation_prompt)


def conversation_segments(messages: Any, tokenizer) -> list[tuple[str, bool]]:
    """The rendered conversation cut into ``(text, trained)`` segments, per the reference mask."""
    msgs = _as_messages(messages)
    if not any(m["role"] == "assistant" for m in msgs):
        raise ConversationError("no assistant message: nothing to train on")
    segments: list[tuple[str, bool]] = []
    prev = ""
    for i, message in enumerate(msgs):
        full = render(msgs[: i + 1], tokenizer)
        if not full.startswith(prev):
            raise ConversationError(
                f"the chat template is not prefix-preserving at message {i} ({message['role']}): rendering one more "
                "message changed the text before it"
            )
        seg = full[len(prev) :]
        if message["role"] == "assistant":
            prompt = render(msgs[:i], tokenizer, add_generation_prompt=True)[len(prev) :] if i else ""
            k = 0
            while k < min(len(prompt), len(seg)) and prompt[k] == seg[k]:
                k += 1
            if seg[:k]:
                segments.append((seg[:k], False))
            segments.append((seg[k:], True))
        else:
            segments.append((seg, False))
        prev = full
    return segments


def tokenize_conversation(messages: Any, tokenizer, max_length: int | None = None) -> dict[str, list[int]]:
    """``{"input_ids": [...], "labels": [...]}`` with the DR-Venus mask (labels -100 where masked).

    Segments are tokenized one by one and concatenated (the mask is exact); like the reference, when that differs
    from tokenizing the whole text at once, the concatenation is used and a warning is logged.  Raises
    :class:`ConversationError` for malformed conversations and for ones longer than ``max_length`` tokens.
    """
    input_ids: list[int] = []
    labels: list[int] = []
    segments = conversation_segments(messages, tokenizer)
    for text, trained in segments:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        input_ids.extend(ids)
        labels.extend(ids if trained else [IGNORE] * len(ids))
    if max_length is not None and len(input_ids) > max_length:
        raise ConversationError(f"too_long: {len(input_ids)} tokens > max_length {max_length}")
    whole = tokenizer("".join(t for t, _ in segments), add_special_tokens=False)["input_ids"]
    if whole != input_ids:
        log.warning("segment-wise tokenization differs from whole-text tokenization; using the segment-wise ids")
    return {"input_ids": input_ids, "labels": labels}


@dataclass
class ExampleSet:
    """Tokenized samples plus the accounting of every input row."""

    rows: list[dict[str, Any]] = field(default_factory=list)  # input_ids, labels, length, n_loss, source_row
    rows_in: int = 0
    dropped: Counter = field(default_factory=Counter)  # reason -> count
    examples_dropped: list[str] = field(default_factory=list)  # first few "file:row: reason"

    def stats(self) -> dict[str, Any]:
        lengths = [r["length"] for r in self.rows]
        loss = [r["n_loss"] for r in self.rows]
        return {
            "rows_in": self.rows_in,
            "rows_kept": len(self.rows),
            "dropped": dict(self.dropped),
            "tokens": sum(lengths),
            "loss_tokens": sum(loss),
            "loss_token_share": round(sum(loss) / max(1, sum(lengths)), 4),
            "mean_length": round(sum(lengths) / max(1, len(lengths)), 1),
            "max_length": max(lengths, default=0),
        }


#: conversations from which :func:`build_examples` tokenizes in worker processes (fewer: in this process, where
#: starting the workers would cost more than it saves), and at most this many workers by default (each imports
#: transformers: a few hundred MB; a GPU node's many cores, times its training processes, would add up)
PARALLEL_ROWS = 2000
MAX_WORKERS = 8


def build_examples(
    conversations: Iterable[Any],
    tokenizer,
    max_length: int | None = None,
    source: str = "input",
    workers: int | None = None,
) -> ExampleSet:
    """Tokenize every conversation; a row that cannot be used is counted under its drop reason, never lost.

    ``workers``: processes that tokenize contiguous chunks (None: one per CPU core, at most :data:`MAX_WORKERS`, from
    :data:`PARALLEL_ROWS` conversations on, else this process alone).  The result is the same on any number (rows
    in input order)."""
    conversations = list(conversations)
    if workers is None:
        workers = min(os.cpu_count() or 1, MAX_WORKERS) if len(conversations) >= PARALLEL_ROWS else 1
    if workers <= 1 or len(conversations) < 2:
        return _build_chunk(conversations, tokenizer, max_length, source)
    size = -(-len(conversations) // (4 * workers))  # a few chunks per worker: an uneven chunk does not hold it up
    starts = range(0, len(conversations), size)
    with process_pool(workers, _init_tokenizer, (tokenizer,)) as pool:
        futures = [pool.submit(_build_chunk, conversations[s : s + size], None, max_length, source, s) for s in starts]
        parts = [f.result() for f in futures]
    out = ExampleSet()
    for part in parts:
        out.rows.extend(part.rows)
        out.rows_in += part.rows_in
        out.dropped.update(part.dropped)
        out.examples_dropped.extend(part.examples_dropped[: 20 - len(out.examples_dropped)])
    return out


_TOKENIZER = None  # a tokenizing worker's tokenizer (set by _init_tokenizer)


def _init_tokenizer(tokenizer) -> None:
    global _TOKENIZER
    _TOKENIZER = tokenizer


def _build_chunk(
    conversations: list[Any], tokenizer, max_length: int | None, source: str, offset: int = 0
) -> ExampleSet:
    """:func:`build_examples` of ``conversations`` in this process; row numbers start at ``offset``."""
    tokenizer = tokenizer if tokenizer is not None else _TOKENIZER
    out = ExampleSet()
    for i, messages in enumerate(conversations, start=offset):
        out.rows_in += 1
        try:
            ex = tokenize_conversation(messages, tokenizer, max_length=max_length)
        except ConversationError as exc:
            reason = "too_long" if str(exc).startswith("too_long") else "invalid_conversation"
            out.dropped[reason] += 1
            if len(out.examples_dropped) < 20:
                out.examples_dropped.append(f"{source}:{i}: {exc}")
            continue
        n_loss = sum(1 for x in ex["labels"] if x != IGNORE)
        out.rows.append({**ex, "length": len(ex["input_ids"]), "n_loss": n_loss, "source_row": i})
    return out


SFT_COLUMNS = ("question", "messages", "gt")


def read_sft_parquet(path: str | Path) -> list[Any]:
    """The ``messages`` of an SFT parquet (the cleaner's schema: question, messages, gt)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: file not found")
    table = pq.read_table(path)
    missing = [c for c in SFT_COLUMNS if c not in table.column_names]
    if missing:
        raise ValueError(f"{path}: missing column(s) {missing}; expected the SFT schema {list(SFT_COLUMNS)}")
    return table.column("messages").to_pylist()


def examples_from_parquet(
    path: str | Path, tokenizer, max_length: int | None = None, workers: int | None = None
) -> ExampleSet:
    """:func:`build_examples` of an SFT parquet's conversations (``workers`` as there)."""
    return build_examples(read_sft_parquet(path), tokenizer, max_length=max_length, source=str(path), workers=workers)


def trained_spans(example: dict[str, list[int]], tokenizer) -> list[str]:
    """The text of each run of consecutive trained tokens of a tokenized trajectory (``labels`` not ignored): under
    DR-Venus's mask, one run per assistant turn, from after its generation prompt to its ``<|im_end|>`` and newline."""
    spans: list[list[int]] = []
    previous = False
    for token, label in zip(example["input_ids"], example["labels"], strict=True):
        trained = label != IGNORE
        if trained and not previous:
            spans.append([])
        if trained:
            spans[-1].append(token)
        previous = trained
    return [tokenizer.decode(ids) for ids in spans]


def loss_mask_html(messages: Any, tokenizer, max_chars: int = 400) -> str:
    """HTML of a rendered trajectory, trained tokens highlighted; long untrained segments are elided in the middle."""
    parts = ['<pre style="white-space:pre-wrap;font-size:11px;line-height:1.35">']
    for text, trained in conversation_segments(messages, tokenizer):
        if trained:
            for tok_id in tokenizer(text, add_special_tokens=False)["input_ids"]:
                piece = html.escape(tokenizer.decode([tok_id]))
                parts.append(f'<span style="background:#b7e4c7;border-right:1px solid #74c69d">{piece}</span>')
        else:
            if len(text) > max_chars:
                text = (
                    f"{text[: max_chars // 2]} [... {len(text) - max_chars} characters ...] {text[-max_chars // 2 :]}"
                )
            parts.append(f'<span style="color:#6c757d">{html.escape(text)}</span>')
    parts.append("</pre>")
    return "".join(parts)
