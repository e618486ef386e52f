"""Step cards: a research trace (the agent's message list) as reasoning / search / visit / answer steps.

One renderer serves three views: the Gradio web demo and notebook 06 (HTML cards, the "Research Process"
feed of DR-Venus's web demo), and Papermill / terminals (a printed trace).  It reads any message list in
the DR-Venus protocol: a live run, a saved trace, a predictions line or a shared RL rollout.

- ``steps_from_messages(messages)`` -> ``[Step]``: one step per assistant turn (its reasoning plus the tool
  call and the tool's result, or the final answer, or the parse error), plus the question and any
  forced-ending note;
- ``render_html(steps)`` -> self-contained, escaped HTML (only http(s) URLs become links);
- ``render_text(steps)`` -> a plain-text trace.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..core import protocol

VISIT_HEAD_RE = re.compile(
    r"The useful information in (?P<url>.+?) for user goal (?P<goal>.*?) as follows:", re.DOTALL
)
EVIDENCE_RE = re.compile(r"Evidence in page:\s*(?P<evidence>.*?)(?=\n\s*Summary:|\Z)", re.DOTALL)
SUMMARY_RE = re.compile(r"Summary:\s*(?P<summary>.*)\Z", re.DOTALL)
SEPARATOR_RE = re.compile(r"\n?={7}\n?")
LOOP_NOTES = {protocol.FORCE_CONTEXT, protocol.FORCE_MAX_STEPS}  # forced-ending notes of the agent loop


@dataclass
class Step:
    """One card.  ``kind``: question | search | visit | tool | answer | error | note."""

    kind: str
    turn: int = 0
    think: str = ""
    text: str = ""  # question, answer, error message, note, or a tool result that did not parse
    queries: list[str] = field(default_factory=list)
    urls: list[str] = field(default_factory=list)
    goal: str = ""
    results: list[dict] = field(
        default_factory=list
    )  # search: {query, hits, error}; visit: {url, goal, evidence, summary}
    pending: bool = False  # a tool call whose result has not arrived yet


# --------------------------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------------------------
def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return [str(value)]


def parse_search_result(body: str) -> tuple[list[dict], str]:
    """The search tool's JSON (see :func:`venus_utils.core.protocol.search_results_json`) -> blocks, or
    ``([], text)``."""
    try:
        data = json.loads(body)
    except (json.JSONDecodeError, ValueError):
        return [], body
    if not isinstance(data, list) or not all(isinstance(b, dict) for b in data):
        return [], body
    blocks = []
    for b in data:
        hits = [h for h in b.get("web_page_info_list") or [] if isinstance(h, dict)]
        blocks.append({"query": str(b.get("query", "")), "hits": hits, "error": b.get("message") or b.get("error")})
    return blocks, ""


def parse_visit_result(body: str) -> list[dict]:
    """The visit tool's text (one frame per URL, joined by ``=======``) -> ``[{url, goal, evidence, summary}]``."""
    out = []
    for part in SEPARATOR_RE.split(body):
        if not part.strip():
            continue
        head = VISIT_HEAD_RE.search(part)
        evidence = EVIDENCE_RE.search(part)
        summary = SUMMARY_RE.search(part)
        out.append(
            {
                "url": head.group("url").strip() if head else "",
                "goal": head.group("goal").strip() if head else "",
                "evidence": evidence.group("evidence").strip() if evidence else "",
                "summary": summary.group("summary").strip() if summary else ("" if head else part.strip()),
            }
        )
    return out


def _tool_body(message: dict) -> str | None:
    content = str(message.get("content") or "")
    if message.get("role") == "tool":
        return content
    if message.get("role") != "user":
        return None
    body = protocol.tool_response_body(content)  # the whole response: a page's "</tool_response>" does not end it
    if body is not None:
        return body.strip()
    match = protocol.TOOL_RESPONSE_RE.search(content)
    return match.group(1).strip() if match else None


def _attach_result(step: Step, body: str) -> None:
    step.pending = False
    if step.kind == "search":
        step.results, raw = parse_search_result(body)
        step.text = raw
    elif step.kind == "visit":
        step.results = parse_visit_result(body)
    else:
        step.text = body


def _assistant_step(content: str, turn: int) -> Step:
    think_match = protocol.THINK_RE.search(content)
    think = think_match.group(1).strip() if think_match else ""
    call = protocol.parse_tool_call(content)
    answer = protocol.extract_answer(content)
    if answer is not None and call is None:
        return Step("answer", turn, think=think, text=answer)
    if call is not None and answer is None and call.ok:
        args = call.arguments
        if call.name == "search":
            return Step("search", turn, think=think, queries=_as_list(args.get("query")), pending=True)
        if call.name == "visit":
            return Step(
                "visit",
                turn,
                think=think,
                urls=_as_list(args.get("url")),
                goal=str(args.get("goal", "")),
                pending=True,
            )
        return Step(
            "tool", turn, think=think, text=f"{call.name}({json.dumps(args, ensure_ascii=False)})", pending=True
        )
    if call is not None and not call.ok:
        reason = call.error
    elif call is not None:
        reason = "both a tool call and an answer"
    else:
        reason = "neither a tool call nor an answer"
    if not think and not content.strip():
        reason = "empty reply"
    # a turn without tags: show the text itself as reasoning
    return Step("error", turn, think=think or content.strip(), text=f"malformed turn: {reason}")


def steps_from_messages(messages: list[dict]) -> list[Step]:
    """The cards of a message list (system prompt skipped; the first user message is the question)."""
    steps: list[Step] = []
    turn = 0
    question_seen = False
    awaiting: Step | None = None  # the last assistant step, until the loop's reply to it arrives
    for message in messages:
        role = message.get("role")
        content = str(message.get("content") or "")
        if role == "system":
            continue
        if role == "assistant":
            turn += 1
            awaiting = _assistant_step(content, turn)
            steps.append(awaiting)
            continue
        body = _tool_body(message)
        if not question_seen and body is None:
            steps.append(Step("question", 0, text=content.strip()))
            question_seen = True
            continue
        if body is not None and body.strip() in LOOP_NOTES:  # a forced ending replaced the tool's reply
            steps.append(Step("note", turn, text=body.strip()))
        elif body is not None and awaiting is not None and awaiting.pending:
            _attach_result(awaiting, body)
        elif body is not None and awaiting is not None and awaiting.kind == "error":
            awaiting.text += f"\n{body}"  # the loop's "malformed" reply
        else:
            steps.append(Step("note", turn, text=body if body is not None else content.strip()))
        awaiting = None
    return steps


def load_trace(path: str | Path, index: int = 0) -> dict:
    """A saved trace: a JSON file (RL rollout, SFT example, ``{"messages": ...}``) or line ``index`` of a JSONL."""
    path = Path(path)
    if path.suffix == ".jsonl":
        with path.open(encoding="utf-8") as fh:
            lines = [ln for ln in fh if ln.strip()]
        if not 0 <= index < len(lines):
            raise IndexError(f"{path}: has {len(lines)} trace(s), asked for #{index}")
        record = json.loads(lines[index])
    else:
        record = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(record, list):
        record = {"messages": record}
    if not isinstance(record, dict) or not isinstance(record.get("messages"), list):
        raise ValueError(f"{path}: not a trace (expected a 'messages' list)")
    return record


# --------------------------------------------------------------------------------------------------------
# HTML
# --------------------------------------------------------------------------------------------------------
CSS = """
<style>
.vr-feed{font-family:system-ui,sans-serif;font-size:14px;line-height:1.4}
.vr-card{border-left:4px solid #999;border-radius:6px;background:#f7f7f9;margin:6px 0;padding:6px 10px}
.vr-card h4{margin:0 0 4px 0;font-size:13px;text-transform:uppercase;letter-spacing:.04em;color:#444}
.vr-question{border-color:#555}.vr-search{border-color:#1f77b4}.vr-visit{border-color:#2ca02c}
.vr-answer{border-color:#d62728;background:#fff5f0}.vr-error{border-color:#ff7f0e}.vr-note{border-color:#9467bd}
.vr-tool{border-color:#8c564b}.vr-think{white-space:pre-wrap;color:#333}.vr-pre{white-space:pre-wrap}
.vr-card ul{margin:2px 0 2px 18px;padding:0}.vr-muted{color:#777;font-size:12px}
.vr-pending{color:#999;font-style:italic}
</style>
"""

TITLES = {
    "question": "Question",
    "search": "Searching",
    "visit": "Visiting",
    "tool": "Tool call",
    "answer": "Final answer",
    "error": "Parse error (the loop retries)",
    "note": "Note from the loop",
}


def _e(text: str) -> str:
    return html.escape(str(text), quote=True)


def safe_link(url: str, label: str | None = None) -> str:
    """An anchor for an http(s) URL with a host, else the escaped text (no ``javascript:`` links)."""
    url = str(url).strip()
    parts = urlsplit(url)
    if parts.scheme in ("http", "https") and parts.netloc:
        return f'<a href="{_e(url)}" target="_blank" rel="noopener noreferrer">{_e(label or url)}</a>'
    return _e(label or url)


def _clip(text: str, limit: int) -> str:
    text = str(text)
    return text if len(text) <= limit else text[:limit].rstrip() + " …"


def _think_html(think: str, limit: int) -> str:
    if not think:
        return ""
    if len(think) <= limit:
        return f'<div class="vr-think">{_e(think)}</div>'
    return (
        f'<details><summary class="vr-think">{_e(_clip(think, limit))}</summary>'
        f'<div class="vr-think">{_e(think)}</div></details>'
    )


def step_html(step: Step, think_chars: int = 400, snippet_chars: int = 200) -> str:
    body = []
    if step.kind in ("question", "answer", "note"):
        body.append(f'<div class="vr-pre">{_e(step.text)}</div>')
    if step.kind != "question":
        body.insert(0, _think_html(step.think, think_chars))
    if step.kind == "search":
        body.append("<div><b>Queries:</b><ul>" + "".join(f"<li>{_e(q)}</li>" for q in step.queries) + "</ul></div>")
        for block in step.results:
            hits = "".join(
                f"<li>{safe_link(h.get('url', ''), h.get('title') or h.get('url'))}"
                f'<div class="vr-muted">{_e(_clip(h.get("snippet", ""), snippet_chars))}</div></li>'
                for h in block["hits"]
            )
            err = f'<div class="vr-muted">{_e(block["error"])}</div>' if block.get("error") else ""
            body.append(f'<div class="vr-muted">results for “{_e(block["query"])}”</div>{err}<ul>{hits}</ul>')
        if step.text:
            body.append(f'<div class="vr-pre vr-muted">{_e(_clip(step.text, 600))}</div>')
    elif step.kind == "visit":
        body.append(
            f"<div><b>Goal:</b> {_e(step.goal)}</div><ul>"
            + "".join(f"<li>{safe_link(u)}</li>" for u in step.urls)
            + "</ul>"
        )
        for r in step.results:
            ev = f'<div class="vr-pre"><b>Evidence:</b> {_e(_clip(r["evidence"], 800))}</div>' if r["evidence"] else ""
            body.append(
                f'<div class="vr-muted">{safe_link(r["url"]) if r["url"] else ""}</div>{ev}'
                f'<div class="vr-pre"><b>Summary:</b> {_e(_clip(r["summary"], 800))}</div>'
            )
    elif step.kind in ("tool", "error"):
        body.append(f'<div class="vr-pre">{_e(_clip(step.text, 800))}</div>')
    if step.pending:
        body.append('<div class="vr-pending">waiting for the tool…</div>')
    turn = f" · turn {step.turn}" if step.turn else ""
    return (
        f'<div class="vr-card vr-{step.kind}" data-kind="{step.kind}"><h4>{TITLES[step.kind]}{turn}</h4>'
        + "".join(body)
        + "</div>"
    )


def render_html(steps: list[Step], **kwargs) -> str:
    """The feed: every step as a coloured card, with the CSS inline (safe to embed anywhere)."""
    return CSS + '<div class="vr-feed">' + "".join(step_html(s, **kwargs) for s in steps) + "</div>"


# --------------------------------------------------------------------------------------------------------
# Text
# --------------------------------------------------------------------------------------------------------
def step_text(step: Step, think_chars: int = 300, snippet_chars: int = 100, hits: int = 3) -> str:
    head = f"[{step.turn:>3}] " if step.turn else "      "
    lines = []
    if step.kind == "question":
        return f"QUESTION: {step.text}"
    if step.think:
        lines.append(f"{head}THINK   {_clip(' '.join(step.think.split()), think_chars)}")
        head = "      "
    if step.kind == "search":
        lines.append(f"{head}SEARCH  " + " | ".join(step.queries))
        for block in step.results:
            for i, h in enumerate(block["hits"][:hits], 1):
                lines.append(
                    f"          {i}. {h.get('title', '')} <{h.get('url', '')}> "
                    f"{_clip(' '.join(str(h.get('snippet', '')).split()), snippet_chars)}"
                )
            if len(block["hits"]) > hits:
                lines.append(f"          ... {len(block['hits']) - hits} more for '{block['query']}'")
            if block.get("error"):
                lines.append(f"          ({block['error']})")
        if step.text:
            lines.append(f"          {_clip(step.text, 200)}")
    elif step.kind == "visit":
        lines.append(f"{head}VISIT   {', '.join(step.urls)}  (goal: {step.goal})")
        for r in step.results:
            if r["evidence"]:
                lines.append(f"          evidence: {_clip(' '.join(r['evidence'].split()), 200)}")
            lines.append(f"          summary:  {_clip(' '.join(r['summary'].split()), 200)}")
    elif step.kind == "answer":
        lines.append(f"{head}ANSWER  {step.text}")
    elif step.kind in ("tool", "error", "note"):
        lines.append(f"{head}{step.kind.upper():<7} {_clip(' '.join(step.text.split()), 300)}")
    if step.pending:
        lines.append("          (waiting for the tool)")
    return "\n".join(lines)


def render_text(steps: list[Step], **kwargs) -> str:
    return "\n".join(step_text(s, **kwargs) for s in steps)
