"""A pre-registered study of several seeds, read as it was registered: every pair of models in every seed's run, pooled
by question and with the seed as the unit, on the headline slice, and the decision rule applied to those numbers.

The rule (docs/experiments.md names the one each study registered, with its numbers, before its seeds ran):

1. SFT answers the headline slice within ``sft_band`` on at least ``band_seeds`` of the seeds (a seed outside it is
   reported, not dropped); 1b. SFT at its plateau: more SFT for the RL arm's compute gains at most
   ``plateau_margin`` over SFT, pooled.
2. RL teaches what a cheaper way to spend its compute does not if the better RL arm (the one whose smallest pooled
   lead over the cheaper arms is the largest) beats **each** of them (2: more SFT, the control; 2b: rejection-sampling
   fine-tuning, where the runs have it) by at least ``margin`` pooled with McNemar p < ``alpha``, with a positive
   difference on at least ``positive_seeds`` seeds and a seed-level 95% interval above zero.
3. IGPO against GRPO: the pooled paired difference with the smallest difference the test detects.

``python -m venus_utils.eval study RUNS [--sft-band 0.2,0.7] [--plateau-margin 0.03] [--json F] [--markdown]``
prints the table the README's headline copies (one row per seed, the pooled row, the seed-level row; ``--markdown``:
as a Markdown table) and the decision.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ..core.io import read_json
from ..core.profiles import load_profile
from ..core.stage import SUMMARY
from .heldout import CONTROL, HEADLINE, RFT, SCORED, SEEDS_ROW, arm_pairs, compare_runs

IGPO, GRPO = "RL (IGPO)", "RL (GRPO)"
POOLED = "pooled"
#: the columns that count (questions, seeds): ints, though a table that mixes rows makes them floats
COUNTS = ("n", "fixed", "broken", "both_right", "both_wrong", "seeds", "positive", "negative")


@dataclass(frozen=True)
class Rule:
    """The registered decision rule's numbers (the defaults: the study of seeds 20-25; the study of seeds 30-35
    registered ``sft_band=(0.2, 0.7)`` and ``plateau_margin=0.03``)."""

    sft_band: tuple[float, float] = (0.2, 0.6)
    band_seeds: int = 5
    margin: float = 0.05
    alpha: float = 0.05
    positive_seeds: int = 5
    plateau_margin: float | None = None  # 1b, where a study registered it (seeds 30-35: 0.03): more SFT - SFT <= this


def seed_of(run: str | Path) -> str:
    """The seed a run folder names in its ``profile.yaml`` (kept by ``eval keep``), else the folder's name."""
    path = Path(run) / "profile.yaml"
    if path.is_file():
        seed = load_profile(path).shared.get("seed")
        if seed is not None:
            return str(seed)
    return Path(run).name


def models_in(runs: Sequence[str | Path], arms: Sequence[str] | None = None) -> list[str]:
    """The models (:data:`~venus_utils.eval.heldout.SCORED` labels) the study reads: ``arms`` when named (each run must
    have each), else every model any run has, which every run must then have: a run that lacks a model the others have
    (its folder missing, unreadable, a symlink loop) is an error naming the run and the model, never a model dropped
    for all seeds in silence.  The untrained model (``base``, asked a few questions) is not an arm and is not read."""
    have = {str(run): {label for label in SCORED if _readable(Path(run) / SCORED[label])} for run in runs}
    if arms is not None:
        unknown = [a for a in arms if a not in SCORED]
        if unknown or not arms:
            raise ValueError(f"--arms {', '.join(unknown) or '(none)'}: choose among {', '.join(SCORED)}")
        wanted = set(arms)
    else:
        wanted = set().union(*have.values()) - {"base"}
    for run, labels in have.items():
        lacking = [label for label in SCORED if label in wanted and label not in labels]
        if lacking:
            others = "named with --arms" if arms is not None else "the other runs have"
            raise ValueError(
                f"{run}: no held-out results of {', '.join(lacking)} ({', '.join(SCORED[x] for x in lacking)}, "
                f"missing or unreadable), which {others}: restore them, or name the arms every run has with --arms"
            )
    return [label for label in SCORED if label in wanted]


def _readable(path: Path) -> bool:
    try:
        return path.is_file() and path.stat().st_size > 0
    except OSError:  # a symlink loop, a folder that cannot be read
        return False


def study(runs: Sequence[str | Path], arms: Sequence[str] | None = None) -> dict[str, Any]:
    """Every pair of :func:`~venus_utils.eval.heldout.arm_pairs` of the models :func:`models_in` reads, on the headline
    slice (hard/heldout; every question where a world has no hard tier): per seed, pooled by question and with the
    seed as the unit (:func:`~venus_utils.eval.heldout.compare_runs`' rows), keyed ``"<model> vs <baseline>"``."""
    runs = [Path(run) for run in runs]  # "results/x/" and "results/x" name one run (compare_runs' rows name it so)
    if len(runs) < 2:
        raise ValueError("a study pools two or more runs (one per seed)")
    labels = models_in(runs, arms)
    pairs = arm_pairs(labels)
    if not pairs:
        raise FileNotFoundError(f"the runs share no pair of models to compare (they all have: {labels or 'none'})")
    seeds = {str(run): seed_of(run) for run in runs}
    comparisons = {}
    for baseline, model in pairs:
        table = compare_runs(runs, baseline, model)
        slice_ = HEADLINE if (table["slice"] == HEADLINE).any() else "all"
        rows = table[table["slice"] == slice_]
        if slice_ == HEADLINE and rows["run"].isin(seeds).sum() < len(runs):
            missing = sorted(set(seeds) - set(rows["run"]))
            raise ValueError(
                f"{', '.join(missing)}: no {HEADLINE} questions; the study's slice needs them in every run"
            )
        out = {}
        for row in rows.to_dict("records"):
            key = seeds.get(row["run"], row["run"])
            kept = {k: v for k, v in row.items() if k not in ("run", "slice") and not _missing(v)}
            out[key] = {k: int(v) if k in COUNTS else v for k, v in kept.items()}
        comparisons[f"{model} vs {baseline}"] = {"baseline": baseline, "model": model, "slice": slice_, "rows": out}
    return {
        "runs": [str(run) for run in runs],
        "seeds": list(seeds.values()),
        "models": labels,
        "pairs": comparisons,
        "untrained": untrained_arms(runs, labels),
        "compute": compute_ratios(runs, labels),
    }


def arm_summary(run: Path, label: str) -> dict[str, Any]:
    """The ``summary.json`` beside an arm's held-out table in ``run`` ({} where it is missing or unreadable)."""
    summary = (run / SCORED[label]).parent / SUMMARY
    try:
        return read_json(summary) if summary.is_file() else {}
    except (OSError, ValueError):
        return {}


def arm_flops(run: Path, label: str) -> float | None:
    """The model FLOPs an arm of ``run`` counted (its ``summary.json``'s ``train_flops``; an RL arm's question filter
    too, its ``rl_questions``' ``flops``), None where it recorded none (runs made before the count existed)."""
    record = arm_summary(run, label)
    if not record.get("train_flops"):
        return None
    return float(record["train_flops"]) + float((record.get("rl_questions") or {}).get("flops") or 0.0)


def compute_ratios(runs: Sequence[Path], labels: Sequence[str]) -> dict[str, dict[str, float]]:
    """Per seed, each trained arm's counted model FLOPs as a multiple of the IGPO arm's (:func:`arm_flops`: what the
    cheaper arms were matched to), where both were counted; {} without an IGPO arm."""
    if IGPO not in labels:
        return {}
    out = {}
    for run in runs:
        reference = arm_flops(run, IGPO)
        if not reference:
            continue
        ratios = {}
        for label in labels:
            flops = arm_flops(run, label) if label not in ("base", "SFT", IGPO) else None
            if flops is not None:
                ratios[label] = round(flops / reference, 3)
        out[seed_of(run)] = ratios
    return out


def untrained_arms(runs: Sequence[Path], labels: Sequence[str]) -> list[str]:
    """One line per arm of a run that trained no step and was scored as the SFT model it started from (rejection
    sampling that kept no right answer says so in its ``summary.json``): its row in the study is the SFT model's."""
    lines = []
    for run in runs:
        for label in labels:
            if label in ("base", "SFT"):
                continue
            record = arm_summary(run, label)
            if record.get("steps") == 0:
                why = record.get("note") or "it trained no step"
                lines.append(f"seed {seed_of(run)}: {label}: {why} (its row is the SFT model's answers)")
    return lines


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and value != value)


def decide(result: dict[str, Any], rule: Rule = Rule()) -> dict[str, Any]:
    """The registered rule applied to :func:`study`'s numbers: each criterion with its figures and whether it holds,
    and the verdict in words."""
    pairs, seeds = result["pairs"], result["seeds"]
    out: dict[str, Any] = {"rule": asdict(rule)}
    lines = []
    sft = next((p for p in pairs.values() if p["baseline"] == "SFT"), None)
    if sft:
        accuracy = {s: sft["rows"][s]["accuracy_before"] for s in seeds}
        low, high = rule.sft_band
        inside = [s for s, a in accuracy.items() if low <= a <= high]
        holds = len(inside) >= rule.band_seeds
        out["sft_band"] = {"accuracy": accuracy, "inside": len(inside), "of": len(seeds), "holds": holds}
        outside = ", ".join(f"seed {s}: {a:.3f}" for s, a in accuracy.items() if s not in inside)
        lines.append(
            f"1. SFT within {low}-{high} on {len(inside)} of {len(seeds)} seeds (needed {rule.band_seeds}): "
            + ("holds" if holds else "does not hold")
            + (f" (outside: {outside})" if outside else "")
        )
    plateau = pairs.get(f"{CONTROL} vs SFT")
    if plateau and rule.plateau_margin is not None:
        gain = plateau["rows"][POOLED]
        holds = gain["difference"] <= rule.plateau_margin
        out["plateau"] = {"pooled": gain, "margin": rule.plateau_margin, "holds": holds}
        lines.append(
            f"1b. SFT at its plateau (more SFT - SFT pooled <= {rule.plateau_margin:+.2f}): "
            f"{gain['difference']:+.3f} [{gain['diff_ci_low']:+.3f}, {gain['diff_ci_high']:+.3f}], "
            f"p = {gain['mcnemar_p']:.2g}: " + ("holds" if holds else "does not hold: more SFT still helps")
        )
    cheaper = {
        label: {p["model"]: p["rows"] for p in pairs.values() if p["baseline"] == label} for label in (CONTROL, RFT)
    }
    cheaper = {label: arms for label, arms in cheaper.items() if arms}
    if cheaper:
        # the better RL arm: the one whose smallest pooled lead over the cheaper arms is the largest
        arms = sorted(set.intersection(*(set(a) for a in cheaper.values())))
        best = max(arms, key=lambda m: min(c[m][POOLED]["difference"] for c in cheaper.values()))
        for number, (label, against) in zip(("2", "2b"), cheaper.items()):
            key = "rl_vs_control" if label == CONTROL else "rl_vs_rft"
            out[key], line = _beats(against[best], best, label, rule)
            lines.append(f"{number}. {line}")
        verdicts = [out[k]["verdict"] for k in ("rl_vs_control", "rl_vs_rft") if k in out]
        out["verdict"] = "; ".join(verdicts)
    duel = pairs.get(f"{IGPO} vs {GRPO}")
    if duel:
        pooled = duel["rows"][POOLED]
        ahead = "IGPO ahead" if pooled["difference"] > 0 else "GRPO ahead" if pooled["difference"] < 0 else "even"
        decided = pooled["mcnemar_p"] < rule.alpha
        out["igpo_vs_grpo"] = {"pooled": pooled, "seeds": duel["rows"][SEEDS_ROW], "decided": decided}
        lines.append(
            f"3. IGPO against GRPO: {pooled['difference']:+.3f} [{pooled['diff_ci_low']:+.3f}, "
            f"{pooled['diff_ci_high']:+.3f}], p = {pooled['mcnemar_p']:.2g}, detectable difference "
            f"{pooled.get('detectable_difference', float('nan')):.3f}: "
            + (ahead if decided else f"not told apart ({ahead})")
        )
    out["lines"] = lines
    return out


def _beats(rows: dict[str, Any], best: str, label: str, rule: Rule) -> tuple[dict[str, Any], str]:
    """Criterion 2 against one cheaper arm (``label``: more SFT, rejection sampling): ``rows`` the better RL arm's
    comparison with it; returns its record (figures, each check, whether it holds, the verdict) and its line."""
    pooled, level = rows[POOLED], rows[SEEDS_ROW]
    checks = {
        "margin": pooled["difference"] >= rule.margin,
        "mcnemar": pooled["mcnemar_p"] < rule.alpha,
        "positive_seeds": level["positive"] >= rule.positive_seeds,
        "seed_interval": level["seed_ci_low"] is not None and level["seed_ci_low"] > 0,
    }
    teaches = all(checks.values())
    if teaches:
        verdict = f"RL teaches what {label} does not"
    elif pooled["difference"] < 0 and pooled["mcnemar_p"] < rule.alpha:
        verdict = f"{label} for the same compute does better than RL"
    elif pooled["mcnemar_p"] >= rule.alpha:
        verdict = f"RL and {label} are not told apart (undecided)"
    else:
        verdict = f"RL is ahead of {label}, but not by the registered margin and consistency"
    record = {"better_arm": best, "pooled": pooled, "seeds": level, "checks": checks, "holds": teaches}
    line = (
        f"better RL arm against {label}: {best} {pooled['difference']:+.3f} "
        f"[{pooled['diff_ci_low']:+.3f}, {pooled['diff_ci_high']:+.3f}] pooled (n = {pooled['n']}, "
        f"p = {pooled['mcnemar_p']:.2g}, {pooled['fixed']} fixed / {pooled['broken']} broken); per seed "
        f"positive on {level['positive']} of {level['seeds']}, seed-level mean {level['mean_difference']:+.3f} "
        f"[{_fmt(level['seed_ci_low'])}, {_fmt(level['seed_ci_high'])}]: {verdict}"
    )
    return {**record, "verdict": verdict}, line


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.3f}"


def headline_table(result: dict[str, Any]) -> pd.DataFrame:
    """The README's headline: one row per seed, then the pooled and the seed-level rows; the accuracy of every model
    on the slice and each model's difference against SFT and against the control (``"+0.117*"``: McNemar p < 0.05
    in that seed)."""
    pairs, seeds = result["pairs"], result["seeds"]
    rows = []
    for key in [*seeds, POOLED, SEEDS_ROW]:
        row: dict[str, Any] = {"seed": key}
        for pair in pairs.values():
            r = pair["rows"].get(key, {})
            if key != SEEDS_ROW:
                row.setdefault(pair["baseline"], _acc(r.get("accuracy_before")))
                row.setdefault(pair["model"], _acc(r.get("accuracy_after")))
        for pair in pairs.values():
            if pair["baseline"] not in ("SFT", CONTROL, RFT):
                continue
            r = pair["rows"].get(key, {})
            name = f"{pair['model']} − {pair['baseline']}"
            if key == SEEDS_ROW:
                row[name] = (
                    f"{r['mean_difference']:+.3f} [{_fmt(r['seed_ci_low'])}, {_fmt(r['seed_ci_high'])}], "
                    f"{r['positive']}+/{r['negative']}−"
                )
            else:
                star = "*" if r["mcnemar_p"] < Rule.alpha else ""
                row[name] = f"{r['difference']:+.3f}{star}"
        rows.append(row)
    return pd.DataFrame(rows).fillna("")


def markdown_table(table: pd.DataFrame) -> str:
    """``table`` (:func:`headline_table`) as the Markdown table the README copies: the pooled and seed-level rows
    named in words, every cell as printed (a ``|`` in a cell escaped)."""
    names = {POOLED: "pooled by question", SEEDS_ROW: "seed as the unit (mean, t-interval, sign count)"}
    columns = list(table.columns)

    def cell(value: Any) -> str:
        return str(value).replace("|", "\\|")

    lines = ["| " + " | ".join(map(cell, columns)) + " |", "|" + "---|" * len(columns)]
    for row in table.to_dict("records"):
        row = {**row, columns[0]: names.get(str(row[columns[0]]), row[columns[0]])}
        lines.append("| " + " | ".join(cell(row[c]) for c in columns) + " |")
    return "\n".join(lines)


def _acc(x: float | None) -> str:
    return "" if x is None else f"{x:.3f}"
