"""Profiles: one YAML file per profile in ``params/``.

Layout of a profile file::

    profile: smoke            # run folder name: runs/<profile>/
    seed: 0                   # shared keys: given to every notebook that declares them
    ...
    01_trajectory_cleaning:   # one section per notebook (file stem), its keys win over shared ones
      max_tokens: 4096

A notebook receives the shared keys it declares in its ``parameters`` cell plus its whole section; a key
in a section that the notebook does not declare is an error (it is almost always a typo).  Keys that
look like secrets (``api_key``, ``*_token``, ``password``...) are refused: API keys come from the
environment or a ``.env`` file (see :mod:`venus_utils.env`), never from parameters, so they never end up
in executed notebooks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

STAGE_RE = re.compile(r"^\d\d_[a-z0-9_]+$")
SECRET_RE = re.compile(r"(^|_)(api_?keys?|apikey|secrets?|token|password|passwd|key_id)$", re.IGNORECASE)  # not max_new_tokens
RESERVED = {"run_dir", "stage_dir", "profile"}


class ConfigError(ValueError):
    """A profile file that cannot be used; the message names the file and the key."""


@dataclass
class Profile:
    path: Path
    name: str
    shared: dict[str, Any] = field(default_factory=dict)
    sections: dict[str, dict[str, Any]] = field(default_factory=dict)

    def stage_params(self, stage: str) -> dict[str, Any]:
        """Shared keys overlaid with the stage's own section (before filtering by the notebook)."""
        merged = dict(self.shared)
        merged.update(self.sections.get(stage, {}))
        return merged


def _check_secrets(path: Path, mapping: dict[str, Any], where: str) -> None:
    for key, value in mapping.items():
        if SECRET_RE.search(str(key)):
            raise ConfigError(
                f"{path}: key '{where}{key}' looks like a secret. Put API keys in the environment or a .env file "
                "(see README, 'API keys'); parameters end up in executed notebooks."
            )
        if isinstance(value, dict):
            _check_secrets(path, value, f"{where}{key}.")


def load_profile(path: str | Path) -> Profile:
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: profile file not found") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({exc})") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, got {type(raw).__name__}")
    _check_secrets(path, raw, "")
    name = raw.pop("profile", path.stem)
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise ConfigError(f"{path}: 'profile' must be a simple name, got {name!r}")
    shared: dict[str, Any] = {}
    sections: dict[str, dict[str, Any]] = {}
    for key, value in raw.items():
        if key in RESERVED:
            raise ConfigError(f"{path}: '{key}' is set by the pipeline runner and cannot be a parameter")
        if STAGE_RE.match(str(key)):
            if value is None:
                value = {}
            if not isinstance(value, dict):
                raise ConfigError(f"{path}: section '{key}' must be a mapping, got {type(value).__name__}")
            bad = RESERVED & set(value)
            if bad:
                raise ConfigError(f"{path}: '{key}.{sorted(bad)[0]}' is set by the pipeline runner")
            sections[key] = value
        else:
            shared[key] = value
    return Profile(path=path, name=name, shared=shared, sections=sections)


def notebook_params(profile: Profile, stage: str, declared: set[str]) -> dict[str, Any]:
    """The parameters a notebook receives: declared shared keys plus its whole section.

    Raises :class:`ConfigError` when the section sets a key the notebook's ``parameters`` cell does not
    declare.
    """
    section = profile.sections.get(stage, {})
    unknown = sorted(set(section) - declared)
    if unknown:
        raise ConfigError(
            f"{profile.path}: section '{stage}' sets {unknown}, which notebooks/{stage}.ipynb does not declare "
            f"in its parameters cell (declared: {sorted(declared)})"
        )
    params = {k: v for k, v in profile.shared.items() if k in declared}
    params.update(section)
    return params
