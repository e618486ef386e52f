"""A setting of a config class (SFTConfig, IGPOConfig, WorldConfig) is one record, its field: type, default, allowed
values, help and, for RL, TRL's name. A setting added there alone is checked before anything loads and reaches TRL's
config, with no other list to edit."""

from dataclasses import dataclass, field, fields

import pytest

from venus_utils.core.validation import Range, field_limits
from venus_utils.rl.config import IGPOConfig
from venus_utils.rl.igpo_trainer import grpo_args
from venus_utils.sft.config import SFTConfig

SMALL = dict(prompts_per_step=2, num_generations=2, micro_batch_size=2, max_steps=1)


@dataclass
class WithANewSetting(IGPOConfig):
    adam_beta2: float = field(
        default=0.95, metadata={"range": Range(0, 1), "trl": "adam_beta2", "help": "AdamW beta2."}
    )
    schedule: str = field(default="constant", metadata={"choices": ("constant", "cosine"), "help": "LR schedule."})


def test_a_setting_added_to_the_config_alone_is_checked_and_reaches_trl(tmp_path):
    cfg = WithANewSetting(**SMALL)
    assert grpo_args(cfg, tmp_path).adam_beta2 == 0.95
    with pytest.raises(ValueError, match=r"WithANewSetting.adam_beta2=1.5: must be"):
        WithANewSetting(**SMALL, adam_beta2=1.5)
    with pytest.raises(
        ValueError, match=r"WithANewSetting.schedule='linear': expected one of \('constant', 'cosine'\)"
    ):
        WithANewSetting(**SMALL, schedule="linear")


def test_every_setting_trl_takes_as_it_is_reaches_trl_under_its_name(tmp_path):
    cfg = IGPOConfig(**SMALL, learning_rate=3e-4, clip_ratio_high=0.28, max_tokens_per_turn=77, seed=5)
    args = grpo_args(cfg, tmp_path)
    named = {f.name: f.metadata["trl"] for f in fields(IGPOConfig) if "trl" in f.metadata}
    assert {"micro_batch_size", "clip_ratio_low", "clip_ratio_high", "max_tokens_per_turn", "seed"} <= set(named)
    for name, trl_name in named.items():
        assert getattr(args, trl_name) == getattr(cfg, name), name
    assert (args.epsilon_high, args.max_completion_length, args.seed) == (0.28, 77, 5)


@pytest.mark.parametrize("config", [IGPOConfig, SFTConfig])
def test_every_setting_has_help_and_every_word_setting_its_choices(config):
    ranges, choices = field_limits(config)
    assert all(f.metadata.get("help") for f in fields(config)), [
        f.name for f in fields(config) if not f.metadata.get("help")
    ]
    assert {"max_steps", "learning_rate", "seed"} <= set(ranges)
    assert "precision" in choices


def test_every_world_knob_has_help_and_its_limits_in_its_field():
    from venus_utils.world.build import WorldConfig

    ranges, choices = field_limits(WorldConfig)
    assert all(f.metadata.get("help") for f in fields(WorldConfig)), [
        f.name for f in fields(WorldConfig) if not f.metadata.get("help")
    ]
    assert {"seed", "n_worlds", "expert_guess_rate", "search_top_k"} <= set(ranges) and "visit_policy" in choices
    with pytest.raises(ValueError, match=r"WorldConfig.expert_guess_rate=1.5: must be"):
        WorldConfig(expert_guess_rate=1.5)
