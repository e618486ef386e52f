"""Run a (tiny) model as the DR-Venus agent on held-out world questions and summarise what it did.

The loop, the tools and the answer matching are the project's own (``venus_utils.agent``, ``venus_utils.tools``,
``venus_utils.eval.answers``); this module only picks tiny-model settings and turns the rollouts into the
numbers notebook 03 reports: format-valid turn rate, accuracy (exact match against any alias), mean turns and
termination reasons.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from ..io import read_jsonl


def summarize_rollouts(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Accuracy, format-valid turn rate, mean turns and terminations of agent records (``run_file`` output)."""
    from ..eval.answers import exact_match

    n = len(records)
    turns = [t for r in records for t in r.get("turn_log") or []]
    correct = [bool(r.get("prediction")) and exact_match(r["prediction"], r.get("gt")) for r in records]
    return {
        "questions": n,
        "accuracy": round(sum(correct) / n, 4) if n else None,
        "answered_rate": round(sum(1 for r in records if r.get("prediction")) / n, 4) if n else None,
        "format_valid_turn_rate": round(sum(1 for t in turns if not t.get("format_error")) / len(turns), 4) if turns else None,
        "mean_turns": round(sum(r.get("turns", 0) for r in records) / n, 2) if n else None,
        "mean_tool_calls": round(sum(r.get("tool_call_count", 0) for r in records) / n, 2) if n else None,
        "terminations": dict(Counter(r.get("termination", "") for r in records)),
    }


def heldout_sample(world_dir: str | Path, n: int | None, out_path: str | Path, seed: int = 0, split: str = "test"):
    """The held-out questions notebook 03 evaluates on, written to ``out_path`` (the agent's question JSONL).

    A draw of ``n`` questions from the world's ``split`` that keeps the split's mix of templates, hop counts and
    sub-worlds (:func:`venus_utils.eval.loaders.stratified_sample`): the first rows of the split are all one
    template from sub-worlds seen in training, and would overstate what the agent can do.  Returns the table
    (with ``template``, ``hops`` and ``subworld`` for the breakdowns).
    """
    from ..eval.loaders import stratified_sample, write_questions
    from ..world import load_world_questions

    qa = stratified_sample(load_world_questions(world_dir, split), n, by=("template", "hops", "subworld"), seed=seed)
    write_questions(qa, out_path)
    return qa


def evaluate_as_agent(
    model_dir: str | Path,
    world_dir: str | Path,
    questions_path: str | Path,
    out_path: str | Path,
    limit: int | None = None,
    max_turns: int = 12,
    max_new_tokens: int = 256,
    temperature: float = 0.0,
    workers: int = 16,
    device: str = "cpu",
    system_prompt_style: str = "dr-venus",
) -> dict[str, Any]:
    """Greedy agent rollouts of ``model_dir`` with the local tools over ``world_dir``; returns :func:`summarize_rollouts`.

    ``out_path`` (JSONL, one rollout per line) is rewritten from scratch so before/after numbers never mix.
    """
    from ..agent import AgentConfig, load_backend, run_file_async
    from ..agent.runner import run_coroutine
    from ..tools.toolbox import make_toolbox

    out_path = Path(out_path)
    if out_path.exists():
        out_path.unlink()
    backend = load_backend(str(model_dir), device=device)
    tools = make_toolbox("local", world_dir)
    cfg = AgentConfig(
        max_turns=max_turns,
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        top_k=None,
        attempts=1,  # no retries: measure what the model does
        context_limit=int(getattr(backend.model.config, "max_position_embeddings", 8192)) - max_new_tokens,
        time_limit_s=900.0,
        system_prompt_style=system_prompt_style,  # the SFT data's prompt (notebook 01's cleaner)
    )
    run_coroutine(run_file_async(questions_path, out_path, backend, tools, cfg, samples=1, workers=workers, limit=limit, progress=True))
    return summarize_rollouts(read_jsonl(out_path))
