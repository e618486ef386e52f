"""The IGPO policy loss: clipping by hand, k3 KL, assistant-only mask, token mean, sharding."""

from __future__ import annotations

import math

import pytest
import torch

from venus_utils.rl.loss import k3_kl, policy_loss, token_logprobs


def test_k3_by_hand():
    logp, ref = torch.tensor([math.log(0.5)]), torch.tensor([math.log(0.25)])
    assert k3_kl(logp, ref).item() == pytest.approx(0.5 - math.log(0.5) - 1.0)
    assert k3_kl(logp, logp).item() == 0.0


def test_on_policy_loss_is_minus_advantage_plus_kl():
    logps = torch.tensor([[-1.0, -2.0, -0.5]], requires_grad=True)
    ref = torch.tensor([[-1.5, -2.0, -0.2]])
    adv = torch.tensor([[2.0, 2.0, -1.0]])
    mask = torch.tensor([[1, 0, 1]])
    loss, stats = policy_loss(logps, adv, mask, ref_logps=ref, kl_coef=0.001)
    kl = k3_kl(logps.detach(), ref)
    expected = (-2.0 + 1.0 + 0.001 * (kl[0, 0] + kl[0, 2])) / 2  # ratio 1: -A per token, token mean over the mask
    assert loss.item() == pytest.approx(expected.item())
    loss.backward()
    assert logps.grad[0, 1] == 0.0  # masked tokens get no gradient
    assert logps.grad[0, 0].item() == pytest.approx((-2.0 + 0.001 * (1 - math.exp(-0.5))) / 2, rel=1e-5)
    assert stats["tokens"].item() == 2


def test_ppo_clipping_and_dual_clip_by_hand():
    old = torch.zeros(1, 4)
    logps = torch.log(torch.tensor([[1.5, 0.5, 4.0, 1.1]]))
    adv = torch.tensor([[1.0, -1.0, -1.0, 1.0]])
    loss, stats = policy_loss(logps, adv, torch.ones(1, 4), old_logps=old, kl_coef=0.0)
    # ratio 1.5, A=+1 -> -1.2 (clipped); ratio 0.5, A=-1 -> max(0.5, 0.8) = 0.8; ratio 4, A=-1 -> min(3, 4) = 3
    # ratio 1.1, A=+1 -> -1.1 (inside the clip range)
    assert loss.item() == pytest.approx((-1.2 + 0.8 + 3.0 - 1.1) / 4, rel=1e-6)
    assert stats["clipped"].item() == 2  # the 1.5 and 0.5 ratios (the dual clip is counted separately)


def test_sharded_batch_adds_up_to_the_full_loss():
    """Per-token losses normalised by the batch-wide token count: splitting the batch over processes or
    micro-batches changes neither the loss nor its gradient."""
    g = torch.Generator().manual_seed(0)
    logps = (-torch.rand(4, 7, generator=g)).requires_grad_()
    ref, adv = -torch.rand(4, 7, generator=g), torch.randn(4, 7, generator=g)
    mask = (torch.rand(4, 7, generator=g) > 0.3).int()
    full, _ = policy_loss(logps, adv, mask, ref_logps=ref)
    (full_grad,) = torch.autograd.grad(full, logps)
    n = mask.sum()
    parts = [
        policy_loss(logps[s], adv[s], mask[s], ref_logps=ref[s], normalizer=n)[0] for s in (slice(0, 1), slice(1, 4))
    ]
    total = parts[0] + parts[1]
    (shard_grad,) = torch.autograd.grad(total, logps)
    assert total.item() == pytest.approx(full.item(), rel=1e-6)
    assert torch.allclose(full_grad, shard_grad)


def test_token_logprobs_match_a_full_forward(tiny_lm):
    model, tok = tiny_lm
    ids = torch.randint(0, len(tok), (2, 12), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    logps, ent = token_logprobs(model, ids, mask, 5, entropy=True)
    with torch.no_grad():
        full = torch.log_softmax(model(input_ids=ids).logits, -1)
    expected = full[:, 6:11].gather(-1, ids[:, 7:12, None]).squeeze(-1)
    assert torch.allclose(logps, expected, atol=1e-5)
    assert ent.shape == (2, 5) and (ent > 0).all()


def test_token_logprobs_of_padded_rows_equal_each_row_alone(tiny_lm):
    """The trainer's layout (left-padded prompts, right-padded completions) is packed to the front of each row and
    run without a mask: every real completion token's log-prob equals the row's own unpadded forward."""
    model, tok = tiny_lm
    g = torch.Generator().manual_seed(1)
    pad = tok.pad_token_id or 0
    prompts = [torch.randint(3, len(tok), (n,), generator=g) for n in (7, 3, 5)]
    completions = [torch.randint(3, len(tok), (n,), generator=g) for n in (4, 6, 1)]
    p_w, c_w = max(map(len, prompts)), max(map(len, completions))
    ids = torch.full((3, p_w + c_w), pad)
    mask = torch.zeros_like(ids)
    for i, (p, c) in enumerate(zip(prompts, completions)):
        ids[i, p_w - len(p) : p_w], ids[i, p_w : p_w + len(c)] = p, c
        mask[i, p_w - len(p) : p_w + len(c)] = 1
    logps, ent = token_logprobs(model, ids, mask, c_w, temperature=0.7, entropy=True)
    assert logps.shape == ent.shape == (3, c_w)
    with torch.no_grad():
        for i, (p, c) in enumerate(zip(prompts, completions)):
            row = torch.cat([p, c])[None]
            alone = torch.log_softmax(model(input_ids=row).logits[0].float() / 0.7, -1)
            want = alone[len(p) - 1 : -1].gather(-1, c[:, None]).squeeze(-1)
            assert torch.allclose(logps[i, : len(c)], want, atol=1e-5), i
    # the same rows with the mask applied as it is (the path any other layout takes) agree within rounding
    holey = mask.clone()
    holey[0, p_w] = 0  # not the trainer's layout: runs with its mask
    with torch.no_grad():
        masked = model(input_ids=ids, attention_mask=holey, logits_to_keep=c_w + 1).logits[:, :-1].float()
    other, _ = token_logprobs(model, ids, holey, c_w)
    want = torch.log_softmax(masked, -1).gather(-1, ids[:, -c_w:, None]).squeeze(-1)
    assert torch.allclose(other, want, atol=1e-6)
