"""What limits a (tiny) agent: where the tokens of a trajectory go, and where its rollouts fail.

Notebook 03 shows these next to the accuracy, so that a missed target is explained by measured numbers:

- :func:`token_budget`: tokens per trajectory by part (system prompt, question, tool responses, trained assistant
  turns, chat-template overhead) with the training tokenizer; what a CPU step pays for;
- :func:`training_budget`: optimizer steps, trajectories and epochs the run managed in its time;
- :func:`diagnose_rollouts`: per held-out rollout, whether the answer was right, whether the ground truth ever
  appeared in a tool response (retrieved), whether the first search query came from the question, and the outcome
  by hop count, template or sub-world (:func:`breakdown`): "retrieved but answered wrong" is a reading / copying
  limit, "never retrieved" a search-path limit.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from ..core import protocol
from ..core.checkpoints import checkpoints
from ..judging.answers import aliases, exact_match, normalize_answer
from .data import IGNORE, _as_messages, tokenize_conversation

PARTS = ("system", "question", "tool_responses", "assistant", "template")


def token_budget(conversations: Iterable[Any], tokenizer, limit: int | None = 500) -> dict[str, float]:
    """Mean tokens per trajectory by part, over the first ``limit`` conversations (None: all).

    ``assistant`` counts the trained tokens (the loss mask of :func:`venus_utils.sft.data.tokenize_conversation`);
    ``template`` is the rest: role markers, generation prompts and newlines of the chat template.
    """
    sums, n = Counter(), 0
    for conv in conversations:
        if limit is not None and n >= limit:
            break
        messages = _as_messages(conv)
        ex = tokenize_conversation(messages, tokenizer)
        total, trained = len(ex["input_ids"]), sum(label != -100 for label in ex["labels"])
        parts = Counter()
        for i, m in enumerate(messages):
            if m["role"] == "assistant":
                continue
            key = "system" if m["role"] == "system" else "question" if i <= 1 else "tool_responses"
            parts[key] += len(tokenizer(m["content"], add_special_tokens=False)["input_ids"])
        parts["assistant"] = trained
        parts["template"] = total - sum(parts.values())
        parts["total"] = total
        sums.update(parts)
        n += 1
    if not n:
        raise ValueError("token_budget: no conversations")
    return {k: round(sums[k] / n, 1) for k in (*PARTS, "total")}


def training_budget(
    summary: dict[str, Any],
    train_rows: int,
    global_batch_size: int,
    mean_tokens: float,
    train_logs: list[dict[str, Any]] | None = None,
    converged_eval_loss: float | None = None,
    stop_at_eval_loss: float | None = None,
    max_steps: int | None = None,
) -> dict[str, Any]:
    """Steps, trajectories and epochs of an SFT run (``summary``: :meth:`SFTResult.summary`); with ``train_logs``
    also the training loss at half, three quarters and the end of the run (still falling: more steps would help).

    With ``converged_eval_loss``, ``converged`` says whether the last validation loss is at or below it (None when
    the run measured none).  On cpu-hard every run whose agent learned to copy names ended at <= 0.002, every one
    that did not at >= 0.044 (seeds 0, 10, 11): a model above the line answers almost nothing and RL from it has no
    right rollout to learn from.

    With ``stop_at_eval_loss`` (the run stops at the first validation loss at or below it; ``max_steps`` is then a
    cap), ``stopped_by_eval_loss`` says whether it stopped there before the cap."""
    steps = int(summary.get("steps") or 0)
    seen = steps * global_batch_size
    wall = float(summary.get("wall_s") or 0.0)
    trend = {}
    losses = [h["loss"] for h in train_logs or [] if "loss" in h]
    if losses:
        trend = {f"loss_at_{p}%": round(losses[min(len(losses) - 1, int(len(losses) * p / 100))], 4) for p in (50, 75)}
        trend["loss_at_end"] = round(losses[-1], 4)
    eval_loss = summary.get("eval_loss_last")
    verdict = {}
    if converged_eval_loss is not None:
        verdict = {
            "converged_eval_loss": converged_eval_loss,
            "converged": None if eval_loss is None else bool(eval_loss <= converged_eval_loss),
        }
    if stop_at_eval_loss is not None:
        verdict["stop_at_eval_loss"] = stop_at_eval_loss
        verdict["step_cap"] = max_steps
        verdict["stopped_by_eval_loss"] = bool(
            eval_loss is not None
            and eval_loss <= stop_at_eval_loss
            and (not max_steps or max_steps < 0 or steps < max_steps)
        )
    return {
        **trend,
        "eval_loss_last": None if eval_loss is None else round(float(eval_loss), 4),
        **verdict,
        "optimizer_steps": steps,
        "trajectories_seen": seen,
        "epochs": round(seen / train_rows, 2) if train_rows else None,
        "steps_per_minute": round(steps / (wall / 60), 1) if wall else None,
        "tokens_per_s": summary.get("tokens_per_s"),
        "mean_tokens_per_trajectory": round(mean_tokens, 1),
    }


def convergence_note(budget: dict[str, Any]) -> str | None:
    """A warning for a run that :func:`training_budget` found not converged (None otherwise)."""
    if budget.get("converged") is not False:
        return None
    return (
        f"SFT has not converged: validation loss {budget['eval_loss_last']} > {budget['converged_eval_loss']} "
        "(converged_eval_loss). A model above this line miscopies names and answers almost nothing, and RL from it "
        "finds no right rollout to learn from: train SFT longer (a larger max_steps with stop_at_eval_loss, or a warm "
        "restart from model/ as base_model) before RL."
    )


def _tool_text(messages: list[dict]) -> str:
    return "\n".join(
        m["content"] for m in messages[2:] if m["role"] == "user" and protocol.TOOL_RESPONSE_OPEN in m["content"]
    )


def _first_query(messages: list[dict]) -> str | None:
    for m in messages:
        if m["role"] == "assistant":
            call = protocol.parse_tool_call(m["content"])
            if call is not None and call.ok and call.name == "search":
                q = call.arguments.get("query")
                q = q[0] if isinstance(q, list) and q else q
                return q if isinstance(q, str) else None
    return None


META_COLUMNS = ("hops", "template", "subworld")  # question columns carried into the per-rollout table


def diagnose_rollouts(
    records: list[dict[str, Any]], questions: str | Path | Any | None = None, by: str = "hops"
) -> tuple[Any, Any]:
    """``(per_rollout, breakdown)`` DataFrames for agent records (``run_file`` /
    :func:`venus_utils.eval.heldout.evaluate_model` rollouts).

    ``per_rollout``: correct, answered, retrieved (any alias of the ground truth inside a tool response), first query
    taken from the question, tool calls, termination and, with ``questions`` (a world QA parquet, or a question table
    such as :func:`venus_utils.core.world_store.load_world_questions` returns), the question's hop count, template and
    sub-world.  ``breakdown``: :func:`breakdown` of it by ``by``.
    """
    import pandas as pd

    meta: dict[str, dict] = {}
    if questions is not None:
        if isinstance(questions, pd.DataFrame):
            qa = questions
        else:
            from ..core.qa_files import load_verl_qa

            qa = load_verl_qa(questions)
        cols = [c for c in META_COLUMNS if c in qa]
        meta = {str(i): dict(zip(cols, vals)) for i, *vals in qa[["id", *cols]].itertuples(index=False)}
    rows = []
    for r in records:
        messages = r.get("messages") or []
        gt = r.get("gt")
        tool_text = normalize_answer(_tool_text(messages))
        first = _first_query(messages)
        question = str(messages[1]["content"]) if len(messages) > 1 else str(r.get("question", ""))
        about = meta.get(str(r.get("index")), {})
        rows.append(
            {
                "index": str(r.get("index")),
                **{c: about.get(c) for c in META_COLUMNS},
                "correct": bool(r.get("prediction")) and exact_match(r["prediction"], gt),
                "answered": bool(r.get("prediction")),
                "retrieved": any(normalize_answer(a) and normalize_answer(a) in tool_text for a in aliases(gt)),
                "first_query_from_question": bool(first) and first.strip().lower() in question.lower(),
                "tool_calls": r.get("tool_call_count", 0),
                "termination": r.get("termination", ""),
            }
        )
    per = pd.DataFrame(rows)
    if per.empty:
        return per, per
    per["retrieved_but_wrong"] = per["retrieved"] & ~per["correct"]
    return per, breakdown(per, by)


def breakdown(per: Any, by: str = "hops") -> Any:
    """Rollouts, accuracy, answered and retrieved rates, "retrieved but wrong", first query from the question and
    tool calls per value of ``by`` (``hops``, ``template``, ``subworld``...), plus an ``all`` row."""
    keys = per[by].fillna(-1).astype(int) if by == "hops" else per[by].fillna("?").astype(str)
    table = (
        per.assign(**{by: keys})
        .groupby(by)
        .agg(
            rollouts=("correct", "size"),
            accuracy=("correct", "mean"),
            answered=("answered", "mean"),
            retrieved=("retrieved", "mean"),
            retrieved_but_wrong=("retrieved_but_wrong", "mean"),
            first_query_from_question=("first_query_from_question", "mean"),
            tool_calls=("tool_calls", "mean"),
        )
        .round(3)
    )
    table.loc["all"] = [
        len(per),
        *per[["correct", "answered", "retrieved", "retrieved_but_wrong", "first_query_from_question", "tool_calls"]]
        .mean()
        .round(3),
    ]
    return table


def _spans(labels: list[int]) -> list[tuple[int, int]]:
    """``[start, end)`` runs of trained positions: one per assistant turn."""
    spans, start = [], None
    for i, lab in enumerate(labels + [IGNORE]):
        if lab != IGNORE and start is None:
            start = i
        elif lab == IGNORE and start is not None:
            spans.append((start, i))
            start = None
    return spans


def teacher_forced_scores(model, rows: list[dict[str, Any]]) -> dict[str, float]:
    """How much of the expert's turns the model reproduces with greedy decoding, given the expert's context.

    ``token_accuracy``: trained tokens whose arg-max prediction is the expert's token; ``turn_exact``: assistant
    turns predicted entirely right (greedy decoding would write that turn word for word: names copied, call well
    formed); ``trajectory_exact``: trajectories whose every turn is right.  One forward pass per trajectory, so it is
    cheap enough to run on every checkpoint, unlike agent rollouts.
    """
    import torch

    tokens = right = turns = turns_right = trajs_right = 0
    model.eval()
    with torch.no_grad():
        for row in rows:
            ids = torch.tensor([row["input_ids"]], device=model.device)
            pred = model(input_ids=ids).logits[0, :-1].argmax(-1).tolist()
            labels = list(row["labels"])
            ok = [labels[i + 1] == pred[i] for i in range(len(labels) - 1)]  # position i predicts token i + 1
            spans = _spans(labels[1:])
            turn_ok = [all(ok[a:b]) for a, b in spans]
            tokens += sum(b - a for a, b in spans)
            right += sum(sum(ok[a:b]) for a, b in spans)
            turns += len(spans)
            turns_right += sum(turn_ok)
            trajs_right += all(turn_ok)
    return {
        "token_accuracy": round(right / max(tokens, 1), 4),
        "turn_exact": round(turns_right / max(turns, 1), 4),
        "trajectory_exact": round(trajs_right / max(len(rows), 1), 4),
    }


def checkpoint_curve(
    checkpoints_dir: str | Path, rows: list[dict[str, Any]], max_checkpoints: int | None = None, device: str = "cpu"
) -> Any:
    """:func:`teacher_forced_scores` of the ``checkpoint-<step>`` folders in ``checkpoints_dir``, one row per step.

    Whether these scores were still rising at the last checkpoint tells if more optimizer steps would help (the
    agent's accuracy follows ``trajectory_exact``: a rollout succeeds when every turn is right).  With
    ``max_checkpoints``, that many evenly spaced ones, always including the last.  Full-model checkpoints only
    (a LoRA checkpoint holds an adapter, no ``config.json``, and is skipped).
    """
    import pandas as pd
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    found = [(step, p) for step, p in checkpoints(checkpoints_dir) if (p / "config.json").exists()]
    if max_checkpoints is not None and len(found) > max_checkpoints:
        last = len(found) - 1
        picks = sorted({round(last - i * last / max(max_checkpoints - 1, 1)) for i in range(max_checkpoints)})
        found = [found[i] for i in picks]
    out = []
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # one bar for the curve, not one per checkpoint load
    try:
        for step, path in tqdm(found, desc="checkpoints", unit="ckpt"):
            model = AutoModelForCausalLM.from_pretrained(str(path), dtype="float32").to(device)
            out.append({"step": step, **teacher_forced_scores(model, rows)})
            del model
    finally:
        if bars:
            hf_logging.enable_progress_bar()
    return pd.DataFrame(out, columns=["step", "token_accuracy", "turn_exact", "trajectory_exact"])
