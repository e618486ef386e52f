"""The DR-Venus agent loop and its model backends.

- :func:`run_agent` (async) / :func:`run_many`: rollouts -> :class:`Rollout`;
- :class:`AgentConfig` (``AgentConfig()`` = inference demo, ``AgentConfig.rl()`` = RL rollout);
- backends: :class:`TransformersBackend` (any HF causal LM, batched), :class:`OpenAIBackend` (vLLM & co.),
  :class:`ScriptedBackend` (replays), :func:`load_backend`;
- :func:`run_file`: a question file -> resumable predictions JSONL;
- :mod:`.settings`: how a model folder says it runs (``venus_agent.json``: prompt style, max turns, tokens per turn),
  :func:`agent_config` / :func:`resolve_agent_settings` (given > the model's file > DR-Venus's defaults).

CLI: ``python -m venus_utils.agent ask "question" --model DIR --world DIR`` and
``python -m venus_utils.agent run --input q.jsonl --output preds.jsonl --model DIR --world DIR``.
"""

from .backends import Generation, OpenAIBackend, Sampling, ScriptedBackend, TransformersBackend, load_backend
from .conversation import ChatTokens, Conversation
from .file_runs import question_rows, run_file, run_file_async
from .loop import AgentConfig, Rollout, prediction_of, run_agent, run_many
from .settings import AgentSettings, agent_config, model_agent_settings, resolve_agent_settings

__all__ = [
    "AgentConfig",
    "AgentSettings",
    "ChatTokens",
    "Conversation",
    "Generation",
    "OpenAIBackend",
    "Rollout",
    "Sampling",
    "ScriptedBackend",
    "TransformersBackend",
    "agent_config",
    "load_backend",
    "question_rows",
    "model_agent_settings",
    "prediction_of",
    "resolve_agent_settings",
    "run_agent",
    "run_file",
    "run_file_async",
    "run_many",
]
