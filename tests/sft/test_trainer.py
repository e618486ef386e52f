"""The plain-TRL engine: trains, checkpoints, resumes after a kill, exports loadable models."""

import pytest

from venus_utils.core.checkpoints import read_train_clock
from venus_utils.sft import SFTConfig, train_sft

from ..conftest import micro_sft_config as _cfg


def _weights(folder):
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def test_full_finetune_lowers_the_loss_and_exports_a_loadable_model(micro_model_dir, sft_rows, tmp_path):
    import torch
    from transformers import AutoModelForCausalLM

    res = train_sft(_cfg(max_steps=6), micro_model_dir, sft_rows[:10], tmp_path, val_rows=sft_rows[10:])
    s = res.summary()
    assert res.engine == "trl" and res.steps == 6
    assert s["loss_last"] < s["loss_first"] and s["tokens_per_s"] > 0 and s["eval_loss_last"] is not None
    model = AutoModelForCausalLM.from_pretrained(res.model_dir)
    assert model.dtype == torch.bfloat16 and res.adapter_dir is None
    assert (tmp_path / "train_history.json").exists()


def test_killed_run_resumes_from_its_last_checkpoint_and_matches(micro_model_dir, sft_rows, tmp_path):
    import torch
    from transformers import TrainerCallback

    class Kill(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 3:
                raise KeyboardInterrupt("simulated kill")

    straight = train_sft(_cfg(), micro_model_dir, sft_rows, tmp_path / "a")
    with pytest.raises(KeyboardInterrupt):
        train_sft(_cfg(), micro_model_dir, sft_rows, tmp_path / "b", callbacks=[Kill()])
    assert (tmp_path / "b" / "checkpoints" / "checkpoint-2").is_dir() and not (tmp_path / "b" / "model").exists()
    trained_before = read_train_clock(tmp_path / "b" / "checkpoints" / "checkpoint-2")
    resumed = train_sft(_cfg(), micro_model_dir, sft_rows, tmp_path / "b")
    assert resumed.resumed_from.endswith("checkpoint-2") and resumed.steps == 4
    assert 0 < trained_before < resumed.wall_s  # the training time counts the killed call's, up to its checkpoint
    a = _weights(tmp_path / "a" / "checkpoints" / "checkpoint-4")
    b = _weights(tmp_path / "b" / "checkpoints" / "checkpoint-4")
    assert a.keys() == b.keys()
    for k in a:
        assert torch.allclose(a[k], b[k], atol=1e-6), k
    assert straight.steps == 4


_KILL_DURING_SAVE = """
import os, signal, sys
import transformers
from venus_utils.modeling import synthetic_conversations
from venus_utils.sft import SFTConfig, build_examples, train_sft

model_dir, out_dir = sys.argv[1], sys.argv[2]
tok = transformers.AutoTokenizer.from_pretrained(model_dir)
rows = build_examples([c["messages"] for c in synthetic_conversations(12, seed=4)], tok, max_length=4096).rows
save_rng = transformers.Trainer._save_rng_state

def killed_mid_save(self, output_dir):  # weights and optimizer written, RNG and trainer state not yet
    if self.state.global_step == 4:
        os.kill(os.getpid(), signal.SIGKILL)
    return save_rng(self, output_dir)

transformers.Trainer._save_rng_state = killed_mid_save
cfg = SFTConfig(engine="trl", learning_rate=3e-3, global_batch_size=4, micro_batch_size=2, max_steps=6,
                logging_steps=1, save_steps=2, eval_steps=None, max_length=4096, gradient_checkpointing=False,
                device="cpu")
train_sft(cfg, model_dir, rows, out_dir)
"""


def test_sigkill_during_a_save_leaves_no_partial_checkpoint_and_the_rerun_resumes(
    micro_model_dir, sft_rows, tmp_path, capsys
):
    import signal
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-c", _KILL_DURING_SAVE, str(micro_model_dir), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    ckpts = tmp_path / "checkpoints"
    assert (ckpts / "checkpoint-2").is_dir() and not (ckpts / "checkpoint-4").exists()  # the half save stays hidden
    assert (ckpts / ".saving" / "checkpoint-4").is_dir()
    resumed = train_sft(_cfg(max_steps=6), micro_model_dir, sft_rows, tmp_path)
    assert resumed.resumed_from.endswith("checkpoint-2") and resumed.steps == 6
    assert "interrupted" in capsys.readouterr().out and not (ckpts / ".saving").exists()
    assert sorted(p.name for p in ckpts.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-4", "checkpoint-6"]


def test_an_incomplete_checkpoint_left_by_a_kill_is_skipped_and_reported(micro_model_dir, sft_rows, tmp_path, capsys):
    """What a kill left with the Trainer's own saving (only config files): the rerun resumes from the newest complete
    checkpoint instead of failing with "Can't find a valid checkpoint"."""
    train_sft(_cfg(max_steps=2), micro_model_dir, sft_rows, tmp_path)
    partial = tmp_path / "checkpoints" / "checkpoint-4"
    partial.mkdir()
    (partial / "config.json").write_text("{}")
    (partial / "generation_config.json").write_text("{}")
    resumed = train_sft(_cfg(max_steps=4), micro_model_dir, sft_rows, tmp_path)
    assert resumed.resumed_from.endswith("checkpoint-2") and resumed.steps == 4
    assert "incomplete checkpoint" in capsys.readouterr().out
    assert (partial / "trainer_state.json").exists()  # saved again, completely


def test_rerunning_a_finished_run_trains_nothing_and_says_so(micro_model_dir, sft_rows, tmp_path, capsys):
    first = train_sft(_cfg(), micro_model_dir, sft_rows, tmp_path)
    exported = (tmp_path / "model").stat().st_mtime
    again = train_sft(_cfg(), micro_model_dir, sft_rows, tmp_path)
    assert first.steps == again.steps == 4 and again.resumed_from.endswith("checkpoint-4")
    assert not (tmp_path / "checkpoints" / "checkpoint-5").exists()
    assert "already finished" in capsys.readouterr().out and (tmp_path / "model").stat().st_mtime == exported
    # the time it trained (its last checkpoint's clock), not this call's ~0 s
    assert again.wall_s == read_train_clock(tmp_path / "checkpoints" / "checkpoint-4")
    assert 0 < again.wall_s <= first.wall_s and again.summary()["wall_s"] == round(again.wall_s, 1)
    more = train_sft(_cfg(max_steps=6), micro_model_dir, sft_rows, tmp_path)  # a higher limit continues the run
    assert more.steps == 6


def test_run_time_limited_then_rerun_is_a_no_op(micro_model_dir, sft_rows, tmp_path, capsys):
    from transformers import TrainerCallback

    class StopAt3(TrainerCallback):  # what the time limit does: stop and save
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 3:
                control.should_training_stop = control.should_save = True

    first = train_sft(
        _cfg(max_steps=20, max_time_minutes=30), micro_model_dir, sft_rows, tmp_path, callbacks=[StopAt3()]
    )
    assert first.steps == 3
    again = train_sft(_cfg(max_steps=20, max_time_minutes=30), micro_model_dir, sft_rows, tmp_path)
    assert again.steps == 3 and "already finished" in capsys.readouterr().out


def test_stop_at_eval_loss_ends_the_run_at_the_first_low_enough_validation_loss(
    micro_model_dir, sft_rows, tmp_path, capsys
):
    """The step budget becomes a cap: reached at step 2 (any loss is below 50), the run stops and saves there, a rerun
    under the same limits trains nothing, and a lower target trains on from that checkpoint to the cap."""
    train, val = sft_rows[:10], sft_rows[10:]
    reached = train_sft(_cfg(max_steps=6, eval_steps=2, stop_at_eval_loss=50.0), micro_model_dir, train, tmp_path, val)
    assert reached.steps == 2 and (tmp_path / "checkpoints" / "checkpoint-2").is_dir() and reached.model_dir
    assert "stopping" in capsys.readouterr().out
    again = train_sft(_cfg(max_steps=6, eval_steps=2, stop_at_eval_loss=50.0), micro_model_dir, train, tmp_path, val)
    assert again.steps == 2 and "already finished" in capsys.readouterr().out
    lower = train_sft(_cfg(max_steps=6, eval_steps=2, stop_at_eval_loss=1e-9), micro_model_dir, train, tmp_path, val)
    assert lower.resumed_from.endswith("checkpoint-2") and lower.steps == 6
    with pytest.raises(ValueError, match="stop_at_eval_loss .* needs a validation loss"):
        train_sft(_cfg(stop_at_eval_loss=0.01), micro_model_dir, train, tmp_path / "no_val")


def test_a_copied_run_folder_still_resumes(micro_model_dir, sft_rows, tmp_path):
    """resume_settings.json stores paths inside the run folder relative to it."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(micro_model_dir, run / "00_setup" / "tiny_model")
    train_sft(_cfg(max_steps=2), run / "00_setup" / "tiny_model", sft_rows, run / "03_sft")
    moved = tmp_path / "moved"
    shutil.copytree(run, moved)
    resumed = train_sft(_cfg(max_steps=4), moved / "00_setup" / "tiny_model", sft_rows, moved / "03_sft")
    assert resumed.resumed_from.endswith("checkpoint-2") and resumed.steps == 4


def test_lora_exports_adapter_and_merged_model(micro_model_dir, sft_rows, tmp_path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    res = train_sft(
        _cfg(finetuning="lora", lora_r=4, max_steps=2, save_steps=100), micro_model_dir, sft_rows[:4], tmp_path
    )
    assert (res.adapter_dir / "adapter_config.json").exists()
    merged = AutoModelForCausalLM.from_pretrained(res.model_dir)
    assert not any("lora" in n for n, _ in merged.named_parameters())
    base = AutoModelForCausalLM.from_pretrained(micro_model_dir)
    assert isinstance(PeftModel.from_pretrained(base, res.adapter_dir), PeftModel)


def test_rows_longer_than_max_length_are_refused(micro_model_dir, sft_rows, tmp_path):
    with pytest.raises(ValueError, match="exceed max_length"):
        train_sft(_cfg(max_length=16), micro_model_dir, sft_rows, tmp_path)


def test_config_validates_and_names_unknown_keys():
    with pytest.raises(ValueError, match="batching"):
        SFTConfig(batching="bucket")
    with pytest.raises(ValueError, match="lerning_rate"):
        SFTConfig.from_dict({"lerning_rate": 1.0})
    cfg = SFTConfig()
    assert (cfg.learning_rate, cfg.global_batch_size, cfg.warmup_ratio, cfg.adam_beta2, cfg.finetuning) == (
        1e-5,
        32,
        0.1,
        0.95,
        "full",
    )
    assert cfg.gradient_accumulation_steps == 32


@pytest.mark.parametrize("precision", ["bf16", "fp32"])
def test_precision_decides_whether_the_loss_runs_under_bf16_autocast(
    precision, micro_model_dir, sft_rows, tmp_path, monkeypatch
):
    """The loss calls the decoder itself (not the forward accelerate wraps), so the trainer enters the autocast."""
    import torch

    import venus_utils.sft.trainer as trainer_module

    seen = []
    original = trainer_module.masked_lm_loss

    def spy(model, batch, *args, **kwargs):
        seen.append(torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.bfloat16)
        return original(model, batch, *args, **kwargs)

    monkeypatch.setattr(trainer_module, "masked_lm_loss", spy)
    res = train_sft(_cfg(max_steps=2, precision=precision), micro_model_dir, sft_rows[:8], tmp_path)
    assert res.steps == 2 and seen and all(s == (precision == "bf16") for s in seen)
    assert SFTConfig(precision="auto").uses_bf16("cuda") and not SFTConfig(precision="fp32").uses_bf16("cuda")


@pytest.mark.parametrize("on", [False, True])
def test_gradient_checkpointing_is_on_only_when_the_config_asks(on, micro_model_dir, sft_rows, tmp_path, monkeypatch):
    """TRL's own SFTConfig turns it on by default: off in the recipe's config must reach the trainer as off (it
    recomputed every layer's forward on the CPU profiles, ~1/4 of a step)."""
    import venus_utils.sft.trainer as trainer_module

    seen = []
    original = trainer_module.masked_lm_loss

    def spy(model, batch, *args, **kwargs):
        seen.append(model.is_gradient_checkpointing)
        return original(model, batch, *args, **kwargs)

    monkeypatch.setattr(trainer_module, "masked_lm_loss", spy)
    res = train_sft(_cfg(max_steps=1, gradient_checkpointing=on), micro_model_dir, sft_rows[:8], tmp_path)
    assert res.steps == 1 and seen and all(s is on for s in seen)
    # under Unsloth, on is Unsloth's own (from_pretrained / get_peft_model); off is still off
    args = trainer_module._training_args(_cfg(gradient_checkpointing=False), tmp_path, False, "unsloth")
    assert args.gradient_checkpointing is False
