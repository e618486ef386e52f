"""The RL questions: which file they come from (:func:`rl_question_file`) and the trainer's rows (:func:`qa_rows`,
:func:`rl_rows`)."""

from __future__ import annotations

from pathlib import Path

from ..core.paths import user_path
from ..core.profiles import ConfigError
from ..core.qa_files import load_verl_qa, stratified_sample


def rl_question_file(train_qa: str | Path | None, world_dir: str | Path | None) -> Path:
    """The RL questions (a verl-schema QA parquet): ``train_qa`` when it is set, else the offline world's RL split
    ``qa/rl.parquet`` (questions that are in no SFT trajectory and not held out, like DR-Venus's separate RL set;
    the world builds it with ``rl_frac``), else its ``qa/train.parquet`` (``world_dir``: ``00_setup/world``; None for
    the web tools).

    With the web tools there is no world to fall back on: DR-Venus trains RL on REDSearcher's RL question set
    (``REDSearcher_RL_1K``), which ``train_qa`` must name.  Raises :class:`~venus_utils.core.profiles.ConfigError`
    (unset) or FileNotFoundError (not there), naming the key, before any model loads.  A relative ``train_qa`` is read
    from the working directory, else from the repository root (Papermill runs in the stage folder).
    """
    if train_qa:
        path = user_path(train_qa)  # the notebooks' rule for a user path: working directory, else repository root
        if not path.is_file():
            raise FileNotFoundError(
                f"train_qa names {train_qa}, which is not a file (looked in the working directory "
                "and in the repository root)"
            )
        return path
    if world_dir is None:
        raise ConfigError(
            "train_qa is not set, and with offline: false there is no offline world to take RL "
            "questions from: set train_qa in the 04_igpo_rl section of the profile (or --set "
            "train_qa=PATH) to the RL question parquet (verl schema, e.g. REDSearcher_RL_1K)"
        )
    rl = Path(world_dir) / "qa" / "rl.parquet"
    if rl.is_file():
        return rl
    print(f"[rl] {world_dir} has no RL question split (world_knobs rl_frac): RL trains on the SFT questions")
    return Path(world_dir) / "qa" / "train.parquet"


def qa_rows(path: str | Path, limit: int | None = None, seed: int = 0) -> list[dict]:
    """Rows for the trainer / evaluation from a verl-schema QA parquet: ``limit`` questions drawn by seed, keeping the
    file's mix of templates and hop counts where it has them (the offline world), shuffled."""
    qa = load_verl_qa(path)
    if limit is not None and limit < len(qa):
        qa = stratified_sample(qa, limit, seed=seed)
    return rl_rows(qa)


def rl_rows(qa) -> list[dict]:
    """Training rows from a QA table with ``question`` and ``answer`` (e.g. ``questions.load_verl_qa``)."""
    rows = []
    for k, r in enumerate(qa.to_dict("records") if hasattr(qa, "to_dict") else qa):
        if not str(r.get("question", "")).strip():
            raise ValueError(f"QA row {k}: empty question")
        rows.append(
            {
                "prompt": [{"role": "user", "content": str(r["question"])}],
                "question": str(r["question"]),
                "ground_truth": str(r["answer"]),
                "id": str(r.get("id", k)),
            }
        )
    return rows
