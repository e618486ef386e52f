"""The offline judge refuses near misses and accepts aliases (issue 21): checked on a labelled set built from a
world's own entities (:mod:`venus_utils.world.judge_cases`), for three world seeds."""

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
    assert set(kinds) == set(ACCEPT_KINDS) | set(REFUSE_KINDS) and len(cases) >= 200
    judge = J.Judge(api_base=None)
    verdicts = judge.judge_many([("q", c["answer"], c["ground_truth"]) for c in cases])
    refused = [v.correct for v, c in zip(verdicts, cases) if not c["verdict"]]
    accepted = [v.correct for v, c in zip(verdicts, cases) if c["verdict"]]
    assert len(refused) >= 100 and len(accepted) >= 100
    wrong = [(c["kind"], c["answer"], c["ground_truth"]) for v, c in zip(verdicts, cases) if v.correct != c["verdict"]]
    assert 1 - sum(refused) / len(refused) >= 0.99, wrong[:10]
    assert sum(accepted) / len(accepted) >= 0.99, wrong[:10]


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
        ("Kosa Midor Jr.", "Kosa Midor", True),
        ("Probably Paris", "Paris", True),
        ("1931 (rebuilt 1958)", "1931", True),
        ("São Paulo", "Sao Paulo", True),
        ("The answer is Paris, or so the pages say", "Paris", True),
        ("I am not sure, but Paris", "Paris", True),
    ],
)
def test_states_answer(answer, truth, verdict):
    assert answers.states_answer(answer, truth) is verdict
