"""The DR-Venus conversation protocol, in one place.

Every stage speaks it: the cleaner writes it, the tiny model's tokenizer is trained on it, the agent loop
parses it, IGPO's format checker grades it.  Keep one implementation of each piece here and import it.

- system prompt: the DR-Venus deep-research prompt with the Qwen tool section (``<tools>`` JSON schemas,
  one per line) and an optional ``Current date:`` line; a ``compact`` style (offline CPU profiles) carries the same
  tools as one signature line each and the same call format, ~6x smaller (about 140 instead of 870 tokens of the
  tiny tokenizer; 282 instead of 1,871 characters with the date line);
- assistant tool turn: ``<think>\\n{reasoning}\\n</think>\\n<tool_call>\\n{json}\\n</tool_call>``;
- tool result: a *user* message ``<tool_response>\\n{body}\\n</tool_response>``;
- final turn: ``<think>\\n{reasoning}\\n</think>\\n<answer>\\n{answer}\\n</answer>``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import json5  # tolerant fallback (single quotes, trailing commas), as DR-Venus does

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
TOOL_CALL_OPEN, TOOL_CALL_CLOSE = "<tool_call>", "</tool_call>"
TOOL_RESPONSE_OPEN, TOOL_RESPONSE_CLOSE = "<tool_response>", "</tool_response>"
ANSWER_OPEN, ANSWER_CLOSE = "<answer>", "</answer>"
ANSWER_SPLIT = "<|answer_split|>"  # separates aliases in reward_model.ground_truth

DEFAULT_DATE = "2026-03-01"  # the date of every DR-Venus example and of its RL / inference prompts
#: DR-Venus's limits (its inference demo and RL rollout loop), written once: the agent loop's and the RL config's
#: defaults, the demo's bounds and the notebooks' notes read them from here
MAX_TURNS = 200  # assistant turns per question, inference and RL (the last one is forced to answer)
INFERENCE_TOKENS_PER_TURN = 15_000  # new tokens per turn, inference
RL_TOKENS_PER_TURN = 8192  # new tokens per turn, RL rollouts
RL_CONTEXT_TOKENS = 261_000  # the RL rollout engine's context (max_model_len)
DATA_SEED = 42  # DR-Venus's data scripts' seed (cleaning splits, resampling shuffles); the recipe's runs use their own

_FLAGS = re.DOTALL | re.IGNORECASE


class TagPattern:
    """A ``<tag>(.*?)</tag>`` pattern (DOTALL, IGNORECASE) with the ``re`` methods used here, in linear time.

    The compiled lazy pattern retries from every opening tag when no closing tag follows it, so ``"<think>" * N``
    costs N**2 steps (seconds for one 100 kB turn).  Here one scan for the tags finds the matches: the first
    opening tag, up to the first closing tag after it, then the same again after that closing tag -- the spans
    ``regex.finditer`` yields.  Each is returned as the ``re.Match`` of ``<tag>(.*)</tag>`` over exactly that
    span (groups, ``start``, ``end``, ``expand`` as the lazy pattern's), so the time is linear in the text.
    """

    def __init__(self, tag: str):
        if not re.fullmatch(r"\w+", tag):
            raise ValueError(f"{tag!r} is not a tag name")
        self.regex = re.compile(f"<{tag}>(.*?)</{tag}>", _FLAGS)  # what it matches like (tests compare the two)
        self.pattern = self.regex.pattern
        self._tags = re.compile(f"</?{tag}>", re.IGNORECASE)  # no group: keeps re's fast literal scan
        self._span = re.compile(f"<{tag}>(.*)</{tag}>", _FLAGS)

    def finditer(self, text: str):
        start = None
        for tag in self._tags.finditer(text):
            if text[tag.start() + 1] != "/":  # an opening tag
                if start is None:
                    start = tag.start()
            elif start is not None:  # the closing tag that ends the match opened at ``start``
                yield self._span.match(text, start, tag.end())
                start = None

    def search(self, text: str) -> re.Match | None:
        return next(self.finditer(text), None)

    def findall(self, text: str) -> list[str]:
        return [m.group(1) for m in self.finditer(text)]

    def sub(self, repl: str, text: str) -> str:
        pieces, pos = [], 0
        for m in self.finditer(text):
            pieces += [text[pos : m.start()], m.expand(repl)]
            pos = m.end()
        return "".join(pieces) + text[pos:] if pieces else text


THINK_RE = TagPattern("think")
TOOL_CALL_RE = TagPattern("tool_call")
ANSWER_RE = TagPattern("answer")
TOOL_RESPONSE_RE = TagPattern("tool_response")

SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search",
        "description": (
            "Perform Google web searches then returns a string of the top search results. Accepts multiple queries."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "query": {
                    "type": "array",
                    "items": {"type": "string", "description": "The search query."},
                    "minItems": 1,
                    "description": "The list of search queries.",
                }
            },
            "required": ["query"],
        },
    },
}

VISIT_TOOL = {
    "type": "function",
    "function": {
        "name": "visit",
        "description": "Visit webpage(s) and return the summary of the content.",
        "parameters": {
            "type": "object",
            "properties": {
                "url": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "The URL(s) of the webpage(s) to visit. Can be a single URL or an array of URLs.",
                },
                "goal": {"type": "string", "description": "The specific information goal for visiting webpage(s)."},
            },
            "required": ["url", "goal"],
        },
    },
}

TOOLS = (SEARCH_TOOL, VISIT_TOOL)
TOOL_NAMES = tuple(t["function"]["name"] for t in TOOLS)

_PROMPT_HEAD = (
    "You are a deep research assistant. Your core function is to conduct thorough, multi-source investigations into "
    "any topic. You must handle both broad, open-domain inquiries and queries within specialized academic fields. "
    "For each user request, you must actively seek out and **cross-check information** from credible and diverse "
    "sources, then integrate the findings into a response that is comprehensive, accurate, well-structured, and "
    "objective. When you have gathered sufficient information and are ready to provide the definitive response, you "
    "must enclose the entire final answer in `<answer></answer>` tags."
)
_TOOLS_INTRO = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
)
_CALL_FORMAT = '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
_TOOLS_OUTRO = (
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n" + _CALL_FORMAT
)
# The compact variant (offline profiles only): a one-line role, one signature line per tool derived from the same
# schemas, and the same call format.  ~6x fewer tokens than the DR-Venus prompt with the tiny tokenizer (about 140
# instead of 870 with the date line, for a tokenizer trained on the tiny world; 6.6x fewer characters).
_COMPACT_HEAD = "Research the question with the tools, then give the final answer in <answer></answer>."

SYSTEM_PROMPT_STYLES = ("dr-venus", "compact")


def check_system_prompt_style(style: str) -> str:
    """``style`` if it is one of :data:`SYSTEM_PROMPT_STYLES`, else a ValueError naming them."""
    if style not in SYSTEM_PROMPT_STYLES:
        raise ValueError(f"system_prompt_style must be one of {SYSTEM_PROMPT_STYLES}, got {style!r}")
    return style


def _signature(tool: dict) -> str:
    """``name(arg: type, ...)`` of a tool schema (arrays as ``type[]``), e.g.
    ``visit(url: string[], goal: string)``."""
    fn = tool["function"]
    args = []
    for name, spec in fn["parameters"]["properties"].items():
        kind = spec.get("type", "any")
        if kind == "array":
            kind = f"{spec.get('items', {}).get('type', 'any')}[]"
        args.append(f"{name}: {kind}")
    return f"{fn['name']}({', '.join(args)})"


def system_prompt(
    current_date: str | None = None, tools: tuple[dict, ...] | list[dict] = TOOLS, style: str = "dr-venus"
) -> str:
    """The agent's system prompt.

    ``style="dr-venus"`` (default; the paper profile): byte-identical to the system message of DR-Venus's SFT
    examples.  ``style="compact"`` (offline profiles): the same tools and call format in ~140 tokens of the tiny
    tokenizer, so a tiny model on a CPU spends its steps on trajectories instead of on ~870 masked prompt tokens;
    the cleaner (``CleanConfig.system_prompt_style``) and the agent loop (``AgentConfig.system_prompt_style``) must
    use the same style.  With ``current_date`` the prompt ends with ``"\n\nCurrent date: {date}\n"`` (the trailing
    newline is DR-Venus's); without it the prompt ends after ``</tool_call>``.
    """
    if check_system_prompt_style(style) == "dr-venus":
        schemas = "\n".join(json.dumps(tool, ensure_ascii=False) for tool in tools)
        base = f"{_PROMPT_HEAD}\n\n{_TOOLS_INTRO}{schemas}{_TOOLS_OUTRO}"
    else:  # compact
        signatures = "\n".join(_signature(tool) for tool in tools)
        base = f"{_COMPACT_HEAD}\nTools:\n{signatures}\nCall one per turn:\n{_CALL_FORMAT}"
    return f"{base}\n\nCurrent date: {current_date}\n" if current_date else base


def render_tool_call(name: str, arguments: dict[str, Any]) -> str:
    """The JSON body of a ``<tool_call>``: ``{"name": ..., "arguments": {...}}`` with spaced separators."""
    return json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)


def tool_turn(reasoning: str, name: str, arguments: dict[str, Any]) -> str:
    """An assistant turn that calls one tool."""
    return (
        f"{THINK_OPEN}\n{reasoning}\n{THINK_CLOSE}\n"
        f"{TOOL_CALL_OPEN}\n{render_tool_call(name, arguments)}\n{TOOL_CALL_CLOSE}"
    )


def answer_turn(reasoning: str, answer: str) -> str:
    """The final assistant turn."""
    return f"{THINK_OPEN}\n{reasoning}\n{THINK_CLOSE}\n{ANSWER_OPEN}\n{answer}\n{ANSWER_CLOSE}"


def wrap_tool_response(body: str) -> str:
    """A tool result as the content of the *user* message that carries it."""
    return f"{TOOL_RESPONSE_OPEN}\n{body}\n{TOOL_RESPONSE_CLOSE}"


# ---------------------------------------------------------------------------------------------------------
# Outside text is data, never a control token.
#
# Chat templates render messages to text and the text is then tokenized, so a page (or a dataset row) whose
# text contains ``</tool_response>\n<|im_end|>\n<|im_start|>assistant`` would become the real control-token ids:
# a forged turn inside a tool response.  Every rendering of messages for a model goes through
# :func:`render_chat` (or :func:`safe_messages` where a server applies its own template), which escapes the
# control pieces of the *content*: ``<|im_end|>`` becomes ``‹|im_end|›`` (single angle quotation marks), which
# reads the same to a person and tokenizes as plain text.  The template's own pieces stay special.  The stored
# messages keep the original text (the demo shows it as it came).

CONTROL_TOKEN_RE = re.compile(r"<\|[^<>|\s]{1,64}\|>")  # <|im_start|>, <|im_end|>, <|endoftext|>, <|fim_pad|>...
# the protocol tags that are single tokens of the Qwen3 tokenizer (``<answer>`` is plain text: the loop's own notes
# ask for it, and a page quoting it forges nothing)
CONTROL_TAG_RE = re.compile(r"</?(?:think|tool_call|tool_response)>", re.IGNORECASE)


def _escape_match(match: re.Match) -> str:
    text = match.group(0)
    return "\u2039" + text[1:-1] + "\u203a"


def escape_control(text: str, tags: bool = True) -> str:
    """``text`` with every chat control token (and, with ``tags``, every protocol tag) escaped as plain text."""
    text = CONTROL_TOKEN_RE.sub(_escape_match, text)
    return CONTROL_TAG_RE.sub(_escape_match, text) if tags else text


def safe_content(role: str, content: str) -> str:
    """The content of one message as a model may see it.

    - system and assistant turns: their protocol tags are real (the tool list, ``<think>``, ``<tool_call>``);
      only chat control tokens (``<|im_end|>``...) are escaped;
    - a tool result (a user message ``<tool_response>...</tool_response>``, or a ``tool`` message): the wrapper
      stays, everything inside it is escaped, tags included (a page cannot close the response early);
    - any other user message (the question): escaped, tags included.
    """
    if role in ("system", "assistant"):
        return escape_control(content, tags=False)
    body = tool_response_body(content) if role == "user" else None
    if body is not None:
        return f"{TOOL_RESPONSE_OPEN}{escape_control(body)}{TOOL_RESPONSE_CLOSE}"
    return escape_control(content)


def tool_response_body(content: str) -> str | None:
    """The text inside a user message that is one whole tool response (``<tool_response>...</tool_response>``,
    surrounding whitespace allowed), from its opening tag to its *last* closing tag: a page's own
    ``</tool_response>`` is text of the response, not its end.  None for any other message."""
    text = content.strip()
    if len(text) >= len(TOOL_RESPONSE_OPEN) + len(TOOL_RESPONSE_CLOSE) and (
        text.startswith(TOOL_RESPONSE_OPEN) and text.endswith(TOOL_RESPONSE_CLOSE)
    ):
        return text[len(TOOL_RESPONSE_OPEN) : len(text) - len(TOOL_RESPONSE_CLOSE)]
    return None


def safe_messages(messages: list[dict]) -> list[dict]:
    """Copies of ``messages`` whose contents are :func:`safe_content` (other keys kept); content given as a list of
    parts (``[{"type": "text", "text": ...}]``) has each text part escaped the same way."""
    out = []
    for m in messages:
        role, content = str(m.get("role")), m.get("content")
        if isinstance(content, str):
            m = {**m, "content": safe_content(role, content)}
        elif isinstance(content, list):
            parts = [
                {**part, "text": safe_content(role, part["text"])}
                if isinstance(part, dict) and isinstance(part.get("text"), str)
                else part
                for part in content
            ]
            m = {**m, "content": parts}
        out.append(m)
    return out


def render_chat(tokenizer: Any, messages: list[dict], add_generation_prompt: bool = False) -> str:
    """The chat-template text of ``messages`` with outside text escaped: the one way messages are rendered for a
    model (agent context, SFT data, IG re-rendering, token counts)."""
    return tokenizer.apply_chat_template(
        safe_messages(messages), tokenize=False, add_generation_prompt=add_generation_prompt
    )


@dataclass
class ToolCall:
    """A parsed ``<tool_call>``; ``error`` is set (and name/arguments may be empty) when it did not parse."""

    name: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    raw: str = ""
    code: str | None = None  # PythonInterpreter code after the JSON, inside <code>...</code>
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def load_tool_json(text: str) -> Any:
    """Parse tool-call JSON: strict JSON first, then json5 (single quotes, trailing commas)."""
    try:
        return json.loads(text)
    except (json.JSONDecodeError, ValueError):
        return json5.loads(text)


_CODE_CLOSE_RE = re.compile(r"</code>", re.IGNORECASE)


def parse_tool_call_body(body: str) -> ToolCall:
    """Parse the text inside ``<tool_call>...</tool_call>``: JSON first, then json5."""
    raw = body
    code = None
    cut = body.find("<code>")
    if cut != -1:  # the code runs to the first </code>, or to the end (a find, not a lazy regex: linear time)
        code = body[cut + len("<code>") :]
        close = _CODE_CLOSE_RE.search(code)
        code = code[: close.start()] if close else code
        body = body[:cut]
    body = body.strip()
    if not body:
        return ToolCall(raw=raw, code=code, error="empty tool call")
    try:
        obj = load_tool_json(body)
    except Exception as exc:  # json5 raises ValueError subclasses and others
        return ToolCall(raw=raw, code=code, error=f"tool call is not valid JSON: {exc}")
    if not isinstance(obj, dict):
        return ToolCall(raw=raw, code=code, error="tool call is not a JSON object")
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        return ToolCall(raw=raw, code=code, error="tool call has no 'name'")
    args = obj.get("arguments", {})
    if isinstance(args, str):  # some models emit the arguments as a JSON string
        try:
            args = load_tool_json(args)
        except Exception:
            return ToolCall(name=name, raw=raw, code=code, error="tool call 'arguments' is a string that is not JSON")
    if not isinstance(args, dict):
        return ToolCall(name=name, raw=raw, code=code, error="tool call 'arguments' is not an object")
    return ToolCall(name=name.strip(), arguments=args, raw=raw, code=code)


def parse_tool_call(text: str) -> ToolCall | None:
    """The first ``<tool_call>`` in an assistant turn, parsed; None when the turn has no tool call."""
    match = TOOL_CALL_RE.search(text)
    return parse_tool_call_body(match.group(1)) if match else None


def extract_answer(text: str) -> str | None:
    """The stripped text of the last ``<answer>...</answer>`` block, or None."""
    matches = ANSWER_RE.findall(text)
    return matches[-1].strip() if matches else None


def split_aliases(ground_truth: str) -> list[str]:
    """``"a<|answer_split|>b"`` -> ``["a", "b"]`` (stripped, empty ones dropped)."""
    return [a.strip() for a in str(ground_truth).split(ANSWER_SPLIT) if a.strip()]


# ---------------------------------------------------------------------------------------------------------
# Tool outputs, as the model sees them inside <tool_response>.
#
# search: the JSON list of DR-Venus's cleaned SFT data, ``[{"query", "web_page_info_list": [{title, url,
#   snippet}]}]`` dumped with ``ensure_ascii=False`` (what the cleaner makes of a raw Serper text, and what
#   every search backend of this recipe emits; DR-Venus's RL-time parser adds a ``date`` key, we do not).
#   A query without results (or whose search failed) keeps its place: ``web_page_info_list`` is empty and a
#   ``message`` key carries the tool's text, as the cleaner's strict parser
#   (``venus_utils.data.search_text.parse_search_strict``) writes it; DR-Venus's own parser drops such blocks.
# visit: ``The useful information in {url} for user goal {goal} as follows: \n\n`` + optional
#   ``Evidence in page: \n{evidence}\n\n`` (RL / inference extractor) + ``Summary: \n{summary}``.
# Several queries / URLs in one call are joined by ``\n=======\n`` (visit) as DR-Venus does.
# ---------------------------------------------------------------------------------------------------------

TOOL_SEPARATOR = "\n=======\n"
VISIT_FAILED_EVIDENCE = "The provided webpage content could not be accessed. Please check the URL or file format."
VISIT_FAILED_SUMMARY = "The webpage content could not be processed, and therefore, no information is available."


def no_results_text(query: str) -> str:
    """DR-Venus's message for a search without results."""
    return f"No results found for '{query}'. Try with a more general query."


def search_results_json(blocks: list[tuple[str, list[dict]]] | list[dict]) -> str:
    """The model-facing search output for ``[(query, [{"title", "url", "snippet"}, ...]), ...]``.

    Items may be ``(query, hits)`` pairs or ``{"query", "hits"|"web_page_info_list", "message"?}`` dicts; a
    block without hits carries a ``message`` (default: DR-Venus's "No results found" text).
    """
    out = []
    for block in blocks:
        if isinstance(block, dict):
            query, hits, message = (
                block["query"],
                block.get("hits", block.get("web_page_info_list", [])),
                block.get("message"),
            )
        else:
            (query, hits), message = block, None
        info = [{"title": h["title"], "url": h["url"], "snippet": h.get("snippet", "")} for h in hits]
        item = {"query": query, "web_page_info_list": info}
        if not info:
            item["message"] = message or no_results_text(query)
        out.append(item)
    return json.dumps(out, ensure_ascii=False)


def visit_result_text(url: str, goal: str, summary: str, evidence: str | None = None) -> str:
    """One URL's visit output (DR-Venus's frame, trailing whitespace stripped as its tool does)."""
    text = f"The useful information in {url} for user goal {goal} as follows: \n\n"
    if evidence is not None:
        text += f"Evidence in page: \n{evidence}\n\n"
    return (text + f"Summary: \n{summary}").rstrip()


def visit_failed_text(url: str, goal: str, with_evidence: bool = True) -> str:
    """The visit output when the page could not be fetched or summarised."""
    return visit_result_text(url, goal, VISIT_FAILED_SUMMARY, VISIT_FAILED_EVIDENCE if with_evidence else None)


# ---------------------------------------------------------------------------------------------------------
# Loop messages of DR-Venus's RL loop (RL/scrl/llm_agent/dr_agent_loop.py) and inference loop
# (Inference/run_demo.py).  Forced endings are wrapped in <tool_response> so that the Qwen3 template does not
# treat them as a new user query and strip earlier reasoning.
# ---------------------------------------------------------------------------------------------------------

MALFORMED_RL = "Your response was malformed. Please call a tool or provide a final answer."
MALFORMED_INFERENCE = (
    "ERROR!\nPlease call a tool with the correct format, or if you are ready to answer, provide the entire final "
    "answer in `<answer></answer>` tags."
)
FORCE_CONTEXT = (
    "You have reached the maximum context length. Based on the information and knowledge you have gathered, "
    "please provide the entire final answer in `<answer></answer>` tags now."
)
FORCE_MAX_STEPS = (
    "You've reached the maximum number of tool calls. Based on the information and knowledge you have gathered, "
    "please provide the entire final answer in `<answer></answer>` tags now."
)


REPAIR_MODES = ("inference", "training")


def repair_tags(text: str, mode: str = "inference") -> str:
    """DR-Venus's sanitiser: cut hallucinated observations, close or open ``<think>``.

    - everything from the first ``<tool_response>`` on is dropped;
    - an unclosed ``<think>``: ``mode="inference"`` (DR-Venus's inference loop) inserts ``\\n</think>\\n`` before
      the first ``<answer>``/``<tool_call>``, else appends ``\\n</think>``; ``mode="training"`` (its RL rollout loop,
      ``dr_agent_loop.py``) always appends ``\\n</think>`` at the end, so a tool call or answer written inside the
      unclosed block stays inside it and the turn fails the format check (IGPO's -1);
    - a ``</think>`` without ``<think>`` gets ``<think>\\n`` in front.
    """
    if mode not in REPAIR_MODES:
        raise ValueError(f"repair mode must be one of {REPAIR_MODES}, got {mode!r}")
    cut = text.find(TOOL_RESPONSE_OPEN)
    if cut != -1:
        text = text[:cut]
    if THINK_OPEN in text and THINK_CLOSE not in text:
        for tag in (ANSWER_OPEN, TOOL_CALL_OPEN) if mode == "inference" else ():
            pos = text.find(tag)
            if pos != -1:
                return text[:pos] + f"\n{THINK_CLOSE}\n" + text[pos:]
        return text + f"\n{THINK_CLOSE}"
    if THINK_OPEN not in text and THINK_CLOSE in text:
        text = f"{THINK_OPEN}\n" + text
    return text


def is_repetitive(text: str, tail_len: int = 50, threshold: int = 5) -> bool:
    """DR-Venus's repetition test: the last ``tail_len`` characters occur more than ``threshold`` times."""
    if not text or len(text) < tail_len:
        return False
    return text.count(text[-tail_len:]) > threshold


@dataclass
class Turn:
    """What an assistant turn asks for: ``kind`` is ``answer``, ``call`` or ``error`` (with ``error`` set)."""

    kind: str
    think: str = ""
    answer: str | None = None
    call: ToolCall | None = None
    error: str | None = None


def parse_turn(text: str, allowed_tools: tuple[str, ...] | None = None) -> Turn:
    """Classify a (repaired) assistant turn as DR-Venus's loop does (``dr_agent_loop.py``; ``run_demo.py``).

    A ``<think>`` block is required; an answer without a tool call ends the episode; a tool call without an
    answer is parsed (json, then json5; only the first call counts); anything else is an error.  With
    ``allowed_tools`` (inference) an unknown tool name is an error too.
    """
    think = THINK_RE.search(text)
    if not think:
        return Turn("error", error="Missing <think></think>")
    has_answer, has_call = ANSWER_RE.search(text) is not None, TOOL_CALL_RE.search(text) is not None
    if has_answer and not has_call:
        return Turn("answer", think=think.group(1).strip(), answer=extract_answer(text))
    if has_call and not has_answer:
        call = parse_tool_call(text)
        if not call.ok:
            return Turn("error", think=think.group(1).strip(), call=call, error=call.error)
        if allowed_tools is not None and call.name not in allowed_tools:
            return Turn(
                "error",
                think=think.group(1).strip(),
                call=call,
                error=f"Unknown tool '{call.name}'. Available tools: {', '.join(sorted(allowed_tools))}",
            )
        return Turn("call", think=think.group(1).strip(), call=call)
    return Turn("error", think=think.group(1).strip(), error="Ambiguous or incomplete output")


# --- DR-Venus's turn format check (its ``format_checker.py``): what IGPO's format penalty and the agent's turn log
# record.  Every assistant turn must be ``<think>...</think>`` followed by exactly one well-formed ``<tool_call>`` (a
# non-final turn) or exactly one non-empty ``<answer>`` (the final turn), with nothing but whitespace around them.
_TAGS = {
    name: re.compile(re.escape(tag))
    for name, tag in {
        "think_open": "<think>",
        "think_close": "</think>",
        "tc_open": "<tool_call>",
        "tc_close": "</tool_call>",
        "ans_open": "<answer>",
        "ans_close": "</answer>",
    }.items()
}


def turn_format_error(content: str, final: bool) -> str | None:
    """Why an assistant turn breaks the format, or None when it is well formed."""
    if not content or not content.strip():
        return "empty turn"
    pos = {name: [m.start() for m in rx.finditer(content)] for name, rx in _TAGS.items()}
    opens, closes = pos["think_open"], pos["think_close"]
    if not opens or len(opens) != len(closes):
        return "missing or unbalanced <think> tags"
    if content[: opens[0]].strip():
        return "text before the first <think>"
    for i in range(len(opens)):
        if opens[i] >= closes[i] or (i > 0 and closes[i - 1] >= opens[i]):
            return "<think> blocks out of order or nested"
    after_think = closes[-1] + len("</think>")
    if final:
        return _body_error(content, pos, "ans", "answer", forbidden="tc", after_think=after_think)
    error = _body_error(content, pos, "tc", "tool_call", forbidden="ans", after_think=after_think)
    if error:
        return error
    body = content[pos["tc_open"][0] + len("<tool_call>") : pos["tc_close"][0]].strip()
    if "pythoninterpreter" in body.lower() and "<code>" in body and "</code>" in body:
        return None
    try:
        obj = load_tool_json(body)
    except Exception:
        return "tool call is not valid JSON"
    if not isinstance(obj, dict) or "name" not in obj or "arguments" not in obj:
        return "tool call needs 'name' and 'arguments'"
    if not isinstance(obj["arguments"], dict):
        return "tool call 'arguments' is not an object"
    return None


def _body_error(content: str, pos: dict, key: str, tag: str, *, forbidden: str, after_think: int) -> str | None:
    if pos[f"{forbidden}_open"] or pos[f"{forbidden}_close"]:
        other = "tool_call" if forbidden == "tc" else "answer"
        return f"a {'final' if key == 'ans' else 'tool'} turn must not contain <{other}>"
    opens, closes = pos[f"{key}_open"], pos[f"{key}_close"]
    if len(opens) != 1 or len(closes) != 1:
        return f"needs exactly one <{tag}>...</{tag}>"
    if opens[0] < after_think - len("</think>") or closes[0] < opens[0]:
        return f"<{tag}> must follow </think>"
    if content[after_think : opens[0]].strip():
        return f"text between </think> and <{tag}>"
    if content[closes[0] + len(f"</{tag}>") :].strip():
        return f"text after </{tag}>"
    if not content[opens[0] + len(f"<{tag}>") : closes[0]].strip():
        return f"empty <{tag}>"
    return None


def turn_format_errors(turns: Sequence[str]) -> list[str | None]:
    """The format error of each assistant turn of an episode; the last turn is checked as the answer turn."""
    return [turn_format_error(t, final=(i == len(turns) - 1)) for i, t in enumerate(turns)]


def call_signature(call: ToolCall) -> str:
    """A hashable key of a call (name + arguments) for duplicate detection in the loop."""
    return json.dumps({"name": call.name, "arguments": call.arguments}, sort_keys=True, ensure_ascii=False)
