"""The SFT stage's one config: DR-Venus's values as defaults (``SFT/train_sft.sh`` and ``SFT/sft_shells/run.sh``).

DR-Venus trains Qwen3-4B-Thinking-2507 with verl: full fine-tuning, global batch 32 (micro-batch 1 per GPU,
8 GPUs), lr 1e-5, 1 epoch, cosine schedule with 10% warm-up, AdamW (0.9, 0.95), weight decay 0.01, grad-clip 1.0,
max length 200,000 tokens, gradient checkpointing, checkpoints every 100 steps, seed 1, each trajectory weighted
equally (sequence-mean of token-mean).  The offline profiles override what a 1M-parameter model on 2 cores needs
(see ``params/cpu.yaml``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..core.defaults import stage_defaults
from ..core.paths import SFT_STAGE
from ..core.perf import PRECISIONS, uses_bf16
from ..core.validation import (
    AT_LEAST_1,
    DEVICES,
    FRACTION,
    NON_NEGATIVE,
    POSITIVE,
    SEED,
    Range,
    StageSettings,
    check_fields,
)
from .batching import BATCHING_MODES, LOSS_WEIGHTINGS

#: Allowed values of the numeric settings (types come from the annotations), checked before anything loads.
RANGES = {
    "lora_r": AT_LEAST_1,
    "lora_alpha": POSITIVE,
    "lora_dropout": Range(0, 1),
    "max_length": AT_LEAST_1,
    "pad_to_multiple_of": AT_LEAST_1,
    "learning_rate": POSITIVE,
    "global_batch_size": AT_LEAST_1,
    "micro_batch_size": AT_LEAST_1,
    "num_train_epochs": POSITIVE,
    "max_steps": Range(1, also=(-1,)),
    "max_time_minutes": POSITIVE,
    "warmup_ratio": NON_NEGATIVE,
    "min_lr_ratio": FRACTION,
    "weight_decay": NON_NEGATIVE,
    "adam_beta1": Range(0, 1),
    "adam_beta2": Range(0, 1),
    "max_grad_norm": NON_NEGATIVE,
    "logging_steps": AT_LEAST_1,
    "save_steps": AT_LEAST_1,
    "save_total_limit": AT_LEAST_1,
    "eval_steps": AT_LEAST_1,
    "stop_at_eval_loss": POSITIVE,
    "num_threads": AT_LEAST_1,
    "seed": SEED,
}

ENGINES = ("auto", "unsloth", "trl")
#: Allowed values of the settings that are words, checked with the numbers.
CHOICES = {
    "engine": ENGINES,
    "finetuning": ("full", "lora"),
    "batching": BATCHING_MODES,
    "loss_weighting": LOSS_WEIGHTINGS,
    "device": DEVICES,
    "precision": PRECISIONS,
}


#: The lesson's values (venus_utils/core/defaults.py, notebook 03's parameters cell). A field whose DR-Venus value
#: the lesson runs with too takes it from there, so that each value is written once.
LESSON = stage_defaults(SFT_STAGE)


@dataclass
class SFTConfig(StageSettings):
    LABEL = "SFT"  # "unknown SFT setting(s) ..." (a class attribute, not a setting)

    # --- engine ---
    engine: str = field(
        default=LESSON["engine"],
        metadata={"help": "auto | unsloth | trl. auto: Unsloth when it is installed, else plain TRL SFTTrainer."},
    )
    finetuning: str = field(
        default=LESSON["finetuning"], metadata={"help": "full | lora. DR-Venus: full fine-tuning (LoRA rank 0)."}
    )
    lora_r: int = field(default=LESSON["lora_r"], metadata={"help": "LoRA rank when finetuning='lora'."})
    lora_alpha: int = field(default=LESSON["lora_alpha"], metadata={"help": "LoRA alpha (DR-Venus's preset: 16)."})
    lora_dropout: float = field(default=0.0, metadata={"help": "LoRA dropout."})
    lora_target_modules: tuple[str, ...] = field(
        default=("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"),
        metadata={"help": "LoRA targets: all linear layers of a Qwen3 block (DR-Venus: all-linear)."},
    )
    load_in_4bit: bool = field(
        default=LESSON["load_in_4bit"], metadata={"help": "Unsloth 4-bit base weights (GPU only; QLoRA)."}
    )
    gradient_checkpointing: bool = field(
        default=True, metadata={"help": "Recompute activations (Unsloth's variant under Unsloth). DR-Venus: on."}
    )
    # --- data ---
    max_length: int = field(
        default=200_000,
        metadata={"help": "Longest trajectory in tokens; longer ones are dropped and counted, never truncated."},
    )
    batching: str = field(
        default=LESSON["batching"],
        metadata={"help": "max_length | padded | grouped | padding_free (see venus_utils.sft.batching)."},
    )
    pad_to_multiple_of: int = field(
        default=LESSON["pad_to_multiple_of"],
        metadata={
            "help": "Round each batch's width, and the number of labelled positions the LM head runs on, up to a "
            "multiple of this (1: exact shapes). Under bf16 autocast on a CPU every new shape keeps kernel state, so "
            "thousands of shapes grow memory by gigabytes."
        },
    )
    loss_weighting: str = field(
        default=LESSON["loss_weighting"],
        metadata={"help": "sequence_mean (DR-Venus: each trajectory weighs the same) | token_mean."},
    )
    # --- optimisation ---
    learning_rate: float = field(default=1e-5, metadata={"help": "Peak learning rate (DR-Venus: 1e-5)."})
    global_batch_size: int = field(default=32, metadata={"help": "Trajectories per optimizer step (DR-Venus: 32)."})
    micro_batch_size: int = field(
        default=1, metadata={"help": "Trajectories per forward pass; global/micro = gradient accumulation."}
    )
    num_train_epochs: float = field(default=LESSON["num_train_epochs"], metadata={"help": "Epochs (DR-Venus: 1)."})
    max_steps: int = field(default=-1, metadata={"help": "Optimizer steps; -1 = from epochs."})
    max_time_minutes: float | None = field(
        default=LESSON["max_time_minutes"],
        metadata={"help": "Stop (and save) after this much wall time; None = no limit."},
    )
    warmup_ratio: float = field(default=0.1, metadata={"help": "Linear warm-up share of the steps (DR-Venus: 0.1)."})
    lr_scheduler_type: str = field(default="cosine", metadata={"help": "DR-Venus: cosine to 0."})
    schedule_by_time: bool = field(
        default=LESSON["schedule_by_time"],
        metadata={
            "help": "With max_time_minutes: warm-up and cosine follow the share of the time budget spent "
            "(or of max_steps, whichever is further), so a run stopped by the clock ends at a low learning rate "
            "(venus_utils.sft.schedule). DR-Venus: off (steps)."
        },
    )
    min_lr_ratio: float = field(
        default=LESSON["min_lr_ratio"],
        metadata={
            "help": "schedule_by_time: the cosine ends at this share of the peak (DR-Venus: 0; tiny-agent study: 0.1)."
        },
    )
    weight_decay: float = field(default=0.01, metadata={"help": "AdamW weight decay (DR-Venus: 0.01)."})
    adam_beta1: float = 0.9
    adam_beta2: float = field(default=0.95, metadata={"help": "DR-Venus: 0.95."})
    max_grad_norm: float = field(default=1.0, metadata={"help": "Gradient clipping (DR-Venus: 1.0)."})
    seed: int = field(default=1, metadata={"help": "Trainer seed (DR-Venus: 1)."})
    # --- bookkeeping ---
    logging_steps: int = 10
    save_steps: int = field(
        default=100,
        metadata={"help": "Checkpoint every N steps (DR-Venus: 100); a killed run resumes from the last one."},
    )
    save_total_limit: int | None = field(
        default=None, metadata={"help": "Checkpoints kept; None = all (DR-Venus keeps all)."}
    )
    eval_steps: int | None = field(
        default=100, metadata={"help": "Validation loss every N steps (DR-Venus: 100); None = only at the end."}
    )
    stop_at_eval_loss: float | None = field(
        default=LESSON["stop_at_eval_loss"],
        metadata={
            "help": "Stop (and save) at the first validation loss at or below this: max_steps becomes a cap and the "
            "schedule still runs over it. Needs validation rows and eval_steps. None: train the whole budget "
            "(DR-Venus: one epoch)."
        },
    )
    resume: bool = field(
        default=True,
        metadata={
            "help": "Continue from the last checkpoint in the output folder when there is one (DR-Venus: resume auto)."
        },
    )
    device: str = field(default="auto", metadata={"help": "cpu | cuda | auto."})
    precision: str = field(
        default=LESSON["precision"],
        metadata={
            "help": "auto | bf16 | fp32: bf16 autocast over fp32 master weights and optimizer, or plain fp32. auto: "
            "bf16 on CUDA and on a CPU with native bf16 dot products (avx512_bf16 / AMX), else fp32."
        },
    )
    num_threads: int | None = field(default=None, metadata={"help": "torch CPU threads; None = leave as is."})
    export_merged: bool = field(default=True, metadata={"help": "Write the merged 16-bit model (model/)."})

    def uses_bf16(self, device: str) -> bool:
        """Whether training on ``device`` (cpu | cuda) runs under bf16 autocast (:attr:`precision`)."""
        return uses_bf16(self.precision, device)

    @property
    def gradient_accumulation_steps(self) -> int:
        return max(1, self.global_batch_size // self.micro_batch_size)

    def __post_init__(self):
        check_fields(self, RANGES, "SFTConfig", CHOICES)
        if self.global_batch_size % self.micro_batch_size:
            raise ValueError(
                f"global_batch_size {self.global_batch_size} is not a multiple of "
                f"micro_batch_size {self.micro_batch_size}"
            )
        if self.schedule_by_time and not self.max_time_minutes and self.max_steps <= 0:
            raise ValueError("schedule_by_time needs max_time_minutes or max_steps (the budget the schedule follows)")
        self.lora_target_modules = tuple(self.lora_target_modules)
