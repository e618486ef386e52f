"""Answers: normalisation, aliases, exact match and token F1 (the one implementation of the project).

Ground truths may hold several acceptable answers joined by ``<|answer_split|>`` (DR-Venus's QA data), or
be a list of them; every metric takes the best alias.

Normalisation (SQuAD-style, made robust to what deep-research agents write): Unicode NFKC, accents dropped,
thousands separators inside numbers removed (``13,186`` -> ``13186``), lower-case, markdown emphasis and
punctuation dropped, articles (a / an / the) removed, CJK characters one token each.

:func:`exact_answer` is the offline judge's rule (``offline-exact``): the answer, normalised, must EQUAL one of the
ground truth's aliases, as exact-match scoring does in Search-R1.  Its normalisation is the one above, except that
marks that qualify an answer (``? ~ ≈ < > ≤ ≥ ±``) and a minus sign before a number are kept, and that a leading "the
answer is" / "answer:" / "final answer:" is dropped from the answer; a whole-answer date is compared as a date.
Everything else is refused (token F1 accepts a first name alone, a namesake one letter off, a company sharing a word
with the truth; the earlier "states an alias" rules paid lists, words added to a name and hedges).
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
    """Best token F1 over :func:`answer_spans` and the aliases (recorded with a refused verdict, for audit only)."""
    return max((token_f1(span, ground_truth) for span in answer_spans(prediction)), default=0.0)


# ---------------------------------------------------------------------------------------------------------
# The offline judge: the answer, normalised, equals an alias (exact match, as Search-R1 scores)

#: marks that qualify an answer rather than punctuate it: kept, each a token of its own ("Paris?" asks, "~1985" and
#: "<1985" estimate)
QUALIFIERS = "?~\u2248<>\u2264\u2265\u00b1"
#: the judge's tokens: :data:`_TOKEN_RE`'s, a minus sign kept on a number that starts a word ("-5" is not "5") and
#: the :data:`QUALIFIERS`
_EXACT_TOKEN_RE = re.compile(rf"[{_CJK}]|(?:(?<![^\s(\[])-(?=\d))?[^\W_{_CJK}]+|[{QUALIFIERS}]")
#: the leading phrases dropped, after articles and punctuation: "the answer is", "answer:", "final answer:" ...
_ANSWER_PHRASES = (("final", "answer", "is"), ("final", "answer"), ("answer", "is"), ("answer",))
_LABELLED_RE = re.compile(r"^\s*[^\W\d_][^:\d]{0,39}:\s*(\S.*)$")  # "Capacity: 13,186" -> "13,186"
_MONTHS = {
    name: i
    for i, month in enumerate(
        "january february march april may june july august september october november december".split(), 1
    )
    for name in (month, month[:3], "sept" if i == 9 else month)
}
_DAY_RE = re.compile(r"(\d{1,2})(?:st|nd|rd|th)?")


def exact_tokens(text: Any) -> list[str]:
    """The offline judge's normalisation of ``text``, as tokens: :func:`_fold` (Unicode NFKC, accents dropped,
    thousands separators out of numbers), lower case, punctuation, markdown emphasis and whitespace dropped (but not
    the :data:`QUALIFIERS` ``? ~ ≈ < > ≤ ≥ ±`` nor a minus sign that starts a number), articles (a / an / the)
    removed."""
    if text is None:
        return []
    folded = _fold(str(text)).replace("\u2212", "-").lower()
    return [t for t in _EXACT_TOKEN_RE.findall(folded) if t not in ARTICLES]


def _answer_forms(text: Any) -> list[tuple[str, ...]]:
    """:func:`exact_tokens` of an answer, and the same without a leading "the answer is" / "answer:" / "final
    answer:" (any case, with or without a colon, in markdown or not)."""
    tokens = tuple(exact_tokens(text))
    forms = [tokens]
    for phrase in _ANSWER_PHRASES:
        if tokens[: len(phrase)] == phrase:
            forms.append(tokens[len(phrase) :])
            break
    return [f for f in forms if f]


def _date(tokens: tuple[str, ...]) -> tuple[int, int, int] | None:
    """``(year, month, day)`` when ``tokens`` are one full date and nothing else ("1931-03-05", "5 March 1931",
    "5th of March 1931", "March 5, 1931"), else None."""
    if len(tokens) == 4 and tokens[1] == "of":
        tokens = (tokens[0], *tokens[2:])
    if len(tokens) != 3:
        return None
    a, b, c = tokens
    if len(a) == 4 and a.isdigit() and b.isdigit() and c.isdigit() and len(b) <= 2 and len(c) <= 2:
        y, m, d = int(a), int(b), int(c)  # ISO
    elif _DAY_RE.fullmatch(a) and b in _MONTHS and len(c) == 4 and c.isdigit():
        y, m, d = int(c), _MONTHS[b], int(_DAY_RE.fullmatch(a).group(1))  # 5 March 1931
    elif a in _MONTHS and _DAY_RE.fullmatch(b) and len(c) == 4 and c.isdigit():
        y, m, d = int(c), _MONTHS[a], int(_DAY_RE.fullmatch(b).group(1))  # March 5, 1931
    else:
        return None
    return (y, m, d) if 1 <= m <= 12 and 1 <= d <= 31 else None


def judged_aliases(ground_truth: Any) -> list[str]:
    """:func:`aliases`, plus the value of an alias written as ``Label: value`` (DR-Venus's QA has "Capacity:
    13,186": the answer "13,186" equals it)."""
    out = []
    for alias in aliases(ground_truth):
        out.append(alias)
        labelled = _LABELLED_RE.match(alias)
        if labelled:
            out.append(labelled.group(1).strip())
    return list(dict.fromkeys(out))


def exact_answer(prediction: Any, ground_truth: Any) -> bool:
    """The offline judge (``offline-exact``): ``prediction`` is correct when, normalised, it EQUALS one of the ground
    truth's aliases (:func:`judged_aliases`), and nothing else is.

    The normalisation (:func:`exact_tokens`, on both sides): accents and Unicode forms folded, thousands separators
    dropped, letter case, articles, punctuation, markdown emphasis (``**x**``, ``__x__``, ``*x*``, ``_x_``, backticks)
    and surrounding whitespace; on the answer's side a leading "the answer is" / "answer:" / "final answer:" as well.
    Marks that qualify an answer are kept (``? ~ ≈ < > ≤ ≥ ±``: "Paris?" and "~1985" are refused).  A date is
    compared as a date when the whole answer is one date ("March 5, 1931" = "5 March 1931" = "1931-03-05").  A
    **bold** span is not looked into: "The answer is **Paris**." is accepted because emphasis and the leading phrase
    are dropped; "**Paris**, or maybe Lyon" is not.  So lists ("A and B", "A; B", a bulleted list), words before or
    after ("Northern A", "A Jr.", "A (painter)"), possessives ("A's brother"), hedges ("probably A", "A?"), ranges and
    estimates ("1983-1985", "c. 1985"), negations and sentences around the answer are all refused.
    """
    forms = _answer_forms(prediction)
    golds = {tuple(exact_tokens(a)) for a in judged_aliases(ground_truth)} - {()}
    if not forms or not golds:
        return False
    if any(form in golds for form in forms):
        return True
    gold_dates = {_date(g) for g in golds} - {None}
    return bool(gold_dates) and any(_date(form) in gold_dates for form in forms)
