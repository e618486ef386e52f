"""How a trained model folder says it should be run: ``venus_agent.json``.

The SFT export (:func:`venus_utils.sft.trainer.export_model`) and the RL save
(:func:`venus_utils.rl.policy.save_policy`) write, next to the weights::

    {"system_prompt_style": "compact", "max_turns": 8, "max_new_tokens": 128, "stage": "rl"}

the system prompt the model was trained with and the agent limits of its training (turns per question, new tokens
per turn).  Every consumer (``python -m venus_utils.agent ask/run``, the web demo, notebooks 05/06) resolves its
settings the same way, with :func:`resolve_agent_settings` (or :func:`agent_config`):

    a value given explicitly (a CLI option, a notebook parameter, the demo's selector)
    > the model folder's ``venus_agent.json``
    > the caller's fallback (the demo: 20 turns x 2048 tokens)
    > DR-Venus's defaults (:class:`~venus_utils.agent.loop.AgentConfig`: dr-venus prompt, 200 turns x 15,000 tokens;
      8192 tokens per turn for ``mode="rl"``).

A model without the file (a base model, an OpenAI-compatible endpoint without ``--tokenizer``) gets the fallbacks.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core import protocol
from ..core.io import read_json, write_json
from ..core.validation import AT_LEAST_1, number_argument
from .loop import AgentConfig

SETTINGS_FILE = "venus_agent.json"
KEYS = ("system_prompt_style", "max_turns", "max_new_tokens")
STAGES = ("sft", "rl")


def add_settings_options(parser: argparse.ArgumentParser, dr_venus_fallback: bool = False) -> None:
    """The command-line options of :data:`KEYS`, the same wherever a model is run (``python -m venus_utils.agent``,
    ``python -m venus_utils.eval validate``): each defaults to None, which :func:`resolve_agent_settings` resolves
    from the model folder's ``venus_agent.json`` (``dr_venus_fallback``: the help names DR-Venus's values, what a
    folder without the file gets)."""

    rl_tokens = protocol.RL_TOKENS_PER_TURN

    def default(dr_venus: str) -> str:
        return f"default: the model folder's {SETTINGS_FILE}" + (f", else {dr_venus}" if dr_venus_fallback else "")

    parser.add_argument(
        "--max-turns",
        type=number_argument(AT_LEAST_1),
        default=None,
        help=f"assistant turns per question ({default(str(protocol.MAX_TURNS))})",
    )
    parser.add_argument(
        "--max-tokens-per-turn",
        "--max-new-tokens",  # the name of the model folder's key (and of transformers' generate)
        dest="max_new_tokens",
        type=number_argument(AT_LEAST_1),
        default=None,
        help=f"new tokens per turn, the profiles' max_tokens_per_turn "
        f"({default(f'{protocol.INFERENCE_TOKENS_PER_TURN}; --mode rl: {rl_tokens}')}); --max-new-tokens is the same "
        "option",
    )
    parser.add_argument(
        "--system-prompt-style",
        default=None,
        choices=list(protocol.SYSTEM_PROMPT_STYLES),
        help=f"the system prompt the model was trained with (compact: the offline profiles; {default('dr-venus')})",
    )


def dr_venus_defaults(mode: str = "inference") -> dict[str, Any]:
    """DR-Venus's values of :data:`KEYS`: its inference demo (``AgentConfig()``) or its RL rollout
    (``AgentConfig.rl()``)."""
    if mode not in ("inference", "rl"):
        raise ValueError(f"mode must be inference or rl, got {mode!r}")
    cfg = AgentConfig.rl() if mode == "rl" else AgentConfig()
    return {key: getattr(cfg, key) for key in KEYS}


def _check(values: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The known keys of ``values``, checked; a bad value raises ValueError naming ``where`` and the key."""
    out: dict[str, Any] = {}
    for key in KEYS:
        if key not in values or values[key] is None:
            continue
        value = values[key]
        if key == "system_prompt_style":
            if value not in protocol.SYSTEM_PROMPT_STYLES:
                raise ValueError(
                    f"{where}: system_prompt_style must be one of {protocol.SYSTEM_PROMPT_STYLES}, got {value!r}"
                )
        elif isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{where}: {key} must be a whole number >= 1, got {value!r}")
        out[key] = value
    return out


@dataclass(frozen=True)
class AgentSettings:
    """The prompt style and limits to run a model with, and where each came from (``origin``: ``option`` |
    ``model`` (its ``venus_agent.json``) | ``fallback`` | ``default`` (DR-Venus's))."""

    system_prompt_style: str
    max_turns: int
    max_new_tokens: int
    stage: str | None = None  # the stage that wrote the model's file (sft | rl), None without one
    source: str | None = None  # the venus_agent.json read, None without one
    origin: dict[str, str] = field(default_factory=dict)
    mode: str = "inference"  # the loop the defaults are DR-Venus's for: inference | rl

    def values(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in KEYS}

    def config(self, **overrides: Any):
        """The :class:`~venus_utils.agent.loop.AgentConfig` of :attr:`mode` (DR-Venus's inference or RL loop) with
        these settings; ``overrides`` set any other field (temperature, time_limit_s...)."""
        values = {**self.values(), **overrides}
        return AgentConfig.rl(**values) if self.mode == "rl" else AgentConfig(**values)

    def describe(self) -> str:
        """One line for a log: ``prompt compact, max_turns 8, max_new_tokens 128 (model folder (rl))``, each value's
        origin in brackets."""
        where = {
            "option": "given",
            "model": f"model folder ({self.stage or 'venus_agent.json'})",
            "fallback": "fallback",
            "default": "DR-Venus default",
        }
        parts = [
            f"prompt {self.system_prompt_style}",
            f"max_turns {self.max_turns}",
            f"max_new_tokens {self.max_new_tokens}",
        ]
        origins = [where.get(self.origin.get(k, "default"), "?") for k in KEYS]
        if len(set(origins)) == 1:
            return f"{', '.join(parts)} ({origins[0]})"
        return ", ".join(f"{p} ({o})" for p, o in zip(parts, origins))


def settings_folder(model: str | os.PathLike | None, tokenizer: str | os.PathLike | None = None) -> Path | None:
    """The folder whose ``venus_agent.json`` describes ``model``: the model folder itself, or for an
    ``http(s)://`` endpoint its ``tokenizer`` folder (usually the served model's own folder); None for neither."""
    if model is None:
        return None
    model = str(model)
    if model.startswith(("http://", "https://")):
        return Path(tokenizer) if tokenizer else None
    return Path(model)


def check_model_agent_settings(settings: Mapping[str, Any], where: str = "agent_settings") -> dict[str, Any]:
    """``settings`` reduced to :data:`KEYS`, every one present and valid, else a ValueError naming ``where``
    (the trainers check it before training, so a typo does not wait for the export)."""
    if not isinstance(settings, Mapping):
        raise ValueError(f"{where}: expected a dict with {', '.join(KEYS)}, got {type(settings).__name__}")
    unknown = sorted(set(settings) - set(KEYS) - {"stage"})
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown} (expected {', '.join(KEYS)})")
    values = _check(settings, where)
    missing = [key for key in KEYS if key not in values]
    if missing:
        raise ValueError(f"{where}: {', '.join(missing)} missing (expected {', '.join(KEYS)})")
    return values


def write_model_agent_settings(folder: str | os.PathLike, settings: Mapping[str, Any], stage: str) -> Path:
    """Write ``folder/venus_agent.json`` (atomically): how the model in ``folder`` was trained (``settings``: the
    :data:`KEYS`; ``stage``: sft | rl)."""
    path = Path(folder) / SETTINGS_FILE
    if stage not in STAGES:
        raise ValueError(f"{path}: stage must be one of {STAGES}, got {stage!r}")
    return write_json(path, {**check_model_agent_settings(settings, str(path)), "stage": stage})


def model_agent_settings(
    folder: str | os.PathLike | None, fallback: Mapping[str, Any] | None = None, mode: str = "inference"
) -> AgentSettings:
    """What ``folder/venus_agent.json`` says, each value missing there taken from ``fallback``, else from DR-Venus's
    defaults for ``mode``.  No folder or no file: the fallbacks.  A malformed file raises ValueError naming it."""
    base = dr_venus_defaults(mode)
    values, origin = dict(base), {key: "default" for key in KEYS}
    for key, value in _check(fallback or {}, "fallback").items():
        values[key], origin[key] = value, "fallback"
    path = Path(folder) / SETTINGS_FILE if folder is not None else None
    if path is None or not path.is_file():
        return AgentSettings(**values, origin=origin, mode=mode)
    data = read_json(path)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object with {', '.join(KEYS)}")
    for key, value in _check(data, str(path)).items():
        values[key], origin[key] = value, "model"
    stage = data.get("stage")
    return AgentSettings(
        **values, stage=str(stage) if stage is not None else None, source=str(path), origin=origin, mode=mode
    )


def resolve_agent_settings(
    model: str | os.PathLike | None,
    *,
    tokenizer: str | os.PathLike | None = None,
    system_prompt_style: str | None = None,
    max_turns: int | None = None,
    max_new_tokens: int | None = None,
    fallback: Mapping[str, Any] | None = None,
    mode: str = "inference",
) -> AgentSettings:
    """The settings to run ``model`` (a model folder or an ``http(s)://`` endpoint) with: the values given here (None:
    not given) > the model's ``venus_agent.json`` (:func:`settings_folder`) > ``fallback`` > DR-Venus's defaults."""
    found = model_agent_settings(settings_folder(model, tokenizer), fallback, mode)
    given = _check(
        {"system_prompt_style": system_prompt_style, "max_turns": max_turns, "max_new_tokens": max_new_tokens},
        "the settings given",
    )
    if not given:
        return found
    origin = {**found.origin, **{key: "option" for key in given}}
    return AgentSettings(
        **{**found.values(), **given}, stage=found.stage, source=found.source, origin=origin, mode=mode
    )


def agent_config(
    model: str | os.PathLike | None,
    mode: str = "inference",
    *,
    tokenizer: str | os.PathLike | None = None,
    system_prompt_style: str | None = None,
    max_turns: int | None = None,
    max_new_tokens: int | None = None,
    fallback: Mapping[str, Any] | None = None,
    **overrides: Any,
):
    """An :class:`~venus_utils.agent.loop.AgentConfig` (``mode``: DR-Venus's inference or RL loop) for ``model``, its
    prompt style and limits from :func:`resolve_agent_settings`; ``overrides`` set any other field (temperature...)."""
    return resolve_agent_settings(
        model,
        tokenizer=tokenizer,
        system_prompt_style=system_prompt_style,
        max_turns=max_turns,
        max_new_tokens=max_new_tokens,
        fallback=fallback,
        mode=mode,
    ).config(**overrides)
