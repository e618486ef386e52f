"""Answers: normalisation, aliases, exact match and token F1 (the one implementation of the project).

Ground truths may hold several acceptable answers joined by ``<|answer_split|>`` (DR-Venus's QA data), or
be a list of them; every metric takes the best alias.

Normalisation (SQuAD-style, made robust to what deep-research agents write): Unicode NFKC, accents dropped,
thousands separators inside numbers removed (``13,186`` -> ``13186``), lower-case, markdown emphasis and
punctuation dropped, articles (a / an / the) removed, CJK characters one token each.

:func:`states_answer` is the offline judge's rule: the answer must *state* an alias, not resemble one (token F1
accepts a first name alone, a namesake one letter off, a company sharing a word with the truth).
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable
from typing import Any

from ..core.protocol import split_aliases

ARTICLES = frozenset({"a", "an", "the"})
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_TOKEN_RE = re.compile(rf"[{_CJK}]|[^\W_{_CJK}]+")
_THOUSANDS_RE = re.compile(r"(?<=\d)[,\u202f\u00a0\u2009'](?=\d{3}(?!\d))")
_BOLD_RE = re.compile(r"\*\*(.+?)\*\*|__(.+?)__", re.DOTALL)


def aliases(ground_truth: Any) -> list[str]:
    """Acceptable answers: ``"a<|answer_split|>b"`` or ``["a", "b"]`` -> ``["a", "b"]`` (order kept, no duplicates)."""
    if ground_truth is None:
        return []
    if isinstance(ground_truth, str):
        items: Iterable = [ground_truth]
    elif hasattr(ground_truth, "tolist"):
        items = ground_truth.tolist()
    elif isinstance(ground_truth, (list, tuple)):
        items = ground_truth
    else:
        items = [str(ground_truth)]
    out: list[str] = []
    for item in items:
        out.extend(split_aliases(item) if item is not None else [])
    return list(dict.fromkeys(out))


def _fold(text: str) -> str:
    """Thousands separators out of numbers, Unicode NFKC, accents dropped ("São" -> "Sao"); case kept."""
    text = unicodedata.normalize("NFKD", _THOUSANDS_RE.sub("", text))
    return unicodedata.normalize("NFKC", "".join(ch for ch in text if not unicodedata.combining(ch)))


def answer_tokens(text: Any) -> list[str]:
    """The normalised tokens of an answer."""
    if text is None:
        return []
    return [t for t in _TOKEN_RE.findall(_fold(str(text)).lower()) if t not in ARTICLES]


def normalize_answer(text: Any) -> str:
    return " ".join(answer_tokens(text))


def _f1(pred: list[str], gold: list[str], set_based: bool = False) -> float:
    if not pred or not gold:
        return float(pred == gold and bool(pred))
    if set_based:
        same = len(set(pred) & set(gold))
        p, g = len(set(pred)), len(set(gold))
    else:
        same = sum((Counter(pred) & Counter(gold)).values())
        p, g = len(pred), len(gold)
    if same == 0:
        return 0.0
    precision, recall = same / p, same / g
    return 2 * precision * recall / (precision + recall)


def exact_match(prediction: Any, ground_truth: Any) -> bool:
    """Normalised equality with any alias (an empty prediction never matches)."""
    pred = normalize_answer(prediction)
    return bool(pred) and any(pred == normalize_answer(a) for a in aliases(ground_truth))


def token_f1(prediction: Any, ground_truth: Any, set_based: bool = False) -> float:
    """Best token F1 over the aliases (bag of tokens; ``set_based=True`` is DR-Venus's RL variant)."""
    pred = answer_tokens(prediction)
    return max((_f1(pred, answer_tokens(a), set_based) for a in aliases(ground_truth)), default=0.0)


def answer_spans(prediction: Any) -> list[str]:
    """The prediction, then the parts an agent uses to state its answer: **bold** spans and the first line."""
    text = "" if prediction is None else str(prediction).strip()
    spans = [text]
    spans.extend(a or b for a, b in _BOLD_RE.findall(text))
    first = text.splitlines()[0] if text else ""
    if first and first != text:
        spans.append(first)
    return [s for s in dict.fromkeys(spans) if s.strip()]


def best_span_f1(prediction: Any, ground_truth: Any) -> float:
    """Best token F1 over :func:`answer_spans` and the aliases (the offline judge's score)."""
    return max((token_f1(span, ground_truth) for span in answer_spans(prediction)), default=0.0)


# ---------------------------------------------------------------------------------------------------------
# The strict offline judge: an answer states an alias, near misses and hedges are refused

#: words that may stand before a name without being part of it: titles ("Dr. Kosa Midor", "President ...")
_TITLES = frozenset("dr mr mrs ms prof professor president sir dame lord lady king queen saint st".split())
#: words that make a longer name when they follow one ("Kosa Midor Jr." is another person than "Kosa Midor")
_SUFFIXES = frozenset("jr sr ii iii iv".split())
#: words that may stand next to a name without being part of it: function words, answer labels, titles, sentence
#: adverbs ("In Naduia.", "Answer: Kosa Midor", "Dr. Kosa Midor", "Probably Paris")
_FREE_WORDS = _TITLES | frozenset(
    "i in at by from of on to for and or but is was are were it its he she they his her their this that "
    "answer final born founded located yes no so thus hence therefore "
    "probably clearly likely perhaps maybe definitely certainly actually indeed".split()
)
#: in a span written in one letter case ("kosa midor", "KOSA MIDOR") capitals cannot tell a name from a word: there
#: any word not among these common ones counts as part of a name
_COMMON_WORDS = _FREE_WORDS | frozenset(
    "a an the as with without into onto about after before over under between through during since until while "
    "not never nor either neither both each every all any some none one only also just even still then than "
    "here there where when who whom whose which what why how if because though although whether "
    "be been being am has have had having do does did done can could may might must shall should will would "
    "me my mine we us our you your him hers them these those itself himself herself themselves "
    "says said say stated states state according page pages source sources search result results text "
    "question answer answers name named called known as correct right wrong true sure think believe found find "
    "shows show showed listed lists list given gives give see seen appears appear wrote written writes "
    "person people year date number "
    "first last new old other another same such very more most much many few well".split()
)
#: words that turn a list of candidates into a hedge ("Paris or Rome", "not Paris, Rome")
_HEDGE_WORDS = frozenset("or nor not either neither versus vs".split())
#: words that negate the name after them ("not Kosa Midor", "it isn't Paris", "never Paris")
_NEGATIONS = frozenset("not never no nor neither isn wasn aren weren doesn didn cannot".split())
#: words that make a number approximate ("around 1985", "c. 1985", "between 1983 and 1985")
_APPROXIMATE = frozenset(
    "around about approximately approx circa c ca roughly nearly almost some between from before after over under "
    "estimated est".split()
)
_RANGE = r"\s*(?:[-\u2010-\u2015~/]|to|until|till|through|thru|and|or)\s*"
_RANGE_BEFORE_RE = re.compile(rf"\d{_RANGE}$", re.I)  # "1983 to |1985"
_RANGE_AFTER_RE = re.compile(rf"{_RANGE}\d", re.I)  # "1985| - 1987"
_ESTIMATE_RE = re.compile(r"[~\u2248<>\u2264\u2265]\s*$")  # "~1985", "> 1985"
_CLAUSE_END_RE = re.compile(r"[,;:.!?()\[\]\n]")
_JOINED_RE = re.compile(r"[\s\-'’.]*")  # what may join two words of one name ("Jean-Luc", "O'Neil", "J. Doe")
_ITEM_SPLIT_RE = re.compile(r"[,;]|\s/\s|(?<=\w)/(?=\w)")
_LABELLED_RE = re.compile(r"^\s*[^\W\d_][^:\d]{0,39}:\s*(\S.*)$")  # "Capacity: 13,186" -> "13,186"
_MONTHS = {
    m[:3]: i
    for i, m in enumerate(
        "january february march april may june july august september october november december".split(), 1
    )
}
_MONTH = r"(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?"
_DATE_RES = (
    (re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b"), ("y", "m", "d")),
    (re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH},?\s+(\d{{4}})\b", re.I), ("d", "M", "y")),
    (re.compile(rf"\b{_MONTH}\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b", re.I), ("M", "d", "y")),
)


def _dates(text: str) -> set[tuple[int, int, int]]:
    """The (year, month, day) of every full date in ``text`` (ISO, "5 March 1931", "March 5, 1931")."""
    found = set()
    for pattern, order in _DATE_RES:
        for m in pattern.finditer(text):
            parts = dict(zip(order, m.groups()))
            month = _MONTHS[parts["M"][:3].lower()] if "M" in parts else int(parts["m"])
            found.add((int(parts["y"]), month, int(parts["d"])))
    return found


Word = tuple[str, str, int, int]  # (normalised token, raw token, start, end)


def _words(text: str) -> tuple[list[Word], str]:
    """``(normalised token, raw token, start, end)`` of each token of ``text`` (articles included), and the folded
    text the positions refer to."""
    text = _fold(text)
    return [(m.group(0).lower(), m.group(0), m.start(), m.end()) for m in _TOKEN_RE.finditer(text)], text


def _cased(words: list[Word]) -> bool:
    """Whether the span writes names with capitals among lower-case words ("Kosa Midor, a chemist"): then a
    capitalised word is a name.  A span in one letter case ("kosa midor lena", "PARIS OR ROME") is not."""
    has_lower = any(w[1][:1].islower() for w in words)
    return has_lower and any(w[1][:1].isupper() and w[0] != "i" for w in words[1:])


def _is_name_word(word: Word, cased: bool) -> bool:
    """Whether ``word`` may be part of a name: capitalised and not a free word (a span with capitals), or a word
    with letters that is not a common one (a span in one letter case).  CJK characters never are."""
    if cased:
        return word[1][:1].isupper() and word[0] not in _FREE_WORDS
    return word[1].lower() != word[1].upper() and word[0] not in _COMMON_WORDS


def _extends(text: str, inner: Word, outer: Word | None, numeric: bool, cased: bool, after: bool) -> bool:
    """Whether ``outer`` (the word next to a match, or None) is part of the same name or number as ``inner``: joined
    to it by nothing but spaces, hyphens, apostrophes or dots, and a digit (for a number), a suffix after a name
    ("Jr.", "III") or a word that may be part of a name (:func:`_is_name_word`)."""
    if outer is None:
        return False
    gap = text[min(inner[3], outer[3]) : max(inner[2], outer[2])]
    if not _JOINED_RE.fullmatch(gap):
        return False
    if numeric:
        return outer[0].isdigit()
    if after and outer[0] in _SUFFIXES:
        return True
    return _is_name_word(outer, cased) or outer[0].isdigit()


def _candidates(text: str, numeric: bool, exclude: set[str]) -> int:
    """How many answer-like words ``text`` holds besides ``exclude``: numbers (a numeric truth) or words that may be
    part of a name (:func:`_is_name_word`; "A" may be a list item: "A, B, C")."""
    words, _ = _words(text)
    if numeric:
        return sum(w[0].isdigit() and w[0] not in exclude for w in words)
    cased = _cased(words)
    return sum(
        (_is_name_word(w, cased) or w[1] == "A") and w[0] not in exclude and w[0] not in ("the", "an") for w in words
    )


def _hedged(span: str, gold: list[str], numeric: bool) -> bool:
    """Whether ``span`` names other candidates beside the truth: with "or" / "not" / "either" / a slash, as a list
    in which the truth is not the first item, or as a list of three or more candidates (in any letter case)."""
    exclude = set(gold) | _FREE_WORDS
    if not _candidates(span, numeric, exclude):
        return False
    words, _ = _words(span)
    if any(w[0] in _HEDGE_WORDS for w in words) or "/" in span:
        return True
    items = [item for item in _ITEM_SPLIT_RE.split(span) if item.strip()]
    first = answer_tokens(items[0]) if items else []
    in_first = any(first[k : k + len(gold)] == gold for k in range(len(first) - len(gold) + 1))
    named = sum(_candidates(item, numeric, set(gold)) > 0 for item in items)
    return (not in_first and _candidates(items[0], numeric, set(gold)) > 0) or named >= 3


def _negated(text: str, start: int) -> bool:
    """Whether the match starting at ``start`` of ``text`` is negated: "not" / "never" / "isn't" among the four words
    before it in the same clause ("it is not Kosa Midor", "never the Republic of Naduia"; not "I am not sure, but
    Paris")."""
    clause = _CLAUSE_END_RE.split(text[:start])[-1]
    return any(t.lower() in _NEGATIONS for t in _TOKEN_RE.findall(clause)[-4:])


def _approximate(text: str, content: list[Word], i: int, j: int) -> bool:
    """Whether the number ``content[i:j]`` is given as a range or an estimate: "around 1985", "c. 1985", "~1985",
    "1985-1987", "1983 to 1985", "between 1983 and 1985"."""
    if i > 0 and content[i - 1][0] in _APPROXIMATE:
        return True
    before, after = text[: content[i][2]], text[content[j - 1][3] :]
    return bool(_ESTIMATE_RE.search(before) or _RANGE_BEFORE_RE.search(before) or _RANGE_AFTER_RE.match(after))


def _states(span: str, alias: str) -> bool:
    """Whether ``span`` states ``alias``: equal to it after normalisation, or holding it as a whole name (not inside
    a longer name: "Naduia" is not stated by "Naduia City", "kosa midor lena" or "Kosa Midor Jr.") or number (not
    inside a longer one, a range or an estimate), not negated ("not Paris"), without hedging between it and other
    candidates ("Paris or Rome", "1985 or 1958", "Rome, Paris"), in any letter case."""
    gold = answer_tokens(alias)
    if not gold:
        return False
    words, text = _words(span)
    content = [w for w in words if w[0] not in ARTICLES]
    numeric = all(t.isdigit() for t in gold)
    if [w[0] for w in content] == gold:
        return not (numeric and _approximate(text, content, 0, len(content)))
    cased = _cased(words)
    n = len(gold)
    for i in range(len(content) - n + 1):
        if [w[0] for w in content[i : i + n]] != gold:
            continue
        before = content[i - 1] if i > 0 else None
        after = content[i + n] if i + n < len(content) else None
        if _extends(text, content[i], before, numeric, cased, after=False):
            continue
        if _extends(text, content[i + n - 1], after, numeric, cased, after=True):
            continue
        if _negated(text, content[i][2]) or (numeric and _approximate(text, content, i, i + n)):
            continue
        return not _hedged(span, gold, numeric)
    return False


def _bold_answers(text: str) -> list[str]:
    """The **bold** spans of ``text`` that are not labels ("**Answer:** Paris", "**Note**: ...")."""
    out = []
    for m in _BOLD_RE.finditer(text):
        span = (m.group(1) or m.group(2) or "").strip()
        if span and not span.endswith(":") and not text[m.end() :].lstrip().startswith(":"):
            out.append(span)
    return out


def judged_aliases(ground_truth: Any) -> list[str]:
    """:func:`aliases`, plus the value of an alias written as ``Label: value`` (DR-Venus's QA has "Capacity:
    13,186": the answer "13,186" states it)."""
    out = []
    for alias in aliases(ground_truth):
        out.append(alias)
        labelled = _LABELLED_RE.match(alias)
        if labelled:
            out.append(labelled.group(1).strip())
    return list(dict.fromkeys(out))


def states_answer(prediction: Any, ground_truth: Any) -> bool:
    """The strict offline judge: ``prediction`` states one of the ground truth's aliases (:func:`judged_aliases`).

    - A **bold** span (not a label) is the stated answer: one that states an alias is accepted, one that holds
      another candidate of the truth's kind (a name, a number) is refused, whatever the rest says;
    - else the whole text and its first line are judged (:func:`_states`): case, articles, punctuation, accents and
      markdown do not matter; partial names, namesakes one letter or syllable off, entities that only share a word
      with the truth, other years and hedges between candidates are refused;
    - a date is compared as a date ("March 5, 1931" states "5 March 1931" and "1931-03-05").
    """
    text = "" if prediction is None else str(prediction).strip()
    golds = judged_aliases(ground_truth)
    if not text or not golds:
        return False
    gold_dates = set().union(*(_dates(_fold(a)) for a in golds))
    if gold_dates:
        said = _dates(_fold(text))
        if said:
            return said <= gold_dates
    bold = _bold_answers(text)
    if bold:
        if any(_states(span, alias) for span in bold for alias in golds):
            return True
        numeric = all(all(t.isdigit() for t in answer_tokens(a)) for a in golds)
        if any(_candidates(span, numeric, set()) for span in bold):
            return False
    return any(_states(span, alias) for span in answer_spans(text) for alias in golds)
