"""Multi-hop questions over the graph: templates, the hop chain, the answer and its aliases.

A question names one entity and asks for the end of a chain of 2-4 relations ("the country where the
founder of O was born"); the hard tier's sub-worlds add chains of 4-5 (:data:`HARD_TEMPLATES`).  Each relation is
functional, so the answer is unique; each hop is one page to read.
"""

from __future__ import annotations

from dataclasses import dataclass

from .graph import Entity

#: relation -> (visit goal, what the agent needs, phrased for its reasoning)
RELATIONS = {
    "born_in": "Find where {name} was born.",
    "birth_year": "Find when {name} was born.",
    "employer": "Find who {name} works for.",
    "country": "Find where {name} is located.",
    "capital": "Find the capital of {name}.",
    "founder": "Find who founded {name}.",
    "founded_year": "Find when {name} was founded.",
    "hq": "Find where {name} is headquartered.",
    "creator": "Find who created {name}.",
    "publisher": "Find who published {name}.",
}
YEAR_RELATIONS = ("birth_year", "founded_year")

#: (template id, start type, relation path, question)
TEMPLATES = (
    ("person_country", "person", ("born_in", "country"), "In which country was {0} born?"),
    ("person_employer_city", "person", ("employer", "hq"), "In which city is the employer of {0} headquartered?"),
    ("person_employer_year", "person", ("employer", "founded_year"), "In what year was the employer of {0} founded?"),
    (
        "person_employer_country",
        "person",
        ("employer", "hq", "country"),
        "In which country is the employer of {0} headquartered?",
    ),
    ("org_founder_year", "org", ("founder", "birth_year"), "In what year was the founder of {0} born?"),
    ("org_founder_city", "org", ("founder", "born_in"), "In which city was the founder of {0} born?"),
    ("org_founder_country", "org", ("founder", "born_in", "country"), "In which country was the founder of {0} born?"),
    (
        "org_hq_capital",
        "org",
        ("hq", "country", "capital"),
        "What is the capital of the country where {0} is headquartered?",
    ),
    ("work_publisher_founder", "work", ("publisher", "founder"), "Who founded the company that published {0}?"),
    ("work_creator_city", "work", ("creator", "born_in"), "In which city was the creator of {0} born?"),
    (
        "work_creator_country",
        "work",
        ("creator", "born_in", "country"),
        "In which country was the creator of {0} born?",
    ),
    (
        "work_publisher_founder_year",
        "work",
        ("publisher", "founder", "birth_year"),
        "In what year was the founder of the publisher of {0} born?",
    ),
    (
        "work_publisher_founder_country",
        "work",
        ("publisher", "founder", "born_in", "country"),
        "In which country was the founder of the publisher of {0} born?",
    ),
    (
        "work_creator_employer_country",
        "work",
        ("creator", "employer", "hq", "country"),
        "In which country is the employer of the creator of {0} headquartered?",
    ),
    ("city_capital", "city", ("country", "capital"), "What is the capital of the country where {0} is located?"),
)

#: the hard tier's own longer chains (4-5 hops), used only in hard sub-worlds (with TEMPLATES of the same lengths)
HARD_TEMPLATES = (
    (
        "person_employer_capital",
        "person",
        ("employer", "hq", "country", "capital"),
        "What is the capital of the country where the employer of {0} is headquartered?",
    ),
    (
        "org_founder_capital",
        "org",
        ("founder", "born_in", "country", "capital"),
        "What is the capital of the country where the founder of {0} was born?",
    ),
    (
        "person_employer_founder_country",
        "person",
        ("employer", "founder", "born_in", "country"),
        "In which country was the founder of the employer of {0} born?",
    ),
    (
        "org_founder_employer_country",
        "org",
        ("founder", "employer", "hq", "country"),
        "In which country is the employer of the founder of {0} headquartered?",
    ),
    (
        "work_creator_employer_capital",
        "work",
        ("creator", "employer", "hq", "country", "capital"),
        "What is the capital of the country where the employer of the creator of {0} is headquartered?",
    ),
    (
        "work_publisher_founder_capital",
        "work",
        ("publisher", "founder", "born_in", "country", "capital"),
        "What is the capital of the country where the founder of the publisher of {0} was born?",
    ),
    (
        "person_employer_founder_capital",
        "person",
        ("employer", "founder", "born_in", "country", "capital"),
        "What is the capital of the country where the founder of the employer of {0} was born?",
    ),
    (
        "org_founder_employer_year",
        "org",
        ("founder", "employer", "founder", "birth_year"),
        "In what year was the founder of the employer of the founder of {0} born?",
    ),
)


@dataclass
class Question:
    """One question: ``chain[i]`` is the entity whose page answers hop ``i`` (relation ``path[i]``)."""

    template: str
    text: str
    path: tuple[str, ...]
    chain: list[Entity]
    answer: str
    aliases: list[str]
    world: int

    @property
    def hops(self) -> int:
        return len(self.path)


def hop_value(e: Entity, relation: str, by_id: dict) -> Entity | str:
    value = e.attrs[relation]
    return str(value) if relation in YEAR_RELATIONS else by_id[value]


def make_questions(
    entities: list[Entity], by_id: dict, min_hops: int = 2, max_hops: int = 4, templates: tuple = TEMPLATES
) -> list[Question]:
    """Every template of ``min_hops``..``max_hops`` relations applied to every entity of its start type, in a stable
    order (``templates``: :data:`TEMPLATES`, or with :data:`HARD_TEMPLATES` for the hard tier)."""
    out = []
    for tid, start_type, path, text in templates:
        if not min_hops <= len(path) <= max_hops:
            continue
        for start in (e for e in entities if e.type == start_type):
            chain, node = [], start
            for rel in path:
                chain.append(node)
                node = hop_value(node, rel, by_id)
            answer = node if isinstance(node, str) else node.name
            aliases = [answer] if isinstance(node, str) else list(dict.fromkeys(node.aliases))
            out.append(Question(tid, text.format(start.name), path, chain, answer, aliases, start.world))
    return out
