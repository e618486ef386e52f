"""The Unsloth engine (its CPU backend here): run in .venv-unsloth with `-m unsloth`."""

import pytest

pytestmark = pytest.mark.unsloth
unsloth = pytest.importorskip("unsloth")  # must come before transformers / trl

from venus_utils.sft import resolve_engine, train_sft  # noqa: E402

from ..conftest import micro_sft_config  # noqa: E402


def _cfg(**kw):
    return micro_sft_config(engine="unsloth", **kw)


def test_auto_picks_unsloth_when_installed():
    assert resolve_engine("auto") == "unsloth"


def test_unsloth_full_finetune_trains_and_exports(micro_model_dir, sft_rows, tmp_path):
    from transformers import AutoModelForCausalLM

    res = train_sft(_cfg(max_steps=5), micro_model_dir, sft_rows, tmp_path)
    s = res.summary()
    assert res.engine == "unsloth" and res.steps == 5 and s["loss_last"] < s["loss_first"]
    assert AutoModelForCausalLM.from_pretrained(res.model_dir) is not None


def test_unsloth_lora_exports_adapter_and_merged_16bit(micro_model_dir, sft_rows, tmp_path):
    from transformers import AutoModelForCausalLM

    res = train_sft(
        _cfg(finetuning="lora", lora_r=4, gradient_checkpointing=True), micro_model_dir, sft_rows, tmp_path
    )
    assert (res.adapter_dir / "adapter_config.json").exists()
    merged = AutoModelForCausalLM.from_pretrained(res.model_dir)
    assert not any("lora" in n for n, _ in merged.named_parameters())


def test_unsloth_resumes_after_a_kill(micro_model_dir, sft_rows, tmp_path):
    from transformers import TrainerCallback

    class Kill(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 3:
                raise KeyboardInterrupt("simulated kill")

    with pytest.raises(KeyboardInterrupt):
        train_sft(_cfg(), micro_model_dir, sft_rows, tmp_path, callbacks=[Kill()])
    res = train_sft(_cfg(), micro_model_dir, sft_rows, tmp_path)
    assert res.resumed_from.endswith("checkpoint-2") and res.steps == 4
