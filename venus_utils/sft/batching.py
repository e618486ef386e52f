"""Batching that keeps the per-trajectory loss exact, and the loss itself.

Batching modes (``SFTConfig.batching``):

- ``"max_length"``: every sample right-padded to ``max_length`` — what DR-Venus's verl dataset does; the naive
  baseline of ``benchmarks/bench_sft.py``;
- ``"padded"``: right-padded to the longest sample of the batch;
- ``"grouped"``: ``"padded"`` plus a sampler that puts samples of similar length in the same batch (random batches,
  little padding) — the fastest exact choice on CPU;
- ``"padding_free"``: the batch is concatenated into one row with ``position_ids`` restarting at 0 for each sample
  (transformers turns that into a block-diagonal attention mask; flash-attention kernels on GPUs run it without
  any padding).  Exact too: no sample sees another one.

``pad_to_multiple_of`` rounds every batch's width up to a multiple (``"max_length"`` excepted: its width is fixed),
and :func:`masked_lm_loss` (``pad_rows_to``) the number of labelled positions the LM head runs on.  Under bf16
autocast on a CPU every new shape leaves kernel state behind, so a run over thousands of distinct widths and
label counts grows its resident memory by gigabytes; a bounded set of shapes keeps it flat
(``benchmarks/bench_sft_memory.py``).  The extra positions are padding with no label: the loss stays the same.

In every mode the loss is computed only where a label exists: the hidden states of the loss positions go through the
LM head (a third of the tokens in agent trajectories), instead of the logits of every position.  Right-padded batches
run without their attention mask: in a causal model a real token never attends to the padding after it, so the
result is the same, and SDPA's causal kernel is about twice as fast on a CPU as the masked one
(:func:`right_padded`).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .data import IGNORE

BATCHING_MODES = ("max_length", "padded", "grouped", "padding_free")
LOSS_WEIGHTINGS = ("sequence_mean", "token_mean")


def round_up(n: int, multiple: int) -> int:
    """``n`` rounded up to a multiple of ``multiple`` (1: unchanged): the one rule for batch widths and head rows."""
    return -(-n // multiple) * multiple


def batch_width(n: int, multiple: int, max_length: int | None = None) -> int:
    """A batch's width for its longest row of ``n`` tokens (padding-free: its ``n`` tokens in all): ``n`` rounded up
    to ``multiple``, and never past ``max_length`` because of the rounding (:class:`Collator`)."""
    wide = round_up(n, multiple)
    return min(wide, max(n, max_length)) if max_length else wide


@dataclass
class Collator:
    """Turn tokenized samples into a batch for :func:`masked_lm_loss`."""

    pad_token_id: int
    mode: str = "grouped"
    max_length: int | None = None
    pad_to_multiple_of: int = 1

    def __post_init__(self):
        if self.mode not in BATCHING_MODES:
            raise ValueError(f"batching={self.mode!r}: expected one of {BATCHING_MODES}")
        if self.pad_to_multiple_of < 1:
            raise ValueError(f"pad_to_multiple_of={self.pad_to_multiple_of}: expected 1 (no rounding) or more")
        if self.mode == "max_length" and not self.max_length:
            raise ValueError("batching='max_length' needs max_length")

    def _rounded(self, n: int) -> int:
        """``n`` rounded up to :attr:`pad_to_multiple_of`, and never past ``max_length`` because of the rounding."""
        return batch_width(n, self.pad_to_multiple_of, self.max_length)

    def __call__(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
        import torch

        ids = [list(e["input_ids"]) for e in examples]
        labels = [list(e["labels"]) for e in examples]
        if self.mode == "padding_free":
            flat_ids, flat_labels, pos = [], [], []
            for i, lab in zip(ids, labels):
                flat_ids += i
                flat_labels += [IGNORE] + lab[1:]  # a sample's first token is never predicted from the previous sample
                pos += list(range(len(i)))
            extra = self._rounded(len(flat_ids)) - len(flat_ids)  # a padding "sample" of its own, with no label
            flat_ids += [self.pad_token_id] * extra
            flat_labels += [IGNORE] * extra
            pos += list(range(extra))
            return {
                "input_ids": torch.tensor([flat_ids]),
                "labels": torch.tensor([flat_labels]),
                "position_ids": torch.tensor([pos]),
            }
        longest = max(len(i) for i in ids)
        width = self.max_length if self.mode == "max_length" else self._rounded(longest)
        if longest > width:
            raise ValueError(f"a sample is longer than max_length={width}; build the examples with that max_length")
        pad = [width - len(i) for i in ids]
        return {
            "input_ids": torch.tensor([i + [self.pad_token_id] * p for i, p in zip(ids, pad)]),
            "attention_mask": torch.tensor([[1] * len(i) + [0] * p for i, p in zip(ids, pad)]),
            "labels": torch.tensor([lab + [IGNORE] * p for lab, p in zip(labels, pad)]),
        }


class LengthGroupedSampler:
    """Random batches of similar-length samples, deterministic in (seed, epoch) so that resuming replays them.

    Shuffle, cut into chunks of ``mega`` batches, sort each chunk by length, split into batches, shuffle the batches.
    """

    def __init__(self, lengths: list[int], batch_size: int, seed: int = 0, mega: int = 16):
        self.lengths, self.batch_size, self.seed, self.mega, self.epoch = list(lengths), batch_size, seed, mega, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.lengths)

    def __iter__(self) -> Iterator[int]:
        rng = random.Random(self.seed * 1_000_003 + self.epoch)
        order = list(range(len(self.lengths)))
        rng.shuffle(order)
        chunk = self.batch_size * self.mega
        batches = []
        for start in range(0, len(order), chunk):
            part = sorted(order[start : start + chunk], key=lambda i: self.lengths[i], reverse=True)
            batches += [part[b : b + self.batch_size] for b in range(0, len(part), self.batch_size)]
        rng.shuffle(batches)
        return iter([i for b in batches for i in b])


def sequence_ids(batch: dict[str, Any]):
    """Which sample each position belongs to: the row index (padded) or the running count of position-0 tokens."""
    import torch

    if "position_ids" in batch and "attention_mask" not in batch:
        return (batch["position_ids"] == 0).long().cumsum(-1) - 1
    b, t = batch["input_ids"].shape
    return torch.arange(b, device=batch["input_ids"].device).unsqueeze(1).expand(b, t)


def _wrapped(model) -> bool:
    """DDP / FSDP (1 and 2) / DeepSpeed engines: their forward gathers parameters and syncs gradients."""
    return hasattr(model, "module") or type(model).__name__.startswith("FSDP") or not hasattr(model, "get_decoder")


def right_padded(attention_mask) -> bool:
    """True when every row of the mask is ones followed by zeros (right padding, no holes).

    For such a batch a causal model gives every real position the same output with or without the mask, so the mask
    can be left out (the padding positions carry no label).
    """
    if attention_mask is None:
        return True
    return bool((attention_mask[:, 1:] <= attention_mask[:, :-1]).all()) and bool(attention_mask[:, 0].all())


def masked_lm_loss(
    model,
    batch: dict[str, Any],
    weighting: str = "sequence_mean",
    denominator: float | None = None,
    pad_rows_to: int = 1,
):
    """Cross-entropy on the labelled positions only; returns ``(loss_sum_term, stats)``.

    ``sequence_mean``: each sample's token-mean, summed (divide by the number of samples in the optimizer batch);
    ``token_mean``: the plain sum of token losses (divide by the number of loss tokens in the optimizer batch).
    ``denominator`` (that count) is applied when given; otherwise the micro-batch's own count is used.
    ``pad_rows_to``: the LM head runs on the labelled positions padded up to a multiple of this with rows whose
    logits are dropped (the number of labelled positions differs in every batch, and under bf16 autocast on a CPU
    each new count keeps kernel state: the collator's ``pad_to_multiple_of`` does the same for the width).
    """
    import torch
    import torch.nn.functional as F

    if weighting not in LOSS_WEIGHTINGS:
        raise ValueError(f"loss weighting {weighting!r}: expected one of {LOSS_WEIGHTINGS}")
    labels = batch["labels"]
    inputs = {k: v for k, v in batch.items() if k in ("input_ids", "attention_mask", "position_ids")}
    if "position_ids" not in inputs and right_padded(inputs.get("attention_mask")):
        inputs.pop("attention_mask", None)  # exact for right padding; SDPA's causal path is ~2x faster on CPU
    target = labels[:, 1:]
    keep = target != IGNORE
    if not _wrapped(model):
        hidden = model.get_decoder()(**inputs, use_cache=False).last_hidden_state
        rows = hidden[:, :-1][keep]
        n_rows = rows.shape[0]
        extra = round_up(n_rows, pad_rows_to) - n_rows
        if extra:  # zero rows: their logits are dropped and they add nothing to any gradient
            rows = torch.cat([rows, rows.new_zeros(extra, rows.shape[-1])])
        logits = model.get_output_embeddings()(rows)[:n_rows].float()
    else:  # wrapped by DDP / FSDP / DeepSpeed: the forward must go through the wrapper (gradient sync, sharding)
        cols = keep.any(0).nonzero().squeeze(-1)  # positions where some row has a label (all of them at batch 1)
        n_cols = cols.numel()
        extra = round_up(n_cols, pad_rows_to) - n_cols if n_cols else 0
        padded = torch.cat([cols, cols[-1:].expand(extra)]) if extra else cols  # repeats whose logits are dropped
        out = model(**inputs, use_cache=False, logits_to_keep=padded)
        logits = out.logits[:, :n_cols][keep[:, cols]].float()
    tok_loss = F.cross_entropy(logits, target[keep], reduction="none")
    seq = sequence_ids(batch)[:, 1:][keep]
    n_tok = int(keep.sum())
    if weighting == "token_mean":
        total = tok_loss.sum()
        count = float(n_tok)
    else:
        n_seq = int(seq.max()) + 1 if n_tok else 0
        per_seq_sum = torch.zeros(n_seq, device=tok_loss.device).index_add(0, seq, tok_loss)
        per_seq_n = torch.zeros(n_seq, device=tok_loss.device).index_add(0, seq, torch.ones_like(tok_loss))
        has = per_seq_n > 0
        total = (per_seq_sum[has] / per_seq_n[has]).sum()
        count = float(int(has.sum()))
    loss = total / (denominator if denominator else max(count, 1.0))
    with torch.no_grad():
        acc = (logits.argmax(-1) == target[keep]).float().mean().item() if n_tok else 0.0
    return loss, {
        "loss_tokens": n_tok,
        "units": count,
        "token_accuracy": acc,
        "token_loss_mean": (tok_loss.mean().item() if n_tok else 0.0),
    }


def count_units(batches: list[dict[str, Any]], weighting: str) -> float:
    """The loss denominator of one optimizer step: samples with a loss token, or loss tokens."""
    total = 0.0
    for batch in batches:
        keep = batch["labels"][:, 1:] != IGNORE
        if weighting == "token_mean":
            total += float(keep.sum())
        else:
            seq = sequence_ids(batch)[:, 1:][keep]
            total += float(seq.unique().numel())
    return total
