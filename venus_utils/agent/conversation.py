"""The conversation of one rollout, as messages *and* as the exact token ids the policy saw and sampled.

DR-Venus re-renders the training sequence from the message list after the episode (``dr_agent_loop.py``), so tag
repair, template reformatting or a reasoning-stripping forced message put tokens under the loss that the
model never generated.  Here the context is built by concatenation instead:

    prompt ids (template: system + question + generation prompt)
    + sampled ids of turn 1                          mask 1
    + glue: end-of-turn + tool-response user message + generation prompt (template text)   mask 0
    + sampled ids of turn 2                          mask 1  ...

so ``ids`` is exactly what the model conditioned on, and ``mask`` marks the tokens it generated.  The
template pieces are measured once from the tokenizer's own chat template with probe conversations.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..core.protocol import render_chat

_PROBE = "VENUSPROBE"


class ChatTokens:
    """What the chat template puts around turns, measured from ``tokenizer.apply_chat_template``."""

    def __init__(self, tokenizer: Any):
        self.tok = tokenizer
        user = [{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}]
        with_gen = self.render(user, add_generation_prompt=True)
        self.generation_prompt = with_gen[len(self.render(user)) :]
        cut = self.generation_prompt.find("<think>")
        self.think_prefix = self.generation_prompt[cut:] if cut != -1 else ""  # the reasoning opener the template adds
        probe = user + [{"role": "assistant", "content": f"<think>\nr\n</think>\n\n{_PROBE}"}]
        rendered = self.render(probe)
        self.end_of_turn = rendered[rendered.rfind(_PROBE) + len(_PROBE) :]  # e.g. "<|im_end|>\n"
        self._probe, self._probe_text = probe, rendered
        self.eos_ids = self._eos_ids()

    def render(self, messages: list[dict], add_generation_prompt: bool = False) -> str:
        return render_chat(self.tok, messages, add_generation_prompt=add_generation_prompt)

    def encode(self, text: str) -> list[int]:
        return list(self.tok.encode(text, add_special_tokens=False))

    def decode(self, ids: list[int]) -> str:
        return self.tok.decode(ids, skip_special_tokens=False)

    def _eos_ids(self) -> set[int]:
        ids = set()
        for token in (self.tok.eos_token, "<|im_end|>", "<|endoftext|>", self.end_of_turn.strip()):
            if token:
                tid = self.tok.convert_tokens_to_ids(token)
                if isinstance(tid, int) and tid >= 0 and tid != self.tok.unk_token_id:
                    ids.add(tid)
        return ids

    def prompt_ids(self, messages: list[dict]) -> list[int]:
        return self.encode(self.render(messages, add_generation_prompt=True))

    def user_glue(self, content: str, after: list[int]) -> list[int]:
        """Tokens between a sampled turn ``after`` and the next generation: rest of the end-of-turn text, the
        user message and the generation prompt."""
        tail = self.decode(after[-1:]) if after and after[-1] in self.eos_ids else ""
        rest = self.end_of_turn[len(tail) :] if tail and self.end_of_turn.startswith(tail) else self.end_of_turn
        full = self.render(self._probe + [{"role": "user", "content": content}], add_generation_prompt=True)
        if full.startswith(self._probe_text):
            return self.encode(rest + full[len(self._probe_text) :])
        alone = self.render([{"role": "user", "content": content}], add_generation_prompt=True)  # pragma: no cover
        return self.encode(rest + alone)


@dataclass
class Conversation:
    """Messages plus (with a tokenizer) token segments ``(ids, generated?)``."""

    messages: list[dict]
    chat: ChatTokens | None = None
    segments: list[tuple[list[int], bool]] = field(default_factory=list)

    def __post_init__(self):
        if self.chat is not None:
            self.segments = [(self.chat.prompt_ids(self.messages), False)]

    @property
    def ids(self) -> list[int]:
        return [t for seg, _ in self.segments for t in seg]

    @property
    def mask(self) -> list[int]:
        return [int(gen) for seg, gen in self.segments for _ in seg]

    @property
    def prompt_len(self) -> int:
        return len(self.segments[0][0]) if self.segments else 0

    def __len__(self) -> int:
        """Context length in tokens (about 4 characters per token without a tokenizer)."""
        if self.chat is not None:
            return sum(len(seg) for seg, _ in self.segments)
        return sum(len(m["content"]) for m in self.messages) // 4

    def add_assistant(self, content: str, sampled_ids: list[int] | None) -> None:
        self.messages.append({"role": "assistant", "content": content})
        if self.chat is not None:
            self.segments.append((list(sampled_ids or []), True))

    def add_user(self, content: str) -> None:
        self.messages.append({"role": "user", "content": content})
        if self.chat is not None:
            after = self.segments[-1][0] if self.segments and self.segments[-1][1] else []
            self.segments.append((self.chat.user_glue(content, after), False))

    def replace_last_user(self, content: str) -> None:
        """Swap the latest user message (a tool response) for ``content`` (a forced-ending note)."""
        if self.messages[-1]["role"] != "user" or len(self.messages) < 3:
            raise ValueError("the last message is not a tool response")
        self.messages.pop()
        if self.chat is not None:
            self.segments.pop()
        self.add_user(content)
