"""Shared pieces of the tools: a search hit, the on-disk cache, and HTTP calls with bounded retries.

Every HTTP call goes through :func:`request` (httpx + tenacity): each attempt is bounded by ``timeout``
seconds as a whole (a slow-dripping body cannot stretch it), transient failures (connection errors,
timeouts, 408/425/429/5xx, unparseable bodies) are retried with exponential back-off and jitter, and the
last error is raised for the tool to turn into text for the model.  A body larger than ``max_bytes`` is
refused (:class:`ToolFailure`, not retried).  Keys travel in headers only, and every error text is passed
through :func:`venus_utils.core.env.redact`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential, wait_random

from ..core.env import redact
from ..core.io import atomic_write

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
MAX_RESPONSE_BYTES = 16 * 2**20  # per HTTP response body, decoded (a visited page is cut to far less anyway)


@dataclass(frozen=True)
class SearchHit:
    """One organic search result."""

    title: str
    url: str
    snippet: str = ""
    date: str = ""
    source: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


class TransientError(Exception):
    """A failure worth another attempt (status 429/5xx, a body that does not parse, ...)."""


class ToolFailure(Exception):
    """A failure that the tool reports to the model as text."""


def describe_error(exc: BaseException) -> str:
    """A short, key-free description of an exception."""
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError, httpx.TimeoutException)):
        text = "timed out"
    elif isinstance(exc, httpx.HTTPStatusError):
        text = f"HTTP {exc.response.status_code}"
    elif isinstance(exc, httpx.TransportError):
        text = f"connection error ({type(exc).__name__})"
    else:
        text = str(exc) or type(exc).__name__
    return redact(text)


async def _bounded_send(
    client: httpx.AsyncClient, method: str, url: str, max_bytes: int, **kwargs: Any
) -> httpx.Response:
    """The response with its body read in full, or :class:`ToolFailure` once the body passes ``max_bytes``."""
    async with client.stream(method, url, **kwargs) as response:
        body = bytearray()
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > max_bytes:
                raise ToolFailure(f"the response is larger than {max_bytes} bytes")
    # ``body`` is already decoded: drop the transfer headers that described the encoded stream
    headers = [
        (k, v)
        for k, v in response.headers.multi_items()
        if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")
    ]
    return httpx.Response(response.status_code, headers=headers, content=bytes(body), request=response.request)


async def request(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    *,
    timeout: float,
    attempts: int = 3,
    backoff: float = 0.5,
    max_backoff: float = 8.0,
    max_bytes: int = MAX_RESPONSE_BYTES,
    parse: Callable[[httpx.Response], Any] | None = None,
    **kwargs: Any,
) -> Any:
    """``client.request`` with per-attempt timeouts, a body size limit and tenacity retries; returns
    ``parse(response)``.

    ``parse`` (default: the response itself) may raise :class:`TransientError` to ask for another attempt,
    e.g. for malformed JSON.  Non-transient HTTP errors (401, 404, ...) and oversized bodies are raised at once.
    """
    retrying = AsyncRetrying(
        stop=stop_after_attempt(max(1, attempts)),
        wait=wait_exponential(multiplier=backoff, max=max_backoff) + wait_random(0, backoff),
        retry=retry_if_exception_type((TransientError, httpx.TransportError, asyncio.TimeoutError, TimeoutError)),
        reraise=True,
    )
    async for attempt in retrying:
        with attempt:
            response = await asyncio.wait_for(
                _bounded_send(client, method, url, max_bytes, timeout=timeout, **kwargs), timeout
            )
            if response.status_code in RETRY_STATUS:
                raise TransientError(f"HTTP {response.status_code}")
            response.raise_for_status()
            return parse(response) if parse else response
    raise AssertionError("unreachable")  # pragma: no cover


def json_body(response: httpx.Response) -> Any:
    try:
        return response.json()
    except (json.JSONDecodeError, ValueError, UnicodeDecodeError):
        raise TransientError("the server returned malformed JSON") from None


class DiskCache:
    """A folder of small JSON files keyed by the sha256 of the request (only successes are stored)."""

    def __init__(self, folder: str | Path | None):
        self.folder = Path(folder) if folder else None
        if self.folder is not None and self.folder.exists() and not self.folder.is_dir():
            raise NotADirectoryError(
                f"cache folder is a file: {self.folder} (expected a folder; a missing one is created)"
            )

    def _path(self, key: Any) -> Path:
        digest = hashlib.sha256(json.dumps(key, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
        return self.folder / digest[:2] / f"{digest}.json"  # type: ignore[operator]

    def get(self, key: Any) -> Any | None:
        if self.folder is None:
            return None
        path = self._path(key)
        try:
            return json.loads(path.read_text(encoding="utf-8"))["value"]
        except (FileNotFoundError, json.JSONDecodeError, KeyError):
            return None

    def set(self, key: Any, value: Any) -> None:
        if self.folder is not None:
            atomic_write(self._path(key), json.dumps({"key": key, "value": value}, ensure_ascii=False))


_WORD_RE = re.compile(r"[a-z0-9]+")
STOPWORDS = frozenset(
    "a an and are as at be by for from has have in is it its of on or that the this to was were what when where "
    "which who whom whose why how with find".split()
)


def words(text: str) -> list[str]:
    """Lower-cased alphanumeric words without stop words (BM25 and goal matching)."""
    return [w for w in _WORD_RE.findall(text.lower()) if w not in STOPWORDS]
