"""Raw search-tool text -> the JSON the SFT data carries (DR-Venus's ``parse_search_results``).

REDSearcher's search tool (Tongyi-DeepResearch / Serper style) returns one text block per query::

    A Google search for '<query>' found <N> results:

    ## Web Results
    1. [<title>](<link>)
    Date published: <date>        (optional)
    Source: <source>              (optional)

    <snippet>

blocks joined by a line ``=======``; a failed query is plain text (``No results found for '<q>'...``).
The trained format is ``[{"query": q, "web_page_info_list": [{"title", "url", "snippet"}]}]``.

:func:`parse_search_reference` is DR-Venus's parser, quirks included.  :func:`parse_search_strict` fixes
its leaks: the ``=======`` separator no longer ends up in snippets (fix
``search_separator_removed``), leading ``Source:`` metadata lines are dropped like the date lines
(``search_source_line_removed``), and a failed query keeps its own block with the tool's message instead
of vanishing or being glued to the previous snippet (``search_failure_kept``).
"""

from __future__ import annotations

import json
import re
from collections import Counter

HEADER_RE = re.compile(r"^\s*A Google search for (.+?) found \d+ results:\s*$")
RESULT_START_RE = re.compile(r"^\s*\d+\.\s+\[")
RESULT_PREFIX_RE = re.compile(r"^\s*\d+\.\s+")
DATE_LINE_RE = re.compile(r"^\s*Date\s+(published|updated)\s*:\s*", re.IGNORECASE)
SOURCE_LINE_RE = re.compile(r"^\s*Source\s*:\s*", re.IGNORECASE)
NO_RESULTS_RE = re.compile(r"for\s+(['\"])(.*)\1", re.DOTALL)
SEPARATOR = "======="


def _query_from_header(header: str) -> str:
    match = HEADER_RE.match(header.strip())
    if not match:
        return ""
    query = match.group(1).strip()
    if len(query) >= 2 and query[0] == query[-1] and query[0] in "'\"":
        return query[1:-1]
    return query


def _split_blocks(lines: list[str]) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """(lines before the first header, [(header, lines)...])."""
    before: list[str] = []
    blocks: list[tuple[str, list[str]]] = []
    header = None
    current: list[str] = []
    for line in lines:
        if "A Google search for" in line and HEADER_RE.match(line.strip()):
            if header is not None:
                blocks.append((header, current))
            header, current = line.strip(), []
        elif header is not None:
            current.append(line)
        else:
            before.append(line)
    if header is not None:
        blocks.append((header, current))
    return before, blocks


def parse_result_header(line: str) -> tuple[str | None, str | None, str | None]:
    """``N. [title](url)trailing`` -> (title, url, trailing); nested [] in titles and () in URLs allowed."""
    line = line.strip()
    prefix = RESULT_PREFIX_RE.match(line)
    if not prefix:
        return None, None, None
    i, n = prefix.end(), len(line)
    if i >= n or line[i] != "[":
        return None, None, None
    i += 1
    close = line.find("](", i)  # fast path: no brackets in the title, no parentheses in the URL
    if close != -1 and "[" not in line[i:close] and "]" not in line[i:close]:
        end = line.find(")", close + 2)
        if end != -1 and "(" not in line[close + 2 : end]:
            return line[i:close].strip(), line[close + 2 : end].strip(), line[end + 1 :].strip()
    close = _closing(line, i, "[", "]")
    if close is None:
        return None, None, None
    title = line[i:close]
    if close + 1 >= n or line[close + 1] != "(":
        return None, None, None
    start = close + 2
    i = _closing(line, start, "(", ")")
    if i is None:
        return None, None, None
    return title.strip(), line[start:i].strip(), line[i + 1 :].strip()


def _closing(line: str, i: int, opening: str, closing: str) -> int | None:
    """Index of the ``closing`` bracket that balances an already-open one, scanning from ``i``; None if absent."""
    depth = 1
    for j in range(i, len(line)):
        if line[j] == opening:
            depth += 1
        elif line[j] == closing:
            depth -= 1
            if depth == 0:
                return j
    return None


def _parse_results(lines: list[str], strict: bool, fixes: Counter | None) -> list[dict[str, str]]:
    for idx, line in enumerate(lines):
        if "## Web Results" in line and line.strip() == "## Web Results":
            lines = lines[idx + 1 :]
            break
    entries: list[tuple[str, list[str]]] = []
    body: list[str] | None = None
    for line in lines:
        stripped = line.strip()
        if stripped[:1].isdigit() and RESULT_START_RE.match(stripped):
            body = []
            entries.append((stripped, body))
        elif body is not None:
            body.append(stripped)
    results = []
    for header, body in entries:
        title, url, trailing = parse_result_header(header)
        if not title or not url:
            continue
        if trailing:
            body = [trailing] + body
        k, n = 0, len(body)
        while k < n and not body[k]:  # leading blank lines, then leading metadata lines
            k += 1
        if strict:
            while k < n and (not body[k] or DATE_LINE_RE.match(body[k]) or SOURCE_LINE_RE.match(body[k])):
                if body[k] and fixes is not None and SOURCE_LINE_RE.match(body[k]):
                    fixes["search_source_line_removed"] += 1
                k += 1
        else:
            while k < n and body[k] and DATE_LINE_RE.match(body[k]):
                k += 1
        snippet = "\n".join([line for line in body[k:] if line]).strip()
        results.append({"title": title, "url": url, "snippet": snippet})
    return results


def parse_search_reference(text: str) -> str:
    """DR-Venus's ``parse_search_results``: raw search text -> JSON string (its snippet leaks included)."""
    text = text.replace("<tool_response>", "").replace("</tool_response>", "").strip()
    lines = text.splitlines()
    _, blocks = _split_blocks(lines)
    if not blocks:
        blocks = [("", lines)]
    parsed = [
        {
            "query": _query_from_header(header) if header else "",
            "web_page_info_list": _parse_results(body, False, None),
        }
        for header, body in blocks
    ]
    return json.dumps(parsed, ensure_ascii=False)


def _failure_block(text: str, fallback_query: str) -> dict:
    match = NO_RESULTS_RE.search(text)
    query = match.group(2).strip() if match else fallback_query
    return {"query": query, "web_page_info_list": [], "message": text}


def parse_search_strict(text: str, queries: list[str] | None = None, fixes: Counter | None = None) -> str:
    """Strict parser: one block per query, separators and ``Source:`` lines removed, failures kept.

    ``queries`` are the queries of the call this text answers (used to name a failed block whose text does
    not quote its query).  Fix counters are added to ``fixes``.
    """
    fixes = fixes if fixes is not None else Counter()
    queries = queries or []
    text = text.replace("<tool_response>", "").replace("</tool_response>", "").strip()
    segments: list[list[str]] = [[]]
    for line in text.splitlines():
        if line.strip() == SEPARATOR:
            segments.append([])
        else:
            segments[-1].append(line)
    if len(segments) > 1:
        fixes["search_separator_removed"] += len(segments) - 1
    parsed: list[dict] = []
    for lines in segments:
        _, blocks = _split_blocks(lines)  # text before a segment's first header is ignored, as in the reference
        fallback = queries[len(parsed)] if len(parsed) < len(queries) else ""
        if not blocks:
            body = "\n".join(lines).strip()
            if not body:
                continue
            if "Web Results" in body:  # results without a header line: parse them, as the reference does
                parsed.append({"query": fallback, "web_page_info_list": _parse_results(lines, True, fixes)})
            else:
                parsed.append(_failure_block(body, fallback))
                fixes["search_failure_kept"] += 1
            continue
        for header, body_lines in blocks:
            parsed.append(
                {"query": _query_from_header(header), "web_page_info_list": _parse_results(body_lines, True, fixes)}
            )
    return json.dumps(parsed, ensure_ascii=False)
