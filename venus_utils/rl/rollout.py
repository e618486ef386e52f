"""Rollouts for IGPO: the project's agent loop (``venus_utils.agent``) turned into :class:`Episode` records.

The agent loop keeps the exact token ids the policy saw and sampled, the assistant mask and the turn boundaries,
so an episode is a direct copy of its :class:`~venus_utils.agent.Rollout`.  (DR-Venus re-renders the messages with
the chat template for training; the Qwen3 template then drops the reasoning of turns before a plain user message,
such as a forced-answer prompt, so the trained tokens would differ from the sampled ones.)
Generation runs on the training weights: transformers ``generate`` on CPU, TRL's colocated vLLM engine
(``IGPOConfig.use_vllm`` on a GPU; its weights are synced by the trainer before each rollout), or a separate vLLM
server through its OpenAI API (``vllm_mode='server'``: ``trl vllm-serve``, weights pushed every step, or a plain
``vllm serve``, weights fixed).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from ..agent import AgentConfig, OpenAIBackend, TransformersBackend, run_many
from ..core.aio import run_coroutine
from ..judging.judge import judged_score
from .config import IGPOConfig
from .info_gain import batched_fits
from .rewards import Episode


def rl_agent_config(cfg: IGPOConfig, **overrides):
    """DR-Venus's RL rollout settings (``AgentConfig.rl``) with this run's sizes."""
    values = dict(
        max_turns=cfg.max_turns,
        max_new_tokens=cfg.max_tokens_per_turn,
        temperature=cfg.temperature,
        top_p=cfg.top_p,
        top_k=cfg.top_k if cfg.top_k and cfg.top_k > 0 else None,
        context_limit=cfg.max_context_tokens - cfg.max_tokens_per_turn,
        system_prompt_style=cfg.system_prompt_style,
    )
    values.update(overrides)
    return AgentConfig.rl(**values)


def episode_from_rollout(r, ground_truth: str, group: Any = None) -> Episode:
    """An agent :class:`~venus_utils.agent.Rollout` (made with a tokenizer) as an :class:`Episode`."""
    if r.prompt_ids is None or r.completion_ids is None or r.completion_mask is None:
        raise ValueError("the rollout has no token ids: run the agent with a backend that has a tokenizer")
    n = r.turns  # a turn whose generation failed records a boundary but no assistant message
    turns = [m["content"] for m in r.messages if m["role"] == "assistant"]
    if len(turns) != n or len(r.boundaries) < n:
        raise ValueError(
            f"rollout of {r.question[:60]!r}: {n} turns, {len(turns)} assistant messages and "
            f"{len(r.boundaries)} boundaries do not agree"
        )
    return Episode(
        question=r.question,
        ground_truth=str(ground_truth),
        prompt_ids=list(r.prompt_ids),
        completion_ids=list(r.completion_ids),
        assistant_mask=list(r.completion_mask),
        boundaries=[b["context_len"] for b in r.boundaries[:n]],
        tool_names=[b.get("tool") for b in r.boundaries[:n]],
        turns=turns,
        prediction=r.prediction,
        group=group,
        termination=r.termination,
        extra={"parse_error_count": r.parse_error_count, "tool_call_count": r.tool_call_count},
    )


def _vllm_backend(llm, model, tokenizer, max_batch: int):
    """A TransformersBackend whose ``generate_ids`` runs on a vLLM engine (imported lazily, GPU only)."""

    class VLLMBackend(TransformersBackend):
        def generate_ids(self, prompts, sampling):
            from vllm import SamplingParams

            stop_ids = sorted(self.chat.eos_ids)
            params = SamplingParams(
                max_tokens=sampling.max_new_tokens,
                temperature=sampling.temperature,
                top_p=sampling.top_p,
                top_k=sampling.top_k or -1,
                stop_token_ids=stop_ids,
                skip_special_tokens=False,
            )
            outs = llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False)
            result = []
            for out in outs:
                ids = list(out.outputs[0].token_ids)
                cut = next((i for i, t in enumerate(ids) if t in stop_ids), None)
                result.append(ids[: cut + 1] if cut is not None else ids)
            return result

    return VLLMBackend(model, tokenizer, max_batch=max_batch, seed=None, fast=False)


@dataclass(frozen=True)
class VLLMServer:
    """An OpenAI-compatible vLLM server that rollouts call (``IGPOConfig.vllm_mode='server'``).

    Requests go to ``/v1/completions`` with the exact context token ids as the prompt and
    ``return_tokens_as_token_ids``, so the sampled ids come back exactly (``agent.OpenAIBackend``, completions
    mode); a server that returns text only is re-tokenised, which is not exact (the backend documents it).
    """

    base_url: str  # http://host:port (with or without /v1)
    model: str = "model"  # the served model name

    @property
    def api_url(self) -> str:
        url = self.base_url.rstrip("/")
        return url if url.endswith("/v1") else url + "/v1"

    @classmethod
    def connect(cls, base_url: str) -> VLLMServer:
        """The server at ``base_url`` with the model name it serves (``GET /v1/models``; "model" if it has none)."""
        server = cls(base_url)
        try:
            data = httpx.get(server.api_url + "/models", timeout=30).json()["data"]
            return cls(base_url, str(data[0]["id"])) if data else server
        except Exception:  # noqa: BLE001 - a stand-in server without /v1/models: DR-Venus serves the name "model"
            return server

    def backend(self, tokenizer):
        return OpenAIBackend(self.api_url, model=self.model, tokenizer=tokenizer, mode="completions")


def make_agent_rollout(tools, agent_cfg=None, fast: bool = True):
    """A ``rollout_fn(model, tokenizer, rows, cfg, llm=None)`` running the agent loop with ``tools`` (a Toolbox).

    With ``llm`` (a vLLM ``LLM``: the trainer passes TRL's colocated engine when ``use_vllm`` is on) the turns
    are generated by vLLM; with a :class:`VLLMServer` by that server's OpenAI API (server mode); otherwise on
    ``model`` by the local backend (its cached decoder, or transformers ``generate`` with ``fast=False``).
    ``rollout_fn.timing`` holds the last call's generation seconds and tokens; ``rollout_fn.decoder`` the local
    backend's cached decoder (one across calls on the same model), whose kept keys and values the information gain
    reads instead of encoding the episodes again (:func:`venus_utils.rl.info_gain.boundary_values_batched`).
    """

    def rollout(model, tokenizer, rows: Sequence[dict], cfg: IGPOConfig, llm=None) -> list[Episode]:
        acfg = agent_cfg or rl_agent_config(cfg)
        rollout.decoder = None if llm is not None else rollout.decoder
        if isinstance(llm, VLLMServer):
            backend = llm.backend(tokenizer)
        elif llm is not None:
            backend = _vllm_backend(llm, model, tokenizer, max_batch=len(rows))
        else:
            backend = TransformersBackend(
                model, tokenizer, max_batch=len(rows), seed=None, fast=fast, decoder=rollout.decoder
            )
            rollout.decoder = backend.decoder
        rollouts = run_coroutine(run_many([r["question"] for r in rows], backend, tools, acfg, concurrency=len(rows)))
        rollout.timing = dict(getattr(backend, "timing", None) or {})  # the trainer's generation phase
        episodes = [episode_from_rollout(r, row["ground_truth"], row.get("id")) for r, row in zip(rollouts, rows)]
        longest = max((len(ep.prompt_ids) + len(ep.completion_ids) for ep in episodes), default=0)
        if rollout.decoder is not None and not batched_fits(model, longest):
            rollout.decoder.clear()  # the information gain scores these one at a time: nothing would read the caches
        return episodes

    rollout.timing, rollout.decoder = {}, None
    return rollout


def evaluate_accuracy(
    model, tokenizer, rows: Sequence[dict], tools, judge, cfg: IGPOConfig, *, samples: int = 1, agent_cfg=None
) -> dict:
    """Judged accuracy of ``model`` on ``rows`` (held-out questions), ``samples`` rollouts each."""
    rollout = make_agent_rollout(tools, agent_cfg)
    was_training = model.training
    model.eval()
    try:
        import torch

        with torch.no_grad():
            episodes = rollout(model, tokenizer, [r for r in rows for _ in range(samples)], cfg)
    finally:
        model.train(was_training)
    scores = judge(
        [e.question for e in episodes], [e.prediction or "" for e in episodes], [e.ground_truth for e in episodes]
    )
    correct = [judged_score(s) for s in scores]
    judged = [c for c in correct if not math.isnan(c)]  # NaN: the judge failed, not a wrong answer
    return {
        "accuracy": sum(judged) / max(len(judged), 1),
        "n": len(judged),
        "judge_errors": len(correct) - len(judged),
        "turns": sum(e.num_turns for e in episodes) / max(len(episodes), 1),
        "answered": sum(e.prediction is not None for e in episodes) / max(len(episodes), 1),
        "predictions": [
            {
                "question": e.question,
                "ground_truth": e.ground_truth,
                "prediction": e.prediction,
                "correct": c,
                "turns": e.num_turns,
                "termination": e.termination,
            }
            for e, c in zip(episodes, correct)
        ],
    }


def unsolved_questions(
    model,
    tokenizer,
    rows: Sequence[dict],
    tools,
    judge,
    cfg: IGPOConfig,
    *,
    samples: int = 2,
    agent_cfg=None,
    processes: int = 1,
) -> tuple[list[dict], dict]:
    """The rows the policy does not already solve in every one of ``samples`` rollouts, and the counts.

    A group whose rollouts are all right carries no outcome signal (its outcome advantages are all zero), so RL
    questions the SFT policy always solves mostly waste rollouts; DR-Venus trains RL on a separate, harder
    question set for the same reason.  ``counts``: candidates, always solved, sometimes solved, never solved, kept.
    The filter samples, so it runs in one process (``processes`` > 1 is refused: each would keep other questions);
    a pool the policy always solves is an error.
    """
    if processes > 1:
        raise ValueError(
            "filter_samples runs in one process: run notebook 04 or the command without accelerate "
            "launch, or set filter_samples to 0 for a multi-process run"
        )
    result = evaluate_accuracy(model, tokenizer, rows, tools, judge, cfg, samples=samples, agent_cfg=agent_cfg)
    right: dict[str, list[float]] = {}
    for p in result["predictions"]:
        right.setdefault(p["question"], []).append(p["correct"])
    # a question with a sample the judge failed on is not known to be always solved: it is kept, counted unjudged
    rate = {q: sum(v) / len(v) for q, v in right.items() if not any(math.isnan(x) for x in v)}
    kept = [r for r in rows if rate.get(r["question"], 0.0) < 1.0]
    counts = {
        "candidates": len(rows),
        "always_solved": sum(1 for v in rate.values() if v == 1.0),
        "sometimes_solved": sum(1 for v in rate.values() if 0.0 < v < 1.0),
        "never_solved": sum(1 for v in rate.values() if v == 0.0),
        "unjudged": sum(1 for r in rows if r["question"] not in rate),
        "kept": len(kept),
    }
    if not kept:
        raise ValueError(
            f"the SFT policy solves all {counts['candidates']} RL questions every time: raise "
            "train_questions or set filter_samples to 0"
        )
    return kept, counts
