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
4. ``rl``: ``--rl-steps`` IGPO steps of that model by ``python -m venus_utils.rl train`` (rollouts with the local
   search and visit tools, information gain, the update).

Printed and written to ``<out>/gpu_check.json``: each phase's seconds, SFT tokens/s, RL seconds per step by phase and
generated tokens/s, each process's peak GPU memory (``gpu_peak_memory_gib`` of its ``summary.json``), and the model
FLOPs per second of training as a share of the measured peak.  Without CUDA every phase runs on the CPU (the tests
run it so, ``--shape micro``); the report says which device ran it.  Exit status 0 only when every phase ran.
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

from venus_utils.core.io import write_json  # noqa: E402
from venus_utils.core.stopping import Stopped, finish_stop, stop_on_signals  # noqa: E402

PACKAGES = ("torch", "transformers", "peft", "accelerate", "trl", "datasets", "papermill", "unsloth", "vllm")
MARKER = ".gpu_check"  # the out folder was made by this script (a rerun replaces only such a folder)
QWEN3_VOCAB = 151_936  # Qwen3's embedding rows


class CheckFailed(RuntimeError):
    """A phase's command failed: the message names the phase and the log to read."""


def versions() -> dict[str, str | None]:
    """Each package's version, or None where it does not import (Unsloth is not imported: it patches on import)."""
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
        return {"peak_gflops": round(perf.cuda_bf16_peak_gflops(), 1), "peak_of": "bf16 matmul 8192^3 on the GPU"}
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
    from venus_utils.core.paths import RESAMPLING_STAGE, SETUP_STAGE
    from venus_utils.modeling.model import build_tiny_model

    run = out / f"run-{shape}"
    run.mkdir()
    for stage in (SETUP_STAGE, "01_trajectory_cleaning", RESAMPLING_STAGE):
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


def sft_phase(out: Path, profile: Path, run: Path, model: Path, args, peak_gflops: float) -> dict:
    sets = {
        "base_model": str(model),
        "max_steps": args.sft_steps,
        "global_batch_size": args.batch,
        "micro_batch_size": args.batch,
        "logging_steps": 1,
        "save_steps": 10 * args.sft_steps,  # no checkpoint of the optimizer states (the export still runs)
        "eval_steps": 10 * args.sft_steps,
        "val_rows_limit": 4,
        "learning_rate": "1.0e-5",
    }
    argv = ["-m", "venus_utils.sft", "train", "--params", str(profile), "--run-dir", str(run)]
    seconds = run_phase("sft", argv + [a for k, v in sets.items() for a in ("--set", f"{k}={v}")], out)
    s = summary(run / "03_sft_unsloth")
    return {
        "seconds": round(seconds, 1),
        "engine": s.get("engine"),
        "steps": s.get("steps"),
        "loss_first": s.get("loss_first"),
        "loss_last": s.get("loss_last"),
        "tokens_per_s": s.get("tokens_per_s"),
        "train_wall_s": s.get("train_wall_s"),
        "train_flops": s.get("train_flops"),
        "share_of_peak": share(s.get("train_flops"), s.get("train_wall_s"), peak_gflops),
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
        "save_steps": 10 * args.rl_steps,
        "heldout_n": 0,
        "judge": "offline",
    }
    argv = ["-m", "venus_utils.rl", "train", "--params", str(profile), "--run-dir", str(run)]
    seconds = run_phase("rl", argv + [a for k, v in sets.items() for a in ("--set", f"{k}={v}")], out)
    stage = run / "04_igpo_rl"
    s = summary(stage)
    per_step = s.get("seconds_per_step") or {}
    generated = 0
    with open(stage / "episodes.jsonl", encoding="utf-8") as fh:
        for line in fh:
            generated += int(json.loads(line).get("completion_tokens") or 0)
    gen_seconds = per_step.get("generation", 0.0) * (s.get("steps") or 0)
    train_s = (s.get("timings_s") or {}).get("train")
    return {
        "seconds": round(seconds, 1),
        "steps": s.get("steps"),
        "seconds_per_step": per_step,
        "generated_tokens": generated,
        "generated_tokens_per_s": round(generated / gen_seconds, 1) if gen_seconds else None,
        "train_flops": s.get("train_flops"),
        "share_of_peak": share(s.get("train_flops"), train_s, peak_gflops),
        "gpu_peak_memory_gib": s.get("gpu_peak_memory_gib"),
    }


def prepare_out(out: Path) -> None:
    """Make ``out``; a folder this script made before is replaced, any other existing one refused."""
    if out.exists():
        if not (out / MARKER).is_file():
            raise CheckFailed(f"{out}: exists and was not made by the GPU check; pass --out NEW_FOLDER")
        shutil.rmtree(out)
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
            f"{sft['loss_last']:.3f}, {sft['tokens_per_s']} tokens/s, {pct} of the peak, peak GPU memory "
            f"{sft['gpu_peak_memory_gib'] or '-'} GiB"
        )
    rl = report.get("rl")
    if rl:
        pct = f"{100 * rl['share_of_peak']:.1f}%" if rl["share_of_peak"] is not None else "-"
        phases = ", ".join(f"{k} {v:.2f}" for k, v in rl["seconds_per_step"].items())
        lines.append(
            f"RL ({report['shape']}, IGPO): {rl['steps']} steps, s/step: {phases}; generation "
            f"{rl['generated_tokens_per_s']} tokens/s; {pct} of the peak, peak GPU memory "
            f"{rl['gpu_peak_memory_gib'] or '-'} GiB"
        )
    lines.append(f"total: {report['seconds']:.0f} s")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "gpu-check", help="folder for the runs and report")
    ap.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    ap.add_argument("--shape", default="qwen3-0.6b", help="model shape (venus_utils.modeling.model.SIZES)")
    ap.add_argument("--sft-steps", type=int, default=30)
    ap.add_argument("--rl-steps", type=int, default=3)
    ap.add_argument("--batch", type=int, default=8, help="SFT trajectories per optimizer step")
    ap.add_argument("--smoke-run", type=Path, default=None, help="an existing smoke run: skip the smoke phase")
    args = ap.parse_args(argv)
    from venus_utils.modeling.model import SIZES

    if args.shape not in SIZES:
        ap.error(f"--shape {args.shape}: expected one of {', '.join(SIZES)}")
    t0 = time.perf_counter()
    try:
        with stop_on_signals():  # SIGTERM / Ctrl-C: the phase's process and what it started end too
            report = check(args)
    except Stopped as stop:
        finish_stop(stop)
        print(f"gpu-check: stopped by {stop}", file=sys.stderr)
        return 128 + stop.signum
    except CheckFailed as exc:
        print(f"gpu-check: {exc}", file=sys.stderr)
        return 1
    report["seconds"] = round(time.perf_counter() - t0, 1)
    write_json(args.out / "gpu_check.json", report)
    print("\n".join(["", "GPU check", *report_lines(report), f"report: {args.out / 'gpu_check.json'}"]))
    return 0


def check(args) -> dict:
    """The four phases; the report without its total seconds."""
    prepare_out(args.out)
    device, description = pick_device(args.device)
    print(f"[gpu-check] {description}", flush=True)
    report: dict = {
        "device": device,
        "device_description": description,
        "shape": args.shape,
        "packages": versions(),
        "peak": measured_peak(device),
    }
    if args.smoke_run is None:
        report["smoke"], smoke_run = smoke_phase(args.out, device)
        profile = Path(report["smoke"]["profile"])
    else:
        smoke_run, profile = args.smoke_run, smoke_profile(args.out, device)
    run, model = big_run(args.out, smoke_run, args.shape)
    report["sft"] = sft_phase(args.out, profile, run, model, args, report["peak"]["peak_gflops"])
    report["rl"] = rl_phase(args.out, profile, run, args, report["peak"]["peak_gflops"])
    return report


if __name__ == "__main__":
    sys.exit(main())
