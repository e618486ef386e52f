"""The command lines' parameters (notebook defaults < profile < --set) and the accelerate config files."""

from __future__ import annotations

import pytest

from venus_utils.core.paths import REPO_ROOT
from venus_utils.core.profiles import ConfigError
from venus_utils.run.cli import parse_sets, stage_params


def test_stage_params_are_the_notebooks_with_the_profile_and_the_overrides():
    params, profile = stage_params(
        REPO_ROOT / "params" / "smoke.yaml", "03_sft_unsloth", parse_sets(["max_steps=3", "base_model=null"])
    )
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
    assert kinds == {
        "ddp_cpu_2proc": ("MULTI_GPU", 2),
        "single_gpu": ("NO", 1),
        "single_node_8gpu": ("MULTI_GPU", 8),
        "fsdp_8gpu": ("FSDP", 8),
        "deepspeed_zero3_8gpu": ("DEEPSPEED", 8),
        "multi_node_template": ("FSDP", 16),
    }


@pytest.mark.parametrize(
    "stage, sets, message",
    [
        ("03_sft_unsloth", ["max_steps=ten"], "'max_steps' must be int like its default"),
        ("03_sft_unsloth", ["micro_batch_size=0"], "SFTConfig.micro_batch_size=0: must be >= 1"),
        ("03_sft_unsloth", ["learning_rate=-0.1"], "SFTConfig.learning_rate=-0.1: must be > 0"),
        (
            "03_sft_unsloth",
            ["base_model=/nonexistent/model"],
            "'base_model' names /nonexistent/model, which does not exist",
        ),
        ("04_igpo_rl", ["num_generations=0"], "IGPOConfig.num_generations=0: must be >= 1"),
        ("04_igpo_rl", ["temperature=hot"], "not parameters of notebooks/04_igpo_rl.ipynb"),
    ],
)
def test_bad_settings_fail_in_seconds_with_the_key_named(stage, sets, message, tmp_path, capsys):
    """Checked before any model or data loads: the CLI exits 2 with one line, no traceback."""
    from venus_utils import rl, sft  # noqa: F401  (the packages, light)
    from venus_utils.rl.__main__ import main as rl_main
    from venus_utils.sft.__main__ import main as sft_main

    main = sft_main if stage.startswith("03") else rl_main
    argv = ["train", "--params", str(REPO_ROOT / "params" / "smoke.yaml"), "--run-dir", str(tmp_path)]
    assert main(argv + [a for s in sets for a in ("--set", s)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and not (tmp_path / stage).exists()


def test_a_profile_with_a_wrong_type_is_refused_with_file_and_key(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text((REPO_ROOT / "params" / "smoke.yaml").read_text().replace("max_steps: 8 ", "max_steps: ten "))
    with pytest.raises(ConfigError, match=r"bad.yaml: 03_sft_unsloth: 'max_steps' must be int"):
        stage_params(bad, "03_sft_unsloth")
    bad.write_text("seeed: 5\n")
    with pytest.raises(ConfigError, match="did you mean 'seed'"):
        stage_params(bad, "03_sft_unsloth")
