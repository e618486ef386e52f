"""The ``search`` tool: Serper (the web) and BM25 over the offline world's pages.

Both backends produce :class:`SearchHit` lists.  What the model sees is
:func:`venus_utils.core.protocol.search_results_json` of those hits (the JSON of DR-Venus's cleaned SFT data);
:func:`serper_raw_text` renders the same hits as the raw Serper text that REDSearcher trajectories carry and
that the trajectory cleaner parses (the offline world's raw trajectories are written with it).
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np

from ..core import protocol
from ..core.env import secret
from ..core.world_store import load_pages, load_world_meta
from .common import MAX_RESPONSE_BYTES, DiskCache, SearchHit, ToolFailure, describe_error, json_body, request, words

SERPER_URL = "https://google.serper.dev/search"


def serper_raw_text(query: str, hits: list[SearchHit]) -> str:
    """One query's raw Serper text, exactly as DR-Venus's (Tongyi's) search tool writes it."""
    if not hits:
        return protocol.no_results_text(query)
    items = []
    for i, h in enumerate(hits, 1):
        date = f"\nDate published: {h.date}" if h.date else ""
        source = f"\nSource: {h.source}" if h.source else ""
        snippet = f"\n{h.snippet}" if h.snippet else ""
        items.append(f"{i}. [{h.title}]({h.url}){date}{source}\n{snippet}")
    return f"A Google search for '{query}' found {len(items)} results:\n\n## Web Results\n" + "\n\n".join(items)


def raw_search_text(results: list[tuple[str, list[SearchHit] | str]]) -> str:
    """Several queries' raw text joined by ``=======`` lines (an ``str`` result is an error message)."""
    return protocol.TOOL_SEPARATOR.join(r if isinstance(r, str) else serper_raw_text(q, r) for q, r in results)


def model_search_text(results: list[tuple[str, list[SearchHit] | str]]) -> str:
    """What the model sees for ``[(query, hits or error text), ...]``."""
    blocks = []
    for query, r in results:
        if isinstance(r, str):
            blocks.append({"query": query, "hits": [], "message": r})
        else:
            blocks.append({"query": query, "hits": [h.to_dict() for h in r]})
    return protocol.search_results_json(blocks)


def make_snippet(text: str, max_chars: int) -> str:
    """The first ``max_chars`` characters of a page, cut at a word boundary, Google-style `` ...``."""
    if len(text) <= max_chars:
        return text
    cut = text[:max_chars].rsplit(" ", 1)[0].rstrip(" ,;:")
    return f"{cut} ..."


class LocalSearch:
    """BM25 (bm25s) over the world's pages: title (twice) + text; ties broken by page order.

    ``top_k`` results per query (DR-Venus / Serper: 10), each with a ``snippet_chars`` snippet.
    """

    name = "local"

    def __init__(self, pages: list[dict], top_k: int = 10, snippet_chars: int = 160):
        import bm25s

        self.pages, self.top_k, self.snippet_chars = pages, top_k, snippet_chars
        self._bm25 = None
        corpus = [words(f"{p['title']} {p['title']} {p['text']}") for p in pages]
        if any(corpus):
            self._bm25 = bm25s.BM25()
            self._bm25.index(corpus, show_progress=False)
            self._vocab = self._bm25.vocab_dict
        self._memo: dict[str, list[SearchHit]] = {}

    @classmethod
    def from_world(cls, world_dir: str | Path, **overrides) -> LocalSearch:
        settings = {**load_world_meta(world_dir).get("tools", {}).get("search", {}), **overrides}
        return cls(load_pages(world_dir), **{k: v for k, v in settings.items() if k in ("top_k", "snippet_chars")})

    def hits(self, query: str) -> list[SearchHit]:
        """The top hits for one query (memoised); no hit has a zero score."""
        if query in self._memo:
            return self._memo[query]

        hits: list[SearchHit] = []
        tokens = [t for t in words(query) if self._bm25 is not None and t in self._vocab]
        if tokens:
            scores = self._bm25.get_scores(tokens)
            order = np.lexsort((np.arange(len(scores)), -scores))[: self.top_k]
            for i in order:
                if scores[i] <= 0:
                    break
                page = self.pages[int(i)]
                hits.append(SearchHit(page["title"], page["url"], make_snippet(page["text"], self.snippet_chars)))
        self._memo[query] = hits
        return hits

    def results(self, queries: list[str]) -> list[tuple[str, list[SearchHit]]]:
        return [(q, self.hits(q)) for q in queries]

    async def search(self, queries: list[str]) -> str:
        return model_search_text(self.results(queries))

    async def raw_search(self, queries: list[str]) -> str:
        return raw_search_text(self.results(queries))


@dataclass
class SerperSearch:
    """Google results through Serper (``SERPER_KEY_ID``; endpoint ``SERPER_API_URL``), queries in parallel.

    The request body is DR-Venus's (``q``, ``location``, ``gl``, ``hl``; Chinese settings for CJK queries);
    ``num`` is sent only when ``top_k`` differs from Serper's default of 10.
    """

    api_url: str | None = None
    top_k: int = 10
    timeout: float = 30.0  # seconds per HTTP attempt
    attempts: int = 3  # HTTP attempts per query
    backoff: float = 0.5  # first back-off, seconds (exponential, with jitter)
    max_bytes: int = MAX_RESPONSE_BYTES  # per response body
    cache_dir: str | None = None
    api_key: str | None = field(default=None, repr=False)  # overrides SERPER_KEY_ID (e.g. typed in the web demo)
    name: str = "serper"

    def __post_init__(self):
        self.api_url = self.api_url or os.environ.get("SERPER_API_URL") or SERPER_URL
        self._cache = DiskCache(self.cache_dir)

    @staticmethod
    def payload(query: str, top_k: int = 10) -> dict:
        if any("\u4e00" <= ch <= "\u9fff" for ch in query):
            body = {"q": query, "location": "China", "gl": "cn", "hl": "zh-cn"}
        else:
            body = {"q": query, "location": "United States", "gl": "us", "hl": "en"}
        if top_k != 10:
            body["num"] = top_k
        return body

    async def hits(self, client: httpx.AsyncClient, query: str) -> list[SearchHit]:
        key = ["serper", self.api_url, self.payload(query, self.top_k)]
        cached = self._cache.get(key)
        if cached is not None:
            return [SearchHit(**h) for h in cached]
        api_key = self.api_key or secret("SERPER_KEY_ID")
        if not api_key:
            raise ToolFailure("SERPER_KEY_ID is not set")
        data = await request(
            client,
            "POST",
            self.api_url,
            json=self.payload(query, self.top_k),
            timeout=self.timeout,
            attempts=self.attempts,
            backoff=self.backoff,
            max_bytes=self.max_bytes,
            parse=json_body,
            headers={"X-API-KEY": api_key, "Content-Type": "application/json"},
        )
        if not isinstance(data, dict):
            raise ToolFailure("the search service returned an unexpected body")
        hits = []
        for page in (data.get("organic") or [])[: self.top_k]:
            if isinstance(page, dict) and page.get("title") and page.get("link"):
                hits.append(
                    SearchHit(
                        str(page["title"]),
                        str(page["link"]),
                        str(page.get("snippet", "")),
                        str(page.get("date", "")),
                        str(page.get("source", "")),
                    )
                )
        self._cache.set(key, [h.to_dict() for h in hits])
        return hits

    async def results(self, queries: list[str]) -> list[tuple[str, list[SearchHit] | str]]:
        async with httpx.AsyncClient() as client:
            outcomes = await asyncio.gather(*(self.hits(client, q) for q in queries), return_exceptions=True)
        results: list[tuple[str, list[SearchHit] | str]] = []
        for q, out in zip(queries, outcomes):
            if isinstance(out, BaseException):
                results.append((q, f"Google search failed for '{q}': {describe_error(out)}. Please try again later."))
            else:
                results.append((q, out))
        return results

    async def search(self, queries: list[str]) -> str:
        return model_search_text(await self.results(queries))

    async def raw_search(self, queries: list[str]) -> str:
        return raw_search_text(await self.results(queries))
