"""Information gain: KV-cache method vs naive per-boundary recomputation, side by side.

``venus_utils.rl.info_gain.boundary_values_kv`` (DR-Venus's ``compute_ig_with_kv_cache``: one forward over the
trajectory, then the cache cropped at each boundary and only the pseudo answer fed) against
``boundary_values_naive`` (one full forward over context + pseudo answer per boundary).

A trajectory of >= 20 turns (DR-Venus-format search/visit turns with tool responses) is scored at every turn
boundary by the tiny Qwen3 with both methods; the script prints both wall times, the speed-up (target >= 5x)
and the largest absolute difference between the two sets of values.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_info_gain.py [--turns 24] [--size tiny] [--repeats 3]
"""

from __future__ import annotations

import argparse
import random
import time


def synthetic_messages(turns: int, seed: int = 0) -> list[dict]:
    """System + question, ``turns - 1`` tool turns with their responses, and a final answer turn."""
    from venus_utils import protocol

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


if __name__ == "__main__":
    main()
