"""The DR-Venus agent loop (``RL/scrl/llm_agent/dr_agent_loop.py`` and ``Inference/run_demo.py``), one visible loop.

    messages = [system prompt with the tools and the date, question]
    for each step:
        stop on the time limit; on the last step or past the context budget, replace the latest tool
        response by a forcing note wrapped in <tool_response> (a plain user message would make the Qwen3
        template drop the reasoning of earlier turns) and make this the last step
        generate a turn (retrying on API failure, repetition, parse error or a duplicate call, if enabled)
        repair the tags, append the assistant message
        answer -> done | tool call -> run the tool, append <tool_response>result</tool_response>
        malformed -> append the malformed-turn message

Every rollout returns a :class:`Rollout`: DR-Venus's inference record (termination codes answered /
answered_token_limit / token_limit_no_answer / answered_max_steps / max_steps / timeout / llm_error /
exception) plus per-turn timings and, with a tokenizer, the exact token ids (``prompt_ids``,
``completion_ids``, ``completion_mask`` of generated tokens, and the IG turn ``boundaries``).
"""

from __future__ import annotations

import asyncio
import random
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from ..core import protocol
from ..core.protocol import (
    THINK_RE,
    turn_format_error,  # DR-Venus's turn format check, recorded per turn
)
from .backends import Generation, Sampling
from .conversation import Conversation


@dataclass
class AgentConfig:
    """Loop settings; defaults are DR-Venus's inference demo (``run_demo.py``), :meth:`rl` gives its RL rollout."""

    max_turns: int = protocol.MAX_TURNS  # assistant turns (the last one is forced to answer)
    context_limit: int = 240_000  # force a final answer when the context exceeds this many tokens
    max_new_tokens: int = protocol.INFERENCE_TOKENS_PER_TURN  # per turn (RL: protocol.RL_TOKENS_PER_TURN)
    temperature: float = 1.0
    top_p: float = 0.95
    top_k: int | None = 20  # RL: off
    presence_penalty: float = 1.1  # OpenAI-compatible servers only; RL: 0
    stop: tuple[str, ...] = ("<tool_response>",)  # hallucinated observations end the turn (RL: none)
    time_limit_s: float = 9000.0  # per question
    attempts: int = 5  # generations per turn when a retry condition hits (1 = no retries, as in RL)
    retry_on: tuple[str, ...] = ("llm_error", "repetition", "parse_error", "duplicate")
    backoff_s: float = 1.0  # first back-off after an API failure (doubles, capped at 30 s)
    reject_unknown_tools: bool = True  # inference rejects them as parse errors; RL lets the tool say "not found"
    malformed_message: str = protocol.MALFORMED_INFERENCE  # RL: protocol.MALFORMED_RL
    current_date: str = protocol.DEFAULT_DATE
    system_prompt_style: str = "dr-venus"  # dr-venus (exact) | compact (offline profiles; as the SFT data's cleaner)
    tag_repair: str = "inference"  # how an unclosed <think> is closed (protocol.repair_tags); RL: "training"

    def __post_init__(self):
        protocol.check_system_prompt_style(self.system_prompt_style)
        if self.tag_repair not in protocol.REPAIR_MODES:
            raise ValueError(f"tag_repair must be one of {protocol.REPAIR_MODES}, got {self.tag_repair!r}")

    @classmethod
    def rl(cls, **overrides) -> AgentConfig:
        """DR-Venus's RL rollout (``dr_agent_loop.py``): 8192 tokens/turn, no top-k, no presence penalty, no
        retries, no stop strings, unknown tools allowed, the RL malformed message, context 261000 - 8192, and its
        tag repair (an unclosed ``<think>`` is closed at the end of the turn: a call inside it is penalised)."""
        values = dict(
            max_new_tokens=protocol.RL_TOKENS_PER_TURN,
            top_k=None,
            presence_penalty=0.0,
            stop=(),
            attempts=1,
            reject_unknown_tools=False,
            malformed_message=protocol.MALFORMED_RL,
            context_limit=protocol.RL_CONTEXT_TOKENS - protocol.RL_TOKENS_PER_TURN,
            tag_repair="training",
        )
        return cls(**{**values, **overrides})

    def sampling(self) -> Sampling:
        return Sampling(
            self.max_new_tokens, self.temperature, self.top_p, self.top_k, self.presence_penalty, self.stop
        )


@dataclass
class Rollout:
    question: str
    messages: list[dict] = field(default_factory=list)
    prediction: str | None = None
    termination: str = ""
    turns: int = 0
    parse_error_count: int = 0
    tool_call_count: int = 0
    dedup_count: int = 0
    final_token_count: int = 0
    elapsed_seconds: float = 0.0
    turn_log: list[dict] = field(default_factory=list)  # per turn: kind, tool, timings, tokens, attempts, forced
    prompt_ids: list[int] | None = None
    completion_ids: list[int] | None = None
    completion_mask: list[int] | None = None  # 1 = a token the model sampled
    boundaries: list[dict] = field(default_factory=list)  # per turn: context_len (tokens before it), n_messages, tool
    error: str | None = None
    traceback: str | None = None

    def to_dict(self, token_ids: bool = True) -> dict:
        out = asdict(self)
        if not token_ids:
            for key in ("prompt_ids", "completion_ids", "completion_mask"):
                out.pop(key)
        return out


def prediction_of(messages: list[dict]) -> str | None:
    """The ``<answer>`` of the last assistant message, else that message without its reasoning."""
    for msg in reversed(messages):
        if msg["role"] == "assistant":
            answer = protocol.extract_answer(THINK_RE.sub("", msg["content"]))
            return answer if answer else THINK_RE.sub("", msg["content"]).strip() or None
    return None


async def _generate_turn(backend, conv: Conversation, cfg: AgentConfig, seen: set, r: Rollout, think_prefix: str):
    """One assistant turn with DR-Venus's retries; returns (generation, repaired text, parsed turn, attempts)
    or None when the model API failed on every attempt."""
    allowed = ("search", "visit") if cfg.reject_unknown_tools else None
    attempts = max(1, cfg.attempts)
    for attempt in range(attempts):
        last = attempt == attempts - 1
        gen: Generation = await backend.generate(conv, cfg.sampling())
        if gen.error or not gen.text.strip():
            if not last and "llm_error" in cfg.retry_on:
                await asyncio.sleep(min(cfg.backoff_s * 2**attempt + random.random() * cfg.backoff_s, 30.0))
                continue
            if gen.error or gen.ids is None:
                r.error = gen.error or "the model returned an empty reply"  # why the rollout ends in llm_error
                return None
        if not last and "repetition" in cfg.retry_on and protocol.is_repetitive(gen.text):
            continue
        raw = gen.text if gen.text.lstrip().startswith("<think>") else think_prefix + gen.text
        text = protocol.repair_tags(raw, cfg.tag_repair)
        turn = protocol.parse_turn(text, allowed)
        if turn.kind == "error":
            r.parse_error_count += 1
            if not last and "parse_error" in cfg.retry_on:
                continue
        elif turn.kind == "call" and protocol.call_signature(turn.call) in seen:
            r.dedup_count += 1
            if not last and "duplicate" in cfg.retry_on:
                continue
        return gen, text, turn, attempt + 1
    return None  # pragma: no cover


#: how a rollout ends when a forced turn (``None``: an ordinary one) answers, or when a forced turn does not
ANSWERED = {None: "answered", "token_limit": "answered_token_limit", "max_steps": "answered_max_steps"}
NOT_ANSWERED = {"token_limit": "token_limit_no_answer", "max_steps": "max_steps"}
FORCE_NOTES = {"token_limit": protocol.FORCE_CONTEXT, "max_steps": protocol.FORCE_MAX_STEPS}


def _forced(step: int, conv: Conversation, cfg: AgentConfig) -> str | None:
    """Why this turn must answer (the context is full, or it is the last turn), or None."""
    if step > 0 and len(conv) > cfg.context_limit:
        return "token_limit"
    if step > 0 and step == cfg.max_turns - 1:
        return "max_steps"
    return None


def _turn_record(step: int, turn, text: str, gen: Generation, gen_s: float, attempts: int, forced) -> dict:
    """The turn log entry of one generated turn (``tool_s`` is filled in when its tool has run)."""
    return {
        "step": step,
        "kind": turn.kind,
        "tool": turn.call.name if turn.call else None,
        "arguments": turn.call.arguments if turn.kind == "call" else None,
        "error": turn.error,
        "format_error": turn_format_error(text, final=turn.kind == "answer"),
        "gen_s": round(gen_s, 4),
        "tool_s": 0.0,
        "new_tokens": len(gen.ids) if gen.ids is not None else None,
        "finish_reason": gen.finish_reason,
        "attempts": attempts,
        "forced": forced,
    }


async def _act(turn, tools: Any, conv: Conversation, cfg: AgentConfig, r: Rollout, seen: set, log: dict) -> None:
    """The environment's reply to a turn that did not answer: its tool's result, or the malformed-turn note."""
    if turn.kind != "call":
        conv.add_user(protocol.wrap_tool_response(cfg.malformed_message))
        return
    r.tool_call_count += 1
    seen.add(protocol.call_signature(turn.call))
    r.boundaries[-1]["tool"] = turn.call.name
    t_tool = time.monotonic()
    result = await tools.run(turn.call)
    log["tool_s"] = round(time.monotonic() - t_tool, 4)
    conv.add_user(protocol.wrap_tool_response(result))


def _finish(r: Rollout, conv: Conversation, start: float) -> Rollout:
    """The rollout's messages, prediction, sizes and (with a tokenizer) its exact token ids and sampled-token mask."""
    r.messages = conv.messages
    r.prediction = prediction_of(conv.messages) if r.termination != "exception" else None
    r.final_token_count = len(conv)
    r.elapsed_seconds = round(time.monotonic() - start, 3)
    if conv.chat is not None:
        p = conv.prompt_len
        r.prompt_ids, r.completion_ids, r.completion_mask = conv.ids[:p], conv.ids[p:], conv.mask[p:]
    return r


async def run_agent(
    question: str,
    backend: Any,
    tools: Any,
    cfg: AgentConfig | None = None,
    on_event: Callable[[dict], None] | None = None,
) -> Rollout:
    """Research ``question`` with ``backend`` (a model) and ``tools`` (a :class:`venus_utils.tools.Toolbox`).

    ``on_event`` (optional) sees the rollout as it happens: ``{"event": "message", "step", "message"}`` for every
    message of the conversation when it is added (the system prompt and question first; a forcing note that replaces
    the last tool response comes again as a message), ``{"event": "generate", "step", "forced"}`` before each turn is
    generated (``python -m venus_utils.agent ask`` prints them)."""
    cfg = cfg or AgentConfig()
    start, r = time.monotonic(), Rollout(question)
    chat = getattr(backend, "chat", None)
    system = protocol.system_prompt(cfg.current_date, style=cfg.system_prompt_style)
    conv = Conversation([{"role": "system", "content": system}, {"role": "user", "content": question}], chat)
    notify = on_event or (lambda event: None)

    def added(step):  # the message just added to the conversation, for on_event
        notify({"event": "message", "step": step, "message": dict(conv.messages[-1])})

    for msg in conv.messages:
        notify({"event": "message", "step": None, "message": dict(msg)})
    think_prefix = chat.think_prefix if chat is not None else "<think>\n"
    seen: set[str] = set()  # the tool calls made so far (a repeated one is retried)
    try:
        for step in range(cfg.max_turns):
            if time.monotonic() - start > cfg.time_limit_s:
                r.termination = "timeout"
                break
            forced = _forced(step, conv, cfg)
            if forced:  # the last tool response is replaced by a note that asks for the answer now
                conv.replace_last_user(protocol.wrap_tool_response(FORCE_NOTES[forced]))
                added(step)
            boundary = {"step": step, "context_len": len(conv), "n_messages": len(conv.messages), "tool": None}
            r.boundaries.append(boundary)  # the context this turn is generated from (its tool: filled in by _act)
            notify({"event": "generate", "step": step, "forced": forced})
            t_gen = time.monotonic()
            out = await _generate_turn(backend, conv, cfg, seen, r, think_prefix)
            gen_s = time.monotonic() - t_gen
            if out is None:  # the model API failed on every attempt
                r.termination = NOT_ANSWERED.get(forced, "llm_error")
                break
            gen, text, turn, attempts = out
            conv.add_assistant(text, gen.ids)
            added(step)
            r.turns += 1
            log = _turn_record(step, turn, text, gen, gen_s, attempts, forced)
            r.turn_log.append(log)
            if turn.kind == "answer":
                r.termination = ANSWERED[forced]
                break
            if forced:
                r.termination = NOT_ANSWERED[forced]
                break
            await _act(turn, tools, conv, cfg, r, seen, log)
            added(step)
        else:  # pragma: no cover - the last step always breaks
            r.termination = "max_steps"
    except Exception as exc:
        r.termination, r.error, r.traceback = "exception", f"{type(exc).__name__}: {exc}", traceback.format_exc()
    return _finish(r, conv, start)


async def run_many(
    questions: list[str], backend: Any, tools: Any, cfg: AgentConfig | None = None, concurrency: int = 8
) -> list[Rollout]:
    """Rollouts for ``questions`` (repeat a question n times for a GRPO group), ``concurrency`` at a time; a
    transformers backend batches the concurrent generations."""
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(q: str) -> Rollout:
        async with gate:
            return await run_agent(q, backend, tools, cfg)

    return list(await asyncio.gather(*(one(q) for q in questions)))
