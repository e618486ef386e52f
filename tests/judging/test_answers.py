"""Answer normalisation, aliases, exact match and token F1."""

from __future__ import annotations

import pytest

from venus_utils.judging import answers


@pytest.mark.parametrize(
    "text,expected",
    [
        ("The Eiffel Tower!", "eiffel tower"),
        ("**13,186** seats", "13186 seats"),
        ("1,234,567", "1234567"),
        ("2,3", "2 3"),
        ("Wal-Mart  Stores,\tInc.", "wal mart stores inc"),
        ("Ｔｏｋｙｏ", "tokyo"),  # NFKC
        ("北京大学", "北 京 大 学"),  # CJK characters are tokens
        ("an apple a day", "apple day"),
        ("snake_case", "snake case"),
        (None, ""),
    ],
)
def test_normalize(text, expected):
    assert answers.normalize_answer(text) == expected


def test_aliases():
    assert answers.aliases("a<|answer_split|> b <|answer_split|>a") == ["a", "b"]
    assert answers.aliases(["x", "y<|answer_split|>z"]) == ["x", "y", "z"]
    assert answers.aliases(None) == [] and answers.aliases("") == []
    assert answers.aliases(1805) == ["1805"]


def test_exact_match():
    assert answers.exact_match("the Beatles", "Beatles")
    assert answers.exact_match("Paris", "London<|answer_split|>Paris")
    assert not answers.exact_match("Paris, France", "Paris")
    assert not answers.exact_match("", "")
    assert not answers.exact_match("   ", "a")


def test_token_f1():
    assert answers.token_f1("Paris", "Paris") == 1.0
    assert answers.token_f1("Paris France", "Paris") == pytest.approx(2 / 3)
    assert answers.token_f1("Berlin", "Paris") == 0.0
    assert answers.token_f1("", "Paris") == 0.0
    assert answers.token_f1("d b c", "x<|answer_split|>b c") == pytest.approx(0.8)  # best alias
    assert answers.token_f1("b b c", "b c") == pytest.approx(0.8)
    assert answers.token_f1("b b c", "b c", set_based=True) == 1.0  # DR-Venus's token-set variant


def test_exact_answers_and_spans():
    assert answers.exact_answer("1805.", "1805") and answers.exact_answer("The answer is **1805**", "1805")
    assert not answers.exact_answer("It was founded in 1805 by Godwin.", "1805")  # exact: a sentence is refused
    assert not answers.exact_answer("It was 18050", "1805")
    assert answers.exact_tokens("The **Eiffel Tower**?") == ["eiffel", "tower", "?"]  # a question mark is kept
    text = "**Abdal Latif Sultan (also known as Afak Khan)** – the second son\nmore"
    assert answers.answer_spans(text) == [
        text,
        "Abdal Latif Sultan (also known as Afak Khan)",
        "**Abdal Latif Sultan (also known as Afak Khan)** – the second son",
    ]
    # DR-Venus's shared examples: correct answers phrased differently score >= 0.5 on their stated part
    for answer, gt in [
        ("**1805**  \n\nThe firm was founded in **1805** by Godwin.", "1805"),
        ("**13,186** (the official all-seated capacity).", "Capacity: 13,186"),
        ("It is **“Oh, the Mysterious”** (also known as **“Doubtful Victory”**).", "Doubtful Victory"),
        ("**Buffy the Vampire Slayer Season Eight** (commonly *Season Eight*).", "Buffy the Vampire Slayer comics"),
    ]:
        assert answers.best_span_f1(answer, gt) >= 0.5, (answer, gt)
    assert answers.best_span_f1("**Berlin** is the capital", "Paris") == 0.0
