"""A labelled set for the offline judge, built from a world's own entities.

Each case is ``{"answer", "ground_truth", "verdict", "kind"}``: an answer an agent could give, the ground truth as
the world's questions store it (aliases joined by ``<|answer_split|>``), whether a strict judge must accept it, and
what kind of case it is.  Accepted kinds state an alias (as written, lower-case, upper-case, with an article, in bold
or italics, in a sentence, in a lower-case sentence, with trailing punctuation, after a title); refused kinds are the
near misses the tiny agent and RL produce, and the ways an answer can hedge to be paid by a lenient judge: a first
name alone, a namesake one letter or one syllable off, a person sharing only the surname (also in lower case), a
company sharing only its stem, a city named like the country, another entity of the same type, the right name inside
a longer one (a word before or after it, in any case; a suffix such as "Jr." or "III"), the right name negated
("not ..."), a year with its digits swapped or one off, a hedge between two years, a range of years or an
approximate year around the right one, a wrong answer in bold with the right one mentioned after it, a hedge between
the truth and another entity ("A or B", also in lower and upper case), a list of candidates with the truth among them
(also in lower case).

``tests/eval/test_judge_cases.py`` checks the offline judge on it (every case right, for several world seeds);
notebook 05 describes what the judge accepts.
"""

from __future__ import annotations

import random

from ..core import protocol
from .graph import ORG_KINDS, SIZES, Entity, NameMaker, build_graph

ACCEPT_KINDS = (
    "alias",
    "lower_case",
    "upper_case",
    "article",
    "bold",
    "italics",
    "sentence",
    "lower_sentence",
    "punctuation",
    "title",
)
REFUSE_KINDS = (
    "first_name",
    "one_letter_off",
    "one_syllable_off",
    "shared_surname",
    "lower_shared_surname",
    "shared_stem",
    "city_named_like_country",
    "same_type",
    "year_swapped",
    "year_off_by_one",
    "year_hedge",
    "year_range",
    "year_approximate",
    "bold_wrong",
    "hedge",
    "lower_hedge",
    "upper_hedge",
    "candidate_list",
    "lower_candidate_list",
    "longer_name",
    "lower_longer_name",
    "suffix",
    "negated",
)
#: suffixes that make a longer name ("Kosa Midor Jr." names another person)
SUFFIXES = ("Jr.", "Sr.", "II", "III", "jr", "IV")
#: negations of the right name
NEGATED = ("not {}", "It is not {}.", "Definitely not {}", "it isn't {}", "Never {}", "NOT {}")


def _one_letter_off(name: str, rng: random.Random) -> str:
    """``name`` with one letter of its last word replaced (a vowel by another vowel, keeps it pronounceable)."""
    head, _, last = name.rpartition(" ")
    spots = [i for i, ch in enumerate(last) if ch.lower() in "aeiou" and i > 0] or list(range(1, len(last)))
    i = rng.choice(spots)
    new = rng.choice([v for v in "aeiou" if v != last[i].lower()])
    return f"{head} {last[:i]}{new}{last[i + 1 :]}".strip()


def _case(answer: str, ground_truth: list[str], verdict: bool, kind: str) -> dict:
    return {
        "answer": answer,
        "ground_truth": protocol.ANSWER_SPLIT.join(ground_truth),
        "verdict": verdict,
        "kind": kind,
    }


def _year_cases(year: str, rng: random.Random) -> list[dict]:
    out = [_case(year, [year], True, "alias"), _case(f"In {year}.", [year], True, "sentence")]
    swapped = year[:2] + year[3] + year[2]
    if swapped != year:
        out.append(_case(swapped, [year], False, "year_swapped"))
        out.append(_case(f"{year} or {swapped}", [year], False, "year_hedge"))
    out.append(_case(str(int(year) + rng.choice((-1, 1))), [year], False, "year_off_by_one"))
    y, d = int(year), rng.randint(1, 5)
    ranges = (f"{y}\u2013{y + d}", f"{y - d}-{y}", f"{y - d} to {y}", f"between {y - d} and {y}", f"{y}/{y + d}")
    out.append(_case(rng.choice(ranges), [year], False, "year_range"))
    estimates = (f"around {y}", f"c. {y}", f"circa {y}", f"approximately {y}", f"~{y}", f"about {y}")
    out.append(_case(rng.choice(estimates), [year], False, "year_approximate"))
    return out


def labelled_cases(seed: int = 0, size: str = "tiny", namesake_rate: float = 0.5) -> list[dict]:
    """The labelled cases of one sub-world built with ``seed`` (a few hundred for ``tiny``), in a stable order."""
    rng = random.Random(f"{seed}-judge-cases")
    names = NameMaker(random.Random(f"{seed}-judge-names"))
    entities, _ = build_graph(0, SIZES[size], random.Random(f"{seed}-judge-graph"), names, namesake_rate, 0.0)
    by_type: dict[str, list[Entity]] = {}
    for e in entities:
        by_type.setdefault(e.type, []).append(e)
    cases: list[dict] = []
    for e in entities:
        truth = list(dict.fromkeys(e.aliases or [e.name]))
        alias = rng.choice(truth)
        cases += [
            _case(alias, truth, True, "alias"),
            _case(alias.lower(), truth, True, "lower_case"),
            _case(alias.upper(), truth, True, "upper_case"),
            _case(f"the {e.name}", truth, True, "article"),
            _case(f"The answer is **{alias}**.", truth, True, "bold"),
            _case(rng.choice(("*{}*", "_{}_", "***{}***")).format(alias), truth, True, "italics"),
            _case(f"{e.name}.", truth, True, "punctuation"),
            _case(f"According to the page it is {e.name}, as stated there.", truth, True, "sentence"),
            _case(f"according to the pages, the answer is {alias.lower()}.", truth, True, "lower_sentence"),
        ]
        if e.type == "person":
            cases.append(_case(f"{rng.choice(('Dr.', 'Professor', 'President'))} {e.name}", truth, True, "title"))
        if " " in e.name and e.type in ("person", "work"):
            cases.append(_case(_one_letter_off(e.name, rng), truth, False, "one_letter_off"))
        near = names.near(e.name) if " " in e.name else None
        if near:
            cases.append(_case(near, truth, False, "one_syllable_off"))
        others = [o for o in by_type[e.type] if o is not e and o.name.lower() not in {t.lower() for t in truth}]
        other = rng.choice(others)
        cases.append(_case(other.name, truth, False, "same_type"))
        cases.append(_case(f"**{other.name}** (some pages say {e.name})", truth, False, "bold_wrong"))
        first, second = (e.name, other.name) if rng.random() < 0.5 else (other.name, e.name)
        cases.append(_case(f"{first} or {second}", truth, False, "hedge"))
        cases.append(_case(f"{first.lower()} or {second.lower()}", truth, False, "lower_hedge"))
        cases.append(_case(f"{first.upper()} OR {second.upper()}", truth, False, "upper_hedge"))
        third = rng.choice([o for o in others if o is not other] or [other])
        cases.append(_case(f"{other.name}, {e.name}, {third.name}", truth, False, "candidate_list"))
        listed = f"{other.name}, {e.name}, {third.name}".lower()
        cases.append(
            _case(
                rng.choice((listed, f"{other.name.lower()}, {e.name.lower()}")), truth, False, "lower_candidate_list"
            )
        )
        word = other.name.split()[0]
        longer = rng.choice((f"{word} {e.name}", f"{e.name} {word}"))
        cases.append(_case(longer, truth, False, "longer_name"))
        cases.append(_case(rng.choice((longer.lower(), f"the {longer.lower()}")), truth, False, "lower_longer_name"))
        cases.append(_case(f"{e.name} {rng.choice(SUFFIXES)}", truth, False, "suffix"))
        cases.append(_case(rng.choice(NEGATED).format(rng.choice((e.name, alias))), truth, False, "negated"))
        if e.type == "person":
            first, surname = e.name.split()[0], e.name.split()[-1]
            cases.append(_case(first, truth, False, "first_name"))
            other_first = rng.choice([o.name.split()[0] for o in others if o.name.split()[0] != first])
            cases.append(_case(f"{other_first} {surname}", truth, False, "shared_surname"))
            cases.append(_case(f"{other_first} {surname}".lower(), truth, False, "lower_shared_surname"))
            cases += _year_cases(str(e.attrs["birth_year"]), rng)
        elif e.type == "org":
            stem, kind = e.name.rsplit(" ", 1)
            cases.append(
                _case(f"{stem} {rng.choice([k for k in ORG_KINDS if k != kind])}", truth, False, "shared_stem")
            )
            cases += _year_cases(str(e.attrs["founded_year"]), rng)
        elif e.type == "country":
            cases.append(_case(f"{e.name} City", truth, False, "city_named_like_country"))
    return cases
