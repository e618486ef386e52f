"""The offline judge is exact: an answer is accepted only when, normalised, it equals an alias.  Checked on a labelled
set built from a world's own entities (:mod:`venus_utils.world.judge_cases`, ~6,450 cases per world seed), every case
right and every class present by name, on hand-written cases, and on every answer kept in ``results/`` (the flips the
rule change makes there are recorded in ``results/rejudge-offline-exact.json``)."""

from __future__ import annotations

import json
from collections import Counter
from functools import cache
from pathlib import Path

import pytest

from venus_utils.eval import heldout
from venus_utils.judging import answers
from venus_utils.judging import judge as J
from venus_utils.world.judge_cases import ACCEPT_KINDS, REFUSE_KINDS, labelled_cases

ROOT = Path(__file__).resolve().parents[2]

#: the classes the labelled set must hold, by name: the truth's aliases and what the normalisation takes away ...
ACCEPTED = (
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
#: ... and every way an answer says more, or less, than an alias
REFUSED = (
    *(
        f"list_{join}_{place}"
        for join in ("and", "semicolon", "comma", "or", "slash", "ampersand", "newline", "bullets")
        for place in ("first", "second")
    ),
    "candidate_list",
    "lower_candidate_list",
    "lower_hedge",
    "upper_hedge",
    "word_before",
    "city_of",
    "title",
    "longer_name",
    "lower_longer_name",
    "word_after",
    "city_named_like_country",
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
    "first_name",
    "one_letter_off",
    "one_syllable_off",
    "shared_surname",
    "lower_shared_surname",
    "shared_stem",
    "same_type",
)


@cache
def judged(seed: int) -> tuple[tuple[dict, bool], ...]:
    """The labelled cases of ``seed`` with the offline judge's verdict on each."""
    cases = labelled_cases(seed)
    verdicts = J.Judge(api_base=None).judge_many([("q", c["answer"], c["ground_truth"]) for c in cases])
    return tuple((c, v.correct) for c, v in zip(cases, verdicts))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_offline_judge_on_the_labelled_set(seed):
    cases = judged(seed)
    kinds = Counter(c["kind"] for c, _ in cases)
    assert set(kinds) == set(ACCEPT_KINDS) | set(REFUSE_KINDS) and len(cases) >= 6000
    assert min(kinds.values()) >= 4, kinds  # every class is tried (a tiny world has 4 countries, 40 people)
    assert all(c["verdict"] is (c["kind"] in ACCEPT_KINDS) for c, _ in cases)  # a class is accepted or refused
    wrong = [(c["kind"], c["answer"], c["ground_truth"]) for c, v in cases if v != c["verdict"]]
    assert not wrong, (len(wrong), wrong[:10])


@pytest.mark.parametrize("kind", ACCEPTED + REFUSED)
def test_every_class_is_labelled_and_judged_right(kind):
    """Each class by name: present in the labelled set with the right verdict, and judged right on every case."""
    assert kind in (ACCEPT_KINDS if kind in ACCEPTED else REFUSE_KINDS)
    cases = [(c, v) for c, v in judged(0) if c["kind"] == kind]
    assert cases, f"no {kind} case in the labelled set"
    assert all(c["verdict"] is (kind in ACCEPTED) for c, _ in cases)
    wrong = [c["answer"] for c, v in cases if v != c["verdict"]]
    assert not wrong, (kind, wrong[:5])


def test_the_lists_put_the_right_name_first_and_second():
    """``list_<join>_first`` cases start with an alias of the truth, ``list_<join>_second`` cases end with one."""
    for c, _ in judged(0):
        if c["kind"].startswith("list_"):
            tokens = answers.exact_tokens(c["answer"])
            golds = [answers.exact_tokens(a) for a in answers.aliases(c["ground_truth"])]
            place = c["kind"].rsplit("_", 1)[1]
            assert any((tokens[: len(g)] if place == "first" else tokens[-len(g) :]) == g for g in golds), c


def test_token_f1_would_fail_the_labelled_set():
    """Why the rule changed: F1 >= 0.5 accepts a first name alone, one-letter-off namesakes and shared stems."""
    cases = [c for c, _ in judged(0) if not c["verdict"]]
    accepted = Counter(c["kind"] for c in cases if answers.best_span_f1(c["answer"], c["ground_truth"]) >= 0.5)
    assert accepted["first_name"] > 0 and accepted["one_letter_off"] > 0 and accepted["shared_stem"] > 0


@pytest.mark.parametrize(
    "answer,truth,verdict",
    [
        # aliases, and what the normalisation takes away
        ("Kosa Midor", "Kosa Midor<|answer_split|>Midor", True),
        ("Midor", "Kosa Midor<|answer_split|>Midor", True),
        ("kosa midor.", "Kosa Midor", True),
        ("KOSA MIDOR", "Kosa Midor", True),
        ("  Kosa Midor \n", "Kosa Midor", True),
        ("The answer is **Kosa Midor**.", "Kosa Midor", True),
        ("The answer is **Paris**.", "Paris", True),
        ("the answer is paris", "Paris", True),
        ("The answer is: Paris", "Paris", True),
        ("Answer: Paris", "Paris", True),
        ("answer Paris", "Paris", True),
        ("Final answer: Paris", "Paris", True),
        ("FINAL ANSWER Paris", "Paris", True),
        ("**Answer:** Paris", "Paris", True),
        ("**Final answer**: Kosa Midor", "Kosa Midor", True),
        ("*Kosa Midor*", "Kosa Midor", True),
        ("_Paris_", "Paris", True),
        ("***Paris***", "Paris", True),
        ("__Paris__", "Paris", True),
        ("`Paris`", "Paris", True),
        ("the Republic of Naduia", "Naduia<|answer_split|>Republic of Naduia", True),
        ("the republic of naduia", "Naduia<|answer_split|>Republic of Naduia", True),
        ("São Paulo", "Sao Paulo", True),
        ("13,186", "13186", True),
        ("13,186", "Capacity: 13,186", True),  # the value of a "Label: value" alias
        ("Capacity: 13,186", "Capacity: 13,186", True),
        ("March 5, 1931", "5 March 1931", True),
        ("1931-03-05", "5 March 1931", True),
        ("5th of March 1931", "1931-03-05", True),
        ("Who Are You?", "Who Are You?", True),  # a question mark in the alias itself
        ("-5", "-5", True),
        ("Answer Me", "Answer Me", True),  # an alias that starts like the answer phrase
        # lists, with the right name first or second, in every joining form
        ("Paris and Lyon", "Paris", False),
        ("Lyon and Paris", "Paris", False),
        ("Paris; Lyon", "Paris", False),
        ("Paris, Lyon", "Paris", False),
        ("Paris or Rome", "Paris", False),
        ("Paris/Rome", "Paris", False),
        ("Paris & Rome", "Paris", False),
        ("Paris\nRome", "Paris", False),
        ("- Paris\n- Rome", "Paris", False),
        ("Rome, Paris, Berlin", "Paris", False),
        ("Kosa Midor and Lena Midor", "Kosa Midor<|answer_split|>Midor", False),
        # words added before or after, possessives
        ("Northern Naduia", "Naduia<|answer_split|>Republic of Naduia", False),
        ("city of Naduia", "Naduia<|answer_split|>Republic of Naduia", False),
        ("Naduia City", "Naduia<|answer_split|>Republic of Naduia", False),
        ("Kosa Midor Jr.", "Kosa Midor", False),
        ("Kosa Midor (painter)", "Kosa Midor", False),
        ("Dr. Kosa Midor", "Kosa Midor", False),
        ("Kosa Midor's brother", "Kosa Midor", False),
        ("Kosa Midor's", "Kosa Midor", False),
        ("Paris, France", "Paris", False),
        ("13,186 seats", "13186", False),
        # hedges, negations, more said than the answer
        ("probably Paris", "Paris", False),
        ("not sure, maybe Paris", "Paris", False),
        ("Paris?", "Paris", False),
        ("I think Paris", "Paris", False),
        ("Paris, I believe", "Paris", False),
        ("not Kosa Midor", "Kosa Midor", False),
        ("It isn't Paris.", "Paris", False),
        ("**Paris**, or maybe Lyon", "Paris", False),
        ("**Paris** is the capital", "Paris", False),
        ("The answer is Paris, or so the pages say", "Paris", False),
        ("kosa midor was born in 1931", "Kosa Midor", False),
        ("In 1985.", "1985", False),
        ("Paris\n</think>\n\n<answer>\nParis", "Paris", False),  # the answer twice around leaked tags
        # numbers: ranges, estimates, other numbers
        ("1983-1985", "1985", False),
        ("1985\u20131987", "1985", False),
        ("between 1983 and 1985", "1985", False),
        ("around 1985", "1985", False),
        ("c. 1985", "1985", False),
        ("~1985", "1985", False),
        ("<1985", "1985", False),
        ("1958", "1985", False),
        ("13,187", "Capacity: 13,186", False),
        ("5", "-5", False),
        # dates: the whole answer one date, equal as a date
        ("March 6, 1931", "5 March 1931", False),
        ("born on March 5, 1931", "5 March 1931", False),
        ("1931", "5 March 1931", False),
        # near misses
        ("Kosa", "Kosa Midor<|answer_split|>Midor", False),
        ("Kosa Mider", "Kosa Midor<|answer_split|>Midor", False),
        ("Lena Midor", "Kosa Midor<|answer_split|>Midor", False),
        ("Rozan Labs", "Rozan Foundry<|answer_split|>Rozan", False),
        ("", "Kosa Midor", False),
        ("Paris", "", False),
    ],
)
def test_exact_answer(answer, truth, verdict):
    assert answers.exact_answer(answer, truth) is verdict
    if answer.strip():  # the judge agrees, by its exact-match shortcut or by refusing
        v = J.Judge(api_base=None).judge("q", answer, truth)
        assert (v.correct, v.method) == (verdict, "exact" if verdict else "offline")


def test_rejudging_every_kept_table_gives_the_recorded_flips():
    """Every answer kept in ``results/``, whichever rule scored it (``offline-strict``, ``offline-strict-2``), judged
    again by ``offline-exact``, table by table and without rewriting one: the verdicts that flip are exactly those
    recorded in ``results/rejudge-offline-exact.json`` (written by ``python -m venus_utils.eval rejudge results/*
    --dry-run --json results/rejudge-offline-exact.json``), so a later change of the rule that flips more shows."""
    import pandas as pd

    results = ROOT / "results"
    tables = sorted(results.rglob("*.parquet"))
    if not tables:
        pytest.skip("no kept results")
    before = {p: p.stat().st_mtime_ns for p in tables}
    judge = J.Judge(api_base=None)
    report = heldout.rejudge_report(sorted(p for p in results.iterdir() if p.is_dir()), judge, relative_to=ROOT)
    recorded = json.loads((results / f"rejudge-{J.OFFLINE_NAME}.json").read_text())
    assert report == recorded
    # every kept table another rule scored, and every such rule, was re-judged (tables the exact rule scored need
    # nothing); none was rewritten
    judged = {p: pd.read_parquet(p, columns=["judge"]) for p in tables}
    older = {p: t for p, t in judged.items() if (t["judge"] != J.OFFLINE_NAME).any()}
    kept = pd.concat(older.values())
    assert {r["table"] for r in report["tables"]} == {p.relative_to(ROOT).as_posix() for p in older}
    assert set(report["totals"]) == set(kept["judge"]) and sum(t["n"] for t in report["totals"].values()) == len(kept)
    assert {p: p.stat().st_mtime_ns for p in tables} == before
    assert report["judge"] == "offline-exact" and len(kept) > 30_000
