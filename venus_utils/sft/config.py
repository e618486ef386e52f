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
)
from .batching import BATCHING_MODES, LOSS_WEIGHTINGS

ENGINES = ("auto", "unsloth", "trl")


#: The lesson's values (venus_utils/core/defaults.py, notebook 03's parameters cell). A field whose DR-Venus value
#: the lesson runs with too takes it from there, so that each value is written once.
LESSON = stage_defaults(SFT_STAGE)


@dataclass
class SFTConfig(StageSettings):
    LABEL = "SFT"  # "unknown SFT setting(s) ..." (a class attribute, not a setting)

    # --- engine ---
    engine: str = field(
        default=LESSON["engine"],
        metadata={
            "choices": ENGINES,
            "help": "auto | unsloth | trl. auto: Unsloth when it is installed, else plain TRL SFTTrainer.",
        },
    )
    finetuning: str = field(
        default=LESSON["finetuning"],
        metadata={"choices": ("full", "lora"), "help": "full | lora. DR-Venus: full fine-tuning (LoRA rank 0)."},
    )
    lora_r: int = field(
        default=LESSON["lora_r"], metadata={"range": AT_LEAST_1, "help": "LoRA rank when finetuning='lora'."}
    )
    lora_alpha: int = field(
        default=LESSON["lora_alpha"], metadata={"range": POSITIVE, "help": "LoRA alpha (DR-Venus's preset: 16)."}
    )
    lora_dropout: float = field(default=0.0, metadata={"range": Range(0, 1), "help": "LoRA dropout."})
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
        metadata={
            "range": AT_LEAST_1,
            "help": "Longest trajectory in tokens; longer ones are dropped and counted, never truncated.",
        },
    )
    batching: str = field(
        default=LESSON["batching"],
        metadata={
            "choices": BATCHING_MODES,
            "help": "max_length | padded | grouped | padding_free (see venus_utils.sft.batching).",
        },
    )
    pad_to_multiple_of: int = field(
        default=LESSON["pad_to_multiple_of"],
        metadata={
            "range": AT_LEAST_1,
            "help": "Round each batch's width, and the number of labelled positions the LM head runs on, up to a "
            "multiple of this (1: exact shapes). Under bf16 autocast on a CPU every new shape keeps kernel state, so "
            "thousands of shapes grow memory by gigabytes.",
        },
    )
    loss_weighting: str = field(
        default=LESSON["loss_weighting"],
        metadata={
            "choices": LOSS_WEIGHTINGS,
            "help": "sequence_mean (DR-Venus: each trajectory weighs the same) | token_mean.",
        },
    )
    # --- optimisation ---
    learning_rate: float = field(
        default=1e-5, metadata={"range": POSITIVE, "help": "Peak learning rate (DR-Venus: 1e-5)."}
    )
    global_batch_size: int = field(
        default=32, metadata={"range": AT_LEAST_1, "help": "Trajectories per optimizer step (DR-Venus: 32)."}
    )
    micro_batch_size: int = field(
        default=1,
        metadata={"range": AT_LEAST_1, "help": "Trajectories per forward pass; global/micro = gradient accumulation."},
    )
    num_train_epochs: float = field(
        default=LESSON["num_train_epochs"], metadata={"range": POSITIVE, "help": "Epochs (DR-Venus: 1)."}
    )
    max_steps: int = field(
        default=-1, metadata={"range": Range(1, also=(-1,)), "help": "Optimizer steps; -1 = from epochs."}
    )
    max_time_minutes: float | None = field(
        default=LESSON["max_time_minutes"],
        metadata={"range": POSITIVE, "help": "Stop (and save) after this much wall time; None = no limit."},
    )
    warmup_ratio: float = field(
        default=0.1, metadata={"range": NON_NEGATIVE, "help": "Linear warm-up share of the steps (DR-Venus: 0.1)."}
    )
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
            "range": FRACTION,
            "help": "schedule_by_time: the cosine ends at this share of the peak "
            "(DR-Venus: 0; tiny-agent study: 0.1).",
        },
    )
    weight_decay: float = field(
        default=0.01, metadata={"range": NON_NEGATIVE, "help": "AdamW weight decay (DR-Venus: 0.01)."}
    )
    adam_beta1: float = field(
        default=0.9, metadata={"range": Range(0, 1), "help": "AdamW beta1 (the trainers' default)."}
    )
    adam_beta2: float = field(default=0.95, metadata={"range": Range(0, 1), "help": "DR-Venus: 0.95."})
    max_grad_norm: float = field(
        default=1.0, metadata={"range": NON_NEGATIVE, "help": "Gradient clipping (DR-Venus: 1.0)."}
    )
    seed: int = field(default=1, metadata={"range": SEED, "help": "Trainer seed (DR-Venus: 1)."})
    # --- bookkeeping ---
    logging_steps: int = field(
        default=10, metadata={"range": AT_LEAST_1, "help": "Log loss and tokens/s every N steps."}
    )
    save_steps: int = field(
        default=100,
        metadata={
            "range": AT_LEAST_1,
            "help": "Checkpoint every N steps (DR-Venus: 100); a killed run resumes from the last one.",
        },
    )
    save_total_limit: int | None = field(
        default=None, metadata={"range": AT_LEAST_1, "help": "Checkpoints kept; None = all (DR-Venus keeps all)."}
    )
    eval_steps: int | None = field(
        default=100,
        metadata={
            "range": AT_LEAST_1,
            "help": "Validation loss every N steps (DR-Venus: 100); None = only at the end.",
        },
    )
    stop_at_eval_loss: float | None = field(
        default=LESSON["stop_at_eval_loss"],
        metadata={
            "range": POSITIVE,
            "help": "Stop (and save) at the first validation loss at or below this: max_steps becomes a cap and the "
            "schedule still runs over it. Needs validation rows and eval_steps. None: train the whole budget "
            "(DR-Venus: one epoch).",
        },
    )
    resume: bool = field(
        default=True,
        metadata={
            "help": "Continue from the last checkpoint in the output folder when there is one (DR-Venus: resume auto)."
        },
    )
    device: str = field(default="auto", metadata={"choices": DEVICES, "help": "cpu | cuda | auto."})
    precision: str = field(
        default=LESSON["precision"],
        metadata={
            "choices": PRECISIONS,
            "help": "auto | bf16 | fp32: bf16 autocast over fp32 master weights and optimizer, or plain fp32. auto: "
            "bf16 on CUDA and on a CPU with native bf16 dot products (avx512_bf16 / AMX), else fp32.",
        },
    )
    num_threads: int | None = field(
        default=None, metadata={"range": AT_LEAST_1, "help": "torch CPU threads; None = leave as is."}
    )
    export_merged: bool = field(default=True, metadata={"help": "Write the merged 16-bit model (model/)."})

    def uses_bf16(self, device: str) -> bool:
        """Whether training on ``device`` (cpu | cuda) runs under bf16 autocast (:attr:`precision`)."""
        return uses_bf16(self.precision, device)

    @property
    def gradient_accumulation_steps(self) -> int:
        return max(1, self.global_batch_size // self.micro_batch_size)

    def __post_init__(self):
        self.check_settings()
        if self.global_batch_size % self.micro_batch_size:
            raise ValueError(
                f"global_batch_size {self.global_batch_size} is not a multiple of "
                f"micro_batch_size {self.micro_batch_size}"
            )
        if self.schedule_by_time and not self.max_time_minutes and self.max_steps <= 0:
            raise ValueError("schedule_by_time needs max_time_minutes or max_steps (the budget the schedule follows)")
        self.lora_target_modules = tuple(self.lora_target_modules)
