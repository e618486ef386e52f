"""The schema of every stage's settings, and the checks that hold a run to it before any kernel starts.

Each parameter of a notebook is described once: by the config class its stage builds from it (``WorldConfig``,
``CleanConfig``, ``ResamplePolicy``, ``SFTConfig``, ``IGPOConfig``, ``AgentConfig``, the demo's settings:
:data:`STAGE_CONFIGS`), or, for a parameter no config class holds, by a :class:`~venus_utils.core.validation.Setting`
(:data:`PARAMETERS`: type, range, allowed words).  ``tests/test_settings_validation.py`` holds every parameters cell
to one or the other.

This module sits above the stage packages and imports their config classes directly; :mod:`venus_utils.core.profiles`
(reading profile files, which the stages use) sits below them and knows no stage.  The pipeline, the stage command
lines (:mod:`venus_utils.run.cli`) and a notebook run by hand (:func:`apply_profile`) check through here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from ..agent.loop import AgentConfig
from ..core.paths import (
    CLEANING_STAGE,
    DEMO_STAGE,
    EVALUATION_STAGE,
    PARAMS_DIR,
    RESAMPLING_STAGE,
    RL_STAGE,
    SETUP_STAGE,
    SFT_STAGE,
    user_path,
)
from ..core.profiles import (
    DEFAULT_RUN_DIR,
    INTERACTIVE,
    PIPELINE_ONLY,
    RESERVED,
    ConfigError,
    Profile,
    check_shared_keys,
    find_profile,
    load_profile,
    notebook_params,
    run_by_papermill,
)
from ..core.protocol import SYSTEM_PROMPT_STYLES
from ..core.validation import (
    AT_LEAST_1,
    DEVICES,
    NON_NEGATIVE,
    POSITIVE,
    PROPER_FRACTION,
    SEED,
    Range,
    Setting,
)
from ..data import rules
from ..data.clean.batches import CleanConfig
from ..data.resample import ResamplePolicy
from ..demo import runs
from ..judging import judge
from ..modeling import model, tokenizer
from ..rl.config import RFT_ROLLOUTS, IGPOConfig
from ..sft.config import SFTConfig
from ..world import graph
from ..world.build import WorldConfig


def benchmark_names() -> tuple[str, ...]:
    """The benchmarks :mod:`venus_utils.core.qa_files` loads (it loads pandas, so only when a value is checked)."""
    from ..core.qa_files import BENCHMARK_LOADERS

    return tuple(BENCHMARK_LOADERS)


_FLAG = Setting(bool)
_COUNT = Setting(int, NON_NEGATIVE)
_AT_LEAST_ONE = Setting(int, AT_LEAST_1)
_PATH = Setting(str | None)  # a file, folder or hub name; None: the stage's default (see PATH_KEYS)
_JUDGE = Setting(str, choices=judge.KINDS)  # what Judge.from_env takes

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
        "world_size": Setting(str, choices=graph.SIZES),
        "build_assets": _FLAG,
        "world_knobs": Setting(dict),  # its keys and values: WorldConfig (STAGE_CONFIGS)
        "tiny_model_size": Setting(str, choices=model.SIZES),
        "tokenizer_vocab_size": Setting(int, Range(tokenizer.MIN_VOCAB_SIZE)),
    },
    CLEANING_STAGE: {  # and CleanConfig (STAGE_CONFIGS)
        "input": _PATH,
        "file_pattern": Setting(str),
        "current_date": Setting(str | None),
        "compat": Setting(str, choices=rules.MODES),
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
        "plateau_questions": _COUNT,
        "plateau_patience": _AT_LEAST_ONE,
        "plateau_min_gain": Setting(float, PROPER_FRACTION),
        "anneal_steps": _AT_LEAST_ONE,
        "converged_eval_loss": Setting(float | None, POSITIVE),
        "heldout_n_before": _COUNT,
        "judge_kind": _JUDGE,
        "eval_max_turns": _AT_LEAST_ONE,
        "eval_max_tokens_per_turn": _AT_LEAST_ONE,
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
        "heldout_split": Setting(str, choices=("test", "val")),
        "sft_model": _PATH,
        "control_arm": _FLAG,
        "rft_arm": _FLAG,
        "rft_rollouts": Setting(str, choices=RFT_ROLLOUTS),
        "example_questions": _AT_LEAST_ONE,
        "example_rollout": Setting(str | None),
        "example_max_tokens": _AT_LEAST_ONE,
    },
    EVALUATION_STAGE: {  # and AgentConfig (STAGE_CONFIGS)
        "qa_file": _PATH,
        "benchmark": Setting(str | None, choices=benchmark_names),
        "questions_per_source": Setting(int | None, AT_LEAST_1),
        "samples": _AT_LEAST_ONE,
        "model": Setting(str),
        "max_turns": _AT_LEAST_ONE,
        "max_tokens_per_turn": _AT_LEAST_ONE,
        "temperature": Setting(float, NON_NEGATIVE),
        "workers": _AT_LEAST_ONE,
        "judge_kind": _JUDGE,
    },
    DEMO_STAGE: {  # and DemoSettings (STAGE_CONFIGS)
        "question": Setting(str | None),
        "model": Setting(str),
        "max_turns": Setting(int, Range(1, runs.MAX_STEPS_LIMIT)),
        "max_tokens_per_turn": Setting(int, Range(*runs.MAX_NEW_TOKENS_RANGE)),
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


def _fields_of(cls: type) -> Callable[[], set[str]]:
    return lambda: {f.name for f in fields(cls)}


def _build_fields(cls: type) -> Callable[[dict[str, Any]], Any]:
    """``Cls(**the parameters named like its fields)``: what notebooks 03 and 04 do (``SFTConfig.from_params``,
    ``IGPOConfig.from_params``)."""

    def build(params: dict[str, Any]) -> Any:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in params.items() if k in names})

    return build


def _mapped(cls: type, keys: dict[str, str], **fixed: Any) -> StageConfig:
    """A config built with ``keys`` (parameter -> field) and ``fixed`` fields."""

    def build(params: dict[str, Any]) -> Any:
        return cls(**fixed, **{to: params[key] for key, to in keys.items() if key in params})

    return StageConfig(build, lambda: set(keys))


def _demo(params: dict[str, Any]) -> None:
    """Notebook 06's ``default_settings(...).validated()`` (``model`` auto looks for the run's models: none yet)."""
    runs.default_settings(
        params.get("run_dir") or DEFAULT_RUN_DIR,
        model=params.get("model", "auto"),
        offline=params.get("offline", True),
        max_steps=params.get("max_turns"),
        max_new_tokens=params.get("max_tokens_per_turn"),
        device=params.get("device", "cpu"),
        system_prompt_style=params.get("system_prompt_style", "auto"),
    ).validated()


def _arms_need_own_sft(params: dict[str, Any]) -> None:
    """The control and rejection-sampling arms continue the run's own SFT stage (its checkpoints and settings): an
    outside ``sft_model`` has neither."""
    arms = [k for k in ("control_arm", "rft_arm") if params.get(k)]
    if params.get("sft_model") and arms:
        raise ValueError(
            f"{' and '.join(arms)} continue the run's own SFT stage (its checkpoints and settings); with sft_model "
            f"{params['sft_model']} set them to false"
        )


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
            lambda p: WorldConfig.from_knobs(
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
            lambda p: CleanConfig(
                input=p.get("input") or "<00_setup/world/trajectories>",
                output_dir="<stage folder>",
                tokenizer=p.get("tokenizer") or "<00_setup/tiny_model>",
                **{k: p[k] for k in _CLEAN_KEYS if k in p},
            ),
            lambda: set(_CLEAN_KEYS),
        )
    ],
    RESAMPLING_STAGE: [
        _mapped(ResamplePolicy, {k: k for k in _RESAMPLE_KEYS}),
    ],
    SFT_STAGE: [StageConfig(_build_fields(SFTConfig), _fields_of(SFTConfig))],
    RL_STAGE: [
        StageConfig(_build_fields(IGPOConfig), _fields_of(IGPOConfig)),
        StageConfig(_arms_need_own_sft, lambda: {"sft_model", "control_arm", "rft_arm"}),
    ],
    EVALUATION_STAGE: [
        _mapped(
            AgentConfig,
            {
                "max_turns": "max_turns",
                "max_tokens_per_turn": "max_new_tokens",
                "temperature": "temperature",
                "system_prompt_style": "system_prompt_style",
            },
        )
    ],
    DEMO_STAGE: [StageConfig(_demo, lambda: {"model", "max_turns", "max_tokens_per_turn"}, label="model: ")],
}

#: Parameters that name a model, file or folder; an absolute or home-relative one must exist.
PATH_KEYS = ("base_model", "input", "tokenizer", "train_qa", "heldout_qa", "sft_model", "qa_file", "model")


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
        model = params.get("sft_model")  # a local folder whatever its form (the others may be hub names or URLs)
        if isinstance(model, str) and not (user_path(model) / "config.json").is_file():
            raise ConfigError(f"{where}: 'sft_model' names {model}, which is not a model folder (no config.json)")
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
