"""The GPU check: the recipe's GPU route, run end to end in a few minutes on a machine with one NVIDIA GPU.

    make gpu-check-wheels      # here, with the package registries: the wheels the GPU machine lacks, into .whl/
    make gpu-check             # there: python3 with torch, transformers, peft and accelerate; nothing downloaded
    python benchmarks/gpu_check.py [--out runs/gpu-check] [--shape qwen3-0.6b] [--sft-steps 30] [--rl-steps 3]

Four phases, each the recipe's own code path in a process of its own (the stage command lines, the pipeline):

1. ``peak``: the GPU's measured bf16 matmul peak (8192^3, :func:`venus_utils.core.perf.cuda_bf16_peak_gflops`);
   on a machine without CUDA the CPU's own peak (:func:`venus_utils.core.perf.machine_peak`).
2. ``smoke``: ``params/smoke.yaml`` with ``device: cuda`` through the whole pipeline (Papermill, every notebook).
3. ``sft``: a model of Qwen3-0.6B's shape (596M parameters, random weights, built here: nothing downloads) trained
   ``--sft-steps`` optimizer steps on the smoke run's SFT data by ``python -m venus_utils.sft train`` (Unsloth where
   it imports, else TRL; full fine-tuning, bf16 autocast).
4. ``rl``: ``--rl-steps`` IGPO steps of that model by ``python -m venus_utils.rl train``: rollouts of 3 turns of
   64 tokens (a model of random weights calls no tool: every turn runs to its limit, a fixed decode load), the
   information gain, the reference and the update.

Printed and written to ``<out>/gpu_check.json`` (after each phase, so a failure keeps what was measured; the last
check's folder is kept as ``<out>-previous``): each phase's seconds; SFT tokens/s and RL sampled tokens/s over the
steps after the first (the first holds the warm-up); RL seconds per step by phase; each process's peak GPU memory
(``gpu_peak_memory_gib`` of its ``summary.json``); and the model FLOPs per second of those steps as a share of the
measured peak (SFT: forward and backward; RL: every model FLOP of the step, generation included).  ``make gpu-check``
passes ``--device cuda``: no GPU is an error, never a silent CPU run.  Without CUDA the phases run on the CPU with
``--shape micro`` (the tests do).  Exit status 0 only when every phase ran.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from venus_utils.core.io import read_jsonl, write_json  # noqa: E402
from venus_utils.core.paths import CLEANING_STAGE, RESAMPLING_STAGE, RL_STAGE, SETUP_STAGE, SFT_STAGE  # noqa: E402
from venus_utils.core.stopping import Stopped, finish_stop, stop_on_signals  # noqa: E402

PACKAGES = ("torch", "transformers", "peft", "accelerate", "trl", "datasets", "papermill", "unsloth", "vllm")
MARKER = ".gpu_check"  # the out folder was made by this script (a rerun replaces only such a folder)
QWEN3_VOCAB = 151_936  # Qwen3's embedding rows


class CheckFailed(RuntimeError):
    """A phase's command failed: the message names the phase and the log to read."""


def versions() -> dict[str, str | None]:
    """Each package's installed version (read from its metadata, nothing imported: Unsloth patches on import), or
    None where it is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def pick_device(requested: str) -> tuple[str, str]:
    """``(device, description)``: cuda where requested (or auto) and available, else cpu with the reason."""
    import torch

    if requested in ("auto", "cuda") and torch.cuda.is_available():
        return "cuda", f"{torch.cuda.get_device_name(0)}, CUDA {torch.version.cuda}, torch {torch.__version__}"
    if requested == "cuda":
        raise CheckFailed("--device cuda: torch sees no CUDA device here")
    return "cpu", f"CPU ({os.cpu_count()} cores), torch {torch.__version__}: no CUDA device, the check runs on the CPU"


def measured_peak(device: str) -> dict:
    from venus_utils.core import perf

    if device == "cuda":
        import torch

        runs = sorted(perf.cuda_bf16_peak_gflops(reps=20) for _ in range(5))
        torch.cuda.empty_cache()  # the phases' processes get the GPU's memory
        return {"peak_gflops": round(runs[2], 1), "peak_of": "bf16 matmul 8192^3 on the GPU (median of 5 x 20)"}
    peak = perf.machine_peak(seconds=1.0)
    return {"peak_gflops": round(peak.best_gflops, 1), "peak_of": peak.describe()}


def smoke_profile(out: Path, device: str) -> Path:
    """``params/smoke.yaml`` with ``device`` set (the only difference), written into ``out``."""
    lines = (ROOT / "params" / "smoke.yaml").read_text(encoding="utf-8").splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("seed:")) + 1
    lines.insert(at, f"device: {device:<19} # the GPU check: every local model on this device")
    path = out / f"smoke-{device}.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def run_phase(name: str, argv: list[str], out: Path) -> float:
    """Run ``python argv`` with its output in ``<out>/<name>.log`` (and echoed); returns its seconds."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    env.setdefault("HF_DATASETS_OFFLINE", "1")
    env.setdefault("TQDM_MININTERVAL", "10")  # progress bars into a pipe: a line every 10 s, not every update
    log = out / f"{name}.log"
    print(f"[gpu-check] {name}: python {' '.join(argv)}", flush=True)
    t0 = time.perf_counter()
    with open(log, "w", encoding="utf-8") as fh:
        proc = subprocess.Popen(
            [sys.executable, *argv], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        for line in proc.stdout:
            fh.write(line)
            sys.stdout.write(f"  | {line}")
        code = proc.wait()
    if code != 0:
        raise CheckFailed(f"phase {name} failed (exit {code}): read {log}")
    return time.perf_counter() - t0


def run_stage(name: str, profile: Path, run: Path, sets: dict, out: Path) -> float:
    """``python -m venus_utils.<name> train`` of ``run`` with ``profile`` and each of ``sets`` as a ``--set``."""
    argv = ["-m", f"venus_utils.{name}", "train", "--params", str(profile), "--run-dir", str(run)]
    return run_phase(name, argv + [a for k, v in sets.items() for a in ("--set", f"{k}={v}")], out)


def summary(stage_dir: Path) -> dict:
    return json.loads((stage_dir / "summary.json").read_text(encoding="utf-8"))


def smoke_phase(out: Path, device: str) -> tuple[dict, Path]:
    profile = smoke_profile(out, device)
    run = out / "smoke"
    seconds = run_phase("smoke", ["-m", "venus_utils.run.pipeline", "--params", str(profile), "--out", str(run)], out)
    stages = {}
    for stage_dir in sorted(p for p in run.iterdir() if p.is_dir() and (p / "summary.json").is_file()):
        s = summary(stage_dir)
        stages[stage_dir.name] = {"elapsed_s": s.get("elapsed_s"), "gpu_peak_memory_gib": s.get("gpu_peak_memory_gib")}
    return {"seconds": round(seconds, 1), "profile": str(profile), "stages": stages}, run


def big_run(out: Path, smoke_run: Path, shape: str) -> tuple[Path, Path]:
    """A run folder for the large model: the smoke run's world and data stages linked in, the model built here."""
    from venus_utils.modeling.model import build_tiny_model

    run = out / f"run-{shape}"
    run.mkdir()
    for stage in (SETUP_STAGE, CLEANING_STAGE, RESAMPLING_STAGE):
        (run / stage).symlink_to((smoke_run / stage).resolve(), target_is_directory=True)
    world = smoke_run / SETUP_STAGE / "world"
    model = build_tiny_model(
        out / f"model-{shape}", world, size=shape, model_vocab_size=QWEN3_VOCAB if shape == "qwen3-0.6b" else None
    )
    return run, model


def share(flops: float | None, seconds: float | None, peak_gflops: float) -> float | None:
    if not flops or not seconds:
        return None
    return round(flops / seconds / 1e9 / peak_gflops, 4)


def steady(values: list[float]) -> list[float]:
    """The windows after the first (its seconds hold the warm-up: allocations, kernels chosen, caches filled); all of
    them when there is only one."""
    return values[1:] if len(values) > 1 else values


def sft_phase(out: Path, profile: Path, run: Path, model: Path, args, peak_gflops: float) -> dict:
    sets = {
        "base_model": json.dumps(str(model)),  # quoted: the value is read as YAML
        "max_steps": args.sft_steps,
        "global_batch_size": args.batch,
        "micro_batch_size": args.batch,
        "logging_steps": 1,  # one window per step: the first (warm-up) is left out of the rates
        "save_steps": args.sft_steps,  # one checkpoint, at the end (outside the timed windows)
        "eval_steps": args.sft_steps,
        "val_rows_limit": 4,
        "learning_rate": "1.0e-5",
    }
    seconds = run_stage("sft", profile, run, sets, out)
    stage = run / SFT_STAGE
    s = summary(stage)
    windows = [h for h in json.loads((stage / "train_history.json").read_text()) if "window_s" in h]
    timed = steady(windows)
    wall = sum(h["window_s"] for h in timed)
    tokens = sum(h["tokens_per_s"] * h["window_s"] for h in timed)
    flops = sum(h.get("flops", 0.0) for h in timed)
    return {
        "seconds": round(seconds, 1),
        "engine": s.get("engine"),
        "steps": s.get("steps"),
        "loss_first": s.get("loss_first"),
        "loss_last": s.get("loss_last"),
        "timed_steps": len(timed),
        "tokens_per_s": round(tokens / wall, 1) if wall else None,
        "train_flops": s.get("train_flops"),
        "share_of_peak": share(flops, wall, peak_gflops),  # the timed steps' model FLOPs over their seconds
        "gpu_peak_memory_gib": s.get("gpu_peak_memory_gib"),
    }


def rl_phase(out: Path, profile: Path, run: Path, args, peak_gflops: float) -> dict:
    sets = {
        "max_steps": args.rl_steps,
        "prompts_per_step": 4,
        "num_generations": 4,
        "micro_batch_size": 4,
        "train_questions": 16,
        "filter_samples": 0,
        "max_turns": 3,
        "max_tokens_per_turn": 64,
        "save_steps": args.rl_steps,
        "heldout_n": 0,
        "judge": "offline",
    }
    seconds = run_stage("rl", profile, run, sets, out)
    stage = run / RL_STAGE
    s = summary(stage)
    steps = steady([r for r in read_jsonl(stage / "metrics.jsonl") if "step_time" in r])
    timed = {r["step"] for r in steps}
    # an episode's "step" is the trainer's step before the update (metrics' step - 1)
    sampled = sum(
        e.get("assistant_tokens") or 0 for e in read_jsonl(stage / "episodes.jsonl") if e["step"] + 1 in timed
    )
    generation_s = sum(r.get("time_generation_s", 0.0) for r in steps)
    step_s = sum(r["step_time"] for r in steps)
    return {
        "seconds": round(seconds, 1),
        "steps": s.get("steps"),
        "timed_steps": len(steps),
        "seconds_per_step": s.get("seconds_per_step") or {},
        "sampled_tokens": sampled,
        "sampled_tokens_per_s": round(sampled / generation_s, 1) if generation_s else None,
        "train_flops": s.get("train_flops"),
        # every model FLOP of the timed steps (generation, information gain, reference, update) over their seconds
        "share_of_peak": share(sum(r.get("flops", 0.0) for r in steps), step_s, peak_gflops),
        "gpu_peak_memory_gib": s.get("gpu_peak_memory_gib"),
    }


def prepare_out(out: Path) -> None:
    """Make ``out``; a folder this script made before is kept as ``<out>-previous`` (its own previous one goes),
    any other existing folder is refused."""
    if out.exists():
        if not (out / MARKER).is_file():
            raise CheckFailed(f"{out}: exists and was not made by the GPU check; pass --out NEW_FOLDER")
        previous = out.with_name(out.name + "-previous")
        if previous.exists():
            if not (previous / MARKER).is_file():
                raise CheckFailed(f"{previous}: exists and was not made by the GPU check; move it away")
            shutil.rmtree(previous)
        out.rename(previous)
    out.mkdir(parents=True)
    (out / MARKER).write_text("made by benchmarks/gpu_check.py\n", encoding="utf-8")


def report_lines(report: dict) -> list[str]:
    lines = [
        f"device: {report['device_description']}",
        f"peak: {report['peak']['peak_gflops']:.0f} GFLOP/s ({report['peak']['peak_of']})",
    ]
    lines.append("packages: " + ", ".join(f"{k} {v or '-'}" for k, v in report["packages"].items()))
    smoke = report.get("smoke")
    if smoke:
        stages = ", ".join(f"{k} {v['elapsed_s']:.0f} s" for k, v in smoke["stages"].items() if v["elapsed_s"])
        peaks = [v["gpu_peak_memory_gib"] for v in smoke["stages"].values() if v["gpu_peak_memory_gib"]]
        lines.append(
            f"smoke pipeline: {smoke['seconds']:.0f} s ({stages}); peak GPU memory {max(peaks) if peaks else '-'} GiB"
        )
    sft = report.get("sft")
    if sft:
        pct = f"{100 * sft['share_of_peak']:.1f}%" if sft["share_of_peak"] is not None else "-"
        lines.append(
            f"SFT ({report['shape']}, {sft['engine']}): {sft['steps']} steps, loss {sft['loss_first']:.3f} -> "
            f"{sft['loss_last']:.3f}; steps after the first: {sft['tokens_per_s']} tokens/s, {pct} of the peak; "
            f"peak GPU memory {sft['gpu_peak_memory_gib'] or '-'} GiB"
        )
    rl = report.get("rl")
    if rl:
        pct = f"{100 * rl['share_of_peak']:.1f}%" if rl["share_of_peak"] is not None else "-"
        phases = ", ".join(f"{k} {v:.2f}" for k, v in rl["seconds_per_step"].items())
        lines.append(
            f"RL ({report['shape']}, IGPO): {rl['steps']} steps, s/step: {phases}; steps after the first: "
            f"{rl['sampled_tokens_per_s']} sampled tokens/s in generation, {pct} of the peak (every model FLOP of "
            f"the step); peak GPU memory {rl['gpu_peak_memory_gib'] or '-'} GiB"
        )
    if report.get("failed"):
        lines.append(f"FAILED: {report['failed']}")
    lines.append(f"total: {report['seconds']:.0f} s")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "gpu-check", help="folder for the runs and report")
    ap.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto", help="make gpu-check passes cuda")
    ap.add_argument("--shape", default="qwen3-0.6b", help="model shape (venus_utils.modeling.model.SIZES)")
    ap.add_argument("--sft-steps", type=int, default=30)
    ap.add_argument("--rl-steps", type=int, default=3)
    ap.add_argument("--batch", type=int, default=8, help="SFT trajectories per optimizer step")
    ap.add_argument("--smoke-run", type=Path, default=None, help="an existing smoke run: skip the smoke phase")
    args = ap.parse_args(argv)
    from venus_utils.modeling.model import SIZES

    if args.shape not in SIZES:
        ap.error(f"--shape {args.shape}: expected one of {', '.join(SIZES)}")
    if min(args.sft_steps, args.rl_steps, args.batch) < 1:
        ap.error("--sft-steps, --rl-steps and --batch must be at least 1")
    args.out = args.out.resolve()  # the phases run from the repository root
    if args.smoke_run is not None:
        args.smoke_run = args.smoke_run.resolve()
        if not (args.smoke_run / SETUP_STAGE).is_dir() or not (args.smoke_run / RESAMPLING_STAGE).is_dir():
            ap.error(f"--smoke-run {args.smoke_run}: not a run folder with {SETUP_STAGE} and {RESAMPLING_STAGE}")
        if args.smoke_run.is_relative_to(args.out):
            ap.error(f"--smoke-run {args.smoke_run}: inside --out, which this check replaces; copy it elsewhere")
    t0 = time.perf_counter()
    report: dict = {}
    try:
        with stop_on_signals():  # SIGTERM / Ctrl-C: the phase's process and what it started end too
            code = check(args, report)
    except Stopped as stop:
        finish_stop(stop)
        report["failed"], code = f"stopped by {stop}", 128 + stop.signum
    except CheckFailed as exc:
        report["failed"], code = str(exc), 1
    report["seconds"] = round(time.perf_counter() - t0, 1)
    if (args.out / MARKER).is_file():  # what was measured before a failure is kept too
        write_json(args.out / "gpu_check.json", report)
    if code:
        print(f"gpu-check: {report['failed']}", file=sys.stderr)
    if report.get("peak"):
        print("\n".join(["", "GPU check", *report_lines(report), f"report: {args.out / 'gpu_check.json'}"]))
    return code


def check(args, report: dict) -> int:
    """The four phases, each adding its figures to ``report`` (written after each, so a later failure keeps them)."""
    device, description = pick_device(args.device)  # before the last check's folder is moved aside
    if device == "cpu" and args.shape == "qwen3-0.6b":
        raise CheckFailed(
            "no CUDA device: the 596M model would take hours on the CPU; pass --shape micro for a CPU run"
        )
    prepare_out(args.out)
    print(f"[gpu-check] {description}", flush=True)
    report.update(device=device, device_description=description, shape=args.shape, packages=versions())
    report["peak"] = measured_peak(device)
    save = lambda: write_json(args.out / "gpu_check.json", report)  # noqa: E731
    save()
    if args.smoke_run is None:
        report["smoke"], smoke_run = smoke_phase(args.out, device)
        profile = Path(report["smoke"]["profile"])
        save()
    else:
        smoke_run, profile = args.smoke_run, smoke_profile(args.out, device)
    run, model = big_run(args.out, smoke_run, args.shape)
    report["sft"] = sft_phase(args.out, profile, run, model, args, report["peak"]["peak_gflops"])
    save()
    report["rl"] = rl_phase(args.out, profile, run, args, report["peak"]["peak_gflops"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
