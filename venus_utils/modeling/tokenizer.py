"""A small byte-level BPE tokenizer trained offline, with Qwen3's special tokens and chat template.

It is built like Qwen3's: NFC normalisation, the Qwen2 pre-tokenizer regex (which puts every digit in its own
piece, so a year is four tokens that the model can copy one by one), byte-level BPE, and the 26 Qwen3 special
tokens appended *after* the learned vocabulary (Qwen3 has them at ids 151643-151668).  ``<think>``,
``<tool_call>``, ``<tool_response>`` and their closers are single tokens that are *not* "special" (as in Qwen3),
so ``decode(..., skip_special_tokens=True)`` keeps them and the agent loop can parse the text.

Why the pieces are short: a tiny model copies entity names from tool output well only when the names break into
frequent, shared sub-word pieces.  A vocabulary trained on the world's pages would give every name of that world
its own rare token, so the pieces are capped at ``max_token_length`` characters (default 4): names fall into
syllable-sized pieces the model sees everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from ..core.defaults import stage_defaults
from ..core.paths import SETUP_STAGE
from .chat_template import QWEN3_THINKING_TEMPLATE

# Qwen3's added tokens in id order (151643..151668); ``special`` as in Qwen3's tokenizer_config.json.
QWEN3_ADDED_TOKENS: tuple[tuple[str, bool], ...] = (
    ("<|endoftext|>", True),
    ("<|im_start|>", True),
    ("<|im_end|>", True),
    ("<|object_ref_start|>", True),
    ("<|object_ref_end|>", True),
    ("<|box_start|>", True),
    ("<|box_end|>", True),
    ("<|quad_start|>", True),
    ("<|quad_end|>", True),
    ("<|vision_start|>", True),
    ("<|vision_end|>", True),
    ("<|vision_pad|>", True),
    ("<|image_pad|>", True),
    ("<|video_pad|>", True),
    ("<tool_call>", False),
    ("</tool_call>", False),
    ("<|fim_prefix|>", False),
    ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False),
    ("<|fim_pad|>", False),
    ("<|repo_name|>", False),
    ("<|file_sep|>", False),
    ("<tool_response>", False),
    ("</tool_response>", False),
    ("<think>", False),
    ("</think>", False),
)

# The Qwen2/Qwen3 pre-tokenizer split pattern (tokenizer.json of Qwen3): contractions, letters with one optional
# leading non-letter, single digits, punctuation runs, newlines, spaces.
QWEN_SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

PAD_TOKEN = "<|endoftext|>"
EOS_TOKEN = "<|im_end|>"
#: The smallest vocabulary :func:`train_tokenizer` takes: the 256 byte symbols and a few learned pieces.
MIN_VOCAB_SIZE = 300
#: The vocabulary the tiny model is built with where none is given: notebook 00's ``tokenizer_vocab_size``.
VOCAB_SIZE: int = stage_defaults(SETUP_STAGE)["tokenizer_vocab_size"]


def train_tokenizer(
    texts: Iterable[str], vocab_size: int = VOCAB_SIZE, max_token_length: int | None = 4, min_frequency: int = 2
):
    """Train the byte-level BPE on ``texts`` and return a transformers fast tokenizer with the chat template.

    ``vocab_size`` counts the learned pieces plus the 256 bytes; the 26 Qwen3 added tokens come on top.
    """
    from transformers import PreTrainedTokenizerFast

    if vocab_size < MIN_VOCAB_SIZE:
        raise ValueError(f"vocab_size={vocab_size} is too small: the 256 byte symbols alone need 256 entries")
    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN_SPLIT_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        max_token_length=max_token_length,
        special_tokens=[],
    )
    tok.train_from_iterator(_strip_added(texts), trainer=trainer)
    learned = tok.get_vocab_size()
    if learned < vocab_size:  # BPE stops when no pair is left to merge: say why the vocabulary is smaller
        print(
            f"[tokenizer] learned {learned} entries, not the {vocab_size} asked for: the corpus has no more pieces of "
            f"at most {max_token_length} characters seen at least {min_frequency} times. A larger world "
            "(world_size, n_worlds) or a larger max_token_length gives more; the model's embedding is sized to "
            "what was learned"
        )
    for text, special in QWEN3_ADDED_TOKENS:  # one at a time: ids follow Qwen3's order; add_tokens keeps special=False
        token = AddedToken(text, special=special, normalized=False, lstrip=False, rstrip=False, single_word=False)
        (tok.add_special_tokens if special else tok.add_tokens)([token])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN,
        bos_token=None,
        unk_token=None,
        model_max_length=131072,
        padding_side="right",
        split_special_tokens=False,
        clean_up_tokenization_spaces=False,
    )
    fast.chat_template = QWEN3_THINKING_TEMPLATE
    return fast


def _strip_added(texts: Iterable[str]) -> Iterable[str]:
    """The training text without the added tokens (they are single tokens; BPE must not learn pieces of them)."""
    for text in texts:
        for added, _ in QWEN3_ADDED_TOKENS:
            if added in text:
                text = text.replace(added, "\n")
        yield text
