"""Answers: normalisation, aliases, exact match and token F1 (the one implementation of the project).

Ground truths may hold several acceptable answers joined by ``<|answer_split|>`` (DR-Venus's QA data), or
be a list of them; every metric takes the best alias.

Normalisation (SQuAD-style, made robust to what deep-research agents write): Unicode NFKC, thousands
separators inside numbers removed (``13,186`` -> ``13186``), lower-case, markdown emphasis and punctuation
dropped, articles (a / an / the) removed, CJK characters one token each.

:func:`states_answer` is the offline judge's rule: the answer must *state* an alias, not resemble one (token F1
accepts a first name alone, a namesake one letter off, a company sharing a word with the truth).
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable
from typing import Any

from ..protocol import split_aliases

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


def answer_tokens(text: Any) -> list[str]:
    """The normalised tokens of an answer."""
    if text is None:
        return []
    text = _THOUSANDS_RE.sub("", str(text))
    text = unicodedata.normalize("NFKC", text).lower()
    return [t for t in _TOKEN_RE.findall(text) if t not in ARTICLES]


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


def contains_answer(prediction: Any, ground_truth: Any) -> bool:
    """Whether some alias appears as a whole-token span of the prediction."""
    pred = f" {normalize_answer(prediction)} "
    return any(gold and f" {gold} " in pred for gold in map(normalize_answer, aliases(ground_truth)))


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
# The strict offline judge: an answer states an alias, near misses are refused


#: capitalised words that may stand next to a name without being part of it ("In Naduia.", "Answer: Kosa Midor")
_FUNCTION_WORDS = frozenset(
    "in at by from of on to for and or but is was are were it its he she they his her their this that "
    "answer final born founded located yes no so".split()
)
_JOINED_RE = re.compile(r"[\s\-'’.]*")  # what may join two words of one name ("Jean-Luc", "O'Neil", "J. Doe")


def _words(text: str) -> list[tuple[str, str, int, int]]:
    """``(normalised token, raw token, start, end)`` of each token of ``text`` (articles included)."""
    text = unicodedata.normalize("NFKC", _THOUSANDS_RE.sub("", text))
    return [(m.group(0).lower(), m.group(0), m.start(), m.end()) for m in _TOKEN_RE.finditer(text)], text


def _is_number(token: str) -> bool:
    return token.isdigit()


def _extends(text: str, inner: tuple, outer: tuple | None, numeric: bool) -> bool:
    """Whether ``outer`` (the word next to a match, or None) is part of the same name or number as ``inner``: joined
    to it by nothing but spaces, hyphens, apostrophes or dots, and a digit (for a number) or a capitalised word that
    is not a function word (for a name)."""
    if outer is None:
        return False
    gap = text[min(inner[3], outer[3]) : max(inner[2], outer[2])]
    if not _JOINED_RE.fullmatch(gap):
        return False
    if numeric:
        return outer[0].isdigit()
    return outer[1][:1].isupper() and outer[0] not in _FUNCTION_WORDS or outer[0].isdigit()


def _states(span: str, alias: str) -> bool:
    """Whether ``span`` states ``alias``: equal to it after normalisation, or containing it as a whole name (not
    inside a longer capitalised name, e.g. "Naduia" in "Naduia City"); a number must be the span's only number of its
    length (so "1985 or 1958" states neither)."""
    gold = answer_tokens(alias)
    if not gold:
        return False
    words, text = _words(span)
    content = [w for w in words if w[0] not in ARTICLES]
    if [w[0] for w in content] == gold:
        return True
    numeric = len(gold) == 1 and _is_number(gold[0])
    if numeric and any(_is_number(w[0]) and len(w[0]) == len(gold[0]) and w[0] != gold[0] for w in content):
        return False
    n = len(gold)
    for i in range(len(content) - n + 1):
        if [w[0] for w in content[i : i + n]] != gold:
            continue
        before = content[i - 1] if i > 0 else None
        after = content[i + n] if i + n < len(content) else None
        if not _extends(text, content[i], before, numeric) and not _extends(text, content[i + n - 1], after, numeric):
            return True
    return False


def stated_spans(prediction: Any) -> list[str]:
    """The spans an answer is judged by: its **bold** spans when it has any (the answer it highlights), else the
    whole text and its first line."""
    text = "" if prediction is None else str(prediction).strip()
    bold = [a or b for a, b in _BOLD_RE.findall(text)]
    spans = bold if any(b.strip() for b in bold) else answer_spans(text)
    return [s for s in dict.fromkeys(spans) if s.strip()]


_LABELLED_RE = re.compile(r"^\s*[^\W\d_][^:\d]{0,39}:\s*(\S.*)$")  # "Capacity: 13,186" -> "13,186"


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
    """The strict offline judge: ``prediction`` states one of the ground truth's aliases (:func:`_states` on
    :func:`stated_spans`, aliases from :func:`judged_aliases`).  Case, articles, punctuation and markdown do not
    matter; partial names, namesakes one letter or syllable off, entities that only share a word with the truth and
    other years are refused."""
    return any(_states(span, alias) for span in stated_spans(prediction) for alias in judged_aliases(ground_truth))
