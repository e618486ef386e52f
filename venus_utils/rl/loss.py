"""The IGPO policy loss: per-token advantages, PPO clipping, k3 KL to the reference, token-mean.

DR-Venus makes one update per batch, so the ratio is 1 and clipping never binds; the loss is then
``-A * log pi`` plus the KL term.  The clipped form is kept so that ``num_iterations > 1`` stays correct.
``normalizer`` is the number of loss tokens of the *whole* batch (all processes, all micro-batches), so the
per-shard losses add up to the full-batch token mean (tested).
"""

from __future__ import annotations

import torch


def k3_kl(logps: torch.Tensor, ref_logps: torch.Tensor) -> torch.Tensor:
    """verl's ``low_var_kl``: ``exp(ref - logp) - (ref - logp) - 1``, with the log-ratio and the result clamped."""
    log_ratio = torch.clamp(ref_logps - logps, -20.0, 20.0)
    return torch.clamp(torch.exp(log_ratio) - log_ratio - 1.0, -10.0, 10.0)


def policy_loss(
    logps: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    old_logps: torch.Tensor | None = None,
    ref_logps: torch.Tensor | None = None,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    dual_clip: float = 3.0,
    kl_coef: float = 0.001,
    normalizer: float | torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Loss over (B, T) tensors; ``mask`` is 1 on assistant (sampled) tokens only.

    Returns ``(loss, stats)``; ``stats`` holds sums over masked tokens (``pg``, ``kl``, ``clipped``, ``tokens``)
    so callers can aggregate them across shards.
    """
    mask = mask.to(logps.dtype)
    old = logps.detach() if old_logps is None else old_logps
    log_ratio = torch.clamp(logps - old, -20.0, 20.0)
    ratio = torch.exp(log_ratio)
    loss1 = -advantages * ratio
    loss2 = -advantages * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    clipped = torch.maximum(loss1, loss2)
    dual = torch.minimum(-advantages * dual_clip, clipped)
    pg = torch.where(advantages < 0, dual, clipped)
    per_token = pg
    kl = None
    if kl_coef and ref_logps is not None:
        kl = k3_kl(logps, ref_logps)
        per_token = per_token + kl_coef * kl
    denom = mask.sum().clamp(min=1.0) if normalizer is None else torch.as_tensor(normalizer, dtype=logps.dtype)
    loss = (per_token * mask).sum() / denom
    with torch.no_grad():
        stats = {
            "pg": (pg * mask).sum(),
            "kl": (kl * mask).sum() if kl is not None else torch.zeros((), dtype=logps.dtype),
            "clipped": ((loss2 > loss1).to(logps.dtype) * mask).sum(),
            "tokens": mask.sum(),
        }
    return loss, stats


def _packed_layout(attention_mask: torch.Tensor, prompt_len: int) -> bool:
    """True when every row is a left-padded prompt (zeros then ones) followed by a right-padded completion (ones
    then zeros): the trainer's layout, whose real tokens are contiguous."""
    left, right = attention_mask[:, :prompt_len], attention_mask[:, prompt_len:]
    return bool((left[:, 1:] >= left[:, :-1]).all()) and bool((right[:, 1:] <= right[:, :-1]).all())


def token_logprobs(
    model,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    logits_to_keep: int,
    *,
    temperature: float = 1.0,
    entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs (and optionally entropies) of the last ``logits_to_keep`` tokens of each row, shape (B, K).

    The trainer's rows are a left-padded prompt and a right-padded completion.  Their real tokens are moved to the
    front of the row first (padding only at the end), so the forward needs no attention mask (in a causal model a
    real token never sees the padding after it): it runs SDPA's causal kernel, with the positions the rollout was
    generated at (0, 1, ... in every row); the logits are taken where each completion token is predicted.  Any other
    layout runs as it is, with its mask.  (``bench_rollout`` measured no speed gain at the cpu world's ~600-token
    episodes; the exact positions are the reason it stays.)"""
    k = logits_to_keep
    width = input_ids.size(1)
    mask = attention_mask.bool()
    if k < 1 or k >= width or not _packed_layout(attention_mask, width - k):
        out = model(input_ids=input_ids, attention_mask=attention_mask, logits_to_keep=k + 1)
        logits = out.logits[:, :-1, :]  # logits[:, j] predicts token (L - K + j)
    else:
        order = torch.argsort((~mask).to(torch.int8), dim=1, stable=True)  # real tokens first, in their order
        packed = input_ids.gather(1, order)
        real_prompt = mask[:, : width - k].sum(1)
        where = real_prompt[:, None] - 1 + torch.arange(k, device=input_ids.device)[None, :]  # predicts column j
        cols = torch.unique(where)
        out = model(input_ids=packed, logits_to_keep=cols)
        index = torch.searchsorted(cols, where)
        logits = out.logits.gather(1, index[..., None].expand(-1, -1, out.logits.size(-1)))
    logits = logits.float() / temperature
    targets = input_ids[:, -k:]
    logp_all = torch.log_softmax(logits, dim=-1)
    logps = logp_all.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    ent = None
    if entropy:
        with torch.no_grad():
            ent = -(logp_all.exp() * logp_all).sum(-1)
    return logps, ent
