"""The one held-out evaluation: a fixed question set per run, greedy scoring, and the statistics that compare
models."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from venus_utils.eval.stats import accuracy_ci, accuracy_table, comparison_table, mcnemar_exact, paired_comparison


def test_accuracy_interval_is_wilson_and_reports_n():
    r = accuracy_ci([1] * 60 + [0] * 40)
    assert r["n"] == 100 and r["accuracy"] == 0.6
    assert r["ci_low"] == pytest.approx(0.5020, abs=1e-3) and r["ci_high"] == pytest.approx(0.6906, abs=1e-3)
    assert accuracy_ci([])["accuracy"] is None
    assert accuracy_ci([0, 0, 0])["ci_low"] == 0.0 and accuracy_ci([0, 0, 0])["ci_high"] > 0.3  # not a zero-width bar


def test_exact_mcnemar_matches_the_binomial_definition():
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(10, 2) == pytest.approx(0.0385742, rel=1e-5)  # 2 * P(X <= 2), X ~ Bin(12, 1/2)
    assert mcnemar_exact(5, 5) == 1.0


def test_paired_comparison_counts_fixed_and_broken_and_calls_noise_noise():
    ids = [f"q{i}" for i in range(600)]
    rng = np.random.default_rng(0)
    before = pd.Series(rng.random(600) < 0.5, index=ids)
    after = before.copy()
    flip = rng.choice(600, size=40, replace=False)
    after.iloc[flip[:22]] = True  # fixed where it was wrong
    after.iloc[flip[22:]] = False  # broken where it was right
    r = paired_comparison(before, after)
    assert r["n"] == 600 and r["fixed"] + r["broken"] <= 40 and r["both_right"] + r["both_wrong"] >= 560
    assert r["diff_ci_low"] <= r["difference"] <= r["diff_ci_high"]
    assert r["mcnemar_p"] > 0.05 and "noise" in r["verdict"]
    better = before.copy()
    better.iloc[np.flatnonzero(~before.to_numpy())[:60]] = True
    r = paired_comparison(before, better)
    assert r["fixed"] == 60 and r["broken"] == 0 and r["mcnemar_p"] < 1e-10 and r["verdict"] == "improvement"
    assert r["diff_ci_low"] > 0.05  # 0.10 with n=600: the interval excludes 0.05


def test_only_common_questions_are_paired():
    a = pd.Series([True, False, True], index=["a", "b", "c"])
    b = pd.Series([True, True], index=["b", "z"])
    r = paired_comparison(a, b)
    assert r["n"] == 1 and r["fixed"] == 1


def test_tables_break_down_by_subworld_and_hops():
    per = pd.DataFrame(
        {
            "id": list("abcdef"),
            "correct": [1, 1, 0, 0, 1, 0],
            "hops": [2, 2, 3, 3, 2, 3],
            "subworld": ["trained"] * 4 + ["held-out"] * 2,
        }
    )
    t = accuracy_table(per)
    assert list(t["group"]) == ["all", "subworld", "subworld", "hops", "hops"]
    assert t.set_index(["group", "value"]).loc[("hops", "2"), "accuracy"] == 1.0
    after = per.assign(correct=[1, 1, 1, 0, 1, 1])
    c = comparison_table(per, after).set_index(["group", "value"])
    assert c.loc[("all", "all"), "fixed"] == 2 and c.loc[("subworld", "held-out"), "fixed"] == 1


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from venus_utils.modeling import build_tiny_model
    from venus_utils.world import build_world

    root = tmp_path_factory.mktemp("heldout_run")
    build_world(root / "world", seed=0, size="tiny", progress=False, n_worlds=2, heldout_worlds=1)
    build_tiny_model(root / "model", root / "world", size="micro", vocab_size=600)
    return root


def test_the_question_set_is_drawn_once_per_run_and_stratified(run):
    from venus_utils.eval.heldout import heldout_questions

    first = heldout_questions(run, run / "world", 12, seed=1)
    again = heldout_questions(run, run / "world", 12, seed=1)
    assert len(first) == 12 and first["id"].tolist() == again["id"].tolist()
    assert {"template", "hops", "subworld"} <= set(first.columns) and set(first["subworld"]) <= {"trained", "held-out"}
    other = heldout_questions(run, run / "world", 8, seed=1)  # another size: a new draw, recorded
    assert len(other) == 8 and len(pd.read_parquet(run / "heldout" / "questions.parquet")) == 8


def test_greedy_evaluation_scores_every_question_with_the_judge_and_is_deterministic(run, tmp_path):
    from venus_utils.eval.heldout import EvalSettings, evaluate_model, heldout_questions, per_question, summary
    from venus_utils.judging.judge import Judge

    qa = heldout_questions(run, run / "world", 6, seed=2)
    settings = EvalSettings(max_turns=2, max_new_tokens=16, workers=6)
    judge = Judge.from_env("offline")
    a = evaluate_model(
        run / "model", qa, tmp_path / "a.parquet", settings, world_dir=run / "world", judge=judge, progress=False
    )
    b = evaluate_model(
        run / "model", qa, tmp_path / "b.parquet", settings, world_dir=run / "world", judge=judge, progress=False
    )
    assert len(a) == 6 and set(a["id"]) == set(qa["id"].astype(str))
    assert {"correct", "judge_method", "template", "hops", "subworld", "prediction"} <= set(a.columns)
    assert a.sort_values("id")["prediction"].tolist() == b.sort_values("id")["prediction"].tolist()  # greedy
    again = evaluate_model(
        run / "model",
        qa,
        tmp_path / "a.parquet",
        settings,
        world_dir=None,
        tools=object(),
        judge=judge,
        progress=False,
    )  # no tool is called: the scored answers are reused
    assert again["prediction"].tolist() == a["prediction"].tolist() and again["judge"].iloc[0] == judge.name
    s = summary(a)
    assert s["n"] == 6 and s["samples_per_question"] == 1 and s["by"][0]["group"] == "all"
    assert len(per_question(a)) == 6


def test_a_model_saved_again_is_not_rescored_and_changed_weights_are(run, tmp_path, capsys):
    """A rerun of a finished stage saves its model folder again (new mtimes, same bytes): its held-out answers are
    reused, and so are they in a copy of the run folder; other weights in the same folder are answered again.  The
    cached decoder answers as generate does."""
    import shutil

    from transformers import AutoModelForCausalLM

    from venus_utils.core.checkpoints import model_digest, seal_model
    from venus_utils.eval.heldout import EvalSettings, evaluate_model, heldout_questions
    from venus_utils.judging.judge import Judge

    model_dir = tmp_path / "model"
    shutil.copytree(run / "model", model_dir)
    qa = heldout_questions(run, run / "world", 6, seed=3)
    settings = EvalSettings(max_turns=2, max_new_tokens=16, workers=6)
    judge = Judge.from_env("offline")
    out = tmp_path / "scored.parquet"
    first = evaluate_model(model_dir, qa, out, settings, world_dir=run / "world", judge=judge, progress=False)
    digest = model_digest(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    model.save_pretrained(model_dir)  # saved again: the same weights, sealed as every export is
    seal_model(model_dir)
    assert model_digest(model_dir) == digest
    capsys.readouterr()
    again = evaluate_model(model_dir, qa, out, settings, tools=object(), judge=judge, progress=False)
    assert again["prediction"].tolist() == first["prediction"].tolist()  # reused: no tool was called
    assert "reused, not recomputed" in capsys.readouterr().out
    moved = tmp_path / "copied_run" / "model"  # a run folder copied or moved: the same model, elsewhere
    shutil.copytree(model_dir, moved)
    for f in tmp_path.glob(f"{out.stem}.*"):  # the scored table, its rollouts and their fingerprint
        shutil.copy(f, moved.parent / f.name)
    there = evaluate_model(moved, qa, tmp_path / "copied_run" / out.name, settings, tools=object(), judge=judge)
    assert there["prediction"].tolist() == first["prediction"].tolist()  # reused: the digest decides, not the path
    assert "reused, not recomputed" in capsys.readouterr().out
    reference = evaluate_model(
        model_dir,
        qa,
        tmp_path / "reference.parquet",
        EvalSettings(max_turns=2, max_new_tokens=16, workers=6, fast=False),
        world_dir=run / "world",
        judge=judge,
        progress=False,
    )
    key = ["id", "prediction", "turns", "termination"]
    assert reference.sort_values("id")[key].values.tolist() == first.sort_values("id")[key].values.tolist()
    import torch

    with torch.no_grad():
        model.model.layers[0].mlp.up_proj.weight.mul_(2.0)
    model.save_pretrained(model_dir)  # trained further: other weights
    seal_model(model_dir)
    assert model_digest(model_dir) != digest
    capsys.readouterr()
    evaluate_model(model_dir, qa, out, settings, world_dir=run / "world", judge=judge, progress=False)
    assert "reused" not in capsys.readouterr().out  # answered again


def test_processes_side_by_side_answer_as_one_process_does_and_resume_a_killed_pass(run, tmp_path):
    """On the CPU the questions are shared among processes that answer side by side: the same answers as one process,
    no part file left; a killed pass's part files are folded in (their answers not asked again) when the model and
    protocol are the ones the rollouts were made with, and dropped with them otherwise."""
    import json

    from venus_utils.eval.heldout import EvalSettings, evaluate_model, heldout_questions
    from venus_utils.judging.judge import Judge
    from venus_utils.tools import make_toolbox

    qa = heldout_questions(run, run / "world", 8, seed=4)
    judge = Judge.from_env("offline")
    key = ["id", "prediction", "turns", "termination"]
    answers = {}
    for n in (1, 2):
        settings = EvalSettings(max_turns=2, max_new_tokens=16, workers=4, processes=n)
        out = tmp_path / f"p{n}.parquet"
        tools = make_toolbox("local", run / "world") if n == 2 else None  # the caller's local tools, built again
        scored = evaluate_model(
            run / "model", qa, out, settings, world_dir=run / "world", tools=tools, judge=judge, progress=False
        )
        answers[n] = scored.sort_values("id")[key].values.tolist()
        assert not list(tmp_path.glob(f"p{n}.jsonl.part*"))
    assert answers[1] == answers[2] and len(answers[2]) == 8

    settings = EvalSettings(max_turns=2, max_new_tokens=16, workers=4, processes=2)
    out = tmp_path / "p2.parquet"
    rollouts = out.with_suffix(".jsonl")
    records = [json.loads(line) for line in rollouts.read_text().splitlines()]
    kept, asked = records[:3], records[3:]
    kept[0]["prediction"] = "written by the killed pass"
    rollouts.write_text("".join(json.dumps(r) + "\n" for r in kept[:1]))
    part = tmp_path / "p2.jsonl.part1.jsonl"
    part.write_text("".join(json.dumps(r) + "\n" for r in kept[1:]) + '{"index": "torn')
    out.unlink()  # the scored table was not written: the pass was killed
    again = evaluate_model(run / "model", qa, out, settings, world_dir=run / "world", judge=judge, progress=False)
    assert not part.exists() and len(again) == 8
    by_id = again.set_index("id")["prediction"]
    assert by_id[str(kept[0]["index"])] == "written by the killed pass"  # folded in, not asked again
    assert {str(r["index"]) for r in asked} | {str(r["index"]) for r in kept} == set(by_id.index)

    part.write_text(json.dumps(kept[0]) + "\n")  # a part left by a pass of another protocol: dropped with it
    other = EvalSettings(max_turns=1, max_new_tokens=16, workers=4, processes=1)  # folded before any answering
    fresh = evaluate_model(run / "model", qa, out, other, world_dir=run / "world", judge=judge, progress=False)
    assert "written by the killed pass" not in set(fresh["prediction"]) and not part.exists()


def test_a_killed_caller_leaves_no_answering_process_and_its_answers_resume(run, tmp_path):
    """The caller of a pass in several processes is killed (SIGKILL: no chance to end them): its processes end by
    themselves within seconds (not when their share is done), and what they answered waits in part files for the
    next call."""
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    import psutil

    script = tmp_path / "answer.py"
    script.write_text(
        "import sys\n"
        "from pathlib import Path\n"
        "from venus_utils.eval.heldout import EvalSettings, evaluate_model, heldout_questions\n"
        "from venus_utils.judging.judge import Judge\n"
        "if __name__ == '__main__':\n"
        "    run = Path(sys.argv[1])\n"
        "    qa = heldout_questions(run, run / 'world', 120, seed=5)\n"
        "    settings = EvalSettings(max_turns=6, max_new_tokens=64, workers=2, processes=2)\n"
        "    evaluate_model(run / 'model', qa, Path(sys.argv[2]), settings, world_dir=run / 'world',\n"
        "                   judge=Judge.from_env('offline'), progress=False)\n"
    )
    out = tmp_path / "killed.parquet"
    caller = subprocess.Popen([sys.executable, str(script), str(run), str(out)], cwd=Path(__file__).parents[2])
    try:
        deadline = time.monotonic() + 120
        parts: list = []
        while time.monotonic() < deadline and not parts:
            assert caller.poll() is None, "the pass ended before it could be killed: give it more to do"
            parts = list(tmp_path.glob("killed.jsonl.part*.jsonl"))
            time.sleep(0.2)
        assert parts, "no process wrote an answer within two minutes"
        started = psutil.Process(caller.pid).children(recursive=True)  # the fork server, its two answering processes
        assert len(started) >= 3, started
        caller.send_signal(signal.SIGKILL)
        caller.wait(10)
        gone, alive = psutil.wait_procs(started, timeout=5)  # each looks every second
        assert not alive, [p.pid for p in alive]
    finally:
        if caller.poll() is None:
            caller.kill()
    assert list(tmp_path.glob("killed.jsonl.part*.jsonl"))  # what they answered waits for the next call


def test_a_pass_in_processes_fails_in_one_line_or_names_where_its_answers_are(run, tmp_path):
    """A missing world is the one-line error it is in one process; processes that fail (their world deleted after
    the caller built its tools) end the pass with the part files named."""
    import shutil

    from venus_utils.eval.heldout import EvalSettings, evaluate_model, heldout_questions
    from venus_utils.judging.judge import Judge
    from venus_utils.tools import make_toolbox

    qa = heldout_questions(run, run / "world", 8, seed=4)
    settings = EvalSettings(max_turns=2, max_new_tokens=16, workers=4, processes=2)
    judge = Judge.from_env("offline")
    with pytest.raises(FileNotFoundError, match="world folder not found"):
        evaluate_model(run / "model", qa, tmp_path / "a.parquet", settings, world_dir=tmp_path / "none", judge=judge)
    world = tmp_path / "world"
    shutil.copytree(run / "world", world)
    tools = make_toolbox("local", world)
    shutil.rmtree(world)
    with pytest.raises(RuntimeError, match=r"process \d of 2 exited with code 1 .* b\.jsonl\.part\*\.jsonl"):
        evaluate_model(run / "model", qa, tmp_path / "b.parquet", settings, tools=tools, judge=judge, progress=False)


def test_local_tools_say_how_to_build_them_again_and_changed_or_web_tools_do_not(run):
    from venus_utils.tools import make_toolbox

    local = make_toolbox("local", run / "world", top_k=3)
    args = local.rebuild_args()
    assert args == {"backend": "local", "world_dir": str(run / "world"), "timeout": 150.0, "top_k": 3}
    again = make_toolbox(**args)
    assert again.call_sync("search", {"query": "capital"}) == local.call_sync("search", {"query": "capital"})
    local.search_backend = object()  # changed by hand: another process could not build these
    assert local.rebuild_args() is None
    assert make_toolbox("web").rebuild_args() is None


def test_how_many_processes_answer():
    import torch

    from venus_utils.eval.answering import MIN_QUESTIONS_PER_PROCESS, processes_for
    from venus_utils.eval.heldout import EvalSettings

    auto = EvalSettings()
    assert processes_for(auto, 10_000, own_tools=True) == 1  # the caller's tools cannot travel
    assert processes_for(EvalSettings(device="cuda", processes=4), 10_000, own_tools=False) == 1
    assert processes_for(EvalSettings(processes=3), 2, own_tools=False) == 2  # never more than the questions
    assert processes_for(auto, MIN_QUESTIONS_PER_PROCESS - 1, own_tools=False) == 1
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        assert processes_for(auto, 2 * MIN_QUESTIONS_PER_PROCESS, own_tools=False) == 2
        assert processes_for(auto, 2 * MIN_QUESTIONS_PER_PROCESS - 1, own_tools=False) == 1
        gib = 1 << 30  # a model of 8 GiB of weights: the free memory decides
        assert processes_for(auto, 10_000, own_tools=False, model_bytes=8 * gib, available=70 * gib) == 2
        assert processes_for(auto, 10_000, own_tools=False, model_bytes=8 * gib, available=40 * gib) == 1
        assert processes_for(auto, 10_000, own_tools=False, model_bytes=8 * gib, available=1 * gib) == 1
        torch.set_num_threads(1)
        assert processes_for(auto, 10_000, own_tools=False) == 1
    finally:
        torch.set_num_threads(threads)


def _scored(correct: dict[str, list[int]]) -> pd.DataFrame:
    rows = [{"id": q, "correct": float(c), "turns": 3} for q, cs in correct.items() for c in cs]
    return pd.DataFrame(rows)


def test_compare_refuses_to_pair_answers_scored_by_two_judges():
    """Issue 40: a stricter judge gets a new name; a pair scored by two rules would measure the rules."""
    from venus_utils.eval import heldout as ho

    old = _scored({"a": [1], "b": [0]}).assign(judge="offline-strict")
    new = _scored({"a": [1], "b": [1]}).assign(judge="offline-strict-2")
    with pytest.raises(ValueError, match="offline-strict with answers judged by offline-strict-2"):
        ho.compare(old, new)
    assert ho.compare(new, new.copy())["n"] == 2


def test_compare_pairs_models_by_question_and_compare_to_takes_every_rl_model():
    from venus_utils.eval import heldout as ho

    sft = _scored({"a": [1], "b": [0], "c": [0], "d": [1]})
    rl = _scored({"d": [0], "c": [1], "b": [1], "a": [1]})  # other row order: paired by id, not position
    cmp = ho.compare(sft, rl)
    assert (cmp["fixed"], cmp["broken"], cmp["n"]) == (2, 1, 4)
    assert cmp["accuracy_before"] == 0.5 and cmp["accuracy_after"] == 0.75
    results = {"base": sft, "SFT": sft, "RL (IGPO)": rl, "RL (GRPO)": sft}
    both = ho.compare_to(results)
    assert set(both) == {"RL (IGPO)", "RL (GRPO)", "RL (IGPO) vs RL (GRPO)"}
    assert both["RL (IGPO)"] == cmp and both["RL (GRPO)"]["fixed"] == both["RL (GRPO)"]["broken"] == 0
    assert ho.compare_to({"RL (IGPO)": rl}) == {}
    # issue 40: with the control, every model against SFT and every RL arm against more SFT
    control = _scored({"a": [1], "b": [1], "c": [0], "d": [1]})
    full = ho.compare_to({**results, ho.CONTROL: control})
    assert set(full) == {
        "RL (IGPO)",
        "RL (GRPO)",
        ho.CONTROL,
        "RL (IGPO) vs more SFT",
        "RL (GRPO) vs more SFT",
        "RL (IGPO) vs RL (GRPO)",
    }
    assert full["RL (IGPO) vs more SFT"] == ho.compare(control, rl)


def test_compare_runs_pairs_each_run_and_pools_the_seeds(tmp_path, capsys):
    from venus_utils.core.io import read_json
    from venus_utils.eval import heldout as ho
    from venus_utils.eval.__main__ import main

    runs = [tmp_path / "seed0", tmp_path / "seed1"]
    tables = [  # the same question ids in both runs: pooled, they stay two questions each
        (_scored({"a": [1], "b": [0], "c": [0]}), _scored({"a": [1], "b": [1], "c": [1]})),
        (_scored({"a": [0], "b": [1], "c": [1]}), _scored({"a": [1], "b": [1], "c": [0]})),
    ]
    for run, (sft, rl) in zip(runs, tables):
        for label, scored in (("SFT", sft), ("RL (IGPO)", rl)):
            (run / ho.SCORED[label]).parent.mkdir(parents=True, exist_ok=True)
            scored.to_parquet(run / ho.SCORED[label])
    table = ho.compare_runs(runs).set_index("run")
    assert table.loc[str(runs[0]), ["n", "fixed", "broken"]].tolist() == [3, 2, 0]
    assert table.loc[str(runs[1]), ["n", "fixed", "broken"]].tolist() == [3, 1, 1]
    pooled = table.loc["pooled"]
    assert (pooled["n"], pooled["fixed"], pooled["broken"]) == (6, 3, 1)
    assert pooled["mcnemar_p"] == pytest.approx(mcnemar_exact(3, 1))
    assert pooled["accuracy_before"] == pytest.approx(3 / 6) and pooled["accuracy_after"] == pytest.approx(5 / 6)
    assert len(ho.compare_runs(runs[:1])) == 1  # one run: no pooled row

    assert main(["compare", *map(str, runs), "--json", str(tmp_path / "seeds.json")]) == 0
    out = capsys.readouterr().out
    assert "RL (IGPO) against SFT" in out and "pooled" in out
    rows = {r["run"]: r for r in read_json(tmp_path / "seeds.json")["rows"]}
    assert rows["pooled"]["fixed"] == 3 and "fixed" not in rows[ho.SEEDS_ROW]  # each row keeps its own columns
    assert "with the seed as the unit" in out
    # issue 40: the seed as the unit beside the pooled test: seed 0 gains 2 of 3, seed 1 nothing
    seeds = table.loc[ho.SEEDS_ROW]
    assert seeds["seeds"] == 2 and seeds["mean_difference"] == pytest.approx(1 / 3)
    assert (seeds["positive"], seeds["negative"]) == (1, 0) and seeds["sign_p"] == 1.0
    assert seeds["seed_ci_low"] < 0 < seeds["seed_ci_high"]  # two seeds, df = 1: wide

    assert main(["compare", str(runs[0]), "--model", "RL (GRPO)"]) == 2  # no GRPO arm in that run
    assert "04_igpo_rl_grpo/heldout_rl.parquet" in capsys.readouterr().err
    with pytest.raises(ValueError, match="models are one of"):
        ho.compare_runs(runs, model="RL")


def test_compare_runs_also_pairs_the_headline_slice_of_a_hard_tier(tmp_path):
    """Issue 21: pooled over seeds, the arms are compared on the hard tier's held-out sub-worlds beside all questions;
    a run whose world has no hard tier adds to "all" only."""
    from venus_utils.eval import heldout as ho

    def tiered(correct, slices):
        t = _scored(correct)
        t["tier_group"] = t["id"].map(slices)
        return t

    slices = {"a": "hard/heldout", "b": "hard/heldout", "c": "easy/sft", "d": "hard/sft"}
    runs = [tmp_path / "s10", tmp_path / "s11", tmp_path / "old"]
    tables = [
        (
            tiered({"a": [0], "b": [0], "c": [1], "d": [0]}, slices),
            tiered({"a": [1], "b": [1], "c": [0], "d": [0]}, slices),
        ),
        (
            tiered({"a": [0], "b": [1], "c": [1], "d": [1]}, slices),
            tiered({"a": [1], "b": [1], "c": [1], "d": [0]}, slices),
        ),
        (_scored({"a": [1], "b": [0]}), _scored({"a": [1], "b": [1]})),
    ]
    for run, (sft, rl) in zip(runs, tables):
        for label, scored in (("SFT", sft), ("RL (IGPO)", rl)):
            (run / ho.SCORED[label]).parent.mkdir(parents=True, exist_ok=True)
            scored.to_parquet(run / ho.SCORED[label])
    table = ho.compare_runs(runs)
    assert table.groupby("slice")["run"].apply(list).to_dict() == {
        "all": [*map(str, runs), "pooled", ho.SEEDS_ROW],
        ho.HEADLINE: [str(runs[0]), str(runs[1]), "pooled", ho.SEEDS_ROW],
    }
    head = table[(table["slice"] == ho.HEADLINE) & (table["run"] == "pooled")].iloc[0]
    assert (head["n"], head["fixed"], head["broken"]) == (4, 3, 0)
    assert head["accuracy_before"] == pytest.approx(1 / 4) and head["accuracy_after"] == 1.0
    every = table[(table["slice"] == "all") & (table["run"] == "pooled")].iloc[0]
    assert (every["n"], every["fixed"], every["broken"]) == (10, 4, 2)


def test_every_accuracy_names_its_tier_and_sub_world_group():
    """Issue 21: with a hard tier, the headline is the hard tier's held-out sub-worlds, and every figure of
    summary.json says which slice it is (tier, group, both), for one model and for a paired comparison."""
    from venus_utils.eval import heldout as ho

    cells = {"a": "hard/heldout", "b": "hard/heldout", "c": "easy/sft", "d": "hard/sft"}

    def sliced(correct):
        table = _scored({k: [v] for k, v in correct.items()})
        return table.assign(
            tier_group=table["id"].map(cells),
            tier=table["id"].map(lambda q: cells[q].split("/")[0]),
            group=table["id"].map(lambda q: cells[q].split("/")[1]),
        )

    sft, rl = sliced({"a": 0, "b": 0, "c": 1, "d": 1}), sliced({"a": 1, "b": 0, "c": 1, "d": 1})
    summary = ho.summary(rl)
    assert summary["headline"]["slice"] == "hard/heldout" and summary["headline"]["n"] == 2
    assert summary["headline"]["accuracy"] == 0.5 and summary["accuracy"] == 0.75
    named = {(r["group"], r["value"]) for r in summary["by"]}
    assert {("tier_group", "hard/heldout"), ("tier_group", "easy/sft"), ("tier", "hard"), ("tier", "easy")} <= named
    cmp = ho.compare(sft, rl)
    assert cmp["headline"]["slice"] == "hard/heldout" and cmp["headline"]["fixed"] == 1 and cmp["headline"]["n"] == 2
    assert {(r["group"], r["value"]) for r in cmp["by"]} >= {("tier_group", "hard/heldout"), ("tier", "easy")}
    frame = ho.comparison_frame({"RL (IGPO)": cmp})
    assert frame.loc["RL (IGPO)", "hard/heldout: n"] == 2 and "by" not in frame
    plain = ho.summary(_scored({"a": [1], "b": [0]}))  # a world without tiers: the headline is every question
    assert plain["headline"]["slice"] == "all" and plain["headline"]["n"] == 2


def test_the_smallest_detectable_difference_is_reported():
    """Issue 21: a "no difference" comes with the difference the design could have detected (80% power, 5%)."""
    from venus_utils.eval.stats import detectable_difference

    assert detectable_difference(600, 27) == pytest.approx(2.8016 * (27 / 600) ** 0.5 / 600**0.5, rel=1e-3)
    assert detectable_difference(1800, 81) < detectable_difference(600, 27)  # three seeds pooled: smaller
    assert detectable_difference(0, 0) is None
    before = pd.Series([1, 0, 1, 0] * 50, index=range(200))
    after = pd.Series([1, 1, 1, 0] * 50, index=range(200))
    out = paired_comparison(before, after)
    assert out["detectable_difference"] == pytest.approx(detectable_difference(200, 50))


def test_validate_scores_a_split_by_tier_and_group_from_the_command_line(run, tmp_path, capsys, monkeypatch):
    """``python -m venus_utils.eval validate``: settings are chosen on validation questions (issue 21), with the
    held-out evaluation's own code; the accuracy is printed per tier and sub-world group."""
    from venus_utils.eval.__main__ import main

    for name in ("JUDGE_API_BASE", "API_BASE"):
        monkeypatch.setenv(name, "")  # the offline judge
    out = tmp_path / "val.parquet"
    argv = ["validate", "--model", str(run / "model"), "--world", str(run / "world"), "--n", "5", "--out", str(out)]
    assert main([*argv, "--max-turns", "2", "--max-new-tokens", "8"]) == 0
    printed = capsys.readouterr().out
    assert "on 5 val questions" in printed and "tier_group easy/" in printed and "n = 5" in printed
    assert len(pd.read_parquet(out)) == 5
    assert main([*argv, "--split", "dev"]) == 2 and "no 'dev' split" in capsys.readouterr().err


def test_the_evaluation_loop_is_built_the_one_way_with_its_settings():
    """Issue 23: the held-out pass builds its agent loop through ``AgentSettings.config`` (as the CLI, the demo and
    notebooks 05/06 do), with its own prompt, limits and sampling, one attempt, and room for the answer."""
    from venus_utils.agent import AgentConfig
    from venus_utils.eval.heldout import EvalSettings

    cfg = EvalSettings(max_turns=14, max_new_tokens=100, system_prompt_style="compact", temperature=0.7).agent_config(
        2048
    )
    assert isinstance(cfg, AgentConfig)
    assert (cfg.max_turns, cfg.max_new_tokens, cfg.system_prompt_style, cfg.temperature) == (14, 100, "compact", 0.7)
    assert (cfg.attempts, cfg.top_k, cfg.context_limit) == (1, None, 2048 - 100)


def test_kept_results_pool_like_the_run_folders_they_come_from(tmp_path, capsys):
    """Issue 21: a run folder does not outlive its machine, so ``keep`` copies a run's held-out results (without
    rollouts) into a folder to commit; ``compare`` on kept folders gives the run folders' numbers."""
    from venus_utils.core.io import read_json, write_json
    from venus_utils.eval import heldout as ho
    from venus_utils.eval.__main__ import main

    runs = [tmp_path / "runs" / "seed10", tmp_path / "runs" / "seed11"]
    kept = [tmp_path / "results" / "seed10", tmp_path / "results" / "seed11"]
    tables = [
        (_scored({"a": [1], "b": [0], "c": [0]}), _scored({"a": [1], "b": [1], "c": [1]})),
        (_scored({"a": [0], "b": [1], "c": [1]}), _scored({"a": [1], "b": [1], "c": [0]})),
    ]
    for run, (sft, rl) in zip(runs, tables):
        for label, scored in (("SFT", sft), ("RL (IGPO)", rl)):
            (run / ho.SCORED[label]).parent.mkdir(parents=True, exist_ok=True)
            scored.assign(messages="a long rollout", tier_group="hard/heldout").to_parquet(run / ho.SCORED[label])
        write_json(run / ho.RL_ARMS["IGPO"] / "summary.json", {"stage": "rl", "steps": 40})
        write_json(run / "arms.json", {"arms": ["igpo"]})
    for run, out in zip(runs, kept):
        assert main(["keep", str(run), "--out", str(out)]) == 0
    assert "kept 4 files" in capsys.readouterr().out
    table = pd.read_parquet(kept[0] / ho.SCORED["SFT"])
    assert "messages" not in table and {"id", "correct", "turns", "tier_group"} <= set(table.columns)
    assert read_json(kept[0] / ho.RL_ARMS["IGPO"] / "summary.json")["steps"] == 40
    assert read_json(kept[0] / "arms.json") == {"arms": ["igpo"]}
    columns = ["slice", "n", "fixed", "broken", "mcnemar_p"]
    from_runs = ho.compare_runs(runs)[columns]
    assert ho.compare_runs(kept)[columns].equals(from_runs)

    assert main(["keep", str(runs[0]), "--out", str(kept[0])]) == 0  # kept again: replaced whole
    assert read_json(kept[0] / ho.KEPT_MARKER)["run"] == str(runs[0])

    (tmp_path / "empty").mkdir()
    write_json(tmp_path / "empty" / "summary.json", {})
    assert main(["keep", str(tmp_path / "empty"), "--out", str(tmp_path / "x")]) == 2
    assert "no held-out results" in capsys.readouterr().err and not (tmp_path / "x").exists()  # nothing half-kept
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("not a kept folder")
    assert main(["keep", str(runs[0]), "--out", str(tmp_path / "mine")]) == 2
    assert "holds notes.txt, which eval keep did not write there" in capsys.readouterr().err
    assert (tmp_path / "mine" / "notes.txt").exists()


def test_keep_compresses_each_arms_training_episodes_and_the_report_reads_them(tmp_path):
    """Issue 40: the per-turn evidence of an RL arm (information gain and advantage by tool) outlives the run: ``keep``
    writes each ``episodes.jsonl`` as ``episodes.jsonl.gz`` (the same bytes each time), and eval.by_tool reads it."""
    import gzip

    from venus_utils.core.io import read_jsonl, write_json, write_jsonl
    from venus_utils.eval import by_tool
    from venus_utils.eval import heldout as ho

    run, out = tmp_path / "run", tmp_path / "kept"
    (run / ho.SCORED["SFT"]).parent.mkdir(parents=True)
    _scored({"a": [1]}).to_parquet(run / ho.SCORED["SFT"])
    episode = {"step": 1, "tool_names": ["search", "visit", None], "info_gain": [0.5, -1.0, None]}
    episode |= {"turn_advantages": [0.2, -0.3, 0.1], "judge_score": 1.0}
    for arm in ("IGPO", "GRPO"):
        (run / ho.RL_ARMS[arm]).mkdir(parents=True, exist_ok=True)
        write_jsonl(run / ho.RL_ARMS[arm] / "episodes.jsonl", [episode] * 3)
    history = [{"step": 1, "loss": 2.0, "flops": 10.0}, {"step": 2, "loss": 1.5, "flops": 10.0}]
    (run / ho.SCORED["more SFT"]).parent.mkdir(parents=True)
    write_json(run / ho.SCORED["more SFT"].split("/")[0] / "train_history.json", history)
    written = ho.keep_results(run, out)
    # an SFT-trained arm's training log is kept under the RL arms' name, one row per logged step
    assert read_jsonl(out / ho.SCORED["more SFT"].split("/")[0] / "metrics.jsonl") == history
    kept = out / ho.RL_ARMS["GRPO"] / "episodes.jsonl.gz"
    assert kept in written and not (out / ho.RL_ARMS["GRPO"] / "episodes.jsonl").exists()
    assert gzip.decompress(kept.read_bytes()) == (run / ho.RL_ARMS["GRPO"] / "episodes.jsonl").read_bytes()
    first = kept.read_bytes()
    ho.keep_results(run, out)
    assert kept.read_bytes() == first  # no time stamp inside: a re-keep changes nothing in git
    episodes = by_tool.episodes_frame(out / ho.RL_ARMS["IGPO"] / "episodes.jsonl")
    assert len(episodes) == 3
    visits = by_tool.ig_by_tool(episodes).set_index(["tool", "episode"]).loc[("visit", "all")]
    assert visits["turns"] == 3 and visits["mean_ig"] == -1.0


def test_seed_level_statistics_take_the_seed_as_the_unit():
    """Issue 40: the pre-registered seeds 13-15 (hard/heldout, IGPO - SFT: +0.172, +0.039, +0.039) are significant
    pooled by question but not with the seed as the unit: a t-interval over 3 seeds crosses zero (p ~ 0.20)."""
    from venus_utils.eval.stats import seed_level

    r = seed_level([0.172, 0.039, 0.039])
    assert r["seeds"] == 3 and r["mean_difference"] == pytest.approx(0.0833, abs=1e-4)
    assert r["seed_ci_low"] < 0 < r["seed_ci_high"] and r["seed_t_p"] == pytest.approx(0.20, abs=0.01)
    assert (r["positive"], r["negative"], r["sign_p"]) == (3, 0, 0.25)
    six = seed_level([0.05, 0.08, 0.06, 0.07, 0.04, 0.09])  # six seeds, all gaining: the interval clears zero
    assert six["seed_ci_low"] > 0 and six["seed_t_p"] < 0.001 and six["sign_p"] == pytest.approx(0.03125)
    assert seed_level([0.1])["seed_ci_low"] is None  # one seed: no interval
    assert seed_level([0.0, 0.0])["sign_p"] is None  # only ties: no sign test


def test_rejudge_scores_a_runs_tables_again_from_their_answers(tmp_path, capsys):
    """Issue 40: a stricter judge has a new name; ``eval rejudge`` re-scores the tables another judge scored, from the
    answers they hold, so old and new results pair again (here one hedge the old rule paid is now refused)."""
    from venus_utils.eval import heldout as ho
    from venus_utils.eval.__main__ import main

    table = pd.DataFrame(
        {
            "id": ["a", "b"],
            "sample": [0, 0],
            "question": ["q1", "q2"],
            "answer": ["Paris", "1985"],
            "prediction": ["paris or rome", "1985"],
            "correct": [1.0, 1.0],
            "turns": [3, 3],
            "judge": ["offline-strict", "offline-strict"],
        }
    )
    path = tmp_path / ho.SCORED["SFT"]
    path.parent.mkdir(parents=True)
    table.to_parquet(path)
    # --dry-run: the flips counted and written out, the table left as it is (kept results are never rewritten)
    assert main(["rejudge", str(tmp_path), "--dry-run", "--json", str(tmp_path / "flips.json")]) == 0
    assert "1 tables re-judged (--dry-run: none rewritten)" in capsys.readouterr().out
    assert pd.read_parquet(path).equals(table)
    flips = json.loads((tmp_path / "flips.json").read_text())
    assert flips["totals"] == {"offline-strict": {"n": 2, "right_to_wrong": 1, "wrong_to_right": 0}}
    assert [(e["prediction"], e["truth"], e["direction"]) for e in flips["examples"]] == [
        ("paris or rome", "Paris", "right_to_wrong")
    ]
    assert main(["rejudge", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "2 answers judged by offline-strict re-judged by offline-exact: 1 verdicts changed (1 right -> wrong" in out
    again = pd.read_parquet(path)
    assert again["correct"].tolist() == [0.0, 1.0] and set(again["judge"]) == {"offline-exact"}
    assert (
        main(["rejudge", str(tmp_path)]) == 0
        and "every table is judged by the current judge" in capsys.readouterr().out
    )


def test_the_seed_level_interval_and_the_pooled_mcnemar_p_equal_values_computed_by_hand():
    """The study's two tests, pinned to values computed independently (a study's bug would move them):
    six differences 0.05..0.09, mean 0.065, sample sd sqrt(0.00175 / 5) = 0.0187083, t(0.975, df 5) = 2.5705818,
    half-width 2.5705818 x 0.0187083 / sqrt(6) = 0.0196332; McNemar with 9 fixed / 2 broken: 2 x P(X <= 2),
    X ~ Bin(11, 1/2) = 2 x (1 + 11 + 55) / 2048 = 0.0654296875."""
    from venus_utils.eval.stats import seed_level

    r = seed_level([0.05, 0.08, 0.06, 0.07, 0.04, 0.09])
    assert r["mean_difference"] == pytest.approx(0.065, abs=1e-12)
    assert r["seed_sd"] == pytest.approx(0.0187083, abs=1e-7)
    assert r["seed_ci_low"] == pytest.approx(0.065 - 0.0196332, abs=1e-6)
    assert r["seed_ci_high"] == pytest.approx(0.065 + 0.0196332, abs=1e-6)
    assert mcnemar_exact(9, 2) == pytest.approx(0.0654296875, abs=1e-12)
    before = pd.Series([1.0] * 2 + [0.0] * 9 + [1.0] * 5 + [0.0] * 4, index=[f"q{i}" for i in range(20)])
    after = pd.Series([0.0] * 2 + [1.0] * 9 + [1.0] * 5 + [0.0] * 4, index=before.index)
    pooled = paired_comparison(before, after)
    assert (pooled["fixed"], pooled["broken"], pooled["n"]) == (9, 2, 20)
    assert pooled["mcnemar_p"] == pytest.approx(0.0654296875, abs=1e-12)
    assert pooled["difference"] == pytest.approx(7 / 20)


def test_two_tables_without_a_question_in_common_are_not_paired():
    """Notebook 04 with heldout_split val scores validation questions; paired with notebook 03's test questions
    there is nothing to pair, and the comparison says so instead of reporting n = 0."""
    from venus_utils.eval import heldout as ho

    with pytest.raises(ValueError, match="share no question"):
        ho.compare(_scored({"t1": [1], "t2": [0]}), _scored({"v1": [1], "v2": [1]}))


def test_each_split_keeps_its_own_draw(tmp_path):
    """Drawing the validation questions (notebook 04's heldout_split val) never replaces the run's test draw."""
    from venus_utils.eval import heldout as ho

    qa = pd.DataFrame(
        {"question": [f"q{i}" for i in range(6)], "answer": ["a"] * 6, "id": [f"i{i}" for i in range(6)]}
    )
    source = tmp_path / "qa.parquet"
    qa.to_parquet(source)
    run = tmp_path / "run"
    ho.heldout_questions(run, source, 3, 0, "test")
    ho.heldout_questions(run, source, 2, 0, "val")
    assert (run / "heldout" / "questions.parquet").is_file() and (
        run / "heldout" / "val" / "questions.parquet"
    ).is_file()
    assert len(ho.heldout_questions(run, source, 3, 0, "test")) == 3
