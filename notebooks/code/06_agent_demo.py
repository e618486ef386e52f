# The code cells of 06_agent_demo.ipynb, made by `python -m venus_utils.run.notebook_code --write`: edit the notebook.

# %% cell 1
# Parameters (Papermill overrides these from params/<profile>.yaml)
run_dir = "runs/interactive"  # where every stage of this run writes its folder
stage_dir = None  # this stage's folder; default: <run_dir>/06_agent_demo
profile = "interactive"  # by hand, "cpu", "colab"... takes params/<profile>.yaml; recorded in summary.json
seed = 0  # the run's seed: world, data order, training and sampling (DR-Venus's data scripts use 42)
offline = True  # True: the offline world (local search and visit, the tiny model of 00_setup); False: web tools, API
# keys from the environment
device = "cpu"  # device of local models: cpu | cuda | auto
question = None  # None: the first question of the offline world's test split
model = "auto"  # auto: the run's best model (RL > SFT > base) | a model folder | http(s)://host:port/v1
max_turns = 8  # assistant turns; the last one is forced to answer (DR-Venus: 200)
max_tokens_per_turn = 512  # tokens per turn (DR-Venus inference: 15000)
system_prompt_style = "dr-venus"  # dr-venus: DR-Venus's exact prompt | compact: short variant (offline profiles; the
# same in every stage)
interactive = True  # True: live HTML step cards (ipywidgets); False: a printed trace (Papermill)
replay = "auto"  # a saved trace to replay: auto (a shared DR-Venus RL rollout if present) | a path | None
replay_steps = 6  # cards of the replay to show (the question and the final answer are always shown)

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

apply_profile(globals(), "06_agent_demo")

# %% cell 4
import threading

import pandas as pd

from venus_utils.core.io import write_jsonl
from venus_utils.core.stage import Stage
from venus_utils.demo import LiveCards, pick_question
from venus_utils.demo import replay as replay_trace
from venus_utils.demo.runs import agent_run_fn, default_settings

stage = Stage.start("06_agent_demo", run_dir, stage_dir, profile, params=globals())
stage.dir

# %% cell 6
stage.upstream("00_setup")
settings = default_settings(
    stage.run_dir,
    model=model,
    offline=offline,
    max_steps=max_turns,
    max_new_tokens=max_tokens_per_turn,
    device=device,
    system_prompt_style=system_prompt_style,
).validated()
pd.DataFrame(
    {
        "value": {
            "model": settings.extra.get("model_label", settings.model),
            "model folder / endpoint": settings.checkpoint or settings.endpoint,
            "tools": settings.tools,
            "world": settings.world_dir if offline else "-",
            "max turns": settings.max_steps,
            "tokens per turn": settings.max_new_tokens,
        }
    }
)

# %% cell 8
question, gold = pick_question(stage.run_dir, question)
view = LiveCards(interactive=interactive)
with stage.timed("ask"):
    result = agent_run_fn(question, settings, view.update, threading.Event())
steps = view.finish(result["messages"])

# %% cell 10
write_jsonl(stage.path("trace.jsonl"), [result])
pd.DataFrame(
    {
        "value": {
            "answer": result["prediction"],
            "ground truth": gold,
            "termination": result["termination"],
            "turns": result["turns"],
            "tool calls": result["tool_call_count"],
            "parse errors": result["parse_error_count"],
            "seconds": result["elapsed_seconds"],
        }
    }
)

# %% cell 12
replayed = replay_trace(replay, interactive, max_steps=replay_steps)

# %% cell 14
summary = stage.finish(
    question=question,
    prediction=result["prediction"],
    termination=result["termination"],
    turns=result["turns"],
    tool_calls=result["tool_call_count"],
    model=settings.extra.get("model_label", settings.model),
    replayed=replayed,
)
pd.DataFrame(
    {
        "value": {
            "termination": result["termination"],
            "turns": result["turns"],
            "cards": len(steps),
            "replayed": (replayed or {}).get("file"),
            "artifacts": str(stage.dir),
        }
    }
)
