"""The values each notebook runs with where no profile sets one: the lesson's, sized for a CPU in minutes.

The notebooks' ``parameters`` cells are generated from here (:func:`parameters_cell`;
``python -m venus_utils.core.defaults --write`` rewrites them, and ``tests/test_notebook_conventions.py`` fails when a
cell and this module disagree), and the stage command lines (``python -m venus_utils.sft train``...) read their
defaults from here, not from the notebooks.  So a setting is written once: its name, its lesson value and a line saying
what it does.

Which value a run uses (docs/reference.md, "Where a setting's value comes from"): the schema's defaults (the config
classes, :mod:`venus_utils.run.schemas`) are DR-Venus's values and say so in their help; the lesson's values here are
what a notebook runs with by hand (where the two are the same value, the config class reads it from here:
``LESSON["kl_coef"]`` in ``venus_utils/rl/config.py``); a profile (``params/<profile>.yaml``) sets the values of a
run and wins over them; ``--set`` or an assignment after ``apply_profile`` wins over the profile. ``summary.json``
records, for every value, where it came from (:func:`venus_utils.core.profiles.settings_record`).

A key in :data:`SHARED` means the same in every notebook that declares it, with one value and one note.  The
pipeline checks and runs the notebooks themselves (a cell edited by hand is what Papermill executes, and the run record
then calls its value "this run"); the test above keeps the shipped cells equal to this module.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .io import atomic_path
from .paths import (
    CLEANING_STAGE,
    DEMO_STAGE,
    EVALUATION_STAGE,
    NOTEBOOKS_DIR,
    RESAMPLING_STAGE,
    RL_STAGE,
    SETUP_STAGE,
    SFT_STAGE,
)
from .protocol import DATA_SEED, INFERENCE_TOKENS_PER_TURN, MAX_TURNS, RL_CONTEXT_TOKENS, RL_TOKENS_PER_TURN


@dataclass(frozen=True)
class Param:
    """One line of a parameters cell: ``name = value  # note`` (``{stage}`` in a note is the notebook's name)."""

    name: str
    value: Any
    note: str


P = Param  # the tables below, one parameter a line


# fmt: off
#: Keys that mean the same in every notebook declaring them (a profile's shared keys): one value, one note.
SHARED: dict[str, Param] = {
    "run_dir": P("run_dir", "runs/interactive", "where every stage of this run writes its folder"),
    "stage_dir": P("stage_dir", None, "this stage's folder; default: <run_dir>/{stage}"),
    "profile": P("profile", "interactive", "by hand, \"cpu\", \"colab\"... takes params/<profile>.yaml; recorded in "
                                           "summary.json"),
    "seed": P("seed", 0, "the run's seed: world, data order, training and sampling (DR-Venus's data scripts use "
                                 f"{DATA_SEED})"),
    "offline": P("offline", True, "True: the offline world (local search and visit, the tiny model of 00_setup); "
                                  "False: web tools, API keys from the environment"),
    "device": P("device", "cpu", "device of local models: cpu | cuda | auto"),
    "system_prompt_style": P("system_prompt_style", "dr-venus", "dr-venus: DR-Venus's exact prompt | compact: short "
                                                                "variant (offline profiles; the same in every stage)"),
    "heldout_n": P("heldout_n", 8, "held-out questions, drawn once per run into runs/<profile>/heldout/: notebooks "
                                   "03, 04 and 05 score the same ones (0: skip the agent runs)"),
    "precision": P("precision", "auto", "training under bf16 autocast (fp32 master weights): auto: on CUDA and CPUs "
                                        "with native bf16 | bf16 | fp32"),
    "model": P("model", "auto", "auto: the run's best model (RL > SFT > base) | a model folder | "
                                "http(s)://host:port/v1"),
}

#: Each notebook's parameters, in the cell's order: a :data:`SHARED` key by name, or the stage's own.
STAGE_DEFAULTS: dict[str, tuple[str | Param, ...]] = {
    SETUP_STAGE: (
        "run_dir", "stage_dir", "profile", "seed", "offline", "device",
        P("world_size", "small", "offline world size: small | medium"),
        P("build_assets", True, "build the offline world and the tiny base model (offline profiles)"),
        P("world_knobs", {}, "extra venus_utils.world.WorldConfig fields (n_worlds, search_top_k, ...)"),
        P("tiny_model_size", "tiny", "tiny Qwen3 size: micro | tiny | small (venus_utils.modeling.SIZES)"),
        P("tokenizer_vocab_size", 2048, "BPE vocabulary of the tiny model's tokenizer"),
    ),
    CLEANING_STAGE: (
        "run_dir", "stage_dir", "profile", "seed",
        P("input", None, "raw trajectories (file or folder); None: <run_dir>/00_setup/world/trajectories"),
        P("file_pattern", "train-*.parquet", "files taken from a folder (DR-Venus's shard pattern)"),
        P("current_date", "2026-03-01", "date line of the system prompt (DR-Venus's data and prompts use 2026-03-01)"),
        "system_prompt_style",
        P("compat", "strict", "strict: defects of DR-Venus's cleaner fixed + correctness/length filters | reference: "
                              "DR-Venus's exact output"),
        P("compare_reference", True, "also run the reference mode, to compare drop reasons side by side"),
        P("judge", "auto", "auto: LLM judge if JUDGE_API_BASE / API_BASE is set, else offline | llm | offline | none"),
        P("tokenizer", None, "token accounting: tokenizer folder or cached hub id; None: "
                             "<run_dir>/00_setup/tiny_model if present"),
        P("max_tokens", None, "strict: drop trajectories longer than this many tokens (reason too_long); needs a "
                              "tokenizer"),
        P("workers", 0, "cleaner processes; 0: one per CPU core"),
        P("example_rows", 300, "raw rows scanned for the before/after examples"),
    ),
    RESAMPLING_STAGE: (
        "run_dir", "stage_dir", "profile", "seed",
        P("short_max_turns", 50, "at most this many turns: short bucket (DR-Venus: 50)"),
        P("medium_max_turns", 100, "at most this many turns: medium bucket, more: long bucket (DR-Venus: 100)"),
        P("short_multiplier", 1, "copies of a short trajectory (DR-Venus: 1)"),
        P("medium_multiplier", 2, "copies of a medium trajectory (DR-Venus: 2)"),
        P("long_multiplier", 5, "copies of a long trajectory (DR-Venus: 5)"),
        P("val_fraction", 0.1, "share of questions held out in val.parquet (DR-Venus ships no split: 0 would mean "
                               "none)"),
        P("shuffle", True, "shuffle the training rows (DR-Venus's trainer reads them in file order)"),
        P("what_if_short", [10, 25, 50], "what-if: short-bucket thresholds to compare"),
        P("what_if_medium", [50, 100, 150], "what-if: medium-bucket thresholds to compare"),
        P("what_if_long", [1, 3, 5, 8], "what-if: long-bucket multipliers to compare"),
        P("interactive", False, "True: ipywidgets sliders for the what-if (JupyterLab); False: the grid above"),
    ),
    SFT_STAGE: (
        "run_dir", "stage_dir", "profile", "seed", "offline", "device", "system_prompt_style",
        P("base_model", None, "None: 00_setup/tiny_model (offline); else a local folder or hub name (paper: "
                              "Qwen/Qwen3-4B-Thinking-2507)"),
        P("engine", "auto", "auto (Unsloth if installed) | unsloth | trl"),
        P("finetuning", "full", "full (DR-Venus) | lora"),
        P("lora_r", 32, "LoRA rank (when finetuning is lora)"),
        P("lora_alpha", 16, "LoRA alpha (DR-Venus preset: 16)"),
        P("load_in_4bit", False, "Unsloth 4-bit base weights (GPU only)"),
        P("gradient_checkpointing", False, "DR-Venus: on (4B model, 200K tokens); off for the tiny model on CPU "
                                           "(faster)"),
        "precision",
        P("max_length", 4096, "longest trajectory in tokens; longer ones are dropped and counted (DR-Venus: 200000)"),
        P("batching", "grouped", "grouped | padded | padding_free | max_length (see venus_utils.sft.batching)"),
        P("pad_to_multiple_of", 64, "round batch widths and the LM head's rows up to a multiple: bounded shapes keep "
                                    "bf16 CPU memory flat (1: exact shapes)"),
        P("loss_weighting", "sequence_mean", "sequence_mean (DR-Venus) | token_mean"),
        P("learning_rate", 0.002, "DR-Venus: 1e-5 for the 4B model; a 1M-parameter model from scratch needs ~2e-3"),
        P("global_batch_size", 16, "trajectories per optimizer step (DR-Venus: 32)"),
        P("micro_batch_size", 8, "trajectories per forward pass (gradient accumulation: global / micro)"),
        P("num_train_epochs", 1.0, "DR-Venus: 1"),
        P("max_steps", 40, "optimizer steps; -1: from epochs"),
        P("max_time_minutes", None, "stop and save after this much training time (None: no limit)"),
        P("warmup_ratio", 0.03, "DR-Venus: 0.1"),
        P("schedule_by_time", False, "True: warm-up + cosine follow the time budget (max_time_minutes), not the step "
                                     "count"),
        P("min_lr_ratio", 0.0, "with schedule_by_time: the cosine ends at this share of the peak (DR-Venus: 0)"),
        P("logging_steps", 5, "log loss and tokens/s every N steps"),
        P("save_steps", 20, "checkpoint every N steps; a rerun resumes from the last one (DR-Venus: 100)"),
        P("eval_steps", 20, "validation loss every N steps (DR-Venus: 100)"),
        P("stop_at_eval_loss", None, "stop at the first validation loss at or below this: max_steps becomes a cap "
                                     "(cpu-hard: 0.01; None: the whole budget)"),
        P("plateau_questions", 0, "> 0: SFT to its plateau: every checkpoint (save_steps) answers this many "
                                  "validation questions of the held-out sub-worlds; the run anneals and ends once "
                                  "the accuracy stops rising (0: off)"),
        P("plateau_patience", 2, "the plateau: this many checkpoints in a row without a gain of plateau_min_gain"),
        P("plateau_min_gain", 0.02, "the accuracy gain over the best checkpoint before them that counts"),
        P("anneal_steps", 200, "after the plateau: steps of cosine from the learning rate there to the floor "
                               "(min_lr_ratio), then the run ends"),
        P("val_rows_limit", 64, "validation trajectories used for the validation loss (None: all)"),
        P("converged_eval_loss", None, "flag the run as not converged when its last validation loss is above this "
                                       "(cpu-hard: 0.01; None: no verdict)"),
        "heldout_n",
        P("heldout_n_before", 8, "how many of them the untrained model answers too (it fails them all: a subset is "
                                 "enough)"),
        P("judge_kind", "auto", "auto: the LLM judge when JUDGE_API_BASE is set, else the offline judge | offline | "
                                "llm"),
        P("eval_max_turns", 10, "assistant turns per question in those runs"),
        P("eval_max_tokens_per_turn", 192, "tokens per turn in those runs"),
        P("curve_checkpoints", 6, "checkpoints scored by the teacher-forced learning curve (0: skip)"),
        P("curve_rows", 64, "validation trajectories that curve scores"),
        P("export_gguf", False, "GPU + Unsloth only: also write a GGUF (q8_0) for llama.cpp / Ollama"),
        P("num_processes", 1, "> 1: DDP over this many processes via accelerate.notebook_launcher (CPU cores, or "
                              "GPUs with engine \"trl\" and nothing on CUDA before: heldout_n 0); else the CLI"),
    ),
    RL_STAGE: (
        "run_dir", "stage_dir", "profile", "seed", "offline", "device",
        P("max_steps", 2, "RL steps (DR-Venus: ~60, one epoch of 16 x 8 rollouts per step)"),
        P("max_time_minutes", None, "stop training (and save) after this much wall time (None: no limit; CPU "
                                    "budgets)"),
        P("prompts_per_step", 2, "questions per step (DR-Venus: 16)"),
        P("num_generations", 2, "group size n: rollouts per question (DR-Venus: 8)"),
        P("micro_batch_size", 2, "trajectories per forward/backward"),
        P("gradient_checkpointing", False, "recompute activations in the update (DR-Venus: on, for a 4B model); off "
                                           "for the tiny model on CPU (faster)"),
        P("max_turns", 6, f"assistant turns per rollout (DR-Venus: {MAX_TURNS})"),
        P("max_tokens_per_turn", 96, f"generation limit per turn (DR-Venus: {RL_TOKENS_PER_TURN})"),
        P("max_context_tokens", 8192, f"context budget of a rollout (DR-Venus: {RL_CONTEXT_TOKENS})"),
        P("learning_rate", 1e-06, "AdamW, constant (DR-Venus: 1e-6)"),
        P("lora_r", 0, "0: full fine-tuning (DR-Venus); > 0: LoRA rank (small GPUs), the reference is the base"),
        P("kl_coef", 0.001, "k3 KL to the SFT policy (DR-Venus: 0.001)"),
        "precision",
        P("info_gain_type", "log_prob_diff", "log_prob_diff (DR-Venus) | prob_diff (IGPO paper)"),
        P("ig_tool_filter", "visit", "score IG only after these tools (\"visit\"), or \"all\""),
        P("norm_mode", "scaled_separate", "joint | separate | scaled_separate | raw_ig"),
        P("ig_norm", "group", "group: IG z-scored over the group's IG turns (DR-Venus) | tool: over its turns of the "
                              "same tool (a visit against visits)"),
        P("use_format_penalty", True, "-1 for a malformed turn, replacing its IG / the outcome (DR-Venus: on)"),
        P("reward_mode", "igpo", "igpo: DR-Venus (IG turn rewards + format penalties + judged outcome) | grpo: "
                                 "judged outcome only, the baseline arm (give it its own stage_dir, section 3)"),
        P("search_cost", 0.0, "optional extra turn reward: subtract this for every search call (DR-Venus: 0)"),
        P("save_steps", 5, "checkpoint every this many steps (DR-Venus: 5)"),
        P("save_total_limit", 2, "keep only the newest checkpoints (each holds optimizer states); None keeps all"),
        P("train_questions", None, "limit the RL question pool (None: all of it)"),
        P("filter_samples", 0, "> 0: first roll every RL question out this many times with the SFT policy and train "
                               "only on those it does not always solve (0: no filter; DR-Venus trains RL on harder "
                               "questions); these rollouts count in the compute the cheaper arms are matched to"),
        P("dynamic_sampling", False, "DAPO: drop groups whose rollouts all got the same judge score, refill the step "
                                     "with new questions (one process; DR-Venus: off)"),
        P("max_sampling_rounds", 3, "dynamic_sampling: rollout rounds per step at most (then the step fills up with "
                                    "the rest)"),
        "heldout_n",
        P("judge", "auto", "auto (LLM judge if an endpoint is configured, else the strict offline judge) | llm | "
                           "offline"),
        P("train_qa", None, "QA parquet for RL (None: the world's RL split qa/rl.parquet; web profiles must set it)"),
        P("heldout_qa", None, "question file for the held-out accuracy (None: the world's heldout_split)"),
        P("heldout_split", "test", "the world's split the held-out questions come from: test (reported) | val "
                                   "(choosing settings; the reward-cell loop)"),
        P("sft_model", None, "SFT model folder RL starts from (None: <run_dir>/03_sft_unsloth/model; a shipped one "
                             "in models/ needs no stages 01-03, and no control or rejection-sampling arm)"),
        P("control_arm", False, "True: after RL, the control: more SFT from the same SFT model for the FLOPs this RL "
                                "run counted, scored beside it (section 9: RL vs more SFT)"),
        P("rft_arm", False, "True: after RL, rejection sampling: the SFT model samples RL's questions, is "
                            "fine-tuned on its right answers for this RL run's FLOPs (sampling included), scored "
                            "beside it (section 10: RL vs rejection sampling)"),
        P("rft_rollouts", "trained", "rejection sampling draws as many rollouts as RL trained on (trained) or as it "
                                     "rolled out, dynamic sampling's refills included (rolled_out: the stronger "
                                     "baseline)"),
        P("example_questions", 4, "worked example: RL questions rolled out (n times each); the most instructive "
                                  "group is shown"),
        P("example_rollout", None, "optional: a DR-Venus rollout of the shared data (e.g. \"rl_rollouts/0001.json\") "
                                   "whose IG the policy scores too; with the tiny offline model its values mean "
                                   "little (a web rollout of an unseen world)"),
        P("example_max_tokens", 16000, "example_rollout: cut it after the last whole turn that fits in this many "
                                       "tokens"),
        P("use_vllm", False, "GPU: roll out with vLLM (vllm_mode below) instead of transformers generate"),
        P("vllm_mode", "colocate", "colocate: TRL's engine in this process | server: a separate OpenAI-compatible "
                                   "server"),
        P("vllm_server_base_url", None, "server mode: http://host:port of `trl vllm-serve` (or `vllm serve`)"),
        P("vllm_server_sync_weights", True, "server mode: push the policy every step (trl vllm-serve); False: fixed "
                                            "server weights"),
        P("vllm_tensor_parallel_size", 1, "colocate mode: vLLM tensor parallelism (DR-Venus: 4)"),
        P("vllm_gpu_memory_utilization", 0.3, "colocate mode: GPU memory share of the vLLM engine"),
        "system_prompt_style",
    ),
    EVALUATION_STAGE: (
        "run_dir", "stage_dir", "profile", "seed", "offline", "device",
        P("qa_file", None, "None: the offline world's test split; else a verl parquet / JSONL, or a benchmark file"),
        P("benchmark", None, "with qa_file: BrowseComp | BrowseComp-ZH | xBench-DS-2505 | xBench-DS-2510 | GAIA "
                             "(Text)"),
        P("questions_per_source", 20, "questions drawn per source (None: all of them)"),
        P("samples", 4, "N answers per question; Pass@K is reported for K up to N"),
        "model",
        P("max_turns", 16, f"assistant turns per answer; the last one is forced to answer (DR-Venus: {MAX_TURNS})"),
        P("max_tokens_per_turn", 1024, f"tokens per turn (DR-Venus inference: {INFERENCE_TOKENS_PER_TURN})"),
        P("temperature", 1.0, "sampling temperature (DR-Venus: 1.0)"),
        "system_prompt_style",
        P("workers", 8, "answers generated concurrently (a local model batches them)"),
        P("judge_kind", "auto", "auto: LLM judge if JUDGE_API_BASE is set, else the offline judge | llm | offline"),
    ),
    DEMO_STAGE: (
        "run_dir", "stage_dir", "profile", "seed", "offline", "device",
        P("question", None, "None: the first question of the offline world's test split"),
        "model",
        P("max_turns", 8, f"assistant turns; the last one is forced to answer (DR-Venus: {MAX_TURNS})"),
        P("max_tokens_per_turn", 512, f"tokens per turn (DR-Venus inference: {INFERENCE_TOKENS_PER_TURN})"),
        "system_prompt_style",
        P("interactive", True, "True: live HTML step cards (ipywidgets); False: a printed trace (Papermill)"),
        P("replay", "auto", "a saved trace to replay: auto (a shared DR-Venus RL rollout if present) | a path | None"),
        P("replay_steps", 6, "cards of the replay to show (the question and the final answer are always shown)"),
    ),
}
# fmt: on

HEADER = "# Parameters (Papermill overrides these from params/<profile>.yaml)"
LINE = 119  # the notebooks' line length (ruff)


def lesson_params(stage: str) -> list[Param]:
    """``stage``'s parameters in its cell's order (shared keys resolved, ``{stage}`` filled in); KeyError for a
    stage this module does not describe."""
    out = []
    for item in STAGE_DEFAULTS[stage]:
        param = SHARED[item] if isinstance(item, str) else item
        out.append(Param(param.name, param.value, param.note.replace("{stage}", stage)))
    return out


def stage_defaults(stage: str) -> dict[str, Any]:
    """``{name: lesson value}`` of ``stage`` (what its notebook runs with where no profile sets a value)."""
    return {p.name: copy.deepcopy(p.value) for p in lesson_params(stage)}


def literal(value: Any) -> str:
    """``value`` as the notebooks write it (double quotes, as ruff formats them)."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{literal(k)}: {literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, float) and "e" in repr(value):
        mantissa, exponent = repr(value).split("e")
        return f"{mantissa}e{int(exponent)}"
    return repr(value)


def _wrap(first: str, note: str) -> list[str]:
    """``first  # note``, the note carried on to ``# ...`` lines where it passes :data:`LINE`."""
    lines, words = [], note.split()
    line = f"{first}  #"
    for word in words:
        if len(line) + 1 + len(word) > LINE and not line.endswith("#"):
            lines.append(line)
            line = "#"
        line += f" {word}"
    return [*lines, line]


def parameters_cell(stage: str) -> str:
    """The source of ``stage``'s ``parameters`` cell."""
    lines = [HEADER]
    for p in lesson_params(stage):
        lines += _wrap(f"{p.name} = {literal(p.value)}", p.note)
    return "\n".join(lines)


def _cell_of(nb: dict) -> dict:
    return next(c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", []))


def stale_cells(notebooks_dir: str | Path | None = None) -> dict[str, tuple[Path, dict]]:
    """``{stage: (notebook path, its JSON)}`` of the notebooks whose ``parameters`` cell differs from
    :func:`parameters_cell`."""
    stale = {}
    for stage in STAGE_DEFAULTS:
        path = Path(notebooks_dir or NOTEBOOKS_DIR) / f"{stage}.ipynb"
        nb = json.loads(path.read_text(encoding="utf-8"))
        if "".join(_cell_of(nb)["source"]) != parameters_cell(stage):
            stale[stage] = (path, nb)
    return stale


def write_cells(notebooks_dir: str | Path | None = None) -> list[Path]:
    """Rewrite the ``parameters`` cell of every notebook this module describes whose cell differs; returns those
    rewritten (the rest of each file is kept byte for byte: nbformat 4, one-space indent)."""
    changed = []
    for stage, (path, nb) in stale_cells(notebooks_dir).items():
        _cell_of(nb)["source"] = parameters_cell(stage).splitlines(keepends=True)
        with atomic_path(path) as tmp:
            Path(tmp).write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        changed.append(path)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m venus_utils.core.defaults", description="The notebooks' parameters cells, from this module."
    )
    parser.add_argument("--write", action="store_true", help="rewrite the cells that differ (else: list them)")
    args = parser.parse_args(argv)
    if args.write:
        for path in write_cells():
            print(f"rewrote the parameters cell of {path}")
        return 0
    stale = stale_cells()
    print("parameters cells that differ from venus_utils/core/defaults.py: " + (", ".join(stale) or "none"))
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
