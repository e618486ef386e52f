"""One entry point for tool calls: argument checks, dispatch, a timeout, and errors as text.

``await toolbox.call(name, arguments)`` always returns the text that goes inside ``<tool_response>``: a
malformed argument, an unknown tool, a timeout or an exception become DR-Venus's error messages, so a
rollout never crashes on a tool, as in DR-Venus's ``dr_agent_loop.py``.  ``raw=True`` asks a search for the
raw Serper text of REDSearcher trajectories instead; it goes through the same timeout and key masking.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.aio import run_coroutine
from ..core.env import redact
from ..core.protocol import ToolCall
from .search import LocalSearch, SerperSearch
from .visit import JinaVisit, LocalVisit

SEARCH_ARGS_ERROR = "[Search] Invalid request format: Input must be a JSON object containing 'query' field"
VISIT_ARGS_ERROR = "[Visit] Invalid request format: Input must be a JSON object containing 'url' and 'goal' fields"


def _as_str_list(value: Any) -> list[str] | None:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v.strip() for v in value):
        return None
    return [v.strip() for v in value]


@dataclass
class Toolbox:
    """``search`` + ``visit`` backends behind DR-Venus's dispatcher (unknown names: ``Error: Tool X not found``)."""

    search_backend: Any
    visit_backend: Any
    timeout: float = 150.0  # seconds per tool call, DR-Venus's RL tool timeout
    stats: dict = field(default_factory=lambda: {"calls": 0, "errors": 0, "timeouts": 0})
    # the make_toolbox arguments that build the same local tools in another process (None: not rebuildable)
    made_with: dict | None = None

    def rebuild_args(self) -> dict | None:
        """The :func:`make_toolbox` arguments that build these tools again elsewhere (another process answering
        a share of the questions), or None: web tools, or backends changed since :func:`make_toolbox` built them."""
        if self.made_with is None or type(self.search_backend) is not LocalSearch:
            return None
        return dict(self.made_with) if type(self.visit_backend) is LocalVisit else None

    @property
    def names(self) -> tuple[str, ...]:
        return ("search", "visit")

    async def _dispatch(self, name: str, arguments: dict, raw: bool = False) -> str:
        if name == "search":
            queries = _as_str_list(arguments.get("query", arguments.get("queries")))
            if queries is None:
                return SEARCH_ARGS_ERROR
            if raw:
                return await self.search_backend.raw_search(queries)
            return await self.search_backend.search(queries)
        if name == "visit":
            urls = _as_str_list(arguments.get("url", arguments.get("urls")))
            goal = arguments.get("goal", "")
            goal = goal[0] if isinstance(goal, list) and goal else goal
            if urls is None or not isinstance(goal, str):
                return VISIT_ARGS_ERROR
            return await self.visit_backend.visit(urls, goal)
        return f"Error: Tool {name} not found"

    def hide_keys(self, text: str) -> str:
        """Mask the environment's secrets and any key given to a backend object."""
        text = redact(text)
        for backend in (self.search_backend, self.visit_backend):
            for attr in ("api_key", "jina_key", "extractor_key"):
                key = getattr(backend, attr, None)
                if isinstance(key, str) and len(key) >= 4:
                    text = text.replace(key, "***")
        return text

    async def call(self, name: str, arguments: dict | None, raw: bool = False) -> str:
        """Run one call; never raises (except on cancellation of the caller).  ``raw``: a search returns the
        raw Serper text (as in REDSearcher trajectories) instead of the model's JSON; visit ignores it."""
        self.stats["calls"] += 1
        if not isinstance(arguments, dict):
            arguments = {}
        try:
            text = await asyncio.wait_for(self._dispatch(name, arguments, raw), self.timeout)
        except TimeoutError:
            self.stats["timeouts"] += 1
            return f"Tool execution timed out after {self.timeout:g} seconds."
        except Exception as exc:  # a tool bug must not end the rollout
            self.stats["errors"] += 1
            return self.hide_keys(f"Tool execution error: {type(exc).__name__}: {exc}")
        return self.hide_keys(text) if text else "ERROR: empty tool result"

    async def run(self, call: ToolCall) -> str:
        return await self.call(call.name, call.arguments)

    def call_sync(self, name: str, arguments: dict | None, raw: bool = False) -> str:
        """:meth:`call` from synchronous code (a notebook cell, the command line)."""
        return run_coroutine(self.call(name, arguments, raw))


def make_toolbox(
    backend: str = "local",
    world_dir: str | Path | None = None,
    timeout: float = 150.0,
    cache_dir: str | Path | None = None,
    **knobs: Any,
) -> Toolbox:
    """``local``: BM25 + page extracts over ``world_dir`` (settings from its world.json, ``knobs`` override:
    top_k, snippet_chars, max_sentences, with_evidence); ``web``: Serper + Jina (+ extractor), keys from the
    environment, ``knobs`` passed to both (e.g. attempts, backoff, max_bytes, top_k).

    A missing world folder, or a file in its place, raises FileNotFoundError / NotADirectoryError with a
    message that names the path; so does a cache folder that is a file."""
    if backend == "local":
        if world_dir is None:
            raise ValueError("the local tools need world_dir (a folder built by `python -m venus_utils.world build`)")
        hint = f"build one with `python -m venus_utils.world build --out {world_dir}`"
        if not Path(world_dir).exists():
            raise FileNotFoundError(f"world folder not found: {world_dir} ({hint})")
        if not Path(world_dir).is_dir():
            raise NotADirectoryError(f"not a world folder: {world_dir} is a file ({hint})")
        search_knobs = {k: knobs[k] for k in ("top_k", "snippet_chars") if k in knobs}
        visit_knobs = {k: knobs[k] for k in ("max_sentences", "with_evidence") if k in knobs}
        return Toolbox(
            LocalSearch.from_world(world_dir, **search_knobs),
            LocalVisit.from_world(world_dir, **visit_knobs),
            timeout=timeout,
            made_with={"backend": "local", "world_dir": str(world_dir), "timeout": timeout, **knobs},
        )
    if backend in ("web", "serper", "jina"):
        cache = str(cache_dir) if cache_dir else None
        shared = {k: knobs[k] for k in ("attempts", "backoff", "max_bytes") if k in knobs}
        search = SerperSearch(
            cache_dir=cache, top_k=knobs.get("top_k", 10), timeout=knobs.get("http_timeout", 30.0), **shared
        )
        visit = JinaVisit(cache_dir=cache, timeout=knobs.get("http_timeout", 60.0), **shared)
        return Toolbox(search, visit, timeout=timeout)
    raise ValueError(f"unknown tool backend {backend!r}: expected 'local' or 'web'")
