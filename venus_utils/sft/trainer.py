"""Agentic SFT: one function, two engines.

``train_sft(config, model_path, train_rows, val_rows, out_dir)`` fine-tunes on tokenized trajectories
(:func:`venus_utils.sft.data.build_examples`) with

- **Unsloth** (``FastLanguageModel``: LoRA or full fine-tuning, 4-bit on GPUs, Unsloth gradient checkpointing; on a
  CPU-only machine its CPU backend) when it is installed, or
- plain **TRL** ``SFTTrainer`` (+ PEFT for LoRA) otherwise,

both driving the same trainer subclass, whose loss is the DR-Venus one: cross-entropy on the trained tokens only,
each trajectory weighing the same (sequence-mean of token-mean; token-mean as an option), exact across gradient
accumulation.  Checkpoints go to ``out_dir/checkpoints``; a killed run started again with the same arguments
continues from the last one.  Exports: ``out_dir/adapter`` (LoRA) and ``out_dir/model`` (merged, 16-bit, loadable
by transformers and vLLM), each with a ``venus_agent.json`` when ``agent_settings`` says how the agent runs the model
(its system prompt style and limits: :mod:`venus_utils.agent.settings`).

Unsloth must be imported before transformers and TRL: call :func:`prepare_engine` first thing in a notebook.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..agent.settings import check_model_agent_settings, write_model_agent_settings
from ..core.callbacks import eval_loss_stop, resumed_as_configured, step_progress, time_limit
from ..core.checkpoints import (
    AtomicCheckpoints,
    ResumePoint,
    check_model,
    finished_checkpoint,
    local_model_digest,
    prepare_resume,
    read_train_clock,
    seal_model,
    train_to_end,
)
from ..core.distributed import is_main_process, world_size
from ..core.env import available
from ..core.io import atomic_dir, write_json
from ..core.locks import hold
from ..core.perf import FlopCounter
from .batching import Collator, LengthGroupedSampler, count_units, masked_lm_loss
from .config import SFTConfig
from .schedule import budget_scheduler


def unsloth_available() -> bool:
    return available("unsloth")


def resolve_engine(requested: str = "auto") -> str:
    """``auto`` -> ``unsloth`` when installed, else ``trl``; an explicit request that cannot be met is an error."""
    if requested == "trl":
        return "trl"
    if requested == "unsloth" and not unsloth_available():
        raise RuntimeError(
            "engine='unsloth' but Unsloth is not installed (GPU extra: `make gpu`, or the .venv-unsloth env)"
        )
    if requested not in ("auto", "unsloth"):
        raise ValueError(f"engine={requested!r}: expected auto | unsloth | trl")
    return "unsloth" if unsloth_available() else "trl"


def prepare_engine(requested: str = "auto") -> str:
    """Resolve the engine and, for Unsloth, import it now (it patches transformers/TRL and must come first)."""
    engine = resolve_engine(requested)
    if engine == "unsloth":
        import unsloth  # noqa: F401

    return engine


def _device(cfg: SFTConfig) -> str:
    import torch

    if cfg.device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return cfg.device


def load_model(model_path: str | Path, cfg: SFTConfig, engine: str):
    """The model to train (LoRA-wrapped when ``finetuning='lora'``) and its tokenizer."""
    import torch

    device = _device(cfg)
    if Path(str(model_path)).is_dir():  # a local folder (a hub name is the hub's to check)
        check_model(model_path)
    if engine == "unsloth":
        from unsloth import FastLanguageModel

        model, tokenizer = FastLanguageModel.from_pretrained(
            model_name=str(model_path),
            max_seq_length=cfg.max_length,
            load_in_4bit=cfg.load_in_4bit,
            full_finetuning=cfg.finetuning == "full",
            dtype=torch.float32 if device == "cpu" else None,
            local_files_only=Path(str(model_path)).exists(),
        )
        if cfg.finetuning == "lora":
            model = FastLanguageModel.get_peft_model(
                model,
                r=cfg.lora_r,
                lora_alpha=cfg.lora_alpha,
                lora_dropout=cfg.lora_dropout,
                target_modules=list(cfg.lora_target_modules),
                bias="none",
                use_gradient_checkpointing="unsloth" if cfg.gradient_checkpointing else False,
                random_state=cfg.seed,
            )
        return model, tokenizer
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_path))
    # Full fine-tuning keeps fp32 master weights (bf16 autocast comes from the training arguments), as DR-Venus's
    # FSDP run does: with bf16 weights, AdamW updates at lr 1e-5 are lost to rounding. LoRA trains fp32 adapters
    # on a frozen bf16 base.
    dtype = torch.float32 if device == "cpu" or cfg.finetuning == "full" else torch.bfloat16
    model = AutoModelForCausalLM.from_pretrained(str(model_path), dtype=dtype)
    if cfg.finetuning == "lora":
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(
            model,
            LoraConfig(
                r=cfg.lora_r,
                lora_alpha=cfg.lora_alpha,
                lora_dropout=cfg.lora_dropout,
                target_modules=list(cfg.lora_target_modules),
                task_type="CAUSAL_LM",
            ),
        )
    return model, tokenizer


def _own_scheduler(cfg: SFTConfig, lr_factor: Callable[[int], float] | None, optimizer, args):
    """The recipe's learning-rate schedule, or None for transformers' own: the caller's ``lr_factor`` (the control's
    continuation), else with ``schedule_by_time`` warm-up and cosine over the step (or time) budget to the floor."""
    if lr_factor is not None:
        from torch.optim.lr_scheduler import LambdaLR

        return LambdaLR(optimizer, lr_factor)
    if cfg.schedule_by_time:
        return budget_scheduler(optimizer, cfg.max_time_minutes, args.max_steps, cfg.warmup_ratio, cfg.min_lr_ratio)
    return None


def _trainer_class(base):
    """``base`` (TRL's SFTTrainer, possibly patched by Unsloth) with the DR-Venus loss and length-grouped batches."""

    class VenusSFTTrainer(AtomicCheckpoints, base):
        def __init__(self, *args, venus_config: SFTConfig, lr_factor: Callable[[int], float] | None = None, **kwargs):
            super().__init__(*args, **kwargs)
            self.venus_config = venus_config
            self.venus_lr_factor = lr_factor
            # model FLOPs of the training steps (not of evaluations), logged per window as ``flops``
            self.flop_counter, self._flops_seen, self._flops_window = FlopCounter(self.model), 0.0, 0.0
            # The loss below is normalised by this step's units itself; Trainer then divides by the accumulation steps.
            self.model_accepts_loss_kwargs = False
            self._step_units: float | None = None
            self._window = {"tokens": 0, "loss_tokens": 0, "t0": time.perf_counter(), "acc": []}
            self.tokens_seen = 0

        def create_scheduler(self, num_training_steps, optimizer=None):
            if self.lr_scheduler is None:
                own = _own_scheduler(self.venus_config, self.venus_lr_factor, optimizer or self.optimizer, self.args)
                if own is not None:
                    self.lr_scheduler, self._created_lr_scheduler = own, True
            return super().create_scheduler(num_training_steps, optimizer)

        def _get_train_sampler(self, *args, **kwargs):
            if self.venus_config.batching == "grouped":
                return LengthGroupedSampler(
                    self.train_dataset["length"], self.args.per_device_train_batch_size, seed=self.args.seed
                )
            return super()._get_train_sampler(*args, **kwargs)

        def get_batch_samples(self, epoch_iterator, num_batches, *args, **kwargs):
            batches, num_items = super().get_batch_samples(epoch_iterator, num_batches, *args, **kwargs)
            units = count_units(batches, self.venus_config.loss_weighting) if batches else 0.0
            world = self.accelerator.num_processes
            if world > 1:  # the step's units over all processes; DDP/FSDP/ZeRO average the gradients over `world`
                import torch

                units = (
                    float(self.accelerator.reduce(torch.tensor(units, device=self.accelerator.device), "sum")) / world
                )
            self._step_units = units or None
            return batches, num_items

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            denominator = None
            if model.training and self._step_units:
                steps = (
                    getattr(self, "current_gradient_accumulation_steps", None) or self.args.gradient_accumulation_steps
                )
                denominator = self._step_units / steps
            # the loss calls the decoder directly (logits on the trained positions only), not the model's forward that
            # accelerate wraps in its autocast: enter the mixed-precision context here (bf16 when args.bf16)
            with self.accelerator.autocast():
                cfg = self.venus_config
                loss, stats = masked_lm_loss(model, inputs, cfg.loss_weighting, denominator, cfg.pad_to_multiple_of)
            if model.training:
                mask = inputs.get("attention_mask")
                n = int(mask.sum()) if mask is not None else int(inputs["input_ids"].numel())
                self.tokens_seen += n
                self._window["tokens"] += n
                self._window["loss_tokens"] += stats["loss_tokens"]
                self._window["acc"].append(stats["token_accuracy"])
            if return_outputs:
                return loss, {"loss": loss}
            return loss

        def training_step(self, *args, **kwargs):
            loss = super().training_step(*args, **kwargs)
            self.flop_counter.settle()  # the backward pass is done: no recomputation is owed
            mine = self.flop_counter.flops - self._flops_seen
            self._flops_seen = self.flop_counter.flops
            if self.accelerator.num_processes > 1:
                import torch

                mine = float(self.accelerator.reduce(torch.tensor(mine, device=self.accelerator.device), "sum"))
            self._flops_window += mine
            return loss

        def log(self, logs: dict[str, float], *args, **kwargs) -> None:
            if ("loss" in logs or "train_runtime" in logs) and self._flops_window:
                # model FLOPs since the last log, every process; the steps after the last loss log are in the closing
                # summary's, so a run's FLOPs are the sum over its history
                logs["flops"] = self._flops_window
                self._flops_window = 0.0
            if "loss" in logs and self._window["tokens"]:
                dt = max(time.perf_counter() - self._window["t0"], 1e-9)
                logs["window_s"] = round(dt, 4)  # seconds since the last log (the benchmarks' denominator)
                logs["tokens_per_s"] = round(self._window["tokens"] / dt, 1)
                logs["loss_tokens_per_s"] = round(self._window["loss_tokens"] / dt, 1)
                logs["token_accuracy"] = round(sum(self._window["acc"]) / len(self._window["acc"]), 4)
                logs["tokens_seen"] = self.tokens_seen
                self._window = {"tokens": 0, "loss_tokens": 0, "t0": time.perf_counter(), "acc": []}
            super().log(logs, *args, **kwargs)

    return VenusSFTTrainer


@dataclass
class SFTResult:
    engine: str
    out_dir: Path
    model_dir: Path | None
    adapter_dir: Path | None
    history: list[dict[str, Any]] = field(default_factory=list)
    steps: int = 0
    wall_s: float | None = 0.0  # seconds spent training, across resumed calls (None: a checkpoint did not record it)
    tokens_seen: int = 0
    resumed_from: str | None = None

    @classmethod
    def from_dir(cls, out_dir: str | Path, engine: str, finetuning: str = "full") -> SFTResult:
        """The result of a run that trained in other processes (``accelerate.notebook_launcher``), from its files."""
        out_dir = Path(out_dir)
        history = json.loads((out_dir / "train_history.json").read_text(encoding="utf-8"))
        logs = [h for h in history if "loss" in h]
        ends = [h for h in history if "train_runtime" in h]
        try:  # the time the run trained, across calls: its last checkpoint's clock (train_to_end)
            wall = read_train_clock(finished_checkpoint(out_dir / "checkpoints")[1])
        except (OSError, ValueError, KeyError, TypeError):
            wall = None
        if wall is None:  # checkpoints of older code: the last call's runtime
            wall = float(ends[-1]["train_runtime"]) if ends else None
        return cls(
            engine=engine,
            out_dir=out_dir,
            model_dir=out_dir / "model" if (out_dir / "model").is_dir() else None,
            adapter_dir=out_dir / "adapter" if finetuning == "lora" else None,
            history=history,
            steps=max((h.get("step", 0) for h in history), default=0),
            wall_s=wall,
            tokens_seen=int(logs[-1].get("tokens_seen", 0)) if logs else 0,
        )

    @property
    def train_logs(self) -> list[dict[str, Any]]:
        return [h for h in self.history if "loss" in h]

    def summary(self) -> dict[str, Any]:
        logs = self.train_logs
        rates = [h["tokens_per_s"] for h in logs if "tokens_per_s" in h]
        evals = [h["eval_loss"] for h in self.history if "eval_loss" in h]
        return {
            "engine": self.engine,
            "steps": self.steps,
            "wall_s": None if self.wall_s is None else round(self.wall_s, 1),
            "loss_first": logs[0]["loss"] if logs else None,
            "loss_last": logs[-1]["loss"] if logs else None,
            "eval_loss_last": evals[-1] if evals else None,
            "tokens_per_s": round(sum(rates) / len(rates), 1) if rates else None,
            "tokens_seen": self.tokens_seen,
            # model FLOPs of the logged training steps (perf.FlopCounter; the steps after the last log are not in it)
            "train_flops": sum(h.get("flops", 0.0) for h in logs) or None,
            "resumed_from": self.resumed_from,
            "model_dir": str(self.model_dir) if self.model_dir else None,
            "adapter_dir": str(self.adapter_dir) if self.adapter_dir else None,
        }


def _to_dataset(rows: list[dict[str, Any]] | None):
    if not rows:
        return None
    from datasets import Dataset

    return Dataset.from_dict({k: [r[k] for r in rows] for k in ("input_ids", "labels", "length")})


def batch_split(cfg: SFTConfig, processes: int) -> tuple[int, int]:
    """``(micro-batch, micro-batches per optimizer step)`` of each process, so that a step sees ``global_batch_size``
    trajectories: each process takes ``global_batch_size / processes`` of them, in micro-batches of
    ``micro_batch_size`` when that divides its share, else of the largest size below it that does (and says so), so
    that a profile made for one process also runs under ``accelerate launch`` (smoke: 4 = 4 x 1 becomes 2 x 2 x 1)."""
    if cfg.global_batch_size % processes:
        raise ValueError(f"global_batch_size {cfg.global_batch_size} does not split over {processes} processes")
    share = cfg.global_batch_size // processes
    micro = next(m for m in range(min(cfg.micro_batch_size, share), 0, -1) if share % m == 0)
    if micro != cfg.micro_batch_size and is_main_process():
        print(
            f"[sft] micro_batch_size {cfg.micro_batch_size} does not divide the {share} trajectories per process of "
            f"global_batch_size {cfg.global_batch_size} on {processes} processes: using micro-batches of {micro}"
        )
    return micro, share // micro


def _training_args(cfg: SFTConfig, out_dir: Path, has_eval: bool, engine: str):
    from trl import SFTConfig as TRLConfig

    device = _device(cfg)
    micro, accumulation = batch_split(cfg, world_size())
    kwargs = dict(
        output_dir=str(out_dir / "checkpoints"),
        per_device_train_batch_size=micro,
        per_device_eval_batch_size=cfg.micro_batch_size,
        gradient_accumulation_steps=accumulation,
        learning_rate=cfg.learning_rate,
        lr_scheduler_type=cfg.lr_scheduler_type,
        warmup_steps=cfg.warmup_ratio,  # a float < 1 is a ratio of the total steps (transformers 5)
        weight_decay=cfg.weight_decay,
        adam_beta1=cfg.adam_beta1,
        adam_beta2=cfg.adam_beta2,
        max_grad_norm=cfg.max_grad_norm,
        num_train_epochs=cfg.num_train_epochs,
        max_steps=cfg.max_steps,
        logging_steps=cfg.logging_steps,
        save_strategy="steps",
        save_steps=cfg.save_steps,
        save_total_limit=cfg.save_total_limit,
        eval_strategy="steps" if has_eval and cfg.eval_steps else "no",
        eval_steps=cfg.eval_steps if has_eval and cfg.eval_steps else None,
        seed=cfg.seed,
        data_seed=cfg.seed,
        report_to="none",
        remove_unused_columns=False,
        dataset_kwargs={"skip_prepare_dataset": True},
        max_length=None,
        use_cpu=device == "cpu",
        bf16=cfg.uses_bf16(device),
        dataloader_num_workers=0,
        dataloader_pin_memory=device == "cuda",
        disable_tqdm=False,
    )
    # Off means off: TRL's SFTConfig turns gradient checkpointing on by default (TRL 1.x), which recomputed every
    # layer's forward on the CPU profiles that set it off (~1/4 of an SFT step). On, Unsloth applies its own (in
    # get_peft_model / from_pretrained) and the TRL default is left to it.
    if engine == "trl" or not cfg.gradient_checkpointing:
        kwargs["gradient_checkpointing"] = cfg.gradient_checkpointing
    return TRLConfig(**kwargs)


def export_model(
    model,
    tokenizer,
    out_dir: str | Path,
    engine: str,
    finetuning: str,
    merged: bool = True,
    state_dict: dict | None = None,
    agent_settings: dict | None = None,
) -> tuple[Path | None, Path | None]:
    """Write ``adapter/`` (LoRA only) and ``model/`` (merged, bfloat16). Returns ``(model_dir, adapter_dir)``.

    ``state_dict``: the full weights gathered from a sharded engine (FSDP / ZeRO-3, full fine-tuning).
    ``agent_settings``: ``{system_prompt_style, max_turns, max_new_tokens}``, the prompt the training data used and
    the agent limits to run the model with, written as ``venus_agent.json`` into each folder (the agent CLI, the
    demo and notebooks 05/06 read it: :func:`venus_utils.agent.settings.model_agent_settings`)."""
    import torch

    out_dir = Path(out_dir)
    adapter_dir = model_dir = None
    if finetuning == "lora":
        adapter_dir = out_dir / "adapter"
        with atomic_dir(adapter_dir) as tmp:
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
            if agent_settings is not None:
                write_model_agent_settings(tmp, agent_settings, "sft")
            seal_model(tmp)
    if merged:
        model_dir = out_dir / "model"
        with atomic_dir(model_dir) as tmp:
            if finetuning == "lora" and engine == "unsloth":
                model.save_pretrained_merged(str(tmp), tokenizer, save_method="merged_16bit")
            else:
                base = model.merge_and_unload() if finetuning == "lora" else model
                if state_dict is not None and finetuning != "lora":
                    state_dict = {
                        k: v.to(torch.bfloat16) if v.is_floating_point() else v for k, v in state_dict.items()
                    }
                    base.save_pretrained(tmp, state_dict=state_dict)
                else:
                    base.to(torch.bfloat16).save_pretrained(tmp)
                    base.to(torch.float32 if _param_device(base) == "cpu" else torch.bfloat16)
                tokenizer.save_pretrained(tmp)
            if agent_settings is not None:
                write_model_agent_settings(tmp, agent_settings, "sft")
            seal_model(tmp)
    return model_dir, adapter_dir


def _param_device(model) -> str:
    return next(model.parameters()).device.type


# SFTConfig fields that may change when a run is resumed (limits, logging, where and how it runs)
RESUMABLE_FIELDS = {
    "engine",
    "gradient_checkpointing",
    "num_train_epochs",
    "max_steps",
    "max_time_minutes",
    "logging_steps",
    "save_steps",
    "save_total_limit",
    "eval_steps",
    "stop_at_eval_loss",
    "resume",
    "device",
    "num_threads",
    "export_merged",
    "pad_to_multiple_of",
}


def resume_settings(cfg: SFTConfig, model_path: str | Path, train_rows: list[dict[str, Any]]) -> dict[str, Any]:
    """What defines an SFT run, for :func:`venus_utils.core.checkpoints.guard_resume`: the config without
    :data:`RESUMABLE_FIELDS`, the base model (its path, and a local folder's digest: a base model built again at the
    same path, another world's tokenizer, is another run) and the size of the training data."""
    kept = {k: v for k, v in asdict(cfg).items() if k not in RESUMABLE_FIELDS}
    return {
        **kept,
        "base_model": str(model_path),
        "base_model_digest": local_model_digest(model_path),
        "train_rows": len(train_rows),
        "train_tokens": sum(int(r["length"]) for r in train_rows),
    }


def _exported_after(out_dir: Path, cfg: SFTConfig, checkpoint: str) -> bool:
    """Whether the exported folders exist and are newer than ``checkpoint`` (a finished run rerun: nothing to do)."""
    wanted = ([out_dir / "model"] if cfg.export_merged else []) + (
        [out_dir / "adapter"] if cfg.finetuning == "lora" else []
    )
    made = Path(checkpoint).stat().st_mtime
    return all(p.is_dir() and p.stat().st_mtime >= made for p in wanted)


def finish_limits(cfg: SFTConfig) -> dict[str, Any]:
    """The limits under which an SFT run ends (a rerun under the same limits after it ended trains nothing; a rerun
    with a lower ``stop_at_eval_loss`` or a larger budget trains on from the last checkpoint).  ``stop_at_eval_loss``
    is recorded only when set, so runs finished before it existed still count as finished."""
    limits = {
        "max_steps": cfg.max_steps,
        "max_time_minutes": cfg.max_time_minutes,
        "num_train_epochs": cfg.num_train_epochs,
    }
    if cfg.stop_at_eval_loss is not None:
        limits["stop_at_eval_loss"] = cfg.stop_at_eval_loss
    return limits


def train_sft(
    cfg: SFTConfig,
    model_path: str | Path,
    train_rows: list[dict[str, Any]],
    out_dir: str | Path,
    val_rows: list[dict[str, Any]] | None = None,
    callbacks: list | None = None,
    agent_settings: dict[str, Any] | None = None,
    lr_factor: Callable[[int], float] | None = None,
    plateau: Any = None,
) -> SFTResult:
    """Fine-tune ``model_path`` on tokenized trajectories; returns the history and the exported folders.

    ``plateau`` (:class:`venus_utils.sft.plateau.Plateau`): end the run annealed once the agent's validation accuracy
    stops rising (its callback, and its rule in the run's finish limits).

    ``lr_factor`` (optimizer step -> multiple of ``learning_rate``) replaces the configured schedule (the control arm
    of ``rl arms``, :mod:`venus_utils.sft.continuation`, continues a stopped run on a schedule of its own).

    ``agent_settings`` (``{system_prompt_style, max_turns, max_new_tokens}``: the training data's system prompt and
    the agent limits to run the model with) goes into the exported folders as ``venus_agent.json``
    (:func:`export_model`); a finished run rerun with it only (re)writes that file.

    ``out_dir`` is held for the run (:func:`venus_utils.core.locks.hold`; a notebook's or the command line's stage
    already holds it): a second trainer on the same checkpoints is refused before anything is deleted there."""
    with hold(out_dir, "SFT training run", hint="or train into another folder"):
        if plateau is not None:
            callbacks = [*(callbacks or []), plateau.callback(out_dir)]
        extra = plateau.limits() if plateau is not None else {}
        return _train_sft(
            cfg, model_path, train_rows, Path(out_dir), val_rows, callbacks, agent_settings, lr_factor, extra
        )


def _train_sft(
    cfg: SFTConfig,
    model_path: str | Path,
    train_rows: list[dict[str, Any]],
    out_dir: Path,
    val_rows: list[dict[str, Any]] | None,
    callbacks: list | None,
    agent_settings: dict[str, Any] | None,
    lr_factor: Callable[[int], float] | None = None,
    extra_limits: dict[str, Any] | None = None,
) -> SFTResult:
    """The run, step by step: check the rows, build the trainer, resume, train, evaluate, export."""
    if not train_rows:
        raise ValueError("no training rows (did every trajectory get dropped? see the ExampleSet stats)")
    too_long = [r["length"] for r in train_rows if r["length"] > cfg.max_length]
    if too_long:
        raise ValueError(
            f"{len(too_long)} training rows exceed max_length={cfg.max_length} (longest {max(too_long)}); "
            "build them with that max_length"
        )
    if cfg.stop_at_eval_loss is not None and not (val_rows and cfg.eval_steps):
        raise ValueError(
            f"stop_at_eval_loss {cfg.stop_at_eval_loss} needs a validation loss during training: "
            f"{'set eval_steps' if val_rows else 'no validation rows (val.parquet empty or val_fraction 0)'}"
        )
    if agent_settings is not None:
        agent_settings = check_model_agent_settings(agent_settings)
    engine = prepare_engine(cfg.engine)
    trainer, tokenizer = _build_trainer(cfg, model_path, engine, train_rows, val_rows, out_dir, callbacks, lr_factor)
    checkpoints_dir = out_dir / "checkpoints"
    point = ResumePoint()
    if cfg.resume:
        settings = resume_settings(cfg, model_path, train_rows)
        point = prepare_resume(
            checkpoints_dir,
            settings,
            root=out_dir.parent,
            max_steps=cfg.max_steps,
            limits={**finish_limits(cfg), **(extra_limits or {})},
            main_process=is_main_process(),
            defaults={"base_model_digest": settings["base_model_digest"]},  # a run made before digests: its path
        )
    wall = train_to_end(trainer, point, checkpoints_dir, cfg.max_steps, {**finish_limits(cfg), **(extra_limits or {})})
    if val_rows and not point.finished:
        trainer.evaluate()
    model_dir, adapter_dir = _export_trained(trainer, tokenizer, point, cfg, engine, out_dir, agent_settings)
    result = SFTResult(
        engine=engine,
        out_dir=out_dir,
        model_dir=model_dir,
        adapter_dir=adapter_dir,
        history=list(trainer.state.log_history),
        steps=trainer.state.global_step,
        wall_s=wall,
        tokens_seen=trainer.tokens_seen,
        resumed_from=point.checkpoint,
    )
    if trainer.accelerator.is_main_process:
        write_json(out_dir / "train_history.json", result.history)
    return result


def _build_trainer(
    cfg: SFTConfig,
    model_path: str | Path,
    engine: str,
    train_rows: list[dict[str, Any]],
    val_rows: list[dict[str, Any]] | None,
    out_dir: Path,
    callbacks: list | None,
    lr_factor: Callable[[int], float] | None = None,
) -> tuple[Any, Any]:
    """``(trainer, tokenizer)``: the model loaded for ``engine``, TRL's SFTTrainer with the recipe's loss and
    collator (:func:`_trainer_class`), the time limit and ``callbacks``."""
    import torch

    if cfg.num_threads:
        torch.set_num_threads(cfg.num_threads)
    model, tokenizer = load_model(model_path, cfg, engine)
    from trl import SFTTrainer

    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    trainer = _trainer_class(SFTTrainer)(
        model=model,
        args=_training_args(cfg, out_dir, bool(val_rows), engine),
        train_dataset=_to_dataset(train_rows),
        eval_dataset=_to_dataset(val_rows),
        processing_class=tokenizer,
        data_collator=Collator(pad_id, cfg.batching, cfg.max_length, cfg.pad_to_multiple_of),
        callbacks=[
            time_limit(cfg.max_time_minutes),
            eval_loss_stop(cfg.stop_at_eval_loss),
            resumed_as_configured(lr_factor),
            step_progress("SFT steps"),
            *(callbacks or []),
        ],
        venus_config=cfg,
        lr_factor=lr_factor,
    )
    return trainer, tokenizer


def _export_trained(
    trainer: Any,
    tokenizer: Any,
    point: ResumePoint,
    cfg: SFTConfig,
    engine: str,
    out_dir: Path,
    agent_settings: dict[str, Any] | None,
) -> tuple[Path | None, Path | None]:
    """``(model folder, adapter folder)`` of the trained run: exported by the main process, or, for a finished run
    rerun, the folders an earlier run exported from the same checkpoint (only ``venus_agent.json`` rewritten)."""
    acc = trainer.accelerator
    state_dict = None
    if acc.num_processes > 1 and (trainer.is_fsdp_enabled or trainer.is_deepspeed_enabled):
        state_dict = acc.get_state_dict(trainer.model)  # a collective: every process gathers, the main one writes
    model_dir = adapter_dir = None
    if point.finished and _exported_after(out_dir, cfg, point.checkpoint):
        print(f"[sft] {out_dir} already holds the model exported from {point.checkpoint}")
        if agent_settings is not None and acc.is_main_process:
            for folder in (out_dir / "model", out_dir / "adapter"):
                if folder.is_dir():
                    check_model(folder)  # intact before its record is rewritten and sealed again
                    write_model_agent_settings(folder, agent_settings, "sft")
                    seal_model(folder)
    elif acc.is_main_process:
        model_dir, adapter_dir = export_model(
            acc.unwrap_model(trainer.model),
            tokenizer,
            out_dir,
            engine,
            cfg.finetuning,
            merged=cfg.export_merged,
            state_dict=state_dict,
            agent_settings=agent_settings,
        )
    acc.wait_for_everyone()
    if model_dir is None and adapter_dir is None:  # another process wrote them, or an earlier run did
        model_dir = out_dir / "model" if cfg.export_merged else None
        adapter_dir = out_dir / "adapter" if cfg.finetuning == "lora" else None
    return model_dir, adapter_dir


def launch_sft(
    num_processes: int,
    cfg: SFTConfig,
    model_path: str | Path,
    train_rows: list[dict[str, Any]],
    out_dir: str | Path,
    val_rows: list[dict[str, Any]] | None = None,
    agent_settings: dict[str, Any] | None = None,
    plateau: Any = None,
) -> SFTResult:
    """:func:`train_sft` in ``num_processes`` data-parallel processes started by ``accelerate.notebook_launcher``
    (from a notebook: forked processes, so CUDA must not be in use yet; CPUs train over gloo); 1 = this process.
    ``plateau`` (the plateau rule) runs in one process only.

    The processes write the run folder and the result is read back from it (:meth:`SFTResult.from_dir`).
    """
    if num_processes <= 1:
        return train_sft(
            cfg, model_path, train_rows, out_dir, val_rows=val_rows, agent_settings=agent_settings, plateau=plateau
        )
    if plateau is not None:
        raise ValueError("plateau_questions: the plateau rule runs in one process (set num_processes to 1)")
    from accelerate import notebook_launcher

    notebook_launcher(
        train_sft, (cfg, model_path, train_rows, out_dir, val_rows, None, agent_settings), num_processes=num_processes
    )
    return SFTResult.from_dir(out_dir, resolve_engine(cfg.engine), cfg.finetuning)
