"""The policy RL starts from: the model and tokenizer an earlier stage saved (notebook 03's ``model/``)."""

from __future__ import annotations

from pathlib import Path


def load_policy(model_dir: str | Path, device: str = "cpu"):
    """The model and tokenizer saved by an earlier stage (``save_pretrained`` folder)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model_dir = Path(model_dir)
    if not (model_dir / "config.json").exists():
        raise FileNotFoundError(f"{model_dir}: no model here (config.json missing); run the SFT notebook first")
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    # the SFT export is bfloat16; on CPU train (and score IG) in float32, where tiny updates do not vanish
    dtype = torch.float32 if device == "cpu" else "auto"
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype).to(device)
    return model, tokenizer
