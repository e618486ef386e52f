"""Information gain: GT span, value differences, tool filter, and KV-cache == naive recomputation."""

from __future__ import annotations

import math

import pytest

from venus_utils.rl.info_gain import (
    boundary_values_batched,
    boundary_values_kv,
    boundary_values_naive,
    compute_info_gain,
    compute_info_gains,
    ground_truth_text,
    kept_boundaries,
    pseudo_answer,
    turn_info_gains,
)


def test_ground_truth_first_alias():
    assert ground_truth_text("  Paris <|answer_split|>paris, France") == "Paris"
    assert ground_truth_text(["", "Kent County<|answer_split|>Kent"]) == "Kent County"
    assert ground_truth_text("   ") is None
    assert ground_truth_text(None) is None


def test_gt_span_by_character_offsets(tiny_lm):
    _, tok = tiny_lm
    for gt in ["Paris", "Kent County 1987", "Mi-ro, Tel"]:
        pa = pseudo_answer(tok, gt)
        assert pa.text == f"Now there's enough information to answer\n</think>\n<answer>\n{gt}\n</answer><|im_end|>"
        span = tok.decode([pa.ids[k] for k in pa.gt_index])
        assert span.strip() == gt  # the span covers the GT and nothing of the scaffold around it
        assert pa.gt_index == list(range(pa.gt_index[0], pa.gt_index[-1] + 1))
        assert pa.ids[-1] == tok.convert_tokens_to_ids("<|im_end|>")
    with pytest.raises(ValueError):
        pseudo_answer(tok, "")


def test_turn_info_gains_by_hand():
    values = [-3.0, None, -2.5, float("nan"), -1.0]
    assert turn_info_gains(values) == [None, 0.5, 0.0, 1.5]  # NaN -> 0.0, running value kept
    prob = turn_info_gains(values, "prob_diff")
    assert prob[0] is None and prob[2] == 0.0
    assert prob[1] == pytest.approx(math.exp(-2.5) - math.exp(-3.0))
    assert prob[3] == pytest.approx(math.exp(-1.0) - math.exp(-2.5))
    assert turn_info_gains([float("-inf"), -1.0, -2.0]) == [None, None]  # invalid baseline: no IG at all
    assert turn_info_gains([-1.0]) == []
    with pytest.raises(ValueError):
        turn_info_gains([-1.0, -0.5], "bogus")


def test_tool_filter_only_after_visit():
    names = ["search", "visit", "search", "visit", None]
    assert kept_boundaries(5, names, "visit") == [0, 2, 4]
    assert kept_boundaries(5, names, None) == [0, 1, 2, 3, 4]
    assert kept_boundaries(5, names, "all") == [0, 1, 2, 3, 4]
    assert kept_boundaries(5, names, "search,visit") == [0, 1, 2, 3, 4]


def _trajectory(n_tokens: int, vocab: int, seed: int = 0):
    import torch

    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (n_tokens,), generator=g).tolist()


def test_kv_cache_equals_naive(tiny_lm):
    model, tok = tiny_lm
    ids = _trajectory(420, len(tok))
    boundaries = [37, 80, 81, 150, 151, 260, 333, 419, 420]
    pa = pseudo_answer(tok, "Kent County 1987")
    naive = boundary_values_naive(model, ids, boundaries, pa)
    for chunk in (64, 1000):  # several chunks, and one chunk
        kv = boundary_values_kv(model, ids, boundaries, pa, chunk_size=chunk)
        assert max(abs(a - b) for a, b in zip(naive, kv)) < 1e-4
    assert len(set(round(v, 6) for v in naive)) > 1  # the values do depend on the context
    with pytest.raises(ValueError, match="outside"):
        boundary_values_kv(model, ids, [0], pa)


@pytest.mark.parametrize("mask_bytes", [None, 1])
def test_batched_values_equal_naive_across_trajectories(tiny_lm, monkeypatch, mask_bytes):
    """An RL step's episodes scored in two forwards (the probes of each trajectory side by side over its one cache):
    the same values as one full forward per boundary; also with every trajectory in a group of its own (the probe
    mask's size limit)."""
    import venus_utils.rl.info_gain as ig

    if mask_bytes is not None:
        monkeypatch.setattr(ig, "PROBE_MASK_BYTES", mask_bytes)
    model, tok = tiny_lm
    items = []
    for seed, (n, boundaries, gt) in enumerate(
        [
            (420, [37, 80, 81, 150, 260, 419, 420], "Kent County 1987"),
            (90, [12, 50], "Paris"),
            (200, [], "x"),
            (5, [1, 5], "Ana Lu"),
        ]
    ):
        items.append((_trajectory(n, len(tok), seed=seed), boundaries, pseudo_answer(tok, gt)))
    for max_rows in (64, 3):  # one forward, and several row chunks
        got = boundary_values_batched(model, items, max_rows=max_rows)
        for (ids, boundaries, pa), values in zip(items, got):
            naive = boundary_values_naive(model, ids, boundaries, pa)
            assert len(values) == len(boundaries)
            assert max((abs(a - b) for a, b in zip(naive, values)), default=0.0) < 1e-4


def test_compute_info_gains_equals_one_at_a_time(tiny_lm):
    model, tok = tiny_lm
    trajectories = [
        dict(
            input_ids=_trajectory(300, len(tok), seed=1),
            boundaries=[40, 90, 150, 220, 280],
            tool_names=["search", "visit", "search", "visit", None],
            ground_truth="Paris<|answer_split|>paris",
        ),
        dict(
            input_ids=_trajectory(120, len(tok), seed=2),
            boundaries=[30, 100],
            tool_names=["visit", None],
            ground_truth="Oslo",
        ),
        dict(input_ids=_trajectory(50, len(tok), seed=3), boundaries=[20], tool_names=[None], ground_truth=""),
    ]
    from venus_utils.modeling.kv_decode import supports

    assert supports(model)  # the batched path runs
    model.train()
    batched = compute_info_gains(model, tok, trajectories, tool_filter="visit")
    assert model.training  # restored
    for t, res in zip(trajectories, batched):
        one = compute_info_gain(model, tok, **t, tool_filter="visit")
        assert res.kept == one.kept and res.gt == one.gt
        assert [v is None for v in res.values] == [v is None for v in one.values]
        assert all(abs(a - b) < 1e-4 for a, b in zip(res.gains, one.gains) if a is not None)


def test_compute_info_gain_end_to_end(tiny_lm):
    model, tok = tiny_lm
    ids = _trajectory(300, len(tok), seed=1)
    boundaries = [40, 90, 150, 220, 280]
    names = ["search", "visit", "search", "visit", None]
    model.train()
    res = compute_info_gain(model, tok, ids, boundaries, names, "Paris<|answer_split|>paris", tool_filter="visit")
    assert model.training  # restored
    assert res.gt == "Paris" and res.kept == [0, 2, 4]
    assert res.values[1] is None and res.values[3] is None
    assert res.gains[0] is None and res.gains[2] is None
    assert res.gains[1] == pytest.approx(res.values[2] - res.values[0])
    assert res.gains[3] == pytest.approx(res.values[4] - res.values[2])
    naive = compute_info_gain(model, tok, ids, boundaries, names, "Paris", tool_filter="visit", method="naive")
    assert max(abs(a - b) for a, b in zip(res.gains[1::2], naive.gains[1::2])) < 1e-4
    empty = compute_info_gain(model, tok, ids, boundaries, names, "")
    assert empty.gains == [None] * 4


def test_probe_groups_keep_the_mask_under_its_limit(monkeypatch):
    import venus_utils.rl.info_gain as ig

    pa = ig.PseudoAnswer(text="", ids=[1, 2, 3, 4], gt_index=[1, 2])  # 3 probe tokens per boundary
    items = [(list(range(100)), [10, 50], pa), (list(range(100)), [], pa), (list(range(200)), [20, 200], pa)] * 2
    pieces = ig._probe_pieces(items, vocab=10)
    assert [p[3] for p in pieces] == [0, 2, 3, 5]  # items without boundaries have no piece
    live = list(range(len(pieces)))
    assert list(ig._probe_groups(pieces, live, 64, 10)) == [live]
    assert list(ig._probe_groups(pieces, live, 2, 10)) == [live[:2], live[2:]]
    one = 4 * 1 * 3 * 2 * (199 + 6 + 10)  # the longest trajectory's own mask and logits
    monkeypatch.setattr(ig, "PROBE_MASK_BYTES", 2 * one - 1)
    groups = list(ig._probe_groups(pieces, live, 64, 10))
    assert [k for g in groups for k in g] == live and all(len(g) == 1 for g in groups[1:])
    monkeypatch.setattr(ig, "PROBE_MASK_BYTES", 0)
    assert list(ig._probe_groups(pieces, live, 64, 10)) == [[k] for k in live]


def test_a_trajectory_past_the_limit_is_scored_in_pieces_of_its_boundaries(monkeypatch):
    """A long trajectory's probes alone may pass the limit: its boundaries are cut into consecutive pieces that
    fit (one boundary at least), all of them, in order."""
    import venus_utils.rl.info_gain as ig

    pa = ig.PseudoAnswer(text="", ids=[1, 2, 3, 4], gt_index=[1, 2])
    points = [10, 20, 30, 40, 50, 60, 70]
    two = ig._probe_bytes(1, 69, 3, 2, 10)
    monkeypatch.setattr(ig, "PROBE_MASK_BYTES", two)
    pieces = ig._probe_pieces([(list(range(80)), points, pa)], vocab=10)
    assert [p[1] for p in pieces] == [[10, 20], [30, 40], [50, 60], [70]]
    assert all(ig._probe_bytes(1, max(p[1]) - 1, 3, len(p[1]), 10) <= two for p in pieces)
    monkeypatch.setattr(ig, "PROBE_MASK_BYTES", 0)
    assert [p[1] for p in ig._probe_pieces([(list(range(80)), points, pa)], vocab=10)] == [[b] for b in points]


def test_batched_values_read_the_decoders_kept_caches(tiny_lm):
    """IG on trajectories a KVDecoder generated reads the keys and values it kept (none encoded again but the one
    token each row re-encodes) and gives the values of one full forward per boundary."""
    from venus_utils.modeling.kv_decode import KVDecoder

    model, tok = tiny_lm
    model.eval()
    dec = KVDecoder(model)
    prompts = [_trajectory(n, len(tok), seed=n) for n in (40, 75, 120)]
    sampled = dec.generate(prompts, 30, stop_ids=set())
    items = []
    for p, s in zip(prompts, sampled):
        ids = p + s
        items.append((ids, [len(p) // 2, len(p), len(ids) - 3], pseudo_answer(tok, "Kent County")))
    before = dict(dec.stats)
    got = boundary_values_batched(model, items, decoder=dec)
    encoded = dec.stats["encoded_tokens"] - before["encoded_tokens"]
    assert dec.stats["reused_tokens"] - before["reused_tokens"] == sum(max(b) - 2 for _, b, _ in items)
    assert encoded == len(items)  # one token per row, whose logits a generation call would start from
    for (ids, boundaries, pa), values in zip(items, got):
        naive = boundary_values_naive(model, ids, boundaries, pa)
        assert max(abs(a - b) for a, b in zip(naive, values)) < 1e-4


@pytest.mark.parametrize("max_entries", [64, 2])
def test_kept_caches_of_multi_turn_rollouts_give_the_fresh_values(tiny_lm, max_entries):
    """Groups of rollouts as an RL step makes them (one system prompt, each question rolled out three times, three
    sampled turns cut at stop tokens, a tool response glued on after each), then IG from the decoder's kept caches:
    the values of one full forward per boundary, also when most kept caches were evicted (``max_entries`` 2: rows
    partly reused, partly encoded again)."""
    import torch

    from venus_utils.modeling.kv_decode import KVDecoder

    model, tok = tiny_lm
    model.eval()
    dec = KVDecoder(model, max_entries=max_entries)
    system = _trajectory(40, len(tok), seed=7)
    contexts = [system + _trajectory(10, len(tok), seed=q) for q in (1, 2) for _ in range(3)]
    boundaries: list[list[int]] = [[] for _ in contexts]
    torch.manual_seed(1)
    for turn in range(3):
        for b, c in zip(boundaries, contexts):
            b.append(len(c))
        sampled = dec.generate(contexts, 12, stop_ids={5, 7, 11}, temperature=1.0)
        contexts = [
            c + s + _trajectory(6, len(tok), seed=10 * turn + i) for i, (c, s) in enumerate(zip(contexts, sampled))
        ]
    for b, c in zip(boundaries, contexts):
        b.append(len(c))
    sampled = dec.generate(contexts, 8, stop_ids=set(), temperature=1.0)
    answers = [pseudo_answer(tok, "Kent County"), pseudo_answer(tok, "Paris")]
    items = [(c + s, b, answers[i % 2]) for i, (c, s, b) in enumerate(zip(contexts, sampled, boundaries))]
    before = dict(dec.stats)
    got = boundary_values_batched(model, items, decoder=dec)
    assert dec.stats["reused_tokens"] > before["reused_tokens"]  # the kept caches were read
    for (ids, points, pa), values in zip(items, got):
        naive = boundary_values_naive(model, ids, points, pa)
        assert max(abs(a - b) for a, b in zip(naive, values)) < 1e-4
