"""The expert researcher: answers a question by really calling the local tools, in the raw REDSearcher form.

Per hop it searches the entity's name, finds the entity's own page among the hits, visits it with a goal
and copies the fact sentence from the visit output into its reasoning.  If the page is not among the hits
or the fact is not in the output, the question is not solvable with these tool settings and is dropped.
Noise (duplicate calls, malformed calls, a disallowed PythonInterpreter call, a wrong final answer) is
then injected at known rates, so that the cleaner's counts can be checked against ``world.json``.

With ``guess_rate`` (the world knob ``expert_guess_rate``) the expert is an imperfect teacher, as REDSearcher is for
DR-Venus: at hops where the results hold near-namesakes it sometimes takes one result to be the entity without
reading it (:class:`Expert`); the lucky routes end right and survive the correctness filter, the others end wrong.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from ..core import protocol
from ..tools.search import LocalSearch, serper_raw_text
from ..tools.visit import LocalVisit
from .graph import Entity
from .question_templates import RELATIONS, Question, hop_value

NOISE_KINDS = ("duplicate", "malformed", "disallowed", "wrong_answer")
#: always: the expert visits every hop's page | needed: only when the search snippet lacks the fact
VISIT_POLICIES = ("always", "needed")


@dataclass
class Guess:
    """One hop where the expert took a search result to be the entity without reading its page."""

    hop: int  # the hop's index in the question's relation path
    entity: str  # URL of the page of the entity the expert was looking for (off the question's chain after a
    #              wrong guess at an earlier hop)
    took: str  # URL of the result it took to be that entity
    namesake: bool  # True: it took a near-namesake's page (the fact it stated is the namesake's)

    def as_dict(self) -> dict:
        return {"hop": self.hop, "entity": self.entity, "took": self.took, "namesake": self.namesake}


@dataclass
class Trace:
    """What the expert did on one question beyond reading: its guesses and the answer it reached."""

    hops: int = 0
    guessable_hops: int = 0  # hops it would visit whose results held the entity's page and a near-namesake's
    guesses: list[Guess] = field(default_factory=list)
    assumed_hops: int = 0  # hops after a wrong guess whose fact it could not read and assumed (the namesake route)
    answer: str = ""
    right: bool = True  # its final answer is one of the question's aliases


@dataclass
class Expert:
    """The world's expert.  ``guess_rate`` > 0 (with a ``guess`` generator passed to :meth:`solve`) makes it an
    imperfect teacher like REDSearcher: at a hop where it would visit the entity's page (policy ``always``: every hop;
    ``needed``: a hop whose snippet lacks the fact) and whose search results hold more than one candidate for the
    entity, with that probability it takes one of them at random to be the entity and states that page's fact without
    visiting it (its reasoning: "Result 2 looks like Kosa Midor; I will take it that Kosa Midor works for ...").

    A *candidate* is a result that is the page of an entity of the entity's own type whose name has the same first
    word (a person of the same first name, e.g. a near-namesake one surname syllable off; an organisation of the same
    stem with another suffix: the near-namesakes of :func:`~venus_utils.world.graph.build_graph`); the entity's own
    page is one of them.  A guess that takes the entity's own page states the true fact (a lucky route: the right
    answer with that page unread); one that takes a namesake states the namesake's fact for the relation, written
    about the entity, and the chain goes on from there with the same tools (later hops research the namesake route,
    and a fact of it that the tools do not show is assumed), so the final answer is the namesake route's: usually
    wrong, right only by luck.  Whether a question is solvable does not depend on the guesses: the entity's own page
    must be among the hits and its fact readable (the snippet or a visit) at every hop of the question's chain, as
    without them.
    """

    search: LocalSearch
    visit: LocalVisit
    visit_policy: str = "always"  # always: visit every hop's page | needed: only when the snippet lacks the fact
    query_string_rate: float = 0.0  # share of search calls written with a plain-string query (cleaner normalises)
    guess_rate: float = 0.0  # share of hops with near-namesake candidates where the expert guesses (see above)
    entities: list[Entity] = field(default_factory=list, repr=False)  # the pages' entities (a hit's url -> entity)

    def __post_init__(self):
        self._by_url = {e.url: e for e in self.entities}
        self._by_id = {e.id: e for e in self.entities}

    def solve(self, q: Question, rng: random.Random, guess: random.Random | None = None) -> list[dict] | None:
        """The raw message list (question, assistant/user pairs, final answer) or None when not solvable."""
        out = self.solve_traced(q, rng, guess)
        return None if out is None else out[0]

    def solve_traced(
        self, q: Question, rng: random.Random, guess: random.Random | None = None
    ) -> tuple[list[dict], Trace] | None:
        """:meth:`solve`'s messages and the :class:`Trace` of its guesses; ``guess`` draws whether and what to guess
        (only at hops with candidates; no draw without ``guess_rate`` or ``guess``), ``rng`` the rest as ever."""
        guessing = self.guess_rate > 0 and guess is not None
        if guessing and not self.entities:
            raise ValueError("a guessing expert needs the world's entities (Expert.entities)")
        if guessing and not self._solvable(q):
            return None  # as without guesses: solvability is the tools', not the teacher's
        messages = [{"role": "user", "content": q.text}]
        trace, lead = Trace(hops=q.hops), ""
        entity: Entity | str = q.chain[0]  # the entity the expert researches at this hop (its belief)
        on_route = True  # no wrong guess yet: ``entity`` is the question's own chain entity
        for i, rel in enumerate(q.path):
            if on_route:
                entity = q.chain[i]
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
            if hit is None and on_route:
                return None
            fact = entity.sentences[rel]
            in_snippet = hit is not None and self.visit_policy == "needed" and fact in hit.snippet
            took = None if hit is None or in_snippet else self._guess(entity, hits, guess if guessing else None, trace)
            if took is not None:
                k, taken = took
                stated = taken.sentences[rel].replace(taken.name, entity.name)
                lead = f"Result {k} looks like {entity.name}; {GUESS_MARK} {stated} "
                trace.guesses.append(Guess(i, entity.url, taken.url, taken.id != entity.id))
                on_route = on_route and taken.id == entity.id
                entity = hop_value(taken, rel, self._by_id)
                continue
            if hit is None:  # off the question's chain: the namesake route's page is not among the results
                lead = f"None of the results is {entity.name}'s page; {GUESS_MARK} {fact} "
                trace.assumed_hops += 1
            elif in_snippet:
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
                if fact in text:
                    lead = f"{fact} "
                elif on_route:
                    return None
                else:
                    lead = f"The page does not say it; {GUESS_MARK} {fact} "
                    trace.assumed_hops += 1
            if guessing:
                entity = hop_value(entity, rel, self._by_id)
        answer = q.answer if on_route else (entity if isinstance(entity, str) else entity.name)
        trace.answer, trace.right = answer, answer.lower() in {a.lower() for a in q.aliases}
        messages.append(
            {"role": "assistant", "content": protocol.answer_turn(f"{lead}So the answer is {answer}.", answer)}
        )
        return messages, trace

    def _solvable(self, q: Question) -> bool:
        """Whether every hop of the question's chain can be read: the entity's own page among the results of its
        name, the fact in its snippet (policy ``needed``) or in the visit's output."""
        for entity, rel in zip(q.chain, q.path):
            hit = next((h for h in self.search.hits(entity.name) if h.url == entity.url), None)
            if hit is None:
                return False
            fact = entity.sentences[rel]
            if self.visit_policy == "needed" and fact in hit.snippet:
                continue
            if fact not in self.visit.visit_one(hit.url, RELATIONS[rel].format(name=entity.name)):
                return False
        return True

    def candidates(self, entity: Entity, hits: list) -> list[tuple[int, Entity]]:
        """``(rank from 1, entity)`` of the results that could be ``entity``: pages of entities of its type whose
        name has the same first word (the entity's own page included)."""
        first = entity.name.split()[0]
        out = []
        for k, h in enumerate(hits, 1):
            e = self._by_url.get(h.url)
            if e is not None and e.type == entity.type and e.name.split()[0] == first:
                out.append((k, e))
        return out

    def _guess(
        self, entity: Entity, hits: list, guess: random.Random | None, trace: Trace
    ) -> tuple[int, Entity] | None:
        """The result taken at random among the candidates, with probability ``guess_rate`` (None: read the page;
        always without ``guess``, which only counts the hop when it has candidates)."""
        found = self.candidates(entity, hits) if self.entities else []
        if len(found) < 2:
            return None
        trace.guessable_hops += 1
        if guess is None or guess.random() >= self.guess_rate:
            return None
        return found[guess.randrange(len(found))]


#: the words that mark a stated-but-unread fact in the expert's reasoning (a guess, or an assumption after one)
GUESS_MARK = "I will take it that"


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
