"""Every batching mode gives the same, exact DR-Venus loss."""

import pytest

from venus_utils.modeling import synthetic_conversations
from venus_utils.sft.batching import Collator, LengthGroupedSampler, count_units, masked_lm_loss, round_up
from venus_utils.sft.data import IGNORE, build_examples


@pytest.fixture(scope="module")
def setup(micro_model_dir):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(micro_model_dir)
    model = AutoModelForCausalLM.from_pretrained(micro_model_dir, dtype=torch.float32).eval()
    convs = [c["messages"] for c in synthetic_conversations(4, seed=9)]
    convs[1] = convs[1][:5]  # a shorter trajectory (ends after a tool response + assistant turn)
    rows = build_examples(convs, tok).rows
    return tok, model, rows


def _reference(model, rows, weighting):
    """One sample at a time, full logits, the textbook way."""
    import torch
    import torch.nn.functional as F

    sums, counts = [], []
    for r in rows:
        ids = torch.tensor([r["input_ids"]])
        logits = model(ids).logits[0, :-1]
        target = torch.tensor(r["labels"][1:])
        keep = target != IGNORE
        ce = F.cross_entropy(logits[keep], target[keep], reduction="sum")
        sums.append(ce)
        counts.append(int(keep.sum()))
    if weighting == "token_mean":
        return sum(sums) / sum(counts)
    return sum(s / c for s, c in zip(sums, counts)) / len(rows)


@pytest.mark.parametrize("weighting", ["sequence_mean", "token_mean"])
@pytest.mark.parametrize("mode", ["max_length", "padded", "grouped", "padding_free"])
def test_all_modes_give_the_reference_loss(setup, mode, weighting):
    import torch

    tok, model, rows = setup
    collate = Collator(tok.pad_token_id, mode, max_length=max(r["length"] for r in rows) + 7)
    batch = collate(rows)
    with torch.no_grad():
        loss, stats = masked_lm_loss(model, batch, weighting)
        ref = _reference(model, rows, weighting)
    assert torch.allclose(loss, ref, atol=1e-4), (mode, weighting, loss.item(), ref.item())
    assert stats["loss_tokens"] == sum(r["n_loss"] for r in rows)


@pytest.mark.parametrize("weighting", ["sequence_mean", "token_mean"])
@pytest.mark.parametrize("mode", ["padded", "grouped", "padding_free"])
def test_widths_rounded_to_a_multiple_keep_the_reference_loss(setup, mode, weighting):
    """pad_to_multiple_of adds unlabelled padding only: the width is a multiple, the loss and unit count the same."""
    import torch

    tok, model, rows = setup
    exact = Collator(tok.pad_token_id, mode)(rows)
    batch = Collator(tok.pad_token_id, mode, pad_to_multiple_of=64)(rows)
    width = batch["input_ids"].shape[1]
    assert width % 64 == 0 and 0 <= width - exact["input_ids"].shape[1] < 64
    assert int((batch["labels"] != IGNORE).sum()) == int((exact["labels"] != IGNORE).sum())
    assert count_units([batch], weighting) == count_units([exact], weighting)
    with torch.no_grad():
        loss, stats = masked_lm_loss(model, batch, weighting, pad_rows_to=64)
    assert torch.allclose(loss, _reference(model, rows, weighting), atol=1e-4), (mode, weighting)
    assert stats["loss_tokens"] == sum(r["n_loss"] for r in rows)


@pytest.mark.parametrize("wrapped", [False, True], ids=["plain", "wrapped"])
def test_padded_loss_rows_give_the_same_loss_and_gradients(setup, wrapped):
    """pad_rows_to pads the LM head's rows (plain) or its kept positions (wrapped) and drops their logits: the loss
    and every gradient are those of the unpadded call."""
    import torch

    class Wrapper(torch.nn.Module):  # what DDP / FSDP look like to masked_lm_loss: a module, the forward through it
        def __init__(self, model):
            super().__init__()
            self.module = model

        def forward(self, **kwargs):
            return self.module(**kwargs)

    tok, model, rows = setup
    batch = Collator(tok.pad_token_id, "padded")(rows)
    net = Wrapper(model) if wrapped else model
    results = []
    for pad_rows_to in (1, 64):
        model.zero_grad(set_to_none=True)
        loss, stats = masked_lm_loss(net, batch, "sequence_mean", pad_rows_to=pad_rows_to)
        loss.backward()
        results.append((loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}))
    model.zero_grad(set_to_none=True)
    (loss1, grads1), (loss64, grads64) = results
    assert torch.allclose(loss1, loss64, atol=1e-6) and grads1.keys() == grads64.keys() and grads1
    assert all(torch.allclose(grads1[n], grads64[n], atol=1e-6) for n in grads1)
    assert torch.allclose(loss1, _reference(model, rows, "sequence_mean"), atol=1e-4)


@pytest.mark.parametrize(
    ("n", "multiple", "expected"), [(0, 64, 0), (1, 64, 64), (64, 64, 64), (65, 64, 128), (37, 1, 37)]
)
def test_round_up(n, multiple, expected):
    assert round_up(n, multiple) == expected


def test_rounded_width_never_passes_max_length(setup):
    tok, _, rows = setup
    longest = max(r["length"] for r in rows)
    capped = Collator(tok.pad_token_id, "padded", max_length=longest + 1, pad_to_multiple_of=4096)(rows)
    assert capped["input_ids"].shape[1] == longest + 1
    fixed = Collator(tok.pad_token_id, "max_length", max_length=longest + 3, pad_to_multiple_of=64)(rows)
    assert fixed["input_ids"].shape[1] == longest + 3  # max_length mode: the width is fixed
    with pytest.raises(ValueError, match="pad_to_multiple_of"):
        Collator(tok.pad_token_id, "padded", pad_to_multiple_of=0)


def test_sequence_mean_weighs_each_trajectory_equally_across_micro_batches(setup):
    """Two micro-batches of an optimizer step, normalised by the step's units, add up to the whole-batch loss."""
    import torch

    tok, model, rows = setup
    collate = Collator(tok.pad_token_id, "padded")
    parts = [collate(rows[:1]), collate(rows[1:])]
    for weighting in ("sequence_mean", "token_mean"):
        units = count_units(parts, weighting)
        with torch.no_grad():
            total = sum(masked_lm_loss(model, b, weighting, denominator=units)[0] for b in parts)
        assert torch.allclose(total, _reference(model, rows, weighting), atol=1e-4)
    assert count_units(parts, "sequence_mean") == len(rows)


def test_padding_free_never_predicts_across_samples(setup):
    tok, _, rows = setup
    batch = Collator(tok.pad_token_id, "padding_free")(rows)
    starts = (batch["position_ids"][0] == 0).nonzero().flatten().tolist()
    assert len(starts) == len(rows) and batch["input_ids"].shape[0] == 1
    assert all(batch["labels"][0, s].item() == IGNORE for s in starts)


def test_grouped_sampler_is_a_deterministic_permutation_of_similar_lengths():
    lengths = [5, 100, 6, 99, 7, 98, 8, 97] * 4
    s = LengthGroupedSampler(lengths, batch_size=4, seed=1, mega=8)
    order = list(s)
    assert sorted(order) == list(range(len(lengths))) and order == list(s)
    batches = [order[i : i + 4] for i in range(0, len(order), 4)]
    assert all(max(lengths[i] for i in b) - min(lengths[i] for i in b) < 10 for b in batches)
    s.set_epoch(1)
    assert list(s) != order


def test_collator_refuses_overlong_and_unknown_modes(setup):
    tok, _, rows = setup
    with pytest.raises(ValueError, match="longer than max_length"):
        Collator(tok.pad_token_id, "max_length", max_length=10)(rows)
    with pytest.raises(ValueError, match="batching"):
        Collator(tok.pad_token_id, "bucket")


def test_right_padding_is_detected_and_other_masks_are_kept():
    import torch

    from venus_utils.sft.batching import right_padded

    assert right_padded(torch.tensor([[1, 1, 1], [1, 1, 0], [1, 0, 0]]))
    assert right_padded(None)
    assert not right_padded(torch.tensor([[0, 1, 1], [1, 1, 1]]))  # left padding needs the mask
    assert not right_padded(torch.tensor([[1, 0, 1]]))  # a hole in the middle too


def test_left_padded_batch_still_gives_the_reference_loss(setup):
    """A batch whose mask is not plain right padding keeps its mask (and its exact loss)."""
    import torch

    tok, model, rows = setup
    width = max(r["length"] for r in rows)
    pad = [width - r["length"] for r in rows]
    batch = {
        "input_ids": torch.tensor([[tok.pad_token_id] * p + r["input_ids"] for r, p in zip(rows, pad)]),
        "attention_mask": torch.tensor([[0] * p + [1] * r["length"] for r, p in zip(rows, pad)]),
        "position_ids": torch.tensor([[0] * p + list(range(r["length"])) for r, p in zip(rows, pad)]),
        "labels": torch.tensor([[IGNORE] * p + r["labels"] for r, p in zip(rows, pad)]),
    }
    with torch.no_grad():
        loss, _ = masked_lm_loss(model, batch, "sequence_mean")
        ref = _reference(model, rows, "sequence_mean")
    assert torch.allclose(loss, ref, atol=1e-4), (loss.item(), ref.item())
