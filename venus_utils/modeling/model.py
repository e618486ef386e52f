"""The tiny Qwen3: same architecture as DR-Venus's Qwen3-4B-Thinking-2507, a few million parameters.

Built from a config with random weights, nothing downloaded.  The saved folder is a normal Hugging Face model
folder (``config.json`` with ``architectures: ["Qwen3ForCausalLM"]``, ``model.safetensors``, ``tokenizer.json``,
the chat template, ``generation_config.json``), so transformers' Auto classes, Unsloth's ``FastLanguageModel`` and
vLLM load it like the real model.

Sizes (``SIZES``): ``micro`` for unit tests; ``tiny`` (~1.6M parameters: hidden 128, 4 layers, head_dim 32, FFN
512, tied embeddings) reached 50% on unseen multi-hop questions after ~32 minutes of SFT on 2 cores in an early
experiment of this project; ``small`` (~7M) learns more per example but is ~3.6x slower per token, too slow for a
30-minute CPU budget.  Qwen3-specific parts are kept: RMSNorm on queries and keys, SwiGLU MLP, grouped-query
attention, RoPE with theta 5e6 (2507 models).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from ..core.checkpoints import seal_model
from ..core.defaults import stage_defaults
from ..core.io import atomic_dir, check_replaceable, write_json
from ..core.paths import SETUP_STAGE
from .corpus import corpus_texts
from .tokenizer import EOS_TOKEN, PAD_TOKEN, VOCAB_SIZE, train_tokenizer


@dataclass(frozen=True)
class TinySize:
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int


SIZES: dict[str, TinySize] = {
    "micro": TinySize(64, 2, 4, 2, 16, 128),
    "tiny": TinySize(128, 4, 4, 2, 32, 512),
    "small": TinySize(256, 6, 8, 4, 32, 1024),
    # Qwen3-0.6B's shape (596M parameters with its 151,936-row vocabulary, ``model_vocab_size``): the GPU check's
    # model (benchmarks/gpu_check.py), never trained to answer anything
    "qwen3-0.6b": TinySize(1024, 28, 16, 8, 128, 3072),
}
#: The size built where none is given: notebook 00's ``tiny_model_size``.
TINY_SIZE: str = stage_defaults(SETUP_STAGE)["tiny_model_size"]

METADATA = "venus_modeling.json"  # what built the folder (size, vocab, corpus size), read by notebooks
TOOL = "venus_utils.modeling"  # what writes a model folder; it replaces only a folder that holds nothing else


def build_model(
    tokenizer,
    size: str | TinySize = "tiny",
    max_position_embeddings: int = 8192,
    seed: int = 0,
    model_vocab_size: int | None = None,
):
    """A randomly initialised ``Qwen3ForCausalLM`` sized for ``tokenizer`` (vocab padded to a multiple of 64), or with
    ``model_vocab_size`` embedding rows (at least the tokenizer's: the rows past it are no token of the tokenizer's,
    as in a real checkpoint whose vocabulary is padded)."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    spec = SIZES[size] if isinstance(size, str) else size
    vocab = -(-len(tokenizer) // 64) * 64
    if model_vocab_size is not None:
        if model_vocab_size < len(tokenizer):
            raise ValueError(f"model_vocab_size={model_vocab_size}: below the tokenizer's {len(tokenizer)} entries")
        vocab = model_vocab_size
    config = Qwen3Config(
        vocab_size=vocab,
        max_position_embeddings=max_position_embeddings,
        rope_theta=5_000_000.0,
        tie_word_embeddings=True,
        rms_norm_eps=1e-6,
        attention_bias=False,
        bos_token_id=tokenizer.convert_tokens_to_ids(PAD_TOKEN),
        eos_token_id=tokenizer.convert_tokens_to_ids(EOS_TOKEN),
        pad_token_id=tokenizer.convert_tokens_to_ids(PAD_TOKEN),
        **asdict(spec),
    )
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config)
    model.generation_config.eos_token_id = [config.eos_token_id, config.pad_token_id]
    model.generation_config.pad_token_id = config.pad_token_id
    model.generation_config.bos_token_id = config.bos_token_id
    return model


def build_tiny_model(
    out_dir: str | Path,
    texts_or_world_dir: Iterable[str] | str | Path | None = None,
    size: str = TINY_SIZE,
    vocab_size: int = VOCAB_SIZE,
    max_token_length: int | None = 4,
    max_position_embeddings: int = 8192,
    seed: int = 0,
    model_vocab_size: int | None = None,
) -> Path:
    """Train the tokenizer, build the model and save both (plus the chat template) to ``out_dir``.

    ``texts_or_world_dir``: a world folder (``pages.jsonl`` + ``trajectories/``, see ``venus_utils.world``), an
    iterable of texts, or None for the built-in corpus (DR-Venus protocol conversations + the shared examples
    when present).  ``model_vocab_size``: the model's embedding rows (:func:`build_model`).  Returns ``out_dir``.
    The folder is written to a temporary sibling and renamed, so a killed build never leaves a half-written model;
    an existing ``out_dir`` is replaced only while it holds nothing but a model this function wrote
    (:func:`venus_utils.core.io.check_replaceable`: else :class:`~venus_utils.core.io.FolderNotOurs`).
    """
    out_dir = Path(out_dir)
    check_replaceable(out_dir, TOOL)  # before the tokenizer is trained
    if size not in SIZES:
        raise ValueError(f"size={size!r}: expected one of {sorted(SIZES)}")
    texts = list(corpus_texts(texts_or_world_dir))
    if not texts:
        raise ValueError(f"{texts_or_world_dir}: no text to train the tokenizer on")
    tokenizer = train_tokenizer(texts, vocab_size=vocab_size, max_token_length=max_token_length)
    model = build_model(
        tokenizer, size, max_position_embeddings=max_position_embeddings, seed=seed, model_vocab_size=model_vocab_size
    )
    with atomic_dir(out_dir, tool=TOOL) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        write_json(
            tmp / METADATA,
            {
                "size": size,
                "architecture": asdict(SIZES[size]),
                "parameters": sum(p.numel() for p in model.parameters()),
                "vocab_size": model.config.vocab_size,
                "tokenizer_entries": len(tokenizer),
                "max_token_length": max_token_length,
                "corpus_texts": len(texts),
                "corpus_chars": sum(len(t) for t in texts),
                "source": str(texts_or_world_dir)
                if isinstance(texts_or_world_dir, (str, Path))
                else "texts"
                if texts_or_world_dir is not None
                else "builtin",
                "seed": seed,
            },
        )
        seal_model(tmp)
    return out_dir


def load_metadata(model_dir: str | Path) -> dict:
    path = Path(model_dir) / METADATA
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
