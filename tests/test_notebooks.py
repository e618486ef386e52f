"""Execute the whole notebook sequence under Papermill with params/smoke.yaml, in one ordered run.

Stages share artifacts through the run folder exactly as `make pipeline` does.  A fake API key is put in
the environment to check that no executed notebook or artifact ever contains it.
"""

from __future__ import annotations

import json
import math

import pytest

from venus_utils.core.paths import PARAMS_DIR
from venus_utils.core.profiles import discover_notebooks, load_profile
from venus_utils.run.pipeline import run_pipeline

pytestmark = pytest.mark.slow

FAKE_SECRET = "sk-test-NEVER-IN-OUTPUT-0123456789"

# Key figures each stage's summary.json must carry (stages that exist are checked).
EXPECTED_KEYS = {
    "00_setup": ["machine", "suggested_profile"],
    "01_trajectory_cleaning": ["rows_source", "rows_kept", "drop_reasons"],
    "02_turn_aware_resampling": ["rows_train", "rows_val"],
    "03_sft_unsloth": [
        "engine",
        "loss_first",
        "loss_last",
        "train_wall_s",
        "heldout_accuracy_before",
        "heldout_accuracy_after",
    ],
    "04_igpo_rl": ["heldout_accuracy_sft", "heldout_accuracy_rl", "control_comparisons"],
    "05_evaluation": ["accuracy"],
    "06_agent_demo": ["termination"],
}

STAGES = [nb.stem for nb in discover_notebooks()]


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "smoke"
    mp = pytest.MonkeyPatch()
    for name in ("SERPER_KEY_ID", "JINA_API_KEYS"):
        mp.setenv(name, FAKE_SECRET)
    try:
        results = run_pipeline(PARAMS_DIR / "smoke.yaml", out, progress=False)
    finally:
        mp.undo()
    return out, results


def test_every_stage_ran(smoke_run):
    out, results = smoke_run
    assert [r.stage for r in results] == STAGES
    assert all(r.status == "ran" for r in results)
    # the profile as the run read it, kept beside its stages (eval keep copies it with the results)
    assert (out / "profile.yaml").read_bytes() == (PARAMS_DIR / "smoke.yaml").read_bytes()


def test_notebook_04_pairs_rl_with_the_control(smoke_run):
    """Issue 40: section 9 (control_arm) trains more SFT for the RL run's FLOPs and pairs RL with it."""
    out, _ = smoke_run
    rl = json.loads((out / "04_igpo_rl" / "summary.json").read_text())
    control = json.loads((out / "04_igpo_rl_control" / "summary.json").read_text())
    from venus_utils.core.io import read_jsonl

    logged = sum(r.get("flops", 0.0) for r in read_jsonl(out / "04_igpo_rl" / "metrics.jsonl"))
    filtered = rl["rl_questions"]["flops"]  # smoke's question filter (filter_samples 1): RL's compute too
    assert control["budget_flops"] == pytest.approx(logged + filtered) and logged > 0 and filtered > 0
    assert control["steps"] >= 1 and control["train_flops"] > 0
    assert {"RL (IGPO)", "more SFT", "RL (IGPO) vs more SFT"} <= set(rl["control_comparisons"])
    assert (out / "04_igpo_rl" / "rl_vs_more_sft.png").is_file()


def test_notebook_04_runs_rejection_sampling_and_says_when_it_has_nothing_to_keep(smoke_run):
    """Section 10 (rft_arm): the SFT model samples RL's questions for the RL run's FLOPs; the smoke policy answers
    none right, so the arm keeps nothing, trains nothing and says so (its fine-tuning is tested in
    tests/scale/test_rl_arms.py)."""
    out, _ = smoke_run
    rl = json.loads((out / "04_igpo_rl" / "summary.json").read_text())
    rft = json.loads((out / "04_igpo_rl_rft" / "summary.json").read_text())
    sampling = rft["sampling"]
    assert sampling["rollouts"] > 0 and sampling["kept"] + sum(sampling["dropped"].values()) == sampling["rollouts"]
    assert rft["budget_flops"] == pytest.approx(rl["train_flops"] + rl["rl_questions"]["flops"])
    if sampling["kept"]:
        assert rft["steps"] >= 1 and {"rejection sampling", "RL (IGPO) vs rejection sampling"} <= set(
            rl["rft_comparisons"]
        )
    else:
        assert rft["steps"] == 0 and "nothing to fine-tune on" in rft["note"] and rl["rft_comparisons"] == {}


@pytest.mark.parametrize("stage", STAGES)
def test_stage_summary(smoke_run, stage):
    out, _ = smoke_run
    summary = json.loads((out / stage / "summary.json").read_text())
    assert summary["stage"] == stage and summary["profile"] == "smoke"
    assert (out / stage / f"{stage}.ipynb").exists()
    for key in EXPECTED_KEYS.get(stage, []):
        assert key in summary, f"{stage}/summary.json lacks {key}"
        value = summary[key]
        if isinstance(value, float):
            assert math.isfinite(value), f"{stage}: {key} = {value}"
    # every parameter the stage used, with where it came from (the pipeline injects the profile's values)
    settings = summary["settings"]
    assert settings["seed"] == {"value": 0, "from": "params/smoke.yaml"}
    section = load_profile(PARAMS_DIR / "smoke.yaml").sections.get(stage, {})
    for key, value in section.items():
        assert settings[key] == {"value": value, "from": f"params/smoke.yaml: {stage}"}, key


def test_no_secret_in_any_artifact(smoke_run):
    out, _ = smoke_run
    leaks = []
    for path in out.rglob("*"):
        if path.is_file() and path.stat().st_size < 50_000_000:
            if FAKE_SECRET.encode() in path.read_bytes():
                leaks.append(str(path.relative_to(out)))
    assert not leaks, f"secret found in {leaks}"


def test_the_smoke_run_renders_as_a_book_with_every_figure(smoke_run, tmp_path):
    """`make book` on the suite's own smoke run: a page per stage in order, each with the figures its notebook drew,
    and the fake key that was in the environment nowhere."""
    import nbformat

    from venus_utils.run.html_book import build_book

    out, _ = smoke_run
    index = build_book(out, tmp_path / "book")
    pages = sorted(index.parent.glob("[0-9][0-9]_*.html"))
    assert [p.stem for p in pages] == STAGES
    for page in pages:
        nb = nbformat.read(out / page.stem / f"{page.stem}.ipynb", as_version=4)
        figures = sum("image/png" in o.get("data", {}) for c in nb.cells for o in c.get("outputs", []))
        html = page.read_text(encoding="utf-8")
        assert html.count("data:image/png;base64") >= figures, page.name
        assert FAKE_SECRET not in html
    text = index.read_text(encoding="utf-8")
    assert all(stage in text for stage in STAGES)
    # the index leads with the run's held-out story: each model with its interval, RL against SFT paired
    story = text[text.index("The run in numbers") : text.index("<h2>Stages</h2>")]
    sft = json.loads((out / "03_sft_unsloth" / "summary.json").read_text())["agent_after"]
    assert (
        f"<td>SFT</td><td>{sft['accuracy']:.3f} [{sft['ci_low']:.3f}, {sft['ci_high']:.3f}] (n = {sft['n']})" in story
    )
    assert "RL (IGPO) vs SFT" in story and "McNemar p" in story
    assert text.count("data:image/png;base64") >= 2  # the key figures of 03 and 04


def test_an_edited_reward_cell_is_trained_never_silently_restored(smoke_run, tmp_path):
    """Issue 21: notebook 04's turn-reward cell edited and the notebook rerun.  Into the finished stage folder it is
    refused, naming the change (before, the old model was restored: "nothing to train"); into a fresh folder the
    edited rewards are the ones trained on."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    from venus_utils.core.io import read_jsonl
    from venus_utils.core.paths import NOTEBOOKS_DIR
    from venus_utils.core.profiles import load_profile, notebook_defaults, notebook_params

    out, _ = smoke_run
    source = NOTEBOOKS_DIR / "04_igpo_rl.ipynb"
    nb = json.loads(source.read_text(encoding="utf-8"))
    example = "# reward = None if reward is None else max(reward, 0.0)"
    cells = [c for c in nb["cells"] if example in "".join(c["source"])]
    assert len(cells) == 1
    cells[0]["source"] = "".join(cells[0]["source"]).replace(
        example, "reward = None if reward is None else reward + 0.5"
    )
    edited = tmp_path / "04_igpo_rl.ipynb"
    edited.write_text(json.dumps(nb), encoding="utf-8")
    params = notebook_params(load_profile(PARAMS_DIR / "smoke.yaml"), "04_igpo_rl", notebook_defaults(source))
    params.update(run_dir=str(out), profile="smoke")

    with pytest.raises(PapermillExecutionError) as refused:
        papermill.execute_notebook(
            str(edited), str(tmp_path / "refused.ipynb"), parameters={**params, "stage_dir": str(out / "04_igpo_rl")}
        )
    assert "made with other settings" in str(refused.value) and "turn_reward" in str(refused.value)

    fresh = out / "04_igpo_rl_edited"
    papermill.execute_notebook(
        str(edited), str(tmp_path / "edited.ipynb"), parameters={**params, "stage_dir": str(fresh)}
    )
    # the same seed and SFT model: the first step's rollouts (and their information gains) are the same in both
    # runs; only the rewards the edited cell returns differ
    old, new = (
        [r for r in read_jsonl(folder / "episodes.jsonl") if r["step"] == 0] for folder in (out / "04_igpo_rl", fresh)
    )
    assert len(old) == len(new) > 0
    compared = 0
    for a, b in zip(old, new):
        assert a["info_gain"] == b["info_gain"]
        for before, after in zip(a["turn_rewards"], b["turn_rewards"]):
            assert (before is None) == (after is None)
            if before is not None:
                assert after == pytest.approx(before + 0.5)
                compared += 1
    assert compared > 0


def test_the_gpu_check_runs_on_the_cpu_where_no_gpu_is(smoke_run, tmp_path):
    """benchmarks/gpu_check.py without CUDA: SFT and IGPO steps of a model built here, over the smoke run's data,
    each by its stage command line, and a report of speed and share of the machine's peak."""
    import importlib.util

    out, _ = smoke_run
    spec = importlib.util.spec_from_file_location("gpu_check", PARAMS_DIR.parent / "benchmarks" / "gpu_check.py")
    gpu_check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_check)
    check = tmp_path / "gpu-check"
    argv = ["--smoke-run", str(out), "--shape", "micro", "--sft-steps", "2", "--rl-steps", "1", "--out", str(check)]
    assert gpu_check.main(argv) == 0
    report = json.loads((check / "gpu_check.json").read_text())
    assert report["device"] == "cpu" and report["peak"]["peak_gflops"] > 0
    sft, rl = report["sft"], report["rl"]
    assert sft["steps"] == 2 and math.isfinite(sft["loss_last"]) and sft["tokens_per_s"] > 0
    assert 0 < sft["share_of_peak"] < 1 and sft["gpu_peak_memory_gib"] is None  # no CUDA: no GPU memory figure
    assert rl["steps"] == 1 and rl["sampled_tokens"] > 0 and 0 < rl["share_of_peak"] < 1
    assert {"generation", "info_gain", "update"} <= set(rl["seconds_per_step"])
