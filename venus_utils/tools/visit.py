"""The ``visit`` tool: Jina Reader + a goal-directed LLM extractor (the web), or the offline world's page.

Output per URL (see :func:`venus_utils.core.protocol.visit_result_text`): ``The useful information in {url} for
user goal {goal} as follows:`` then ``Evidence in page:`` (the LLM extractor, as DR-Venus's RL/inference tool)
and ``Summary:``.  The local backend selects the page sentences that best match the goal (no model needed);
by default it emits only ``Summary:``, the form of DR-Venus's SFT examples (``with_evidence`` adds evidence).
Several URLs are visited concurrently and joined by ``=======`` lines.  A failure gives DR-Venus's
"could not be accessed" frame, never an exception.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from ..core import protocol
from ..core.env import secret
from ..core.world_store import load_pages, load_world_meta
from .common import (
    MAX_RESPONSE_BYTES,
    DiskCache,
    ToolFailure,
    TransientError,
    describe_error,
    json_body,
    request,
    words,
)

JINA_URL = "https://r.jina.ai"
_SENTENCE_RE = re.compile(r"(?<=[.!?])\s+")
_FAILED_PREFIXES = ("[visit] Failed", "[document_parser]")

EXTRACTOR_PROMPT = """Read the webpage content below with the user's goal in mind and extract what serves the goal.

## Webpage content
{webpage_content}

## User goal
{goal}

## Task
1. "rational": say which sections or data of the page relate directly to the goal.
2. "evidence": copy the most relevant information, keeping its original wording and context; it may run over \
several paragraphs, and nothing important may be left out.
3. "summary": write one concise, logically ordered paragraph of what was found and how far it answers the goal.

Reply with one JSON object with exactly the keys "rational", "evidence" and "summary"."""


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "er", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def select_sentences(text: str, goal: str, max_sentences: int = 2) -> list[str]:
    """The page sentences sharing the most goal words (crudely stemmed), kept in page order.

    Words found in every sentence (typically the page's own name) do not count.
    """
    sentences = [s.strip() for s in _SENTENCE_RE.split(text.strip()) if s.strip()]
    keys = [{_stem(w) for w in words(s)} for s in sentences]
    common = set.intersection(*keys) if len(keys) > 1 else set()
    goal_keys = {_stem(w) for w in words(goal)} - common
    scored = [(len(goal_keys & k), i) for i, k in enumerate(keys)]
    best = sorted(scored, key=lambda t: (-t[0], t[1]))[:max_sentences]
    return [sentences[i] for _, i in sorted(best, key=lambda t: t[1])]


def _normalise_url(url: str) -> str:
    url = url.strip()
    url = re.sub(r"^https?://", "", url)
    return url.rstrip("/")


class LocalVisit:
    """The world's page for a URL, reduced to the ``max_sentences`` sentences that match the goal."""

    name = "local"

    def __init__(self, pages: list[dict], max_sentences: int = 2, with_evidence: bool = False):
        self.by_url = {_normalise_url(p["url"]): p for p in pages}
        self.max_sentences, self.with_evidence = max_sentences, with_evidence

    @classmethod
    def from_world(cls, world_dir: str | Path, **overrides) -> LocalVisit:
        settings = {**load_world_meta(world_dir).get("tools", {}).get("visit", {}), **overrides}
        return cls(
            load_pages(world_dir), **{k: v for k, v in settings.items() if k in ("max_sentences", "with_evidence")}
        )

    def visit_one(self, url: str, goal: str) -> str:
        page = self.by_url.get(_normalise_url(url))
        if page is None:
            return protocol.visit_failed_text(url, goal, with_evidence=self.with_evidence)
        chosen = " ".join(select_sentences(page["text"], goal, self.max_sentences))
        if self.with_evidence:
            return protocol.visit_result_text(url, goal, summary=chosen, evidence=page["text"])
        return protocol.visit_result_text(url, goal, summary=chosen)

    async def visit(self, urls: list[str], goal: str) -> str:
        return protocol.TOOL_SEPARATOR.join(self.visit_one(u, goal) for u in urls)


def parse_extractor_reply(content: str) -> dict:
    """The extractor's JSON (code fences stripped, else the first ``{`` to the last ``}``); raises ToolFailure."""
    text = content.replace("```json", "").replace("```", "").strip()
    try:
        obj = json.loads(text)
    except json.JSONDecodeError:
        left, right = text.find("{"), text.rfind("}")
        try:
            obj = json.loads(text[left : right + 1]) if 0 <= left < right else None
        except json.JSONDecodeError:
            obj = None
    if not isinstance(obj, dict) or not str(obj.get("summary", "")).strip():
        raise ToolFailure("the extractor reply is not JSON with a summary")
    return obj


@dataclass
class JinaVisit:
    """Jina Reader (``JINA_API_KEYS``, endpoint ``JINA_READER_URL``) + the extractor (``API_BASE``, ``API_KEY``,
    ``SUMMARY_MODEL_NAME``).  Without ``API_BASE`` the goal-matching sentences of the page are used instead."""

    reader_url: str | None = None
    api_base: str | None = None
    model: str | None = None
    timeout: float = 60.0  # seconds per HTTP attempt
    attempts: int = 3  # HTTP attempts per request
    extractor_attempts: int = 3  # extractor calls until a JSON reply parses (the page shrinks to 70% each time)
    backoff: float = 0.5
    max_page_chars: int = 380_000  # ~95K tokens at ~4 characters per token (DR-Venus truncates at 95K tokens)
    max_bytes: int = MAX_RESPONSE_BYTES  # per response body (reader and extractor)
    temperature: float = 0.7
    max_sentences: int = 5  # extractive fallback without an extractor
    cache_dir: str | None = None
    jina_key: str | None = field(default=None, repr=False)  # overrides JINA_API_KEYS
    extractor_key: str | None = field(default=None, repr=False)  # overrides API_KEY
    name: str = "jina"

    def __post_init__(self):
        self.reader_url = (self.reader_url or os.environ.get("JINA_READER_URL") or JINA_URL).rstrip("/")
        self.api_base = self.api_base or os.environ.get("API_BASE")
        self.model = self.model or os.environ.get("SUMMARY_MODEL_NAME", "")
        self._cache = DiskCache(self.cache_dir)

    async def fetch(self, client: httpx.AsyncClient, url: str) -> str:
        key = self.jina_key or secret("JINA_API_KEYS")
        headers = {"Authorization": f"Bearer {key.split(',')[0].strip()}"} if key else {}
        response = await request(
            client,
            "GET",
            f"{self.reader_url}/{url}",
            headers=headers,
            timeout=self.timeout,
            attempts=self.attempts,
            backoff=self.backoff,
            max_bytes=self.max_bytes,
        )
        text = response.text
        if not text.strip() or text.startswith(_FAILED_PREFIXES) or text == "[visit] Empty content.":
            raise ToolFailure("the reader returned no content")
        return text

    async def extract(self, client: httpx.AsyncClient, page: str, goal: str) -> dict:
        headers = {"Authorization": f"Bearer {self.extractor_key or secret('API_KEY') or 'EMPTY'}"}
        page = page[: self.max_page_chars]
        last: Exception = ToolFailure("no extractor attempt")
        for _ in range(max(1, self.extractor_attempts)):
            body = {
                "model": self.model,
                "temperature": self.temperature,
                "messages": [{"role": "user", "content": EXTRACTOR_PROMPT.format(webpage_content=page, goal=goal)}],
            }
            try:
                data = await request(
                    client,
                    "POST",
                    f"{self.api_base.rstrip('/')}/chat/completions",
                    json=body,
                    headers=headers,
                    timeout=self.timeout,
                    attempts=self.attempts,
                    backoff=self.backoff,
                    max_bytes=self.max_bytes,
                    parse=json_body,
                )
                return parse_extractor_reply(str(data["choices"][0]["message"]["content"] or ""))
            except (ToolFailure, KeyError, IndexError, TypeError) as exc:
                last = exc
                page = page[: int(0.7 * len(page))]
        raise ToolFailure(f"the extractor failed: {describe_error(last)}")

    async def visit_one(self, client: httpx.AsyncClient, url: str, goal: str) -> str:
        key = ["jina", self.reader_url, self.api_base, self.model, url, goal]
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        try:
            page = await self.fetch(client, url)
            if self.api_base:
                found = await self.extract(client, page, goal)
                text = protocol.visit_result_text(url, goal, str(found["summary"]), str(found.get("evidence", "")))
            else:
                text = protocol.visit_result_text(
                    url, goal, " ".join(select_sentences(page, goal, self.max_sentences))
                )
        except (TimeoutError, ToolFailure, TransientError, httpx.HTTPError, ValueError) as exc:
            return protocol.visit_failed_text(url, goal) + f"\n[visit error: {describe_error(exc)}]"
        self._cache.set(key, text)
        return text

    async def visit(self, urls: list[str], goal: str) -> str:
        async with httpx.AsyncClient() as client:
            texts = await asyncio.gather(*(self.visit_one(client, u, goal) for u in urls))
        return protocol.TOOL_SEPARATOR.join(texts)
