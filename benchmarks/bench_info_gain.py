"""Information gain: KV-cache method vs naive per-boundary recomputation, side by side.

``venus_utils.rl.info_gain.boundary_values_kv`` (DR-Venus's ``compute_ig_with_kv_cache``: one forward over the
trajectory, then the cache cropped at each boundary and only the pseudo answer fed) against
``boundary_values_naive`` (one full forward over context + pseudo answer per boundary).

A trajectory of >= 20 turns (DR-Venus-format search/visit turns with tool responses) is scored at every turn
boundary by the tiny Qwen3 with both methods; the script prints both wall times, the speed-up (target >= 5x)
and the largest absolute difference between the two sets of values.

Then an RL step's worth of short trajectories (``--episodes``, the cpu profile's 16 rollouts of 2-6 turns): the
KV method one episode at a time against ``boundary_values_batched`` (all episodes and boundaries in two forwards,
the probes of a trajectory side by side over its one cache: the trainer now) and against the batched method as it
was (``copying``: each boundary's probe on its own copy of its trajectory's cache), with the share of the machine's
fp32 matmul peak (measured in this run) that the work needed (every token once, the pseudo answer once per
boundary) reaches.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_info_gain.py [--turns 24] [--size tiny] [--repeats 3]
"""

from __future__ import annotations

import argparse
import random
import time


def synthetic_messages(turns: int, seed: int = 0) -> list[dict]:
    """System + question, ``turns - 1`` tool turns with their responses, and a final answer turn."""
    from venus_utils.core import protocol

    rng = random.Random(seed)
    words = "river county village report health statistics program year river medway kent michigan".split()
    messages = [
        {"role": "system", "content": protocol.system_prompt(protocol.DEFAULT_DATE)},
        {"role": "user", "content": "Which year were both reports published?"},
    ]
    for t in range(turns - 1):
        text = " ".join(rng.choice(words) for _ in range(40))
        if t % 2 == 0:
            call = protocol.tool_turn(f"Search step {t}: {text[:120]}", "search", {"query": [text[:40]]})
        else:
            call = protocol.tool_turn(
                f"Visit step {t}: {text[:120]}", "visit", {"url": [f"https://w.local/{t}"], "goal": "year"}
            )
        messages.append({"role": "assistant", "content": call})
        messages.append({"role": "user", "content": protocol.wrap_tool_response(f"Result {t}: {text}")})
    messages.append({"role": "assistant", "content": protocol.answer_turn("Both are from 2019.", "2019")})
    return messages


def main() -> None:
    import torch

    from venus_utils.modeling import build_model, synthetic_conversations, train_tokenizer
    from venus_utils.rl.info_gain import boundary_values_kv, boundary_values_naive, pseudo_answer
    from venus_utils.rl.rewards import episode_from_messages

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=24)
    ap.add_argument("--size", default="tiny", help="tiny-model size: micro | tiny | small")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--episodes", type=int, default=16, help="episodes of the RL-step scenario")
    args = ap.parse_args()
    if args.turns < 20:
        raise SystemExit("--turns must be >= 20")

    texts = [m["content"] for c in synthetic_conversations(30) for m in c["messages"]]
    tokenizer = train_tokenizer(texts, vocab_size=1024)
    model = build_model(tokenizer, args.size, max_position_embeddings=32768).eval()
    ep = episode_from_messages(tokenizer, synthetic_messages(args.turns), "2019")
    pseudo = pseudo_answer(tokenizer, "2019")
    ids, bounds = ep.input_ids, ep.boundaries
    print(
        f"trajectory: {len(ids)} tokens, {len(bounds)} turn boundaries, model {args.size} "
        f"({sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters), "
        f"torch threads {torch.get_num_threads()}"
    )

    def timed(fn):
        best, out = float("inf"), None
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            out = fn()
            best = min(best, time.perf_counter() - t0)
        return best, out

    t_naive, naive = timed(lambda: boundary_values_naive(model, ids, bounds, pseudo))
    t_kv, kv = timed(lambda: boundary_values_kv(model, ids, bounds, pseudo))
    diff = max(abs(a - b) for a, b in zip(naive, kv))
    print(f"naive recomputation: {t_naive:.3f} s   KV cache: {t_kv:.3f} s   (best of {args.repeats})")
    print(f"speed-up: {t_naive / t_kv:.1f}x (target >= 5x)")
    print(f"largest |naive - kv|: {diff:.2e} (tests require < 1e-4)")
    step_scenario(model, tokenizer, args, timed)


def step_scenario(model, tokenizer, args, timed) -> None:
    """An RL step's episodes: the per-episode KV method against the batched one."""
    from venus_utils.core.perf import flops_per_token, machine_peak, utilisation
    from venus_utils.rl.info_gain import boundary_values_batched, boundary_values_kv, pseudo_answer
    from venus_utils.rl.rewards import episode_from_messages

    items = []
    for k in range(args.episodes):
        turns = 2 + k % 5
        ep = episode_from_messages(tokenizer, synthetic_messages(turns, seed=k), "2019")
        items.append((ep.input_ids, ep.boundaries, pseudo_answer(tokenizer, "2019")))
    peak = machine_peak()
    t_one, one = timed(lambda: [boundary_values_kv(model, i, b, p) for i, b, p in items])
    t_copy, copied = timed(lambda: copying_batched(model, items))
    t_batch, batched = timed(lambda: boundary_values_batched(model, items))
    diff = max(abs(a - b) for x, y in zip(one, batched) for a, b in zip(x, y))
    diff_copy = max(abs(a - b) for x, y in zip(copied, batched) for a, b in zip(x, y))
    tokens = sum(len(i) + len(b) * len(p.ids) for i, b, p in items)
    mean_len = sum(len(i) for i, _, _ in items) / len(items)
    per_token = flops_per_token(model.config, context=mean_len / 2)
    print(
        f"\nRL step: {len(items)} episodes, {sum(len(b) for _, b, _ in items)} boundaries, "
        f"{sum(len(i) for i, _, _ in items)} tokens; {peak.describe()}"
    )
    for label, t in (("one episode at a time (KV)", t_one), ("copying", t_copy), ("batched", t_batch)):
        gflops, share = utilisation(tokens, t, per_token, peak.fp32_gflops)
        print(f"{label:>28}: {t:.3f} s  ({gflops:.2f} GFLOP/s, {100 * share:.1f}% of the fp32 peak)")
    print(f"speed-up batched / one at a time: {t_one / t_batch:.1f}x; largest difference {diff:.2e}")
    print(f"speed-up batched / copying: {t_copy / t_batch:.1f}x; largest difference {diff_copy:.2e}")


def copying_batched(model, items, max_rows: int = 64) -> list[list[float]]:
    """The batched method before the probes shared their trajectory's cache (the baseline): one forward fills every
    trajectory's cache, then every boundary's probe runs on its own copy of it."""
    import torch

    from venus_utils.modeling.kv_decode import KVDecoder
    from venus_utils.rl.info_gain import _gt_mean_logprob

    dec = KVDecoder(model)
    out: list[list[float]] = [[] for _ in items]
    live = [k for k, (_, points, _) in enumerate(items) if points]
    with torch.no_grad():
        for start in range(0, len(live), max_rows):
            group = live[start : start + max_rows]
            prefix = [max(items[k][1]) - 1 for k in group]
            width = max(max(prefix), 1)
            n_keep = max(max(items[k][2].gt_index) + 1 for k in group)
            caches = dec.new_caches(len(group), width + n_keep)
            ids = torch.zeros(len(group), width, dtype=torch.long)
            for i, (k, n) in enumerate(zip(group, prefix)):
                ids[i, :n] = torch.tensor(list(items[k][0][:n]), dtype=torch.long)
            positions = torch.arange(width)[None, :].expand(len(group), width)
            pick = (torch.zeros(1, dtype=torch.long), torch.zeros(1, dtype=torch.long))
            dec.forward(ids, positions, caches, positions.max(1).values + 1, pick)
            rows = [(i, k, b) for i, k in enumerate(group) for b in items[k][1]]
            for r0 in range(0, len(rows), max_rows):
                chunk = rows[r0 : r0 + max_rows]
                owner = torch.tensor([i for i, _, _ in chunk])
                row_caches = [(kc.index_select(0, owner), vc.index_select(0, owner)) for kc, vc in caches]
                x = torch.zeros(len(chunk), n_keep, dtype=torch.long)
                pos = torch.zeros(len(chunk), n_keep, dtype=torch.long)
                for j, (_, k, b) in enumerate(chunk):
                    seq, pseudo = items[k][0], items[k][2]
                    feed = [seq[b - 1]] + pseudo.ids[: max(pseudo.gt_index)]
                    x[j, : len(feed)] = torch.tensor(feed, dtype=torch.long)
                    pos[j] = torch.arange(b - 1, b - 1 + n_keep)
                logits = dec.forward(x, pos, row_caches, pos.max(1).values + 1, "all")
                for j, (_, k, _) in enumerate(chunk):
                    pseudo = items[k][2]
                    out[k].append(_gt_mean_logprob(logits[j], pseudo.ids, pseudo.gt_index, temperature=1.0))
    return out


if __name__ == "__main__":
    main()
