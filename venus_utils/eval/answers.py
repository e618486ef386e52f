"""Answers: normalisation, aliases, exact match and token F1 (the one implementation of the project).

Ground truths may hold several acceptable answers joined by ``<|answer_split|>`` (DR-Venus's QA data), or
be a list of them; every metric takes the best alias.

Normalisation (SQuAD-style, made robust to what deep-research agents write): Unicode NFKC, thousands
separators inside numbers removed (``13,186`` -> ``13186``), lower-case, markdown emphasis and punctuation
dropped, articles (a / an / the) removed, CJK characters one token each.
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
