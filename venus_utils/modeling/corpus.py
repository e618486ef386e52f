"""Text to train the tiny tokenizer on: a research world, given texts, or a built-in protocol corpus.

The built-in corpus (used before a world exists, and by the tests) is DR-Venus-format conversations about random
syllable-named entities, built with ``venus_utils.core.protocol``, plus the shared DR-Venus examples when present.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Iterator
from pathlib import Path

import pyarrow.parquet as pq

from ..core import protocol
from ..core.paths import dr_venus_dir

_SYLLABLES = [
    "ka",
    "ro",
    "mi",
    "tel",
    "vor",
    "an",
    "is",
    "du",
    "bre",
    "sha",
    "lin",
    "gor",
    "pe",
    "ul",
    "zan",
    "thi",
    "mor",
    "ek",
    "fa",
    "no",
]
_KINDS = ["Labs", "Works", "Group", "Institute", "Society"]


def _name(rng: random.Random, parts: int = 2) -> str:
    return "".join(rng.choice(_SYLLABLES) for _ in range(parts)).capitalize()


def synthetic_conversation(rng: random.Random, current_date: str = protocol.DEFAULT_DATE) -> dict:
    """One DR-Venus-format trajectory (question, messages, gt) about random entities: search, visit, answer."""
    person = f"{_name(rng)} {_name(rng, 3)}"
    org = f"{_name(rng)} {rng.choice(_KINDS)}"
    city = _name(rng, 3)
    year = str(rng.randint(1800, 2020))
    url = f"https://world.local/{org.lower().replace(' ', '-')}"
    question = f"In what year was the founder of {org} born?"
    search_body = json.dumps(
        [
            {
                "query": org,
                "web_page_info_list": [
                    {
                        "title": org,
                        "url": url,
                        "snippet": f"{org} was founded by {person}. It is headquartered in {city}.",
                    }
                ],
            }
        ],
        ensure_ascii=False,
    )
    visit_body = (
        f"The useful information in {url} for user goal founder of {org} as follows: \n\n"
        f"Summary: \n{person} founded {org} in {city}. {person} was born in {year}."
    )
    messages = [
        {"role": "system", "content": protocol.system_prompt(current_date)},
        {"role": "user", "content": question},
        {
            "role": "assistant",
            "content": protocol.tool_turn(f"I need the founder of {org}.", "search", {"query": [org]}),
        },
        {"role": "user", "content": protocol.wrap_tool_response(search_body)},
        {
            "role": "assistant",
            "content": protocol.tool_turn(
                f"{org} was founded by {person}. I visit the page for the birth year.",
                "visit",
                {"url": [url], "goal": f"founder of {org}"},
            ),
        },
        {"role": "user", "content": protocol.wrap_tool_response(visit_body)},
        {"role": "assistant", "content": protocol.answer_turn(f"{person} was born in {year}.", year)},
    ]
    return {"question": question, "messages": messages, "gt": year}


def synthetic_conversations(n: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    return [synthetic_conversation(rng) for _ in range(n)]


def _shared_example_texts() -> Iterator[str]:
    for sub in ("sft_examples", "rl_rollouts"):
        folder = dr_venus_dir() / sub
        if folder.is_dir():
            for path in sorted(folder.glob("*.json")):
                data = json.loads(path.read_text(encoding="utf-8"))
                yield from (m["content"] for m in data["messages"] if isinstance(m.get("content"), str))


def _world_texts(world: Path) -> Iterator[str]:
    pages = world / "pages.jsonl"
    if not pages.exists():
        raise FileNotFoundError(f"{world}: not a world folder ({pages} is missing)")
    with pages.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if line.strip():
                try:
                    page = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{pages}:{lineno}: not valid JSON ({exc})") from None
                yield "\n".join(str(page.get(k, "")) for k in ("url", "title", "text"))
    shards = sorted((world / "trajectories").glob("*.parquet"))
    if shards:
        for shard in shards:
            for messages in pq.read_table(shard, columns=["messages"]).column("messages").to_pylist():
                yield from (m["content"] for m in messages or [] if isinstance(m.get("content"), str))
    yield protocol.system_prompt(protocol.DEFAULT_DATE)


def corpus_texts(source: Iterable[str] | str | Path | None = None) -> Iterator[str]:
    """Texts for the tokenizer: a world folder, an iterable of texts, or (None) the built-in corpus."""
    if source is None:
        for conv in synthetic_conversations(400):
            yield from (m["content"] for m in conv["messages"][1:])
        yield protocol.system_prompt(protocol.DEFAULT_DATE)
        yield from _shared_example_texts()
    elif isinstance(source, (str, Path)):
        yield from _world_texts(Path(source))
    else:
        yield from source
