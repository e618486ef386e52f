# The code cells of 02_turn_aware_resampling.ipynb, made by `python -m venus_utils.run.notebook_code --write`: edit the notebook.

# %% cell 1
# Parameters (Papermill overrides these from params/<profile>.yaml)
run_dir = "runs/interactive"  # where every stage of this run writes its folder
stage_dir = None  # this stage's folder; default: <run_dir>/02_turn_aware_resampling
profile = "interactive"  # by hand, "cpu", "colab"... takes params/<profile>.yaml; recorded in summary.json
seed = 0  # the run's seed: world, data order, training and sampling (DR-Venus's data scripts use 42)
short_max_turns = 50  # at most this many turns: short bucket (DR-Venus: 50)
medium_max_turns = 100  # at most this many turns: medium bucket, more: long bucket (DR-Venus: 100)
short_multiplier = 1  # copies of a short trajectory (DR-Venus: 1)
medium_multiplier = 2  # copies of a medium trajectory (DR-Venus: 2)
long_multiplier = 5  # copies of a long trajectory (DR-Venus: 5)
val_fraction = 0.1  # share of questions held out in val.parquet (DR-Venus ships no split: 0 would mean none)
shuffle = True  # shuffle the training rows (DR-Venus's trainer reads them in file order)
what_if_short = [10, 25, 50]  # what-if: short-bucket thresholds to compare
what_if_medium = [50, 100, 150]  # what-if: medium-bucket thresholds to compare
what_if_long = [1, 3, 5, 8]  # what-if: long-bucket multipliers to compare
interactive = False  # True: ipywidgets sliders for the what-if (JupyterLab); False: the grid above

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

apply_profile(globals(), "02_turn_aware_resampling")

# %% cell 4
import pandas as pd
import seaborn as sns

from venus_utils.core.stage import Stage
from venus_utils.data import curation_report, resample

stage = Stage.start("02_turn_aware_resampling", run_dir, stage_dir, profile, params=globals())
kept = curation_report.load_kept(stage.upstream("01_trajectory_cleaning"))
policy = resample.ResamplePolicy(
    short_max_turns, medium_max_turns, short_multiplier, medium_multiplier, long_multiplier
)
before = curation_report.trajectory_table(kept, policy)
after = curation_report.resampled_view(before)
print(f"{len(before)} kept trajectories -> {len(after)} training rows with {policy}")

# %% cell 6
curation_report.plot_distributions(before, after, "turns", "assistant turns");

# %% cell 8
curation_report.plot_distributions(before, after, "length", curation_report.length_label(before))
before[["turns", "length", "search", "visit"]].describe().round(1)

# %% cell 10
positions = curation_report.tool_positions(kept)
ax = sns.barplot(data=positions, x="position", y="share", hue="tool")
ax.set_xlabel("position in the trajectory (share of its turns)");

# %% cell 12
shares = curation_report.bucket_token_shares(before, policy)
shares.style.format({"token share before": "{:.1%}", "token share after": "{:.1%}"})

# %% cell 14
if interactive:
    import ipywidgets as widgets

    def show(
        short_max=short_max_turns,
        medium_max=medium_max_turns,
        medium_mult=medium_multiplier,
        long_mult=long_multiplier,
    ):
        display(curation_report.what_if(before, [short_max], [medium_max], [long_mult], [medium_mult]))

    widgets.interact(show, short_max=(5, 200, 5), medium_max=(10, 400, 10), medium_mult=(1, 10), long_mult=(1, 20))
else:
    grid = curation_report.what_if(before, what_if_short, what_if_medium, what_if_long, [medium_multiplier])
    pivot = grid.pivot_table(
        index=["short_max_turns", "medium_max_turns"], columns="long_multiplier", values="token share of >short"
    )
    sns.heatmap(pivot, annot=True, fmt=".0%", cmap="viridis").set_title(
        "token share of trajectories > short threshold"
    )
    display(grid.head(12))

# %% cell 16
with stage.timed("write"):
    split = resample.write_train_val(kept, stage.dir, policy, val_fraction, seed=seed, shuffle=shuffle)
split

# %% cell 18
summary = stage.finish(
    rows_in=len(before),
    rows_resampled=len(after),
    rows_train=split["train_rows"],
    rows_val=split["val_rows"],
    policy=policy.as_dict(),
    bucket_rows=shares["trajectories"].astype(int).to_dict(),
    token_share_after=shares["token share after"].round(4).to_dict(),
    length_unit=curation_report.length_label(before),
)
pd.DataFrame(
    {
        "value": {
            "kept trajectories": len(before),
            "train rows": split["train_rows"],
            "val rows": split["val_rows"],
            "artifacts": str(stage.dir),
        }
    }
)
