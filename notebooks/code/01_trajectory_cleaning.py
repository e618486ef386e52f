# The code cells of 01_trajectory_cleaning.ipynb, made by `python -m venus_utils.run.notebook_code --write`: edit the notebook.

# %% cell 1
# Parameters (Papermill overrides these from params/<profile>.yaml)
run_dir = "runs/interactive"  # where every stage of this run writes its folder
stage_dir = None  # this stage's folder; default: <run_dir>/01_trajectory_cleaning
profile = "interactive"  # by hand, "cpu", "colab"... takes params/<profile>.yaml; recorded in summary.json
seed = 0  # the run's seed: world, data order, training and sampling (DR-Venus's data scripts use 42)
input = None  # raw trajectories (file or folder); None: <run_dir>/00_setup/world/trajectories
file_pattern = "train-*.parquet"  # files taken from a folder (DR-Venus's shard pattern)
current_date = "2026-03-01"  # date line of the system prompt (DR-Venus's data and prompts use 2026-03-01)
system_prompt_style = "dr-venus"  # dr-venus: DR-Venus's exact prompt | compact: short variant (offline profiles; the
# same in every stage)
compat = "strict"  # strict: defects of DR-Venus's cleaner fixed + correctness/length filters | reference: DR-Venus's
# exact output
compare_reference = True  # also run the reference mode, to compare drop reasons side by side
judge = "auto"  # auto: LLM judge if JUDGE_API_BASE / API_BASE is set, else offline | llm | offline | none
tokenizer = None  # token accounting: tokenizer folder or cached hub id; None: <run_dir>/00_setup/tiny_model if present
max_tokens = None  # strict: drop trajectories longer than this many tokens (reason too_long); needs a tokenizer
workers = 0  # cleaner processes; 0: one per CPU core
example_rows = 300  # raw rows scanned for the before/after examples

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

apply_profile(globals(), "01_trajectory_cleaning")

# %% cell 4
from pathlib import Path

import pandas as pd
from IPython.display import HTML, display

from venus_utils.core.paths import project_root
from venus_utils.core.stage import Stage
from venus_utils.data import clean, curation_report, sources, tokens

stage = Stage.start("01_trajectory_cleaning", run_dir, stage_dir, profile, params=globals())
if input is None:  # the offline research world's raw trajectories
    input = stage.upstream("00_setup") / "world" / "trajectories"
input = (
    Path(input) if Path(input).is_absolute() else project_root() / input
)  # relative: to the repository (Colab: /content)
if tokenizer is None and (stage.run_dir / "00_setup" / "tiny_model").exists():
    tokenizer = stage.run_dir / "00_setup" / "tiny_model"
tokenizer, token_note = tokens.check_tokenizer(tokenizer)
if max_tokens and tokenizer is None:
    max_tokens = None
print(f"input: {input}\n{token_note}")

# %% cell 6
files = sources.list_input_files(input, file_pattern)
raw_rows = sources.read_rows(files, example_rows)
print(f"{len(files)} file(s), {sources.count_rows(files)} rows; first row:")
first = raw_rows[0]
pd.DataFrame(
    [
        {"role": m.get("role"), "characters": len(m.get("content") or ""), "starts": (m.get("content") or "")[:90]}
        for m in first["messages"][:8]
    ]
)

# %% cell 8
examples = curation_report.rule_examples(raw_rows)
display(HTML(curation_report.side_by_side_html(examples)))

# %% cell 10
config = clean.CleanConfig(
    input=input,
    output_dir=stage.dir,
    file_pattern=file_pattern,
    current_date=current_date,
    system_prompt_style=system_prompt_style,
    compat=compat,
    judge=judge,
    tokenizer=tokenizer,
    max_tokens=max_tokens,
    seed=seed,
    workers=workers,
    keep_intermediate=True,
    keep_metadata=True,
)
with stage.timed("clean"):
    stats = clean.run_clean(config)
runs = {compat: stats}
if compare_reference and compat != "reference":
    with stage.timed("clean_reference"):
        runs["reference"] = clean.run_clean(
            clean.CleanConfig(
                input=input,
                output_dir=stage.path("reference"),
                file_pattern=file_pattern,
                current_date=current_date,
                compat="reference",
                seed=seed,
                workers=workers,
                progress=False,
            )
        )
assert stats["rows"]["source"] == stats["rows"]["kept"] + sum(stats["drop_reasons"].values())

# %% cell 12
curation_report.drop_reason_table(runs)

# %% cell 13
fixes = pd.Series(stats.get("strict_fixes", {}), name="rows or blocks changed", dtype="int64")
fixes.to_frame().assign(defect=[clean.rules.STRICT_FIXES[k] for k in fixes.index]) if len(
    fixes
) else "reference mode: no fixes"

# %% cell 15
run_funnel = curation_report.funnel(stats)
curation_report.plot_funnel(run_funnel, label=f"this run ({compat})")
run_funnel

# %% cell 17
judgements = curation_report.read_judgements(stage.path("judgements.jsonl"))
crosstab, agreement, disagreements = curation_report.judge_agreement(judgements)
print(stats.get("judge", {}).get("notice", "reference mode: no correctness filter"))
print(f"agreement with exact match: {agreement:.1%}" if agreement is not None else "no judgements")
display(crosstab)
disagreements.head(10)

# %% cell 19
summary = stage.finish(
    mode=compat,
    rows_source=stats["rows"]["source"],
    rows_valid=stats["rows"]["stage2_valid"],
    rows_kept=stats["rows"]["kept"],
    rows_resampled=stats["rows"]["final_resampled"],
    drop_reasons=stats["drop_reasons"],
    judge=stats.get("judge", {}).get("notice"),
    judge_agreement_with_em=agreement,
    tokens=token_note,
    cleaner_timings_s=stats["timings_s"],
)
pd.DataFrame(
    {
        "value": {
            "rows source": stats["rows"]["source"],
            "rows kept": stats["rows"]["kept"],
            "rows resampled": stats["rows"]["final_resampled"],
            "judge": summary["judge"],
            "tokens": token_note,
            "artifacts": str(stage.dir),
        }
    }
)
