"""Token accounting with the training tokenizer.

DR-Venus truncates over-long trajectories at training time (``truncation=right``), silently cutting off the
final answer.  The cleaner counts every kept conversation's tokens the way the trainer renders it (the
tokenizer's chat template when it has one, ChatML otherwise) so that ``--max-tokens`` can drop them with
the reason ``too_long`` instead.  Tokenizers load from a local folder or the local hub cache; nothing is downloaded.
"""

from __future__ import annotations

from pathlib import Path

from ..core.protocol import render_chat, safe_messages


def render_chatml(messages: list[dict]) -> str:
    """Qwen's ChatML layout, used when the tokenizer has no chat template."""
    return "".join(f"<|im_start|>{m.get('role')}\n{m.get('content')}<|im_end|>\n" for m in messages)


class TokenCounter:
    """Counts the tokens of a conversation rendered with a local tokenizer's chat template."""

    def __init__(self, path: str | Path):
        local = Path(path).expanduser()
        name = str(local) if local.exists() else str(path)  # a folder, or a hub id already in the local cache
        from transformers import AutoTokenizer  # heavy; only when token accounting is asked for

        try:
            self.tokenizer = AutoTokenizer.from_pretrained(name, local_files_only=True)
        except Exception as exc:
            raise ValueError(
                f"{name}: cannot load a tokenizer: not a tokenizer folder, nor a hub id in the local "
                f"cache (nothing is downloaded) ({type(exc).__name__}: {exc})"
            ) from None
        self.path = name
        self.has_template = bool(getattr(self.tokenizer, "chat_template", None))

    def render(self, messages: list[dict]) -> str:
        if self.has_template:
            return render_chat(self.tokenizer, messages)
        return render_chatml(safe_messages(messages))

    def count_text(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def count(self, messages: list[dict]) -> int:
        return self.count_text(self.render(messages))

    def describe(self) -> str:
        how = "its chat template" if self.has_template else "ChatML (the tokenizer has no chat template)"
        return f"tokens counted with {self.path} rendered with {how}"


_CACHE: dict[str, TokenCounter] = {}


def counter_for(path: str | Path) -> TokenCounter:
    """One :class:`TokenCounter` per path and process (worker processes load it once)."""
    key = str(path)
    if key not in _CACHE:
        _CACHE[key] = TokenCounter(path)
    return _CACHE[key]


def check_tokenizer(path: str | Path | None) -> tuple[str | None, str]:
    """(usable path or None, a sentence saying what token accounting will do)."""
    if path is None:
        return None, "no tokenizer: tokens are not counted and the too_long filter is skipped"
    try:
        counter = counter_for(path)
    except (ValueError, OSError) as exc:
        return None, f"tokenizer unavailable, tokens are not counted and the too_long filter is skipped: {exc}"
    return str(path), counter.describe()
