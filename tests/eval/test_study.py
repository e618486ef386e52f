"""A pre-registered multi-seed study read as registered (venus_utils.eval.study): the headline table and each
criterion of issue 40's decision rule, on synthetic runs whose answers are set question by question."""

from __future__ import annotations

import pandas as pd
import pytest

from venus_utils.core.io import read_json, write_jsonl
from venus_utils.eval import heldout as ho
from venus_utils.eval.__main__ import main
from venus_utils.eval.study import Rule, decide, headline_table, markdown_table, study

N = 100  # hard/heldout questions per seed; 20 easy ones beside them, outside the slice


def _table(right: int, easy_right: int = 20) -> pd.DataFrame:
    """``right`` of the N hard/heldout questions answered (the first ones), and ``easy_right`` of 20 easy ones."""
    hard = [{"id": f"h{i}", "correct": float(i < right), "tier_group": ho.HEADLINE} for i in range(N)]
    easy = [{"id": f"e{i}", "correct": float(i < easy_right), "tier_group": "easy/heldout"} for i in range(20)]
    return pd.DataFrame(hard + easy).assign(turns=3)


def _runs(tmp_path, per_seed: dict[int, dict[str, int]], profile: bool = True):
    runs = []
    for seed, models in per_seed.items():
        run = tmp_path / f"cpu-lesson-seed{seed}"
        for label, right in models.items():
            path = run / ho.SCORED[label]
            path.parent.mkdir(parents=True, exist_ok=True)
            _table(right).to_parquet(path)
        if profile:
            (run / "profile.yaml").write_text(f"profile: cpu-seed{seed}\nseed: {seed}\n")
        runs.append(run)
    return runs


def seeds_where(control_gap: dict[int, int], sft: int = 40) -> dict[int, dict[str, int]]:
    """Six seeds: SFT answers ``sft`` of 100, the control 50, GRPO 50 + gap, IGPO one fewer than GRPO."""
    return {
        s: {"SFT": sft, "more SFT": 50, "RL (GRPO)": 50 + gap, "RL (IGPO)": 49 + gap} for s, gap in control_gap.items()
    }


def test_rl_that_beats_the_control_on_every_count_teaches(tmp_path, capsys):
    runs = _runs(tmp_path, seeds_where({20: 8, 21: 6, 22: 7, 23: 9, 24: 5, 25: 7}))
    result = study(runs)
    assert result["seeds"] == ["20", "21", "22", "23", "24", "25"]
    assert set(result["pairs"]) == {
        "RL (IGPO) vs SFT",
        "RL (GRPO) vs SFT",
        "more SFT vs SFT",
        "RL (IGPO) vs more SFT",
        "RL (GRPO) vs more SFT",
        "RL (IGPO) vs RL (GRPO)",
    }
    duel = result["pairs"]["RL (GRPO) vs more SFT"]
    assert duel["slice"] == ho.HEADLINE and duel["rows"]["20"]["n"] == N  # the easy questions stay out
    assert duel["rows"]["pooled"]["n"] == 6 * N and duel["rows"]["pooled"]["fixed"] == 42
    assert all(isinstance(duel["rows"][k][c], int) for k in ("20", "pooled") for c in ("n", "fixed", "broken"))
    assert isinstance(duel["rows"]["seeds"]["positive"], int)  # counts print as counts, not 6.0

    decision = decide(result)
    assert decision["sft_band"]["holds"] and decision["sft_band"]["inside"] == 6
    verdict = decision["rl_vs_control"]
    assert verdict["better_arm"] == "RL (GRPO)" and verdict["holds"]
    assert verdict["pooled"]["difference"] == pytest.approx(0.07)
    assert decision["verdict"] == "RL teaches what more SFT does not"
    assert decision["igpo_vs_grpo"]["pooled"]["difference"] == pytest.approx(-0.01)
    assert decision["igpo_vs_grpo"]["decided"]  # 0 fixed / 6 broken: exact McNemar p = 2 / 2**6 = 0.031
    assert "GRPO ahead" in decision["lines"][-1]
    table = headline_table(result).set_index("seed")
    assert table.loc["20", "SFT"] == "0.400" and table.loc["20", "RL (GRPO) − more SFT"] == "+0.080*"
    assert table.loc["pooled", "RL (GRPO) − more SFT"] == "+0.070*"
    assert table.loc["seeds", "RL (GRPO) − more SFT"].endswith("6+/0−")

    episode = {"step": 1, "tool_names": ["search", "visit", None], "info_gain": [0.5, -1.0, None]}
    episode |= {"turn_advantages": [0.2, -0.3, 0.1], "judge_score": 0.0}
    for run in runs[:2]:  # two seeds' GRPO arms kept their training episodes
        write_jsonl(run / ho.RL_ARMS["GRPO"] / "episodes.jsonl", [episode] * 2)
    out = tmp_path / "study.json"
    assert main(["study", *map(str, runs), "--json", str(out)]) == 0
    said = capsys.readouterr().out
    assert "RL teaches what more SFT does not" in said and "the registered rule" in said
    assert "what each arm's update pushed, by tool" in said
    kept = read_json(out)
    assert kept["decision"]["verdict"] == decision["verdict"] and len(kept["table"]) == 8
    visits = [r for r in kept["mechanism"] if r["tool"] == "visit" and r["episode"] == "wrong"]
    assert [(r["run"], r["turns"], r["mean_ig"], r["mean_advantage"]) for r in visits] == [
        ("20", 2, -1.0, -0.3),
        ("21", 2, -1.0, -0.3),
        ("pooled", 4, -1.0, -0.3),
    ]
    assert all(isinstance(r["turns"], int) for r in kept["mechanism"])  # turns print as counts, not 1280.000

    md = markdown_table(headline_table(result)).splitlines()
    assert md[0].startswith("| seed | SFT |") and md[1] == "|" + "---|" * len(headline_table(result).columns)
    assert len(md) == 2 + 8 and md[2].startswith("| 20 | 0.400 |")
    assert md[-2].startswith("| pooled by question |") and "| +0.070* |" in md[-2]
    assert md[-1].startswith("| seed as the unit") and "6+/0−" in md[-1]
    assert main(["study", *map(str, runs), "--markdown"]) == 0
    assert "\n".join(md) in capsys.readouterr().out


def test_a_gain_on_too_few_seeds_or_below_the_margin_does_not_teach(tmp_path):
    # +0.10 on three seeds, -0.01 on three: pooled +0.045, below the margin and positive on 3 of 6
    runs = _runs(tmp_path, seeds_where({20: 10, 21: 10, 22: 10, 23: -1, 24: -1, 25: -1}))
    decision = decide(study(runs))
    checks = decision["rl_vs_control"]["checks"]
    assert not checks["margin"] and not checks["positive_seeds"]
    assert not decision["rl_vs_control"]["holds"]
    assert decision["verdict"] == "RL is ahead of more SFT, but not by the registered margin and consistency"


def test_more_sft_ahead_is_stated_and_a_seed_outside_the_band_is_reported(tmp_path):
    per_seed = seeds_where({20: -20, 21: -25, 22: -20, 23: -30, 24: -22, 25: -24})
    per_seed[25]["SFT"] = 15  # outside 0.2-0.6: reported, kept
    runs = _runs(tmp_path, per_seed)
    decision = decide(study(runs))
    assert decision["verdict"] == "more SFT for the same compute does better than RL"
    assert decision["sft_band"] == {
        "accuracy": {"20": 0.4, "21": 0.4, "22": 0.4, "23": 0.4, "24": 0.4, "25": 0.15},
        "inside": 5,
        "of": 6,
        "holds": True,
    }
    assert "outside: seed 25: 0.150" in decision["lines"][0]
    stricter = decide(study(runs), Rule(band_seeds=6))
    assert not stricter["sft_band"]["holds"]


def test_a_study_needs_two_runs_sharing_models_and_names_runs_by_folder_without_a_profile(tmp_path):
    runs = _runs(tmp_path, {1: {"SFT": 40, "RL (IGPO)": 45}, 2: {"SFT": 40, "RL (IGPO)": 50}}, profile=False)
    result = study(runs)
    assert result["seeds"] == ["cpu-lesson-seed1", "cpu-lesson-seed2"]
    assert list(result["pairs"]) == ["RL (IGPO) vs SFT"]
    assert "rl_vs_control" not in decide(result)  # no control arm: nothing to decide there
    with pytest.raises(ValueError, match="two or more runs"):
        study(runs[:1])
    lone = _runs(tmp_path / "other", {3: {"SFT": 40}, 4: {"SFT": 41}})
    with pytest.raises(FileNotFoundError, match="share no pair"):
        study(lone)
    assert main(["study", *map(str, lone)]) == 2


@pytest.mark.parametrize("damage", ["missing", "symlink-loop", "empty"])
def test_a_run_lacking_an_arm_the_others_have_is_refused_not_dropped(tmp_path, capsys, damage):
    """A seed whose control folder is missing (or a symlink loop, or an empty table in its place) would have made the
    study read only the models every run has: the "more SFT" column and the rule's criterion 2 gone for every seed,
    exit 0.  Now one line naming the run and the arm, exit 2, unless the arms to read are named."""
    runs = _runs(tmp_path, seeds_where({20: 8, 21: 6, 22: 7}))
    control = runs[1] / ho.CONTROL_DIR
    for path in control.iterdir():
        path.unlink()
    control.rmdir()
    if damage == "symlink-loop":
        control.symlink_to(control)
    elif damage == "empty":
        control.mkdir()
        (control / "heldout_rl.parquet").write_bytes(b"")
    with pytest.raises(ValueError, match=rf"{runs[1]}: no held-out results of more SFT .*--arms"):
        study(runs)
    assert main(["study", *map(str, runs)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "more SFT" in err and str(runs[1]) in err and "Traceback" not in err
    assert main(["study", *map(str, runs), "--arms", "SFT,RL (IGPO),RL (GRPO)"]) == 0  # named: read as asked
    assert "more SFT" not in capsys.readouterr().out
    assert main(["study", *map(str, runs), "--arms", "SFT,more SFT"]) == 2  # named, but a run lacks it
    assert str(runs[1]) in capsys.readouterr().err
    assert main(["study", *map(str, runs), "--arms", "SFT,RL (PPO)"]) == 2
    assert "choose among" in capsys.readouterr().err


def test_a_seed_sharing_no_questions_with_its_baseline_is_one_line(tmp_path, capsys):
    """Pooled or seed-level statistics over runs where one run's arm shares no question ids with its baseline ended
    in a TypeError traceback from the seed-level statistics; now one line naming the run (exit 2), in study and
    compare alike.  A single run still reports "no common questions"."""
    runs = _runs(tmp_path, seeds_where({20: 8, 21: 6}))
    other = _table(50)
    other["id"] = "x" + other["id"]
    other.to_parquet(runs[1] / ho.SCORED["RL (IGPO)"])
    for argv in (["study", *map(str, runs)], ["compare", *map(str, runs)]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "share no question ids" in err and str(runs[1]) in err and "Traceback" not in err, err
    alone = ho.compare_runs(runs[1:], "SFT", "RL (IGPO)")
    assert set(alone["verdict"]) == {"no common questions"}
    from venus_utils.eval.stats import seed_level

    with pytest.raises(ValueError, match="no common questions"):
        seed_level([0.1, None])


def test_rl_must_beat_rejection_sampling_too_and_sft_must_be_at_its_plateau(tmp_path, capsys):
    """The rule registered for seeds 30-35: the better RL arm must beat more SFT **and** fine-tuning on the SFT
    model's own right answers (rejection sampling); a gain RFT matches came from the filter, not the gradient. And
    criterion 1b: SFT at its plateau (more SFT gains at most +0.03 pooled)."""
    per_seed = {
        s: {"SFT": 40, "more SFT": 42, "RL (GRPO)": 50 + gap, "RL (IGPO)": 49 + gap, "rejection sampling": 57}
        for s, gap in {30: 8, 31: 6, 32: 7, 33: 9, 34: 5, 35: 7}.items()
    }
    runs = _runs(tmp_path, per_seed)
    result = study(runs)
    assert {"rejection sampling vs SFT", "RL (IGPO) vs rejection sampling", "RL (GRPO) vs rejection sampling"} <= set(
        result["pairs"]
    )
    decision = decide(result, Rule(sft_band=(0.2, 0.7), plateau_margin=0.03))
    assert decision["sft_band"]["holds"] and decision["plateau"]["holds"]  # +0.02 pooled <= +0.03
    assert decision["plateau"]["pooled"]["difference"] == pytest.approx(0.02)
    assert decision["rl_vs_control"]["holds"]  # +0.15 over more SFT on every seed
    rft = decision["rl_vs_rft"]
    assert rft["better_arm"] == "RL (GRPO)" and not rft["holds"]  # +0.00 over RFT pooled: the filter's gain
    assert rft["pooled"]["difference"] == pytest.approx(0.0) and not rft["checks"]["margin"]
    assert decision["verdict"] == (
        "RL teaches what more SFT does not; RL and rejection sampling are not told apart (undecided)"
    )
    assert main(["study", *map(str, runs), "--sft-band", "0.2,0.7", "--plateau-margin", "0.03"]) == 0
    out = capsys.readouterr().out
    assert "2b. better RL arm against rejection sampling: RL (GRPO) +0.000" in out and "1b. SFT at its plateau" in out
    table = headline_table(result)
    assert {"rejection sampling − SFT", "RL (GRPO) − rejection sampling"} <= set(table.columns)
    stopped = _runs(tmp_path / "stopped", {s: {**m, "more SFT": 50} for s, m in per_seed.items()})
    assert not decide(study(stopped), Rule(plateau_margin=0.03))["plateau"]["holds"]  # more SFT +0.10: not at it
    assert "plateau" not in decide(study(stopped))  # a study that did not register 1b is not read with it
    with pytest.raises(SystemExit):
        main(["study", *map(str, runs), "--sft-band", "0.7,0.2"])


def test_a_run_named_with_a_trailing_slash_is_the_same_run(tmp_path):
    """``results/x/`` (a shell's completion) and ``results/x`` name one run: the study reads it the same."""
    runs = _runs(tmp_path, seeds_where({20: 8, 21: 6}))
    plain, slashed = study(runs), study([f"{run}/" for run in runs])
    assert slashed["pairs"] == plain["pairs"] and slashed["seeds"] == ["20", "21"]


def test_an_arm_that_trained_nothing_is_named_beside_the_table(tmp_path, capsys):
    """Rejection sampling that kept no right answer is scored as the SFT model (its summary says so): the study keeps
    its row and says, seed by seed, that the row is the SFT model's answers."""
    from venus_utils.core.io import write_json

    runs = _runs(tmp_path, {s: {"SFT": 40, "rejection sampling": 40} for s in (20, 21)})
    note = "none of the 640 sampled trajectories was judged right: nothing to fine-tune on, the arm is the SFT model"
    write_json(runs[1] / ho.SCORED[ho.RFT].rsplit("/", 1)[0] / "summary.json", {"steps": 0, "note": note})
    write_json(runs[0] / ho.SCORED[ho.RFT].rsplit("/", 1)[0] / "summary.json", {"steps": 216})
    result = study(runs)
    assert result["untrained"] == [f"seed 21: rejection sampling: {note} (its row is the SFT model's answers)"]
    assert main(["study", *map(str, runs)]) == 0
    assert f"note: seed 21: rejection sampling: {note}" in capsys.readouterr().out


def test_each_arms_compute_is_stated_as_a_multiple_of_igpos(tmp_path, capsys):
    """Per seed, each arm's counted FLOPs over the IGPO arm's, its question filter counted on both RL sides; a seed
    whose IGPO arm counted nothing (a run from before the count) has no row."""
    from venus_utils.core.io import write_json

    runs = _runs(tmp_path, seeds_where({30: 5, 31: 5}))
    folder = {label: ho.SCORED[label].rsplit("/", 1)[0] for label in ("RL (IGPO)", "RL (GRPO)", "more SFT")}
    filtered = {"kept": 90, "flops": 1e11}
    write_json(runs[0] / folder["RL (IGPO)"] / "summary.json", {"train_flops": 9e11, "rl_questions": filtered})
    write_json(runs[0] / folder["RL (GRPO)"] / "summary.json", {"train_flops": 1.1e12, "rl_questions": filtered})
    write_json(runs[0] / folder["more SFT"] / "summary.json", {"train_flops": 9.5e11, "budget_flops": 1e12})
    write_json(runs[1] / folder["RL (IGPO)"] / "summary.json", {"steps": 40})  # counted nothing
    result = study(runs)
    assert result["compute"] == {"30": {"RL (GRPO)": 1.2, "more SFT": 0.95}}
    assert main(["study", *map(str, runs)]) == 0
    assert "seed 30: RL (GRPO) 1.200x, more SFT 0.950x" in capsys.readouterr().out
