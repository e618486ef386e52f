"""Synthetic raw REDSearcher trajectories: fixtures for the tests, the notebooks and the benchmark.

The real raw set (``Zchu/REDSearcher_SFT_10K``) is not shipped with DR-Venus; this generator writes rows of
the same schema (``meta{question, answer}``, ``messages`` without a system message, optional
``system_prompt``) with realistic sizes (think blocks of ~1 KB, Serper-style search
texts of ~10 results, visit summaries) and, at configurable rates, every defect the cleaner handles: calls
with ``queries`` / ``urls`` / list goals, multi-query searches joined by ``=======``, failed queries,
``Source:`` lines, PythonInterpreter and unknown tools, duplicate calls, unparseable calls, turns without
reasoning, nested ``<answer>`` blocks with ``<summary>``, missing answers, wrong answers, conversations
ending on a tool response, ``tool`` roles, leading system messages and missing ground truths.

Everything is drawn from one ``random.Random(seed)``: the same seed gives the same files.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ..core.io import atomic_path

WORDS = (
    "archive record county river council founded museum station railway parish census report regional "
    "district historian published survey editor journal article season league club founder period empire "
    "dynasty treaty province village harbour festival committee cathedral manuscript library collection "
    "official population estimate article reference source evidence timeline document earlier later second "
    "first northern southern western eastern century decade annual national local university institute "
    "company firm publisher printer engraver author composer painter architect bridge tower castle island"
).split()
FIRST = "Anna Paul Maria Jonas Clara Felix Ida Oskar Lena Hugo Vera Emil Rosa Karl Nora Otto".split()
LAST = "Beneke Mortimer Halvorsen Quist Lindqvist Marchetti Okafor Delacroix Brandt Novak Sato Ferreira".split()
TOPICS = ["publishing firm", "football club", "railway station", "cathedral", "regional newspaper", "botanical garden"]

DEFECTS = (
    "queries_key",
    "multi_query",
    "no_results",
    "source_line",
    "python_turn",
    "unknown_tool",
    "duplicate_search",
    "duplicate_visit",
    "bad_json",
    "missing_think",
    "nested_answer",
    "external_summary",
    "missing_answer",
    "wrong_answer",
    "ends_with_tool",
    "tool_role",
    "leading_system",
    "missing_gt",
    "multi_call",
)


@dataclass
class SyntheticSpec:
    """Sizes and defect rates of the generated rows (defaults: realistic sizes, a few % of each defect)."""

    min_turns: int = 4
    max_turns: int = 140  # tool turns; long tails so that all three resampling buckets are populated
    medium_share: float = 0.22  # share of rows with 51-100 turns
    long_share: float = 0.06  # share of rows with > 100 turns
    think_words: tuple[int, int] = (60, 220)
    results_per_search: tuple[int, int] = (6, 10)
    snippet_words: tuple[int, int] = (25, 60)
    visit_words: tuple[int, int] = (80, 250)
    defect_rate: float = 0.04  # probability of each defect per row
    rates: dict[str, float] = field(default_factory=dict)  # per-defect overrides

    def rate(self, defect: str) -> float:
        return self.rates.get(defect, self.defect_rate)


DEFAULT_SPEC = SyntheticSpec()  # the default spec: realistic sizes, a few % of each defect

SMALL = SyntheticSpec(
    min_turns=2,
    max_turns=9,
    medium_share=0.0,
    long_share=0.0,
    think_words=(5, 12),
    results_per_search=(2, 3),
    snippet_words=(4, 10),
    visit_words=(8, 20),
    defect_rate=0.08,
)


class _Gen:
    def __init__(self, rng: random.Random, spec: SyntheticSpec):
        self.rng, self.spec = rng, spec

    def words(self, lo: int, hi: int) -> str:
        text = " ".join(self.rng.choices(WORDS, k=self.rng.randint(lo, hi)))
        return text[:1].upper() + text[1:] + "."

    def url(self) -> str:
        path = "_".join(self.rng.choices(WORDS, k=3))
        return f"https://{self.rng.choice(WORDS)}.example.org/wiki/{path}"

    def name(self) -> str:
        return f"{self.rng.choice(FIRST)} {self.rng.choice(LAST)}"

    def result(self, n: int, source: bool) -> str:
        title = " ".join(self.rng.choices(WORDS, k=self.rng.randint(3, 8))).title()
        lines = [f"{n}. [{title}]({self.url()})"]
        if self.rng.random() < 0.5:
            lines.append(
                f"Date published: {self.rng.randint(1995, 2025)}-0{self.rng.randint(1, 9)}-1{self.rng.randint(0, 9)}"
            )
        if source:
            lines.append(f"Source: {self.rng.choice(WORDS).title()} Weekly")
        lines += ["", self.words(*self.spec.snippet_words)]
        return "\n".join(lines)

    def search_block(self, query: str, source: bool = False) -> str:
        n = self.rng.randint(*self.spec.results_per_search)
        results = "\n\n".join(self.result(i + 1, source and i == 0) for i in range(n))
        return f"A Google search for '{query}' found {n} results:\n\n## Web Results\n{results}"

    def visit_text(self, url: str, goal: str) -> str:
        return (
            f"The useful information in {url} for user goal {goal} as follows: \n\n"
            f"Summary: \n{self.words(*self.spec.visit_words)}"
        )

    def think(self) -> str:
        return self.words(*self.spec.think_words)


def tool_call_text(name: str, arguments: dict) -> str:
    return json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)


def raw_tool_turn(reasoning: str, call: str) -> str:
    """A raw assistant tool turn as REDSearcher writes it (``call`` is the text inside <tool_call>)."""
    return f"<think>\n{reasoning}\n</think>\n\n<tool_call>\n{call}\n</tool_call>"


def raw_response(text: str) -> str:
    return f"<tool_response>\n{text}\n</tool_response>"


def _n_turns(rng: random.Random, spec: SyntheticSpec) -> int:
    u = rng.random()
    if u < spec.long_share and spec.max_turns > 100:
        return rng.randint(101, spec.max_turns)
    if u < spec.long_share + spec.medium_share and spec.max_turns > 50:
        return rng.randint(51, min(100, spec.max_turns))
    return rng.randint(spec.min_turns, min(50, spec.max_turns))


#: defects that shape one turn of a row, each placed at a random turn (:func:`_special_turn`, :func:`_research_turn`)
TURN_DEFECTS = (
    "python_turn",
    "unknown_tool",
    "duplicate_search",
    "duplicate_visit",
    "bad_json",
    "missing_think",
    "multi_query",
    "no_results",
    "queries_key",
    "multi_call",
)


def _special_turn(kind: str | None, g: _Gen, reasoning: str, topic: str, calls: list) -> tuple[str, str] | None:
    """``(assistant turn, tool response body)`` of a turn that carries a defect of its own (a disallowed or unknown
    tool, a repeated call, broken JSON, no reasoning, two calls), or None for an ordinary research turn."""
    rng = g.rng
    if kind == "python_turn":
        call = tool_call_text("PythonInterpreter", {}) + "\n<code>\nprint(sum(range(10)))\n</code>"
        return raw_tool_turn(reasoning, call), "stdout:\n45"
    if kind == "unknown_tool":
        call = tool_call_text("google_scholar", {"query": "founder " + topic})
        return raw_tool_turn(reasoning, call), g.words(10, 30)
    if kind in ("duplicate_search", "duplicate_visit"):
        previous = [c for c in calls if c[0] == kind.split("_")[1]]
        if not previous:
            return None  # nothing to repeat yet: an ordinary turn
        name, args = previous[-1]
        if name == "visit":
            args = {"url": args["url"], "goal": "find more about " + rng.choice(WORDS)}
        text = g.search_block(args["query"][0]) if name == "search" else g.visit_text(args["url"][0], args["goal"])
        return raw_tool_turn(reasoning, tool_call_text(name, args)), text
    if kind == "bad_json":
        return raw_tool_turn(reasoning, '{"name": "search", "arguments": {"query": ['), "Error: invalid tool call"
    if kind == "missing_think":
        query = f"{topic} {rng.choice(WORDS)} founder"
        return f"<tool_call>\n{tool_call_text('search', {'query': [query]})}\n</tool_call>", g.search_block(query)
    if kind == "multi_call":
        q1, q2 = f"{topic} history", f"{topic} {rng.choice(WORDS)}"
        content = (
            raw_tool_turn(reasoning, tool_call_text("search", {"query": [q1]}))
            + f"\n<tool_call>\n{tool_call_text('search', {'query': [q2]})}\n</tool_call>"
        )
        return content, g.search_block(q1)
    return None


def _research_turn(
    kind: str | None, g: _Gen, reasoning: str, topic: str, calls: list, defects: set
) -> tuple[str, str]:
    """``(assistant turn, tool response body)`` of an ordinary turn: a search (one or more queries, perhaps one
    without results, perhaps under the ``queries`` key) or a visit; the call is recorded in ``calls``."""
    rng = g.rng
    if rng.random() < 0.7 or kind in ("multi_query", "no_results"):
        queries = [f"{topic} {' '.join(rng.choices(WORDS, k=2))}"]
        if kind == "multi_query":
            queries.append(f'"{rng.choice(WORDS)}" {topic} founder\'s family')
        if kind == "no_results":
            queries = [queries[0], f"{topic} {rng.choice(WORDS)} obscure"]
        args: dict = {
            "queries" if kind == "queries_key" else "query": queries
            if len(queries) > 1 or rng.random() < 0.8
            else queries[0]
        }
        blocks = [g.search_block(q, source="source_line" in defects) for q in queries]
        if kind == "no_results":
            blocks[1] = f"No results found for '{queries[1]}'. Try with a more general query."
        calls.append(("search", {"query": queries}))
        return raw_tool_turn(reasoning, tool_call_text("search", args)), "\n=======\n".join(blocks)
    url, goal = g.url(), f"find the founder of the {topic}"
    args = {"urls": [url], "goal": [goal]} if kind == "queries_key" else {"url": [url], "goal": goal}
    calls.append(("visit", {"url": [url], "goal": goal}))
    return raw_tool_turn(reasoning, tool_call_text("visit", args)), g.visit_text(url, goal)


def _answer_turn(g: _Gen, final_answer: str, topic: str, defects: set) -> dict | None:
    """The final assistant turn, with the answer-block defects drawn for the row (None: the row ends on a tool)."""
    if "ends_with_tool" in defects:
        return None
    body = f"**{final_answer}** founded the {topic}. {g.words(5, 20)}"
    if "nested_answer" in defects:
        answer_block = f"<answer>\n<summary>\n{g.words(10, 30)}\n</summary>\n\n<answer>\n**{final_answer}**\n</answer>"
    elif "missing_answer" in defects:
        answer_block = body
    else:
        answer_block = f"<answer>\n{body}\n</answer>"
    if "external_summary" in defects:
        answer_block = f"<summary>{g.words(10, 25)}</summary>\n" + answer_block
    return {"role": "assistant", "content": f"<think>\n{g.think()}\n</think>\n{answer_block}"}


def raw_row(rng: random.Random, spec: SyntheticSpec = DEFAULT_SPEC) -> dict:
    """One raw REDSearcher-schema row (``meta``, ``messages``, ``system_prompt``); defects drawn at ``spec``'s
    rates."""
    g = _Gen(rng, spec)
    defects = {d for d in DEFECTS if rng.random() < spec.rate(d)}
    answer = g.name()
    topic = rng.choice(TOPICS)
    question = (
        f"A {topic} was founded in the {rng.randint(15, 20)}th century by a person whose family later ran a "
        f"{rng.choice(WORDS)} {rng.choice(WORDS)}. {g.words(20, 45)} Who was the founder?"
    )
    messages: list[dict] = []
    if "leading_system" in defects:
        messages.append({"role": "system", "content": "You are a helpful research assistant."})
    messages.append({"role": "user", "content": question})
    calls: list[tuple[str, dict]] = []
    n_turns = _n_turns(rng, spec)
    special = [d for d in TURN_DEFECTS if d in defects]
    slots = {rng.randrange(n_turns): d for d in special} if n_turns else {}
    for t in range(n_turns):
        kind = slots.get(t)
        response_role = "tool" if "tool_role" in defects and t == n_turns // 2 else "user"
        reasoning = g.think()
        turn = _special_turn(kind, g, reasoning, topic, calls) or _research_turn(
            kind, g, reasoning, topic, calls, defects
        )
        messages += [
            {"role": "assistant", "content": turn[0]},
            {"role": response_role, "content": raw_response(turn[1])},
        ]
    final = _answer_turn(g, g.name() if "wrong_answer" in defects else answer, topic, defects)
    if final is not None:
        messages.append(final)
    return {
        "meta": {"question": question, "answer": "" if "missing_gt" in defects else answer},
        "messages": messages,
        "system_prompt": None,
    }


def raw_rows(n: int, seed: int = 0, spec: SyntheticSpec = DEFAULT_SPEC) -> Iterator[dict]:
    rng = random.Random(seed)
    for _ in range(n):
        yield raw_row(rng, spec)


def raw_schema():
    return pa.schema(
        [
            ("meta", pa.struct([("question", pa.string()), ("answer", pa.string())])),
            ("messages", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
            ("system_prompt", pa.string()),
        ]
    )


def write_raw_shards(
    out_dir: str | Path,
    n_rows: int,
    seed: int = 0,
    spec: SyntheticSpec = DEFAULT_SPEC,
    rows_per_file: int = 500,
    row_group_rows: int = 50,
) -> list[Path]:
    """Write ``n_rows`` raw rows as ``train-XXXXX-of-YYYYY.parquet`` shards (row groups of ``row_group_rows``)."""

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    n_files = max(1, -(-n_rows // rows_per_file))
    rows = raw_rows(n_rows, seed, spec)
    paths = []
    for f in range(n_files):
        path = out_dir / f"train-{f:05d}-of-{n_files:05d}.parquet"
        count = min(rows_per_file, n_rows - f * rows_per_file)
        with atomic_path(path) as tmp:
            with pq.ParquetWriter(str(tmp), raw_schema()) as writer:
                for start in range(0, count, row_group_rows):
                    batch = [next(rows) for _ in range(min(row_group_rows, count - start))]
                    writer.write_table(pa.Table.from_pylist(batch, schema=raw_schema()))
        paths.append(path)
    return paths
