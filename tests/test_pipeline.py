"""The Papermill runner on small throwaway notebooks (each kernel start takes a few seconds)."""

from __future__ import annotations

import json
import os
import time

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from venus_utils.core.profiles import ConfigError
from venus_utils.run.pipeline import StageFailed, run_pipeline

PARAMS = 'run_dir = "runs/x"\nstage_dir = None\nprofile = "x"\nseed = 0\nvalue = 1\n'


def make_nb(path, body, params=PARAMS):
    cell = new_code_cell(params)
    cell.metadata["tags"] = ["parameters"]
    nb = new_notebook(cells=[cell, new_code_cell(body)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


FINISH = (
    "from venus_utils.core.stage import Stage\n"
    "stage = Stage.start(NAME, run_dir, stage_dir, profile)\n"
    "{extra}\n"
    "stage.finish(value=value, seed=seed)\n"
)


@pytest.fixture
def project(tmp_path):
    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    make_nb(nbs / "00_first.ipynb", FINISH.replace("NAME", '"00_first"').format(extra=""))
    make_nb(
        nbs / "01_second.ipynb",
        FINISH.replace("NAME", '"01_second"').format(extra='assert stage.upstream_summary("00_first")["value"] == 7'),
    )
    params = tmp_path / "p.yaml"
    params.write_text("profile: t\nseed: 11\n00_first:\n  value: 7\n")
    return tmp_path, nbs, params


def test_runs_in_order_and_writes_summaries(project):
    tmp_path, nbs, params = project
    out = tmp_path / "runs"
    results = run_pipeline(params, out, notebooks_dir=nbs, progress=False)
    assert [r.status for r in results] == ["ran", "ran"]
    first = json.loads((out / "00_first" / "summary.json").read_text())
    assert first["value"] == 7 and first["seed"] == 11 and first["profile"] == "t"
    assert (out / "01_second" / "01_second.ipynb").exists()
    executed = nbformat.read(out / "00_first" / "00_first.ipynb", as_version=4)
    injected = [c for c in executed.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert injected and "value = 7" in injected[0].source and "seed = 11" in injected[0].source


def test_resume_skips_up_to_date_and_reruns_changed(project):
    tmp_path, nbs, params = project
    out = tmp_path / "runs"
    run_pipeline(params, out, notebooks_dir=nbs, progress=False)
    assert [r.status for r in run_pipeline(params, out, resume=True, notebooks_dir=nbs, progress=False)] == [
        "skipped",
        "skipped",
    ]
    # a changed parameter of the first stage re-runs it, and the second stage (its input changed) too
    time.sleep(0.05)
    params.write_text("profile: t\nseed: 11\n00_first:\n  value: 8\n")
    with pytest.raises(StageFailed):  # 01_second asserts value == 7: proves it re-ran on the new input
        run_pipeline(params, out, resume=True, notebooks_dir=nbs, progress=False)
    assert json.loads((out / "00_first" / "summary.json").read_text())["value"] == 8
    assert not (out / "01_second" / "summary.json").exists()  # no stale summary after a failure


def test_resume_reruns_when_notebook_is_newer(project):
    tmp_path, nbs, params = project
    out = tmp_path / "runs"
    run_pipeline(params, out, only="00", notebooks_dir=nbs, progress=False)
    later = time.time() + 5
    os.utime(nbs / "00_first.ipynb", (later, later))
    assert [
        r.status for r in run_pipeline(params, out, only="00", resume=True, notebooks_dir=nbs, progress=False)
    ] == ["ran"]


def test_failure_names_notebook_and_cell(project):
    tmp_path, nbs, params = project
    make_nb(nbs / "01_second.ipynb", "x = 1\nraise ValueError('bad row 3 in input.parquet')")
    with pytest.raises(StageFailed) as info:
        run_pipeline(params, tmp_path / "runs", notebooks_dir=nbs, progress=False)
    msg = str(info.value)
    assert "01_second.ipynb" in msg and "cell" in msg and "ValueError" in msg and "bad row 3" in msg
    assert "starting `x = 1`" in msg  # the failing cell itself, not the one before it (Papermill adds cells)


def test_upstream_missing_is_explained(project):
    tmp_path, nbs, params = project
    with pytest.raises(StageFailed, match="needs the outputs of 00_first"):
        run_pipeline(params, tmp_path / "runs", only="01", notebooks_dir=nbs, progress=False)


def test_config_errors_before_running(project):
    tmp_path, nbs, params = project
    params.write_text("01_second:\n  not_declared: 1\n")
    with pytest.raises(ConfigError, match="not_declared"):
        run_pipeline(params, tmp_path / "runs", notebooks_dir=nbs, progress=False)
    assert not (tmp_path / "runs" / "00_first").exists()
    params.write_text("07_nothing:\n  a: 1\n")
    with pytest.raises(ConfigError, match="match no notebook"):
        run_pipeline(params, tmp_path / "runs", notebooks_dir=nbs, progress=False)
    params.write_text("seed: 1\n")
    with pytest.raises(ConfigError, match="unknown stages"):
        run_pipeline(params, tmp_path / "runs", only="05", notebooks_dir=nbs, progress=False)


@pytest.mark.parametrize(
    "profile, message",
    [
        ("seeed: 5\n", "shared key 'seeed' is not a parameter of any notebook (did you mean 'seed'?)"),
        ("00_first:\n  value: ten\n", "'value' must be int like its default 1, got str 'ten'"),
        ("seed: 1.5\n", "'seed' must be int"),
    ],
)
def test_bad_values_are_refused_before_any_kernel_starts(project, profile, message):
    tmp_path, nbs, params = project
    params.write_text(profile)
    with pytest.raises(ConfigError) as info:
        run_pipeline(params, tmp_path / "runs", notebooks_dir=nbs, progress=False)
    assert message in str(info.value) and str(params) in str(info.value)
    assert not (tmp_path / "runs" / "00_first").exists()


def test_only_warns_about_later_stages_left_stale(project, capsys):
    from venus_utils.run.pipeline import stale_stages

    tmp_path, nbs, params = project
    out = tmp_path / "runs"
    run_pipeline(params, out, notebooks_dir=nbs, progress=False)
    results = run_pipeline(params, out, only="00", notebooks_dir=nbs, progress=False)
    assert stale_stages(out, sorted(nbs.glob("*.ipynb")), results) == ["01_second"]
    captured = capsys.readouterr()
    assert "[stale] 01_second" in captured.out + captured.err


def test_copies_of_stage_notebooks_are_not_stages(project):
    from venus_utils.core.profiles import discover_notebooks

    tmp_path, nbs, params = project
    for stray in ("00_first.nbconvert.ipynb", "00_first-Copy1.ipynb", ".01_second.ipynb"):
        (nbs / stray).write_text((nbs / "00_first.ipynb").read_text())
    assert [nb.name for nb in discover_notebooks(nbs)] == ["00_first.ipynb", "01_second.ipynb"]


def test_cli_exit_code_and_message(project, capsys):
    from venus_utils.run.pipeline import main

    tmp_path, nbs, params = project
    params.write_text("01_second:\n  not_declared: 1\n")
    assert main(["--params", str(params), "--out", str(tmp_path / "r")]) == 1
    assert "pipeline stopped" in capsys.readouterr().err


def test_the_running_stage_reports_its_own_progress_beside_the_stage_bar(project, monkeypatch):
    """A stage's kernel counts (venus_utils.core.progress.report) into a file the pipeline names; the pipeline
    shows it on a second line while the stage runs, then removes the file and the variable."""
    from venus_utils.core import progress
    from venus_utils.run import pipeline

    tmp_path, nbs, params = project
    counting = (
        "import time\nfrom venus_utils.core.progress import report\n"
        "for i in range(1, 6):\n    report('things', i, 5)\n    time.sleep(0.7)\n"
    )
    make_nb(nbs / "00_first.ipynb", FINISH.replace("NAME", '"00_first"').format(extra=counting))
    shown, made = [], []

    class Recording(progress.ProgressWatcher):
        def __init__(self, show, interval=1.0):
            super().__init__(lambda text: (shown.append(text), show(text)), interval=0.2)
            made.append(self)

    monkeypatch.delenv(progress.ENV, raising=False)
    monkeypatch.setattr(pipeline, "ProgressWatcher", Recording)
    run_pipeline(params, tmp_path / "runs", notebooks_dir=nbs, progress=True)
    counts = [t.removeprefix("00_first · ") for t in shown if t.startswith("00_first · things")]
    assert counts and counts[-1].split(" · ")[0] in ("things 4/5", "things 5/5"), shown
    assert any("left" in t for t in counts) and any("/s" in t for t in counts)
    assert progress.ENV not in os.environ and not made[0].path.parent.exists()


def test_progress_is_a_no_op_outside_the_pipeline_and_never_fails_a_stage(tmp_path, monkeypatch):
    from venus_utils.core import progress

    monkeypatch.delenv(progress.ENV, raising=False)
    progress.report("steps", 1, 10)  # no file named: nothing written, nothing raised
    monkeypatch.setenv(progress.ENV, str(tmp_path / "gone" / "progress.json"))
    progress.report("steps", 10, 10)  # its folder removed: nothing raised
    assert not (tmp_path / "gone").exists()
    monkeypatch.setenv(progress.ENV, str(tmp_path / "progress.json"))
    progress.report("steps", 10, 10)
    record = progress.read(tmp_path / "progress.json")
    assert record["done"] == 10 and record["total"] == 10
    assert progress.describe(
        {"what": "SFT steps", "done": 1200, "total": 4200, "rate_per_s": 1.1, "left_s": 2700}
    ) == ("SFT steps 1,200/4,200 · 1.10/s · 45 min left")


def test_a_second_pass_of_the_same_count_starts_its_own_rate_and_a_bad_record_is_skipped(tmp_path, monkeypatch):
    """Two held-out passes in a row both report "questions answered" from 1: the second's rate counts from its own
    start (not the first's); a record the watcher cannot read leaves its thread alive; leaving removes whatever a
    killed writer left in the watcher's folder."""
    from venus_utils.core import progress

    clock = iter(range(0, 1000, 2))  # every call two seconds later
    monkeypatch.setattr(progress.time, "monotonic", lambda: float(next(clock)))
    monkeypatch.setattr(progress, "_counts", {})
    monkeypatch.setenv(progress.ENV, str(tmp_path / "progress.json"))
    for done in range(1, 11):
        progress.report("questions answered", done, 10)
    for done in range(1, 4):
        progress.report("questions answered", done, 10)
    record = progress.read(tmp_path / "progress.json")
    assert record["done"] == 3 and record["rate_per_s"] == pytest.approx(0.5)  # 2 questions in 4 s, not in 24 s

    shown = []
    monkeypatch.delenv(progress.ENV)
    with progress.ProgressWatcher(shown.append, interval=0.05) as watcher:
        watcher.path.write_text('["not", "a", "record"]')
        time.sleep(0.3)
        watcher.path.write_text(json.dumps({"what": "SFT steps", "done": 5, "total": 10}))
        (watcher.path.parent / ".progress.json.123.tmp").write_text("half")
        time.sleep(0.3)
    assert shown[-1] == "SFT steps 5/10" and not watcher.path.parent.exists()


def test_seed_runs_the_profile_with_another_seed_and_records_it(project):
    """--seed N: the profile with seed N, named <profile>-seedN; the run's profile.yaml says so and loads back."""
    from venus_utils.core.profiles import load_profile

    tmp_path, nbs, params = project
    out = tmp_path / "runs"
    run_pipeline(params, out, notebooks_dir=nbs, progress=False, seed=31)
    first = json.loads((out / "00_first" / "summary.json").read_text())
    assert first["seed"] == 31 and first["profile"] == "t-seed31" and first["value"] == 7
    kept = load_profile(out / "profile.yaml")
    assert kept.name == "t-seed31" and kept.shared["seed"] == 31 and kept.sections == load_profile(params).sections
    with pytest.raises(ConfigError, match="--seed -1"):
        run_pipeline(params, out, notebooks_dir=nbs, progress=False, seed=-1)


def test_a_profile_with_a_base_and_stages_runs_its_stages_and_records_every_inherited_value(project):
    """``base:`` inherits the other profile's values; ``stages:`` runs only those stages; the run's profile.yaml is
    the resolved profile; a change to the base makes the run stale for --resume."""
    from venus_utils.core.profiles import load_profile

    tmp_path, nbs, params = project
    child = tmp_path / "c.yaml"
    child.write_text("base: p\nprofile: c\nstages: [0]\n")
    out = tmp_path / "runs"
    assert [r.stage for r in run_pipeline(child, out, notebooks_dir=nbs, progress=False)] == ["00_first"]
    first = json.loads((out / "00_first" / "summary.json").read_text())
    assert (first["value"], first["seed"], first["profile"]) == (7, 11, "c")
    kept = load_profile(out / "profile.yaml")
    assert kept.shared == {"seed": 11} and kept.sections == {"00_first": {"value": 7}} and kept.stages == ["0"]
    assert [r.status for r in run_pipeline(child, out, resume=True, notebooks_dir=nbs, progress=False)] == ["skipped"]
    later = time.time() + 5
    os.utime(params, (later, later))  # the base changed: the stage is stale
    assert [r.status for r in run_pipeline(child, out, resume=True, notebooks_dir=nbs, progress=False)] == ["ran"]
    child.write_text("base: p\nstages: [7]\n")
    with pytest.raises(ConfigError, match=r"c.yaml: stages names unknown stages \['7'\]"):
        run_pipeline(child, out, notebooks_dir=nbs, progress=False)
