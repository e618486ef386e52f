"""Information gain: how much each turn raised the policy's belief in the ground-truth answer.

At a turn boundary (the context right before an assistant turn, ending with its generation prompt) we append
the fixed pseudo answer ``Now there's enough information to answer\\n</think>\\n<answer>\\n{GT}\\n</answer><|im_end|>``
and read the policy's mean log-probability of the ground-truth tokens only (the "GT span": pseudo tokens whose
character span overlaps the GT).  ``v_0`` (system + question) is the baseline; the turn that led to boundary
``s`` earns ``IG = v_s - v_prev`` (``log_prob_diff``, DR-Venus) or ``exp(v_s) - exp(v_prev)`` (``prob_diff``,
the IGPO paper), ``v_prev`` being the last *kept* boundary (DR-Venus's ``ig_tool_filter``: with ``visit``, only
boundaries after a visit turn are scored).

Three ways to compute the values, equal up to float error (tested):

- :func:`boundary_values_naive`: one forward per boundary over ``context + pseudo``;
- :func:`boundary_values_kv`: one forward over the trajectory that fills a KV cache, then per boundary
  (last first) crop the cache back to ``b - 1`` tokens and feed ``[token b-1] + pseudo`` (DR-Venus's
  ``compute_ig_with_kv_cache``);
- :func:`boundary_values_batched`: the KV method for many trajectories at once (an RL step's episodes): every
  trajectory's cache is filled (copied from the rollouts' decoder where it kept them, else encoded), then one
  forward scores every boundary of every trajectory, the probes of a trajectory side by side over its one cache
  (models :mod:`venus_utils.modeling.kv_decode` runs; the trainer's default).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..core.protocol import split_aliases
from .config import PSEUDO_ANSWER


def ground_truth_text(ground_truth) -> str | None:
    """The text scored by IG: the first ``<|answer_split|>`` alias, stripped; None when there is none.

    A list (or array) of aliases gives its first non-empty element.
    """
    if ground_truth is None:
        return None
    if not isinstance(ground_truth, str) and hasattr(ground_truth, "__iter__"):
        items = [str(x).strip() for x in ground_truth if str(x).strip()]
        return split_aliases(items[0])[0] if items else None
    aliases = split_aliases(str(ground_truth))
    return aliases[0] if aliases else None


@dataclass
class PseudoAnswer:
    """The tokenised pseudo answer and where the ground truth sits in it."""

    text: str
    ids: list[int]
    gt_index: list[int]  # indices into ids of the GT-span tokens (sorted, contiguous in practice)


def pseudo_answer(tokenizer, gt: str, template: str = PSEUDO_ANSWER) -> PseudoAnswer:
    """Tokenise ``template`` with ``{gt}`` filled in and locate the GT span by character offsets."""
    if "{gt}" not in template:
        raise ValueError("the pseudo-answer template must contain {gt}")
    if not gt:
        raise ValueError("empty ground truth: IG needs an answer to score")
    head, tail = template.split("{gt}", 1)
    text = head + gt + tail
    start, end = len(head), len(head) + len(gt)
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids, offsets = list(enc["input_ids"]), enc["offset_mapping"]
    gt_index = [k for k, (a, b) in enumerate(offsets) if a < end and b > start]
    if not gt_index:
        raise ValueError(f"no pseudo-answer token overlaps the ground truth {gt!r}")
    return PseudoAnswer(text=text, ids=ids, gt_index=gt_index)


def _gt_mean_logprob(logits, targets: Sequence[int], gt_index: Sequence[int], temperature: float) -> float:
    """Mean log-prob of ``targets[k]`` for k in gt_index, where ``logits[k]`` predicts ``targets[k]``."""
    import torch

    rows = torch.as_tensor(list(gt_index), device=logits.device)
    tok = torch.as_tensor([targets[k] for k in gt_index], device=logits.device)
    logp = torch.log_softmax(logits[rows].float() / temperature, dim=-1)
    return logp.gather(1, tok[:, None]).mean().item()


def boundary_values_naive(
    model, input_ids: Sequence[int], boundaries: Sequence[int], pseudo: PseudoAnswer, *, temperature: float = 1.0
) -> list[float]:
    """Reference implementation: one full forward over ``input_ids[:b] + pseudo`` per boundary ``b``."""
    import torch

    values = []
    n_keep = max(pseudo.gt_index) + 1  # pseudo tokens after the GT are not needed
    with torch.no_grad():
        for b in boundaries:
            _check_boundary(b, len(input_ids))
            ids = list(input_ids[:b]) + pseudo.ids[:n_keep]
            x = torch.tensor([ids], device=model.device)
            logits = model(input_ids=x).logits[0, b - 1 : b - 1 + n_keep]  # logits[k] predicts pseudo.ids[k]
            values.append(_gt_mean_logprob(logits, pseudo.ids, pseudo.gt_index, temperature))
    return values


def _check_boundary(b: int, n: int) -> None:
    if not 1 <= b <= n:
        raise ValueError(f"turn boundary {b} is outside the trajectory (1..{n} tokens)")


def _crop(cache, length: int) -> None:
    """Keep the first ``length`` positions of a DynamicCache (negative crop works on transformers 4.x and 5.x)."""
    extra = cache.get_seq_length() - length
    if extra > 0:
        cache.crop(-extra)


def _cache_kw(model) -> str:
    """The forward's name for the KV cache: ``cache`` (transformers >= 5.20) or ``past_key_values``."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "cache" if "cache" in inspect.signature(type(base).forward).parameters else "past_key_values"


def boundary_values_kv(
    model,
    input_ids: Sequence[int],
    boundaries: Sequence[int],
    pseudo: PseudoAnswer,
    *,
    temperature: float = 1.0,
    chunk_size: int = 8192,
) -> list[float]:
    """KV-cache implementation: one chunked forward, then one short forward per boundary."""
    import torch
    from transformers import DynamicCache

    if not boundaries:
        return []
    for b in boundaries:
        _check_boundary(b, len(input_ids))
    n_keep = max(pseudo.gt_index) + 1
    ids = torch.tensor([list(input_ids)], device=model.device)
    last = max(boundaries) - 1  # the cache needs the tokens before the last boundary's final token only
    cache = DynamicCache()
    kw = _cache_kw(model)
    values: dict[int, float] = {}
    with torch.no_grad():
        for start in range(0, last, max(1, chunk_size)):  # phase 1: fill the cache, no logits needed
            stop = min(start + chunk_size, last)
            model(input_ids=ids[:, start:stop], use_cache=True, logits_to_keep=1, **{kw: cache})
        pseudo_in = torch.tensor([pseudo.ids[: n_keep - 1]], device=model.device, dtype=ids.dtype)
        for b in sorted(set(boundaries), reverse=True):  # phase 2: last boundary first, so crops only shrink
            _crop(cache, b - 1)
            x = torch.cat([ids[:, b - 1 : b], pseudo_in], dim=1)
            logits = model(input_ids=x, use_cache=True, **{kw: cache}).logits[0]
            values[b] = _gt_mean_logprob(logits, pseudo.ids, pseudo.gt_index, temperature)
    return [values[b] for b in boundaries]


def boundary_values_batched(
    model,
    items: Sequence[tuple[Sequence[int], Sequence[int], PseudoAnswer]],
    *,
    temperature: float = 1.0,
    max_rows: int = 64,
    decoder=None,
) -> list[list[float]]:
    """:func:`boundary_values_kv` for many ``(input_ids, boundaries, pseudo)`` items at once, at most ``max_rows``
    trajectories per forward.  The model must be one that :func:`venus_utils.modeling.kv_decode.supports`.

    Per group of trajectories of similar length: each trajectory's cache is filled with its tokens
    (:meth:`~venus_utils.modeling.kv_decode.KVDecoder.encode`: with ``decoder``, the :class:`KVDecoder` that
    generated the trajectories on this ``model``, the keys and values it kept are copied in instead of encoded
    again); then one forward runs every boundary's probe (``[token b-1] + pseudo``) of every trajectory at once, the
    probes of a trajectory side by side in its row, written after its tokens, each at its own positions and seeing
    only the cached columns before its boundary and its own earlier tokens (:func:`_probe_mask`).  A trajectory's
    cache is read once for all its boundaries and never copied per boundary."""
    import torch

    from ..modeling.kv_decode import KVDecoder

    dec = decoder if decoder is not None and decoder.model is model else KVDecoder(model)
    device = next(model.parameters()).device
    for ids, points, _ in items:
        for b in points:
            _check_boundary(b, len(ids))
    # a trajectory whose probes alone pass the budget is scored in pieces of its boundaries (each piece its own row)
    pieces = _probe_pieces(items, model.config.vocab_size)
    values: dict[int, list[float]] = {}
    live = sorted(range(len(pieces)), key=lambda k: max(pieces[k][1]))
    with torch.no_grad():
        for group in _probe_groups(pieces, live, max_rows, model.config.vocab_size):
            prefix = [max(pieces[k][1]) - 1 for k in group]  # cached tokens needed by the last boundary
            width = max(max(prefix), 1)
            n_keep = max(max(pieces[k][2].gt_index) + 1 for k in group)
            probes = n_keep * max(len(pieces[k][1]) for k in group)
            caches = dec.encode([list(pieces[k][0][:n]) for k, n in zip(group, prefix)], extra=probes + 1)
            x = torch.zeros(len(group), probes, dtype=torch.long)
            pos = torch.zeros(len(group), probes, dtype=torch.long)
            for i, k in enumerate(group):
                seq, points, pseudo, _ = pieces[k]
                for j, b in enumerate(points):
                    feed = [seq[b - 1]] + pseudo.ids[: max(pseudo.gt_index)]
                    x[i, j * n_keep : j * n_keep + len(feed)] = torch.tensor(feed, dtype=torch.long)
                    pos[i, j * n_keep : (j + 1) * n_keep] = torch.arange(b - 1, b - 1 + n_keep)
            bias = _probe_mask([pieces[k][1] for k in group], width, n_keep, probes)
            columns = (width + torch.arange(probes))[None, :].expand(len(group), probes)
            logits = dec.forward(
                x.to(device),
                pos.to(device),
                caches,
                torch.full((len(group),), width + probes, device=device),
                "all",
                columns=columns.to(device),
                bias=bias.to(device=device, dtype=caches[0][0].dtype),
            )
            for i, k in enumerate(group):
                pseudo = pieces[k][2]
                values[k] = [
                    _gt_mean_logprob(
                        logits[i, j * n_keep : (j + 1) * n_keep], pseudo.ids, pseudo.gt_index, temperature
                    )
                    for j in range(len(pieces[k][1]))
                ]
    out: list[list[float]] = [[] for _ in items]
    for k, (_, _, _, item) in enumerate(pieces):  # pieces in the order of their items' boundaries
        out[item].extend(values[k])
    return out


#: the probe forward's additive mask and logits (rows x probe tokens x (columns + vocabulary), float32) stay under
#: this size: a group of trajectories is cut short before it, and a trajectory whose probes alone pass it is scored
#: in pieces of its boundaries (:func:`_probe_pieces`)
PROBE_MASK_BYTES = 256 << 20


def _probe_bytes(rows: int, width: int, n_keep: int, n_points: int, vocab: int) -> int:
    """Bytes of a probe forward's mask and logits: ``rows`` x probe tokens x (cached + probe columns + vocabulary)."""
    probes = n_keep * n_points
    return 4 * rows * probes * (width + probes + vocab)


def _probe_pieces(items, vocab: int) -> list[tuple[Sequence[int], list[int], PseudoAnswer, int]]:
    """``(input_ids, boundaries, pseudo, item index)`` per item with boundaries, the boundaries of an item whose
    probes alone pass :data:`PROBE_MASK_BYTES` cut into consecutive pieces that fit (one boundary at least): its
    probes are independent, so the pieces give the same values."""
    pieces = []
    for k, (ids, points, pseudo) in enumerate(items):
        if not points:
            continue
        n_keep, width = max(pseudo.gt_index) + 1, max(points) - 1
        per = len(points)
        while per > 1 and _probe_bytes(1, width, n_keep, per, vocab) > PROBE_MASK_BYTES:
            per = (per + 1) // 2
        points = list(points)
        pieces += [(ids, points[i : i + per], pseudo, k) for i in range(0, len(points), per)]
    return pieces


def _probe_groups(pieces, live: list[int], max_rows: int, vocab: int):
    """Consecutive groups of at most ``max_rows`` of the ``live`` pieces whose probe forward fits
    :data:`PROBE_MASK_BYTES` (:func:`_probe_bytes`, padded as the forward pads them)."""
    group: list[int] = []
    shape = (0, 0, 0)  # the group's longest cache, longest pseudo answer, most boundaries
    for k in live:
        _, points, pseudo, _ = pieces[k]
        mine = (max(points) - 1, max(pseudo.gt_index) + 1, len(points))
        grown = tuple(max(a, b) for a, b in zip(shape, mine))
        if group and (
            len(group) >= max(1, max_rows) or _probe_bytes(len(group) + 1, *grown, vocab) > PROBE_MASK_BYTES
        ):
            yield group
            group, grown = [], mine
        group.append(k)
        shape = grown
    if group:
        yield group


def _probe_mask(points: Sequence[Sequence[int]], width: int, n_keep: int, probes: int):
    """The additive mask (rows, 1, probes, width + probes) of :func:`boundary_values_batched`'s probe forward:
    query ``m`` of probe ``j`` (boundary ``b``) sees the cached columns before ``b - 1`` and its own probe's
    columns up to ``m``, nothing of the other probes; a padding query sees only itself."""
    import torch

    q = torch.arange(probes)
    same_probe = (q[None, :] // n_keep == q[:, None] // n_keep) & (q[None, :] % n_keep <= q[:, None] % n_keep)
    limit = torch.zeros(len(points), probes, dtype=torch.long)
    real = torch.zeros(len(points), probes, dtype=torch.bool)
    for i, bs in enumerate(points):
        for j, b in enumerate(bs):
            limit[i, j * n_keep : (j + 1) * n_keep] = b - 1
            real[i, j * n_keep : (j + 1) * n_keep] = True
    cached = torch.arange(width)[None, None, :] < limit[:, :, None]  # (rows, probes, width)
    own = same_probe[None, :, :] & (real[:, :, None] | torch.eye(probes, dtype=torch.bool)[None])
    visible = torch.cat([cached, own.expand(len(points), -1, -1)], dim=2)
    return torch.zeros(visible.shape).masked_fill(~visible, float("-inf")).unsqueeze(1)


# --- from values to turn rewards ------------------------------------------------------------------------------


def tool_passes(tool_name: str | None, tool_filter: str | None) -> bool:
    """Whether a turn that called ``tool_name`` gets an IG boundary; ``None``/"all" keeps every turn."""
    if tool_filter is None or str(tool_filter).strip().lower() in ("", "all", "none"):
        return True
    allowed = {t.strip() for t in str(tool_filter).split(",") if t.strip()}
    return tool_name in allowed


def kept_boundaries(num_boundaries: int, tool_names: Sequence[str | None], tool_filter: str | None) -> list[int]:
    """Indices of the boundaries to score: 0 (the baseline) and every s >= 1 whose turn s-1 passes the filter."""
    if len(tool_names) < num_boundaries - 1:
        raise ValueError(f"{num_boundaries} boundaries need >= {num_boundaries - 1} tool names, got {len(tool_names)}")
    return [0] + [s for s in range(1, num_boundaries) if tool_passes(tool_names[s - 1], tool_filter)]


def turn_info_gains(values: Sequence[float | None], info_gain_type: str = "log_prob_diff") -> list[float | None]:
    """IG for turns 0..S-2 from the values at boundaries 0..S-1 (None = boundary not scored).

    ``prob_diff`` differences ``exp(v)``.  A NaN/inf value gives IG 0.0 and leaves the running value alone;
    an invalid baseline gives no IG at all (every entry None).
    """
    if info_gain_type not in ("log_prob_diff", "prob_diff"):
        raise ValueError(f"unknown info_gain_type {info_gain_type!r}")
    gains: list[float | None] = [None] * max(0, len(values) - 1)
    base = values[0] if values else None
    if base is None or not math.isfinite(base):
        return gains
    f = math.exp if info_gain_type == "prob_diff" else float
    prev = f(base)
    for s in range(1, len(values)):
        v = values[s]
        if v is None:
            continue
        if not math.isfinite(v):
            gains[s - 1] = 0.0
            continue
        cur = f(v)
        gains[s - 1] = cur - prev
        prev = cur
    return gains


@dataclass
class InfoGainResult:
    values: list[float | None]  # per boundary (None: filtered out)
    gains: list[float | None]  # per non-final turn (None: no IG for that turn)
    gt: str | None = None
    kept: list[int] = field(default_factory=list)


#: the batched IG holds a cache per trajectory of its group (:func:`boundary_values_batched`): past this size per
#: trajectory (long web trajectories of a billions-parameter model) the per-trajectory KV method, which crops one
#: cache in place, is used instead
BATCHED_ROW_BYTES = 64 << 20


def batched_fits(model, tokens: int) -> bool:
    """Whether :func:`compute_info_gains` scores trajectories of up to ``tokens`` tokens on ``model`` batched (and so
    reads the keys and values a rollout's decoder kept), not one at a time."""
    from ..modeling.kv_decode import supports

    return supports(model) and _row_bytes(model, tokens) <= BATCHED_ROW_BYTES


def _row_bytes(model, tokens: int) -> int:
    cfg = model.config
    kv = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    size = next(model.parameters()).element_size()
    return 2 * cfg.num_hidden_layers * kv * head_dim * (tokens + 64) * size


def _plan(tokenizer, ground_truth, n: int, tool_names, tool_filter, template):
    """``(gt, pseudo answer, kept boundary indices)`` of one trajectory; no pseudo answer when there is nothing
    to score (no ground truth, no boundary)."""
    gt = ground_truth_text(ground_truth)
    if gt is None or n == 0:
        return gt, None, []
    return gt, pseudo_answer(tokenizer, gt, template), kept_boundaries(n, tool_names, tool_filter)


def _result(gt, n: int, kept: list[int], scored: Sequence[float], info_gain_type: str) -> InfoGainResult:
    """The values scored at the ``kept`` boundaries placed among ``n`` boundaries, and their gains."""
    if gt is None or n == 0:
        return InfoGainResult(values=[None] * n, gains=[None] * max(0, n - 1), gt=gt)
    values: list[float | None] = [None] * n
    for s, v in zip(kept, scored):
        values[s] = v
    return InfoGainResult(values=values, gains=turn_info_gains(values, info_gain_type), gt=gt, kept=kept)


def compute_info_gains(
    model,
    tokenizer,
    trajectories: Sequence[dict],
    *,
    info_gain_type: str = "log_prob_diff",
    tool_filter: str | None = "visit",
    template: str = PSEUDO_ANSWER,
    temperature: float = 1.0,
    chunk_size: int = 8192,
    decoder=None,
) -> list[InfoGainResult]:
    """:func:`compute_info_gain` for many trajectories (dicts with ``input_ids``, ``boundaries``, ``tool_names``,
    ``ground_truth``): batched (:func:`boundary_values_batched`, reading ``decoder``'s kept caches where it has
    them) when the model allows it, else one at a time."""
    kw = dict(info_gain_type=info_gain_type, tool_filter=tool_filter, template=template, temperature=temperature)
    if not batched_fits(model, max((len(t["input_ids"]) for t in trajectories), default=0)):
        return [compute_info_gain(model, tokenizer, **t, chunk_size=chunk_size, **kw) for t in trajectories]
    plans = [
        _plan(tokenizer, t["ground_truth"], len(t["boundaries"]), t["tool_names"], tool_filter, template)
        for t in trajectories
    ]
    items = [
        (t["input_ids"], [t["boundaries"][s] for s in kept], pseudo)
        for t, (_, pseudo, kept) in zip(trajectories, plans)
    ]
    was_training = model.training
    model.eval()
    try:
        scored = boundary_values_batched(model, items, temperature=temperature, decoder=decoder)
    finally:
        model.train(was_training)
    return [
        _result(gt, len(t["boundaries"]), kept, got, info_gain_type)
        for t, (gt, _, kept), got in zip(trajectories, plans, scored)
    ]


def compute_info_gain(
    model,
    tokenizer,
    input_ids: Sequence[int],
    boundaries: Sequence[int],
    tool_names: Sequence[str | None],
    ground_truth,
    *,
    info_gain_type: str = "log_prob_diff",
    tool_filter: str | None = "visit",
    template: str = PSEUDO_ANSWER,
    temperature: float = 1.0,
    chunk_size: int = 8192,
    method: str = "kv",
) -> InfoGainResult:
    """Per-turn IG of one trajectory.

    ``input_ids`` are the exact tokens of the whole episode (prompt + completion); ``boundaries[s]`` is the
    context length right before assistant turn ``s`` (so ``boundaries[0]`` is the prompt length);
    ``tool_names[s]`` is the tool that turn ``s`` called (None when it called none).  The model must be the
    policy that sampled the trajectory; it is switched to eval mode for the call and restored afterwards.
    """
    n = len(boundaries)
    gt, pseudo, kept = _plan(tokenizer, ground_truth, n, tool_names, tool_filter, template)
    if pseudo is None:
        return _result(gt, n, kept, [], info_gain_type)
    points = [boundaries[s] for s in kept]
    was_training = model.training
    model.eval()
    try:
        if method == "kv":
            scored = boundary_values_kv(
                model, input_ids, points, pseudo, temperature=temperature, chunk_size=chunk_size
            )
        elif method == "naive":
            scored = boundary_values_naive(model, input_ids, points, pseudo, temperature=temperature)
        else:
            raise ValueError(f"unknown IG method {method!r} (kv | naive)")
    finally:
        model.train(was_training)
    return _result(gt, n, kept, scored, info_gain_type)
