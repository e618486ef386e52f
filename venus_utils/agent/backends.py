"""Model backends for the agent loop: local transformers ``generate``, OpenAI-compatible servers, scripts.

Every backend answers ``await backend.generate(conversation, sampling) -> Generation``.  Backends with a
tokenizer (``.chat``) return the exact sampled token ids.  ``TransformersBackend`` batches the requests of
concurrent rollouts (a group of RL rollouts, ``--workers`` questions) into one padded ``generate`` call.

Local model folders are loaded by :func:`load_pretrained` only: one ``from_pretrained`` at a time in the process
(transformers patches global state while it loads, so two concurrent loads corrupt each other, sometimes for
the rest of the process) and one model per (folder, device), shared by the backends that use it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from ..core.checkpoints import check_model
from ..core.env import redact, secret
from ..core.protocol import RL_TOKENS_PER_TURN, safe_messages
from .conversation import ChatTokens, Conversation


@dataclass(frozen=True)
class Sampling:
    max_new_tokens: int = RL_TOKENS_PER_TURN
    temperature: float = 1.0
    top_p: float = 0.95
    top_k: int | None = None
    presence_penalty: float = 0.0  # OpenAI-compatible servers only
    stop: tuple[str, ...] = ()


@dataclass
class Generation:
    text: str  # decoded completion, end-of-turn token removed
    ids: list[int] | None = None  # exact sampled ids (including a sampled end-of-turn token)
    finish_reason: str = "stop"  # stop | length | error
    error: str | None = None


def _cut_at_stop(chat: ChatTokens, ids: list[int], stops: tuple[str, ...]) -> tuple[list[int], bool]:
    """Drop the ids from the first stop string on (binary search on decoded prefixes)."""
    text = chat.decode(ids)
    cuts = [text.find(s) for s in stops if s in text]
    if not cuts:
        return ids, False
    target = text[: min(cuts)]
    lo, hi = 0, len(ids)  # the longest prefix of ids that decodes to a prefix of the text before the stop
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if target.startswith(chat.decode(ids[:mid])):
            lo = mid
        else:
            hi = mid - 1
    return ids[:lo], True


def finish_ids(chat: ChatTokens, ids: list[int], stops: tuple[str, ...]) -> Generation:
    """Sampled ids -> Generation: stop strings cut, text decoded without the end-of-turn token.

    A hallucinated ``<tool_response>`` is always cut (DR-Venus's tag repair drops it from the text; dropping it
    from the ids too keeps the context the model sees equal to its messages).
    """
    ids, stopped = _cut_at_stop(chat, ids, tuple(stops) + ("<tool_response>",))
    ended = bool(ids) and ids[-1] in chat.eos_ids
    text = chat.decode(ids[:-1] if ended else ids)
    return Generation(text, ids, "stop" if (ended or stopped) else "length")


# --------------------------------------------------------------------------------------------------------
# Local model folders: loaded once per (folder, device), shared
# --------------------------------------------------------------------------------------------------------
_LOAD_LOCK = threading.Lock()  # one load at a time, process-wide; concurrent loads of one model wait for the first
_CACHE_LOCK = threading.Lock()  # guards the two tables below (held briefly: a cached model never waits for a load)
_LOADED: dict[tuple[str, str], tuple[tuple, weakref.ref, Any]] = {}  # (folder, device) -> (files, model, tokenizer)
_KEPT: OrderedDict[tuple[str, str], Any] = OrderedDict()  # models held although no backend uses them (``keep=True``)
MAX_KEPT_MODELS = 2  # the most models ``keep=True`` holds in memory; the least recently used one is let go


def _folder_files(folder: str) -> tuple:
    """(name, size, mtime) of the folder's files: a folder saved again (a new checkpoint) is loaded again."""
    entries = []
    for f in sorted(Path(folder).iterdir()):
        if f.is_file():
            st = f.stat()
            entries.append((f.name, st.st_size, st.st_mtime_ns))
    return tuple(entries)


def _cached(key: tuple[str, str], files: tuple, keep: bool, loaded: tuple[Any, Any] | None = None):
    """The loaded ``(model, tokenizer)`` of ``key`` if its files have not changed (or record ``loaded``)."""
    with _CACHE_LOCK:
        for gone in [k for k, (_, ref, _) in _LOADED.items() if ref() is None]:
            del _LOADED[gone]
        if loaded is not None:
            _LOADED[key] = (files, weakref.ref(loaded[0]), loaded[1])
            _KEPT.pop(key, None)  # an older version of the folder
        entry = _LOADED.get(key)
        model = entry[1]() if entry is not None and entry[0] == files else None
        if model is None:
            return None
        if keep:
            _KEPT[key] = model
            _KEPT.move_to_end(key)
            while len(_KEPT) > MAX_KEPT_MODELS:
                _KEPT.popitem(last=False)
        return model, entry[2]


def model_folder_path(path: str | os.PathLike) -> str:
    """The real path of the model folder ``path`` (a folder holding ``config.json``, as ``save_pretrained`` writes
    it); ``FileNotFoundError`` "<path>: not a model folder (...)" for anything else, before any loader reads it."""
    folder = os.path.realpath(os.fspath(path))
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"{path}: not a model folder (no such folder)")
    if not os.path.isfile(os.path.join(folder, "config.json")):
        raise FileNotFoundError(f"{path}: not a model folder (no config.json)")
    return folder


def load_pretrained(
    path: str | os.PathLike, device: str = "cpu", keep: bool = False, dtype: str = "auto"
) -> tuple[Any, Any]:
    """``(model, tokenizer)`` of a local model folder (``save_pretrained`` output) on ``device``, in eval mode.

    ``dtype``: ``auto`` computes in float32 on a CPU (the SFT export is bfloat16, whose attention kernels are
    several times slower on CPUs; RL trains the same weights in float32) and in the saved dtype elsewhere;
    ``saved`` keeps the saved dtype everywhere.

    The one way this package loads a model folder for generation.  A model is loaded once per (folder, device)
    and shared for as long as anything uses it; loads run one at a time in the process, and a caller that
    finds its model loading waits for that load instead of starting its own.  ``keep=True`` also holds the
    model after its last user is gone (the web demo: each run would otherwise load it again), at most
    :data:`MAX_KEPT_MODELS` of them.  A failed load leaves nothing behind: the next call tries again.
    Callers share the model, so they must not train or modify it in place.
    """
    folder = model_folder_path(path)
    if dtype not in ("auto", "saved"):
        raise ValueError(f"dtype={dtype!r}: expected auto | saved")
    upcast = dtype == "auto" and str(device) == "cpu"
    key = (folder, str(device) + (":fp32" if upcast else ""))
    hit = _cached(key, _folder_files(folder), keep)
    if hit is not None:
        return hit
    with _LOAD_LOCK:
        files = _folder_files(folder)
        hit = _cached(key, files, keep)  # loaded by the caller we waited for
        if hit is not None:
            return hit
        from transformers import AutoModelForCausalLM, AutoTokenizer

        check_model(folder)  # a damaged file is one line naming it, not a loader's traceback or a silent model
        tokenizer = AutoTokenizer.from_pretrained(folder)
        model = AutoModelForCausalLM.from_pretrained(folder, dtype="float32" if upcast else "auto").to(device).eval()
        _cached(key, files, keep, loaded=(model, tokenizer))
        return model, tokenizer


def release_models() -> None:
    """Let go of the models ``keep=True`` holds (they are freed once no backend uses them)."""
    with _CACHE_LOCK:
        _KEPT.clear()


def _stop_when_set(event: threading.Event) -> Any:
    """A transformers stopping criterion that ends a ``generate`` call as soon as ``event`` is set."""
    import torch
    from transformers import StoppingCriteria, StoppingCriteriaList

    class _UntilSet(StoppingCriteria):
        def __call__(self, input_ids, scores, **kwargs):
            return torch.full((input_ids.shape[0],), event.is_set(), dtype=torch.bool, device=input_ids.device)

    return StoppingCriteriaList([_UntilSet()])


class TransformersBackend:
    """Any HF causal LM; requests from concurrent rollouts are batched (left padding) into one ``generate``.

    ``stop_event``: when set, a ``generate`` call in progress ends at the next token (a cancelled run then frees
    its thread at once instead of generating up to ``max_new_tokens``).

    ``fast`` (default): a model that :mod:`venus_utils.modeling.kv_decode` supports (the tiny Qwen3, any plain
    Qwen3/Qwen2/Llama) generates through :class:`~venus_utils.modeling.kv_decode.KVDecoder`: each rollout's keys and
    values are kept across its turns, only the new tokens are encoded, and the batch decodes over a preallocated
    cache (greedy answers equal ``generate``'s).  ``fast=False``, or any other model, uses ``model.generate``
    (:meth:`generate_ids_reference`).  ``decoder``: an earlier backend's decoder on the same model, reused with the
    caches it kept (they are dropped when a weight changes in place, as an optimizer step does; weights written
    otherwise, through ``.data`` or a raw load, need ``decoder.clear()``: the RL trainer clears it after every step's
    scoring).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        max_batch: int = 16,
        seed: int | None = 0,
        device: str | None = None,
        stop_event: threading.Event | None = None,
        fast: bool = True,
        decoder: Any = None,
    ):
        import torch

        self.model, self.chat, self.max_batch = model, ChatTokens(tokenizer), max_batch
        self.stop_event = stop_event
        self.device = device or next(model.parameters()).device
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.pad_id = pad if pad is not None else 0
        self._gen = torch.Generator().manual_seed(seed) if seed is not None else None
        self._queue: list[tuple[list[int], Sampling, asyncio.Future]] = []
        self._worker: asyncio.Task | None = None
        self._lock = threading.Lock()
        self.timing = {"generate_s": 0.0, "calls": 0, "generated_tokens": 0}  # generate_ids calls, all paths
        self.decoder = None
        if fast:
            from ..modeling.kv_decode import KVDecoder, supports

            if decoder is not None and decoder.model is model:  # an earlier backend's, with the caches it kept
                self.decoder = decoder
                decoder.max_entries = max(decoder.max_entries, 2 * max_batch + 8)
            elif supports(model):
                self.decoder = KVDecoder(model, pad_id=self.pad_id, max_entries=2 * max_batch + 8)

    @classmethod
    def from_pretrained(
        cls, path: str, device: str = "cpu", keep: bool = False, dtype: str = "auto", **kwargs
    ) -> TransformersBackend:
        """A backend on a model folder, loaded (or shared) by :func:`load_pretrained`."""
        model, tokenizer = load_pretrained(path, device=device, keep=keep, dtype=dtype)
        return cls(model, tokenizer, device=device, **kwargs)

    async def generate(self, conv: Conversation, sampling: Sampling) -> Generation:
        loop = asyncio.get_running_loop()
        if self._worker is not None and self._worker.get_loop() is not loop:  # a new asyncio.run: forget the old loop
            self._worker, self._queue = None, [r for r in self._queue if r[2].get_loop() is loop]
        fut = loop.create_future()
        self._queue.append((conv.ids, sampling, fut))
        if self._worker is None or self._worker.done():
            self._worker = asyncio.ensure_future(self._drain())
        return await fut

    #: before a batch starts, the event loop runs until no new request has come for ``SETTLE_QUIET`` of its turns
    #: (at most ``SETTLE_MAX``): rollouts between turns (the local tools run in the loop) queue their next turn and
    #: join the batch; without it the rollouts split into two halves that take turns, each batch half full.  Counted
    #: in loop turns, not seconds, so which requests share a batch (and a seeded sample) does not depend on timing
    SETTLE_QUIET = 8
    SETTLE_MAX = 4000

    async def _settle(self) -> None:
        seen, quiet = -1, 0
        for _ in range(self.SETTLE_MAX):
            if len(self._queue) >= self.max_batch or quiet >= self.SETTLE_QUIET:
                break
            await asyncio.sleep(0)
            quiet = quiet + 1 if len(self._queue) == seen else 0
            seen = len(self._queue)

    async def _drain(self) -> None:
        while self._queue:
            await self._settle()
            sampling = self._queue[0][1]
            batch = [r for r in self._queue if r[1] == sampling][: self.max_batch]
            for r in batch:
                self._queue.remove(r)
            try:
                outs = await asyncio.to_thread(self.generate_ids, [r[0] for r in batch], sampling)
                for (_, _, fut), ids in zip(batch, outs):
                    if not fut.done():
                        fut.set_result(finish_ids(self.chat, ids, sampling.stop))
            except Exception as exc:  # the loop reports it as an llm error
                for _, _, fut in batch:
                    if not fut.done():
                        fut.set_result(Generation("", None, "error", redact(f"{type(exc).__name__}: {exc}")))

    def _stop_ids(self, sampling: Sampling) -> set[int]:
        stop_ids = set(self.chat.eos_ids)
        for stop in sampling.stop:  # a stop string that is one token stops generation early
            ids = self.chat.encode(stop)
            if len(ids) == 1:
                stop_ids.add(ids[0])
        return stop_ids

    @contextlib.contextmanager
    def _generating(self):
        """One generation at a time, without gradients, in eval mode (the model is left as it was: RL trains it),
        with the global generator reseeded from this backend's seed."""
        import torch

        with self._lock, torch.no_grad():
            if self._gen is not None:
                torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=self._gen)))
            was_training = self.model.training
            self.model.eval()
            try:
                yield
            finally:
                self.model.train(was_training)

    def generate_ids(self, prompts: list[list[int]], sampling: Sampling) -> list[list[int]]:
        """Sampled ids per prompt (cut after the first end-of-turn token): the fast path when the model has one."""
        t0 = time.perf_counter()
        out = self._generate_ids(prompts, sampling)
        self.timing["generate_s"] += time.perf_counter() - t0
        self.timing["calls"] += 1
        self.timing["generated_tokens"] += sum(len(o) for o in out)
        return out

    def _generate_ids(self, prompts: list[list[int]], sampling: Sampling) -> list[list[int]]:
        if self.decoder is None:
            return self.generate_ids_reference(prompts, sampling)
        with self._generating():
            return self.decoder.generate(
                prompts,
                sampling.max_new_tokens,
                self._stop_ids(sampling),
                temperature=sampling.temperature,
                top_p=sampling.top_p,
                top_k=sampling.top_k,
                should_stop=self.stop_event.is_set if self.stop_event is not None else None,
            )

    def generate_ids_reference(self, prompts: list[list[int]], sampling: Sampling) -> list[list[int]]:
        """``generate_ids`` through transformers ``model.generate`` (left padding, the whole context re-encoded)."""
        import torch

        width = max(len(p) for p in prompts)
        input_ids = torch.tensor([[self.pad_id] * (width - len(p)) + p for p in prompts], device=self.device)
        attention = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=self.device)
        stop_ids = self._stop_ids(sampling)
        kwargs = dict(
            max_new_tokens=sampling.max_new_tokens, eos_token_id=sorted(stop_ids) or None, pad_token_id=self.pad_id
        )
        if self.stop_event is not None:
            kwargs["stopping_criteria"] = _stop_when_set(self.stop_event)
        if sampling.temperature > 0:
            kwargs.update(
                do_sample=True, temperature=sampling.temperature, top_p=sampling.top_p, top_k=sampling.top_k or 0
            )
        else:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        with self._generating():
            out = self.model.generate(input_ids=input_ids, attention_mask=attention, **kwargs)
        result = []
        for row in out[:, width:].tolist():
            cut = next((i for i, t in enumerate(row) if t in stop_ids), None)
            result.append(row[: cut + 1] if cut is not None else row)
        return result


@dataclass
class OpenAIBackend:
    """An OpenAI-compatible server (vLLM on a GPU).  ``mode="completions"`` sends the exact context token ids
    (needs ``tokenizer``) and reads the sampled ids back (vLLM ``return_tokens_as_token_ids``); ``mode="chat"``
    sends the messages (the server applies its template) and re-tokenises the reply when it can."""

    base_url: str
    model: str = "model"
    tokenizer: Any = None
    mode: str = "completions"
    timeout: float = 600.0
    extra_body: dict = field(default_factory=dict)
    api_key: str | None = field(default=None, repr=False)  # default: OPENAI_API_KEY, else "EMPTY" (vLLM)

    def __post_init__(self):
        if self.mode == "completions" and self.tokenizer is None:
            raise ValueError("mode='completions' needs the model's tokenizer (or use mode='chat')")
        self.chat = ChatTokens(self.tokenizer) if self.tokenizer is not None else None
        self.base_url = self.base_url.rstrip("/")

    def _body(self, sampling: Sampling) -> dict:
        body = {
            "model": self.model,
            "max_tokens": sampling.max_new_tokens,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "presence_penalty": sampling.presence_penalty,
            **self.extra_body,
        }
        if sampling.top_k:
            body["top_k"] = sampling.top_k
        if sampling.stop:
            body["stop"] = list(sampling.stop)
        return body

    async def generate(self, conv: Conversation, sampling: Sampling) -> Generation:
        key = self.api_key or secret("OPENAI_API_KEY") or "EMPTY"
        body = self._body(sampling)
        if self.mode == "completions":
            body.update(prompt=conv.ids, logprobs=0, return_tokens_as_token_ids=True, skip_special_tokens=False)
            url = f"{self.base_url}/completions"
        else:
            body.update(messages=safe_messages(conv.messages))  # the server renders them: outside text escaped
            url = f"{self.base_url}/chat/completions"
        try:
            async with httpx.AsyncClient() as client:
                response = await asyncio.wait_for(
                    client.post(url, json=body, headers={"Authorization": f"Bearer {key}"}, timeout=self.timeout),
                    self.timeout,
                )
            response.raise_for_status()
            choice = response.json()["choices"][0]
        except Exception as exc:
            timed_out = isinstance(exc, (TimeoutError, httpx.TimeoutException))
            detail = str(exc).strip() or (f"no reply within {self.timeout:g} s" if timed_out else "")
            message = redact(f"{type(exc).__name__}: {detail} ({url})")
            return Generation("", None, "error", message.replace(key, "***") if len(key) >= 4 else message)
        finish = "length" if choice.get("finish_reason") == "length" else "stop"
        text = choice.get("text") if self.mode == "completions" else (choice.get("message") or {}).get("content")
        text = text or ""
        if self.chat is None:
            return Generation(text, None, finish)
        tokens = ((choice.get("logprobs") or {}).get("tokens")) or []
        ids = [int(t.split(":", 1)[1]) for t in tokens if isinstance(t, str) and t.startswith("token_id:")]
        if len(ids) != len(tokens) or not ids:
            ids = self.chat.encode(text)  # the server did not return ids: re-tokenise (not exact)
        if finish == "stop" and choice.get("stop_reason") is None and not (ids and ids[-1] in self.chat.eos_ids):
            eos = self.chat.tok.convert_tokens_to_ids(self.chat.end_of_turn.strip())
            ids = ids + [eos]  # the server hides the sampled end-of-turn token
        for token in self.chat.eos_ids:
            text = text.replace(self.chat.decode([token]), "")
        return Generation(text, ids, finish)


class ScriptedBackend:
    """Replays fixed completions, or asks ``policy(messages) -> str`` (tests, expert replays, demos)."""

    def __init__(self, turns: list[str] | Callable[[list[dict]], str], tokenizer: Any = None):
        self.turns, self.calls = turns, 0
        self.chat = ChatTokens(tokenizer) if tokenizer is not None else None

    async def generate(self, conv: Conversation, sampling: Sampling) -> Generation:
        if callable(self.turns):
            text = self.turns(conv.messages)
        elif self.calls < len(self.turns):
            text = self.turns[self.calls]
        else:
            text = ""
        self.calls += 1
        if isinstance(text, Exception):
            return Generation("", None, "error", str(text))
        if self.chat is None:
            return Generation(text, None, "stop")
        eos = self.chat.tok.convert_tokens_to_ids(self.chat.end_of_turn.strip())
        return finish_ids(self.chat, self.chat.encode(text) + [eos], sampling.stop)


def strip_think_prefix(text: str, prefix: str) -> str:
    """An assistant message without the reasoning opener the generation prompt supplies (for replays)."""
    return text[len(prefix) :] if prefix and text.startswith(prefix) else re.sub(r"^\s*<think>\n?", "", text)


def load_backend(
    model: str,
    device: str = "cpu",
    served_model_name: str = "model",
    tokenizer: str | None = None,
    mode: str | None = None,
    **kwargs,
) -> Any:
    """``model`` = a local HF folder (transformers) or an ``http(s)://host:port/v1`` URL (OpenAI-compatible)."""
    if model.startswith(("http://", "https://")):
        tok = None
        if tokenizer:
            from transformers import AutoTokenizer

            tok = AutoTokenizer.from_pretrained(tokenizer)
        return OpenAIBackend(model, served_model_name, tok, mode or ("completions" if tok is not None else "chat"))
    if not os.path.isdir(model):
        raise FileNotFoundError(f"{model}: not a model folder (save_pretrained output) nor an http(s) URL")
    return TransformersBackend.from_pretrained(model, device=device, **kwargs)
