"""SFT and IGPO under DDP (2 CPU processes, gloo) against one process with the same global batch.

The launch is ``accelerate launch --config_file params/accelerate/ddp_cpu_2proc.yaml ...`` (torchrun-style;
``accelerate launch --cpu --num_processes 2`` starts ONE process unless MPI is set up, see that file).
Tolerances: losses within a relative 1e-4 and weights within 1e-5 (SFT) / 2e-5 (RL) absolute; measured here:
identical SFT losses, grad-norm differences ~1e-7, RL weight differences ~4e-6 (summation order of the gradient
all-reduce).  SFT runs in fp32 here (``precision=fp32``): bf16 autocast rounds those ~1e-7 differences up past the
tolerances, which test the distribution, not the precision.
"""

from __future__ import annotations

import json
import shutil

import pytest

from venus_utils.core.checkpoints import read_train_clock

from .conftest import run_cli

pytestmark = pytest.mark.slow

LOSS_RTOL = 1e-4
IG_ATOL = 1e-5  # a few float32 roundings of log-probabilities of ~5 nats; a wrong gain is off by ~1e-3
SFT_WEIGHT_ATOL = 1e-5
RL_WEIGHT_ATOL = 2e-5
SFT_SETS = [
    "--set",
    "max_steps=4",
    "--set",
    "global_batch_size=4",
    "--set",
    "micro_batch_size=2",
    "--set",
    "save_steps=2",
    "--set",
    "logging_steps=1",
    "--set",
    "val_rows_limit=4",
    "--set",
    "eval_steps=null",
    "--set",
    "precision=fp32",
]


def _sft(run, out, processes, *extra):
    return run_cli(
        [
            "-m",
            "venus_utils.sft",
            "train",
            "--params",
            "params/smoke.yaml",
            "--run-dir",
            str(run),
            "--out",
            str(out),
            *SFT_SETS,
            *extra,
        ],
        processes=processes,
    )


def _weights(path):
    from safetensors.torch import load_file

    return load_file(str(path / "model.safetensors"))


@pytest.fixture(scope="module")
def sft_runs(micro_run, tmp_path_factory):
    base = tmp_path_factory.mktemp("sft")
    _sft(micro_run, base / "one", 1)
    _sft(micro_run, base / "two", 2)
    return base


def test_sft_two_processes_match_one(sft_runs):
    one = [h for h in json.loads((sft_runs / "one" / "train_history.json").read_text()) if "loss" in h]
    two = [h for h in json.loads((sft_runs / "two" / "train_history.json").read_text()) if "loss" in h]
    assert [h["step"] for h in one] == [h["step"] for h in two] == [1, 2, 3, 4]
    for a, b in zip(one, two):
        assert b["loss"] == pytest.approx(a["loss"], rel=LOSS_RTOL)
        assert b["grad_norm"] == pytest.approx(a["grad_norm"], rel=LOSS_RTOL)
    assert one[-1]["loss"] < one[0]["loss"]
    summary = json.loads((sft_runs / "two" / "summary.json").read_text())
    assert summary["processes"] == 2 and summary["steps"] == 4
    a, b = _weights(sft_runs / "one" / "model"), _weights(sft_runs / "two" / "model")  # exported once, by rank 0
    assert a.keys() == b.keys() and all((a[k].float() - b[k].float()).abs().max() <= 1e-2 for k in a)  # bfloat16


def test_sft_checkpoint_of_two_processes_resumes_in_one(sft_runs, micro_run, tmp_path):
    import torch

    out = tmp_path / "resumed"
    shutil.copytree(sft_runs / "two" / "checkpoints" / "checkpoint-2", out / "checkpoints" / "checkpoint-2")
    _sft(micro_run, out, 1)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["resumed_from"].endswith("checkpoint-2") and summary["steps"] == 4 and summary["processes"] == 1
    a, b = _weights(sft_runs / "one" / "checkpoints" / "checkpoint-4"), _weights(out / "checkpoints" / "checkpoint-4")
    for k in a:
        assert torch.allclose(a[k], b[k], atol=SFT_WEIGHT_ATOL), k


def test_rl_stage_runs_under_two_processes(sft_runs, micro_run, tmp_path):
    """The smoke RL stage from the command line, sampled rollouts with the offline world's tools, 2 processes."""
    run = tmp_path / "run"
    shutil.copytree(micro_run, run, symlinks=True)
    shutil.copytree(sft_runs / "one", run / "03_sft_unsloth", ignore=shutil.ignore_patterns("checkpoints"))
    run_cli(
        [
            "-m",
            "venus_utils.rl",
            "train",
            "--params",
            "params/smoke.yaml",
            "--run-dir",
            str(run),
            "--set",
            "max_tokens_per_turn=32",
            "--set",
            "max_turns=3",
            "--set",
            "filter_samples=0",
        ],
        processes=2,
    )  # the unsolved-question filter runs in one process only
    stage = run / "04_igpo_rl"
    summary = json.loads((stage / "summary.json").read_text())
    assert summary["steps"] == 2 and summary["processes"] == 2
    episodes = [json.loads(line) for line in (stage / "episodes.jsonl").read_text().splitlines()]
    assert len(episodes) == 2 * 2 * 2  # steps x prompts_per_step x num_generations, gathered from both processes
    assert (stage / "model" / "model.safetensors").exists() and (stage / "checkpoint-2").is_dir()


def test_rl_two_processes_match_one_and_checkpoint_resumes_in_one(micro_run, tmp_path):
    import torch

    model, script = str(micro_run / "00_setup" / "tiny_model"), "tests/scale/rl_ddp_script.py"
    run_cli([script, model, str(tmp_path / "one")], processes=1)
    run_cli([script, model, str(tmp_path / "two")], processes=2)
    shutil.copytree(tmp_path / "two" / "checkpoint-2", tmp_path / "resumed" / "checkpoint-2")
    run_cli([script, model, str(tmp_path / "resumed"), str(tmp_path / "resumed" / "checkpoint-2")], processes=1)
    one, two = (json.loads((tmp_path / d / "result.json").read_text()) for d in ("one", "two"))
    assert (one["processes"], two["processes"]) == (1, 2) and len(one["loss"]) == 3
    assert one["moved"] > 100 * RL_WEIGHT_ATOL  # the policy changed, so equal weights mean equal updates
    for key in ("loss", "adv_abs_mean"):
        assert two[key] == pytest.approx(one[key], rel=LOSS_RTOL), key
    # the information gain is a difference of float32 log-probabilities of ~5 nats, scored in other batches under two
    # processes: equal up to their rounding (6e-7 apart on an AMD EPYC machine, a relative 1.2e-4 of a gain near 0)
    assert two["ig_mean"] == pytest.approx(one["ig_mean"], abs=IG_ATOL)
    w1, w2, w3 = (torch.load(tmp_path / d / "weights.pt") for d in ("one", "two", "resumed"))
    for k in w1:
        assert torch.allclose(w1[k], w2[k], atol=RL_WEIGHT_ATOL), k
        assert torch.allclose(w1[k], w3[k], atol=RL_WEIGHT_ATOL), k


LAUNCHER = """
import json, sys
from transformers import AutoTokenizer
from venus_utils.run.cli import stage_params
from venus_utils.sft import SFTConfig, examples_from_parquet, launch_sft
run, out = sys.argv[1], sys.argv[2]
p, _ = stage_params("params/smoke.yaml", "03_sft_unsloth", dict(max_steps=4, global_batch_size=4, micro_batch_size=2,
                    save_steps=2, logging_steps=1, eval_steps=None))
tok = AutoTokenizer.from_pretrained(run + "/00_setup/tiny_model")
rows = examples_from_parquet(run + "/02_turn_aware_resampling/train.parquet", tok, max_length=p["max_length"]).rows
cfg = SFTConfig.from_dict({k: v for k, v in p.items() if k in SFTConfig.__dataclass_fields__})
result = launch_sft(2, cfg, run + "/00_setup/tiny_model", rows, out)
print("RESULT", json.dumps({"steps": result.steps, "losses": [h["loss"] for h in result.train_logs],
                           "wall_s": result.wall_s}))
"""


def test_notebook_launcher_path_trains_in_two_processes(sft_runs, micro_run, tmp_path):
    """``launch_sft`` (notebook 03's ``num_processes``) forks two processes with accelerate.notebook_launcher."""
    res = run_cli(["-c", LAUNCHER, str(micro_run), str(tmp_path / "nb")], processes=1)
    got = json.loads(res.stdout.split("RESULT", 1)[1])
    one = [h["loss"] for h in json.loads((sft_runs / "one" / "train_history.json").read_text()) if "loss" in h]
    assert got["steps"] == 4 and got["losses"] == pytest.approx(one, rel=LOSS_RTOL)
    assert (tmp_path / "nb" / "model" / "model.safetensors").exists()
    # the time it trained, read back from the run folder: its last checkpoint's clock (train_to_end)
    assert got["wall_s"] == read_train_clock(tmp_path / "nb" / "checkpoints" / "checkpoint-4") > 0
