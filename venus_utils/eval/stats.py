"""Statistics a reviewer accepts for agent accuracies, from SciPy rather than hand-rolled formulas.

- :func:`accuracy_ci`: an accuracy with its n and a 95% Wilson score interval (``scipy.stats.binomtest``).
- :func:`paired_comparison`: two models on the same questions: the paired difference with a 95% bootstrap interval
  over questions (``scipy.stats.bootstrap``, paired by construction: each resample draws whole questions), the
  exact McNemar p-value (a two-sided binomial test on the discordant questions, which is what the exact McNemar
  test is) and the fixed / broken / unchanged counts.
- :func:`accuracy_table` and :func:`comparison_table`: the same as tables, overall and by breakdown columns
  (sub-world, hops...), each row with its own interval.  Notebooks 03, 04 and 05 show these tables.

Inputs are per-question correctness (one greedy answer per question, or the mean over samples rounded to a
majority for the paired test); see :mod:`venus_utils.eval.heldout`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

LEVEL = 0.95
ALPHA = 0.05


def accuracy_ci(correct: Sequence[bool] | Sequence[float], level: float = LEVEL) -> dict:
    """``{n, correct, accuracy, ci_low, ci_high}`` of 0/1 outcomes (Wilson score interval)."""
    from scipy.stats import binomtest

    values = [bool(round(float(c))) for c in correct]
    n, k = len(values), int(sum(values))
    if n == 0:
        return {"n": 0, "correct": 0, "accuracy": None, "ci_low": None, "ci_high": None}
    ci = binomtest(k, n).proportion_ci(confidence_level=level, method="wilson")
    return {"n": n, "correct": k, "accuracy": k / n, "ci_low": float(ci.low), "ci_high": float(ci.high)}


def mcnemar_exact(fixed: int, broken: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts (1.0 when there are none)."""
    from scipy.stats import binomtest

    if fixed + broken == 0:
        return 1.0
    return float(binomtest(fixed, fixed + broken, 0.5).pvalue)


def paired_comparison(before: pd.Series, after: pd.Series, level: float = LEVEL, seed: int = 0) -> dict:
    """``before`` and ``after``: per-question correctness indexed by question id.  Only questions both scored are
    compared.  Returns n, both accuracies, the difference (after - before) with its bootstrap interval, the
    fixed / broken / both-right / both-wrong counts, the exact McNemar p-value, a plain verdict, and
    ``detectable_difference``: the smallest difference this design detects with 80% power at the 5% level
    (:func:`detectable_difference`): a "no difference" with a detectable difference of 0.05 says nothing about 0.02."""
    from scipy.stats import bootstrap

    both = pd.concat([before.rename("a"), after.rename("b")], axis=1, join="inner").astype(float).round().astype(bool)
    n = len(both)
    a, b = both["a"].to_numpy(), both["b"].to_numpy()
    fixed, broken = int((~a & b).sum()), int((a & ~b).sum())
    diff = b.astype(float) - a.astype(float)
    mean = float(diff.mean()) if n else None
    if n > 1 and diff.std() > 0:
        res = bootstrap(
            (diff,),
            np.mean,
            confidence_level=level,
            n_resamples=9999,
            method="percentile",
            random_state=np.random.default_rng(seed),
        )
        low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    else:
        low = high = mean
    p = mcnemar_exact(fixed, broken)
    if not n:
        verdict = "no common questions"
    elif p < ALPHA:
        verdict = "improvement" if fixed > broken else "regression"
    else:
        verdict = "no significant difference (noise)"
    return {
        "n": n,
        "accuracy_before": float(a.mean()) if n else None,
        "accuracy_after": float(b.mean()) if n else None,
        "difference": mean,
        "diff_ci_low": low,
        "diff_ci_high": high,
        "fixed": fixed,
        "broken": broken,
        "both_right": int((a & b).sum()),
        "both_wrong": int((~a & ~b).sum()),
        "mcnemar_p": p,
        "verdict": verdict,
        "detectable_difference": detectable_difference(n, fixed + broken),
    }


def seed_level(differences: Sequence[float], level: float = LEVEL) -> dict:
    """The seed as the unit: one paired difference per seed (e.g. RL - SFT accuracy of each seed's run), their mean
    with a t-interval over seeds (df = seeds - 1) and the one-sample t-test's p, and a sign count with its exact
    two-sided binomial p (ties left out).  Beside the question-pooled McNemar test, which treats every question of
    every seed as independent, this asks whether the gain holds from seed to seed."""
    from scipy.stats import binomtest, t, ttest_1samp

    if any(x is None or x != x for x in differences):
        raise ValueError(f"seed-level statistics: a seed has no difference ({list(differences)}): no common questions")
    d = np.asarray([float(x) for x in differences], dtype=float)
    k = len(d)
    positive, negative = int((d > 0).sum()), int((d < 0).sum())
    out = {
        "seeds": k,
        "mean_difference": float(d.mean()) if k else None,
        "seed_sd": float(d.std(ddof=1)) if k > 1 else None,
        "seed_ci_low": None,
        "seed_ci_high": None,
        "seed_t_p": None,
        "positive": positive,
        "negative": negative,
        "sign_p": float(binomtest(positive, positive + negative).pvalue) if positive + negative else None,
    }
    if k > 1:
        se = out["seed_sd"] / np.sqrt(k)
        half = float(t.ppf(0.5 + level / 2, k - 1) * se)
        out["seed_ci_low"], out["seed_ci_high"] = out["mean_difference"] - half, out["mean_difference"] + half
        out["seed_t_p"] = float(ttest_1samp(d, 0.0).pvalue) if se > 0 else (0.0 if out["mean_difference"] else 1.0)
    return out


def detectable_difference(n: int, discordant: int, alpha: float = ALPHA, power: float = 0.8) -> float | None:
    """The smallest paired difference in accuracy that McNemar's test on ``n`` questions detects with ``power`` at
    level ``alpha`` (two-sided), for the observed share of questions the two models answer differently
    (normal approximation, Connor 1987: ``(z_{1-alpha/2} + z_power) * sqrt(discordant share / n)``; the share is
    taken as at least one question).  None without questions."""
    if n <= 0:
        return None
    from scipy.stats import norm

    share = max(discordant, 1) / n
    return float((norm.ppf(1 - alpha / 2) + norm.ppf(power)) * math.sqrt(share / n))


def _groups(table: pd.DataFrame, by: Iterable[str]):
    yield "all", "all", table
    for col in by:
        if col in table:
            for value, part in table.groupby(col, sort=True):
                yield col, value, part


def accuracy_table(
    scored: pd.DataFrame, by: Iterable[str] = ("subworld", "hops"), key: str = "correct"
) -> pd.DataFrame:
    """Accuracy with n and 95% interval overall and per value of each ``by`` column of a per-question table."""
    rows = [
        {"group": col, "value": str(value), **accuracy_ci(part[key].tolist())}
        for col, value, part in _groups(scored, by)
    ]
    return pd.DataFrame(rows).round({"accuracy": 4, "ci_low": 4, "ci_high": 4})


def comparison_table(
    before: pd.DataFrame,
    after: pd.DataFrame,
    by: Iterable[str] = ("subworld", "hops"),
    id_col: str = "id",
    key: str = "correct",
) -> pd.DataFrame:
    """:func:`paired_comparison` overall and per value of each ``by`` column (taken from ``after``)."""
    b = before.set_index(id_col)[key]
    rows = []
    for col, value, part in _groups(after, by):
        rows.append({"group": col, "value": str(value), **paired_comparison(b, part.set_index(id_col)[key])})
    return pd.DataFrame(rows)
