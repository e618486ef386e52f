"""pass@k, per-question aggregation and the evaluation tables."""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from venus_utils.eval import metrics


def brute_force_pass_at_k(n, c, k):
    """Fraction of all k-subsets of n samples (c correct) that contain at least one correct sample."""
    samples = [1] * c + [0] * (n - c)
    subsets = list(combinations(range(n), k))
    return sum(any(samples[i] for i in s) for s in subsets) / len(subsets)


@pytest.mark.parametrize(
    "n,c,k", [(1, 0, 1), (1, 1, 1), (5, 1, 1), (5, 1, 3), (6, 2, 2), (8, 3, 5), (8, 0, 8), (8, 8, 1)]
)
def test_pass_at_k_matches_enumeration(n, c, k):
    assert metrics.pass_at_k(n, c, k) == pytest.approx(brute_force_pass_at_k(n, c, k))


def test_pass_at_1_is_the_mean_and_large_n_is_stable():
    assert metrics.pass_at_k(10, 3, 1) == pytest.approx(0.3)
    # comb(2000, 100) overflows floats; the product form does not
    value = metrics.pass_at_k(2000, 10, 100)
    assert 0 < value < 1 and math.isfinite(value)
    assert value == pytest.approx(1 - math.comb(1990, 100) / math.comb(2000, 100))


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))))
def test_pass_at_k_monotone_in_k_and_c(args):
    n, c, k = args
    v = metrics.pass_at_k(n, c, k)
    assert 0.0 <= v <= 1.0
    if k < n:
        assert metrics.pass_at_k(n, c, k + 1) >= v - 1e-12
    if c < n:
        assert metrics.pass_at_k(n, c + 1, k) >= v - 1e-12
    assert (v == 0.0) == (c == 0)


@pytest.mark.parametrize("n,c,k", [(0, 0, 1), (3, 4, 1), (3, -1, 1), (3, 1, 0), (3, 1, 4)])
def test_pass_at_k_rejects_bad_arguments(n, c, k):
    with pytest.raises(ValueError):
        metrics.pass_at_k(n, c, k)


def test_pass_at_k_rejects_floats():
    with pytest.raises(TypeError):
        metrics.pass_at_k(4.0, 1, 1)


def _scored():
    # q1: 4 samples, 2 correct; q2: 4 samples, 0 correct; q3: 4 samples, 4 correct
    rows = []
    for qid, source, outcomes in [
        ("q1", "nq", [1, 0, 1, 0]),
        ("q2", "nq", [0, 0, 0, 0]),
        ("q3", "hotpotqa", [1, 1, 1, 1]),
    ]:
        for s, ok in enumerate(outcomes):
            rows.append(
                {
                    "id": qid,
                    "source": source,
                    "sample": s,
                    "question": qid,
                    "correct": float(ok),
                    "em": float(ok),
                    "f1": 0.5 + 0.5 * ok,
                    "turns": 3 + 2 * ok + s,
                    "tool_call_count": 2 + ok,
                    "parse_error_count": 0,
                    "termination": "answered" if s < 3 else "max_steps",
                }
            )
    return pd.DataFrame(rows)


def test_per_question_and_pass_at_k_curve():
    scored = _scored()
    pq = metrics.question_counts(scored).set_index("id")
    assert pq.loc["q1", ["n", "c"]].tolist() == [4, 2]
    assert pq.loc["q3", "accuracy"] == 1.0
    curve = metrics.pass_at_k_curve(scored).set_index("k")["pass_at_k"]
    assert list(curve.index) == [1, 2, 3, 4]
    assert curve[1] == pytest.approx(6 / 12)
    expected_k2 = np.mean([brute_force_pass_at_k(4, 2, 2), 0.0, 1.0])
    assert curve[2] == pytest.approx(expected_k2)
    assert curve[4] == pytest.approx(2 / 3)
    by = metrics.pass_at_k_curve(scored, ks=[1, 2, 99], by="source")
    assert set(by["source"]) == {"nq", "hotpotqa"} and set(by["k"]) == {1, 2}


def test_tables_and_summary():
    scored = _scored()
    by_source = metrics.accuracy_by_source(scored)
    assert by_source.loc["nq", "questions"] == 2 and by_source.loc["nq", "accuracy"] == pytest.approx(2 / 8)
    assert by_source.loc["all", "samples"] == 12
    by_term = metrics.accuracy_by(scored, "termination")
    assert by_term.index.name == "termination" and by_term.loc["max_steps", "samples"] == 3
    term = metrics.termination_table(scored)
    assert term.loc["answered", "count"] == 9 and term["share"].sum() == pytest.approx(1.0)
    beh = metrics.behaviour_vs_correctness(scored)
    assert beh.loc["correct", ("turns", "mean")] > beh.loc["incorrect", ("turns", "mean")]
    summary = metrics.summarize(scored, ks=[1, 2, 4])
    assert summary["accuracy"] == pytest.approx(0.5)
    assert summary["n_questions"] == 3 and summary["n_samples"] == 12 and summary["samples_per_question"] == 4
    assert set(summary["pass_at_k"]) == {1, 2, 4} and summary["pass_at_k"][4] == pytest.approx(2 / 3)
    assert summary["terminations"] == {"answered": 9, "max_steps": 3}


def test_attach_answers_by_id_and_by_question():
    qa = pd.DataFrame(
        {"id": ["a", "b"], "question": ["Q A?", "Q B?"], "answer": ["x", "y"], "source": ["nq", "tq"], "hops": [2, 3]}
    )
    by_id = pd.DataFrame(
        {"id": ["b", "a", "zz"], "question": ["Q B?", "Q A?", "other"], "prediction": ["y", "no", "?"]}
    )
    out = metrics.attach_answers(by_id, qa)
    assert out["answer"].tolist() == ["y", "x"] and out["source"].tolist() == ["tq", "nq"]
    assert out["hops"].tolist() == [3, 2]
    assert out.attrs["dropped"] == {"no_ground_truth": 1}
    by_q = pd.DataFrame({"question": ["Q A?", "Q A?"], "prediction": ["x", "z"], "sample": [0, 1]})
    out = metrics.attach_answers(by_q, qa)
    assert out["id"].tolist() == ["a", "a"] and out.attrs["dropped"] == {"no_ground_truth": 0}
    with pytest.raises(ValueError, match="none of the 1 predictions"):
        metrics.attach_answers(pd.DataFrame({"question": ["unknown"], "prediction": ["x"]}), qa)


def test_score_uses_the_given_judge_and_answer_functions():
    table = pd.DataFrame({"question": ["q1", "q2"], "prediction": ["Paris", ""], "answer": ["paris", "Rome"]})
    calls = []

    def judge(questions, predictions, answers):
        calls.append((questions, predictions, answers))
        return [1.0, 0.0]

    out = metrics.score(
        table,
        judge=judge,
        exact_match=lambda p, g: p.lower() == g.lower(),
        token_f1=lambda p, g: 1.0 if p.lower() == g.lower() else 0.0,
    )
    assert out["em"].tolist() == [1.0, 0.0] and out["correct"].tolist() == [1.0, 0.0]
    assert calls == [(["q1", "q2"], ["Paris", ""], ["paris", "Rome"])]


def test_paper_comparison_keeps_the_paper_numbers_and_adds_the_run():
    from venus_utils.core.paper import PAPER_RESULTS

    table = metrics.paper_comparison("tiny (smoke)", {"world test": 0.25, "BrowseComp": 0.1})
    assert table.loc["DR-Venus-4B-RL", "BrowseComp"] == PAPER_RESULTS["DR-Venus-4B-RL"]["BrowseComp"]
    assert table.loc["tiny (smoke)", "world test"] == pytest.approx(25.0)
    assert table.loc["tiny (smoke)", "BrowseComp"] == pytest.approx(10.0)
    assert np.isnan(table.loc["DR-Venus-4B-RL", "world test"])


def test_plots_write_figures(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from venus_utils.eval import plots

    scored = _scored()
    figs = [
        plots.accuracy_by_source_bars(metrics.accuracy_by_source(scored), path=tmp_path / "by_source.png"),
        plots.pass_at_k_curves(
            metrics.pass_at_k_curve(scored, by="source"), hue="source", path=tmp_path / "passk.png"
        ),
        plots.turns_vs_correctness(scored, path=tmp_path / "turns.png"),
        plots.terminations(metrics.termination_table(scored), path=tmp_path / "term.png"),
    ]
    for name in ("by_source", "passk", "turns", "term"):
        assert (tmp_path / f"{name}.png").stat().st_size > 1000
    line = figs[1].axes[0].get_lines()[0]
    assert list(line.get_xdata()) == [1, 2, 3, 4]
    for fig in figs:
        plt.close(fig)


def test_score_with_the_project_judge_offline():
    from venus_utils.judging.judge import Judge

    judge = Judge.from_env("offline")
    table = pd.DataFrame(
        {
            "question": ["q1", "q2", "q3", "q4"],
            "prediction": ["The Eiffel", "", "**Rome** is it", "The answer is **Rome**."],
            "answer": ["Paris<|answer_split|>the Eiffel", "x", "Rome", "Rome"],
        }
    )
    out = metrics.score(table, judge=judge)
    assert out["correct"].tolist() == [1.0, 0.0, 0.0, 1.0]  # exact: "**Rome** is it" says more than the answer
    assert out["em"].tolist() == [1.0, 0.0, 0.0, 0.0]
    assert out["judge_method"].tolist() == ["exact", "empty", "offline", "exact"]


def test_interval_bars_are_labelled_with_each_models_own_n_and_the_legend_sits_outside():
    """Issue 23: notebook 03 labelled the after-SFT bars (n = 600) with the before-SFT n (30), the first table's."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from venus_utils.eval import plots

    def table(rows):
        return pd.DataFrame(rows, columns=["group", "value", "accuracy", "ci_low", "ci_high", "n"])

    before = table([("all", "all", 0.0, 0.0, 0.1, 30), ("hops", "2", 0.0, 0.0, 0.2, 10)])
    after = table(
        [("all", "all", 0.5, 0.4, 0.6, 600), ("hops", "2", 0.6, 0.5, 0.7, 200), ("hops", "3", 0.4, 0.3, 0.5, 400)]
    )
    same = table([("all", "all", 0.4, 0.3, 0.5, 600)])
    fig = plots.accuracy_intervals({"before": before, "after": after})
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == [
        "all\n(n=30 / 600)",
        "hops=2\n(n=10 / 200)",
        "hops=3\n(n=- / 400)",
    ]
    fig.canvas.draw()
    legend = ax.get_legend().get_window_extent()
    assert legend.x0 >= ax.get_window_extent().x1  # beside the axes, not over the bars
    plt.close(fig)
    fig = plots.accuracy_intervals({"SFT": same, "RL": same})
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["all\n(n=600)"]
    plt.close(fig)
