"""Fast local generation for the agent loop: a rollout's KV cache kept across turns, many rollouts decoded at once.

The agent's context only grows: turn *k+1*'s prompt is turn *k*'s prompt, the tokens it sampled, and the tool
response glued on.  ``model.generate`` re-encodes that whole context at every turn and keeps a cache that is copied
at every token.  :class:`KVDecoder` does what vLLM does with prefix caching, in plain torch for a local Qwen3-style
model (the tiny offline model, or any unwrapped Qwen3 / Llama-shaped causal LM without sliding windows):

    prompt ids of each request
      -> the longest cached prefix (the KV of an earlier turn of the same rollout) is reused
      -> only the new tokens are encoded, each request at its own positions (on the CPU in groups of requests of
         similar length, each group one forward padded to its own longest new part)
      -> one decode loop for the whole batch over a preallocated cache, each row writing at its own position,
         rows leave the batch when they stop
      -> each row's KV (context + sampled tokens) is kept for its next turn

Attention, norms, projections and rotary embeddings are the model's own modules, so greedy answers equal
``generate``'s (tested on fixed questions); only the cache layout and the loop differ.  The cache is keyed by token
ids and dropped whenever a weight of the model changes (``Tensor._version``), so an RL step's optimizer update
never serves stale keys.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

_SUPPORTED = ("qwen3", "qwen2", "llama")


def supports(model: Any) -> bool:
    """True when :class:`KVDecoder` can run ``model`` exactly: a plain (not adapter-wrapped) Qwen3 / Qwen2 / Llama
    causal LM with default rotary embeddings and full attention in every layer."""
    cfg = getattr(model, "config", None)
    inner = getattr(model, "model", None)
    if cfg is None or inner is None or getattr(cfg, "model_type", None) not in _SUPPORTED:
        return False
    if getattr(cfg, "use_sliding_window", False):
        return False
    if any(kind != "full_attention" for kind in getattr(cfg, "layer_types", None) or ()):
        return False
    rope = getattr(cfg, "rope_parameters", None) or getattr(cfg, "rope_scaling", None) or {}
    if (rope.get("rope_type") or rope.get("type") or "default") != "default":
        return False
    layers = getattr(inner, "layers", None)
    if not layers or not hasattr(inner, "rotary_emb") or not hasattr(model, "lm_head"):
        return False
    attn = layers[0].self_attn
    linears = (attn.q_proj, attn.k_proj, attn.v_proj, attn.o_proj)
    return all(type(m) is torch.nn.Linear for m in linears)  # LoRA / quantised layers: use generate


@dataclass
class _Entry:
    ids: np.ndarray  # the tokens whose keys and values are stored
    kv: list[tuple[torch.Tensor, torch.Tensor]]  # per layer: (kv_heads, len, head_dim)


def _common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    n = min(len(a), len(b))
    if n == 0:
        return 0
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if len(diff) else n


def warp_logits(logits: torch.Tensor, temperature: float, top_p: float, top_k: int | None) -> torch.Tensor:
    """transformers' sampling warpers in their order: temperature, top-k, top-p (at least one token kept)."""
    logits = logits / temperature
    if top_k and 0 < top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and top_p < 1.0:
        ordered, order = torch.sort(logits, descending=False, dim=-1)
        drop = ordered.softmax(-1).cumsum(-1) <= 1 - top_p
        drop[..., -1] = False
        logits = logits.masked_fill(drop.scatter(-1, order, drop), float("-inf"))
    return logits


def select_next(logits: torch.Tensor, temperature: float, top_p: float, top_k: int | None) -> torch.Tensor:
    """Next tokens from ``logits`` (rows, vocab): argmax when ``temperature`` is 0, else sampled from
    :func:`warp_logits`."""
    if temperature <= 0:
        return logits.argmax(-1)
    probs = warp_logits(logits, temperature, top_p, top_k).softmax(-1)
    return torch.multinomial(probs, 1).squeeze(-1)


class KVDecoder:
    """Batched generation with per-rollout prefix caching over a model's own layers (see the module text).

    ``max_entries``: cached contexts kept (an entry is taken by the request that extends it; the oldest go first).
    :meth:`generate` runs one call at a time; sampling draws from torch's global generator (the backend seeds it).
    """

    def __init__(self, model: Any, pad_id: int = 0, max_entries: int = 64):
        if not supports(model):
            raise ValueError(f"{type(model).__name__}: not a plain Qwen3/Qwen2/Llama causal LM")
        self.model, self.pad_id, self.max_entries = model, pad_id, max_entries
        cfg = model.config
        self.n_layers = cfg.num_hidden_layers
        self.n_heads = cfg.num_attention_heads
        self.n_kv = getattr(cfg, "num_key_value_heads", None) or self.n_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // self.n_heads
        self._entries: list[_Entry] = []
        self._weights_version: tuple | None = None
        self.stats = {"requests": 0, "prompt_tokens": 0, "reused_tokens": 0, "encoded_tokens": 0, "decode_steps": 0}
        self._lock = threading.Lock()

    # ---- prefix cache ------------------------------------------------------------------------------------
    def _version(self) -> tuple:
        return tuple(p._version for p in self.model.parameters())

    def clear(self) -> None:
        """Drop every kept cache (after a change of the weights that does not bump their ``_version``: a load
        through ``.data``, an optimizer writing raw memory)."""
        with self._lock:
            self._entries = []

    def _take(self, prompt: np.ndarray) -> _Entry | None:
        """The longest cached prefix of ``prompt``.  An entry that ``prompt`` extends whole is removed (its rollout
        moves on and stores a longer one); one it shares only a prefix with (another rollout's, sharing the system
        prompt) stays for its own rollout's next turn."""
        best, best_len = None, 0
        for i, e in enumerate(self._entries):
            if len(e.ids) and e.ids[0] == prompt[0]:
                n = _common_prefix(e.ids, prompt)
                if n > best_len:
                    best, best_len = i, n
        if best is None:
            return None
        entry = self._entries[best]
        if best_len == len(entry.ids):
            del self._entries[best]
        n = min(best_len, len(prompt) - 1)  # at least one token is encoded: its logits start the turn
        if n <= 0:
            return None
        return _Entry(prompt[:n], [(k[:, :n], v[:, :n]) for k, v in entry.kv])

    def _keep(self, entry: _Entry) -> None:
        self._entries.append(entry)
        if len(self._entries) > self.max_entries:
            del self._entries[: len(self._entries) - self.max_entries]

    # ---- the model's layers over a per-row cache ---------------------------------------------------------
    def new_caches(self, rows: int, capacity: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Empty per-layer (keys, values) of ``rows`` x ``capacity`` positions for :meth:`forward`."""
        p = self.model.model.embed_tokens.weight
        shape = (rows, self.n_kv, capacity, self.head_dim)
        return [
            (torch.zeros(shape, dtype=p.dtype, device=p.device), torch.zeros(shape, dtype=p.dtype, device=p.device))
            for _ in range(self.n_layers)
        ]

    def forward(self, ids, positions, caches, lengths_after, logits_at=None, *, columns=None, bias=None):
        """Run ``ids`` (B, T) at ``positions`` (B, T); write their keys/values into ``caches`` at those positions
        and attend, per row, to every cached column up to the query's own position (what a row wrote earlier at
        lower positions is its context).  ``lengths_after``: per row, the columns in use after the call.  Returns
        the logits (float) of ``logits_at`` = (row indices, time indices), of every position with ``"all"``
        (B, T, V), or of the last column (B, V).

        ``columns`` (B, T) writes the keys/values elsewhere than at their positions, and ``bias`` (B, 1, T, width),
        an additive mask, says which columns each query sees instead: the information gain's probes use both to
        attend to a shared trajectory cache they do not overwrite."""
        inner = self.model.model
        hidden = inner.embed_tokens(ids)
        cos, sin = inner.rotary_emb(hidden, positions)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        b, t = ids.shape
        width = int(lengths_after.max())
        # rows that all start at position 0 (a first turn, a trajectory's prefill) attend only to what they write:
        # plain causal attention over the new keys, no (B, T, width) mask (SDPA's fused causal kernel)
        fresh = t > 1 and bias is None and columns is None and bool((positions[:, 0] == 0).all())
        columns = positions if columns is None else columns
        if not fresh and bias is None:
            cols = torch.arange(width, device=ids.device)
            visible = (cols[None, None, :] <= positions[:, :, None]).unsqueeze(1)  # (B, 1, T, width)
            # an additive mask: the same result as a boolean one, and SDPA's CPU kernel runs it ~1.6x faster
            bias = torch.zeros(visible.shape, dtype=hidden.dtype, device=ids.device)
            bias = bias.masked_fill(~visible, float("-inf"))
        rows = torch.arange(b, device=ids.device)[:, None].expand(b, t)
        # on the CPU the reads of the cache are what a decode step waits on; on a GPU each group costs kernel launches
        groups = length_groups(lengths_after) if t == 1 and ids.device.type == "cpu" else [(0, b, width)]
        for layer, (k_cache, v_cache) in zip(inner.layers, caches):
            attn = layer.self_attn
            residual = hidden
            x = layer.input_layernorm(hidden)
            shape = (b, t, -1, self.head_dim)
            q = attn.q_proj(x).view(shape)
            k = attn.k_proj(x).view(shape)
            if hasattr(attn, "q_norm"):
                q, k = attn.q_norm(q), attn.k_norm(k)
            q, k = q.transpose(1, 2), k.transpose(1, 2)
            v = attn.v_proj(x).view(shape).transpose(1, 2)
            q = q * cos + _rotate_half(q) * sin
            k = k * cos + _rotate_half(k) * sin
            k_cache[rows, :, columns] = k.transpose(1, 2)
            v_cache[rows, :, columns] = v.transpose(1, 2)
            if fresh:
                out = F.scaled_dot_product_attention(
                    q, k, v, is_causal=True, scale=attn.scaling, enable_gqa=self.n_kv != self.n_heads
                )
            elif t == 1:  # a decode step: two batched matmuls, each query head grouped with its key/value head
                # (SDPA's CPU kernel is built for long queries: ~2x slower than this for one query per row), per
                # group of rows over the group's own width (:func:`length_groups`)
                qg = q.reshape(b, self.n_kv, self.n_heads // self.n_kv, self.head_dim)
                out = torch.empty_like(qg)
                for s, e, w in groups:
                    scores = torch.matmul(qg[s:e], k_cache[s:e, :, :w].transpose(-1, -2)) * attn.scaling
                    scores = scores + bias[s:e, :, :, :w]
                    out[s:e] = torch.matmul(scores.softmax(-1), v_cache[s:e, :, :w])
                out = out.reshape(b, self.n_heads, 1, -1)
            else:
                out = F.scaled_dot_product_attention(
                    q,
                    k_cache[:, :, :width],
                    v_cache[:, :, :width],
                    attn_mask=bias,
                    scale=attn.scaling,
                    enable_gqa=self.n_kv != self.n_heads,
                )
            hidden = residual + attn.o_proj(out.transpose(1, 2).reshape(b, t, -1))
            residual = hidden
            hidden = residual + layer.mlp(layer.post_attention_layernorm(hidden))
        if logits_at is None:
            last = hidden[:, -1]
        elif isinstance(logits_at, str) and logits_at == "all":
            last = hidden
        else:
            last = hidden[logits_at[0], logits_at[1]]
        return self.model.lm_head(inner.norm(last)).float()

    # ---- generation -------------------------------------------------------------------------------------
    @torch.no_grad()
    def generate(
        self,
        prompts: list[list[int]],
        max_new_tokens: int,
        stop_ids: set[int],
        temperature: float = 0.0,
        top_p: float = 1.0,
        top_k: int | None = None,
        should_stop=None,
    ) -> list[list[int]]:
        """Sampled ids per prompt, each cut after its first id in ``stop_ids`` (or ``max_new_tokens`` long)."""
        with self._lock:
            return self._generate(prompts, max_new_tokens, stop_ids, temperature, top_p, top_k, should_stop)

    def _generate(self, prompts, max_new_tokens, stop_ids, temperature, top_p, top_k, should_stop):
        device = next(self.model.parameters()).device
        arrays = [np.asarray(p, dtype=np.int64) for p in prompts]
        # rows ordered by length (they stay so: all grow by one per step), so that a decode step's attention reads
        # each group of rows over its own width (length_groups); the answers go back in the callers' order
        b = len(arrays)
        order = sorted(range(b), key=lambda i: len(arrays[i])) if b >= 2 * MIN_GROUP_ROWS else list(range(b))
        arrays = [arrays[i] for i in order]
        caches, logits = self._encode(arrays, max_new_tokens)
        lengths = torch.tensor([len(a) for a in arrays], device=device)  # next write position per row

        # decode all rows together; a row that stops is done (its cache is kept for its next turn).  Done rows
        # leave the batch only once they are a quarter of it: each removal copies every row's cache, and removing
        # rows one by one (a batch's rows stop at different steps) cost more than decoding a few idle rows.
        with _decode_threads(device, b):
            out = self._decode(
                arrays,
                order,
                logits,
                caches,
                lengths,
                max_new_tokens,
                stop_ids,
                temperature,
                top_p,
                top_k,
                should_stop,
            )
        answers: list[list[int]] = [[] for _ in range(b)]
        for i, row in enumerate(order):
            answers[row] = out[i]
        return answers

    @torch.no_grad()
    def encode(self, prompts: list[list[int]], extra: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Caches (per layer: keys, values of rows x columns) holding each prompt's keys and values at its
        positions, with at least ``extra`` free columns after the longest: the cached prefixes of earlier calls
        are reused (an RL step's information gain reads the rollouts' own), the rest is encoded, each row in a
        forward of its own on the CPU (whole trajectories: a padded batch's attention costs its longest row's
        square in every row; 16 episodes of 1,200-2,600 tokens took 1.5 s padded in two groups, 1.0 s one by
        one, ``bench_info_gain``)."""
        arrays = [np.asarray(p, dtype=np.int64) for p in prompts]
        with self._lock:
            return self._encode(arrays, extra, one_by_one=True)[0]

    def _encode(self, arrays: list[np.ndarray], extra: int, one_by_one: bool = False):
        """``(caches, logits of each row's last token)`` for :meth:`encode` and :meth:`_generate` (rows in the
        given order): the longest cached prefix of each row copied in, its new tokens encoded at its positions
        (right-padded; pads write past the row's end), on the CPU each row alone (``one_by_one``) or in groups of
        rows of similar length, each padded to its own longest new part and attending over its own longest context
        (length_groups)."""
        device = next(self.model.parameters()).device
        version = self._version()
        if version != self._weights_version:  # (the caller holds the lock)
            self._entries = []
            self._weights_version = version
        taken = [self._take(a) if len(a) else None for a in arrays]
        reused = [len(e.ids) if e is not None else 0 for e in taken]
        new = [len(a) - r for a, r in zip(arrays, reused)]
        capacity = max(reused) + max(max(new), 1) + extra
        self.stats["requests"] += len(arrays)
        self.stats["prompt_tokens"] += sum(len(a) for a in arrays)
        self.stats["reused_tokens"] += sum(reused)
        self.stats["encoded_tokens"] += sum(new)
        caches = self.new_caches(len(arrays), capacity)
        for layer, (k, v) in enumerate(caches):
            for i, e in enumerate(taken):
                if e is not None:
                    k[i, :, : reused[i]] = e.kv[layer][0]
                    v[i, :, : reused[i]] = e.kv[layer][1]
        del taken
        if device.type != "cpu":
            groups = [(0, len(arrays), 0)]
        elif one_by_one:
            groups = [(i, i + 1, 0) for i in range(len(arrays))]
        else:
            lengths = torch.tensor([len(a) for a in arrays])
            groups = length_groups(lengths, MAX_PREFILL_GROUPS, MIN_PREFILL_ROWS)
        logits = torch.cat(
            [
                self._prefill(arrays[s:e], reused[s:e], [(k[s:e], v[s:e]) for k, v in caches], device)
                for s, e, _ in groups
            ]
        )
        return caches, logits

    def _prefill(self, arrays, reused, caches, device) -> torch.Tensor:
        """Encode the rows' new tokens (``arrays[i][reused[i]:]``) into ``caches`` (theirs alone); the logits of
        each row's last token."""
        new = [len(a) - r for a, r in zip(arrays, reused)]
        b, t_new = len(arrays), max(max(new), 1)
        ids = torch.full((b, t_new), self.pad_id, dtype=torch.long)
        for i, (a, r) in enumerate(zip(arrays, reused)):
            ids[i, : new[i]] = torch.from_numpy(a[r:])
        positions = torch.tensor(reused, dtype=torch.long)[:, None] + torch.arange(t_new)[None, :]
        ids, positions = ids.to(device), positions.to(device)
        last = (torch.arange(b, device=device), torch.tensor([n - 1 for n in new], device=device))
        return self.forward(ids, positions, caches, positions.max(1).values + 1, last)

    def _decode(
        self, arrays, order, logits, caches, lengths, max_new_tokens, stop_ids, temperature, top_p, top_k, should_stop
    ):
        """Step 2 of :meth:`_generate`: the decode loop from the prefill's ``logits`` (see there).  ``arrays`` are
        in length order; ``order[i]`` is row i's place in the call, in which sampling draws (the same draws as for
        rows in the call's order) and finished rows are stored."""
        device, b = logits.device, len(arrays)
        out: list[list[int]] = [[] for _ in range(b)]
        active = list(range(b))  # row (in length order) of each batch row
        finished = [False] * b  # per batch row: stopped (its tokens are no longer kept)
        stop = torch.tensor(sorted(stop_ids) or [-1], device=device)

        def in_call_order(rows):  # batch rows sorted by their place in the call
            return sorted(rows, key=lambda j: order[active[j]])

        for step in range(max_new_tokens):
            if should_stop is not None and should_stop():
                break
            if temperature > 0:  # sampled in the call's row order: the generator's draws go to the same rows
                back = torch.tensor(in_call_order(range(len(active))), device=device)
                nxt = torch.empty(len(active), dtype=torch.long, device=device)
                nxt[back] = select_next(logits.index_select(0, back), temperature, top_p, top_k)
            else:
                nxt = select_next(logits, temperature, top_p, top_k)
            tokens = nxt.tolist()
            for j, tok in enumerate(tokens):
                if not finished[j]:
                    out[active[j]].append(tok)
            done = torch.isin(nxt, stop).tolist()
            if step == max_new_tokens - 1:
                break
            newly = in_call_order(j for j, d in enumerate(done) if d and not finished[j])
            for j in newly:
                self._store(arrays[active[j]], out[active[j]], caches, j, int(lengths[j]))
                finished[j] = True
            if newly:
                alive = [j for j, f in enumerate(finished) if not f]
                if not alive:
                    active = []
                    break
                if len(alive) <= 0.75 * len(active):
                    keep = torch.tensor(alive, device=device)
                    caches = [(k.index_select(0, keep), v.index_select(0, keep)) for k, v in caches]
                    active, finished = [active[j] for j in alive], [False] * len(alive)
                    lengths, nxt = lengths.index_select(0, keep), nxt.index_select(0, keep)
            self.stats["decode_steps"] += 1
            positions = lengths[:, None]
            logits = self.forward(nxt[:, None], positions, caches, lengths + 1)
            lengths = lengths + 1
        for j in in_call_order(range(len(active))):  # rows out of tokens (or stopped)
            if not finished[j]:
                self._store(arrays[active[j]], out[active[j]], caches, j, int(lengths[j]))
        return out

    def _store(self, prompt: np.ndarray, sampled: list[int], caches, row: int, length: int) -> None:
        """Keep ``row``'s first ``length`` cached columns (its prompt and the sampled tokens fed back so far)."""
        ids = np.concatenate([prompt, np.asarray(sampled, dtype=np.int64)])[:length]
        self._keep(_Entry(ids, [(k[row, :, :length].clone(), v[row, :, :length].clone()) for k, v in caches]))


#: a decode step's attention reads each group of rows over the group's own width: at most this many groups, none
#: under :data:`MIN_GROUP_ROWS` rows (measured on 2 cores, 128 rows of 150-1,600 cached columns, one layer: one group
#: 9.6 ms, two 7.3, four 5.5, eight 5.1; the reads of the cache are what a decode step's attention waits on)
MAX_LENGTH_GROUPS = 4
MIN_GROUP_ROWS = 16
#: the prefill of a turn's new tokens (each row's tool response) runs in up to this many groups of rows, none under
#: :data:`MIN_PREFILL_ROWS` rows, each padded to its own longest new part and attending over its own longest context
#: (measured on 2 cores, the prefills of a 200-question pass of the cpu-teacher SFT model, 128 rows of up to 2,500
#: cached columns: one group 10.1 s, four 6.8, eight 5.7, sixteen 5.7)
MAX_PREFILL_GROUPS = 8
MIN_PREFILL_ROWS = 8


def length_groups(
    lengths: torch.Tensor, max_groups: int | None = None, min_rows: int | None = None
) -> list[tuple[int, int, int]]:
    """``(first row, end row, width)`` of consecutive groups of rows whose cached columns a decode step (or a
    prefill) reads: rows sorted by length (:meth:`KVDecoder._generate` orders them so, and they stay so) split into up
    to ``max_groups`` (:data:`MAX_LENGTH_GROUPS`) groups of equal size and at least ``min_rows``
    (:data:`MIN_GROUP_ROWS`) rows, each read up to its longest row instead of the batch's; one group when the rows
    are unsorted or few.  The columns left out are masked in every row that skips them, so each row's
    attention is the same sum (up to the order of float additions)."""
    b = int(lengths.shape[0])
    values = lengths.tolist()
    max_groups = MAX_LENGTH_GROUPS if max_groups is None else max_groups
    n = min(max_groups, b // (MIN_GROUP_ROWS if min_rows is None else min_rows))
    if n <= 1 or any(x > y for x, y in zip(values, values[1:])):
        return [(0, b, int(max(values)))]
    bounds = [round(i * b / n) for i in range(n + 1)]
    return [(s, e, int(values[e - 1])) for s, e in zip(bounds, bounds[1:])]


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


#: decode batches up to this many rows run on one CPU thread when the call comes from a thread other than the main
#: one (measured on 2 cores, the cpu profile's model, ~650 cached columns: a decode step of 16 rows 8.4 ms on two
#: threads, 4.7 ms on one; 32 rows 9.4 / 8.1 ms; 64 rows 15.1 / 14.2; 128 rows 22.7 / 25.2)
ONE_THREAD_DECODE_ROWS = 64


@contextmanager
def _decode_threads(device, rows: int):
    """One intra-op thread for a decode loop of at most :data:`ONE_THREAD_DECODE_ROWS` rows on the CPU, outside the
    main thread; the thread count is restored after.

    The agent generates from a worker thread (``asyncio.to_thread``; in Jupyter the whole event loop runs in one).
    There, a decode step's many small ops each pay OpenMP's fork/join between two threads at about twice the cost
    they pay in the main thread, so two threads decode ~1.8x slower than one (numbers above); the prefill's large ops
    are as fast there as in the main thread and keep every thread.  The results are the same on any thread count."""
    n = torch.get_num_threads()
    if (
        torch.device(device).type != "cpu"
        or n == 1
        or rows > ONE_THREAD_DECODE_ROWS
        or threading.current_thread() is threading.main_thread()
    ):
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)
