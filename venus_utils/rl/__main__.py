"""The IGPO stage from the command line, the way notebook 04 runs it, under any launcher.

    python -m venus_utils.rl train --params params/smoke.yaml [--run-dir runs/smoke] [--out DIR] [--set max_steps=2]
    accelerate launch --config_file params/accelerate/single_node_8gpu.yaml \
        -m venus_utils.rl train --params params/paper.yaml
    python -m venus_utils.rl train --params params/cpu.yaml --set reward_mode=grpo --out runs/cpu/04_igpo_rl_grpo
    python -m venus_utils.rl train --params params/cpu.yaml --set dynamic_sampling=true --out runs/cpu/04_igpo_rl_ds
    python -m venus_utils.rl arms --params params/cpu.yaml [--arms igpo,grpo]   # both arms, then compared
    python -m venus_utils.rl arms --params params/cpu.yaml --parallel           # both at once, one process each
    python -m venus_utils.rl arms --params params/cpu.yaml --arms igpo,grpo,control  # and more SFT for IGPO's FLOPs
    python -m venus_utils.rl arms --params params/cpu.yaml --arms igpo,grpo,control,rft  # and rejection sampling

It reads the ``04_igpo_rl`` parameters (the lesson's values of :mod:`venus_utils.core.defaults`, as in the notebook <
profile < ``--set``), starts from ``03_sft_unsloth/model`` (or ``sft_model``), rolls out with the offline world's tools
(``00_setup/world``) or the web tools, and trains with :class:`venus_utils.rl.igpo_trainer.IGPOTrainer` and DR-Venus's
default turn / outcome rewards (plus the notebook's optional ``search_cost``), or with ``--set reward_mode=grpo`` the
outcome-only GRPO baseline: the same SFT model, seed, questions and budget, only the rewards differ. Give that arm its
own ``--out`` folder (relative paths are taken from the working directory: run from the repository root) so that both
arms sit side by side in the run folder (:data:`venus_utils.eval.heldout.RL_ARMS` lists the folders notebooks 04 and 05
compare); a folder's checkpoints are never resumed with other settings. Every process rolls out its share of each
step's ``prompts_per_step x num_generations`` episodes; advantages are computed over the gathered batch. It writes
``model/`` (with a ``README.md`` model card), ``metrics.jsonl``, ``episodes.jsonl``, the newest ``checkpoint-N/``
folders (``save_total_limit``) and ``summary.json``; a rerun resumes from the newest checkpoint. The RL questions are
``train_qa`` (the paper profile: REDSearcher's RL set, verl parquet), else the offline world's RL split
``qa/rl.parquet`` (else its ``qa/train.parquet``). When the run has a held-out set (notebook 03 draws it), the SFT and
RL models are scored on it greedily, as in notebook 04 (``heldout_rl.parquet`` and the summary).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from ..core.checkpoints import local_model_digest
from ..core.distributed import is_main_process, world_size
from ..core.io import read_json, read_jsonl, write_json
from ..core.paths import CONTROL_DIR, RFT_DIR, SFT_STAGE
from ..core.stage import SUMMARY, Stage, resolve_run_dir
from ..core.stopping import end_processes
from ..eval import heldout as ho
from ..judging.judge import Judge, judge_function
from ..run.cli import parse_sets, run_cli, stage_params
from ..sft.diagnostics import convergence_note
from ..tools import make_toolbox
from .config import RFT_ROLLOUTS, IGPOConfig
from .control import train_control_arm
from .policy import load_policy
from .rejection import train_rft_arm
from .rewards import reward_functions
from .stage import (
    STAGE,
    budget_flops,
    filter_questions,
    heldout_eval,
    heldout_scores,
    resume,
    save_model,
    sft_model_dir,
    stage_inputs,
    summary_figures,
    train_policy,
)
from .training_rows import qa_rows


def train(args: argparse.Namespace) -> dict:
    """The steps of :mod:`venus_utils.rl.stage`, back to back, as notebook 04 runs them."""
    params, profile = stage_params(args.params, STAGE, parse_sets(args.sets))
    cfg = IGPOConfig.from_params(params)
    turn_reward, outcome_reward = reward_functions(cfg)
    # inputs first: a missing question file or upstream stage fails before the stage folder or any model exists
    stage = Stage(STAGE, args.run_dir or f"runs/{profile}", args.out, profile)
    stage.record_settings(params)
    sft_dir, world_dir, train_file = stage_inputs(stage, params["offline"], params["train_qa"], params["sft_model"])
    stage.dir.mkdir(parents=True, exist_ok=True)
    model, tokenizer = load_policy(sft_dir, params["device"], lora=cfg.lora_r > 0)
    grader = Judge.from_env(params["judge"])  # one judge: its describe() at the end counts any offline fallbacks
    judge_fn, _ = judge_function(grader)
    tools = make_toolbox("local", world_dir) if params["offline"] else make_toolbox("web")
    train_rows = qa_rows(train_file, params["train_questions"], cfg.seed)
    filter_samples = int(params.get("filter_samples") or 0)
    # DR-Venus's rewards (plus the optional search_cost); the GRPO arm trains on the trainer's own
    rewards = dict(turn_reward=turn_reward, outcome_reward=outcome_reward) if cfg.reward_mode == "igpo" else {}
    point = resume(
        stage,
        cfg,
        sft_dir,
        train_rows,
        filter_samples=filter_samples,
        max_time_minutes=params["max_time_minutes"],
        rewards=rewards,
    )
    train_rows, counts = filter_questions(stage, model, tokenizer, train_rows, tools, judge_fn, cfg, filter_samples)
    trainer = train_policy(
        stage,
        model,
        tokenizer,
        train_rows,
        cfg,
        tools,
        judge_fn,
        point,
        device=params["device"],
        max_time_minutes=params["max_time_minutes"],
        **rewards,
    )
    save_model(stage, trainer, tokenizer, sft_dir)
    comparison: dict = {}
    if is_main_process():
        questions, settings = heldout_eval(
            stage,
            sft_dir,
            params["heldout_qa"],
            world_dir,
            params["heldout_n"],
            cfg.seed,
            params["device"],
            params["heldout_split"],
        )
        if questions is not None:  # the same greedy held-out evaluation as notebooks 03-05
            kw = dict(sft_dir=sft_dir, world_dir=world_dir, tools=tools, judge=grader)
            comparison = ho.compare(
                heldout_scores(stage, "sft", questions, settings, **kw),
                heldout_scores(stage, "rl", questions, settings, **kw),
            )
    summary = dict(
        summary_figures(
            trainer,
            cfg,
            point,
            sft_dir=sft_dir,
            train_file=train_file,
            questions=counts,
            judge=grader.describe(),
            comparison=comparison,
        ),
        launched_from="python -m venus_utils.rl train",
    )
    if is_main_process():
        summary = stage.finish(**summary)
        print(
            f"[rl] {summary['steps']} steps ({cfg.reward_mode}) on {world_size()} process(es); "
            f"model: {stage.path('model')}"
        )
    return summary


#: ``arms`` choices: the --set each arm trains with (on top of the profile and the command's own --set)
ARMS = {
    "igpo": ("IGPO", {"reward_mode": "igpo"}),
    "grpo": ("GRPO", {"reward_mode": "grpo", "search_cost": 0.0}),
    "ds": ("IGPO + dynamic sampling", {"reward_mode": "igpo", "dynamic_sampling": True}),
}
#: the control arm (``--arms ...,control``): not RL, more SFT from the same stopped model for the IGPO arm's FLOPs
CONTROL_ARM = "control"
#: rejection sampling (``--arms ...,rft``): fine-tuning on the SFT model's own right answers, for IGPO's FLOPs
RFT_ARM = "rft"
CHEAPER_ARMS = (CONTROL_ARM, RFT_ARM)


def finished_arm(out: Path, params: dict, sft_dir: Path | None = None) -> bool:
    """Whether the arm folder ``out`` holds a finished run of the arm ``params`` describe (its ``summary.json``: the
    same reward mode and dynamic sampling, all ``max_steps`` steps or a time budget that ended it), which ``arms``
    then reuses as it is. An arm trained by notebook 04 is one: its reward cells are the notebook's own functions,
    so resuming it through :func:`train` would refuse it as "made with other settings". A summary of another arm,
    or of an arm trained from another SFT model than ``sft_dir`` (the digest its summary records), is refused in one
    line (ValueError): its budget and answers would be paired with arms of this SFT model; no summary: not finished
    (``train`` resumes from the checkpoints)."""
    path = out / SUMMARY
    if not path.is_file():
        return False
    done = read_json(path)
    recorded = done.get("sft_model_digest")
    current = local_model_digest(sft_dir) if sft_dir is not None else None  # None: no SFT folder here to compare
    if recorded and current and recorded != current:
        raise ValueError(
            f"{path}: trained from another SFT model than {sft_dir} (its weights differ from the digest the arm "
            "recorded); move that folder away to train the arm from this one"
        )

    def ran_with(key: str):  # a figure of the summary, else the value its settings record kept
        return done[key] if key in done else (done.get("settings", {}).get(key) or {}).get("value")

    asked = {"reward_mode": params["reward_mode"], "dynamic_sampling": bool(params.get("dynamic_sampling"))}
    found = {"reward_mode": ran_with("reward_mode"), "dynamic_sampling": bool(ran_with("dynamic_sampling"))}
    steps_ok = done.get("steps") == params["max_steps"] or params.get("max_time_minutes") is not None
    if found != asked or not steps_ok:
        raise ValueError(
            f"{path}: a finished run of {found} with {done.get('steps')} steps, not this arm's {asked} with "
            f"{params['max_steps']} steps; move that folder away to train the arm"
        )
    return True


def finished_cheaper_arm(out: Path, budget: float, rft_rollouts: str | None = None) -> bool:
    """Whether the arm folder ``out`` holds a finished control or rejection-sampling arm matched to ``budget`` (the
    IGPO arm's counted FLOPs, which a retrained IGPO arm changes) and, for rejection sampling, sampled as
    ``rft_rollouts`` says (a summary without the key ran the default, ``trained``): ``arms`` then reuses it as it is,
    its summary untouched (the time the arm took stays its own, not a rerun's). Otherwise the arm is trained on from
    its checkpoints and samples, as before."""
    path = out / SUMMARY
    if not path.is_file():
        return False
    done = read_json(path)
    sampled = rft_rollouts is None or done.get("rft_rollouts", RFT_ROLLOUTS[0]) == rft_rollouts
    return done.get("budget_flops") == budget and "model_dir" in done and sampled


def igpo_budget(run: Path, arm: str) -> float:
    """The model FLOPs the run's IGPO arm counted (its ``metrics.jsonl``, and its question filter's rollouts, its
    summary's ``rl_questions``: :func:`~.stage.budget_flops`): what the cheaper arms are matched to."""
    metrics = run / ho.RL_ARMS["IGPO"] / "metrics.jsonl"
    summary = run / ho.RL_ARMS["IGPO"] / SUMMARY
    filtered = read_json(summary).get("rl_questions") if summary.is_file() else None
    budget = budget_flops(read_jsonl(metrics), filtered) if metrics.is_file() else None
    if not budget:
        raise ValueError(
            f"{metrics}: no FLOPs to match: train the IGPO arm first (--arms igpo,{arm}); the {arm} arm gets the "
            "model FLOPs it counted (runs made before the count existed have none: train the IGPO arm again)"
        )
    return budget


def rft(args: argparse.Namespace, run: Path) -> dict:
    """The rejection-sampling arm (:func:`venus_utils.rl.rejection.train_rft_arm`): the run's stopped SFT model
    samples the IGPO arm's questions with the RL stage's settings (the profile's and the command's ``--set``), keeps
    its right trajectories and is fine-tuned on them, for the model FLOPs the IGPO arm counted, sampling included.
    A finished arm is not trained again (its samples and checkpoints are reused)."""
    params, profile = stage_params(args.params, STAGE, parse_sets(args.sets))
    return train_rft_arm(
        run,
        igpo_budget(run, RFT_ARM),
        IGPOConfig.from_params(params),
        offline=params["offline"],
        train_qa=params["train_qa"],
        train_questions=params["train_questions"],
        heldout_qa=params["heldout_qa"],
        heldout_n=params["heldout_n"],
        heldout_split=params["heldout_split"],
        rl_log=list(read_jsonl(run / ho.RL_ARMS["IGPO"] / "metrics.jsonl")),
        rollouts=params["rft_rollouts"],
        device=params["device"],
        judge=Judge.from_env(params["judge"]),
        profile=profile,
        launched_from="python -m venus_utils.rl arms",
    )


def control(args: argparse.Namespace, run: Path) -> dict:
    """The control arm (:func:`venus_utils.rl.control.train_control_arm`): the run's stopped SFT model trained on
    with SFT, with the settings its SFT stage ran with, for the model FLOPs the IGPO arm counted (its
    ``metrics.jsonl``); then scored on the held-out questions as the RL arms are (the RL stage's settings: the
    profile's and the command's ``--set``).  A finished control is not trained again."""
    params, profile = stage_params(args.params, STAGE, parse_sets(args.sets))
    return train_control_arm(
        run,
        igpo_budget(run, CONTROL_ARM),
        offline=params["offline"],
        train_qa=params["train_qa"],
        heldout_qa=params["heldout_qa"],
        heldout_n=params["heldout_n"],
        heldout_split=params["heldout_split"],
        seed=params["seed"],
        device=params["device"],
        judge=Judge.from_env(params["judge"]),
        profile=profile,
        launched_from="python -m venus_utils.rl arms",
    )


def _arm_choices(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--arms",
        default="igpo,grpo",
        help=f"comma-separated arms to train from the run's one SFT model ({', '.join([*ARMS, *CHEAPER_ARMS])}; "
        "default igpo,grpo; control: more SFT for the IGPO arm's FLOPs, rft: fine-tuning on the SFT model's own right "
        "answers for the same FLOPs, sampling included; both trained after the RL arms)",
    )
    p.add_argument(
        "--parallel",
        action="store_true",
        help="train the arms at once, one process each with an equal share of the CPU threads (a tiny model's "
        "rollouts gain little from a second thread); each arm's output goes to <run-dir>/<arm folder>.log",
    )


def cpu_threads() -> int:
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


ARM_GRACE_S = 60.0  # seconds an arm has to stop after SIGTERM (a large checkpoint save) before SIGKILL


def _end_with_parent() -> None:
    """In an arm's process, before it runs: the kernel sends it SIGTERM when ``rl arms`` dies, even by SIGKILL (which
    no handler sees), so no arm trains on as an orphan holding its folder (Linux; elsewhere nothing)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _train_in_parallel(params: str, run: Path, jobs: list[tuple[str, Path, list[str]]]) -> dict[str, float]:
    """``python -m venus_utils.rl train`` for each ``(label, folder, --set values)`` of ``jobs`` at once, each in a
    process of its own with ``cpu_threads() // len(jobs)`` threads, its output in ``<folder>.log``.  Waits for all
    of them (a failed arm does not stop the others: their checkpoints are kept); raises naming each failed arm and
    the end of its log.  Returns each arm's wall seconds."""
    if world_size() > 1:
        raise ValueError("--parallel starts one process per arm: under a multi-process launcher, leave it out")
    threads = max(1, cpu_threads() // len(jobs))
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    started, procs = time.perf_counter(), {}
    try:
        for label, out, sets in jobs:
            log = out.parent / f"{out.name}.log"
            cmd = [sys.executable, "-m", "venus_utils.rl", "train", "--params", params, "--run-dir", str(run)]
            cmd += ["--out", str(out), *(x for s in sets for x in ("--set", s))]
            with open(
                log, "a", encoding="utf-8"
            ) as fh:  # appended: an earlier call's lines stay; the child holds its own
                fh.write(f"\n== {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(cmd[1:])}\n")
                fh.flush()
                # a session of its own: a terminal's Ctrl-C reaches this process alone, which ends every arm in order
                child = subprocess.Popen(
                    cmd,
                    stdout=fh,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,
                    preexec_fn=_end_with_parent,
                )
                procs[label] = (child, log)
            pid = procs[label][0].pid
            print(f"[arms] {label}: training in process {pid} ({threads} threads), log {log}", flush=True)
        seconds, failed = {}, []
        while len(seconds) < len(procs):
            for label, (proc, log) in procs.items():
                if label not in seconds and proc.poll() is not None:
                    seconds[label] = round(time.perf_counter() - started, 1)
                    minutes = seconds[label] / 60
                    print(f"[arms] {label}: exit code {proc.returncode} after {minutes:.1f} min", flush=True)
                    if proc.returncode != 0:
                        tail = "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-15:])
                        failed.append(f"{label} (exit code {proc.returncode}; {log}):\n{tail}")
            time.sleep(2)
    finally:  # interrupted: stop the arms still running and wait for them (each resumes from its newest checkpoint)
        running = []
        for proc, _ in procs.values():
            with contextlib.suppress(psutil.Error):
                if proc.poll() is None:
                    running.append(psutil.Process(proc.pid))
        # each arm's session (what the arm started too); time to finish a checkpoint save it is in
        end_processes(running, {p.pid for p in running}, grace=ARM_GRACE_S)
    if failed:
        raise ValueError("arms that failed: " + "\n".join(failed))
    return seconds


def _chosen_arms(args: argparse.Namespace) -> tuple[list[str], str]:
    """``(arms, profile name)`` of an ``arms`` command, refused before anything trains: an unknown arm, ``--out``,
    or a cheaper arm beside an ``sft_model`` (they continue the run's own SFT stage, which RL would not start from)."""
    chosen = [a.strip() for a in args.arms.split(",") if a.strip()]
    unknown = sorted(set(chosen) - set(ARMS) - set(CHEAPER_ARMS))
    if unknown or not chosen:
        raise ValueError(f"--arms {args.arms!r}: choose among {', '.join([*ARMS, *CHEAPER_ARMS])}")
    if args.out is not None:
        raise ValueError("--out: each arm has its own folder (eval.heldout.RL_ARMS); give --run-dir instead")
    params, profile = stage_params(args.params, STAGE, parse_sets(args.sets))
    cheaper = [a for a in chosen if a in CHEAPER_ARMS]
    if params.get("sft_model") and cheaper:
        raise ValueError(
            f"--arms {','.join(cheaper)}: these arms continue the run's own SFT stage, but RL starts from sft_model "
            f"{params['sft_model']}; leave them out, or unset sft_model"
        )
    return chosen, profile


def arms(args: argparse.Namespace) -> dict:
    """Every arm of ``--arms`` from the run's one SFT model, each in its own folder
    (:data:`venus_utils.eval.heldout.RL_ARMS`) with the same questions, seed and budget (only the rewards differ; a
    finished arm is not trained again), then the control when asked (:func:`control`, after the RL arms: it
    is matched to the IGPO arm's FLOPs), then the paired held-out comparisons of
    :func:`venus_utils.eval.heldout.arm_pairs`: each arm against SFT, each RL arm against the control, IGPO against
    GRPO, with the smallest difference the design could detect (``arms.json`` in the run folder; pool several seeds'
    run folders with ``python -m venus_utils.eval compare``)."""
    chosen, profile = _chosen_arms(args)
    run = resolve_run_dir(args.run_dir or f"runs/{profile}")
    sft_summary = run / SFT_STAGE / "summary.json"
    note = convergence_note(read_json(sft_summary).get("training_budget") or {}) if sft_summary.is_file() else None
    if note:  # a warning, not a refusal: RL from such a model is a legitimate (if unpromising) experiment
        print(f"[arms] WARNING: {note}", flush=True)
    jobs = []
    for arm in (a for a in chosen if a not in CHEAPER_ARMS):
        label, sets = ARMS[arm]
        overrides = [*args.sets, *(f"{k}={'true' if v is True else v}" for k, v in sets.items())]
        out = run / ho.RL_ARMS[label]
        params = stage_params(args.params, STAGE, parse_sets(overrides))[0]
        if finished_arm(out, params, sft_model_dir(run, params.get("sft_model"))):
            print(f"[arms] {label}: finished in {out}, reused", flush=True)
            continue
        jobs.append((label, out, overrides))
    parallel = bool(args.parallel and len(jobs) > 1)
    started = time.perf_counter()
    if parallel:
        seconds = _train_in_parallel(args.params, run, jobs)
    else:
        seconds = {}
        for label, out, overrides in jobs:
            print(f"[arms] {label}: {out}", flush=True)
            train(argparse.Namespace(params=args.params, run_dir=str(run), out=str(out), sets=overrides))
            seconds[label] = round(time.perf_counter() - started, 1)
    rft_rollouts = stage_params(args.params, STAGE, parse_sets(args.sets))[0]["rft_rollouts"]
    for arm, label, out, sampled_as, fit in (
        (CONTROL_ARM, ho.CONTROL, run / CONTROL_DIR, None, control),
        (RFT_ARM, ho.RFT, run / RFT_DIR, rft_rollouts, rft),
    ):
        if arm not in chosen:
            continue
        if finished_cheaper_arm(out, igpo_budget(run, arm), sampled_as):
            print(f"[arms] {label}: finished in {out}, reused", flush=True)
        else:
            print(f"[arms] {label}: {out}", flush=True)
            if is_main_process():
                fit(args, run)
        seconds[label] = round(time.perf_counter() - started, 1)
    # how the arms ran: wall seconds from the start of the first arm to the end of each (a finished arm: ~0)
    timing = {"parallel": parallel, "cpu_threads": cpu_threads(), "wall_seconds": seconds}
    labels = ["SFT", *(f"RL ({ARMS[a][0]})" for a in chosen if a not in CHEAPER_ARMS)]
    labels += [ho.CONTROL] if CONTROL_ARM in chosen else []
    labels += [ho.RFT] if RFT_ARM in chosen else []
    rows = []
    for baseline, model in ho.arm_pairs(labels):
        try:  # every question, and the headline slice (hard/heldout) when the world has a hard tier
            found = ho.compare_runs([run], baseline=baseline, model=model).to_dict("records")
        except (FileNotFoundError, ValueError) as exc:  # no held-out set (notebook 03 draws it), or none in common
            found = [{"error": str(exc)}]
        rows += [{"baseline": baseline, "model": model, **row} for row in found]
    flops = {
        label: read_json(path).get("train_flops")
        for label, path in [(lab, run / Path(ho.SCORED[lab]).parent / SUMMARY) for lab in labels[1:]]
        if path.is_file()
    }
    timing["train_flops"] = flops  # the model FLOPs each arm trained with (the control's matched to IGPO's)
    result = {"run": str(run), "arms": chosen, "training": timing, "comparisons": rows}
    if is_main_process():
        write_json(run / "arms.json", result)
        for r in rows:
            if "error" in r:
                print(f"[arms] {r['model']} vs {r['baseline']}: not compared ({r['error']})")
                continue
            print(
                f"[arms] {r['model']} vs {r['baseline']} ({r['slice']}): "
                f"{r['accuracy_after']:.3f} vs {r['accuracy_before']:.3f} "
                f"(n = {r['n']}), difference {r['difference']:+.3f} "
                f"[{r['diff_ci_low']:+.3f}, {r['diff_ci_high']:+.3f}], McNemar p = {r['mcnemar_p']:.3g} "
                f"({r['fixed']} fixed / {r['broken']} broken), detectable difference "
                f"{r['detectable_difference']:.3f}: {r['verdict']}"
            )
    return result


def main(argv: list[str] | None = None) -> int:
    return run_cli(
        "rl",
        "IGPO RL (notebook 04) from the command line.",
        train,
        argv,
        commands={"arms": ("train several reward arms from one SFT model and compare them", _arm_choices, arms)},
    )


if __name__ == "__main__":
    sys.exit(main())
