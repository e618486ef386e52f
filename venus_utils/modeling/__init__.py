"""The tiny offline model: a Qwen3-architecture causal LM, a locally trained BPE tokenizer with every Qwen3
special token, and the Qwen3-4B-Thinking-2507 chat template.

    from venus_utils.modeling import build_tiny_model
    build_tiny_model("runs/cpu/00_setup/tiny_model", "runs/cpu/00_setup/world", size="tiny")

or ``python -m venus_utils.modeling tiny --out DIR [--size tiny] [--world DIR]``.
"""

from .chat_template import GENERATION_PROMPT, QWEN3_THINKING_TEMPLATE, QWEN3_THINKING_TRAINING_TEMPLATE
from .corpus import corpus_texts, synthetic_conversation, synthetic_conversations
from .model import METADATA, SIZES, TinySize, build_model, build_tiny_model, load_metadata
from .tokenizer import QWEN3_ADDED_TOKENS, train_tokenizer

__all__ = [
    "GENERATION_PROMPT",
    "METADATA",
    "QWEN3_ADDED_TOKENS",
    "QWEN3_THINKING_TEMPLATE",
    "QWEN3_THINKING_TRAINING_TEMPLATE",
    "SIZES",
    "TinySize",
    "build_model",
    "build_tiny_model",
    "corpus_texts",
    "load_metadata",
    "synthetic_conversation",
    "synthetic_conversations",
    "train_tokenizer",
]
