# The code cells of 00_setup.ipynb, made by `python -m venus_utils.run.notebook_code --write`: edit the notebook.

# %% cell 1
# Parameters (Papermill overrides these from params/<profile>.yaml)
run_dir = "runs/interactive"  # where every stage of this run writes its folder
stage_dir = None  # this stage's folder; default: <run_dir>/00_setup
profile = "interactive"  # by hand, "cpu", "colab"... takes params/<profile>.yaml; recorded in summary.json
seed = 0  # the run's seed: world, data order, training and sampling (DR-Venus's data scripts use 42)
offline = True  # True: the offline world (local search and visit, the tiny model of 00_setup); False: web tools, API
# keys from the environment
device = "cpu"  # device of local models: cpu | cuda | auto
world_size = "small"  # offline world size: small | medium
build_assets = True  # build the offline world and the tiny base model (offline profiles)
world_knobs = {}  # extra venus_utils.world.WorldConfig fields (n_worlds, search_top_k, ...)
tiny_model_size = "tiny"  # tiny Qwen3 size: micro | tiny | small (venus_utils.modeling.SIZES)
tokenizer_vocab_size = 2048  # BPE vocabulary of the tiny model's tokenizer

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

apply_profile(globals(), "00_setup")

# %% cell 4
import pandas as pd

from venus_utils.core import env
from venus_utils.core.stage import Stage

stage = Stage.start("00_setup", run_dir, stage_dir, profile, params=globals())
stage.dir

# %% cell 6
machine = env.describe_machine()
suggested = env.suggest_profile(machine)
pd.DataFrame({"value": machine}).rename_axis("property")

# %% cell 7
print(f"This notebook runs with profile '{profile}'; the profile that suits this machine is '{suggested}'.")

# %% cell 9
keys = pd.DataFrame({"set": {name: env.secret(name) is not None for name in env.SECRET_VARS}}).rename_axis("variable")
if not offline and not keys.loc[["SERPER_KEY_ID", "JINA_API_KEYS"], "set"].all():
    print("offline=False but the web-tool keys are missing: the tools will report errors to the model.")
keys

# %% cell 11
from venus_utils.core.world_store import load_pages
from venus_utils.world import build_world

world_dir = stage.path("world")
if offline and build_assets:
    with stage.timed("build_world"):
        world = build_world(world_dir, seed=seed, size=world_size, **world_knobs)
    display(
        pd.DataFrame(
            {
                "count": {
                    **world["counts"]["questions"],
                    "pages": world["counts"]["pages"],
                    "trajectories": world["trajectories"]["rows"],
                    "trajectories with a guess": world["trajectories"]["teacher"]["trajectories_guessed"],
                }
            }
        )
    )
else:
    world = None
    print("No offline world built (offline=False or build_assets=False).")

# %% cell 13
if world:
    page = load_pages(world_dir)[0]
    question = pd.read_parquet(world_dir / "qa" / "train.parquet").iloc[0]
    print(page["url"], "\n", page["text"][:400], "\n")
    print("Q:", question["prompt"][0]["content"], "\nA:", question["reward_model"]["ground_truth"])

# %% cell 15
from venus_utils.modeling import build_tiny_model, load_metadata

model_dir = stage.path("tiny_model")
if offline and build_assets:
    with stage.timed("build_tiny_model"):
        build_tiny_model(model_dir, world_dir, size=tiny_model_size, vocab_size=tokenizer_vocab_size, seed=seed)
    tiny = load_metadata(model_dir)
    display(pd.DataFrame({"value": {k: tiny[k] for k in ("size", "parameters", "vocab_size", "corpus_texts")}}))
else:
    tiny = {}

# %% cell 17
summary = stage.finish(
    machine=machine,
    suggested_profile=suggested,
    keys_set=sorted(k for k, v in keys["set"].items() if v),
    world=(
        {"dir": str(world_dir), "counts": world["counts"], "trajectories": world["trajectories"]["rows"]}
        if world
        else None
    ),
    tiny_model=({"dir": str(model_dir), **tiny} if tiny else None),
)
pd.DataFrame(
    {
        "value": {
            "profile": profile,
            "suggested profile": suggested,
            "cuda": machine["cuda_available"],
            "world questions": world["counts"]["questions"] if world else None,
            "tiny model parameters": tiny.get("parameters"),
            "artifacts": str(stage.dir),
        }
    }
)
