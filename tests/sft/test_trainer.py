"""The plain-TRL engine: trains, checkpoints, resumes after a kill, exports loadable models."""

import pytest

from venus_utils.modeling import synthetic_conversations
from venus_utils.sft import SFTConfig, build_examples, train_sft


@pytest.fixture(scope="module")
def rows(micro_model_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(micro_model_dir)
    return build_examples([c["messages"] for c in synthetic_conversations(12, seed=4)], tok, max_length=4096).rows


def _cfg(**kw):
    base = dict(engine="trl", learning_rate=3e-3, global_batch_size=4, micro_batch_size=2, max_steps=4, logging_steps=1,
                save_steps=2, eval_steps=None, max_length=4096, gradient_checkpointing=False, device="cpu")
    base.update(kw)
    return SFTConfig(**base)


def _weights(folder):
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def test_full_finetune_lowers_the_loss_and_exports_a_loadable_model(micro_model_dir, rows, tmp_path):
    import torch
    from transformers import AutoModelForCausalLM

    res = train_sft(_cfg(max_steps=6), micro_model_dir, rows[:10], tmp_path, val_rows=rows[10:])
    s = res.summary()
    assert res.engine == "trl" and res.steps == 6
    assert s["loss_last"] < s["loss_first"] and s["tokens_per_s"] > 0 and s["eval_loss_last"] is not None
    model = AutoModelForCausalLM.from_pretrained(res.model_dir)
    assert model.dtype == torch.bfloat16 and res.adapter_dir is None
    assert (tmp_path / "train_history.json").exists()


def test_killed_run_resumes_from_its_last_checkpoint_and_matches(micro_model_dir, rows, tmp_path):
    import torch
    from transformers import TrainerCallback

    class Kill(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 3:
                raise KeyboardInterrupt("simulated kill")

    straight = train_sft(_cfg(), micro_model_dir, rows, tmp_path / "a")
    with pytest.raises(KeyboardInterrupt):
        train_sft(_cfg(), micro_model_dir, rows, tmp_path / "b", callbacks=[Kill()])
    assert (tmp_path / "b" / "checkpoints" / "checkpoint-2").is_dir() and not (tmp_path / "b" / "model").exists()
    resumed = train_sft(_cfg(), micro_model_dir, rows, tmp_path / "b")
    assert resumed.resumed_from.endswith("checkpoint-2") and resumed.steps == 4
    a = _weights(tmp_path / "a" / "checkpoints" / "checkpoint-4")
    b = _weights(tmp_path / "b" / "checkpoints" / "checkpoint-4")
    assert a.keys() == b.keys()
    for k in a:
        assert torch.allclose(a[k], b[k], atol=1e-6), k
    assert straight.steps == 4


def test_lora_exports_adapter_and_merged_model(micro_model_dir, rows, tmp_path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    res = train_sft(_cfg(finetuning="lora", lora_r=4, max_steps=2, save_steps=100), micro_model_dir, rows[:4], tmp_path)
    assert (res.adapter_dir / "adapter_config.json").exists()
    merged = AutoModelForCausalLM.from_pretrained(res.model_dir)
    assert not any("lora" in n for n, _ in merged.named_parameters())
    base = AutoModelForCausalLM.from_pretrained(micro_model_dir)
    assert isinstance(PeftModel.from_pretrained(base, res.adapter_dir), PeftModel)


def test_rows_longer_than_max_length_are_refused(micro_model_dir, rows, tmp_path):
    with pytest.raises(ValueError, match="exceed max_length"):
        train_sft(_cfg(max_length=16), micro_model_dir, rows, tmp_path)


def test_config_validates_and_names_unknown_keys():
    with pytest.raises(ValueError, match="batching"):
        SFTConfig(batching="bucket")
    with pytest.raises(ValueError, match="lerning_rate"):
        SFTConfig.from_dict({"lerning_rate": 1.0})
    cfg = SFTConfig()
    assert (cfg.learning_rate, cfg.global_batch_size, cfg.warmup_ratio, cfg.adam_beta2, cfg.finetuning) == (1e-5, 32, 0.1, 0.95, "full")
    assert cfg.gradient_accumulation_steps == 32
