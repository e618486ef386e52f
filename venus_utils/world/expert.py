"""The expert researcher: answers a question by really calling the local tools, in the raw REDSearcher form.

Per hop it searches the entity's name, finds the entity's own page among the hits, visits it with a goal
and copies the fact sentence from the visit output into its reasoning.  If the page is not among the hits
or the fact is not in the output, the question is not solvable with these tool settings and is dropped.
Noise (duplicate calls, malformed calls, a disallowed PythonInterpreter call, a wrong final answer) is
then injected at known rates, so that the cleaner's counts can be checked against ``world.json``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from ..core import protocol
from ..tools.search import LocalSearch, serper_raw_text
from ..tools.visit import LocalVisit
from .question_templates import RELATIONS, Question

NOISE_KINDS = ("duplicate", "malformed", "disallowed", "wrong_answer")
#: always: the expert visits every hop's page | needed: only when the search snippet lacks the fact
VISIT_POLICIES = ("always", "needed")


@dataclass
class Expert:
    search: LocalSearch
    visit: LocalVisit
    visit_policy: str = "always"  # always: visit every hop's page | needed: only when the snippet lacks the fact
    query_string_rate: float = 0.0  # share of search calls written with a plain-string query (cleaner normalises)

    def solve(self, q: Question, rng: random.Random) -> list[dict] | None:
        """The raw message list (question, assistant/user pairs, final answer) or None when not solvable."""
        messages = [{"role": "user", "content": q.text}]
        lead = ""
        for _i, (entity, rel) in enumerate(zip(q.chain, q.path)):
            need = _need(rel, entity.name)
            query: str | list[str] = entity.name if rng.random() < self.query_string_rate else [entity.name]
            think = f"{lead}I need to find {need}. I will search for {entity.name}."
            messages.append(
                {"role": "assistant", "content": protocol.tool_turn(think.strip(), "search", {"query": query})}
            )
            hits = self.search.hits(entity.name)
            messages.append(
                {"role": "user", "content": protocol.wrap_tool_response(serper_raw_text(entity.name, hits))}
            )
            hit = next((h for h in hits if h.url == entity.url), None)
            if hit is None:
                return None
            fact = entity.sentences[rel]
            if self.visit_policy == "needed" and fact in hit.snippet:
                lead = f"{fact} "
            else:
                goal = RELATIONS[rel].format(name=entity.name)
                think = f"The page {hit.title} should tell me {need}. I will visit it."
                messages.append(
                    {
                        "role": "assistant",
                        "content": protocol.tool_turn(think, "visit", {"url": [hit.url], "goal": goal}),
                    }
                )
                text = self.visit.visit_one(hit.url, goal)
                messages.append({"role": "user", "content": protocol.wrap_tool_response(text)})
                if fact not in text:
                    return None
                lead = f"{fact} "
        messages.append(
            {"role": "assistant", "content": protocol.answer_turn(f"{lead}So the answer is {q.answer}.", q.answer)}
        )
        return messages


def _need(rel: str, name: str) -> str:
    goal = RELATIONS[rel].format(name=name)
    return goal[len("Find ") :].rstrip(".")


@dataclass
class NoiseLog:
    """What was injected: trajectories per kind and the turns the cleaner should remove."""

    rows: dict = field(default_factory=lambda: {k: 0 for k in NOISE_KINDS})
    turns: dict = field(default_factory=lambda: {k: 0 for k in NOISE_KINDS if k != "wrong_answer"})


def inject_noise(
    messages: list[dict], q: Question, rng: random.Random, rates: dict, expert: Expert, wrong_pool: list[str]
) -> tuple[list[dict], list[str]]:
    """A copy of ``messages`` with noise of each kind drawn with its rate; returns (messages, kinds)."""
    msgs, kinds = list(messages), []
    if rng.random() < rates.get("duplicate", 0):
        searches = [i for i in range(1, len(msgs) - 1, 2) if '"name": "search"' in msgs[i]["content"]]
        i = rng.choice(searches)
        name = protocol.parse_tool_call(msgs[i]["content"]).arguments["query"]
        name = name if isinstance(name, str) else name[0]
        dup = protocol.tool_turn(f"Let me search for {name} again to be sure.", "search", {"query": [name]})
        response = protocol.wrap_tool_response(serper_raw_text(name, expert.search.hits(name)))
        msgs[i + 2 : i + 2] = [{"role": "assistant", "content": dup}, {"role": "user", "content": response}]
        kinds.append("duplicate")
    if rng.random() < rates.get("malformed", 0):
        name = rng.choice(q.chain).name
        broken = protocol.tool_turn(f"I will search for {name}.", "search", {"query": [name]})
        broken = broken.replace("}}\n</tool_call>", "}\n</tool_call>")  # a closing brace is missing
        j = rng.randrange(1, len(msgs), 2)
        msgs[j:j] = [
            {"role": "assistant", "content": broken},
            {"role": "user", "content": protocol.wrap_tool_response(protocol.MALFORMED_RL)},
        ]
        kinds.append("malformed")
    if rng.random() < rates.get("disallowed", 0):
        name = rng.choice(q.chain).name
        call = f"{protocol.render_tool_call('PythonInterpreter', {})}\n<code>\nprint(len({name!r}))\n</code>"
        turn = f"<think>\nLet me count the letters of {name} with Python.\n</think>\n<tool_call>\n{call}\n</tool_call>"
        j = rng.randrange(1, len(msgs), 2)
        msgs[j:j] = [
            {"role": "assistant", "content": turn},
            {"role": "user", "content": protocol.wrap_tool_response(f"stdout:\n{len(name)}")},
        ]
        kinds.append("disallowed")
    if rng.random() < rates.get("wrong_answer", 0):
        wrong = rng.choice([w for w in wrong_pool if w.lower() not in {a.lower() for a in q.aliases}])
        msgs[-1] = {"role": "assistant", "content": protocol.answer_turn(f"I believe the answer is {wrong}.", wrong)}
        kinds.append("wrong_answer")
    return msgs, kinds
