"""Agentic SFT: DR-Venus's loss mask on whole trajectories, exact batching, and one trainer with two engines.

from venus_utils.sft import SFTConfig, examples_from_parquet, train_sft
train = examples_from_parquet("runs/cpu/02_turn_aware_resampling/train.parquet", tokenizer, max_length=4096)
result = train_sft(SFTConfig(...), "runs/cpu/00_setup/tiny_model", train.rows, "runs/cpu/03_sft_unsloth")
"""

from .batching import BATCHING_MODES, LOSS_WEIGHTINGS, Collator, LengthGroupedSampler, masked_lm_loss
from .config import SFTConfig
from .data import (
    IGNORE,
    ConversationError,
    ExampleSet,
    build_examples,
    conversation_segments,
    examples_from_parquet,
    loss_mask_html,
    read_sft_parquet,
    tokenize_conversation,
    trained_spans,
)
from .trainer import SFTResult, export_model, launch_sft, prepare_engine, resolve_engine, train_sft

__all__ = [
    "BATCHING_MODES",
    "IGNORE",
    "LOSS_WEIGHTINGS",
    "Collator",
    "ConversationError",
    "ExampleSet",
    "LengthGroupedSampler",
    "SFTConfig",
    "SFTResult",
    "build_examples",
    "conversation_segments",
    "examples_from_parquet",
    "launch_sft",
    "export_model",
    "loss_mask_html",
    "masked_lm_loss",
    "prepare_engine",
    "read_sft_parquet",
    "resolve_engine",
    "tokenize_conversation",
    "trained_spans",
    "train_sft",
]
