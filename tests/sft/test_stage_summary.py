"""Notebook 03 and ``python -m venus_utils.sft train`` record the same training figures
(``sft.stage.summary_figures``): a run trained by the notebook carries the FLOPs, resume point and processes the
command line's records."""

import json
from collections import Counter
from pathlib import Path

from venus_utils.sft.data import ExampleSet
from venus_utils.sft.plateau import PLATEAU_FILE
from venus_utils.sft.stage import summary_figures
from venus_utils.sft.trainer import SFTResult

HISTORY = [
    {"step": 5, "loss": 2.0, "tokens_per_s": 100.0, "flops": 1e9},
    {"step": 10, "loss": 1.0, "tokens_per_s": 300.0, "flops": 2e9, "eval_loss": 0.5},
]


def _result(tmp_path: Path) -> SFTResult:
    return SFTResult(
        engine="trl",
        out_dir=tmp_path,
        model_dir=tmp_path / "model",
        adapter_dir=None,
        history=HISTORY,
        steps=10,
        wall_s=12.34,
        resumed_from="checkpoint-5",
    )


def test_the_figures_of_a_training_from_its_result_and_rows(tmp_path):
    rows = [{"length": 10, "n_loss": 4}, {"length": 30, "n_loss": 6}]
    figures = summary_figures(_result(tmp_path), ExampleSet(rows, 3, Counter(too_long=1)), tmp_path, None)
    assert figures["steps"] == 10 and (figures["loss_first"], figures["loss_last"]) == (2.0, 1.0)
    assert figures["eval_loss_last"] == 0.5 and figures["tokens_per_s"] == 200.0
    assert figures["train_flops"] == 3e9 and figures["train_wall_s"] == 12.3
    assert figures["resumed_from"] == "checkpoint-5" and figures["processes"] == 1
    assert figures["model_dir"] == str(tmp_path / "model") and figures["adapter_dir"] is None
    assert figures["train_rows"]["rows_kept"] == 2 and figures["train_rows"]["dropped"] == {"too_long": 1}
    assert figures["plateau"] is None
    # notebook 03 names the processes its launcher ran (they have ended when it writes its summary)
    assert summary_figures(_result(tmp_path), ExampleSet(rows), tmp_path, None, processes=4)["processes"] == 4


def test_a_plateau_run_records_the_curve_it_stopped_on(tmp_path):
    curve = [{"step": 300, "accuracy": 0.4}, {"step": 600, "accuracy": 0.5}]
    (tmp_path / PLATEAU_FILE).write_text(json.dumps({"curve": curve, "plateau_step": 600}), encoding="utf-8")
    figures = summary_figures(_result(tmp_path), ExampleSet(), tmp_path, plateau=object())
    assert figures["plateau"]["plateau_step"] == 600 and figures["plateau"]["best_accuracy"] == 0.5


def test_notebook_03_and_the_command_line_take_their_figures_from_one_place():
    root = Path(__file__).resolve().parents[2]
    for path in (root / "notebooks/code/03_sft_unsloth.py", root / "venus_utils/sft/__main__.py"):
        text = path.read_text(encoding="utf-8")
        assert "summary_figures(result, train" in text and "steps=s[" not in text, path.name
