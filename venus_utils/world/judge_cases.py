"""A labelled set for the offline judge, built from a world's own entities.

Each case is ``{"answer", "ground_truth", "verdict", "kind"}``: an answer an agent could give, the ground truth as
the world's questions store it (aliases joined by ``<|answer_split|>``), whether the exact judge
(:func:`venus_utils.judging.answers.exact_answer`) must accept it, and what kind of case it is.

Accepted kinds are the truth's aliases and what the judge's normalisation takes away: every alias as written, in lower
and upper case, with an article, with punctuation or accents, with surrounding whitespace, in markdown emphasis (bold,
italics, code), after a leading "the answer is" / "answer:" / "final answer:" (also with the answer in bold), and a
date written another way.  Refused kinds are the near misses the tiny agent and RL produce and every way an answer
could be paid for more than the answer: a first name alone, a namesake one letter or one syllable off, a person sharing
only the surname, a company sharing only its stem, a city named like the country, another entity of the same type;
the right name in a list with another one, first and second, joined by " and ", ";", ",", " or ", "/", "&", a new line
or as bullets (and lists of three, hedges in lower and upper case); words added before it ("Northern X", "city of X",
a title, a word of another name) or after it ("X Jr.", "X City", "X (painter)"); possessives ("X's brother", "X's");
hedges ("probably X", "not sure, maybe X", "X?", "I think X", "X, I believe"); the right name negated, in a sentence,
in bold with more said after it, or the answer phrase with more said after it; years swapped, one off, in a list, as
a range or an estimate ("1983-1985", "around 1985", "c. 1985"); a date one day off, in a sentence, or its year alone.

``tests/eval/test_judge_cases.py`` checks the offline judge on it (every case right, every class present, for several
world seeds); notebook 05 describes what the judge accepts.
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
    "punctuation",
    "accents",
    "whitespace",
    "bold",
    "italics",
    "code",
    "answer_is",
    "answer_is_bold",
    "date_format",
)
#: how a list joins two candidates: " and ", ";", ",", " or ", "/", "&", a new line, bullets
LIST_JOINS = {
    "and": "{} and {}",
    "semicolon": "{}; {}",
    "comma": "{}, {}",
    "or": "{} or {}",
    "slash": "{}/{}",
    "ampersand": "{} & {}",
    "newline": "{}\n{}",
    "bullets": "- {}\n- {}",
}
LIST_KINDS = tuple(f"list_{join}_{place}" for join in LIST_JOINS for place in ("first", "second"))
REFUSE_KINDS = (
    "first_name",
    "one_letter_off",
    "one_syllable_off",
    "shared_surname",
    "lower_shared_surname",
    "shared_stem",
    "city_named_like_country",
    "same_type",
    *LIST_KINDS,
    "lower_hedge",
    "upper_hedge",
    "candidate_list",
    "lower_candidate_list",
    "word_before",
    "city_of",
    "title",
    "longer_name",
    "lower_longer_name",
    "word_after",
    "suffix",
    "parenthetical",
    "possessive",
    "possessive_bare",
    "hedge_probably",
    "hedge_maybe",
    "hedge_question",
    "hedge_i_think",
    "hedge_i_believe",
    "negated",
    "sentence",
    "bold_wrong",
    "bold_with_more",
    "answer_with_more",
    "year_swapped",
    "year_off_by_one",
    "year_list",
    "year_range",
    "year_approximate",
    "date_other_day",
    "date_in_sentence",
    "date_year_only",
)
#: suffixes that make a longer name ("Kosa Midor Jr." names another person)
SUFFIXES = ("Jr.", "Sr.", "II", "III", "jr", "IV")
#: negations of the right name
NEGATED = ("not {}", "It is not {}.", "Definitely not {}", "it isn't {}", "Never {}", "NOT {}")
#: words that make another place, or another thing, of a name
BEFORE = ("Northern", "Old", "Greater", "New", "East", "Upper")
AFTER = {"person": ("City", "Museum", "Prize"), "org": ("City", "Holdings"), "work": ("II", "Part Two")}
#: what an agent adds in parentheses (never a word of the entity's aliases: "X (city)" is the alias "X City")
PARENTHESES = {
    "person": ("painter", "chemist", "born 1931"),
    "city": ("town", "capital", "disambiguation"),
    "country": ("country", "nation"),
    "org": ("company", "founded 1931"),
    "work": ("novel", "film", "1931"),
}
POSSESSIVES = ("{}'s brother", "{}'s founder", "{}'s capital", "{}\u2019s mother", "{}'s")
HEDGES = {
    "hedge_probably": ("probably {}", "Probably {}.", "most likely {}", "{}, probably"),
    "hedge_maybe": ("not sure, maybe {}", "Maybe {}", "perhaps {}", "I'm not sure, but maybe {}"),
    "hedge_question": ("{}?", "{} ?", "Is it {}?", "**{}**?"),
    "hedge_i_think": ("I think {}", "I think it's {}.", "i think {}", "I believe {}"),
    "hedge_i_believe": ("{}, I believe", "{}, I think", "{} (I believe)", "{}, if I'm not mistaken"),
}
ANSWER_IS = (
    "The answer is {}.",
    "the answer is {}",
    "Answer: {}",
    "answer {}",
    "Final answer: {}",
    "FINAL ANSWER: {}",
    "**Answer:** {}",
    "The final answer is: {}",
)
PUNCTUATION = ("{}.", "{}!", "({})", '"{}"', "{}\u2026", "\u201c{}\u201d.")
EMPHASIS = {"bold": ("**{}**", "__{}__"), "italics": ("*{}*", "_{}_", "***{}***"), "code": ("`{}`",)}
_ACCENTS = str.maketrans("aeiouAEIOU", "\u00e1\u00e9\u00ed\u00f3\u00fc\u00c1\u00c9\u00cd\u00d3\u00dc")
MONTHS = "January February March April May June July August September October November December".split()


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
    """A year's cases: the year, the answer phrase, punctuation; swapped digits, one off, in a list, every range and
    estimate form; and a full date of that year (written three ways, one day off, in a sentence, its year alone)."""
    y, d = int(year), rng.randint(1, 5)
    out = [
        _case(year, [year], True, "alias"),
        _case(rng.choice(ANSWER_IS).format(year), [year], True, "answer_is"),
        _case(f"{year}.", [year], True, "punctuation"),
        _case(f"In {year}.", [year], False, "sentence"),
    ]
    swapped = year[:2] + year[3] + year[2]
    if swapped != year:
        out.append(_case(swapped, [year], False, "year_swapped"))
    off = str(y + rng.choice((-1, 1)))
    out.append(_case(off, [year], False, "year_off_by_one"))
    pair = (year, off) if rng.random() < 0.5 else (off, year)
    out.append(_case(rng.choice(list(LIST_JOINS.values())).format(*pair), [year], False, "year_list"))
    ranges = (f"{y}\u2013{y + d}", f"{y - d}-{y}", f"{y - d} to {y}", f"between {y - d} and {y}", f"{y}/{y + d}")
    ranges += (f"{y}-{str(y + d)[2:]}", f"{y}s")
    out += [_case(r, [year], False, "year_range") for r in ranges]
    estimates = (f"around {y}", f"c. {y}", f"circa {y}", f"approximately {y}", f"~{y}", f"about {y}", f"ca. {y}")
    estimates += (f"{y} or so", f"before {y}", f"after {y}", f"{y}?")
    out += [_case(e, [year], False, "year_approximate") for e in estimates]
    day, month = rng.randint(1, 27), rng.randint(1, 12)
    truth = [f"{day} {MONTHS[month - 1]} {y}"]
    written = (
        f"{MONTHS[month - 1]} {day}, {y}",
        f"{y}-{month:02d}-{day:02d}",
        f"{day}th of {MONTHS[month - 1]} {y}",
        f"{MONTHS[month - 1][:3]}. {day}, {y}",
    )
    out.append(_case(rng.choice(written), truth, True, "date_format"))
    out.append(_case(f"{MONTHS[month - 1]} {day + 1}, {y}", truth, False, "date_other_day"))
    out.append(_case(f"born on {MONTHS[month - 1]} {day}, {y}", truth, False, "date_in_sentence"))
    out.append(_case(year, truth, False, "date_year_only"))
    return out


def _accepted_cases(truth: list[str], alias: str, rng: random.Random) -> list[dict]:
    """Every alias as written, and one alias as the judge's normalisation takes it: case, an article, punctuation,
    accents, whitespace, markdown emphasis, a leading answer phrase."""
    cases = [_case(a, truth, True, "alias") for a in truth]
    cases += [
        _case(alias.lower(), truth, True, "lower_case"),
        _case(alias.upper(), truth, True, "upper_case"),
        _case(rng.choice(("the {}", "The {}")).format(alias), truth, True, "article"),
        _case(rng.choice(PUNCTUATION).format(alias), truth, True, "punctuation"),
        _case(alias.translate(_ACCENTS), truth, True, "accents"),
        _case(rng.choice(("  {} ", "\n{}\n", "\t{}  \n")).format(alias), truth, True, "whitespace"),
        *(_case(rng.choice(forms).format(alias), truth, True, kind) for kind, forms in EMPHASIS.items()),
        _case(rng.choice(ANSWER_IS).format(alias), truth, True, "answer_is"),
        _case(f"The answer is **{alias}**.", truth, True, "answer_is_bold"),
    ]
    return cases


def _hedge_cases(e: Entity, other: Entity, truth: list[str], alias: str, rng: random.Random) -> list[dict]:
    """The right name hedged, negated, in a sentence, or in bold with more said after it."""
    cases = [_case(rng.choice(forms).format(alias), truth, False, kind) for kind, forms in HEDGES.items()]
    cases.append(_case(rng.choice(NEGATED).format(alias), truth, False, "negated"))
    sentence = rng.choice(
        (
            "According to the page it is {}, as stated there.",
            "according to the pages, the answer is {}.",
            "It is {}.",
            "{} is the answer.",
        )
    )
    cases.append(_case(sentence.format(rng.choice((alias, alias.lower()))), truth, False, "sentence"))
    cases.append(_case(f"**{other.name}** (some pages say {e.name})", truth, False, "bold_wrong"))
    more = rng.choice(("**{}**, or maybe {}", "**{}** (or {})", "**{}** is the answer, not {}"))
    cases.append(_case(more.format(alias, other.name), truth, False, "bold_with_more"))
    cases.append(_case(f"The answer is {alias}, or so the pages say.", truth, False, "answer_with_more"))
    return cases


def labelled_cases(seed: int = 0, size: str = "tiny", namesake_rate: float = 0.5) -> list[dict]:
    """The labelled cases of one sub-world built with ``seed`` (a few thousand for ``tiny``), in a stable order."""
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
        cases += _accepted_cases(truth, alias, rng)
        if " " in e.name and e.type in ("person", "work"):
            cases.append(_case(_one_letter_off(e.name, rng), truth, False, "one_letter_off"))
        near = names.near(e.name) if " " in e.name else None
        if near:
            cases.append(_case(near, truth, False, "one_syllable_off"))
        others = [o for o in by_type[e.type] if o is not e and o.name.lower() not in {t.lower() for t in truth}]
        other = rng.choice(others)
        cases.append(_case(other.name, truth, False, "same_type"))
        # lists: the right name first and second, in every joining form
        for join, form in LIST_JOINS.items():
            cases.append(_case(form.format(alias, other.name), truth, False, f"list_{join}_first"))
            cases.append(_case(form.format(other.name, alias), truth, False, f"list_{join}_second"))
        first, second = (e.name, other.name) if rng.random() < 0.5 else (other.name, e.name)
        cases.append(_case(f"{first.lower()} or {second.lower()}", truth, False, "lower_hedge"))
        cases.append(_case(f"{first.upper()} OR {second.upper()}", truth, False, "upper_hedge"))
        third = rng.choice([o for o in others if o is not other] or [other])
        listed = rng.choice(
            (
                f"{e.name}, {other.name}, {third.name}",
                f"{other.name}, {e.name}, {third.name}",
                f"{third.name}, {e.name}",
            )
        )
        cases.append(_case(listed, truth, False, "candidate_list"))
        cases.append(_case(listed.lower(), truth, False, "lower_candidate_list"))
        # words added before or after the right name
        cases.append(_case(f"{rng.choice(BEFORE)} {alias}", truth, False, "word_before"))
        if e.type in ("country", "city"):
            city_of = rng.choice(("city of {}", "the City of {}", "City of {}")).format(e.name)
            cases.append(_case(city_of, truth, False, "city_of"))
        word = other.name.split()[0]
        longer = rng.choice((f"{word} {e.name}", f"{e.name} {word}"))
        cases.append(_case(longer, truth, False, "longer_name"))
        cases.append(_case(rng.choice((longer.lower(), f"the {longer.lower()}")), truth, False, "lower_longer_name"))
        if e.type in AFTER:
            cases.append(_case(f"{e.name} {rng.choice(AFTER[e.type])}", truth, False, "word_after"))
        cases.append(_case(f"{e.name} {rng.choice(SUFFIXES)}", truth, False, "suffix"))
        cases.append(_case(f"{alias} ({rng.choice(PARENTHESES[e.type])})", truth, False, "parenthetical"))
        cases.append(_case(rng.choice(POSSESSIVES[:-1]).format(alias), truth, False, "possessive"))
        cases.append(_case(POSSESSIVES[-1].format(alias), truth, False, "possessive_bare"))
        cases += _hedge_cases(e, other, truth, alias, rng)
        if e.type == "person":
            cases.append(_case(f"{rng.choice(('Dr.', 'Professor', 'President'))} {e.name}", truth, False, "title"))
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
