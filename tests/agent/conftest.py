"""A tiny random Qwen3 with a small BPE tokenizer and a Qwen3-Thinking chat template, local to these tests,
and a tiny offline world."""

from __future__ import annotations

import pytest

SPECIAL = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
]

# A Qwen3-Thinking-style template: tool responses as user messages, the generation prompt opens <think>.
FALLBACK_TEMPLATE = (
    "{%- for m in messages %}"
    "{%- if m.role == 'assistant' and '</think>' in m.content %}"
    "{{- '<|im_start|>assistant\\n<think>\\n' + m.content.split('</think>')[0].split('<think>')[-1].strip('\\n')"
    " + '\\n</think>\\n\\n' + m.content.split('</think>')[-1].lstrip('\\n') + '<|im_end|>\\n' }}"
    "{%- else %}{{- '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n<think>\\n' }}{%- endif %}"
)


@pytest.fixture(scope="session")
def world_dir(tmp_path_factory):
    from venus_utils.world import build_world

    out = tmp_path_factory.mktemp("world")
    build_world(out, seed=3, size="tiny", progress=False, search_top_k=3, snippet_chars=60, visit_max_sentences=1)
    return out


@pytest.fixture(scope="session")
def tiny_tokenizer(world_dir):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from venus_utils.core import protocol
    from venus_utils.core.io import read_jsonl

    texts = [p["text"] for p in read_jsonl(world_dir / "pages.jsonl")] + [
        protocol.system_prompt(protocol.DEFAULT_DATE)
    ]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=SPECIAL,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(texts, trainer)
    try:
        from venus_utils.modeling.chat_template import QWEN3_THINKING_TEMPLATE as template
    except ImportError:  # the modeling package is optional for these tests
        template = FALLBACK_TEMPLATE
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", chat_template=template
    )


def random_qwen3(vocab_size: int, **extra):
    """A randomly initialised 2-layer Qwen3 (seed 0) for the generation tests."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen3Config(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        **extra,
    )
    return Qwen3ForCausalLM(cfg).eval()


@pytest.fixture(scope="session")
def tiny_lm(tiny_tokenizer):
    return random_qwen3(
        len(tiny_tokenizer),
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        eos_token_id=tiny_tokenizer.eos_token_id,
        pad_token_id=tiny_tokenizer.pad_token_id,
    )
