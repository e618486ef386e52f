# The code cells of 03_sft_unsloth.ipynb, made by `python -m venus_utils.run.notebook_code --write`: edit the notebook.

# %% cell 1
# Parameters (Papermill overrides these from params/<profile>.yaml)
run_dir = "runs/interactive"  # where every stage of this run writes its folder
stage_dir = None  # this stage's folder; default: <run_dir>/03_sft_unsloth
profile = "interactive"  # by hand, "cpu", "colab"... takes params/<profile>.yaml; recorded in summary.json
seed = 0  # the run's seed: world, data order, training and sampling (DR-Venus's data scripts use 42)
offline = True  # True: the offline world (local search and visit, the tiny model of 00_setup); False: web tools, API
# keys from the environment
device = "cpu"  # device of local models: cpu | cuda | auto
system_prompt_style = "dr-venus"  # dr-venus: DR-Venus's exact prompt | compact: short variant (offline profiles; the
# same in every stage)
base_model = None  # None: 00_setup/tiny_model (offline); else a local folder or hub name (paper:
# Qwen/Qwen3-4B-Thinking-2507)
engine = "auto"  # auto (Unsloth if installed) | unsloth | trl
finetuning = "full"  # full (DR-Venus) | lora
lora_r = 32  # LoRA rank (when finetuning is lora)
lora_alpha = 16  # LoRA alpha (DR-Venus preset: 16)
load_in_4bit = False  # Unsloth 4-bit base weights (GPU only)
gradient_checkpointing = False  # DR-Venus: on (4B model, 200K tokens); off for the tiny model on CPU (faster)
precision = "auto"  # training under bf16 autocast (fp32 master weights): auto: on CUDA and CPUs with native bf16 |
# bf16 | fp32
max_length = 4096  # longest trajectory in tokens; longer ones are dropped and counted (DR-Venus: 200000)
batching = "grouped"  # grouped | padded | padding_free | max_length (see venus_utils.sft.batching)
pad_to_multiple_of = 64  # round batch widths and the LM head's rows up to a multiple: bounded shapes keep bf16 CPU
# memory flat (1: exact shapes)
loss_weighting = "sequence_mean"  # sequence_mean (DR-Venus) | token_mean
learning_rate = 0.002  # DR-Venus: 1e-5 for the 4B model; a 1M-parameter model from scratch needs ~2e-3
global_batch_size = 16  # trajectories per optimizer step (DR-Venus: 32)
micro_batch_size = 8  # trajectories per forward pass (gradient accumulation: global / micro)
num_train_epochs = 1.0  # DR-Venus: 1
max_steps = 40  # optimizer steps; -1: from epochs
max_time_minutes = None  # stop and save after this much training time (None: no limit)
warmup_ratio = 0.03  # DR-Venus: 0.1
schedule_by_time = False  # True: warm-up + cosine follow the time budget (max_time_minutes), not the step count
min_lr_ratio = 0.0  # with schedule_by_time: the cosine ends at this share of the peak (DR-Venus: 0)
logging_steps = 5  # log loss and tokens/s every N steps
save_steps = 20  # checkpoint every N steps; a rerun resumes from the last one (DR-Venus: 100)
eval_steps = 20  # validation loss every N steps (DR-Venus: 100)
stop_at_eval_loss = None  # stop at the first validation loss at or below this: max_steps becomes a cap (cpu-hard:
# 0.01; None: the whole budget)
plateau_questions = 0  # > 0: SFT to its plateau: every checkpoint (save_steps) answers this many validation questions
# of the held-out sub-worlds; the run anneals and ends once the accuracy stops rising (0: off)
plateau_patience = 2  # the plateau: this many checkpoints in a row without a gain of plateau_min_gain
plateau_min_gain = 0.02  # the accuracy gain over the best checkpoint before them that counts
anneal_steps = 200  # after the plateau: steps of cosine from the learning rate there to the floor (min_lr_ratio), then
# the run ends
val_rows_limit = 64  # validation trajectories used for the validation loss (None: all)
converged_eval_loss = None  # flag the run as not converged when its last validation loss is above this (cpu-hard:
# 0.01; None: no verdict)
heldout_n = 8  # held-out questions, drawn once per run into runs/<profile>/heldout/: notebooks 03, 04 and 05 score the
# same ones (0: skip the agent runs)
heldout_n_before = 8  # how many of them the untrained model answers too (it fails them all: a subset is enough)
judge_kind = "auto"  # auto: the LLM judge when JUDGE_API_BASE is set, else the offline judge | offline | llm
eval_max_turns = 10  # assistant turns per question in those runs
eval_max_tokens_per_turn = 192  # tokens per turn in those runs
curve_checkpoints = 6  # checkpoints scored by the teacher-forced learning curve (0: skip)
curve_rows = 64  # validation trajectories that curve scores
export_gguf = False  # GPU + Unsloth only: also write a GGUF (q8_0) for llama.cpp / Ollama
num_processes = 1  # > 1: DDP over this many processes via accelerate.notebook_launcher (CPU cores, or GPUs with engine
# "trl" and nothing on CUDA before: heldout_n 0); else the CLI

# %% cell 2
# Install venus_utils once per runtime (nothing where it imports already): this checkout (or VENUS_RECIPE_DIR), else,
# on a bare runtime such as Colab, the repository at REPO_URL; then its dependencies, keeping the runtime's torch.
import importlib.util
import os
import subprocess
import sys

REPO_URL = os.environ.get("VENUS_RECIPE_URL", "git+https://github.com/OWNER_NOT_SET/venus-recipe")  # pyproject.toml
if found := importlib.util.find_spec("venus_utils"):
    print(f"venus_utils already importable from {os.path.dirname(found.origin)}: nothing installed")
else:
    clone = next((d for d in ("..", ".") if os.path.isfile(f"{d}/venus_utils/run/install.py")), None)
    checkout = os.environ.get("VENUS_RECIPE_DIR") or clone  # notebooks opened in a clone of the repository
    package = ["-e", os.path.abspath(checkout)] if checkout else [f"venus-recipe @ {REPO_URL}"]
    subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", "--no-deps", *package])  # the package alone
    if checkout:  # an editable install is seen by new kernels; this one reads the checkout now
        sys.path.insert(0, package[1])
    importlib.invalidate_caches()
    from venus_utils.run.install import install_dependencies

    install_dependencies(package[-1])  # + Unsloth on a GPU (the `colab` extra): venus_utils/run/install.py

# %% cell 3
# With profile = "cpu" (any params/<name>.yaml) above, a run by hand takes that profile's values, as the pipeline
# would give them (assign a value after this call to change it); under Papermill it changes nothing.
from venus_utils.run.schemas import apply_profile

apply_profile(globals(), "03_sft_unsloth")

# %% cell 5
from venus_utils.sft import prepare_engine

engine = prepare_engine(engine)
print("training engine:", engine)

# %% cell 6
from pathlib import Path

import pandas as pd
import seaborn as sns
from IPython.display import HTML, display
from transformers import AutoTokenizer

from venus_utils.core.stage import Stage
from venus_utils.eval import heldout as ho
from venus_utils.eval import plots, stats
from venus_utils.sft import SFTConfig, examples_from_parquet, launch_sft, loss_mask_html, read_sft_parquet

stage = Stage.start("03_sft_unsloth", run_dir, stage_dir, profile, params=globals())
data_dir = stage.upstream("02_turn_aware_resampling")
setup_dir = stage.upstream("00_setup") if offline else None
model_path = base_model or (setup_dir / "tiny_model")
world_dir = setup_dir / "world" if offline else None
print("base model:", model_path)

# %% cell 8
tokenizer = AutoTokenizer.from_pretrained(str(model_path))
train = examples_from_parquet(data_dir / "train.parquet", tokenizer, max_length=max_length)
val = examples_from_parquet(data_dir / "val.parquet", tokenizer, max_length=max_length)
pd.DataFrame({"train": train.stats(), "val": val.stats()})

# %% cell 10
example_messages = read_sft_parquet(data_dir / "train.parquet")[0]
display(HTML(loss_mask_html(example_messages, tokenizer, max_chars=300)))

# %% cell 12
from venus_utils.sft import tokenize_conversation, trained_spans

spans = trained_spans(tokenize_conversation(example_messages, tokenizer), tokenizer)
assistant_turns = [m["content"] for m in example_messages if m["role"] == "assistant"]
assert len(spans) == len(assistant_turns), f"{len(spans)} trained spans for {len(assistant_turns)} assistant turns"
for span, turn in zip(spans, assistant_turns):
    assert "<tool_response>" not in span and "<|im_start|>" not in span, f"an untrained part is trained: {span!r}"
    assert span.rstrip("\n").endswith("<|im_end|>") and turn.split("</think>")[-1].strip() in span, span
pd.DataFrame({"trained span (start ... end)": [f"{s[:40]!r} ... {s[-30:]!r}" for s in spans]})

# %% cell 14
from venus_utils.core.io import read_json
from venus_utils.data.resample import ResamplePolicy
from venus_utils.data.rules import turns_of

policy = ResamplePolicy(**read_json(data_dir / "summary.json")["policy"])
example_question = pd.read_parquet(data_dir / "train.parquet", columns=["question"])["question"]
copies = int((example_question == example_question.iloc[0]).sum())
turns = turns_of(example_messages)
assert copies == policy.multiplier(turns), f"{copies} copies, but {turns} turns give x{policy.multiplier(turns)}"
print(f"{turns} turns: bucket {policy.bucket(turns)}, x{policy.multiplier(turns)}; {copies} copies in train.parquet")

# %% cell 16
from venus_utils.judging.judge import Judge

grader = Judge.from_env(judge_kind)
print(grader.describe())
heldout = ho.heldout_questions(stage.run_dir, world_dir, heldout_n, seed) if world_dir and heldout_n else None
eval_settings = ho.EvalSettings(
    max_turns=eval_max_turns,
    max_new_tokens=eval_max_tokens_per_turn,
    system_prompt_style=system_prompt_style,
    device=device,
)
if heldout is not None:
    display(heldout.groupby(["subworld", "hops"]).size().unstack(fill_value=0))
local_base = Path(str(model_path)).is_dir()  # a hub name is evaluated after SFT only
scored_before = (
    ho.evaluate_model(
        model_path,
        heldout.head(heldout_n_before),
        stage.path("heldout_base.parquet"),
        eval_settings,
        world_dir=world_dir,
        judge=grader,
    )
    if heldout is not None and local_base and heldout_n_before
    else None
)
before = ho.summary(scored_before) if scored_before is not None else {}
{k: before.get(k) for k in ("accuracy", "n", "ci_low", "ci_high", "mean_turns")}

# %% cell 18
from venus_utils.sft.plateau import plateau_from_params, read_curve

cfg = SFTConfig.from_params(globals(), engine=engine)
# plateau_questions > 0: each checkpoint answers validation questions of the held-out sub-worlds; the run anneals
# and ends once they stop rising (None here: the step budget, or stop_at_eval_loss, ends the run)
plateau = plateau_from_params(globals(), stage.dir, world_dir, grader, processes=num_processes)
agent_settings = dict(
    system_prompt_style=system_prompt_style, max_turns=eval_max_turns, max_new_tokens=eval_max_tokens_per_turn
)
with stage.timed("train"):
    result = launch_sft(
        num_processes,
        cfg,
        model_path,
        train.rows,
        stage.dir,
        val_rows=val.rows[:val_rows_limit],
        agent_settings=agent_settings,
        plateau=plateau,
    )
result.summary()

# %% cell 20
plateau_curve = read_curve(stage.dir) if plateau is not None else pd.DataFrame()
if len(plateau_curve):
    ax = sns.lineplot(data=plateau_curve, x="step", y="accuracy", marker="o")
    sns.scatterplot(data=plateau_curve, x="step", y="accuracy", hue="phase", s=80, ax=ax, zorder=3)
    ax.set_title(f"greedy accuracy on {int(plateau_curve['n'].iloc[-1])} validation questions (held-out sub-worlds)")
    display(plateau_curve)
else:
    print("plateau_questions is 0: the run ended at its step budget (or stop_at_eval_loss), not at a plateau")

# %% cell 22
logs = pd.DataFrame(result.train_logs)
fig, axes = sns.mpl.pyplot.subplots(1, 2, figsize=(11, 3.5))
sns.lineplot(data=logs, x="step", y="loss", ax=axes[0]).set_title("training loss (trained tokens)")
sns.lineplot(data=logs, x="step", y="tokens_per_s", ax=axes[1]).set_title(f"throughput ({result.engine})")
fig.tight_layout()

# %% cell 24
scored_after = (
    ho.evaluate_model(
        result.model_dir, heldout, stage.path("heldout_sft.parquet"), eval_settings, world_dir=world_dir, judge=grader
    )
    if heldout is not None
    else None
)
after = ho.summary(scored_after) if scored_after is not None else {}
if scored_after is not None:
    tables = {"after SFT": stats.accuracy_table(ho.per_question(scored_after))}
    if scored_before is not None:
        tables = {"before SFT": stats.accuracy_table(ho.per_question(scored_before)), **tables}
    plots.accuracy_intervals(tables, path=stage.path("heldout_accuracy.png"))
    display(tables["after SFT"])
pd.DataFrame(
    {
        "before SFT": {k: before.get(k) for k in ("accuracy", "n", "ci_low", "ci_high", "mean_turns")},
        "after SFT": {k: after.get(k) for k in ("accuracy", "n", "ci_low", "ci_high", "mean_turns")},
    }
)

# %% cell 26
from venus_utils.core.io import read_jsonl
from venus_utils.sft.diagnostics import convergence_note, diagnose_rollouts, token_budget, training_budget

budget = token_budget(read_sft_parquet(data_dir / "train.parquet"), tokenizer)
train_budget = training_budget(
    result.summary(),
    len(train.rows),
    global_batch_size,
    budget["total"],
    result.train_logs,
    converged_eval_loss,
    stop_at_eval_loss=stop_at_eval_loss,
    max_steps=max_steps,
)
if note := convergence_note(train_budget):
    print("WARNING:", note)
display(pd.DataFrame({"tokens per trajectory": budget}))
pd.DataFrame({"value": train_budget})

# %% cell 27
from venus_utils.sft.diagnostics import checkpoint_curve

curve = (
    checkpoint_curve(
        stage.path("checkpoints"), val.rows[:curve_rows], max_checkpoints=curve_checkpoints, device=device
    )
    if curve_checkpoints and val.rows
    else pd.DataFrame()
)
if len(curve):
    ax = sns.lineplot(
        data=curve.melt("step", var_name="score", value_name="share"), x="step", y="share", hue="score", marker="o"
    )
    ax.set_title("expert validation turns reproduced by each checkpoint (greedy, teacher-forced)")
curve

# %% cell 28
from venus_utils.sft.diagnostics import breakdown

after_records = read_jsonl(stage.path("heldout_sft.jsonl")) if after else []
per_rollout, by_hops = diagnose_rollouts(after_records, heldout) if after_records else (None, None)
by_subworld = breakdown(per_rollout, "subworld") if per_rollout is not None else None
if per_rollout is not None:
    display(by_hops, by_subworld, breakdown(per_rollout, "template"))

# %% cell 30
if export_gguf:
    from unsloth import FastLanguageModel

    gguf_model, gguf_tok = FastLanguageModel.from_pretrained(str(result.model_dir), max_seq_length=max_length)
    gguf_model.save_pretrained_gguf(str(stage.path("gguf")), gguf_tok, quantization_method="q8_0")

# %% cell 32
from venus_utils.sft.stage import summary_figures

summary = stage.finish(
    **summary_figures(result, train, stage.dir, plateau, processes=num_processes),
    heldout_accuracy_before=before.get("accuracy"),
    heldout_accuracy_after=after.get("accuracy"),
    heldout_n=after.get("n"),
    heldout_n_before=before.get("n"),
    heldout_ci_after=[after.get("ci_low"), after.get("ci_high")],
    judge=grader.describe(),
    agent_before=before,
    agent_after=after,
    token_budget=budget,
    training_budget=train_budget,
    checkpoint_curve=curve.to_dict("records"),
    by_hops_after=by_hops.reset_index().astype(str).to_dict("records") if by_hops is not None else None,
    by_subworld_after=by_subworld.reset_index().astype(str).to_dict("records") if by_subworld is not None else None,
)
pd.DataFrame(
    {
        "value": {
            "engine": summary["engine"],
            "steps": summary["steps"],
            "loss first → last": f"{summary['loss_first']:.3f} → {summary['loss_last']:.3f}",
            "tokens/s": summary["tokens_per_s"],
            "accuracy before → after": f"{before.get('accuracy')} → {after.get('accuracy')}",
            "next notebook reads": summary["model_dir"],
        }
    }
)
