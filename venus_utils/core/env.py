"""The machine and its secrets: what hardware and optional engines are here, and API keys.

API keys are read from the environment, or from a ``.env`` file in the repository root or the working
directory (values already in the environment win).  They never travel as notebook parameters, and
:func:`redact` masks them in any text the recipe logs or saves.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import platform
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

import psutil
from dotenv import load_dotenv

from .paths import REPO_ROOT
from .perf import cpu_bf16_native, cpu_model

#: Environment variables that hold secrets (DR-Venus's names, so existing setups keep working).
SECRET_VARS = (
    "SERPER_KEY_ID",
    "JINA_API_KEYS",
    "API_KEY",
    "OPENAI_API_KEY",
    "JUDGE_API_KEY",
    "HF_TOKEN",
    "WANDB_API_KEY",
)


def load_dotenv_files(*extra: str | os.PathLike) -> list[Path]:
    """Load ``.env`` from the repository root, the working directory and ``extra`` (no override)."""
    loaded = []
    seen: set[Path] = set()
    for candidate in (REPO_ROOT / ".env", Path.cwd() / ".env", *map(Path, extra)):
        candidate = candidate.resolve()
        if candidate in seen or not candidate.is_file():
            continue
        seen.add(candidate)
        load_dotenv(candidate, override=False)
        loaded.append(candidate)
    return loaded


def secret(name: str) -> str | None:
    """The value of a secret variable, from the environment or a ``.env`` file; None when unset."""
    if name not in os.environ:
        load_dotenv_files()
    value = os.environ.get(name)
    return value or None


#: A URL in running text (up to whitespace, quotes or brackets; a final punctuation mark is the sentence's).
URL_RE = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>()\[\]{}]+(?<![.,;:!?])")
#: Query parameters whose value is a credential (``?api-key=``, ``&authToken=``, ``clientSecret=``, ``sig=``...):
#: a name ending in one of these words, whatever precedes it
SECRET_PARAM_RE = re.compile(
    r"(key|keys|token|tokens|secret|secrets|password|passwd|pwd|sig|signature|auth|authorization|credentials?|"
    r"code)$",
    re.IGNORECASE,
)


def redact_url(url: str) -> str:
    """``url`` with its credentials masked: the whole userinfo (``user:password@`` and a lone token alike ->
    ``***@``: the user part is often the token itself) and the value of every key-like query or fragment parameter
    (``?api-key=***``)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "***@" + netloc.rsplit("@", 1)[1]

    def clean(query: str) -> str:
        out = []
        for piece in query.split("&"):
            name, eq, value = piece.partition("=")
            out.append(f"{name}=***" if eq and value and SECRET_PARAM_RE.search(unquote(name)) else piece)
        return "&".join(out)

    return urlunsplit((parts.scheme, netloc, parts.path, clean(parts.query), clean(parts.fragment)))


def redact(text: str) -> str:
    """Replace the value of every known secret present in the environment by ``***``, and the credentials of
    every URL in ``text`` (:func:`redact_url`)."""
    text = URL_RE.sub(lambda m: redact_url(m.group(0)), text)
    for name in SECRET_VARS:
        value = os.environ.get(name)
        if not value:
            continue
        # JINA_API_KEYS may hold several keys separated by commas.
        for part in {value, *value.split(",")}:
            part = part.strip()
            if len(part) >= 4:
                text = text.replace(part, "***")
    return text


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def available(module: str) -> bool:
    """Whether ``module`` can be imported, without importing it (vLLM / Unsloth are heavy)."""
    return importlib.util.find_spec(module) is not None


def describe_machine() -> dict:
    """Hardware, key package versions and optional engines, as a flat dictionary for a table."""
    import torch

    info: dict = {
        "python": platform.python_version(),
        "platform": f"{platform.system()} {platform.machine()}",
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        # bf16 dot products in hardware: precision "auto" trains in bf16 here, else fp32 (so two machines that
        # differ in this train the same seed to different weights)
        "cpu_bf16_native": cpu_bf16_native(),
        "torch_threads": torch.get_num_threads(),
        "cuda_available": torch.cuda.is_available(),
        "cuda_version": torch.version.cuda,
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "gpu_count": torch.cuda.device_count() if torch.cuda.is_available() else 0,
        "unsloth_installed": available("unsloth"),
        "vllm_installed": available("vllm"),
    }
    try:
        info["ram_gb"] = round(psutil.virtual_memory().total / 2**30, 1)
    except ImportError:  # pragma: no cover - psutil is in every lock
        info["ram_gb"] = None
    if torch.cuda.is_available():
        info["gpu_memory_gb"] = round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1)
    for dist in ("torch", "transformers", "trl", "peft", "accelerate", "datasets", "papermill", "unsloth", "vllm"):
        info[f"version_{dist}"] = _version(dist)
    return info


def suggest_profile(info: dict) -> str:
    """Which profile fits the machine described by :func:`describe_machine`."""
    if not info.get("cuda_available"):
        return "cpu" if (info.get("cpu_count") or 1) >= 2 else "smoke"
    memory = info.get("gpu_memory_gb") or 0
    if memory >= 70 and info.get("vllm_installed"):
        return "paper"
    return "colab"
