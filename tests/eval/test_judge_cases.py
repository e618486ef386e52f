"""The offline judge refuses near misses and hedges and accepts aliases (issues 21 and 40): checked on a labelled set
built from a world's own entities (:mod:`venus_utils.world.judge_cases`, ~2,400 cases per world seed), every case
right, and on hand-written cases of each class."""

from __future__ import annotations

from collections import Counter

import pytest

from venus_utils.eval import answers
from venus_utils.eval import judge as J
from venus_utils.world.judge_cases import ACCEPT_KINDS, REFUSE_KINDS, labelled_cases


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_offline_judge_on_the_labelled_set(seed):
    cases = labelled_cases(seed)
    kinds = Counter(c["kind"] for c in cases)
    assert set(kinds) == set(ACCEPT_KINDS) | set(REFUSE_KINDS) and len(cases) >= 2000
    assert min(kinds.values()) >= 4, kinds  # every class is tried (a tiny world has 4 countries, 40 people)
    judge = J.Judge(api_base=None)
    verdicts = judge.judge_many([("q", c["answer"], c["ground_truth"]) for c in cases])
    wrong = [(c["kind"], c["answer"], c["ground_truth"]) for v, c in zip(verdicts, cases) if v.correct != c["verdict"]]
    assert not wrong, (len(wrong), wrong[:10])


def test_token_f1_would_fail_the_labelled_set():
    """Why the rule changed: F1 >= 0.5 accepts a first name alone, one-letter-off namesakes and shared stems."""
    cases = [c for c in labelled_cases(0) if not c["verdict"]]
    accepted = Counter(c["kind"] for c in cases if answers.best_span_f1(c["answer"], c["ground_truth"]) >= 0.5)
    assert accepted["first_name"] > 0 and accepted["one_letter_off"] > 0 and accepted["shared_stem"] > 0


@pytest.mark.parametrize(
    "answer,truth,verdict",
    [
        ("Kosa Midor", "Kosa Midor<|answer_split|>Midor", True),
        ("Midor", "Kosa Midor<|answer_split|>Midor", True),
        ("kosa midor.", "Kosa Midor", True),
        ("The answer is **Kosa Midor**.", "Kosa Midor", True),
        ("Kosa Midor, a chemist", "Kosa Midor", True),
        ("In Naduia.", "Naduia<|answer_split|>Republic of Naduia", True),
        ("the Republic of Naduia", "Naduia<|answer_split|>Republic of Naduia", True),
        ("In 1985.", "1985", True),
        ("born on 3 May 1985", "1985", True),
        ("13,186", "13186", True),
        ("**13,186** (the official all-seated capacity)", "Capacity: 13,186", True),
        ("13,187", "Capacity: 13,186", False),
        ("Kosa", "Kosa Midor<|answer_split|>Midor", False),
        ("Kosa Mider", "Kosa Midor<|answer_split|>Midor", False),
        ("Lena Midor", "Kosa Midor<|answer_split|>Midor", False),
        ("Rozan Labs", "Rozan Foundry<|answer_split|>Rozan", False),
        ("Naduia City", "Naduia<|answer_split|>Republic of Naduia", False),
        ("1958", "1985", False),
        ("1985 or 1958", "1985", False),
        ("**Kosa Mider** (not Kosa Midor)", "Kosa Midor", False),
        ("", "Kosa Midor", False),
        # hedges and lists name other candidates beside the truth
        ("Paris or Rome", "Paris", False),
        ("Rome or Paris", "Paris", False),
        ("Rome, Paris, Berlin", "Paris", False),
        ("A, B, C, Paris", "Paris", False),
        ("It is not Paris, it is Rome", "Paris", False),
        ("12 or 112", "12", False),
        ("Paris/Rome", "Paris", False),
        ("In 1958, then 1985", "1985", False),
        # ordinary correct answers
        ("Paris, France", "Paris", True),
        ("Kosa Midor (born 1931)", "Kosa Midor", True),
        ("Kosa Midor, a chemist, born 1931", "Kosa Midor", True),
        ("Kosa Midor is not a chemist but a painter", "Kosa Midor", True),
        ("13,186 seats", "13186", True),
        ("**Answer:** Paris", "Paris", True),
        ("**Final answer**: Kosa Midor", "Kosa Midor", True),
        ("Kosa Midor (**born 1931**)", "Kosa Midor", True),
        ("Paris\n\n**Note**: the capital since 508", "Paris", True),
        ("March 5, 1931", "5 March 1931", True),
        ("1931-03-05", "5 March 1931", True),
        ("March 6, 1931", "5 March 1931", False),
        ("Dr. Kosa Midor", "Kosa Midor", True),
        ("President Kosa Midor", "Kosa Midor", True),
        ("Kosa Midor Jr.", "Kosa Midor", False),  # a suffix makes another person
        ("Probably Paris", "Paris", True),
        ("1931 (rebuilt 1958)", "1931", True),
        ("São Paulo", "Sao Paulo", True),
        ("The answer is Paris, or so the pages say", "Paris", True),
        ("I am not sure, but Paris", "Paris", True),
        # issue 40: hedges, ranges, negations and longer names in any letter case are refused
        ("paris or rome", "Paris", False),
        ("PARIS OR ROME", "Paris", False),
        ("rome, paris, berlin", "Paris", False),
        ("rome, paris", "Paris", False),
        ("either paris or rome", "Paris", False),
        ("kosa midor lena", "Kosa Midor", False),
        ("lena kosa midor", "Kosa Midor", False),
        ("lena midor", "Kosa Midor<|answer_split|>Midor", False),
        ("Kosa Midor III", "Kosa Midor", False),
        ("kosa midor jr", "Kosa Midor", False),
        ("Kosa Midor Sr.", "Kosa Midor", False),
        ("not Kosa Midor", "Kosa Midor", False),
        ("It isn't Paris.", "Paris", False),
        ("Never the Republic of Naduia", "Naduia<|answer_split|>Republic of Naduia", False),
        ("He was not born in Paris", "Paris", False),
        ("Paris (not Rome)", "Paris", False),  # names another candidate: refused, however it is meant
        ("1985\u20131987", "1985", False),
        ("1983-1985", "1985", False),
        ("1983 to 1985", "1985", False),
        ("between 1983 and 1985", "1985", False),
        ("from 1985 until 1990", "1985", False),
        ("around 1985", "1985", False),
        ("c. 1985", "1985", False),
        ("~1985", "1985", False),
        ("approximately 13,186", "13186", False),
        # ... while aliases still pass in any letter case and markdown
        ("KOSA MIDOR", "Kosa Midor", True),
        ("*Kosa Midor*", "Kosa Midor", True),
        ("_Paris_", "Paris", True),
        ("***Paris***", "Paris", True),
        ("the answer is paris.", "Paris", True),
        ("according to the pages, kosa midor.", "Kosa Midor", True),
        ("kosa midor was born in 1931", "Kosa Midor", True),
        ("Kosa Midor is not a chemist but a painter", "Kosa Midor", True),
        ("the republic of naduia", "Naduia<|answer_split|>Republic of Naduia", True),
        ("Founded in 1985.", "1985", True),
        ("1985 (the year the plant opened)", "1985", True),
    ],
)
def test_states_answer(answer, truth, verdict):
    assert answers.states_answer(answer, truth) is verdict


def test_the_stricter_rule_changes_no_kept_verdict():
    """Issue 40: ``offline-strict-2`` refuses hedges the first strict rule accepted. Re-judged, every answer kept in
    ``results/`` (about 20,000, all scored by ``offline-strict``) gets the same verdict: the trained models never gave
    such answers, so the kept figures stand under the stricter rule (a change to the rule that flips one shows it)."""
    from pathlib import Path

    import pandas as pd

    tables = sorted((Path(__file__).resolve().parents[2] / "results").rglob("*.parquet"))
    if not tables:
        pytest.skip("no kept results")
    judge, n, flipped = J.Judge(api_base=None), 0, []
    for path in tables:
        kept = pd.read_parquet(path, columns=["prediction", "answer", "correct", "judge"])
        kept = kept[kept["judge"] == "offline-strict"]
        verdicts = judge.judge_many([("q", p, a) for p, a in zip(kept["prediction"], kept["answer"])])
        n += len(kept)
        flipped += [
            (path.name, p) for p, c, v in zip(kept["prediction"], kept["correct"], verdicts) if bool(c) != v.correct
        ]
    assert n > 10_000 and not flipped, flipped[:10]
