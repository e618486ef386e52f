"""The command lines' parameters (notebook defaults < profile < --set) and the accelerate config files."""

from __future__ import annotations

import pytest

from venus_utils.config import ConfigError
from venus_utils.launch import parse_sets, stage_params
from venus_utils.paths import REPO_ROOT


def test_stage_params_are_the_notebooks_with_the_profile_and_the_overrides():
    params, profile = stage_params(REPO_ROOT / "params" / "smoke.yaml", "03_sft_unsloth", parse_sets(["max_steps=3", "base_model=null"]))
    assert profile == "smoke" and params["max_steps"] == 3 and params["base_model"] is None
    assert params["micro_batch_size"] == 4  # the smoke profile's value
    assert params["loss_weighting"] == "sequence_mean"  # the notebook's default (not in the profile)
    paper, _ = stage_params(REPO_ROOT / "params" / "paper.yaml", "04_igpo_rl")
    assert paper["vllm_mode"] == "colocate" and paper["max_context_tokens"] == 261000
    with pytest.raises(ConfigError, match="max_stepz"):
        stage_params(REPO_ROOT / "params" / "smoke.yaml", "03_sft_unsloth", {"max_stepz": 1})
    with pytest.raises(ConfigError, match="key=value"):
        parse_sets(["max_steps"])


def test_accelerate_config_files_load_and_say_how_to_launch():
    from accelerate.commands.config.config_args import load_config_from_file

    files = sorted((REPO_ROOT / "params" / "accelerate").glob("*.yaml"))
    kinds = {}
    for path in files:
        cfg = load_config_from_file(str(path))
        kinds[path.stem] = (str(cfg.distributed_type).split(".")[-1], cfg.num_processes)
        assert path.read_text().startswith("#") and "accelerate launch --config_file" in path.read_text(), path.name
    assert kinds == {"ddp_cpu_2proc": ("MULTI_GPU", 2), "single_gpu": ("NO", 1), "single_node_8gpu": ("MULTI_GPU", 8),
                     "fsdp_8gpu": ("FSDP", 8), "deepspeed_zero3_8gpu": ("DEEPSPEED", 8),
                     "multi_node_template": ("FSDP", 16)}
