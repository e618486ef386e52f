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

A notebook run by hand takes a profile too: with ``profile = "cpu"`` in its parameters cell, the cell after the
install cell, ``apply_profile(globals(), "<stage>")``, sets what the pipeline would inject (see :func:`apply_profile`).
"""

from __future__ import annotations

import ast
import difflib
import importlib
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from .paths import NOTEBOOKS_DIR, PARAMS_DIR
from .validation import check_like_default

STAGE_RE = re.compile(r"^\d\d_[a-z0-9_]+$")
SECRET_RE = re.compile(
    r"(^|_)(api_?keys?|apikey|secrets?|token|password|passwd|key_id)$", re.IGNORECASE
)  # not max_new_tokens
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


def notebook_defaults(path: str | Path) -> dict[str, Any]:
    """The values of a stage notebook's ``parameters`` cell (literals only, as the convention requires)."""
    import papermill

    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{path}: notebook not found")
    out = {}
    for name, info in papermill.inspect_notebook(str(path)).items():
        try:
            out[name] = ast.literal_eval(info["default"])
        except (ValueError, SyntaxError) as exc:
            raise ConfigError(f"{path}: parameter {name} = {info['default']} is not a literal ({exc})") from None
    return out


def discover_notebooks(notebooks_dir: str | Path | None = None) -> list[Path]:
    """The stage notebooks (``NN_name.ipynb``), in reading and dependency order; copies such as
    ``00_setup.nbconvert.ipynb`` or ``01_x-Copy1.ipynb`` are not stages."""
    return sorted(p for p in Path(notebooks_dir or NOTEBOOKS_DIR).glob("[0-9][0-9]_*.ipynb") if STAGE_RE.match(p.stem))


def notebook_params(profile: Profile, stage: str, defaults: dict[str, Any]) -> dict[str, Any]:
    """The parameters a notebook receives: declared shared keys plus its whole section.

    ``defaults`` are the notebook's ``parameters`` cell (name -> default).  Raises :class:`ConfigError` when the
    section sets a key the notebook does not declare, or a value whose type differs from the default's.
    """
    section = profile.sections.get(stage, {})
    unknown = sorted(set(section) - set(defaults))
    if unknown:
        raise ConfigError(
            f"{profile.path}: section '{stage}' sets {unknown}, which notebooks/{stage}.ipynb does not declare "
            f"in its parameters cell (declared: {sorted(defaults)})"
        )
    params = {k: v for k, v in profile.shared.items() if k in defaults}
    params.update(section)
    check_values(params, defaults, f"{profile.path}: {stage}")
    return params


def check_values(values: dict[str, Any], defaults: dict[str, Any], where: str) -> None:
    """Each value must have the type of the notebook default it replaces (:func:`check_like_default`)."""
    for key, value in values.items():
        if key in defaults:
            problem = check_like_default(key, value, defaults[key])
            if problem:
                raise ConfigError(f"{where}: {problem}")


def check_shared_keys(profile: Profile, defaults_by_stage: dict[str, dict[str, Any]]) -> None:
    """Every shared key of ``profile`` must be a parameter of some notebook (``seeed: 5`` is a typo, not a no-op),
    and every section must name a notebook."""
    declared = set().union(*defaults_by_stage.values()) if defaults_by_stage else set()
    for key in sorted(set(profile.shared) - declared):
        close = difflib.get_close_matches(key, sorted(declared), n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise ConfigError(f"{profile.path}: shared key '{key}' is not a parameter of any notebook{hint}")
    unknown_sections = sorted(set(profile.sections) - set(defaults_by_stage))
    if unknown_sections:
        raise ConfigError(
            f"{profile.path}: sections {unknown_sections} match no notebook (notebooks: {sorted(defaults_by_stage)})"
        )


#: Stages whose parameters build a config dataclass; building it checks types and ranges (``RANGES``) in seconds.
STAGE_CONFIGS = {
    "03_sft_unsloth": ("venus_utils.sft.config", "SFTConfig"),
    "04_igpo_rl": ("venus_utils.rl.config", "IGPOConfig"),
}

#: Parameters that name a model, file or folder; an absolute or home-relative one must exist.
PATH_KEYS = ("base_model", "input", "tokenizer", "train_qa", "heldout_qa", "qa_file", "model")


def check_stage_values(stage: str, params: dict[str, Any], where: str) -> None:
    """Check what a stage will run with before any kernel or model starts: local paths exist, and the stage's config
    (types and ranges of every setting) builds."""
    for key in PATH_KEYS:
        value = params.get(key)
        if isinstance(value, str) and value.startswith(("/", "~")) and not Path(value).expanduser().exists():
            raise ConfigError(f"{where}: '{key}' names {value}, which does not exist")
    if stage in STAGE_CONFIGS:
        module, name = STAGE_CONFIGS[stage]
        cls = getattr(importlib.import_module(module), name)
        names = {f.name for f in fields(cls)}
        try:
            cls(**{k: v for k, v in params.items() if k in names})
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{where}: {exc}") from None


# --- profiles in notebooks run by hand -----------------------------------------------------------------------------

#: The ``profile`` of a hand run that takes no profile file: the parameters cell is used as it is.
INTERACTIVE = "interactive"
#: The parameters cell's ``run_dir``; a hand run with a profile moves it to ``runs/<profile>``, the pipeline's folder.
DEFAULT_RUN_DIR = "runs/interactive"
#: Keys that say how Papermill shows a notebook rather than what it computes (``interactive: false`` prints traces
#: instead of widgets): a hand run keeps the notebook's own value.
PIPELINE_ONLY = frozenset({"interactive"})
#: The first line of the cell Papermill injects after the ``parameters`` cell (papermill's translators write it).
PAPERMILL_HEADER = "# Parameters\n"


def run_by_papermill(namespace: dict[str, Any]) -> bool:
    """True when Papermill injected parameters into this kernel: its ``injected-parameters`` cell, which starts
    with ``# Parameters`` (the notebooks' own parameters cell starts ``# Parameters (``), is in the kernel's input
    history (``In``), as for every executed cell."""
    history = namespace.get("_ih") or namespace.get("In") or []
    return any(isinstance(source, str) and source.startswith(PAPERMILL_HEADER) for source in history)


def find_profile(name: str, params_dir: str | Path | None = None) -> Path | None:
    """``params/<name>.yaml`` (the checkout's, or the copy a wheel install carries), or None."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", str(name)):
        return None
    path = Path(params_dir or PARAMS_DIR) / f"{name}.yaml"
    return path if path.is_file() else None


def apply_profile(
    namespace: dict[str, Any], stage: str, *, params_dir: str | Path | None = None, papermill: bool | None = None
) -> dict[str, Any]:
    """Give a notebook run by hand the values of the profile its ``parameters`` cell names.

    Called right after the install cell as ``apply_profile(globals(), "03_sft_unsloth")``.  With
    ``profile = "colab"`` (any ``params/<name>.yaml``) the notebook receives what the pipeline would inject: the
    profile's shared keys that the notebook declares plus its section, checked the same way (undeclared keys, types,
    ranges, local paths), and ``run_dir``, when still ``"runs/interactive"``, becomes ``runs/<profile>``, so stages
    run by hand and by the pipeline share a run folder.  The profile's values replace the parameters cell's: to
    change one of them, assign it after this call.  Keys in :data:`PIPELINE_ONLY` keep the notebook's value.

    Nothing is applied when Papermill ran the notebook (:func:`run_by_papermill`; ``papermill`` overrides the
    detection): its injected values win.  ``profile = "interactive"`` (the default) names no file.  One line says what
    happened.  Returns the values set in ``namespace``.
    """
    name = namespace.get("profile")
    if papermill is None:
        papermill = run_by_papermill(namespace)
    if papermill:
        print(f"profile {name!r}: parameters injected by Papermill, used as they are")
        return {}
    if name in (None, "", INTERACTIVE):
        print(
            f'profile {name!r}: the parameters cell as it is (profile = "cpu", "colab"... takes the values of '
            "params/<profile>.yaml)"
        )
        return {}
    path = find_profile(name, params_dir)
    if path is None:
        known = sorted(p.stem for p in Path(params_dir or PARAMS_DIR).glob("*.yaml"))
        print(
            f"profile {name!r}: no params/{name}.yaml (profiles: {', '.join(known) or 'none found'}), so the "
            "parameters cell is used as it is; the name is recorded in summary.json"
        )
        return {}
    prof = load_profile(path)
    declared = {k: v for k, v in namespace.items() if not k.startswith("_")}
    values = notebook_params(prof, stage, declared)
    kept = sorted(PIPELINE_ONLY & set(values))
    for key in kept:
        values.pop(key)
    check_stage_values(stage, {**declared, **values}, f"{path}: {stage}")
    values["profile"] = prof.name
    if namespace.get("run_dir") == DEFAULT_RUN_DIR:
        values["run_dir"] = f"runs/{prof.name}"
    changed = {k: v for k, v in values.items() if k != "profile" and (k not in namespace or namespace[k] != v)}
    same = len(values) - 1 - len(changed)
    namespace.update(values)
    text = (
        ", ".join(f"{k}={v!r}" + (f" (was {declared[k]!r})" if k in declared else "") for k, v in changed.items())
        or "no value changed"
    )
    if same:
        text += f"; {same} more already had the profile's value"
    if kept:
        text += f"; kept the notebook's {', '.join(kept)} (a hand run)"
    print(f"profile {name!r}: {path.name} applied to {stage}: {text}")
    return values
