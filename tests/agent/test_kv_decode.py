"""The fast generation path (modeling.kv_decode): the same greedy ids and rollouts as transformers ``generate``, the
cache reused across turns and dropped when a weight changes, transformers' sampling warpers."""

from __future__ import annotations

import asyncio
import threading

import pytest
import torch

from venus_utils.agent import AgentConfig, TransformersBackend, run_many
from venus_utils.agent.backends import Sampling
from venus_utils.core.world_store import load_world_questions
from venus_utils.modeling.kv_decode import KVDecoder, supports, warp_logits
from venus_utils.tools import make_toolbox

from .conftest import random_qwen3


def _prompts(vocab: int, n: int = 6, seed: int = 0) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(8, 90, (n,), generator=g).tolist()
    return [torch.randint(3, vocab, (k,), generator=g).tolist() for k in lengths]


def test_greedy_ids_equal_generate_over_turns_with_the_cache_reused(tiny_lm, tiny_tokenizer):
    fast = TransformersBackend(tiny_lm, tiny_tokenizer)
    ref = TransformersBackend(tiny_lm, tiny_tokenizer, fast=False)
    assert fast.decoder is not None and ref.decoder is None
    greedy = Sampling(max_new_tokens=20, temperature=0.0)
    prompts = _prompts(tiny_lm.config.vocab_size)
    for turn in range(3):
        got, want = fast.generate_ids(prompts, greedy), ref.generate_ids(prompts, greedy)
        assert got == want, f"turn {turn}"
        prompts = [p + out + [5, 6, 7 + turn] for p, out in zip(prompts, got)]  # a tool response glued on
    stats = fast.decoder.stats
    assert stats["reused_tokens"] > stats["encoded_tokens"]  # turns 2 and 3 encode only the new tokens


def test_a_cut_turn_reuses_the_common_prefix(tiny_lm, tiny_tokenizer):
    """A turn cut at a stop string re-enters with fewer sampled ids than were cached: the common prefix is reused."""
    fast = TransformersBackend(tiny_lm, tiny_tokenizer)
    ref = TransformersBackend(tiny_lm, tiny_tokenizer, fast=False)
    greedy = Sampling(max_new_tokens=16, temperature=0.0)
    prompts = _prompts(tiny_lm.config.vocab_size, n=3, seed=1)
    first = fast.generate_ids(prompts, greedy)
    nxt = [p + out[: len(out) // 2] + [9, 9] for p, out in zip(prompts, first)]
    before = fast.decoder.stats["reused_tokens"]
    assert fast.generate_ids(nxt, greedy) == ref.generate_ids(nxt, greedy)
    assert fast.decoder.stats["reused_tokens"] - before >= sum(len(p) for p in prompts)


def test_greedy_rollouts_equal_the_reference_path_on_world_questions(world_dir, tiny_lm, tiny_tokenizer):
    tools = make_toolbox("local", world_dir=world_dir)
    questions = load_world_questions(world_dir, "test")["question"].head(6).tolist()
    cfg = AgentConfig(max_turns=4, max_new_tokens=24, temperature=0.0, top_k=None, attempts=1)
    runs = {}
    for fast in (True, False):
        backend = TransformersBackend(tiny_lm, tiny_tokenizer, fast=fast)
        runs[fast] = asyncio.run(run_many(questions, backend, tools, cfg, concurrency=6))
    for a, b in zip(runs[True], runs[False]):
        assert a.completion_ids == b.completion_ids and a.messages == b.messages and a.prediction == b.prediction


def test_rows_that_stop_at_different_steps_keep_exact_outputs_and_caches():
    """Stopped rows stay in the batch until they are a quarter of it (then the batch is compacted): every row's ids
    equal its own single-row decode, and the caches kept for the next turn give the same ids as a cold start."""
    tiny_lm = random_qwen3(500)  # a random model whose greedy ids vary (the fixture's repeat one token)
    prompts = _prompts(500, n=8, seed=3)
    free = KVDecoder(tiny_lm).generate(prompts, 24, stop_ids=set())

    def lengths_with(stops):  # where each row would stop: just after its first stop id
        return {next((k + 1 for k, t in enumerate(ids) if t in stops), len(ids)) for ids in free}

    candidates = sorted({t for ids in free for t in ids})
    pairs = [{a, b} for i, a in enumerate(candidates) for b in candidates[i:]]
    stops = max(pairs, key=lambda pair: len(lengths_with(pair)))  # stop ids that end the rows at the most steps
    warm = KVDecoder(tiny_lm)
    got = warm.generate(prompts, 24, stop_ids=stops)
    lengths = sorted({len(g) for g in got})
    assert len(lengths) >= 3, f"rows should stop at different steps: {lengths}"
    for prompt, ids in zip(prompts, got):
        assert ids == KVDecoder(tiny_lm).generate([prompt], 24, stop_ids=stops)[0]
        assert all(t not in stops for t in ids[:-1]) and (ids[-1] in stops or len(ids) == 24)
    nxt = [p + ids + [5, 6, 7] for p, ids in zip(prompts, got)]
    before = warm.stats["reused_tokens"]
    assert warm.generate(nxt, 16, stop_ids=set()) == KVDecoder(tiny_lm).generate(nxt, 16, stop_ids=set())
    assert warm.stats["reused_tokens"] - before >= sum(len(p) for p in prompts)


def test_a_worker_thread_decodes_on_one_thread_with_the_same_ids_and_restores_the_count(monkeypatch):
    """Outside the main thread a small decode batch runs on one intra-op thread (OpenMP's fork/join per small op costs
    about twice as much there); the sampled ids are those of the main thread's decode, and the count is restored."""
    from venus_utils.modeling import kv_decode

    tiny_lm = random_qwen3(500)
    prompts = _prompts(500, n=8, seed=4)
    threads_before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        seen = []
        real = KVDecoder._decode

        def spy(self, *args, **kwargs):
            seen.append(torch.get_num_threads())
            return real(self, *args, **kwargs)

        monkeypatch.setattr(KVDecoder, "_decode", spy)
        main = KVDecoder(tiny_lm).generate(prompts, 24, stop_ids=set())
        box = {}

        def worker():
            box["ids"] = KVDecoder(tiny_lm).generate(prompts, 24, stop_ids=set())
            box["after"] = torch.get_num_threads()

        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
        assert box["ids"] == main
        assert seen == [2, 1] and box["after"] == 2
        monkeypatch.setattr(kv_decode, "ONE_THREAD_DECODE_ROWS", 4)  # a large batch keeps every thread
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
        assert box["ids"] == main and seen[-1] == 2
    finally:
        torch.set_num_threads(threads_before)


def test_a_changed_weight_drops_the_cache(tiny_lm, tiny_tokenizer):
    import copy

    model = copy.deepcopy(tiny_lm)
    fast = TransformersBackend(model, tiny_tokenizer)
    ref = TransformersBackend(model, tiny_tokenizer, fast=False)
    greedy = Sampling(max_new_tokens=12, temperature=0.0)
    prompts = _prompts(model.config.vocab_size, n=3, seed=2)
    out = fast.generate_ids(prompts, greedy)
    prompts = [p + o for p, o in zip(prompts, out)]
    with torch.no_grad():  # an optimizer step: an in-place update
        model.model.layers[0].mlp.up_proj.weight.mul_(3.0)
    before = fast.decoder.stats["reused_tokens"]
    assert fast.generate_ids(prompts, greedy) == ref.generate_ids(prompts, greedy)
    assert fast.decoder.stats["reused_tokens"] == before


def test_warpers_match_transformers():
    from transformers.generation.logits_process import (
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    logits = torch.randn(5, 300, generator=torch.Generator().manual_seed(0)) * 3
    for temperature, top_p, top_k in ((1.0, 0.95, None), (0.7, 0.9, 20), (1.3, 1.0, 5), (1.0, 0.5, 0)):
        want = TemperatureLogitsWarper(temperature)(None, logits.clone())
        if top_k:
            want = TopKLogitsWarper(top_k)(None, want)
        if top_p < 1:
            want = TopPLogitsWarper(top_p)(None, want)
        got = warp_logits(logits.clone(), temperature, top_p, top_k)
        assert torch.equal(torch.isinf(got), torch.isinf(want))
        assert torch.allclose(got[~torch.isinf(got)], want[~torch.isinf(want)])


def test_sampling_is_seeded_and_stops_on_the_event(tiny_lm, tiny_tokenizer):
    sampled = Sampling(max_new_tokens=30, temperature=1.0, top_p=0.95)
    prompts = _prompts(tiny_lm.config.vocab_size, n=4, seed=3)
    a = TransformersBackend(tiny_lm, tiny_tokenizer, seed=7).generate_ids(prompts, sampled)
    b = TransformersBackend(tiny_lm, tiny_tokenizer, seed=7).generate_ids(prompts, sampled)
    assert a == b and len({tuple(x) for x in a}) > 1
    event = threading.Event()
    event.set()
    stopped = TransformersBackend(tiny_lm, tiny_tokenizer, stop_event=event).generate_ids(prompts, sampled)
    assert all(len(x) <= 1 for x in stopped)


def test_models_it_cannot_run_exactly_use_generate(tiny_lm, tiny_tokenizer):
    peft = pytest.importorskip("peft")
    import copy

    wrapped = peft.get_peft_model(
        copy.deepcopy(tiny_lm), peft.LoraConfig(r=2, target_modules=["q_proj"], task_type="CAUSAL_LM")
    )
    assert supports(tiny_lm) and not supports(wrapped)
    assert TransformersBackend(wrapped, tiny_tokenizer).decoder is None
    with pytest.raises(ValueError, match="not a plain"):
        KVDecoder(wrapped)


def test_the_flop_counter_counts_every_forward_path_alike():
    """Issue 40's compute match: :class:`venus_utils.core.perf.FlopCounter` counts transformers' forward, a training
    forward (x3 for its backward) and the cached decoder's calls at the same FLOPs per token position."""
    from venus_utils.core.perf import FlopCounter, flops_per_token

    lm = random_qwen3(300)
    per_token = flops_per_token(lm.config)  # no context: the counter leaves attention scores out
    counter = FlopCounter(lm)
    ids = torch.randint(3, 300, (3, 40))
    with torch.no_grad():
        lm(input_ids=ids)
    assert counter.flops == pytest.approx(120 * per_token)
    counter.flops = 0.0
    lm(input_ids=ids, labels=ids).loss.backward()
    assert counter.flops == pytest.approx(3 * 120 * per_token)
    counter.flops = 0.0
    prompts = [[5] * 10, [7] * 20]
    out = KVDecoder(lm).generate(prompts, 6, stop_ids=set())
    # prefill: 2 rows padded to 20 positions through the layers (padding is computed, so counted), one row of logits
    # each; then 5 decode steps of 2 rows (the last token needs no forward)
    layers_only = per_token - 2 * lm.config.hidden_size * lm.config.vocab_size
    expected = 40 * layers_only + 2 * 2 * lm.config.hidden_size * lm.config.vocab_size + 5 * 2 * per_token
    assert all(len(x) == 6 for x in out) and counter.flops == pytest.approx(expected, rel=0.01)
    counter.close()
    with torch.no_grad():
        lm(input_ids=ids)
    assert counter.flops == pytest.approx(expected, rel=0.01)  # no hooks left


def test_a_batch_of_many_lengths_reads_each_group_over_its_own_width_with_the_same_ids(monkeypatch):
    """64 rows of 8-90 prompt tokens: the prefill runs in eight groups of rows and the decode steps' attention over
    four, each up to its longest row (kv_decode.length_groups); greedy ids equal the one-group prefill and decode and
    each row's own single-row decode, in the call's order; sampled ids are the same draws as the one-group decode's
    (rows sample in the call's order)."""
    from venus_utils.modeling import kv_decode

    lm = random_qwen3(500)
    prompts = _prompts(500, n=64, seed=7)
    seen = []
    original = kv_decode.length_groups

    def recorded(lengths, *limits):
        seen.append((bool(limits), original(lengths, *limits)))
        return seen[-1][1]

    monkeypatch.setattr(kv_decode, "length_groups", recorded)
    grouped = KVDecoder(lm).generate(prompts, 12, stop_ids=set())
    assert [len(groups) for prefill, groups in seen if prefill] == [8]
    decode_groups = [groups for prefill, groups in seen if not prefill]
    assert decode_groups and all(len(groups) == 4 for groups in decode_groups)
    widths = [w for _, _, w in decode_groups[0]]
    assert widths == sorted(widths) and widths[0] < widths[-1]
    for k in (0, 17, 63):
        assert grouped[k] == KVDecoder(lm).generate([prompts[k]], 12, stop_ids=set())[0]
    torch.manual_seed(3)
    sampled = KVDecoder(lm).generate(prompts, 12, stop_ids=set(), temperature=1.0)
    monkeypatch.setattr(kv_decode, "MIN_GROUP_ROWS", 1000)  # one group, rows in the call's order (as before)
    assert KVDecoder(lm).generate(prompts, 12, stop_ids=set()) == grouped
    torch.manual_seed(3)
    assert KVDecoder(lm).generate(prompts, 12, stop_ids=set(), temperature=1.0) == sampled


def test_length_groups_split_sorted_rows_and_keep_unsorted_or_few_rows_whole():
    from venus_utils.modeling.kv_decode import length_groups

    assert length_groups(torch.arange(1, 65)) == [(0, 16, 16), (16, 32, 32), (32, 48, 48), (48, 64, 64)]
    assert length_groups(torch.tensor([5] * 40)) == [(0, 20, 5), (20, 40, 5)]
    assert length_groups(torch.tensor([3, 1, 2] * 20)) == [(0, 60, 3)]
    assert length_groups(torch.arange(10)) == [(0, 10, 9)]
