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

Every value of every section, and every shared key, is checked before the first notebook starts
(:func:`check_profile`, ``python -m venus_utils.pipeline --params ... --check``): its type (like the notebook's
default), finite numbers, ranges, allowed words and nested keys (:data:`PARAMETERS`, and the configs the stages build,
:data:`STAGE_CONFIGS`), each message naming the file, the section and the key.  A key set twice in the file is refused
(:class:`UniqueKeyLoader`), naming both lines.

A notebook run by hand takes a profile too: with ``profile = "cpu"`` in its parameters cell, the cell after the
install cell, ``apply_profile(globals(), "<stage>")``, sets what the pipeline would inject (see :func:`apply_profile`).
"""

from __future__ import annotations

import ast
import difflib
import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from .paths import (
    CLEANING_STAGE,
    DEMO_STAGE,
    EVALUATION_STAGE,
    NOTEBOOKS_DIR,
    PARAMS_DIR,
    RESAMPLING_STAGE,
    RL_STAGE,
    SETUP_STAGE,
    SFT_STAGE,
)
from .protocol import SYSTEM_PROMPT_STYLES
from .validation import (
    AT_LEAST_1,
    DEVICES,
    NON_NEGATIVE,
    POSITIVE,
    PROPER_FRACTION,
    SEED,
    Range,
    Setting,
    check_like_default,
)

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


class ProfileFileError(ConfigError):
    """The profile file itself cannot be read (missing, a folder, not UTF-8 text): the command lines name their
    ``--params`` argument.  ``problem`` is the message without the path."""

    def __init__(self, path: Path, problem: str):
        self.path, self.problem = path, problem
        super().__init__(f"{path}: {problem}")


class DuplicateKeyError(ValueError):
    """A YAML mapping that sets a key twice (``key`` names it with its parents, ``lines`` are 1-based)."""

    def __init__(self, key: str, lines: tuple[int, int]):
        self.key, self.lines = key, lines
        super().__init__(f"key '{key}' appears twice, on lines {lines[0]} and {lines[1]}")


class UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a mapping setting a key twice (PyYAML keeps the last value silently: a second
    ``03_sft_unsloth:`` section would replace the first), with :class:`DuplicateKeyError`.  Keys brought in by a merge
    (``<<: *base``) may be set again: that is what a merge is for."""

    def construct_document(self, node):
        self._refuse_duplicate_keys(node, "", set())  # on the document as written, before merges are flattened
        return super().construct_document(node)

    def _refuse_duplicate_keys(self, node: yaml.Node, prefix: str, visited: set[int]) -> None:
        if id(node) in visited:  # an alias: its anchor was checked where it stands
            return
        visited.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            for item in node.value:
                self._refuse_duplicate_keys(item, prefix, visited)
            return
        if not isinstance(node, yaml.MappingNode):
            return
        lines: dict[Any, int] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                self._refuse_duplicate_keys(value_node, prefix, visited)
                continue
            key, line = self.construct_object(key_node), key_node.start_mark.line + 1
            if key in lines:
                raise DuplicateKeyError(f"{prefix}{key}", (lines[key], line))
            lines[key] = line
            self._refuse_duplicate_keys(value_node, f"{prefix}{key}.", visited)


def yaml_problem(exc: yaml.YAMLError) -> str:
    """A YAML error in one line: ``line L, column C: what is wrong`` (PyYAML's own text spans several lines)."""

    def at(mark) -> str:
        return f"line {mark.line + 1}, column {mark.column + 1}"

    mark, context, context_mark = (getattr(exc, k, None) for k in ("problem_mark", "context", "context_mark"))
    text = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    if mark is not None:
        text = f"{at(mark)}: {text}"
    if context:
        text += f" ({context}" + (f" at {at(context_mark)})" if context_mark is not None else ")")
    return " ".join(text.split())


def load_yaml(text: str) -> Any:
    """``yaml.safe_load(text)`` that refuses duplicate keys (:class:`UniqueKeyLoader`); profiles and ``--set`` values
    are read with it."""
    return yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 - UniqueKeyLoader is a SafeLoader


def read_profile_text(path: Path) -> str:
    """The text of a profile file; :class:`ProfileFileError` when there is none to read or it is not UTF-8."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ProfileFileError(path, "profile file not found") from None
    except IsADirectoryError:
        raise ProfileFileError(path, "is a folder, not a profile file") from None
    except OSError as exc:
        raise ProfileFileError(path, f"cannot be read ({exc.strerror or exc})") from None
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ProfileFileError(path, "UTF-16 text; save the profile as UTF-8")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ProfileFileError(
            path, f"not UTF-8 text (byte 0x{data[exc.start]:02x} on line {line}); save the profile as UTF-8"
        ) from None


def load_profile(path: str | Path) -> Profile:
    path = Path(path)
    text = read_profile_text(path)
    try:
        raw = load_yaml(text)
    except DuplicateKeyError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({yaml_problem(exc)})") from None
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


# --- every value checked before any kernel starts ------------------------------------------------------------------


def _attr(module: str, name: str) -> Any:
    """``module.name``, imported when a stage's values are checked rather than with this module: the stage modules
    load the stage's libraries (torch, pyarrow, transformers...) and some import this module back (``rl.questions``,
    ``eval.heldout``)."""
    return getattr(importlib.import_module(module), name)


def _lazy(module: str, name: str) -> Callable[[], Any]:
    return lambda: _attr(module, name)


_FLAG = Setting(bool)
_COUNT = Setting(int, NON_NEGATIVE)
_AT_LEAST_ONE = Setting(int, AT_LEAST_1)
_PATH = Setting(str | None)  # a file, folder or hub name; None: the stage's default (see PATH_KEYS)
_JUDGE = Setting(str, choices=_lazy("venus_utils.eval.judge", "KINDS"))  # what Judge.from_env takes

#: The notebook parameters that no config class holds, by stage ("*": in whichever notebook declares them): type,
#: range and choices, each list read from the module that uses it.  A parameter that a config class holds is checked
#: by building that class (:data:`STAGE_CONFIGS`); ``tests/test_settings_validation.py`` checks that every parameter
#: of every notebook is one or the other.
PARAMETERS: dict[str, dict[str, Setting]] = {
    "*": {
        "seed": Setting(int, SEED),
        "offline": _FLAG,
        "device": Setting(str, choices=DEVICES),
        "system_prompt_style": Setting(str, choices=SYSTEM_PROMPT_STYLES),
        "heldout_n": _COUNT,
        "interactive": _FLAG,
    },
    SETUP_STAGE: {
        "world_size": Setting(str, choices=_lazy("venus_utils.world.graph", "SIZES")),
        "build_assets": _FLAG,
        "world_knobs": Setting(dict),  # its keys and values: WorldConfig (STAGE_CONFIGS)
        "tiny_model_size": Setting(str, choices=_lazy("venus_utils.modeling.model", "SIZES")),
        "tokenizer_vocab_size": Setting(int, lambda: Range(_attr("venus_utils.modeling.tokenizer", "MIN_VOCAB_SIZE"))),
    },
    CLEANING_STAGE: {  # and CleanConfig (STAGE_CONFIGS)
        "input": _PATH,
        "file_pattern": Setting(str),
        "current_date": Setting(str | None),
        "compat": Setting(str, choices=_lazy("venus_utils.data.rules", "MODES")),
        "compare_reference": _FLAG,
        "judge": Setting(str),
        "tokenizer": _PATH,
        "max_tokens": Setting(int | None, AT_LEAST_1),
        "workers": _COUNT,
        "example_rows": _AT_LEAST_ONE,
    },
    RESAMPLING_STAGE: {  # and ResamplePolicy (STAGE_CONFIGS)
        "short_max_turns": _COUNT,
        "medium_max_turns": _COUNT,
        "short_multiplier": _COUNT,
        "medium_multiplier": _COUNT,
        "long_multiplier": _COUNT,
        "val_fraction": Setting(float, PROPER_FRACTION),
        "shuffle": _FLAG,
        "what_if_short": Setting(list, NON_NEGATIVE),
        "what_if_medium": Setting(list, NON_NEGATIVE),
        "what_if_long": Setting(list, NON_NEGATIVE),
    },
    SFT_STAGE: {  # the training settings: SFTConfig (STAGE_CONFIGS)
        "base_model": _PATH,
        "val_rows_limit": Setting(int | None, NON_NEGATIVE),
        "heldout_n_before": _COUNT,
        "judge_kind": _JUDGE,
        "eval_max_turns": _AT_LEAST_ONE,
        "eval_max_new_tokens": _AT_LEAST_ONE,
        "curve_checkpoints": _COUNT,
        "curve_rows": _COUNT,
        "export_gguf": _FLAG,
        "num_processes": _AT_LEAST_ONE,
    },
    RL_STAGE: {  # the training settings: IGPOConfig (STAGE_CONFIGS)
        "max_time_minutes": Setting(float | None, POSITIVE),
        "train_questions": Setting(int | None, AT_LEAST_1),
        "filter_samples": Setting(int | None, NON_NEGATIVE),
        "judge": _JUDGE,
        "train_qa": _PATH,
        "heldout_qa": _PATH,
        "example_questions": _AT_LEAST_ONE,
        "example_rollout": Setting(str | None),
        "example_max_tokens": _AT_LEAST_ONE,
    },
    EVALUATION_STAGE: {  # and AgentConfig (STAGE_CONFIGS)
        "qa_file": _PATH,
        "benchmark": Setting(str | None, choices=_lazy("venus_utils.questions", "BENCHMARK_LOADERS")),
        "questions_per_source": Setting(int | None, AT_LEAST_1),
        "samples": _AT_LEAST_ONE,
        "model": Setting(str),
        "max_turns": _AT_LEAST_ONE,
        "tokens_per_turn": _AT_LEAST_ONE,
        "temperature": Setting(float, NON_NEGATIVE),
        "workers": _AT_LEAST_ONE,
        "judge_kind": _JUDGE,
    },
    DEMO_STAGE: {  # and DemoSettings (STAGE_CONFIGS)
        "question": Setting(str | None),
        "model": Setting(str),
        "max_turns": Setting(int, lambda: Range(1, _attr("venus_utils.demo.runs", "MAX_STEPS_LIMIT"))),
        "tokens_per_turn": Setting(int, lambda: Range(*_attr("venus_utils.demo.runs", "MAX_NEW_TOKENS_RANGE"))),
        "replay": Setting(str | None),
        "replay_steps": Setting(int | None, NON_NEGATIVE),
    },
}


@dataclass(frozen=True)
class StageConfig:
    """A config that a stage builds from its parameters: ``build(params)`` builds it the same way (what the stage finds
    only at run time, such as its input folder, is a stand-in), so that it refuses here what it would refuse an hour
    into the run; ``keys()`` are the parameters it takes."""

    build: Callable[[dict[str, Any]], Any]
    keys: Callable[[], set[str]]
    label: str = ""  # what its messages start with, e.g. "world_knobs: "


def _fields_of(module: str, name: str) -> Callable[[], set[str]]:
    return lambda: {f.name for f in fields(_attr(module, name))}


def _build_fields(module: str, name: str) -> Callable[[dict[str, Any]], Any]:
    """``Cls(**the parameters named like its fields)``: what notebooks 03 and 04 do (``SFTConfig.from_params``,
    ``IGPOConfig.from_dict``)."""

    def build(params: dict[str, Any]) -> Any:
        cls = _attr(module, name)
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in params.items() if k in names})

    return build


def _mapped(module: str, name: str, keys: dict[str, str], **fixed: Any) -> StageConfig:
    """A config built with ``keys`` (parameter -> field) and ``fixed`` fields."""

    def build(params: dict[str, Any]) -> Any:
        return _attr(module, name)(**fixed, **{to: params[key] for key, to in keys.items() if key in params})

    return StageConfig(build, lambda: set(keys))


def _demo(params: dict[str, Any]) -> None:
    """Notebook 06's ``default_settings(...).validated()`` (``model`` auto looks for the run's models: none yet)."""
    _attr("venus_utils.demo.runs", "default_settings")(
        params.get("run_dir") or DEFAULT_RUN_DIR,
        model=params.get("model", "auto"),
        offline=params.get("offline", True),
        max_steps=params.get("max_turns"),
        max_new_tokens=params.get("tokens_per_turn"),
        device=params.get("device", "cpu"),
        system_prompt_style=params.get("system_prompt_style", "auto"),
    ).validated()


_CLEAN_KEYS = (
    "file_pattern",
    "current_date",
    "system_prompt_style",
    "compat",
    "judge",
    "max_tokens",
    "seed",
    "workers",
)
_RESAMPLE_KEYS = ("short_max_turns", "medium_max_turns", "short_multiplier", "medium_multiplier", "long_multiplier")

#: The configs each stage builds from its parameters (see :class:`StageConfig`).
STAGE_CONFIGS: dict[str, list[StageConfig]] = {
    SETUP_STAGE: [
        StageConfig(
            lambda p: _attr("venus_utils.world.build", "WorldConfig").from_knobs(
                p.get("world_knobs") or {}, seed=p.get("seed", 0), size=p.get("world_size", "small")
            ),
            lambda: {"world_knobs"},
            label="world_knobs: ",
        )
    ],
    CLEANING_STAGE: [
        # the input folder and the tokenizer default to 00_setup's outputs, found at run time (input=None,
        # tokenizer=None): stand-ins here
        StageConfig(
            lambda p: _attr("venus_utils.data.clean_core", "CleanConfig")(
                input=p.get("input") or "<00_setup/world/trajectories>",
                output_dir="<stage folder>",
                tokenizer=p.get("tokenizer") or "<00_setup/tiny_model>",
                **{k: p[k] for k in _CLEAN_KEYS if k in p},
            ),
            lambda: set(_CLEAN_KEYS),
        )
    ],
    RESAMPLING_STAGE: [
        _mapped("venus_utils.data.resample", "ResamplePolicy", {k: k for k in _RESAMPLE_KEYS}),
    ],
    SFT_STAGE: [
        StageConfig(
            _build_fields("venus_utils.sft.config", "SFTConfig"), _fields_of("venus_utils.sft.config", "SFTConfig")
        )
    ],
    RL_STAGE: [
        StageConfig(
            _build_fields("venus_utils.rl.config", "IGPOConfig"), _fields_of("venus_utils.rl.config", "IGPOConfig")
        )
    ],
    EVALUATION_STAGE: [
        _mapped(
            "venus_utils.agent.loop",
            "AgentConfig",
            {
                "max_turns": "max_turns",
                "tokens_per_turn": "max_new_tokens",
                "temperature": "temperature",
                "system_prompt_style": "system_prompt_style",
            },
        )
    ],
    DEMO_STAGE: [StageConfig(_demo, lambda: {"model", "max_turns", "tokens_per_turn"}, label="model: ")],
}

#: Parameters that name a model, file or folder; an absolute or home-relative one must exist.
PATH_KEYS = ("base_model", "input", "tokenizer", "train_qa", "heldout_qa", "qa_file", "model")


def checked_keys(stage: str) -> set[str]:
    """The parameters of ``stage`` that :func:`check_stage_values` checks beyond their type: those of
    :data:`PARAMETERS` and those the stage's configs take (:data:`STAGE_CONFIGS`)."""
    keys = set(PARAMETERS["*"]) | set(PARAMETERS.get(stage, {}))
    for config in STAGE_CONFIGS.get(stage, ()):
        keys |= config.keys()
    return keys


def check_settings(stage: str, values: dict[str, Any], where: str) -> None:
    """Each of ``values`` that :data:`PARAMETERS` describes for ``stage`` has its type, range and choices."""
    for key, value in values.items():
        setting = PARAMETERS.get(stage, {}).get(key) or PARAMETERS["*"].get(key)
        problem = setting.problem(value) if setting and key not in RESERVED else None
        if problem:
            raise ConfigError(f"{where}: '{key}' {problem}")


def check_stage_values(stage: str, params: dict[str, Any], where: str, *, paths: bool = True) -> None:
    """Check what a stage will run with before any kernel or model starts: every parameter's type, range and choices
    (:data:`PARAMETERS`), the configs the stage builds from them (:data:`STAGE_CONFIGS`), and, with ``paths``, that
    local paths exist.  ``params`` are all of the stage's parameters (notebook defaults and profile values)."""
    check_settings(stage, params, where)
    if paths:
        for key in PATH_KEYS:
            value = params.get(key)
            if isinstance(value, str) and value.startswith(("/", "~")) and not Path(value).expanduser().exists():
                raise ConfigError(f"{where}: '{key}' names {value}, which does not exist")
    for config in STAGE_CONFIGS.get(stage, ()):
        try:
            config.build(params)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{where}: {config.label}{' '.join(str(exc).split())}") from None


def check_profile(
    profile: Profile, defaults_by_stage: dict[str, dict[str, Any]], paths_for: set[str] | None = None
) -> dict[str, dict[str, Any]]:
    """Check every value of every section of ``profile`` and its shared keys, for every notebook
    (``defaults_by_stage``: stage -> its parameters cell), before any kernel starts: keys (:func:`check_shared_keys`,
    :func:`notebook_params`), types, ranges, choices and configs (:func:`check_stage_values`); local paths only for
    the stages in ``paths_for`` (the ones that will run; all when None).  Returns each stage's parameters
    (:func:`notebook_params`)."""
    check_shared_keys(profile, defaults_by_stage)
    params_by_stage = {}
    for stage, defaults in defaults_by_stage.items():
        params = notebook_params(profile, stage, defaults)
        paths = paths_for is None or stage in paths_for
        check_stage_values(stage, {**defaults, **params}, f"{profile.path}: {stage}", paths=paths)
        params_by_stage[stage] = params
    return params_by_stage


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


# --- where each value of a run came from ----------------------------------------------------------------------------
NOTEBOOK_DEFAULT = "notebook default"
THIS_RUN = "this run (--set, by hand, or a profile file outside params/)"


def settings_record(
    stage: str, profile: str | None, values: dict[str, Any], notebooks_dir: str | Path | None = None
) -> dict[str, dict[str, Any]]:
    """Each parameter of ``stage``'s notebook with the value this run used (``values``: the notebook's globals, or a
    stage CLI's parameters) and where it came from: ``params/<profile>.yaml`` (its section or its shared keys), the
    notebook's parameters cell (:data:`NOTEBOOK_DEFAULT`), or :data:`THIS_RUN`.  The rule it shows is the README's:
    a value the profile sets wins over the notebook's default, and ``--set`` or an assignment by hand over both."""
    path = Path(notebooks_dir or NOTEBOOKS_DIR) / f"{stage}.ipynb"
    defaults = notebook_defaults(path) if path.is_file() else {}
    found = find_profile(profile) if profile else None
    prof = load_profile(found) if found else None
    section, shared = (prof.sections.get(stage, {}), prof.shared) if prof else ({}, {})
    record = {}
    for key in defaults or values:
        if key not in values or key in RESERVED:
            continue
        value = values[key]
        if key in section and section[key] == value:
            source = f"params/{found.name}: {stage}"
        elif key in shared and shared[key] == value:
            source = f"params/{found.name}"
        elif key in defaults and defaults[key] == value:
            source = NOTEBOOK_DEFAULT
        else:
            source = THIS_RUN
        record[key] = {"value": value, "from": source}
    return record
