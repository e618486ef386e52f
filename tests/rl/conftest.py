"""Fixtures for the RL tests: the project's micro Qwen3 (venus_utils.modeling) with a small trained tokenizer."""

from __future__ import annotations

import pytest


def build_micro_lm(seed: int = 0, vocab_size: int = 400):
    """A random 2-layer, hidden-64 Qwen3 and a BPE tokenizer (Qwen3 special tokens, Qwen3-Thinking template)."""
    from venus_utils.modeling import build_model, synthetic_conversations, train_tokenizer

    texts = [m["content"] for conv in synthetic_conversations(12, seed=seed) for m in conv["messages"]]
    tokenizer = train_tokenizer(texts, vocab_size=vocab_size)
    model = build_model(tokenizer, "micro", max_position_embeddings=4096, seed=seed).eval()
    return model, tokenizer


@pytest.fixture(scope="session")
def tiny_lm():
    return build_micro_lm()
