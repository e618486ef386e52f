r"""The SFT stage from the command line, the way notebook 03 runs it, under any launcher.

    python -m venus_utils.sft train --params params/smoke.yaml [--run-dir runs/smoke] [--out DIR] [--set max_steps=4]
    accelerate launch --config_file params/accelerate/single_node_8gpu.yaml \
        -m venus_utils.sft train --params params/paper.yaml

It reads the ``03_sft_unsloth`` parameters (the lesson's values of :mod:`venus_utils.core.defaults`, as in the notebook
< profile < ``--set``), the resampled data of ``02_turn_aware_resampling`` and the base model (``base_model``, or
``00_setup/tiny_model`` offline), calls the notebook's :func:`venus_utils.sft.train_sft`, and writes the stage folder
the next stage reads (``model/``, ``checkpoints/``, ``train_history.json``, ``summary.json``). A rerun resumes from the
last checkpoint, whatever the number of processes of the run that wrote it. The before/after agent runs of the notebook
are not repeated here (notebook 05 evaluates the model).
"""

from __future__ import annotations

import argparse
import sys

from ..core.distributed import is_main_process, world_size
from ..core.paths import RESAMPLING_STAGE, SETUP_STAGE, SFT_STAGE
from ..core.stage import Stage
from ..judging.judge import Judge
from ..run.cli import parse_sets, run_cli, stage_params
from .config import SFTConfig
from .data import examples_from_parquet
from .plateau import plateau_from_params
from .stage import summary_figures
from .trainer import prepare_engine, train_sft

STAGE = SFT_STAGE


def train(args: argparse.Namespace) -> dict:
    params, profile = stage_params(args.params, STAGE, parse_sets(args.sets))
    engine = prepare_engine(params["engine"])  # Unsloth must be imported before transformers
    from transformers import AutoTokenizer

    stage = Stage.start(STAGE, args.run_dir or f"runs/{profile}", args.out, profile, params=params)
    data_dir = stage.upstream(RESAMPLING_STAGE)
    model_path = params["base_model"] or (stage.upstream(SETUP_STAGE) / "tiny_model")
    tokenizer = AutoTokenizer.from_pretrained(str(model_path))
    with stage.timed("tokenize"):
        train_set = examples_from_parquet(data_dir / "train.parquet", tokenizer, max_length=params["max_length"])
        val_set = examples_from_parquet(data_dir / "val.parquet", tokenizer, max_length=params["max_length"])
    cfg = SFTConfig.from_params(params, engine=engine)
    limit = params.get("val_rows_limit")
    world_dir = stage.upstream(SETUP_STAGE) / "world" if params["offline"] else None
    plateau = plateau_from_params(
        params, stage.dir, world_dir, Judge.from_env(params["judge_kind"]), processes=world_size()
    )
    with stage.timed("train"):
        result = train_sft(
            cfg,
            model_path,
            train_set.rows,
            stage.dir,
            val_rows=val_set.rows[:limit],
            agent_settings=dict(
                system_prompt_style=params["system_prompt_style"],
                max_turns=params["eval_max_turns"],
                max_new_tokens=params["eval_max_tokens_per_turn"],
            ),
            plateau=plateau,
        )
    summary = dict(
        summary_figures(result, train_set, stage.dir, plateau), launched_from="python -m venus_utils.sft train"
    )
    if is_main_process():
        summary = stage.finish(**summary)
        print(
            f"[sft] {summary['steps']} steps on {summary['processes']} process(es), loss {summary['loss_first']} -> "
            f"{summary['loss_last']}; model: {summary['model_dir']}"
        )
    return summary


def main(argv: list[str] | None = None) -> int:
    return run_cli("sft", "Agentic SFT (notebook 03) from the command line.", train, argv)


if __name__ == "__main__":
    sys.exit(main())
