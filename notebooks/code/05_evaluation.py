# The code cells of 05_evaluation.ipynb, made by `python -m venus_utils.run.notebook_code --write`: edit the notebook.

# %% cell 1
# Parameters (Papermill overrides these from params/<profile>.yaml)
run_dir = "runs/interactive"  # where every stage of this run writes its folder
stage_dir = None  # this stage's folder; default: <run_dir>/05_evaluation
profile = "interactive"  # by hand, "cpu", "colab"... takes params/<profile>.yaml; recorded in summary.json
seed = 0  # the run's seed: world, data order, training and sampling (DR-Venus's data scripts use 42)
offline = True  # True: the offline world (local search and visit, the tiny model of 00_setup); False: web tools, API
# keys from the environment
device = "cpu"  # device of local models: cpu | cuda | auto
qa_file = None  # None: the offline world's test split; else a verl parquet / JSONL, or a benchmark file
benchmark = None  # with qa_file: BrowseComp | BrowseComp-ZH | xBench-DS-2505 | xBench-DS-2510 | GAIA (Text)
questions_per_source = 20  # questions drawn per source (None: all of them)
samples = 4  # N answers per question; Pass@K is reported for K up to N
model = "auto"  # auto: the run's best model (RL > SFT > base) | a model folder | http(s)://host:port/v1
max_turns = 16  # assistant turns per answer; the last one is forced to answer (DR-Venus: 200)
max_tokens_per_turn = 1024  # tokens per turn (DR-Venus inference: 15000)
temperature = 1.0  # sampling temperature (DR-Venus: 1.0)
system_prompt_style = "dr-venus"  # dr-venus: DR-Venus's exact prompt | compact: short variant (offline profiles; the
# same in every stage)
workers = 8  # answers generated concurrently (a local model batches them)
judge_kind = "auto"  # auto: LLM judge if JUDGE_API_BASE is set, else the offline judge | llm | offline

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

apply_profile(globals(), "05_evaluation")

# %% cell 4
import matplotlib.pyplot as plt
import pandas as pd

from venus_utils.agent import AgentConfig, load_backend, run_file_async
from venus_utils.core import qa_files
from venus_utils.core.stage import Stage, model_candidates, resolve_model
from venus_utils.eval import metrics, plots
from venus_utils.judging.judge import Judge
from venus_utils.tools import make_toolbox

stage = Stage.start("05_evaluation", run_dir, stage_dir, profile, params=globals())
world = stage.upstream("00_setup") / "world"
stage.dir

# %% cell 6
qa_all = qa_files.load_qa(qa_file, benchmark, default=world / "qa" / "test.parquet")
qa = qa_files.sample_per_source(qa_all, questions_per_source, seed=seed)
qa_files.write_questions(qa, stage.path("questions.jsonl"))
qa.groupby("source").size().rename("questions").to_frame().assign(available=qa_all.groupby("source").size())

# %% cell 8
model_label, model_path = resolve_model(model, stage.run_dir)
print(f"evaluating: {model_label} ({model_path})")
pd.DataFrame(model_candidates(stage.run_dir), columns=["model", "folder"])

# %% cell 10
from venus_utils.eval import heldout as ho
from venus_utils.eval import stats

heldout_results = ho.run_results(stage.run_dir)
heldout_summary = {label: ho.summary(s) for label, s in heldout_results.items()}
heldout_comparisons = ho.compare_to(heldout_results)  # against SFT, RL against more SFT, IGPO against GRPO
if heldout_results:
    per_q = {label: ho.per_question(s) for label, s in heldout_results.items()}
    plots.accuracy_intervals(
        {label: stats.accuracy_table(q) for label, q in per_q.items()}, path=stage.path("heldout_accuracy.png")
    )
    plt.show()
    display(
        pd.DataFrame(
            {label: {k: v[k] for k in ("accuracy", "n", "ci_low", "ci_high")} for label, v in heldout_summary.items()}
        ).T
    )
else:
    print("no held-out results in this run folder (notebooks 03 / 04 write them)")
ho.comparison_frame(heldout_comparisons)

# %% cell 12
fingerprint = dict(
    model=model_path,
    questions=qa["id"].tolist(),
    samples=samples,
    max_turns=max_turns,
    max_new_tokens=max_tokens_per_turn,
    temperature=temperature,
    offline=offline,
)
resumed = qa_files.fresh_predictions(stage.path("predictions.jsonl"), fingerprint)
backend = load_backend(model_path, device=device)
tools = make_toolbox("local" if offline else "web", world_dir=world)
cfg = AgentConfig(
    max_turns=max_turns,
    max_new_tokens=max_tokens_per_turn,
    temperature=temperature,
    system_prompt_style=system_prompt_style,
)
with stage.timed("agent"):
    run = await run_file_async(
        stage.path("questions.jsonl"),
        stage.path("predictions.jsonl"),
        backend,
        tools,
        cfg,
        samples=samples,
        workers=workers,
    )
pd.DataFrame({"value": {"resumed": resumed, **{k: v for k, v in run.items() if k != "output"}}})

# %% cell 14
judge = Judge.from_env(judge_kind)
print(judge.describe())
table = metrics.attach_answers(qa_files.load_predictions(stage.path("predictions.jsonl")), qa)
with stage.timed("judge"):
    scored = metrics.score(table, judge=judge, progress=True)
scored.drop(columns=["messages", "turn_log", "boundaries"], errors="ignore").to_parquet(stage.path("scored.parquet"))
scored[["question", "prediction", "answer", "em", "f1", "correct", "judge_method", "termination"]].head(8)

# %% cell 16
by_source = metrics.accuracy_by_source(scored)
plots.accuracy_by_source_bars(by_source, path=stage.path("accuracy_by_source.png"))
plt.show()
by_source

# %% cell 17
by_hops = metrics.accuracy_by(scored, "hops") if "hops" in scored else None
by_hops

# %% cell 19
curve = metrics.pass_at_k_curve(scored)
curve_by_source = metrics.pass_at_k_curve(scored, by="source")
plots.pass_at_k_curves(curve_by_source, hue="source", path=stage.path("pass_at_k.png"))
plt.show()
curve.set_index("k").T

# %% cell 21
plots.turns_vs_correctness(scored, path=stage.path("turns_vs_correctness.png"))
plt.show()
metrics.behaviour_vs_correctness(scored)

# %% cell 22
terminations = metrics.termination_table(scored)
terminations

# %% cell 24
set_name = benchmark or ("offline world test" if qa_file is None else str(qa_file).rsplit("/", 1)[-1])
metrics.paper_comparison(f"this run ({profile}, {model_label})", {set_name: float(scored["correct"].mean())}).round(1)

# %% cell 26
key = metrics.summarize(scored)
summary = stage.finish(
    **key,
    model=model_label,
    model_path=model_path,
    question_set=set_name,
    judge=judge.describe(),
    judge_kind=judge.kind,
    dropped=table.attrs.get("dropped", {}),
    heldout={label: {k: v for k, v in s.items() if k != "by"} for label, s in heldout_summary.items()},
    heldout_comparisons=heldout_comparisons,
)
judge.close()
pd.DataFrame(
    {
        "value": {
            "accuracy": key["accuracy"],
            "exact match": key["exact_match"],
            "F1": key["f1"],
            **{f"pass@{k}": v for k, v in key["pass_at_k"].items()},
            "questions": key["n_questions"],
            "samples": key["n_samples"],
            "judge": judge.kind,
            "artifacts": str(stage.dir),
        }
    }
)
