"""The per-row cleaning rules of DR-Venus's ``SFT/data_clean/prepare_trajectories.py``, in two modes.

``reference`` reproduces the published script exactly, quirks included, so that results compare with the
paper's numbers.  ``strict`` (the default) fixes the script's defects that corrupt training data (a leaked
nested answer, search-parser leaks, loose argument checks, validator gaps, ...: :data:`STRICT_FIXES`).  Each
strict fix has a name in :data:`STRICT_FIXES` and is counted (``stats.json["strict_fixes"]``) every time it
changes a row; each strict-only drop is its own drop reason.

One row goes through :func:`clean_row`, in the script's order (its function names in brackets): question/gt
extraction and system prompt (``normalize_row``) -> normalisation of a raw row (``normalize_raw_messages``:
``clean_toolcall_output``, ``clean_answer_output``, ``parse_search_results``) or of an already-clean row
(``normalize_clean_messages``) -> disallowed-tool pruning (``prune_disallowed_tool_turns``) -> duplicate
tool-call removal (``remove_duplicate_tool_calls``) -> structure validation (``validate_messages``).
Nothing here raises on bad row content: every problem becomes a drop reason; a row nested too deep
(:data:`~.sources.MAX_DEPTH`) is dropped as ``too_deep`` before the rules.
Tags are matched with :class:`venus_utils.core.protocol.TagPattern`, in time linear in the text even when closing tags
are missing.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import json5
import orjson

from ..core import protocol
from .search_text import parse_search_reference, parse_search_strict
from .sources import TOO_DEEP, text_too_deep, too_deep

_FLAGS = re.DOTALL | re.IGNORECASE


THINK_RE = protocol.THINK_RE
ANSWER_RE = protocol.ANSWER_RE
TOOL_CALL_RE = protocol.TOOL_CALL_RE
SUMMARY_RE = protocol.TagPattern("summary")
ANSWER_OPEN_RE = re.compile(r"<answer>", re.IGNORECASE)
TAG_LITERAL_RE = re.compile(r"</?(?:answer|summary)>", re.IGNORECASE)

DEDUP_TOOLS = frozenset({"search", "visit"})
VISIT_KEYS = ("url", "urls", "uri", "uris", "link", "links", "page", "pages", "query", "queries")
DEFAULT_ALLOWED_TOOLS = ("search", "visit")
MODES = ("strict", "reference")

#: Every strict-mode fix, by the name it is counted under in stats.json, with the defect of the published
#: script it addresses.
STRICT_FIXES: dict[str, str] = {
    "answer_nested_open_removed": "answer opened twice: keep the last-opened <answer> block's text",
    "answer_summary_removed": "<summary> text / stray tags removed from inside the answer",
    "search_separator_removed": "'=======' separator lines no longer leak into snippets",
    "search_source_line_removed": "leading 'Source:' metadata lines removed like date lines",
    "search_failure_kept": "a failed / timed-out query keeps its own block with the tool's message",
    "search_response_parsed_by_call": "a search response without 'Web Results' is still parsed as search",
    "visit_response_not_parsed_as_search": "a visit response containing 'Web Results' stays page text",
    "search_args_rejected": "empty query list or blank / non-string queries reject the turn",
    "visit_args_rejected": "empty url list or blank / non-string urls reject the turn",
    "visit_urls_fallback": "'url': null falls back to 'urls' instead of dropping the turn",
    "tool_name_case_normalized": "'Search' / 'VISIT' standardised like search / visit",
    "multiple_tool_calls_rejected": "a turn with several <tool_call>s is rejected, not cut to the first",
    "visit_goal_in_dedup": "re-visiting a URL with a new goal is not a duplicate",
    "clean_row_normalized": "already-clean rows go through the same normalisation (changed rows)",
    "raw_leading_system_used": "a leading system message in raw rows is not taken as the question",
    "tool_role_as_response": "'tool' / 'function' roles are tool responses, not a reason to drop",
    "meta_json_string_parsed": "'meta' stored as a JSON string is parsed instead of misrouted",
    "question_gt_surrogates_fixed": "question / gt get the surrogate fix like the messages",
}

#: Drop reasons that only strict mode produces (the reference ones are :func:`validate_reference`'s and
#: ``missing_question_or_gt`` / ``raw_clean_failed`` / ``clean_input_invalid``).
STRICT_DROP_REASONS = (
    "row_not_object",
    "raw_messages_not_a_list",
    "raw_message_not_dict",
    "raw_content_not_str",
    "raw_missing_question",
    "raw_bad_role",
    "ends_without_answer",
    "final_missing_answer",
    "final_missing_think",
    "final_empty_answer",
    "final_empty_think",
    "bad_role",
    "non_str_content",
    "user_missing_tool_response",
    "too_long",
    "incorrect_answer",
)


# --------------------------------------------------------------------------------------------------
# small helpers


def fix_surrogates(text: Any) -> Any:
    """DR-Venus's surrogate fix: join UTF-16 surrogate pairs, drop lone surrogates (no-op on clean text)."""
    if not isinstance(text, str) or text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text  # no surrogate code points at all
    except UnicodeEncodeError:
        pass
    try:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
    except Exception:
        return text.encode("utf-8", "ignore").decode("utf-8")


def deep_fix(obj: Any) -> Any:
    if isinstance(obj, str):
        return fix_surrogates(obj)
    if isinstance(obj, list):
        return [deep_fix(x) for x in obj]
    if isinstance(obj, tuple):
        return [deep_fix(x) for x in obj]
    if isinstance(obj, dict):
        return {k: deep_fix(v) for k, v in obj.items()}
    if hasattr(obj, "tolist") and not isinstance(obj, (int, float)):  # numpy arrays from pandas callers
        return deep_fix(obj.tolist())
    return obj


def loads_tolerant(text: str) -> Any:
    """json5 semantics (what DR-Venus parses tool calls with) at orjson speed: strict JSON first."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json5.loads(text)


def _str_list(value: Any) -> list[str]:
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    out = []
    for item in items:
        if item is None:
            continue
        text = str(item).strip()
        if text:
            out.append(text)
    return out


def tool_calls_in(content: Any, memo: dict | None = None) -> list[dict]:
    """Every parseable ``<tool_call>`` object in a message (body cut at ``<code>``; json then json5)."""
    if not isinstance(content, str) or "<" not in content:
        return []
    if memo is not None and content in memo:
        return memo[content]
    calls = []
    for match in TOOL_CALL_RE.finditer(content):
        raw = match.group(1).strip().split("<code>")[0].strip()
        try:
            obj = loads_tolerant(raw)
        except Exception:
            continue
        if isinstance(obj, dict):
            calls.append(obj)
    if memo is not None:
        memo[content] = calls
    return calls


def _content(message: Any) -> Any:
    return message.get("content", "") if isinstance(message, dict) else None


def _role(message: Any) -> Any:
    return message.get("role", "") if isinstance(message, dict) else None


# --------------------------------------------------------------------------------------------------
# options and result


@dataclass(frozen=True)
class RuleOptions:
    """What :func:`clean_row` needs; picklable so worker processes get their own copy."""

    mode: str = "strict"
    system_prompt_mode: str = "template"
    template_prompt: str = field(default_factory=protocol.system_prompt)
    allowed_tools: frozenset = frozenset(DEFAULT_ALLOWED_TOOLS)

    @property
    def strict(self) -> bool:
        return self.mode == "strict"


@dataclass
class RowOutcome:
    reason: str | None = None  # drop reason; None when the row is valid
    question: str | None = None
    gt: str | None = None
    stage1: list | None = None  # messages after normalisation (before pruning)
    messages: list | None = None  # final messages of a valid row
    pruned_turns: int = 0
    pruned_responses: int = 0
    pruned_names: list = field(default_factory=list)
    duplicates: int = 0
    tool_names: list = field(default_factory=list)
    fixes: Counter = field(default_factory=Counter)
    removed: Counter = field(default_factory=Counter)  # turns silently removed inside kept rows


# --------------------------------------------------------------------------------------------------
# question / gt and system prompt


def extract_question_gt(row: dict) -> tuple[Any, Any]:
    meta = row.get("meta")
    if isinstance(meta, dict):
        q, a = meta.get("question"), meta.get("answer")
    else:
        q, a = row.get("question"), row.get("gt")
    return (q if isinstance(q, str) else None), (a if isinstance(a, str) else None)


def choose_system_prompt(row: dict, mode: str, template: str) -> str:
    if mode == "template":
        return template
    if mode != "row":
        raise ValueError(f"system_prompt_mode must be 'template' or 'row', got {mode!r}")
    prompt = row.get("system_prompt")
    if isinstance(prompt, str) and prompt.strip():
        return prompt
    messages = row.get("messages")
    if isinstance(messages, list) and messages:
        first = messages[0]
        if isinstance(first, dict) and first.get("role") == "system":
            content = first.get("content")
            if isinstance(content, str) and content.strip():
                return content
    return template


# --------------------------------------------------------------------------------------------------
# reference turn cleaning (DR-Venus's clean_toolcall_output / clean_answer_output)


def _normalize_call_reference(call: dict, raw: str) -> dict | str | None:
    name, args = call.get("name"), call.get("arguments")
    if name == "search":
        if not isinstance(args, dict):
            return None
        query = args.get("query", args.get("queries"))
        if isinstance(query, str):
            query = [query]
        elif not isinstance(query, list):
            return None
        return {"name": "search", "arguments": {"query": query}}
    if name == "visit":
        if not isinstance(args, dict):
            return None
        goal = args.get("goal")
        if isinstance(goal, list):
            goal = goal[0] if goal else ""
        elif not isinstance(goal, str):
            return None
        urls = args.get("url", args.get("urls"))
        if isinstance(urls, str):
            urls = [urls]
        elif not isinstance(urls, list):
            return None
        return {"name": "visit", "arguments": {"url": urls, "goal": goal}}
    if name == "PythonInterpreter":
        return raw if isinstance(args, dict) and not args else None
    if name and isinstance(args, dict):
        return {"name": name, "arguments": args}
    return None


def clean_tool_turn_reference(text: Any) -> str | None:
    if not isinstance(text, str):
        return None
    think = THINK_RE.search(text)
    if not think:
        return None
    reasoning = think.group(1).strip().replace("<answer>", "").replace("</answer>", "")
    reasoning = reasoning.replace("<summary>", "").replace("</summary>", "")
    if not reasoning:
        return None
    match = TOOL_CALL_RE.search(text)
    if not match:
        return None
    raw = match.group(1).strip()
    try:
        call = loads_tolerant(raw.split("<code>")[0].strip())
    except Exception:
        return None
    if not isinstance(call, dict):
        return None
    normalized = _normalize_call_reference(call, raw)
    if normalized is None:
        return None
    body = normalized if isinstance(normalized, str) else json.dumps(normalized, ensure_ascii=False)
    return f"<think>\n{reasoning}\n</think>\n<tool_call>\n{body}\n</tool_call>"


def _final_reasoning(text: str, reasoning: str, strict: bool) -> str:
    reasoning = SUMMARY_RE.sub(r"\1", reasoning)
    reasoning = ANSWER_RE.sub(r"\1", reasoning)
    if strict:
        reasoning = TAG_LITERAL_RE.sub("", reasoning).strip()
    else:
        reasoning = reasoning.replace("<answer>", "").replace("</answer>", "")
        reasoning = reasoning.replace("<summary>", "").replace("</summary>", "")
    external = [m.group(1).strip() for m in SUMMARY_RE.finditer(text.split("</think>")[-1])]
    parts = ([reasoning] if reasoning else []) + external
    return "\n\n".join(parts)


def clean_final_turn_reference(text: Any) -> str | None:
    if not isinstance(text, str):
        return None
    answers = list(ANSWER_RE.finditer(text))
    if not answers:
        return None
    answer = answers[-1].group(1).strip()
    think = THINK_RE.search(text)
    if not think:
        return None
    reasoning = _final_reasoning(text, think.group(1).strip(), strict=False)
    return f"<think>\n{reasoning}\n</think>\n<answer>\n{answer}\n</answer>"


# --------------------------------------------------------------------------------------------------
# strict turn cleaning


def _strict_search_args(args: dict, fixes: Counter) -> dict | None:
    query = args.get("query", args.get("queries"))
    if isinstance(query, str):
        query = [query]
    if not isinstance(query, list):
        return None
    if not query or any(not isinstance(q, str) or not q.strip() for q in query):
        fixes["search_args_rejected"] += 1
        return None
    return {"query": query}


def _strict_visit_args(args: dict, fixes: Counter) -> dict | None:
    goal = args.get("goal")
    if isinstance(goal, list):
        goal = goal[0] if goal else ""
    if not isinstance(goal, str):
        return None
    urls = args.get("url", args.get("urls"))
    if urls is None and args.get("urls") is not None:
        urls = args["urls"]
        fixes["visit_urls_fallback"] += 1
    if isinstance(urls, str):
        urls = [urls]
    if not isinstance(urls, list):
        return None
    if not urls or any(not isinstance(u, str) or not u.strip() for u in urls):
        fixes["visit_args_rejected"] += 1
        return None
    return {"url": urls, "goal": goal}


def clean_tool_turn_strict(text: str, fixes: Counter) -> tuple[str | None, dict | None, str]:
    """(turn text, {"name", "arguments"}, why-not) for one intermediate assistant message."""
    think = THINK_RE.search(text)
    if not think:
        return None, None, "missing_think"
    reasoning = TAG_LITERAL_RE.sub("", think.group(1).strip()).strip()
    if not reasoning:
        return None, None, "empty_think"
    bodies = TOOL_CALL_RE.findall(text)
    if not bodies:
        return None, None, "missing_tool_call"
    if len(bodies) > 1:
        fixes["multiple_tool_calls_rejected"] += 1
        return None, None, "multiple_tool_calls"
    call = protocol.parse_tool_call_body(bodies[0])
    if not call.ok:
        return None, None, "unparseable_tool_call"
    name, args = call.name, call.arguments
    if name.lower() in DEDUP_TOOLS and name != name.lower():
        fixes["tool_name_case_normalized"] += 1
        name = name.lower()
    if name == "search":
        args = _strict_search_args(args, fixes)
    elif name == "visit":
        args = _strict_visit_args(args, fixes)
    elif name == "PythonInterpreter":
        if args:
            return None, None, "bad_arguments"
        raw = bodies[0].strip()
        return f"<think>\n{reasoning}\n</think>\n<tool_call>\n{raw}\n</tool_call>", {"name": name, "arguments": {}}, ""
    if args is None:
        return None, None, "bad_arguments"
    return protocol.tool_turn(reasoning, name, args), {"name": name, "arguments": args}, ""


def clean_final_turn_strict(text: str, fixes: Counter) -> tuple[str | None, str | None]:
    """(final turn text, drop reason)."""
    answers = list(ANSWER_RE.finditer(text))
    if not answers:
        return None, "final_missing_answer"
    answer = answers[-1].group(1)
    opens = list(ANSWER_OPEN_RE.finditer(answer))
    if opens:
        answer = answer[opens[-1].end() :]
        fixes["answer_nested_open_removed"] += 1
    if SUMMARY_RE.search(answer) or TAG_LITERAL_RE.search(answer):
        answer = TAG_LITERAL_RE.sub("", SUMMARY_RE.sub("", answer))
        fixes["answer_summary_removed"] += 1
    answer = answer.strip()
    if not answer:
        return None, "final_empty_answer"
    think = THINK_RE.search(text)
    if not think:
        return None, "final_missing_think"
    reasoning = _final_reasoning(text, think.group(1).strip(), strict=True)
    if not reasoning.strip():
        return None, "final_empty_think"
    return protocol.answer_turn(reasoning, answer), None


# --------------------------------------------------------------------------------------------------
# normalisation of raw and already-clean rows (normalize_raw_messages / normalize_clean_messages)


def _wrap_response_reference(content: str) -> str:
    content = content.replace("<tool_response>", "").replace("</tool_response>", "").strip()
    body = parse_search_reference(content) if "Web Results" in content else content
    return f"<tool_response>\n{body}\n</tool_response>"


def normalize_raw_reference(messages: Any, prompt: str, removed: Counter) -> list | None:
    if not isinstance(messages, list) or not messages:
        return None
    out = [{"role": "system", "content": prompt}]
    last = len(messages) - 1
    for index, turn in enumerate(messages):
        if not isinstance(turn, dict):
            return None
        content, role = turn.get("content"), turn.get("role")
        if not isinstance(content, str):
            return None
        if index == 0:
            out.append({"role": "user", "content": content})
        elif index == last:
            cleaned = clean_final_turn_reference(content)
            if cleaned is None:
                return None
            out.append({"role": "assistant", "content": cleaned})
        elif role == "user":
            if out[-1]["role"] != "assistant":
                removed["orphan_response"] += 1
                continue
            out.append({"role": "user", "content": _wrap_response_reference(content)})
        elif role == "assistant":
            cleaned = clean_tool_turn_reference(content)
            if cleaned is None:
                removed["unusable_tool_turn"] += 1
                continue
            out.append({"role": "assistant", "content": cleaned})
        else:
            return None
    return deep_fix(out)


def normalize_clean_reference(messages: Any, mode: str, prompt: str) -> list | None:
    if not isinstance(messages, list) or not messages:
        return None
    messages = deep_fix(messages)
    if not isinstance(messages[0], dict):
        return None
    if messages[0].get("role") == "system":
        if mode == "template":
            messages[0]["content"] = prompt
        return messages
    return [{"role": "system", "content": prompt}] + messages


def _looks_like_json_list(body: str) -> bool:
    if not body.startswith("["):
        return False
    try:
        return isinstance(orjson.loads(body), list)
    except orjson.JSONDecodeError:
        return False


def _strict_response(content: str, last_call: dict | None, fixes: Counter) -> str:
    body = content.replace("<tool_response>", "").replace("</tool_response>", "").strip()
    name = last_call["name"] if last_call else None
    if name == "search":
        if not _looks_like_json_list(body):
            if "Web Results" not in body:
                fixes["search_response_parsed_by_call"] += 1
            queries = last_call["arguments"].get("query") or []
            body = parse_search_strict(body, [q for q in queries if isinstance(q, str)], fixes)
    elif name == "visit":
        if "Web Results" in body:
            fixes["visit_response_not_parsed_as_search"] += 1
    elif "Web Results" in body and not _looks_like_json_list(body):
        body = parse_search_strict(body, None, fixes)
    return protocol.wrap_tool_response(body)


def normalize_strict(
    messages: Any, prompt: str, fixes: Counter, removed: Counter, raw: bool
) -> tuple[list | None, str | None]:
    """One normaliser for raw and already-clean rows: (messages, drop reason).

    The published script skips tool-call standardisation and search parsing for already-clean rows; here both
    kinds go through the same rules.
    """
    if not isinstance(messages, list) or not messages:
        return None, "raw_messages_not_a_list"
    for turn in messages:
        if not isinstance(turn, dict):
            return None, "raw_message_not_dict"
        if not isinstance(turn.get("content"), str):
            return None, "raw_content_not_str"
    start = 0
    while start < len(messages) and messages[start].get("role") == "system":
        start += 1
    if start and raw:
        fixes["raw_leading_system_used"] += 1
    if start >= len(messages) or messages[start].get("role") != "user":
        return None, "raw_missing_question"
    rest = messages[start + 1 :]
    if not rest:
        return None, "ends_without_answer"
    final_role = rest[-1].get("role")
    if final_role != "assistant":
        return None, "ends_without_answer" if final_role in ("user", "tool", "function") else "raw_bad_role"
    out = [{"role": "system", "content": prompt}, {"role": "user", "content": messages[start]["content"]}]
    last_call = None
    for turn in rest[:-1]:
        role, content = turn.get("role"), turn["content"]
        if role in ("tool", "function"):
            fixes["tool_role_as_response"] += 1
            role = "user"
        if role == "user":
            if out[-1]["role"] != "assistant":
                removed["orphan_response"] += 1
                continue
            out.append({"role": "user", "content": _strict_response(content, last_call, fixes)})
        elif role == "assistant":
            text, call, why = clean_tool_turn_strict(content, fixes)
            if text is None:
                removed[f"tool_turn_{why}"] += 1
                continue
            out.append({"role": "assistant", "content": text})
            last_call = call
        else:
            return None, "raw_bad_role"
    final, reason = clean_final_turn_strict(rest[-1]["content"], fixes)
    if final is None:
        return None, reason
    out.append({"role": "assistant", "content": final})
    out = deep_fix(out)
    if not raw and out[1:] != [{"role": m.get("role"), "content": m.get("content")} for m in messages[start:]]:
        fixes["clean_row_normalized"] += 1
    return out, None


# --------------------------------------------------------------------------------------------------
# disallowed-tool pruning, duplicate removal (prune_disallowed_tool_turns / remove_duplicate_tool_calls)


def _drop_turn_and_responses(messages: list, idx: int) -> tuple[int, int]:
    """Index after the assistant at ``idx`` and its following tool-response user messages; (next, n)."""
    idx += 1
    n = 0
    while idx < len(messages):
        nxt = messages[idx]
        content = _content(nxt)
        if _role(nxt) == "user" and isinstance(content, str) and "<tool_response>" in content:
            idx += 1
            n += 1
        else:
            break
    return idx, n


def prune_disallowed(messages: list, allowed: frozenset, out: RowOutcome, memo: dict) -> list:
    kept = []
    idx = 0
    while idx < len(messages):
        message = messages[idx]
        if _role(message) != "assistant":
            kept.append(message)
            idx += 1
            continue
        names = [c.get("name") for c in tool_calls_in(_content(message), memo)]
        names = [n for n in names if isinstance(n, str) and n]
        bad = [n for n in names if n.lower() not in allowed]
        if not bad:
            kept.append(message)
            idx += 1
            continue
        idx, n = _drop_turn_and_responses(messages, idx)
        out.pruned_turns += 1
        out.pruned_responses += n
        out.pruned_names.extend(bad)
    return kept


def signature(call: dict, strict: bool) -> tuple | None:
    name, args = call.get("name"), call.get("arguments", {})
    if not isinstance(name, str) or name not in DEDUP_TOOLS:
        return None
    if name == "search":
        values = _str_list(args.get("query", args.get("queries"))) if isinstance(args, dict) else _str_list(args)
        return name, tuple(sorted(set(values)))
    collected: list[str] = []
    if isinstance(args, dict):
        for key in VISIT_KEYS:
            if key in args:
                collected.extend(_str_list(args[key]))
    else:
        collected.extend(_str_list(args))
    sig = (name, tuple(sorted(set(collected))))
    if strict:
        goal = args.get("goal") if isinstance(args, dict) else None
        sig += (goal.strip() if isinstance(goal, str) else "",)
    return sig


def remove_duplicates(messages: list, out: RowOutcome, memo: dict, strict: bool) -> list:
    kept = []
    seen: set = set()
    seen_loose: set = set()
    idx = 0
    while idx < len(messages):
        message = messages[idx]
        if _role(message) != "assistant":
            kept.append(message)
            idx += 1
            continue
        calls = tool_calls_in(_content(message), memo)
        sigs = [s for s in (signature(c, strict) for c in calls) if s is not None]
        if not sigs:
            kept.append(message)
            idx += 1
            continue
        if all(s in seen for s in sigs):
            idx, _ = _drop_turn_and_responses(messages, idx)
            out.duplicates += 1
            continue
        if strict:
            loose = [s[:2] for s in sigs]
            if all(s in seen_loose for s in loose):
                out.fixes["visit_goal_in_dedup"] += 1
            seen_loose.update(loose)
        seen.update(sigs)
        kept.append(message)
        idx += 1
    return kept


# --------------------------------------------------------------------------------------------------
# structure validation (validate_messages)


def validate_reference(messages: Any) -> str | None:
    """The first failing check of DR-Venus's validator, or None when the conversation is valid."""
    return _first_failure(messages, strict=False)


def validate_strict(messages: Any) -> str | None:
    """DR-Venus's checks with their gaps closed, and drop reasons without index suffixes.

    Closed gaps: a conversation ending with a tool response (even length) is dropped, and tags are checked
    where the chat template looks for them (a turn starts with ``<think>``, a response is wrapped in
    ``<tool_response>`` tags, a turn ends with ``</tool_call>`` / ``</answer>``) rather than anywhere in it.
    """
    return _first_failure(messages, strict=True)


def _first_failure(messages: Any, strict: bool) -> str | None:
    """The checks both validators share, in DR-Venus's order; ``strict`` adds the closed gaps (see
    :func:`validate_strict`) and drops the ``_at_<index>`` suffixes of the reference's reasons."""
    if not isinstance(messages, list) or len(messages) < 3:
        return "too_short"
    if strict and len(messages) % 2 == 0:
        return "ends_without_answer"
    if not isinstance(messages[0], dict) or messages[0].get("role") != "system":
        return "bad_role_start"
    last = len(messages) - 1
    for idx in range(1, len(messages)):
        at = "" if strict else f"_at_{idx}"
        message = messages[idx]
        if not isinstance(message, dict):
            return "non_dict_message"
        expected = "user" if idx % 2 == 1 else "assistant"
        if message.get("role") != expected:
            return f"bad_role{at}"
        content = message.get("content") if strict else message.get("content", "")  # DR-Venus: a missing one is ""
        if not isinstance(content, str):
            return f"non_str_content{at}"
        if expected == "user":
            if idx == 1:
                if "<tool_response>" in content or "</tool_response>" in content:
                    return "first_user_contains_tool_response"
            elif not _holds_tool_response(content, strict):
                return f"user_missing_tool_response{at}"
            continue
        if (strict and not content.startswith("<think>")) or not THINK_RE.search(content):
            return "assistant_missing_think"
        has_answer = ANSWER_RE.search(content) is not None
        has_tool = TOOL_CALL_RE.search(content) is not None
        if idx == last:
            if not has_answer or (strict and not content.endswith("</answer>")):
                return "final_assistant_missing_answer"
            if has_tool:
                return "final_assistant_contains_tool"
        else:
            if not has_tool or (strict and not content.endswith("</tool_call>")):
                return "assistant_missing_tool_call"
            if has_answer:
                return "assistant_tool_turn_contains_answer"
    return None


def _holds_tool_response(content: str, strict: bool) -> bool:
    """A user turn after the first is a tool response: wrapped in the tags (strict), or holding both (DR-Venus)."""
    if strict:
        return content.startswith("<tool_response>") and content.endswith("</tool_response>")
    return "<tool_response>" in content and "</tool_response>" in content


# --------------------------------------------------------------------------------------------------
# one row


def _strict_question_gt(row: dict, out: RowOutcome) -> tuple[Any, Any]:
    meta = row.get("meta")
    if isinstance(meta, str) and meta.lstrip().startswith("{"):
        try:
            parsed = orjson.loads(meta)
        except orjson.JSONDecodeError:
            parsed = None
        if isinstance(parsed, dict):
            row = {**row, "meta": parsed}
            out.fixes["meta_json_string_parsed"] += 1
    question, gt = extract_question_gt(row)
    fixed = fix_surrogates(question), fix_surrogates(gt)
    if fixed != (question, gt):
        out.fixes["question_gt_surrogates_fixed"] += 1
    return row, fixed


def _nested_too_deep(row: Any) -> bool:
    """Whether the row, or the JSON of a tool call in one of its assistant messages, nests too deep to handle."""
    if too_deep(row):
        return True
    messages = row.get("messages") if isinstance(row, dict) else None
    for message in messages if isinstance(messages, list) else ():
        content = _content(message)
        if _role(message) != "assistant" or not isinstance(content, str):
            continue
        if text_too_deep(content):  # else no tool call in it can be (its brackets nest no deeper than the text's)
            if any(text_too_deep(body.split("<code>")[0]) for body in TOOL_CALL_RE.findall(content)):
                return True
    return False


def clean_row(row: Any, opts: RuleOptions) -> RowOutcome:
    """Run every rule on one input row; never raises on bad content.

    A row nested deeper than :data:`~.sources.MAX_DEPTH` (itself or a tool call's JSON) is dropped as
    ``too_deep`` before any rule runs, so that no rule depends on how deep the caller's stack already is.
    """
    try:
        if _nested_too_deep(row):
            return RowOutcome(reason=TOO_DEEP)
        return _clean_row(row, opts)
    except RecursionError:  # a last resort: nothing nested within MAX_DEPTH gets here
        return RowOutcome(reason=TOO_DEEP)


def _clean_row(row: Any, opts: RuleOptions) -> RowOutcome:
    out = RowOutcome()
    strict = opts.strict
    if not isinstance(row, dict):
        out.reason = "row_not_object" if strict else "missing_question_or_gt"
        return out
    if strict:
        row, (question, gt) = _strict_question_gt(row, out)
        missing = not (question and question.strip() and gt and gt.strip())
    else:
        question, gt = extract_question_gt(row)
        question, gt = fix_surrogates(question), fix_surrogates(gt)  # the reference would crash on writing
        missing = not question or not gt
    if missing:
        out.reason = "missing_question_or_gt"
        return out
    out.question, out.gt = question, gt
    prompt = choose_system_prompt(row, opts.system_prompt_mode, opts.template_prompt)
    raw = isinstance(row.get("meta"), dict)
    messages = row.get("messages")
    if strict:
        normalized, reason = normalize_strict(messages, prompt, out.fixes, out.removed, raw)
        if normalized is None:
            out.reason = reason
            return out
    elif raw:
        normalized = normalize_raw_reference(messages, prompt, out.removed)
        if normalized is None:
            out.reason = "raw_clean_failed"
            return out
    else:
        normalized = normalize_clean_reference(messages, opts.system_prompt_mode, prompt)
        if normalized is None:
            out.reason = "clean_input_invalid"
            return out
    out.stage1 = normalized
    memo: dict = {}
    messages = prune_disallowed(normalized, opts.allowed_tools, out, memo)
    messages = remove_duplicates(messages, out, memo, strict)
    reason = validate_strict(messages) if strict else validate_reference(messages)
    if reason is not None:
        out.reason = reason
        return out
    out.messages = messages
    for message in messages:
        if _role(message) == "assistant":
            out.tool_names.extend(
                c.get("name") for c in tool_calls_in(_content(message), memo) if isinstance(c.get("name"), str)
            )
    return out


def turns_of(messages: list) -> int:
    """DR-Venus's turn count: floor((len(messages) - 1) / 2) = assistant turns of a valid row."""
    return max(len(messages) - 1, 0) // 2
