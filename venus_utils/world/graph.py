"""Entities, typed relations and their pages: one sub-world of the offline encyclopedia.

Names are built from a small inventory of frequent syllables, so any tokenizer splits them into shared
pieces (the feasibility study's main lesson); years are plain 4-digit numbers.  Pages are a few short
sentences, one fact each.  Some text misleads: near-namesakes (a person with the same first name and a
surname one syllable away, an organisation with the same stem and another suffix), distractor sentences
("once visited C2") and trivia pages whose claims contradict the encyclopedia page.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

SYLLABLES = (
    "ka",
    "lo",
    "mi",
    "ra",
    "ten",
    "vel",
    "dor",
    "sa",
    "ni",
    "bru",
    "tal",
    "ven",
    "ro",
    "shi",
    "mar",
    "gu",
    "fen",
    "li",
    "ko",
    "zan",
    "pe",
    "dri",
    "mo",
    "tu",
    "ber",
    "na",
    "vo",
    "sel",
    "ri",
    "du",
    "an",
    "el",
)
ORG_KINDS = ("Labs", "Works", "Group", "Press", "Studios", "Foundry")
WORK_NOUNS = ("Song", "Tale", "Garden", "River", "Dream", "Winter", "Letters", "Road")
WORK_KINDS = ("novel", "film", "album", "poem")
OCCUPATIONS = ("chemist", "painter", "writer", "engineer", "architect", "composer", "farmer", "doctor")
DOMAIN = "https://wiki.venus"
BLOG_DOMAIN = "https://blog.venus"

#: entities per sub-world; pages = the sum (+ trivia pages)
SIZES = {
    "tiny": dict(country=4, city=12, person=40, org=16, work=16, trivia=6),
    "small": dict(country=8, city=36, person=130, org=50, work=50, trivia=26),
    "medium": dict(country=80, city=360, person=1300, org=500, work=500, trivia=260),
}


@dataclass
class Entity:
    id: str
    type: str  # country | city | person | org | work
    name: str
    world: int
    attrs: dict = field(default_factory=dict)  # relation -> entity id, or a value (years, kinds)
    aliases: list[str] = field(default_factory=list)
    url: str = ""
    sentences: dict = field(default_factory=dict)  # relation -> the sentence stating it
    text: str = ""


class NameMaker:
    """Unique capitalised syllable names (shared across the sub-worlds of one build)."""

    def __init__(self, rng: random.Random):
        self.rng, self.used = rng, set()

    def word(self, n_min: int = 2, n_max: int = 3) -> str:
        return "".join(self.rng.choice(SYLLABLES) for _ in range(self.rng.randint(n_min, n_max))).capitalize()

    def unique(self, make) -> str:
        for _ in range(10_000):
            name = make()
            if name.lower() not in self.used:
                self.used.add(name.lower())
                return name
        raise RuntimeError("ran out of unique names; use fewer sub-worlds")

    def near(self, name: str) -> str | None:
        """A near-namesake: one syllable of the last word changed."""
        head, _, last = name.rpartition(" ")
        for _ in range(50):
            sylls = _split_syllables(last.lower())
            if not sylls:
                return None
            i = self.rng.randrange(len(sylls))
            sylls[i] = self.rng.choice([s for s in SYLLABLES if s != sylls[i]])
            cand = f"{head} {''.join(sylls).capitalize()}".strip()
            if cand.lower() not in self.used:
                self.used.add(cand.lower())
                return cand
        return None


def _split_syllables(word: str) -> list[str]:
    """Greedy split of a generated word back into syllables (longest match first)."""
    out, i = [], 0
    by_len = sorted(SYLLABLES, key=len, reverse=True)
    while i < len(word):
        for s in by_len:
            if word.startswith(s, i):
                out.append(s)
                i += len(s)
                break
        else:
            return []
    return out


def slug(name: str) -> str:
    return name.replace(" ", "_")


def build_graph(
    world: int,
    counts: dict,
    rng: random.Random,
    names: NameMaker,
    namesake_rate: float,
    distractor_rate: float,
    fact_offset: int = 0,
) -> tuple[list[Entity], list[dict]]:
    """The entities of one sub-world with their relations and page texts, plus its trivia pages.  ``fact_offset``
    (the hard tier): fact-free sentences open each page until its facts start after this many characters, so a
    search snippet that long shows none of them: reading them takes a visit."""
    ents: dict[str, list[Entity]] = {t: [] for t in ("country", "city", "person", "org", "work")}

    def add(etype: str, name: str, **attrs) -> Entity:
        e = Entity(f"w{world}-{etype}-{len(ents[etype])}", etype, name, world, attrs, url=f"{DOMAIN}/{slug(name)}")
        ents[etype].append(e)
        return e

    for _ in range(counts["country"]):
        add("country", names.unique(lambda: names.word(2, 2) + "ia"))
    for i in range(counts["city"]):
        country = ents["country"][i] if i < counts["country"] else rng.choice(ents["country"])
        add("city", names.unique(lambda: names.word(2, 3)), country=country.id)
    for k in ents["country"]:
        k.attrs["capital"] = rng.choice([c for c in ents["city"] if c.attrs["country"] == k.id]).id
    for _ in range(counts["person"]):
        twin = rng.choice(ents["person"]) if ents["person"] and rng.random() < namesake_rate else None
        name = names.near(twin.name) if twin else None
        name = name or names.unique(lambda: f"{names.word(2, 2)} {names.word(2, 3)}")
        add(
            "person",
            name,
            born_in=rng.choice(ents["city"]).id,
            birth_year=rng.randint(1900, 1990),
            occupation=rng.choice(OCCUPATIONS),
            namesake_of=twin.id if twin and name.split()[0] == twin.name.split()[0] else None,
        )
    by_id = {e.id: e for group in ents.values() for e in group}
    for _ in range(counts["org"]):
        twin = rng.choice(ents["org"]) if ents["org"] and rng.random() < namesake_rate else None
        stem = twin.name.rsplit(" ", 1)[0] if twin else None
        kinds = [k for k in ORG_KINDS if not stem or f"{stem} {k}".lower() not in names.used]
        name = (
            names.unique(lambda stem=stem, kinds=kinds: f"{stem} {rng.choice(kinds)}")
            if stem and kinds
            else names.unique(lambda: f"{names.word(2, 2)} {rng.choice(ORG_KINDS)}")
        )
        founder = rng.choice(ents["person"])
        add(
            "org",
            name,
            founder=founder.id,
            hq=rng.choice(ents["city"]).id,
            founded_year=min(2024, by_id[founder.id].attrs["birth_year"] + rng.randint(20, 50)),
        )
    for p in ents["person"]:
        p.attrs["employer"] = rng.choice(ents["org"]).id
    for _ in range(counts["work"]):
        creator, publisher = rng.choice(ents["person"]), rng.choice(ents["org"])
        year = min(2025, max(creator.attrs["birth_year"] + 18, publisher.attrs["founded_year"]) + rng.randint(0, 10))
        add(
            "work",
            names.unique(lambda: f"{names.word(2, 2)} {rng.choice(WORK_NOUNS)}"),
            creator=creator.id,
            publisher=publisher.id,
            year=year,
            kind=rng.choice(WORK_KINDS),
        )
    by_id = {e.id: e for group in ents.values() for e in group}
    all_ents = [e for group in ents.values() for e in group]
    for e in all_ents:
        _write_page(e, by_id, ents, rng, distractor_rate, fact_offset)
    trivia = [
        _trivia_page(rng.choice(ents["person"] + ents["org"]), by_id, ents, rng) for _ in range(counts["trivia"])
    ]
    return all_ents, trivia


def _name(by_id: dict, eid: str) -> str:
    return by_id[eid].name


def _a(noun: str) -> str:
    return f"{'an' if noun[0] in 'aeiou' else 'a'} {noun}"


def _other(rng: random.Random, group: list[Entity], e: Entity) -> Entity:
    return rng.choice([x for x in group if x is not e] or group)


#: fact-free sentences of the hard tier's page leads (chosen by the entity, so no random draw changes other pages)
LEAD_SENTENCES = (
    "{n} is described in several regional archives.",
    "Little else about {n} is widely known.",
    "Records of {n} were collected over many years.",
    "Accounts of {n} differ in their details.",
    "{n} is often mentioned in passing.",
)


def _lead(e: Entity, first: str, offset: int) -> list[str]:
    """Fact-free sentences after ``first`` until the text reaches ``offset`` characters (none for 0)."""
    start, lead, length = sum(map(ord, e.id)) % len(LEAD_SENTENCES), [], len(first)
    while offset and length <= offset:
        sentence = LEAD_SENTENCES[(start + len(lead)) % len(LEAD_SENTENCES)].format(n=e.name)
        lead.append(sentence)
        length += 1 + len(sentence)
    return lead


def _write_page(
    e: Entity, by_id: dict, ents: dict, rng: random.Random, distractor_rate: float, fact_offset: int = 0
) -> None:
    a, n = e.attrs, e.name
    if e.type == "country":
        first = f"{n} is a country."
        e.sentences = {"capital": f"The capital of {n} is {_name(by_id, a['capital'])}."}
        e.aliases = [n, f"Republic of {n}"]
        distractor = f"{n} trades with {_other(rng, ents['country'], e).name}."
    elif e.type == "city":
        first = f"{n} is a city located in {_name(by_id, a['country'])}."
        e.sentences = {"country": first}
        e.aliases = [n, f"{n} City"]
        distractor = f"{n} is twinned with {_other(rng, ents['city'], e).name}."
    elif e.type == "person":
        first = f"{n} is {_a(a['occupation'])}."
        born = f"{n} was born in {_name(by_id, a['born_in'])} in {a['birth_year']}."
        e.sentences = {
            "born_in": born,
            "birth_year": born,
            "employer": f"{n} works for {_name(by_id, a['employer'])}.",
        }
        e.aliases = [n, n.split()[-1]]
        distractor = f"{n} once visited {rng.choice(ents['city']).name}."
    elif e.type == "org":
        first = f"{n} is a company."
        founded = f"{n} was founded by {_name(by_id, a['founder'])} in {a['founded_year']}."
        e.sentences = {
            "founder": founded,
            "founded_year": founded,
            "hq": f"{n} is headquartered in {_name(by_id, a['hq'])}.",
        }
        e.aliases = [n, n.rsplit(" ", 1)[0]]
        distractor = f"{n} has a small office in {rng.choice(ents['city']).name}."
    else:  # work
        first = f"{n} is {_a(a['kind'])} created by {_name(by_id, a['creator'])}."
        e.sentences = {
            "creator": first,
            "publisher": f"{n} was published by {_name(by_id, a['publisher'])} in {a['year']}.",
        }
        e.aliases = [n]
        distractor = f"{n} was praised in {rng.choice(ents['country']).name}."
    facts = [s for s in dict.fromkeys(e.sentences.values()) if s != first]
    if rng.random() < distractor_rate:
        facts.append(distractor)
    rng.shuffle(facts)
    if fact_offset and first in e.sentences.values():  # hard tier: no fact before the lead (city, work pages)
        facts.insert(0, first)
        first = f"{n} is {_a('city' if e.type == 'city' else a.get('kind', e.type))}."
    e.text = " ".join([first, *_lead(e, first, fact_offset), *facts])


def _trivia_page(e: Entity, by_id: dict, ents: dict, rng: random.Random) -> dict:
    """A blog page with a contradicting claim about ``e`` (the encyclopedia page is the reliable source)."""
    if e.type == "person":
        wrong = rng.choice([c for c in ents["city"] if c.id != e.attrs["born_in"]] or ents["city"]).name
        claim = f"A fan blog claims that {e.name} was born in {wrong}."
    else:
        wrong = rng.choice([p for p in ents["person"] if p.id != e.attrs["founder"]] or ents["person"]).name
        claim = f"A fan blog claims that {e.name} was founded by {wrong}."
    title = f"{e.name} trivia"
    return {
        "url": f"{BLOG_DOMAIN}/{slug(title)}",
        "title": title,
        "text": f"{claim} The claim is not confirmed.",
        "id": f"{e.id}-trivia",
        "type": "trivia",
        "world": e.world,
    }
