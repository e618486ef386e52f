"""The Unsloth engine (its CPU backend here): run in .venv-unsloth with `-m unsloth`."""

import pytest

pytestmark = pytest.mark.unsloth
unsloth = pytest.importorskip("unsloth")  # must come before transformers / trl

from venus_utils.modeling import synthetic_conversations  # noqa: E402
from venus_utils.sft import SFTConfig, build_examples, resolve_engine, train_sft  # noqa: E402


@pytest.fixture(scope="module")
def rows(micro_model_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(micro_model_dir)
    return build_examples([c["messages"] for c in synthetic_conversations(8, seed=4)], tok, max_length=4096).rows


def _cfg(**kw):
    base = dict(
        engine="unsloth",
        learning_rate=3e-3,
        global_batch_size=4,
        micro_batch_size=2,
        max_steps=4,
        logging_steps=1,
        save_steps=2,
        eval_steps=None,
        max_length=4096,
        gradient_checkpointing=False,
        device="cpu",
    )
    base.update(kw)
    return SFTConfig(**base)


def test_auto_picks_unsloth_when_installed():
    assert resolve_engine("auto") == "unsloth"


def test_unsloth_full_finetune_trains_and_exports(micro_model_dir, rows, tmp_path):
    from transformers import AutoModelForCausalLM

    res = train_sft(_cfg(max_steps=5), micro_model_dir, rows, tmp_path)
    s = res.summary()
    assert res.engine == "unsloth" and res.steps == 5 and s["loss_last"] < s["loss_first"]
    assert AutoModelForCausalLM.from_pretrained(res.model_dir) is not None


def test_unsloth_lora_exports_adapter_and_merged_16bit(micro_model_dir, rows, tmp_path):
    from transformers import AutoModelForCausalLM

    res = train_sft(_cfg(finetuning="lora", lora_r=4, gradient_checkpointing=True), micro_model_dir, rows, tmp_path)
    assert (res.adapter_dir / "adapter_config.json").exists()
    merged = AutoModelForCausalLM.from_pretrained(res.model_dir)
    assert not any("lora" in n for n, _ in merged.named_parameters())


def test_unsloth_resumes_after_a_kill(micro_model_dir, rows, tmp_path):
    from transformers import TrainerCallback

    class Kill(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 3:
                raise KeyboardInterrupt("simulated kill")

    with pytest.raises(KeyboardInterrupt):
        train_sft(_cfg(), micro_model_dir, rows, tmp_path, callbacks=[Kill()])
    res = train_sft(_cfg(), micro_model_dir, rows, tmp_path)
    assert res.resumed_from.endswith("checkpoint-2") and res.steps == 4
