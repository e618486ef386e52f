"""The RL stage's command line: its question file (the paper profile names one), and the GRPO arm beside IGPO."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import psutil
import pytest

from venus_utils.core.paths import REPO_ROOT
from venus_utils.core.profiles import ConfigError

from .conftest import run_cli


def test_paper_profile_without_rl_questions_fails_before_anything_loads(tmp_path, capsys):
    from venus_utils.rl.__main__ import main as rl_main

    argv = ["train", "--params", str(REPO_ROOT / "params" / "paper.yaml"), "--run-dir", str(tmp_path)]
    assert rl_main(argv) == 2
    err = capsys.readouterr().err
    assert "train_qa is not set" in err and "04_igpo_rl section" in err and "Traceback" not in err
    assert not (tmp_path / "04_igpo_rl").exists()  # no stage folder, no model loaded
    assert (
        rl_main(argv + ["--set", "train_qa=data/no_such_rl_questions.parquet"]) == 2
    )  # relative: not checked earlier
    assert "train_qa names data/no_such_rl_questions.parquet, which is not a file" in capsys.readouterr().err
    assert not (tmp_path / "04_igpo_rl").exists()


def test_rl_question_file(tmp_path):
    from venus_utils.rl.training_rows import rl_question_file

    qa = tmp_path / "rl.parquet"
    qa.write_bytes(b"")
    assert rl_question_file(str(qa), None) == qa
    assert rl_question_file(str(qa), tmp_path / "world") == qa  # train_qa wins over the offline world
    assert rl_question_file(None, tmp_path / "world") == tmp_path / "world" / "qa" / "train.parquet"
    with pytest.raises(ConfigError, match="train_qa"):
        rl_question_file(None, None)
    with pytest.raises(FileNotFoundError, match="train_qa"):
        rl_question_file(str(tmp_path / "nope.parquet"), tmp_path / "world")


def test_grpo_arm_refuses_a_search_cost(tmp_path, capsys):
    from venus_utils.rl.__main__ import main as rl_main

    argv = [
        "train",
        "--params",
        str(REPO_ROOT / "params" / "smoke.yaml"),
        "--run-dir",
        str(tmp_path),
        "--set",
        "reward_mode=grpo",
        "--set",
        "search_cost=0.1",
    ]
    assert rl_main(argv) == 2
    assert "reward_mode=grpo has none" in capsys.readouterr().err and not (tmp_path / "04_igpo_rl").exists()


@pytest.mark.slow
@pytest.mark.parametrize("parallel", [False, True], ids=["one-after-the-other", "parallel"])
def test_both_arms_from_the_same_sft_model_each_in_its_own_folder(micro_run, tmp_path, parallel):
    """``python -m venus_utils.rl arms``: IGPO in 04_igpo_rl and the outcome-only GRPO arm in 04_igpo_rl_grpo, from the
    same SFT model, questions, seed and budget (issue 21: one command for both arms), then their comparison; with
    ``--parallel`` the two arms train at once, each in a process of its own with its log beside its folder."""
    run = tmp_path / "run"
    shutil.copytree(micro_run, run, symlinks=True)
    shutil.copytree(run / "00_setup" / "tiny_model", run / "03_sft_unsloth" / "model")  # stands in for the SFT model
    (run / "03_sft_unsloth" / "summary.json").write_text('{"stage": "03_sft_unsloth"}')
    out = run / "04_igpo_rl_grpo"
    run_cli(
        [
            "-m",
            "venus_utils.rl",
            "arms",
            "--arms",
            "igpo,grpo",
            "--params",
            "params/smoke.yaml",
            "--run-dir",
            str(run),
            "--set",
            "filter_samples=0",
            "--set",
            "max_steps=1",
            "--set",
            "max_turns=2",
            "--set",
            "max_tokens_per_turn=16",
            *(["--parallel"] if parallel else []),
        ],
        timeout=600,
    )
    summary = json.loads((out / "summary.json").read_text())
    assert summary["reward_mode"] == "grpo" and summary["config"]["reward_mode"] == "grpo" and summary["steps"] == 1
    assert summary["sft_model"] == str(run / "03_sft_unsloth" / "model")
    igpo = json.loads((run / "04_igpo_rl" / "summary.json").read_text())
    assert igpo["reward_mode"] == "igpo" and igpo["steps"] == 1 and igpo["rl_questions"] == summary["rl_questions"]
    arms = json.loads((run / "arms.json").read_text())
    assert arms["training"]["parallel"] is parallel and set(arms["training"]["wall_seconds"]) == {"IGPO", "GRPO"}
    logs = {name: run / f"{name}.log" for name in ("04_igpo_rl", "04_igpo_rl_grpo")}
    if parallel:  # each arm's own output, ending with its last line
        assert (
            "1 steps (igpo)" in logs["04_igpo_rl"].read_text()
            and "1 steps (grpo)" in logs["04_igpo_rl_grpo"].read_text()
        )
    else:
        assert not any(log.exists() for log in logs.values())
    assert [(c["baseline"], c["model"]) for c in arms["comparisons"]] == [
        ("SFT", "RL (IGPO)"),
        ("SFT", "RL (GRPO)"),
        ("RL (GRPO)", "RL (IGPO)"),
    ]
    sft_igpo, sft_grpo, igpo_grpo = arms["comparisons"]
    assert "no held-out results" in sft_igpo["error"] and "heldout_sft.parquet" in sft_grpo["error"]  # no 03 run here
    assert igpo_grpo["n"] > 0 and igpo_grpo["detectable_difference"] > 0 and "verdict" in igpo_grpo  # paired arms
    episodes = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert episodes and all(e["turn_rewards"] == [None] * (e["num_turns"] - 1) for e in episodes)
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert any("groups_with_signal" in m for m in metrics)
    card = (out / "model" / "README.md").read_text()
    assert (
        "| reward mode | grpo |" in card
        and str(run / "03_sft_unsloth" / "model") in card
        and "| profile | smoke |" in card
    )
    assert [p.relative_to(out).as_posix() for p in out.rglob("README.md")] == ["model/README.md"]


def test_parallel_arms_that_fail_are_named_with_the_end_of_their_logs(tmp_path, capsys):
    """``rl arms --parallel``: an arm whose process fails (here: the run folder is empty) is named with its exit code,
    its log and the log's last lines; the command exits 2 without a traceback.  An SFT model whose summary says it
    did not converge is named before the arms start."""
    from venus_utils.rl.__main__ import main as rl_main

    (tmp_path / "03_sft_unsloth").mkdir()
    budget = {"eval_loss_last": 0.0701, "converged_eval_loss": 0.01, "converged": False}
    (tmp_path / "03_sft_unsloth" / "summary.json").write_text(json.dumps({"training_budget": budget}))
    argv = ["arms", "--parallel", "--params", str(REPO_ROOT / "params" / "smoke.yaml"), "--run-dir", str(tmp_path)]
    assert rl_main(argv) == 2
    out, err = capsys.readouterr()
    assert "[arms] WARNING: SFT has not converged: validation loss 0.0701 > 0.01" in out
    assert "arms that failed" in err and "IGPO (exit code 2" in err and "GRPO (exit code 2" in err
    assert "Run notebooks/00_setup.ipynb first" in err and "Traceback" not in err
    assert (tmp_path / "04_igpo_rl.log").exists() and (tmp_path / "04_igpo_rl_grpo.log").exists()
    assert not (tmp_path / "arms.json").exists()


@pytest.mark.slow
def test_the_control_arm_continues_the_stopped_sft_run_for_the_igpo_arms_flops(micro_run, tmp_path):
    """Issue 40's control: ``rl arms --arms igpo,control`` trains IGPO, then continues the stopped SFT run from its
    last checkpoint (weights, optimizer, data order) on the same data, from the learning rate it stopped at down to
    the floor, for as many steps as the IGPO arm's counted FLOPs buy; both are scored on the held-out questions and
    compared with SFT and with each other."""
    run = tmp_path / "run"
    shutil.copytree(micro_run, run, symlinks=True)
    sft = ["--params", "params/smoke.yaml", "--run-dir", str(run)]
    sft_train = ["-m", "venus_utils.sft", "train", *sft, "--set", "max_steps=3", "--set", "save_steps=3"]
    run_cli(sft_train, timeout=300)
    trained = json.loads((run / "03_sft_unsloth" / "summary.json").read_text())["train_wall_s"]
    run_cli(sft_train, timeout=300)  # finished: trains nothing, and reports the time it trained
    again = json.loads((run / "03_sft_unsloth" / "summary.json").read_text())
    assert again["train_wall_s"] == trained > 0 and again["steps"] == 3
    rl_sets = ["filter_samples=0", "max_steps=1", "max_turns=2", "max_tokens_per_turn=16", "heldout_n=4"]
    args = [
        "-m",
        "venus_utils.rl",
        "arms",
        "--arms",
        "igpo,control",
        *sft,
        *(x for s in rl_sets for x in ("--set", s)),
    ]
    run_cli(args, timeout=600)
    igpo = json.loads((run / "04_igpo_rl" / "summary.json").read_text())
    control = json.loads((run / "04_igpo_rl_control" / "summary.json").read_text())
    assert igpo["train_flops"] > 0 and control["budget_flops"] == igpo["train_flops"]
    assert control["start_step"] == 3 and control["steps"] >= 1
    assert control["continued_from"] == "03_sft_unsloth/checkpoints/checkpoint-3"
    # the FLOPs it counted are the plan's (each step costed on the batches it reads), within one step of the budget
    assert control["train_flops"] == pytest.approx(control["planned_flops"], rel=1e-9)
    assert abs(control["train_flops"] - control["budget_flops"]) <= control["step_flops_estimate"] * 1.2
    history = json.loads((run / "04_igpo_rl_control" / "train_history.json").read_text())
    rates = [h["learning_rate"] for h in history if h.get("step", 0) > 3 and "learning_rate" in h]
    assert rates and rates[0] <= control["learning_rate_start"] and rates == sorted(rates, reverse=True)
    assert (run / "04_igpo_rl_control" / "model" / "config.json").is_file()
    arms = json.loads((run / "arms.json").read_text())
    pairs = [(c["baseline"], c["model"]) for c in arms["comparisons"] if c.get("slice", "all") == "all"]
    assert pairs == [("SFT", "RL (IGPO)"), ("SFT", "more SFT"), ("more SFT", "RL (IGPO)")]
    assert arms["training"]["train_flops"]["more SFT"] == control["train_flops"]
    assert all(c["n"] == 4 for c in arms["comparisons"] if "n" in c)

    out = run_cli(args, timeout=600).stdout  # again: both finished, reused as they are (their time kept)
    assert f"[arms] more SFT: finished in {run / '04_igpo_rl_control'}, reused" in out
    again = json.loads((run / "04_igpo_rl_control" / "summary.json").read_text())
    assert again == control and again["train_wall_s"] > 0.5  # the summary untouched: its time is the arm's own


def test_finished_arms_are_reused_as_they_are_not_resumed(tmp_path, monkeypatch, capsys):
    """Issue 40, seed 20: ``rl arms --arms igpo,grpo,control`` after notebook 04 had trained the IGPO arm refused it
    ("its checkpoints were made with other settings": the notebook's reward cells are functions of their own). A
    finished arm (its summary: the same reward mode, all its steps) is reused without training; a summary of another
    arm is named in one line; the comparisons are written either way."""
    import pandas as pd

    from venus_utils.core.io import read_json, write_json
    from venus_utils.eval import heldout as ho
    from venus_utils.rl import __main__ as cli

    scored = pd.DataFrame({"id": list("abcd"), "correct": [1.0, 0.0, 1.0, 0.0], "turns": 3})
    (tmp_path / "03_sft_unsloth").mkdir()
    scored.to_parquet(tmp_path / ho.SCORED["SFT"])
    for label, mode in (("IGPO", "igpo"), ("GRPO", "grpo")):
        folder = tmp_path / ho.RL_ARMS[label]
        folder.mkdir()
        settings = {"dynamic_sampling": {"value": False, "from": "notebook default"}}  # notebook 04's record
        write_json(folder / "summary.json", {"steps": 2, "reward_mode": mode, "settings": settings})
        scored.assign(correct=[1.0, 1.0, 1.0, 0.0]).to_parquet(folder / "heldout_rl.parquet")

    def no_training(*_):
        raise AssertionError("a finished arm was trained again")

    monkeypatch.setattr(cli, "train", no_training)
    argv = ["arms", "--arms", "igpo,grpo", "--params", str(REPO_ROOT / "params" / "smoke.yaml")]
    assert cli.main([*argv, "--run-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"[arms] IGPO: finished in {tmp_path / '04_igpo_rl'}, reused" in out
    pairs = [(c["baseline"], c["model"]) for c in read_json(tmp_path / "arms.json")["comparisons"]]
    assert pairs == [("SFT", "RL (IGPO)"), ("SFT", "RL (GRPO)"), ("RL (GRPO)", "RL (IGPO)")]

    smoke = {"reward_mode": "igpo", "max_steps": 2, "max_time_minutes": None}
    assert cli.finished_arm(tmp_path / "04_igpo_rl", smoke)
    assert not cli.finished_arm(tmp_path / "nothing_here", smoke)  # not finished: train resumes it
    with pytest.raises(ValueError, match="not this arm's"):
        cli.finished_arm(tmp_path / "04_igpo_rl_grpo", smoke)  # the GRPO arm's folder holds GRPO, not IGPO
    with pytest.raises(ValueError, match="with 2 steps, not this arm's .* with 40 steps"):
        cli.finished_arm(tmp_path / "04_igpo_rl", {**smoke, "max_steps": 40})
    assert cli.finished_arm(tmp_path / "04_igpo_rl", {**smoke, "max_steps": 40, "max_time_minutes": 5.0})
    assert cli.main([*argv, "--run-dir", str(tmp_path), "--set", "max_steps=3"]) == 2
    assert "move that folder away to train the arm" in capsys.readouterr().err


def _arm_processes(parent: psutil.Process) -> list[psutil.Process]:
    try:
        return [p for p in parent.children(recursive=True) if "venus_utils.rl" in " ".join(p.cmdline())]
    except psutil.Error:
        return []


def _start_parallel_arms(micro_run, tmp_path):
    """``rl arms --parallel`` on a copy of the micro run, once both trainers are in their training loops: ``(process,
    run folder, the trainers, their logs)``."""
    run = tmp_path / "run"
    shutil.copytree(micro_run, run, symlinks=True)
    shutil.copytree(run / "00_setup" / "tiny_model", run / "03_sft_unsloth" / "model")
    (run / "03_sft_unsloth" / "summary.json").write_text('{"stage": "03_sft_unsloth"}')
    logs = [run / "04_igpo_rl.log", run / "04_igpo_rl_grpo.log"]
    for log in logs:
        log.write_text("an earlier call's line\n")
    cmd = [sys.executable, "-m", "venus_utils.rl", "arms", "--arms", "igpo,grpo", "--parallel"]
    cmd += ["--params", "params/smoke.yaml", "--run-dir", str(run), "--set", "max_steps=500"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    parent, deadline, arms = psutil.Process(proc.pid), time.monotonic() + 180, []
    while time.monotonic() < deadline and proc.poll() is None:
        arms = _arm_processes(parent)
        # both trainers started and have their folders (they hold their locks from then on)
        if len(arms) == 2 and all((run / d / ".venus.lock").is_file() for d in ("04_igpo_rl", "04_igpo_rl_grpo")):
            break
        time.sleep(0.3)
    else:
        proc.kill()
        pytest.fail(f"the arms never started: {proc.communicate(timeout=30)}")
    time.sleep(3)  # into their training loops
    return proc, run, arms, logs


def _nothing_left(run, arms) -> None:
    groups = {os.getpgid(p.pid) for p in arms if p.is_running()} | {p.pid for p in arms}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and [p for p in arms if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]:
        time.sleep(0.5)
    assert not [p.pid for p in arms if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not [p.pid for p in psutil.process_iter() if _pgid(p.pid) in groups and not _zombie(p)]
    for folder in ("04_igpo_rl", "04_igpo_rl_grpo"):  # nobody holds an arm's lock: a rerun may take it
        assert _lock_free(run / folder / ".venus.lock", deadline), folder


def _lock_free(path, deadline: float) -> bool:
    """Whether the lock file's flock can be taken (tried until ``deadline``: a loaded machine ends processes late)."""
    while True:
        with open(path, "a") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                if time.monotonic() > deadline:
                    return False
        time.sleep(0.5)


@pytest.mark.slow
@pytest.mark.parametrize("signum, status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_to_parallel_arms_leaves_no_trainer_running(micro_run, tmp_path, signum, status):
    """``rl arms --parallel`` stopped by SIGTERM or SIGINT ends both arms' trainers (each in a session of its own, so
    nothing is orphaned under PID 1 holding its folder's lock), says so in one line, exits 128 + the signal; each
    arm's log keeps what it held before, with a header per call (never truncated under a live writer)."""
    proc, run, arms, logs = _start_parallel_arms(micro_run, tmp_path)
    try:
        assert os.getpgid(proc.pid) not in {os.getpgid(p.pid) for p in arms}  # each trainer in a session of its own
        proc.send_signal(signum)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == status, stderr[-3000:]
    said = [line for line in stderr.splitlines() if "stopped by" in line]
    assert len(said) == 1 and signal.Signals(signum).name in said[0] and "same command again" in said[0], stderr
    assert "Traceback" not in stderr, stderr[-3000:]
    _nothing_left(run, arms)
    for log in logs:
        text = log.read_text()
        assert text.startswith("an earlier call's line\n") and "\n== " in text and "venus_utils.rl train" in text


@pytest.mark.slow
def test_arms_end_when_rl_arms_is_killed_outright(micro_run, tmp_path):
    """SIGKILL reaches no handler: the arms' trainers are told by the kernel (a parent-death signal) and stop."""
    proc, run, arms, _ = _start_parallel_arms(micro_run, tmp_path)
    proc.kill()
    proc.communicate(timeout=60)
    _nothing_left(run, arms)


def _zombie(proc: psutil.Process) -> bool:  # ended, not yet reaped (an orphan's parent is now PID 1)
    try:
        return proc.status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return True


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


class _AnyAnswer:
    """A judge that accepts every answer: the micro model answers nothing (right), and the arm's sampling, filtering
    and FLOP match need right answers to keep."""

    name = "any-answer"

    def judge_many(self, items, progress=False):
        from venus_utils.judging.judge import Verdict

        return [Verdict(True, "offline", self.name) for _ in items]

    def describe(self) -> str:
        return self.name


def test_the_rejection_sampling_arm_samples_filters_and_fine_tunes_for_the_budget(micro_run, tmp_path):
    """``rl.rejection``: the stopped SFT model samples the IGPO arm's questions (as many rollouts as its steps make),
    the judged-right trajectories are kept (trained on their sampled tokens only), and SFT continues on them from the
    stopped checkpoint for the budget less the sampling's FLOPs: counted in full, within 15% of the budget at a size
    that buys several steps. A rerun reuses the samples and the finished training."""
    from venus_utils.rl.config import IGPOConfig
    from venus_utils.rl.rejection import SAMPLES_FILE, SAMPLING_FILE, train_rft_arm
    from venus_utils.run.cli import stage_params
    from venus_utils.sft.config import SFTConfig
    from venus_utils.sft.continuation import planned_steps, step_flops

    run = tmp_path / "run"
    shutil.copytree(micro_run, run, symlinks=True)
    sft = ["--params", "params/smoke.yaml", "--run-dir", str(run)]
    run_cli(["-m", "venus_utils.sft", "train", *sft, "--set", "max_steps=3", "--set", "save_steps=3"], timeout=300)
    sets = {"filter_samples": 0, "max_steps": 2, "max_turns": 2, "max_tokens_per_turn": 12, "heldout_n": 4}
    params, _ = stage_params(REPO_ROOT / "params" / "smoke.yaml", "04_igpo_rl", sets)
    cfg = IGPOConfig.from_params(params)
    kw = dict(train_questions=params["train_questions"], heldout_n=4, judge=_AnyAnswer(), progress=False)
    arm = run / "04_igpo_rl_rft"
    with pytest.raises(ValueError, match="nothing is left for SFT"):  # a budget the sampling alone spends
        train_rft_arm(run, 1.0, cfg, **kw)
    record = json.loads((arm / SAMPLING_FILE).read_text())
    assert record["rollouts"] == 2 * cfg.prompts_per_step * cfg.num_generations
    assert record["kept"] + sum(record["dropped"].values()) == record["rollouts"] and record["kept"] > 0
    kept = [json.loads(line) for line in (arm / SAMPLES_FILE).read_text().splitlines()]
    for row in kept:  # the prompt is never trained on; the sampled tokens are
        assert len(row["labels"]) == len(row["input_ids"]) == row["length"] and 0 < row["n_loss"] < row["length"]
        assert row["labels"][0] == -100 and all(x in (-100, t) for x, t in zip(row["labels"], row["input_ids"]))
    sft_settings = json.loads((run / "03_sft_unsloth" / "summary.json").read_text())["settings"]
    sft_cfg = SFTConfig.from_params({k: v["value"] for k, v in sft_settings.items()}, engine="trl")
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(run / "00_setup" / "tiny_model")
    per_step = step_flops(kept, sft_cfg, config)
    budget = record["sampling_flops"] + 8 * per_step  # several steps: the match is tested to 15%
    steps, planned = planned_steps(kept, sft_cfg, config, 3, 8 * per_step)
    summary = train_rft_arm(run, budget, cfg, **kw)
    assert summary["steps"] == steps == 8 and summary["start_step"] == 3
    assert summary["sampling_flops"] == record["sampling_flops"] > 0 and summary["finetune_flops"] > 0
    assert summary["finetune_flops"] == pytest.approx(planned, rel=1e-9)  # the steps the plan costed, counted
    assert summary["train_flops"] == summary["sampling_flops"] + summary["finetune_flops"]
    assert abs(summary["train_flops"] / budget - 1) <= 0.15, summary
    history = json.loads((arm / "train_history.json").read_text())
    rates = [h["learning_rate"] for h in history if h.get("step", 0) > 3 and "learning_rate" in h]
    assert rates[0] == summary["learning_rate_start"] == 0.002 and len(rates) == 8  # every step logged, its FLOPs too
    # a cosine from the stopped rate to the floor (0 in smoke), pinned a quarter of the way:
    # 0.002 x (1 + cos(pi/4)) / 2 (a linear decay gives 0.0015 there)
    assert rates[2] == pytest.approx(0.0017071067811865474, rel=1e-9) and rates == sorted(rates, reverse=True)
    assert (arm / "model" / "config.json").is_file() and (arm / "heldout_rl.parquet").is_file()
    assert summary["heldout_comparison"]["n"] == 4
    again = train_rft_arm(run, budget, cfg, **kw)  # samples and training reused
    assert again["steps"] == 8 and again["sampling"] == summary["sampling"]


def test_a_finished_arm_of_another_sft_model_is_not_reused(tmp_path):
    """SFT retrained in the same run folder: an RL arm finished from the old SFT model (the digest its summary
    records) is refused in one line, not paired with cheaper arms continued from the new one."""
    from venus_utils.core.checkpoints import local_model_digest
    from venus_utils.core.io import write_json
    from venus_utils.rl import __main__ as cli

    sft = tmp_path / "03_sft_unsloth" / "model"
    sft.mkdir(parents=True)
    (sft / "model.safetensors").write_bytes(b"the first SFT model")
    arm = tmp_path / "04_igpo_rl"
    arm.mkdir()
    write_json(arm / "summary.json", {"steps": 2, "reward_mode": "igpo", "sft_model_digest": local_model_digest(sft)})
    asked = {"reward_mode": "igpo", "max_steps": 2, "max_time_minutes": None}
    assert cli.finished_arm(arm, asked, sft)
    (sft / "model.safetensors").write_bytes(b"SFT trained again")
    with pytest.raises(ValueError, match="trained from another SFT model"):
        cli.finished_arm(arm, asked, sft)
    assert cli.finished_arm(arm, asked, tmp_path / "no_sft_model_here")  # nothing here to compare: reused as before


def test_a_cheaper_arm_is_reused_only_when_matched_to_this_budget_and_run_as_asked(tmp_path):
    """A finished control or rejection-sampling arm is reused as it is when its summary records the IGPO arm's
    budget (a retrained IGPO arm changes it) and, for rejection sampling, the rollouts asked for (a summary without
    the key ran the default); anything else is trained on."""
    from venus_utils.core.io import write_json
    from venus_utils.rl import __main__ as cli

    assert not cli.finished_cheaper_arm(tmp_path, 5e12)  # no summary
    write_json(tmp_path / "summary.json", {"budget_flops": 5e12, "steps": 7})
    assert not cli.finished_cheaper_arm(tmp_path, 5e12)  # no model: not finished
    write_json(tmp_path / "summary.json", {"budget_flops": 5e12, "steps": 7, "model_dir": "m"})
    assert cli.finished_cheaper_arm(tmp_path, 5e12)
    assert not cli.finished_cheaper_arm(tmp_path, 5.1e12)  # the IGPO arm was trained again
    assert cli.finished_cheaper_arm(tmp_path, 5e12, rft_rollouts="trained")  # an older summary: the default
    assert not cli.finished_cheaper_arm(tmp_path, 5e12, rft_rollouts="rolled_out")
    write_json(tmp_path / "summary.json", {"budget_flops": 5e12, "model_dir": "m", "rft_rollouts": "rolled_out"})
    assert cli.finished_cheaper_arm(tmp_path, 5e12, rft_rollouts="rolled_out")
    assert not cli.finished_cheaper_arm(tmp_path, 5e12, rft_rollouts="trained")


def test_rl_arms_rejection_sampling_samples_as_the_profile_says(tmp_path, monkeypatch):
    """``rl arms --arms ...,rft`` reads the IGPO arm's ``metrics.jsonl``: ``rft_rollouts=trained`` (the default)
    samples its steps x prompts_per_step groups, ``rolled_out`` as many as dynamic sampling rolled out; the budget is
    the IGPO arm's counted FLOPs."""
    import argparse

    from venus_utils.core.io import write_json, write_jsonl
    from venus_utils.eval import heldout as ho
    from venus_utils.rl import __main__ as cli

    folder = tmp_path / ho.RL_ARMS["IGPO"]
    folder.mkdir()
    write_json(folder / "summary.json", {"steps": 2, "reward_mode": "igpo"})
    steps = [{"step": s, "loss": 0.1, "flops": 5e9, "groups_sampled": 6.0, "groups_dropped": 4.0} for s in (1, 2)]
    write_jsonl(folder / "metrics.jsonl", steps)
    seen = []
    from venus_utils.rl.rejection import rft_groups

    def sampled(run, budget, cfg, **kw):
        seen.append((budget, rft_groups(kw["rl_log"], cfg, kw["rollouts"])))

    monkeypatch.setattr(cli, "train_rft_arm", sampled)
    for sets, groups in (([], 2 * 2), (["rft_rollouts=rolled_out"], 2 * 6)):  # smoke: 2 prompts per step
        args = argparse.Namespace(params=str(REPO_ROOT / "params" / "smoke.yaml"), sets=["max_steps=2", *sets])
        cli.rft(args, tmp_path)
        assert seen[-1] == (1e10, groups)
