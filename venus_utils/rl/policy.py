"""The policy: the model and tokenizer RL starts from (an earlier stage's save, notebook 03's ``model/``:
:func:`load_policy`) and the trained policy saved as a plain transformers folder with its card (:func:`save_policy`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..agent.settings import write_model_agent_settings
from ..core.checkpoints import check_model, seal_model
from ..core.io import atomic_dir
from ..core.paths import RL_STAGE
from .config import IGPOConfig


def load_policy(model_dir: str | Path, device: str = "cpu", lora: bool = False):
    """The model and tokenizer saved by an earlier stage (``save_pretrained`` folder): in float32 (the master
    weights the update changes; bf16 compute comes from autocast, ``IGPOConfig.precision``), or in the folder's own
    dtype on a GPU when ``lora`` trains adapters over a frozen base."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model_dir = Path(model_dir)
    if not (model_dir / "config.json").exists():
        raise FileNotFoundError(f"{model_dir}: no model here (config.json missing); run the SFT notebook first")
    check_model(model_dir)
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    # the SFT export is bfloat16: full fine-tuning trains float32 weights, where an update of lr 1e-6 does not
    # vanish in rounding (on the GPU too: bf16 weights under AdamW would not move)
    dtype = torch.float32 if device == "cpu" or not lora else "auto"
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype).to(device)
    return model, tokenizer


def save_policy(
    trainer,
    tokenizer,
    out_dir: str | Path,
    *,
    base_model: str | Path | None = None,
    profile: str | None = None,
    stage: str = RL_STAGE,
    heldout: Mapping[str, Any] | None = None,
) -> Path:
    """Save the trained policy as a plain transformers folder (a LoRA adapter is merged into the base), with a
    ``venus_agent.json`` saying how its rollouts ran (``trainer.igpo``'s system prompt style, max turns and tokens per
    turn), which the agent CLI, the demo and notebooks 05/06 use by default (:mod:`venus_utils.agent.settings`), and a
    ``README.md`` model card (:func:`model_card`: the SFT model ``base_model``, ``stage``, ``profile``, reward mode,
    steps, and the ``heldout`` results when given)."""
    model = trainer.accelerator.unwrap_model(trainer.model)
    if hasattr(model, "merge_and_unload"):
        model = copy.deepcopy(model).merge_and_unload()
    cfg: IGPOConfig = trainer.igpo
    card = model_card(
        cfg, int(trainer.state.global_step), base_model=base_model, profile=profile, stage=stage, heldout=heldout
    )
    with atomic_dir(out_dir) as tmp:  # write aside, then swap in
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / "README.md").write_text(card, encoding="utf-8")
        write_model_agent_settings(
            tmp,
            {
                "system_prompt_style": cfg.system_prompt_style,
                "max_turns": cfg.max_turns,
                "max_new_tokens": cfg.max_tokens_per_turn,
            },
            "rl",
        )
        seal_model(tmp)
    return Path(out_dir)


def model_card(
    cfg: IGPOConfig,
    steps: int,
    *,
    base_model: str | Path | None = None,
    profile: str | None = None,
    stage: str = RL_STAGE,
    heldout: Mapping[str, Any] | None = None,
) -> str:
    """The RL model's ``README.md`` (:func:`save_policy`): the SFT model it started from, the stage and profile, the
    reward mode, the steps and sizes, and held-out results when given (``{"accuracy (SFT)": 0.41, ...}``)."""
    how = {
        "igpo": "IGPO (DR-Venus: information-gain turn rewards, format penalties and the judged outcome)",
        "grpo": "outcome-only GRPO (the judged answer alone, no turn rewards or format penalties: the baseline "
        "arm of the IGPO comparison)",
    }[cfg.reward_mode]
    rows = {
        "base (SFT) model": base_model if base_model is not None else "not recorded",
        "stage": stage,
        "profile": profile or "not recorded",
        "reward mode": cfg.reward_mode,
        "RL steps": steps,
        "questions per step x rollouts": f"{cfg.prompts_per_step} x {cfg.num_generations}",
        "learning rate": cfg.learning_rate,
        "KL coefficient": cfg.kl_coef,
        "weights": f"LoRA rank {cfg.lora_r}, merged" if cfg.lora_r else "full fine-tuning",
        "seed": cfg.seed,
    }
    rows.update({f"held-out {k}": v for k, v in (heldout or {}).items()})
    table = "\n".join(f"| {k} | {v} |" for k, v in rows.items())
    return (
        f"---\nlibrary_name: transformers\ntags:\n- venus-recipe\n- {cfg.reward_mode}\n---\n\n"
        f"# venus-recipe RL policy ({cfg.reward_mode})\n\n"
        f"A deep-research agent: the SFT model below after {steps} RL step{'' if steps == 1 else 's'} of {how}, "
        f"trained by the {stage} stage of venus-recipe (a reproduction of DR-Venus).\n\n| | |\n|---|---|\n"
        f"{table}\n\n"
        "Load it with `transformers.AutoModelForCausalLM.from_pretrained` on this folder, or run it as an agent "
        "with `python -m venus_utils.agent`; the stage folder's `summary.json` holds the whole configuration.\n"
    )
